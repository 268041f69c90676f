"""How HTML conversion time grows with nesting: ragbook's ``convert`` against BeautifulSoup's
own ``get_text`` on the same parse (the peer: the least a converter can do with the tree),
on pages of 8 to 64 KB of nested ``<header>`` elements (the hostile page of session 7's
probe, which took 74.5 s at 64 KB while the boilerplate pass was quadratic). Linear work
doubles with the size; quadratic work quadruples.

    .venv/bin/python bench/convert_scaling.py
"""
import tempfile
import time
import warnings
from pathlib import Path

import bs4

from ragbook.convert import convert


def page(size: int) -> str:
    return "<body><p>Visible words.</p>" + "<header>" * (size // len("<header>")) + "x"


def seconds(work) -> float:
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        work()
    return time.perf_counter() - started


def main():
    print("| page | ragbook convert (s) | bs4 lxml get_text (s) | ratio | growth per doubling |")
    print("|---|---|---|---|---|")
    last = None
    with tempfile.TemporaryDirectory() as tmp:
        for kb in (8, 16, 32, 64):
            path = Path(tmp) / f"nested-{kb}.html"
            path.write_text(page(kb * 1024))
            ours = seconds(lambda p=path: convert(p))
            peer = seconds(lambda p=path: bs4.BeautifulSoup(p.read_bytes(), "lxml").get_text())
            growth = f"×{ours / last:.1f}" if last else "—"
            print(f"| {kb} KB | {ours:.3f} | {peer:.3f} | {ours / peer:.1f} | {growth} |")
            last = ours


if __name__ == "__main__":
    main()
