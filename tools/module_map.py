"""Write docs/modules.md, the map of the ragbook package, from the code itself.

Every module under ragbook/, grouped by folder (each folder introduced by its package
docstring), with the first line of its docstring and the chapters whose notebooks
(notebooks/NN-*.py) use it. A chapter uses a module when its notebook imports it
(``import ragbook.X``, ``from ragbook.X import ...``, ``from ragbook import X`` for a
module X), imports a name the module defines through a package (``from ragbook import
Encoder`` counts for ``ragbook.embeddings``, where ``Encoder`` is defined), or spells
``ragbook.X`` in its code. No line counts: they drift with every change.

    python tools/module_map.py           # (re)write docs/modules.md
    python tools/module_map.py --check   # exit 1 if docs/modules.md is not what it would write
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ragbook"
NOTEBOOKS = ROOT / "notebooks"
OUTPUT = ROOT / "docs" / "modules.md"
CHAPTER = re.compile(r"^(\d\d)-[\w-]+\.py$")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
SUMMARY_CHARS = 160  # a longer first sentence is cut at a word, with an ellipsis


def module_name(path: Path, root: Path = ROOT) -> str:
    """``ragbook/readers/sentence.py`` -> ``ragbook.readers.sentence``; a package's
    ``__init__.py`` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(package: Path = PACKAGE, root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package: dotted name -> file, sorted by name."""
    return {module_name(p, root): p for p in sorted(package.rglob("*.py"))
            if "__pycache__" not in p.parts}


def first_doc_line(source: str) -> str:
    """The summary of a module's docstring: its first sentence (the first line, carried on
    when the sentence wraps; cut at ``SUMMARY_CHARS``), or "" when it has none."""
    doc = (ast.get_docstring(ast.parse(source)) or "").strip()
    paragraph = " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines())
    end = _SENTENCE_END.search(paragraph)
    sentence = paragraph[:end.end()] if end else paragraph
    if len(sentence) <= SUMMARY_CHARS:
        return sentence
    return sentence[:SUMMARY_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def _base(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module a (possibly relative) ``from ... import`` names."""
    if level == 0:
        return target or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[:len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(parts + ([target] if target else []))


def definitions(known: dict[str, Path]) -> dict[tuple[str, str], str]:
    """(package, name) -> the module a package's ``__init__`` imports ``name`` from, followed
    through nested packages: where ``from ragbook import Encoder`` finds its code."""
    direct: dict[tuple[str, str], str] = {}
    for mod, path in known.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom):
                base = _base(mod, True, node.level, node.module)
                for alias in node.names:
                    direct[(mod, alias.asname or alias.name)] = (
                        f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    resolved = {}
    for (package, name), target in direct.items():
        seen = {package}
        while (target, name) in direct and target not in seen:  # a package passing it on
            seen.add(target)
            target = direct[(target, name)]
        resolved[(package, name)] = target
    return resolved


def used_modules(source: str, known: dict[str, Path],
                 defined: dict[tuple[str, str], str]) -> set[str]:
    """The ragbook modules a notebook's code uses (see the module docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a notebook line that is not Python: fall back to the text
        return {m for m in known if re.search(rf"\b{re.escape(m)}\b", source)}
    used: set[str] = set()

    def credit(dotted: str) -> None:
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):  # the longest prefix that is a module
            if ".".join(parts[:n]) in known:
                used.add(".".join(parts[:n]))
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "ragbook":
                    credit(alias.name)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module.split(".")[0] == "ragbook"):
            credit(node.module)
            for alias in node.names:
                if f"{node.module}.{alias.name}" in known:
                    used.add(f"{node.module}.{alias.name}")
                elif (node.module, alias.name) in defined:
                    credit(defined[(node.module, alias.name)])
        elif isinstance(node, ast.Attribute):
            chain, cur = [], node
            while isinstance(cur, ast.Attribute):
                chain.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name) and cur.id == "ragbook":
                credit(".".join(["ragbook"] + chain[::-1]))
    return used


def chapter_labels(notebooks: list[Path]) -> dict[Path, str]:
    """Each chapter notebook's label: its number, or its name where two share a number."""
    numbers = [CHAPTER.match(p.name).group(1) for p in notebooks]
    return {p: (n if numbers.count(n) == 1 else p.stem) for p, n in zip(notebooks, numbers,
                                                                        strict=True)}


def render(root: Path = ROOT) -> str:
    """The text of docs/modules.md for the tree at ``root``."""
    known = modules(root / "ragbook", root)
    defined = definitions(known)
    notebooks = sorted(p for p in (root / "notebooks").glob("*.py") if CHAPTER.match(p.name))
    labels = chapter_labels(notebooks)
    users: dict[str, list[str]] = {m: [] for m in known}
    for nb in notebooks:
        for mod in sorted(used_modules(nb.read_text(encoding="utf-8"), known, defined)):
            users[mod].append(labels[nb])
    docs = {m: first_doc_line(p.read_text(encoding="utf-8")) for m, p in known.items()}
    folders: dict[str, list[str]] = {}
    for mod, path in known.items():
        folder = path.parent.relative_to(root).as_posix()
        folders.setdefault(folder, []).append(mod)

    out = ["# Module map", "",
           "Generated from the code by `python tools/module_map.py`; do not edit by hand "
           "(`tests/test_architecture.py` fails when this page is stale). Each module of the "
           "`ragbook` package, grouped by folder, with the first line of its docstring and "
           "the chapters whose notebooks use it (import it, import a name it defines, or "
           "spell `ragbook.<module>`).", "",
           "Chapters: " + ", ".join(f"{labels[nb]} = `{nb.stem}`" if labels[nb] != nb.stem
                                    else f"`{nb.stem}`" for nb in notebooks) + ".",
           ""]
    for folder in sorted(folders, key=lambda f: (f.count("/"), f)):
        out += [f"## `{folder}/`", "", "| module | what it is | chapters |", "|---|---|---|"]
        for mod in folders[folder]:
            path = known[mod].relative_to(root).as_posix()
            text = docs[mod].replace("|", "\\|") or "(no docstring)"
            out.append(f"| `{path}` | {text} | {', '.join(users[mod]) or '—'} |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/modules.md differs from what would be written")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run `python tools/module_map.py`",
                  file=sys.stderr)
            return 1
        print(f"{OUTPUT.relative_to(ROOT)} is up to date")
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({len(modules())} modules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
