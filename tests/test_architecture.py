"""The package's shape, checked from its source: every module small enough to read in one
sitting, no module reaching into another's private names, no import cycle, and a module map
(docs/modules.md) that says what the code says.

The checks read the files with ``ast``; nothing is imported, so a broken module is reported,
not crashed on. Each checker is a plain function of source text, tested below on synthetic
sources that break it (a planted cycle, a planted private import, an oversized module), so
a check that stopped finding anything would fail too.

Import edges come in three kinds: ``module`` (run when the module is imported: top level,
class bodies, top-level ``if``/``try``), ``lazy`` (inside a function: runs on first call) and
``typing`` (under ``if TYPE_CHECKING:``, never run; left out of the graph). A cycle among
module-level edges fails (one module would see the other half-initialised); so does a cycle
closed by a lazy edge, since a function-level import of a ragbook module only hides a cycle
(functions import heavy libraries, never ragbook modules). Loading by name
(``importlib.import_module("ragbook.x")``, as ``models`` does for its loaders) is not an
import statement and is not checked here.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ragbook"
MAX_LINES = 450


# -- the checkers ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted module names) at ``line``; ``kind`` is
    module, lazy or typing; ``names`` are the names a ``from`` import takes."""

    source: str
    target: str
    line: int
    kind: str
    names: tuple[str, ...] = ()


def module_name(path: Path, root: Path = ROOT) -> str:
    """``ragbook/readers/sentence.py`` -> ``ragbook.readers.sentence``; ``__init__.py`` is
    its package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_sources(package: Path = PACKAGE, root: Path = ROOT) -> dict[str, tuple[Path, str]]:
    """Every module of the package: dotted name -> (file, source text)."""
    return {module_name(p, root): (p, p.read_text(encoding="utf-8"))
            for p in sorted(package.rglob("*.py")) if "__pycache__" not in p.parts}


def absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name a ``from`` import in ``module`` refers to (``level`` leading dots)."""
    if level == 0:
        return target or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_edges(module: str, source: str, known: set[str], is_package: bool = False,
                 prefix: str = "ragbook") -> list[Edge]:
    """The imports of ``module`` (its ``source``) that name a module of the package, each
    as an ``Edge`` to the module it loads: ``from . import models`` -> ``ragbook.models``,
    ``from .readers import Span`` -> ``ragbook.readers``."""
    edges: list[Edge] = []

    def add(target: str, line: int, kind: str, names: tuple[str, ...] = ()) -> None:
        parts = target.split(".")
        for n in range(len(parts), 0, -1):  # the longest prefix that is a module
            if ".".join(parts[:n]) in known:
                edges.append(Edge(module, ".".join(parts[:n]), line, kind, names))
                return

    def visit(node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == prefix:
                    add(alias.name, node.lineno, kind)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(module, is_package, node.level, node.module)
            if base.split(".")[0] != prefix:
                return
            names = tuple(a.name for a in node.names)
            submodules = [n for n in names if f"{base}.{n}" in known]
            for n in submodules:                # from . import models: the module itself
                add(f"{base}.{n}", node.lineno, kind, (n,))
            rest = tuple(n for n in names if n not in submodules)
            if rest or not submodules:
                add(base, node.lineno, kind, rest)
        for child in ast.iter_child_nodes(node):
            if isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body:
                visit(child, "typing")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, "typing" if kind == "typing" else "lazy")
            else:
                visit(child, kind)

    visit(ast.parse(source), "module")
    return edges


def private_imports(module: str, source: str, known: set[str], is_package: bool = False,
                    prefix: str = "ragbook") -> list[str]:
    """``line: name from module`` for each ``_name`` that ``module`` imports from another
    module of the package (``from .grounding import _CITE``, ``from ragbook.x import _y``,
    ``import ragbook._x``). A module's own private names are its business; another module's
    are an API nobody promised."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = absolute(module, is_package, node.level, node.module)
            if base.split(".")[0] != prefix or base == module:
                continue
            found += [f"{node.lineno}: {a.name} from {base}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names
                      if a.name.split(".")[0] == prefix
                      and any(p.startswith("_") and not p.startswith("__")
                              for p in a.name.split(".")[1:])]
    return found


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle per strongly connected group of modules (Tarjan), as the edges that close
    it, each group once; [] when the graph is acyclic."""
    graph: dict[str, list[Edge]] = {}
    for e in edges:
        graph.setdefault(e.source, []).append(e)
        graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                strongconnect(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            self_loop = any(e.target == v for e in graph[v])
            if len(group) > 1 or self_loop:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return [_cycle_in(set(group), graph) for group in sorted(groups)]


def _cycle_in(group: set[str], graph: dict[str, list[Edge]]) -> list[Edge]:
    """A shortest cycle through the first module of ``group`` (breadth-first)."""
    start = min(group)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in sorted(graph[v], key=lambda e: (e.target, e.line)):
                if e.target == start:
                    return paths[v] + [e]
                if e.target in group and e.target not in paths:
                    paths[e.target] = paths[v] + [e]
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")  # a group always has one


def describe_cycle(cycle: list[Edge]) -> str:
    """``a -> b (a.py:3, module) -> a (b.py:9, lazy)``."""
    return cycle[0].source + "".join(
        f" -> {e.target} ({e.source}:{e.line}, {e.kind})" for e in cycle)


def oversized(sources: dict[str, tuple[Path, str]], limit: int = MAX_LINES) -> list[str]:
    """``path: N lines`` for each module longer than ``limit`` lines."""
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
            f"{len(text.splitlines())} lines"
            for path, text in sources.values() if len(text.splitlines()) > limit]


def package_edges(sources: dict[str, tuple[Path, str]]) -> list[Edge]:
    """Every import edge between the package's modules."""
    known = set(sources)
    return [e for mod, (path, text) in sources.items()
            for e in import_edges(mod, text, known, path.name == "__init__.py")]


# -- the package ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sources():
    return package_sources()


def test_no_module_is_longer_than_the_limit(sources):
    too_long = oversized(sources)
    assert not too_long, (f"modules over {MAX_LINES} lines (split each at a seam: one idea a "
                          f"file):\n  " + "\n  ".join(too_long))


def test_no_module_imports_another_modules_private_names(sources):
    known = set(sources)
    found = [f"{path.relative_to(ROOT)}:{hit}" for mod, (path, text) in sources.items()
             for hit in private_imports(mod, text, known, path.name == "__init__.py")]
    assert not found, ("private names imported across modules (make the name public where it "
                       "is defined, or keep its use inside its module):\n  " + "\n  ".join(found))


def test_the_module_level_import_graph_is_acyclic(sources):
    edges = [e for e in package_edges(sources) if e.kind == "module"]
    cycles = find_cycles(edges)
    assert not cycles, "import cycles at module level:\n  " + "\n  ".join(
        describe_cycle(c) for c in cycles)


def test_no_import_cycle_is_closed_inside_a_function(sources):
    edges = [e for e in package_edges(sources) if e.kind in ("module", "lazy")]
    cycles = [c for c in find_cycles(edges) if any(e.kind == "lazy" for e in c)]
    assert not cycles, ("import cycles closed by an import inside a function (lazy edges "
                        "hide a cycle, they do not remove it):\n  "
                        + "\n  ".join(describe_cycle(c) for c in cycles))


#: The composers: they use the stages, and no stage uses them (nothing imports upwards).
COMPOSERS = ("ragbook", "ragbook.__main__", "ragbook.pipeline", "ragbook.cli",
             "ragbook.commands", "ragbook.serving", "ragbook.widgets", "ragbook.grading")


def upward(edges: list[Edge], composers: tuple[str, ...] = COMPOSERS) -> list[Edge]:
    """Edges from a stage module up to a composer (``composers``: a module or a package)."""
    def composer(m: str) -> bool:
        return any(m == c or (c != "ragbook" and m.startswith(c + ".")) for c in composers)
    return [e for e in edges if composer(e.target) and not composer(e.source)]


def test_nothing_imports_upwards(sources):
    found = upward(package_edges(sources))
    assert not found, ("stage modules importing a composer (pipeline, cli, serving, widgets, "
                       "grading, the package itself): move what they need down a layer\n  "
                       + "\n  ".join(f"{e.source}:{e.line} -> {e.target}" for e in found))
    planted = [Edge("ragbook.dense", "ragbook.pipeline", 3, "module"),
               Edge("ragbook.cli", "ragbook.pipeline", 4, "module")]
    assert upward(planted) == planted[:1]          # the checker can fail


def test_the_graph_sees_the_package():
    """Guards the checkers against silently finding nothing: the real package has edges of
    every expected shape."""
    edges = package_edges(package_sources())
    pairs = {(e.source, e.target) for e in edges}
    assert ("ragbook.pipeline", "ragbook.injection") in pairs        # from .injection import
    assert ("ragbook.readers.grounding", "ragbook.injection") in pairs  # from ..injection
    assert ("ragbook.embeddings", "ragbook.models") in pairs        # from . import models
    assert len(edges) > 100


# -- the checkers fail when they should -----------------------------------------------------
KNOWN = {"ragbook", "ragbook.a", "ragbook.b", "ragbook.c", "ragbook.sub", "ragbook.sub.d"}


@pytest.mark.parametrize("sources, cycle", [
    ({"ragbook.a": "from . import b", "ragbook.b": "from .a import thing"},
     "ragbook.a -> ragbook.b (ragbook.a:1, module) -> ragbook.a (ragbook.b:1, module)"),
    ({"ragbook.a": "from .b import x", "ragbook.b": "from .c import y",
      "ragbook.c": "import ragbook.a"},
     "ragbook.a -> ragbook.b (ragbook.a:1, module) -> ragbook.c (ragbook.b:1, module) -> "
     "ragbook.a (ragbook.c:1, module)"),
    ({"ragbook.sub.d": "from ..a import x", "ragbook.a": "from .sub.d import y"},
     "ragbook.a -> ragbook.sub.d (ragbook.a:1, module) -> ragbook.a (ragbook.sub.d:1, module)"),
    ({"ragbook.a": "from . import b", "ragbook.b": "def f():\n    from . import a\n"},
     "ragbook.a -> ragbook.b (ragbook.a:1, module) -> ragbook.a (ragbook.b:2, lazy)"),
])
def test_a_planted_cycle_is_found(sources, cycle):
    edges = [e for mod, src in sources.items() for e in import_edges(mod, src, KNOWN)]
    assert [describe_cycle(c) for c in find_cycles(edges)] == [cycle]


@pytest.mark.parametrize("sources", [
    {"ragbook.a": "from . import b", "ragbook.b": "import numpy\nfrom .c import x"},
    {"ragbook.a": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
     "ragbook.b": "from .a import A"},
    {"ragbook.a": "from .b import x", "ragbook.b": "import ragbook_other.a"},
])
def test_no_cycle_is_found_where_there_is_none(sources):
    edges = [e for mod, src in sources.items() for e in import_edges(mod, src, KNOWN)
             if e.kind != "typing"]
    assert find_cycles(edges) == []


def test_edges_are_classified_by_where_the_import_runs():
    src = ("from . import b\nclass K:\n    from .c import x\n"
           "def f():\n    import ragbook.sub.d\n"
           "if TYPE_CHECKING:\n    from .a import A\n")
    assert [(e.target, e.kind) for e in import_edges("ragbook.a", src, KNOWN)] == [
        ("ragbook.b", "module"), ("ragbook.c", "module"), ("ragbook.sub.d", "lazy"),
        ("ragbook.a", "typing")]
    assert [e.target for e in import_edges("ragbook.sub", "from .d import x\nfrom .. import c",
                                           KNOWN, is_package=True)] == ["ragbook.sub.d",
                                                                      "ragbook.c"]


@pytest.mark.parametrize("module, source, expected", [
    ("ragbook.a", "from .b import _CITE, ok", ["1: _CITE from ragbook.b"]),
    ("ragbook.sub.d", "from ..a import (\n    fine,\n    _hidden,\n)",
     ["1: _hidden from ragbook.a"]),
    ("ragbook.a", "from ragbook.b import _x as y", ["1: _x from ragbook.b"]),
    ("ragbook.a", "import ragbook._private", ["1: ragbook._private"]),
    ("ragbook.a", "from . import _b", ["1: _b from ragbook"]),
    ("ragbook.a", "from .b import public, __version__", []),
    ("ragbook.a", "from os import _exit\nfrom numpy import _x", []),
    ("ragbook.a", "def f():\n    from .c import _lazy\n", ["2: _lazy from ragbook.c"]),
])
def test_a_planted_private_import_is_found(module, source, expected):
    assert private_imports(module, source, KNOWN) == expected


def test_an_oversized_module_is_named_with_its_length(tmp_path):
    big = tmp_path / "big.py"
    sources = {"big": (big, "x = 1\n" * (MAX_LINES + 1)), "ok": (tmp_path / "ok.py", "x = 1\n")}
    assert oversized(sources) == [f"{big}: {MAX_LINES + 1} lines"]


# -- the module map -------------------------------------------------------------------------
def test_the_module_map_is_up_to_date():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "module_map.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, ("docs/modules.md is stale: run `python tools/module_map.py`"
                                 f"\n{out.stdout}{out.stderr}")


def test_the_module_map_lists_every_module_with_its_chapters():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import module_map
    finally:
        sys.path.remove(str(ROOT / "tools"))
    text = module_map.render()
    for mod, (path, _) in package_sources().items():
        assert f"| `{path.relative_to(ROOT).as_posix()}` |" in text, mod
    row = next(line for line in text.splitlines() if line.startswith("| `ragbook/injection.py`"))
    assert "09" in row.split("|")[3]  # notebook 09: from ragbook.injection import instruction_like
