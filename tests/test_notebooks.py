"""Notebook hygiene: each .ipynb matches its paired .py source, stores no outputs, and
holds no machine paths. (tests/test_book.py runs the notebooks and checks their numbers.)"""
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
MACHINE_PATH = re.compile(r"/(?:root|home|work|tmp)/\w")
PAIRED = sorted(p for folder in ("notebooks", "solutions") for p in (ROOT / folder).glob("*.ipynb"))


def sources(nb):
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


@pytest.mark.parametrize("path", PAIRED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_ipynb_matches_its_py_source(path):
    py = path.with_suffix(".py")
    assert py.exists(), f"{path.name} has no paired {py.name}; run `make notebooks`"
    assert sources(nbformat.read(path, as_version=4)) == sources(jupytext.read(py)), (
        f"{path.name} and {py.name} differ; edit the .py and run `make notebooks`")


@pytest.mark.parametrize("path", PAIRED + sorted((ROOT / "exercises").glob("*.ipynb")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_outputs_and_no_machine_paths(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs, f"{path.name}: outputs are stored; clear them"
        assert not MACHINE_PATH.search(cell.source), f"{path.name}: a machine path in a cell"
