"""Issue 13: no package imports one above it in DESIGN.md's table, and no import cycle is left
in src/ or bench/. Read from the import statements (ast), nothing is imported.

Every import counts, also one inside a function: a lazy import keeps `--help` fast, it does
not make a circle between two modules go away. Imports under `if TYPE_CHECKING:` count for
the layering (a lower package should not even name a higher one's types) but not for cycles
(they never run).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[2]

# DESIGN.md's table: what each package of src/odradek/ may import. A package not listed here
# must be added (the test says so) rather than pass unchecked.
_BELOW_BROKER = {"protocol", "storage", "network", "metadata", "replication", "coordinator",
                 "security"}
_SERVICE = {"client", "protocol", "service"}
ALLOWED: dict[str, set[str] | None] = {
    "protocol": set(),
    "storage": {"protocol"},
    "network": {"protocol"},
    "metadata": {"protocol", "storage", "network"},
    "replication": {"protocol", "storage", "metadata", "network"},
    "coordinator": {"protocol", "storage", "metadata", "replication", "network"},
    "security": {"protocol", "metadata"},
    # what the services share: serving HTTP (service/http.py)
    "service": set(),
    "broker": _BELOW_BROKER,
    # the native client's TLS and SASL are network's client side (one ClientSecurity)
    "client": {"protocol", "network"},
    "registry": _SERVICE,
    "connect": _SERVICE,
    "spark": _SERVICE,
    "console": _SERVICE,
    "perf": _SERVICE,
    "cli": None,  # anything
}
# bench/ may import any package but the command line (it uses what the CLI uses, from where
# it lives).
BENCH_FORBIDDEN = {"cli"}

# Cycles found on main when this test was written, in code other helpers own; the lead
# resolves them. Each entry is one strongly connected component, as sorted module names.
# An entry here that no longer exists fails the test too, so the list only shrinks.
KNOWN_CYCLES: set[tuple[str, ...]] = set()


# tests/ import the CLI only to test it: tests/unit/cli/, and the in-process runs of the app.
TESTS_OF_THE_CLI = ("tests.unit.cli.", "tests.integration.test_cli_help")
class Import(NamedTuple):
    source: str  # importing module, dotted
    target: str  # imported module, dotted (the most specific module that exists)
    line: int
    runtime: bool  # False under `if TYPE_CHECKING:`


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_under(base: Path, top: str) -> dict[str, Path]:
    """Dotted name -> file of every module in the package (or folder) `top` below `base`."""
    return {module_name(p, base): p for p in sorted((base / top).rglob("*.py"))}


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, runtime: bool = True) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _type_checking(child.test):
            for sub in child.body:
                yield sub, False
                yield from _walk(sub, False)
            for sub in child.orelse:
                yield sub, runtime
                yield from _walk(sub, runtime)
            continue
        yield child, runtime
        yield from _walk(child, runtime)


def imports_of(name: str, path: Path, known: set[str]) -> list[Import]:
    """Every import in the module `name` (file `path`) of a module in `known`."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[Import] = []

    def add(target: str, node: ast.AST, runtime: bool) -> None:
        # The most specific known module: `from a.b import c` names a.b.c when that is a
        # module, else something defined in a.b.
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append(Import(name, target, getattr(node, "lineno", 0), runtime))

    for node, runtime in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node, runtime)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                add(f"{mod}.{alias.name}", node, runtime)
    return out


def all_imports(roots: list[tuple[Path, str]]) -> list[Import]:
    files: dict[str, Path] = {}
    for base, top in roots:
        files.update(modules_under(base, top))
    known = set(files)
    return [imp for name, path in files.items() for imp in imports_of(name, path, known)]


def layer_violations(imports: list[Import], top: str = "odradek") -> list[str]:
    """Imports of a package that DESIGN.md's table does not allow (and unknown packages)."""
    bad = []
    for imp in imports:
        src, dst = imp.source.split("."), imp.target.split(".")
        if dst[0] != top or len(dst) < 2:
            continue
        where = f"{imp.source}:{imp.line} imports {imp.target}"
        if src[0] == "bench":
            if dst[1] in BENCH_FORBIDDEN:
                bad.append(f"{where} (bench/ may not import odradek.{dst[1]})")
            continue
        if src[0] != top or len(src) < 2 or src[1] == dst[1]:
            continue
        if src[1] not in ALLOWED:
            bad.append(f"{where} (package {src[1]} is not in DESIGN.md's table: add it)")
            continue
        allowed = ALLOWED[src[1]]
        if allowed is not None and dst[1] not in allowed:
            bad.append(f"{where} ({src[1]} may import only {sorted(allowed) or 'nothing'})")
    return bad


def cycles(imports: list[Import]) -> list[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan, iterative), over
    the imports that run."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.runtime:
            graph.setdefault(imp.source, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[tuple[str, ...]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(tuple(sorted(comp)))
    return sorted(found)


def _project_imports() -> list[Import]:
    return all_imports([(ROOT / "src", "odradek"), (ROOT, "bench")])


# ---------------------------------------------------------------------------- the project


def test_no_package_imports_one_above_it() -> None:
    bad = layer_violations(_project_imports())
    assert not bad, "\n".join(bad)


def test_no_import_cycle_in_src_or_bench() -> None:
    found = set(cycles(_project_imports()))
    new = sorted(found - KNOWN_CYCLES)
    assert not new, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in new)
    gone = sorted(KNOWN_CYCLES - found)
    assert not gone, "resolved, drop from KNOWN_CYCLES:\n" + "\n".join(map(str, gone))


def cli_importers_in_tests(root: Path) -> set[str]:
    """Test modules importing odradek.cli that are not tests of the CLI."""
    files = modules_under(root, "tests")
    known = set(files) | set(modules_under(root / "src", "odradek"))
    return {imp.source for name, path in files.items()
            for imp in imports_of(name, path, known)
            if (imp.target + ".").startswith("odradek.cli.") and not imp.source.startswith(TESTS_OF_THE_CLI)}


def test_tests_do_not_import_the_cli() -> None:
    found = cli_importers_in_tests(ROOT)
    assert not found, sorted(found)


def test_the_checker_sees_every_package() -> None:
    """The walk reaches the packages the rules are about (a wrong ROOT would pass vacuously)."""
    imports = _project_imports()
    sources = {imp.source.split(".")[1] for imp in imports
               if imp.source.startswith("odradek.") and imp.source.count(".") >= 1}
    assert {"protocol", "storage", "broker", "client", "perf", "cli"} <= sources
    assert any(imp.source.startswith("bench.") for imp in imports)


# ---------------------------------------------------------------------------- the checker


def _tree(tmp: Path, files: dict[str, str]) -> list[Import]:
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return all_imports([(tmp / "src", "odradek"), (tmp, "bench")])


def test_checker_catches_an_upward_import(tmp_path: Path) -> None:
    imports = _tree(tmp_path, {
        "src/odradek/__init__.py": "",
        "src/odradek/protocol/__init__.py": "",
        "src/odradek/protocol/wire.py": "def f():\n    from odradek.client import conn\n",
        "src/odradek/client/__init__.py": "",
        "src/odradek/client/conn.py": "from odradek.protocol import wire\n",
        "src/odradek/client/tool.py": "from ..perf import results\n",
        "src/odradek/perf/__init__.py": "",
        "src/odradek/perf/results.py": "import odradek.client.conn\n",
        "src/odradek/cli/__init__.py": "",
        "src/odradek/cli/bench.py": "from odradek.perf import results\nfrom odradek import storage\n",
        "bench/__init__.py": "",
        "bench/run.py": "from odradek.cli.bench import ensure_topic\nfrom odradek.perf import results\n",
    })
    bad = layer_violations(imports)
    assert any("odradek.protocol.wire:2 imports odradek.client.conn" in b for b in bad), bad
    assert any("odradek.client.tool:1 imports odradek.perf.results" in b for b in bad), bad
    assert any("bench.run:1 imports odradek.cli" in b for b in bad), bad
    # client -> protocol, perf -> client, bench -> perf, cli -> anything are fine
    assert len(bad) == 3, bad


def test_checker_reports_an_unknown_package(tmp_path: Path) -> None:
    imports = _tree(tmp_path, {
        "src/odradek/__init__.py": "",
        "src/odradek/protocol/__init__.py": "",
        "src/odradek/gadgets/__init__.py": "from odradek import protocol\n",
        "bench/__init__.py": "",
    })
    assert ["not in DESIGN.md's table" in b for b in layer_violations(imports)] == [True]


def test_checker_finds_cycles_through_lazy_imports_only(tmp_path: Path) -> None:
    imports = _tree(tmp_path, {
        "src/odradek/__init__.py": "",
        "src/odradek/perf/__init__.py": "",
        "src/odradek/perf/a.py": "from odradek.perf.b import g\n",
        "src/odradek/perf/b.py": "def g():\n    from odradek.perf import c\n",
        "src/odradek/perf/c.py": "from . import a\n",
        "src/odradek/perf/d.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from odradek.perf import e\n"),
        "src/odradek/perf/e.py": "import odradek.perf.d\n",
        "bench/__init__.py": "",
    })
    assert cycles(imports) == [("odradek.perf.a", "odradek.perf.b", "odradek.perf.c")]
