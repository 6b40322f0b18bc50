"""ssl.principal.mapping.rules: a TLS client's distinguished name -> its principal name.

Kafka's syntax (SslPrincipalMapper): a list of rules separated by commas or newlines, each
`DEFAULT` (the DN unchanged) or `RULE:pattern/replacement/` with an optional `L` or `U`
after the last slash (lower- or upper-case the result). Rules are tried in order; the first
whose pattern matches the whole DN gives the name, its replacement written with Java's `$1`
group references. A DN no rule matches has no principal: the connection is refused, as
Kafka fails the authentication.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["NoMatchingRule", "PrincipalMapper", "Rule"]

# one rule and the separator after it; the pattern and replacement may escape `/` with `\`
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,\n]*"
                   r"|([^,\n]*?))\s*(?:[,\n]\s*|$)")
_JAVA_GROUP = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """A DN no rule of ssl.principal.mapping.rules maps."""


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


def _java_replacement(text: str) -> str:
    # Java's `$1` -> Python's `\g<1>`; a backslash escapes the next character in both
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
            continue
        m = _JAVA_GROUP.match(text, i)
        if m:
            out.append(f"\\g<{m.group(1)}>")
            i = m.end()
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def parse_rules(text: str) -> list[Rule]:
    """Parse the config value; ValueError names the bad rule."""
    rules: list[Rule] = []
    pos = 0
    text = text.strip()
    if not text:
        return [Rule(None)]
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
        pos = m.end()
        default, pattern, replacement, case, other = m.groups()
        if default:
            rules.append(Rule(None))
        elif pattern is not None:
            try:
                compiled = re.compile(pattern.replace("\\/", "/"))
            except re.error as exc:
                raise ValueError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: "
                                 f"{exc}") from None
            rules.append(Rule(compiled, _java_replacement(replacement.replace("\\/", "/")),
                              case))
        elif other:
            raise ValueError(f"ssl.principal.mapping.rules: invalid rule {other!r}")
    return rules


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = parse_rules(rules)

    def name_of(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules applies to {dn}")
