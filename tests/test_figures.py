"""The chapters' pictures: each draws, highlights what it says it does, and refuses bad input
with a message that says what to pass."""
import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from ragbook import figures  # noqa: E402


def _faces(fig):
    return {p.get_gid(): p.get_facecolor() for p in fig.axes[0].patches if p.get_gid()}


@pytest.mark.parametrize("chapter", sorted(figures.CHAPTER_STAGES))
def test_pipeline_map_highlights_exactly_the_chapters_stages(chapter):
    faces = _faces(figures.pipeline_map(chapter))
    on = {gid.removeprefix("stage-") for gid, c in faces.items()
          if matplotlib.colors.to_hex(c) == figures._ON}
    assert on == set(figures.CHAPTER_STAGES[chapter])


def test_pipeline_map_refuses_unknown_names():
    with pytest.raises(ValueError, match="chapter must be one of"):
        figures.pipeline_map(13)
    with pytest.raises(ValueError, match="unknown stage.*choose from"):
        figures.pipeline_map(stages=["rerannk"])


def test_rrf_arithmetic_bars_are_the_fused_scores():
    fig = figures.rrf_arithmetic(["a", "b", "c"], ["c", "d"], rrf_k=60)
    ax = fig.axes[0]
    label_at = {round(t.get_position()[1]): t.get_text() for t in ax.get_yticklabels()}
    assert label_at[max(label_at)] == "c"          # top row: found by both lists
    widths = {}
    for bar in ax.patches:
        label = label_at[round(bar.get_y() + bar.get_height() / 2)]
        widths[label] = widths.get(label, 0) + bar.get_width()
    assert widths["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert widths["a"] == pytest.approx(1 / 61)
    with pytest.raises(ValueError, match="rrf_k must be >= 0"):
        figures.rrf_arithmetic(["a"], ["b"], rrf_k=-1)


def test_chunk_boundaries_checks_spans_and_draws_one_bar_per_line_piece():
    text = "word " * 60
    fig = figures.chunk_boundaries(text, [(0, 120), (100, 220)], width=50)
    assert len(fig.axes[0].lines) == 3 + 3          # 0-120 spans 3 lines, 100-220 too
    with pytest.raises(ValueError, match="not inside the text"):
        figures.chunk_boundaries(text, [(0, 10_000)])
    with pytest.raises(ValueError, match="spans is empty"):
        figures.chunk_boundaries(text, [])


def test_encoder_kinds_draws_both_panels():
    fig = figures.encoder_kinds()
    assert [ax.get_title() for ax in fig.axes] == [
        "bi-encoder: two vectors, compared", "cross-encoder: one pair in, one score out"]


def test_vectors_2d_draws_one_arrow_per_vector():
    from ragbook.widgets import polar

    fig = figures.vectors_2d(polar(30, 1.0), [polar(40, 0.6), polar(80, 3.0)])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts if t.get_text()]   # arrows are empty annotations
    assert labels == [" query", " A", " B"] and ax.get_aspect() == 1.0
