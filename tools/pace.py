"""How long each chapter's core path is: the cells outside its deep dives, and a reading
time. A deep dive is a section whose heading cell is collapsed in JupyterLab
(``jp-MarkdownHeadingCollapsed``) and titled "Deep dive · ..."; it runs with the chapter
(Run All runs every cell) but a reader can leave it closed.

    python tools/pace.py            # print the table notebooks/README.md carries
    python tools/pace.py --write    # rewrite that table in notebooks/README.md

tests/test_pace.py holds every chapter's core to CORE_LIMIT cells and the README table to
what this prints.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
README = NOTEBOOKS / "README.md"
CORE_LIMIT = 25
WORDS_PER_MINUTE = 200      # prose; a code cell counts as a minute to read and run in mind
BEGIN, END = "<!-- pace:begin -->", "<!-- pace:end -->"
_HEADING = re.compile(r"^(#{1,6})\s+(.*)")


def _level(cell) -> int | None:
    """The level of a markdown cell's first heading (None: it has none) — what JupyterLab
    reads to decide where a collapsed section ends."""
    if cell.cell_type != "markdown":
        return None
    for line in cell.source.splitlines():
        m = _HEADING.match(line)
        if m:
            return len(m.group(1))
    return None


def split(nb) -> tuple[list, list]:
    """(core cells, deep-dive cells) of a notebook."""
    core, deep, closed_at = [], [], None
    for cell in nb.cells:
        level = _level(cell)
        if closed_at is not None and level is not None and level <= closed_at:
            closed_at = None
        if closed_at is None and level is not None and cell.metadata.get(
                "jp-MarkdownHeadingCollapsed"):
            closed_at = level
        (deep if closed_at is not None else core).append(cell)
    return core, deep


def minutes(cells) -> int:
    words = sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")
    code = sum(c.cell_type == "code" for c in cells)
    return round(words / WORDS_PER_MINUTE + code)


def table() -> str:
    rows = ["| chapter | core cells | reading time (core) | deep dives (cells, minutes) |",
            "|---|---|---|---|"]
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]-*.ipynb")):
        core, deep = split(nbformat.read(path, as_version=4))
        extra = f"{len(deep)} cells, ~{minutes(deep)} min" if deep else "none"
        rows.append(f"| `{path.stem}` | {len(core)} | ~{minutes(core)} min | {extra} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the table in notebooks/README")
    args = ap.parse_args()
    text = table()
    if args.write:
        readme = README.read_text(encoding="utf-8")
        if BEGIN not in readme:
            print(f"{README} has no {BEGIN} ... {END} block; add one where the table goes")
            return 1
        head, rest = readme.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        README.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
