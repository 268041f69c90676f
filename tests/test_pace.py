"""Every chapter's core path (the cells outside its collapsed "Deep dive ·" sections) reads in
CORE_LIMIT cells or fewer, deep dives are marked the one way JupyterLab collapses, and the
reading-time table in notebooks/README.md is the one tools/pace.py computes."""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import pace  # noqa: E402

CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_core_path_fits_the_limit(path):
    core, _ = pace.split(nbformat.read(path, as_version=4))
    assert len(core) <= pace.CORE_LIMIT, (
        f"{path.name}: {len(core)} core cells (limit {pace.CORE_LIMIT}); move an aside into a "
        f"'Deep dive ·' section whose heading cell is collapsed")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_deep_dives_are_titled_and_collapsed_together(path):
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        titled = "Deep dive ·" in cell.source.split("\n", 1)[0]
        collapsed = bool(cell.metadata.get("jp-MarkdownHeadingCollapsed"))
        assert titled == collapsed, (f"{path.name}: {cell.source[:60]!r} — a deep dive's "
                                     f"heading starts its cell and is collapsed, and only it")


def test_split_counts_a_collapsed_section_until_the_next_heading_of_its_level():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_markdown_cell("## Deep dive · aside",
                                      metadata={"jp-MarkdownHeadingCollapsed": True}),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_markdown_cell("### still inside"),
        nbformat.v4.new_markdown_cell("text\n\n## Next section"),
        nbformat.v4.new_code_cell("y = 2")])
    core, deep = pace.split(nb)
    assert [c.source for c in deep] == ["## Deep dive · aside", "x = 1", "### still inside"]
    assert len(core) == 3


def test_readme_table_is_current():
    readme = pace.README.read_text(encoding="utf-8")
    assert f"{pace.BEGIN}\n{pace.table()}\n{pace.END}" in readme, (
        "notebooks/README.md's reading-time table is stale: python tools/pace.py --write")
