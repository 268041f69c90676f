"""`make lab` installs what every chapter imports: each third-party module a chapter's source
(notebooks/*.py, solutions/*.py) imports must come from the `lab` extra, its requirements or
theirs. An import inside ``try: ... except ImportError`` is optional and exempt.

Distribution names are mapped to import names through the distributions installed here
(``importlib.metadata.packages_distributions``), so this environment must hold the extra:
``make setup`` installs it.
"""
import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib", reason="reads pyproject.toml with Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parent.parent
EXTRA = "lab"
FIRST_PARTY = {"ragbook"}
CHAPTERS = sorted(p for folder in ("notebooks", "solutions")
                  for p in (ROOT / folder).glob("[0-9][0-9]-*.py"))


def _optional(handler: ast.ExceptHandler) -> bool:
    names = ([handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts)
    return any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
               for n in names)


def chapter_imports(source: str) -> set[str]:
    """The top-level modules ``source`` imports, except those under ``try`` whose ``except``
    catches ImportError (a chapter that runs without them)."""
    tree = ast.parse(source)
    exempt = {id(node) for t in ast.walk(tree) if isinstance(t, ast.Try)
              and any(map(_optional, t.handlers)) for stmt in t.body for node in ast.walk(stmt)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def extra_requirements(pyproject: str, extra: str) -> list[Requirement]:
    """The project's dependencies plus ``extra``'s, with ``ragbook[x,...]`` expanded."""
    project = tomllib.loads(pyproject)["project"]
    extras = project.get("optional-dependencies", {})
    if extra not in extras:
        raise KeyError(f"pyproject.toml has no extra {extra!r}")
    todo, seen, out = list(extras[extra]), {extra}, list(project["dependencies"])
    while todo:
        req = Requirement(todo.pop())
        if canonicalize_name(req.name) != canonicalize_name(project["name"]):
            out.append(req)
            continue
        for e in req.extras - seen:
            seen.add(e)
            todo += extras[e]
    return [r if isinstance(r, Requirement) else Requirement(r) for r in out]


def installed_closure(requirements: list[Requirement]) -> set[str]:
    """Canonical names of the distributions these requirements install, transitively
    (markers evaluated here, as pip would)."""
    todo = [(r, frozenset(r.extras)) for r in requirements]
    done: set[str] = set()
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if req.marker is not None and not any(
                req.marker.evaluate({"extra": e}) for e in (extras or {""})):
            continue
        if name in done:
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            raise AssertionError(f"{req.name} is required by the {EXTRA} extra but is not "
                                 f"installed here; run make setup") from None
        done.add(name)
        for sub in dist.requires or ():
            sub = Requirement(sub)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e})
                                         for e in (req.extras or {""})):
                todo.append((sub, frozenset(sub.extras)))
    return done


def missing_imports(chapters: dict[str, str], pyproject: str, extra: str = EXTRA) -> list[str]:
    """One message per (chapter, module) the extra does not install."""
    installed = installed_closure(extra_requirements(pyproject, extra))
    providers = metadata.packages_distributions()
    problems = []
    for chapter, source in chapters.items():
        for module in sorted(chapter_imports(source) - FIRST_PARTY
                             - set(sys.stdlib_module_names)):
            dists = providers.get(module, [])
            if any(canonicalize_name(d) in installed for d in dists):
                continue
            fix = (f"add {dists[0]} to" if dists else
                   f"add the distribution that provides {module} to")
            problems.append(f"chapter {chapter} imports {module}, which `make lab` does not "
                            f"install: {fix} the {extra} extra in pyproject.toml")
    return problems


PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_make_lab_installs_every_chapters_imports():
    chapters = {f"{p.parent.name}/{p.stem}": p.read_text(encoding="utf-8") for p in CHAPTERS}
    assert len(chapters) > 20
    assert missing_imports(chapters, PYPROJECT) == []


def test_make_lab_installs_the_lab_extra():
    assert re.search(r'pip install -q -e "\.\[lab\]"', (ROOT / "Makefile").read_text())


def test_the_check_names_a_chapter_import_the_extra_leaves_out():
    planted = {"notebooks/99-planted": "import numpy\nfrom langchain_text_splitters import X\n"}
    without = PYPROJECT.replace('"langchain-text-splitters>=0.3",', "")
    assert without != PYPROJECT
    assert missing_imports(planted, without) == [
        "chapter notebooks/99-planted imports langchain_text_splitters, which `make lab` does "
        "not install: add langchain-text-splitters to the lab extra in pyproject.toml"]
    assert missing_imports(planted, PYPROJECT) == []


def test_optional_imports_are_exempt_and_unknown_modules_are_named():
    source = ("try:\n    import pytrec_eval\nexcept ImportError:\n    pass\n"
              "try:\n    import not_a_module_anywhere\nexcept KeyError:\n    pass\n")
    assert chapter_imports(source) == {"not_a_module_anywhere"}
    [problem] = missing_imports({"x": source}, PYPROJECT)
    assert "add the distribution that provides not_a_module_anywhere" in problem


def test_an_unknown_extra_is_refused():
    with pytest.raises(KeyError, match="no extra 'nope'"):
        extra_requirements(PYPROJECT, "nope")
