from fractions import Fraction

import pytest

from ragbook.bm25 import BM25Index
from ragbook.dense import DenseIndex
from ragbook.fusion import HybridRetriever, IndexDriftError, reciprocal_rank_fusion, score_blend
from ragbook.types import Document, Hit


def hits(*ids, scores=None):
    scores = scores or [10.0 - i for i in range(len(ids))]
    return [Hit(d, s, r) for r, (d, s) in enumerate(zip(ids, scores, strict=True), 1)]


def test_rrf_fractions():
    fused = reciprocal_rank_fusion([hits("a", "b", "c"), hits("c", "d", "a")])
    score = {h.id: Fraction(h.score).limit_denominator(10**6) for h in fused}
    assert score["a"] == Fraction(1, 61) + Fraction(1, 63)
    assert score["c"] == Fraction(1, 63) + Fraction(1, 61)
    assert score["b"] == Fraction(1, 62) and score["d"] == Fraction(1, 62)
    assert [h.rank for h in fused] == [1, 2, 3, 4]


def test_both_lists_rise_one_list_survives_neither_stays_down():
    dense = hits("x", "both", "y")
    keyword = hits("z", "w", "both")
    fused = [h.id for h in reciprocal_rank_fusion([dense, keyword])]
    assert fused[0] == "both" and set(fused) == {"x", "both", "y", "z", "w"}


def test_a_document_only_bm25_finds_at_rank_30_is_rescued():
    """Channels that half agree: BM25's top 29 mixes dense's favourites with its own; the
    document it ranks 30th, absent from dense's 100, still makes the fused top 50."""
    dense = hits(*[f"d{i}" for i in range(100)])
    top29 = [x for pair in zip([f"d{i}" for i in range(15)], [f"k{i}" for i in range(14)],
                               strict=False)
             for x in pair] + ["d14"]
    keyword = hits(*top29, "rescued", *[f"k{i}" for i in range(14, 84)])
    fused = [h.id for h in reciprocal_rank_fusion([dense, keyword], k=50)]
    assert "rescued" in fused and "rescued" not in [h.id for h in dense]


def test_weights_scale_a_channel():
    fused = reciprocal_rank_fusion([hits("a"), hits("b")], weights=[1.0, 0.5])
    assert [h.id for h in fused] == ["a", "b"]
    with pytest.raises(ValueError, match="one per ranking"):
        reciprocal_rank_fusion([hits("a"), hits("b")], weights=[1.0])


def test_score_blend_depends_on_score_ranges_rrf_does_not():
    """Add one document with a huge BM25 score (a new, keyword-heavy page): min-max
    squeezes every other BM25 score towards 0 and the blend's order flips; RRF's does not."""
    dense = hits("a", "b", scores=[0.80, 0.78])
    bm25 = hits("b", "a", scores=[12.0, 4.0])
    before = [h.id for h in score_blend([dense, bm25], weights=[1.0, 1.5])]
    bm25_after = hits("new", "b", "a", scores=[90.0, 12.0, 4.0])
    after = [h.id for h in score_blend([dense, bm25_after], weights=[1.0, 1.5]) if h.id != "new"]
    assert before != after
    rrf_before = [h.id for h in reciprocal_rank_fusion([dense, bm25])]
    rrf_after = [h.id for h in reciprocal_rank_fusion([dense, bm25_after]) if h.id != "new"]
    assert rrf_before == rrf_after


def test_hybrid_builds_both_and_detects_drift():
    docs = [Document(f"d{i}", f"refund policy number {i} for the enterprise plan")
            for i in range(5)]
    hybrid = HybridRetriever(DenseIndex(), BM25Index()).build(docs)
    assert hybrid.check() == 5
    assert len(hybrid.search("enterprise refund", k=3)) == 3
    hybrid.bm25.build(docs[:4])   # someone re-indexes one side only
    with pytest.raises(IndexDriftError, match="5 items and the BM25 index 4"):
        hybrid.search("enterprise refund", k=3)
