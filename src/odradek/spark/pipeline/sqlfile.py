"""SQL pipeline files: Spark SQL plus two statements of our own.

    CREATE SOURCE name OPTIONS (subscribe 'topic', startingOffsets 'earliest');
    CREATE FLOW name AS INSERT INTO TOPIC out [OPTIONS (...)] SELECT ...;

Every other statement (CREATE TEMPORARY VIEW ..., CREATE TEMPORARY FUNCTION ...) goes to
`spark.sql` unchanged. `${name}` is replaced by a pipeline variable before parsing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from odradek.spark.pipeline.model import Flow, Pipeline, PipelineError, Source, Statement

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_SOURCE = re.compile(rf"CREATE\s+SOURCE\s+({_IDENT})\s+OPTIONS\s*(\(.*\))\s*$", re.I | re.S)
_FLOW = re.compile(rf"CREATE\s+FLOW\s+({_IDENT})\s+AS\s+INSERT\s+INTO\s+TOPIC\s+"
                   rf"('(?:[^']|'')*'|[A-Za-z0-9_.\-]+)\s*(.*)$", re.I | re.S)
_OPTIONS_HEAD = re.compile(r"OPTIONS\s*\(", re.I)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")
_OPTION_TOKEN = re.compile(r"""\s*(?:'((?:[^']|'')*)'|"((?:[^"]|"")*)"|([A-Za-z0-9_.\-+:]+)|(=)|(,))""")


def split_statements(text: str) -> list[tuple[int, str]]:
    """Statements separated by `;`, comments removed, each with the line it starts on."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    line, start = 1, 1
    i, n = 0, len(text)
    quote: str | None = None
    while i < n:
        c = text[i]
        if quote:
            buf.append(c)
            if c == quote:
                quote = None
        elif c in "'\"`":
            quote = c
            buf.append(c)
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            line += text.count("\n", i, end)
            i = end
            continue
        elif c == ";":
            stmt = "".join(buf).strip()
            if stmt:
                out.append((start, stmt))
            buf = []
        else:
            buf.append(c)
        if c == "\n":
            line += 1
        if not "".join(buf).strip():
            start = line
        i += 1
    if quote:
        raise PipelineError(f"line {start}: unterminated {quote} quote")
    stmt = "".join(buf).strip()
    if stmt:
        out.append((start, stmt))
    return out


def substitute(text: str, variables: Mapping[str, str], where: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in variables:
            raise PipelineError(f"{where}: unknown variable '${{{m.group(1)}}}' (set it with --var "
                                f"{m.group(1)}=VALUE)")
        return variables[m.group(1)]
    return _VAR.sub(one, text)


def parse_options(text: str, where: str) -> dict[str, str]:
    """`(key 'value', key = 'value', 'key' 'value')`, the parentheses included."""
    body = text.strip()
    if not (body.startswith("(") and body.endswith(")")):
        raise PipelineError(f"{where}: OPTIONS must be a parenthesised list: OPTIONS (key 'value', ...)")
    tokens: list[tuple[str, str]] = []
    pos, inner = 0, body[1:-1]
    while pos < len(inner):
        if not inner[pos:].strip():
            break
        m = _OPTION_TOKEN.match(inner, pos)
        if m is None:
            raise PipelineError(f"{where}: cannot read OPTIONS near {inner[pos:pos + 20].strip()!r}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("str", m.group(1).replace("''", "'")))
        elif m.group(2) is not None:
            tokens.append(("str", m.group(2).replace('""', '"')))
        elif m.group(3) is not None:
            tokens.append(("word", m.group(3)))
        else:
            tokens.append(("punct", m.group(4) or m.group(5)))
    options: dict[str, str] = {}
    for entry in _split_on_commas(tokens, where):
        parts = [t for t in entry if t != ("punct", "=")]
        if len(parts) != 2 or parts[0][0] == "punct" or parts[1][0] == "punct":
            raise PipelineError(f"{where}: each option must be `key 'value'`, got "
                                f"{' '.join(v for _, v in entry) or 'nothing'}")
        key, value = parts[0][1], parts[1][1]
        if key in options:
            raise PipelineError(f"{where}: option '{key}' given twice")
        options[key] = value
    return options


def _split_on_commas(tokens: list[tuple[str, str]], where: str) -> list[list[tuple[str, str]]]:
    entries: list[list[tuple[str, str]]] = [[]]
    for tok in tokens:
        if tok == ("punct", ","):
            entries.append([])
        else:
            entries[-1].append(tok)
    if entries == [[]]:
        return []
    if any(not e for e in entries):
        raise PipelineError(f"{where}: empty entry in OPTIONS (a stray comma?)")
    return entries


def _flow(match: re.Match[str], where: str) -> Flow:
    name, topic, rest = match.group(1), match.group(2), match.group(3).strip()
    if topic.startswith("'"):
        topic = topic[1:-1].replace("''", "'")
    options: dict[str, str] = {}
    head = _OPTIONS_HEAD.match(rest)
    if head:
        depth, end = 0, -1
        for j in range(head.end() - 1, len(rest)):
            if rest[j] == "(":
                depth += 1
            elif rest[j] == ")":
                depth -= 1
                if depth == 0:
                    end = j
                    break
        if end < 0:
            raise PipelineError(f"{where}: flow '{name}': OPTIONS ( is not closed")
        options = parse_options(rest[head.end() - 1:end + 1], where)
        rest = rest[end + 1:].strip()
    if not rest:
        raise PipelineError(f"{where}: flow '{name}': a query must follow INSERT INTO TOPIC {topic}")
    if "topic" in {k.lower() for k in options}:
        raise PipelineError(f"{where}: flow '{name}': the topic is named after INSERT INTO TOPIC, "
                            f"not as an option")
    mode = next((v for k, v in options.items() if k.lower() == "outputmode"), "append")
    return Flow(name=name, where=where, options={**options, "topic": topic}, output_mode=mode, sql=rest)


def load_sql(path: Path, pipeline: Pipeline, variables: Mapping[str, str]) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        statements = split_statements(text)
    except PipelineError as e:
        raise PipelineError(f"{path}: {e}") from None
    for line, raw in statements:
        where = f"{path}:{line}"
        stmt = substitute(raw, variables, where)
        if m := _SOURCE.match(stmt):
            pipeline.add(Source(m.group(1), parse_options(m.group(2), where), where))
        elif m := _FLOW.match(stmt):
            pipeline.add(_flow(m, where))
        elif re.match(r"CREATE\s+(SOURCE|FLOW)\b", stmt, re.I):
            raise PipelineError(f"{where}: cannot read this statement; the forms are "
                                f"CREATE SOURCE name OPTIONS (...) and "
                                f"CREATE FLOW name AS INSERT INTO TOPIC topic [OPTIONS (...)] SELECT ...")
        elif re.match(r"INSERT\s+INTO\s+TOPIC\b", stmt, re.I):
            raise PipelineError(f"{where}: a write to a topic needs a flow name: "
                                f"CREATE FLOW name AS INSERT INTO TOPIC ...")
        else:
            pipeline.add(Statement(stmt, where))
