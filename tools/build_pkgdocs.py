#!/usr/bin/env python3
"""Build ``data/pkgdocs/``: the capstone's corpus, one Markdown file per Python package
in ``data/pkgdocs/readmes/`` (the folder to index) and ``data/pkgdocs/README.md``.

The text is each package's own README as its authors published it: the long description
(the ``Description`` body of the ``METADATA`` file in ``*.dist-info``) of the packages
installed in the environment this runs in. Only packages whose description is Markdown
and whose licence is permissive are listed in ``PACKAGES``. No chapter of the book uses
this corpus, so the capstone is a corpus you have not tuned anything on.

Each file gets a front-matter block (package, version, licence), which
``ragbook.ingest.read_documents`` turns into metadata; the body is byte-for-byte the
published description. ``README.md`` lists what was taken from where.

    .venv/bin/python tools/build_pkgdocs.py                 # (re)write data/pkgdocs/
    .venv/bin/python tools/build_pkgdocs.py --check         # exit 1 if it would change

A rebuild in an environment with other versions changes the text (and maybe the
capstone's numbers): README.md records the versions used.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "pkgdocs"

PACKAGES = ("attrs", "beautifulsoup4", "click", "faiss-cpu", "httpx", "huggingface_hub",
            "jupytext", "markdown-it-py", "nbval", "numpy", "pandas", "platformdirs",
            "pymilvus", "rank-bm25", "requests", "rich", "ruff", "sentence-transformers",
            "tokenizers", "transformers", "typer", "urllib3")


def licence(meta) -> str:
    """The SPDX expression when the package gives one, else its licence classifier."""
    if meta.get("License-Expression"):
        return meta["License-Expression"]
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers)
    return (meta.get("License") or "").strip() or "unknown"


def files() -> dict[str, str]:
    """{file name: content} for every package in PACKAGES, plus README.md."""
    out, rows = {}, []
    for name in PACKAGES:
        try:
            meta = metadata.metadata(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{name} is not installed here; install the project's environment "
                             f"(environment.yml) or drop it from PACKAGES") from None
        kind = meta.get("Description-Content-Type") or ""
        body = meta.get_payload() or meta.get("Description") or ""
        if "markdown" not in kind or not body.strip():
            raise SystemExit(f"{name}: its description is not Markdown ({kind!r}) or is empty; "
                             f"pick another package")
        slug = meta["Name"].lower().replace("_", "-")
        lic = licence(meta)
        out[f"readmes/{slug}.md"] = (f"---\npackage: {meta['Name']}\nversion: {meta['Version']}\n"
                             f"license: {lic}\n---\n{body.strip()}\n")
        rows.append(f"| `readmes/{slug}.md` | {meta['Name']} | {meta['Version']} | {lic} |")
    out["README.md"] = "\n".join([
        "# data/pkgdocs — sources", "",
        "One file per package: the package's long description (its README), taken verbatim "
        "from the `Description` body of `METADATA` in the installed `*.dist-info` folder, "
        "with a front-matter block (package, version, licence) added on top. Built by "
        "`tools/build_pkgdocs.py`; each text stays under its package's licence, listed here "
        "as the package metadata states it.", "",
        f"{len(rows)} files, {sum(len(t.split()) for t in out.values()):,} words (front "
        f"matter included). Used by the capstone, `solutions/12-capstone`; no chapter uses it.", "",
        "| file | package | version | licence |", "|---|---|---|---|", *rows, ""])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="build data/pkgdocs from installed packages")
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = ap.parse_args()
    wanted = files()
    if args.check:
        stale = [n for n, text in wanted.items()
                 if not (OUT / n).exists() or (OUT / n).read_text(encoding="utf-8") != text]
        print("\n".join(stale) or "data/pkgdocs is up to date")
        return 1 if stale else 0
    (OUT / "readmes").mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(wanted)} files to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
