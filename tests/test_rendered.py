"""docs/rendered/ is the copy of the chapters a learner reads before running anything: it must
have the same cells as notebooks/, come from the current package and data (tools/render.py
records a digest of them), hold no errors or machine paths, and state no number in its prose
that no cell printed (tools/check_prose_numbers.py). When this fails: `make render`, commit."""
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_prose_numbers  # noqa: E402
import render  # noqa: E402

RENDERED = sorted((ROOT / "docs" / "rendered").glob("*.ipynb"))


def test_rendered_copy_is_in_sync_with_sources_and_code():
    problems = render.stale(render.code_digest())
    assert not problems, "docs/rendered/ is stale (run `make render`):\n" + "\n".join(problems)


@pytest.mark.parametrize("path", RENDERED, ids=lambda p: p.name)
def test_rendered_chapter_ran_cleanly(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    ran = all(c.execution_count for c in code if c.source.strip())
    assert ran, f"{path.name}: a cell never ran"
    for cell in code:
        assert not [o for o in cell.outputs if o.output_type == "error"], f"{path.name}: an error"
        text = check_prose_numbers.outputs_text(cell)
        assert not render.MACHINE_PATH.search(text), f"{path.name}: a machine path in an output"


# what a first reader takes for breakage: a tokenizer warning about a text that was only
# counted, a model load report, terminal colour codes
NOISE = ("Token indices sequence length", "LOAD REPORT", "\x1b[")
WIDGETS = ("explorer", "playground", "dashboard", "interact", "Slider", "widgets.")


@pytest.mark.parametrize("path", RENDERED, ids=lambda p: p.name)
def test_rendered_outputs_are_clean(path):
    """No warning noise in any output, and a widget note only where the cell shows a real
    widget (a progress bar rendered as 'an interactive widget' is noise too)."""
    nb = nbformat.read(path, as_version=4)
    for n, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        text = check_prose_numbers.outputs_text(cell) + "".join(
            "".join(o.get("text", "")) for o in cell.outputs)
        for noise in NOISE:
            assert noise not in text, f"{path.name} code cell {n}: {noise!r} in its output"
        notes = [o for o in cell.outputs
                 if render.WIDGET_NOTE in str(o.get("data", {}).get("text/plain", ""))]
        if notes:
            assert any(w in cell.source for w in WIDGETS), (
                f"{path.name} code cell {n} shows {len(notes)} widget note(s) but displays no "
                f"widget: a progress bar? (tools/render.py runs kernels without them)")


@pytest.mark.parametrize("path", RENDERED, ids=lambda p: p.name)
def test_every_number_in_prose_was_printed_above(path):
    problems = check_prose_numbers.unprinted(path)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("markdown, flagged", [
    ("Recall@5 is 0.915 on 832 chunks.", ["0.915", "832"]),
    ("top-50 with all-MiniLM-L6-v2 and `k=128`, in 2024, 3 times", []),
    ("BM25 beats it by 0.12 (source: BEIR, Thakur et al. 2021).", []),
    ("About 91.5% of 10,370 sections", ["91.5%", "10,370"]),
])
def test_prose_number_finder(markdown, flagged):
    assert [n for n, _ in check_prose_numbers.prose_numbers(markdown)] == flagged


def test_prose_number_matching_rounds_only_the_printed_value():
    printed = check_prose_numbers.numbers_in("recall@5 = 0.9154, 832 chunks, 1,024 ms")
    assert check_prose_numbers.matches("0.92", printed)
    assert check_prose_numbers.matches("91.5%", printed)
    assert check_prose_numbers.matches("1,024", printed)
    assert not check_prose_numbers.matches("838", printed)
    assert not check_prose_numbers.matches("0.93", printed)


@pytest.mark.parametrize("markdown, flagged", [
    ("Offline, the `cross_encoder` role is the window re-reader of chapter 6.",
     ["cross_encoder"]),
    ("Offline the reranking role is a MaxSim blend over the encoder's token vectors.", []),
    ("Offline, the span-reader role is a QA head fine-tuned here.", ["span_reader"]),
    ("The `generator` role offline is SmolLM2-135M-Instruct.", []),
    ("With the standard profile the `cross_encoder` role is a MS MARCO model.", []),
])
def test_a_role_named_offline_must_be_what_the_profile_resolves(markdown, flagged):
    found = check_prose_numbers.role_contradictions(markdown)
    assert [why.split()[1] for why in found] == flagged


def test_the_checkers_role_names_are_the_offline_profiles():
    """OFFLINE_ROLES names every role the package has, with the model the offline profile
    resolves it to: change a role's model and this fails until the checker (and so the
    prose it checks) follows."""
    from ragbook import models

    offline = {row["role"]: row["model"] for row in models.describe("offline")}
    assert {role: model for role, (model, _, _) in check_prose_numbers.OFFLINE_ROLES.items()
            } == offline
