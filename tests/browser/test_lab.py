"""The widgets as a learner meets them: in JupyterLab, in Chromium.

For each chapter below: open the notebook, Run All, wait for the kernel to be idle, check
that no cell shows an error, move a slider with the keyboard, and check that the dashboard
now prints what the widget's pure function gives for the new setting (computed here, in
the test process, not read back from the kernel). Then an exercise notebook: run blank, it
reports NOT IMPLEMENTED (no traceback); paste the worked solution, its check turns PASSED.

Run All timeouts are about 5x the runs measured on 2 busy cores with a warm embedding
cache (13-53 s per chapter; the chapters' nbval runs, earlier in the same `make test`,
fill the cache). A cold cache makes chapter 1 embed its chunking grid: about a minute more.
"""
import json
import re
from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect

from ragbook.widgets.view import READOUT_CLASS  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


def dashboard(lab, label: str | None = None):
    """The chapter's dashboard (its first outermost widget box, or the first that shows
    ``label`` where a chapter has more than one), once rendered."""
    boxes = lab.page.locator(".jp-OutputArea-output .widget-vbox")
    widget = (boxes if label is None else boxes.filter(has_text=re.compile(re.escape(label)))).first
    widget.wait_for(state="visible")
    return widget


def printed(widget) -> str:
    return widget.locator(f".{READOUT_CLASS}").inner_text().strip()


def settled(lab, widget, want, view=lambda text: text, timeout_s: float = 60):
    """The dashboard's printout once ``view(printout) == want``, or the last one after
    ``timeout_s`` (the test's own assert then shows the difference).

    Several key presses queue several widget updates; the printout and the kernel's idle
    flag can both be read between two of them, so neither alone says the last update has
    been drawn. Waiting for the value the final setting must print is the one safe signal.
    """
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = printed(widget)
        try:
            if text and view(text) == want:
                break
        except AssertionError:              # a half-drawn printout: not there yet
            pass
        lab.page.wait_for_timeout(250)
    lab.wait_idle(60)
    return printed(widget)


def test_cost_explorer_k_slider(lab):
    """Chapter 0: the k slider from 5 to 8 reprints `cost_table(k=8)`, character for
    character."""
    from ragbook.widgets import cost_table

    lab.open("notebooks/00-why-retrieve.ipynb")
    lab.run_all(timeout_s=120)
    lab.assert_ran_clean()
    widget = dashboard(lab)
    before = printed(widget)
    assert before == cost_table().strip()
    lab.screenshot("00-before", show=widget)

    k = lab.slider(widget, "k")
    lab.press(k, "ArrowRight", 3)
    after = settled(lab, widget, cost_table(k=8).strip())
    lab.screenshot("00-after", show=widget)
    expect(k).to_have_attribute("aria-valuenow", "8.0")
    assert after == cost_table(k=8).strip()
    assert "(12,000 documents -> 8 read)" in after


def rankings_in(text: str) -> dict[str, str]:
    """{"cosine": "A > C > B", ...} from the playground's printout."""
    return dict(re.findall(r"^(cosine|dot|euclidean)\s+([ABC](?: > [ABC])+)$", text, re.M))


def test_similarity_playground_b_length(lab):
    """Chapter 2: shrinking document B to length 0.1 (the Home key) redraws the plot and
    reprints the three rankings `similarity_rankings` gives for the new vectors."""
    from ragbook.widgets import polar, similarity_rankings

    def expected(b_length):
        ranks = similarity_rankings(polar(30, 1.0),
                                    [polar(40, 0.6), polar(80, b_length), polar(10, 1.5)])
        return {m: " > ".join("ABC"[i] for i in order) for m, order in ranks.items()}

    lab.open("notebooks/02-similarity.ipynb")
    lab.run_all(timeout_s=300)
    lab.assert_ran_clean()
    widget = dashboard(lab)
    before = printed(widget)
    plot_before = widget.locator(".widget-output img").get_attribute("src")
    assert rankings_in(before) == expected(3.0)
    lab.screenshot("02-before", show=widget)

    b_length = lab.slider(widget, "B length")
    lab.press(b_length, "Home")
    after = settled(lab, widget, expected(0.1), view=rankings_in)
    lab.screenshot("02-after", show=widget)
    expect(b_length).to_have_attribute("aria-valuenow", "0.1")
    assert rankings_in(after) == expected(0.1) != expected(3.0)
    assert widget.locator(".widget-output img").get_attribute("src") != plot_before


NUMBER = r"([0-9][0-9,]*(?:\.[0-9]+)?)"


@pytest.fixture(scope="module")
def helpcentre():
    from ragbook import Encoder
    from ragbook.datasets import load_helpcentre

    return load_helpcentre(), Encoder()


def test_chunking_explorer_size_slider(lab, helpcentre):
    """Chapter 1: the size slider from 256 to 128 tokens reprints the chunk count, the
    overlap premium and recall@5 that `ChunkingExperiment.stats(128, 0.1)` gives."""
    from ragbook.widgets import ChunkingExperiment

    hc, encoder = helpcentre
    dev = [q for q in hc.split("dev") if q.gold]
    experiment = ChunkingExperiment(hc.documents, dev, encoder, sizes=(128, 256),
                                    overlaps=(0.0, 0.1, 0.25, 0.5)).build(progress=False)

    def expected(size):
        s = experiment.stats(size, 0.1)
        return f"{s['chunks']:,}", f"{s['premium']:.0%}", f"{s['recall@5']:.3f}"

    def shown(text):
        m = re.search(rf"{NUMBER} chunks\s+\(\+{NUMBER}% vs no overlap\)\s+recall@5 = {NUMBER}",
                      text)
        assert m, f"no chunk count / recall in {text!r}"
        return m.group(1), m.group(2) + "%", m.group(3)

    lab.open("notebooks/01-chunking.ipynb")
    lab.run_all(timeout_s=300)
    lab.assert_ran_clean()
    widget = dashboard(lab)
    before = printed(widget)
    assert shown(before) == expected(256)
    lab.screenshot("01-before", show=widget)

    size = lab.slider(widget, "size (tok)")
    lab.press(size, "ArrowLeft")
    after = settled(lab, widget, expected(128), view=shown)
    lab.screenshot("01-after", show=widget)
    expect(widget.locator(".widget-readout").first).to_have_text("128")
    assert shown(after) == expected(128) != expected(256)


def test_fusion_explorer_rrf_k_and_depth(lab, helpcentre):
    """Chapter 5: RRF k from 60 to 5 and channel depth from 100 to 25 reprint the
    recall@5 and MRR@10 that `FusionGrid.stats(5, 25)` gives on the help-centre test set."""
    from ragbook.bm25 import BM25Index
    from ragbook.chunking import chunk_documents
    from ragbook.dense import DenseIndex
    from ragbook.fusion import HybridRetriever
    from ragbook.widgets import FusionGrid

    hc, encoder = helpcentre
    hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(
        chunk_documents(hc.documents, size=256, overlap=32))
    grid = FusionGrid({q.id: hybrid.channels(q.standalone) for q in hc.split("test") if q.gold},
                      hc.qrels("test"))

    def expected(rrf_k, depth):
        s = grid.stats(rrf_k, depth)
        return f"{s['recall@5']:.3f}", f"{s['mrr@10']:.3f}"

    def shown(text):
        m = re.search(rf"recall@5 = {NUMBER}\s+MRR@10 = {NUMBER}", text)
        assert m, f"no recall / MRR in {text!r}"
        return m.groups()

    lab.open("notebooks/05-keyword-and-hybrid.ipynb")
    lab.run_all(timeout_s=300)
    lab.assert_ran_clean()
    widget = dashboard(lab, "RRF k")
    before = printed(widget)
    assert shown(before) == expected(60, 100)
    lab.screenshot("05-before", show=widget)

    lab.press(lab.slider(widget, "RRF k"), "ArrowLeft", 3)      # 60 -> 30 -> 10 -> 5
    lab.press(lab.slider(widget, "depth"), "ArrowLeft", 2)      # 100 -> 50 -> 25
    expect(widget.locator(".widget-readout")).to_have_text(["5", "25"])
    after = settled(lab, widget, expected(5, 25), view=shown)
    lab.screenshot("05-after", show=widget)
    assert shown(after) == expected(5, 25) != expected(60, 100)


def solution_cell(chapter: str, starts_with: str) -> str:
    """A worked solution's code cell as a learner would paste it (marker comments dropped)."""
    nb = json.loads((ROOT / "solutions" / chapter).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] == "code" and src.startswith(starts_with):
            return "\n".join(line for line in src.splitlines()
                             if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
    raise AssertionError(f"solutions/{chapter} has no cell starting {starts_with!r}")


def test_exercise_blank_then_pasted_solution_passes(lab):
    """exercises/00: run blank, every check says NOT IMPLEMENTED and no cell shows a
    traceback; paste the worked `naive_tokens` into its cell, run it and the check below:
    PASSED."""
    chapter = "00-why-retrieve.ipynb"
    lab.open(f"exercises/{chapter}")
    lab.run_all(timeout_s=120)
    lab.assert_ran_clean()
    text = lab.page.locator(".jp-Notebook").inner_text()
    for name in ("naive_tokens", "naive_dollars", "parallel_latency", "cost_of_k"):
        assert f"[check] {name}: NOT IMPLEMENTED" in text
    assert "complete naive_dollars first" in text       # the Try it cell, via grading.trying
    lab.screenshot("exercise-blank")

    cell = lab.code_cell("def naive_tokens(")
    check_cell = cell.locator("xpath=following-sibling::div[contains(@class,'jp-CodeCell')][1]")
    assert "NOT IMPLEMENTED" in check_cell.locator(".jp-OutputArea").inner_text()
    solution = solution_cell(chapter, "def naive_tokens(")
    cell.locator(".cm-content").click()
    lab.page.keyboard.press("Control+A")
    lab.page.evaluate("text => navigator.clipboard.writeText(text)", solution)
    lab.page.keyboard.press("Control+V")                # a real paste, not typing
    assert cell.locator(".cm-content").inner_text() == solution
    lab.page.keyboard.press("Shift+Enter")              # run the pasted cell, move to the check
    lab.page.keyboard.press("Shift+Enter")              # run the check
    check_out = check_cell.locator(".jp-OutputArea")
    check_out.filter(has_text="PASSED").wait_for(timeout=60_000)
    lab.wait_idle(60)
    lab.screenshot("exercise-pasted", show=check_cell)
    assert check_out.inner_text().startswith("[check] naive_tokens: PASSED")
    assert not lab.errors()
