"""The command line prints its own lines, not its libraries': no pypdf recovery notes, no
weights-loading bar; and an answer's hard-wrapped lines are printed joined, still quoted."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragbook.ask_output import join_soft_breaks
from ragbook.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_convert import pdf_bytes  # noqa: E402

WRAPPED = ("# Refunds\n\nThe refund window for enterprise contracts is\n45 days from the "
           "invoice date.\n\nMonthly plans are not refunded.\n")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """`ragbook index` run as a learner runs it, on a Markdown file and a truncated PDF."""
    src = tmp_path_factory.mktemp("docs")
    (src / "refunds.md").write_text(WRAPPED, encoding="utf-8")
    whole = pdf_bytes([["Support answers within one business day."]])
    (src / "damaged.pdf").write_bytes(whole[:whole.rindex(b"%%EOF")])
    out = src.parent / "index"
    env = {**os.environ, "RAGBOOK_CACHE": str(src.parent / "cache")}  # nothing cached: a bar
    run = subprocess.run([sys.executable, "-m", "ragbook", "index", str(src), "--out", str(out)],
                         capture_output=True, text=True, timeout=600, env=env)
    return run, out


@pytest.mark.slow
def test_index_prints_no_library_noise(built):
    run, _ = built
    assert run.returncode == 0, run.stderr
    for noise in ("EOF marker", "CAUTION", "Loading weights"):
        assert noise not in run.stderr, run.stderr
    assert "ragbook: warning:" in run.stderr and "damaged.pdf" in run.stderr  # ours stays
    assert "embedding with" in run.stderr                                    # our bar stays


@pytest.mark.slow
def test_an_answer_with_soft_breaks_prints_joined_and_quoted(built, capsys):
    _, index = built
    assert main(["ask", str(index), "how long is the refund window for enterprise contracts?"
                 ]) == 0
    printed = capsys.readouterr().out
    assert "> The refund window for enterprise contracts is 45 days from the invoice date." \
        in printed.splitlines(), printed


def test_join_soft_breaks_keeps_paragraphs():
    assert join_soft_breaks("a line\nwrapped  \n  here\n\nnext\nparagraph\n") == \
        "a line wrapped here\n\nnext paragraph"
    assert join_soft_breaks("one line") == "one line"
