"""The pure functions behind the widgets, and that each widget builds."""
import re

import pytest

from ragbook import Encoder
from ragbook.datasets import load_helpcentre
from ragbook.widgets import (
    ChunkingExperiment,
    chunking_explorer,
    cost_explorer,
    cost_table,
    similarity_playground,
    similarity_rankings,
)


def test_cost_table_shows_the_seed_figures():
    table = cost_table()
    for figure in ("9,600,000", "28.800", "2.0 h", "2.4 min", "4,000", "0.012", "2,400x"):
        assert figure in table


def test_cost_table_moves_with_its_settings():
    assert "96,000,000" in cost_table(corpus_docs=120_000)
    with pytest.raises(ValueError, match="k must be >= 1"):
        cost_table(k=0)


def test_similarity_rankings_length_fools_only_the_dot_product():
    ranks = similarity_rankings([1.0, 0.0], [[0.9, 0.1], [3.0, 3.0]])
    assert ranks == {"cosine": [0, 1], "dot": [1, 0], "euclidean": [0, 1]}


@pytest.fixture(scope="module")
def small_experiment():
    hc = load_helpcentre()
    docs = [d for d in hc.documents if d.metadata["department"] == "billing"]
    ids = {d.id for d in docs}
    qs = [q for q in hc.split("dev") if q.gold and set(q.gold) <= ids]
    return ChunkingExperiment(docs, qs, Encoder(), sizes=(128,),
                              overlaps=(0.0, 0.25)).build(progress=False)


def test_chunking_experiment_counts_and_recall(small_experiment):
    none, some = small_experiment.stats(128, 0.0), small_experiment.stats(128, 0.25)
    assert none["premium"] == 0 and some["chunks"] > none["chunks"]
    assert some["premium"] == pytest.approx(some["chunks"] / none["chunks"] - 1)
    assert 0.5 < none["recall@5"] <= 1.0


def test_chunking_experiment_errors(small_experiment):
    with pytest.raises(ValueError, match="not on the grid"):
        small_experiment.stats(64, 0.0)
    with pytest.raises(RuntimeError, match="build"):
        ChunkingExperiment([], [], None).stats(128, 0.0)


def test_widgets_build(small_experiment):
    for w in (cost_explorer(), chunking_explorer(small_experiment), similarity_playground()):
        assert w.children


@pytest.fixture(scope="module")
def billing_hybrid():
    from ragbook.bm25 import BM25Index
    from ragbook.chunking import chunk_documents
    from ragbook.dense import DenseIndex
    from ragbook.fusion import HybridRetriever

    hc = load_helpcentre()
    docs = [d for d in hc.documents if d.metadata["department"] == "billing"]
    ids = {d.id for d in docs}
    qs = [q for q in hc.split("dev") if q.gold and set(q.gold) <= ids]
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(
        chunk_documents(docs, size=256, overlap=32))
    return hybrid, qs, {q.id: {g: 1 for g in q.gold} for q in qs}


def test_topk_recall_grows_with_k_and_context_too(billing_hybrid):
    from ragbook.widgets import TopK, topk_explorer

    hybrid, qs, qrels = billing_hybrid
    topk = TopK({q.id: hybrid.dense.search(q.standalone, k=50) for q in qs}, qrels,
                {q.id: q.text for q in qs})
    one, ten = topk.stats(1), topk.stats(10)
    assert one["recall@1"] <= ten["recall@10"] and one["context_tokens"] < ten["context_tokens"]
    rows = topk.retrieved(qs[0].id, 3)
    assert len(rows) == 3 and rows[0][0] == 1
    assert topk_explorer(topk).children


def test_fusion_grid_depth_one_is_the_two_top_hits(billing_hybrid):
    from ragbook.widgets import FusionGrid, fusion_explorer

    hybrid, qs, qrels = billing_hybrid
    grid = FusionGrid({q.id: hybrid.channels(q.standalone) for q in qs}, qrels)
    s = grid.stats(60, 100)
    assert 0 < s["recall@5"] <= 1 and 0 < s["mrr@10"] <= 1
    with pytest.raises(ValueError, match="depth"):
        grid.stats(60, 0)
    assert fusion_explorer(grid).children


def test_rerank_budget_keeps_at_most_k(billing_hybrid):
    from ragbook.rerank import CrossEncoderReranker
    from ragbook.widgets import RerankBudget, rerank_explorer

    hybrid, qs, qrels = billing_hybrid
    budget = RerankBudget({q.id: (q.standalone, hybrid.search(q.standalone, k=20)) for q in qs},
                          qrels, CrossEncoderReranker(), keep=5)
    s = budget.stats(10)
    assert s["candidates"] == 10 and s["ms_per_query"] > 0 and 0 < s["mrr@10"] <= 1
    assert rerank_explorer(budget, options=(5, 10)).children


# -- chapter 9: thresholds over cached Prepared questions (no model needed) -----------------
def _prepared_set():
    from types import SimpleNamespace

    from ragbook.pipeline import Pipeline, Prepared
    from ragbook.readers import BaseSpanReader, Span
    from ragbook.retrieval import BaseRetriever
    from ragbook.types import Hit

    class SpanReader(BaseSpanReader):
        """An extractive reader stand-in: decide() only asks it whether a span is enough."""

        def __init__(self, min_span_score=None):
            self.min_span_score = min_span_score

        def hit_spans(self, question, hit):  # pragma: no cover - decide() never re-reads
            raise AssertionError("decide() must not re-read")

        def accepts(self, span):
            return self.min_span_score is None or span.score >= self.min_span_score

    class Unused(BaseRetriever):
        """decide() never retrieves."""

        def search(self, query, k=10, where=None):  # pragma: no cover
            raise AssertionError("decide() must not retrieve")

        def __len__(self):  # pragma: no cover
            raise AssertionError("decide() must not count the corpus")

        corpus_fingerprint = "unused"

    def prep(confidence, doc, span_score):
        hit = Hit(f"{doc}:0-10", confidence, 1, doc_id=doc, text="Refunds take a while.")
        return Prepared("q", "q", (hit,), confidence, "cosine",
                        (Span("Refunds take a while.", 0, 21, span_score, hit.id),), ())

    # confidence, document answered from, reader score, gold documents
    rows = [(0.9, "a", 0.8, ("a",)), (0.7, "b", 0.6, ("b",)), (0.6, "x", 0.7, ("c",)),
            (0.4, "x", 0.4, ()), (0.3, "d", 0.5, ("d",))]
    prepared = [prep(c, d, s) for c, d, s, _ in rows]
    questions = [SimpleNamespace(gold=g) for *_, g in rows]
    return Pipeline(Unused(), reader=SpanReader()), prepared, questions


def test_threshold_curve_counts_what_decide_does():
    from ragbook.widgets import threshold_counts, threshold_curve

    pipeline, prepared, questions = _prepared_set()
    rows = threshold_curve(pipeline, prepared, questions, [None, 0.35, 0.5, 0.65, 0.95])
    assert [(r["right"], r["wrong"], r["escalated"]) for r in rows] == [
        (3, 2, 0), (2, 2, 1), (2, 1, 2), (2, 0, 3), (0, 0, 5)]
    assert all(r["n"] == 5 for r in rows) and rows[2]["min_confidence"] == 0.5
    # the reader's floor escalates weak spans; the pipeline's own reader is left unchanged
    floor = threshold_counts(pipeline, prepared, questions, None, min_span_score=0.55)
    assert (floor["right"], floor["wrong"], floor["escalated"]) == (2, 1, 2)
    assert pipeline.reader.min_span_score is None
    with pytest.raises(ValueError, match="no reranker"):
        threshold_counts(pipeline, prepared, questions, None, min_rerank_score=0.5)
    with pytest.raises(ValueError, match="one Prepared per question"):
        threshold_counts(pipeline, prepared[:2], questions)


def test_threshold_explorer_builds_with_a_curve():
    import matplotlib

    matplotlib.use("Agg")
    from ragbook.widgets import ThresholdExplorer, threshold_explorer

    explorer = ThresholdExplorer(*_prepared_set())
    assert len(explorer.thresholds) == 41 and explorer.thresholds[0] == 0.3
    assert explorer.stats(0.65)["escalated"] == 3
    assert explorer.curve() is explorer.curve()               # computed once per setting
    assert explorer.plot(0.5).get_lines()
    widget = threshold_explorer(explorer)
    assert len(widget.children[0].children) == 2               # no reranker: no rerank slider


# -- chapter 10: the sentence window ---------------------------------------------------------
def test_window_sweep_wider_windows_hand_over_more_and_find_at_least_as_much():
    from ragbook.bm25 import BM25Index
    from ragbook.cache import CachedRetriever
    from ragbook.expansion import sentence_chunks
    from ragbook.widgets import WindowSweep, window_explorer

    hc = load_helpcentre()
    docs = [d for d in hc.documents if d.metadata["department"] == "billing"]
    ids = {d.id for d in docs}
    qs = [q for q in hc.split("dev") if q.gold and set(q.gold) <= ids]
    inner = CachedRetriever(BM25Index().build(sentence_chunks(docs)), path=":memory:")
    sweep = WindowSweep(inner, docs, [(q.id, q.standalone) for q in qs],
                        {q.id: {g: 1 for g in q.gold} for q in qs},
                        {q.id: q.answers for q in qs if q.answers}, k=3)
    rows = [sweep.stats(n) for n in (0, 1, 3)]
    assert [r["window"] for r in rows] == [0, 1, 3]
    assert rows[0]["tokens"] < rows[1]["tokens"] < rows[2]["tokens"]
    # a window always contains its sentence, so a span inside one sentence is never lost
    assert rows[0]["answer_in_context"] <= rows[2]["answer_in_context"]
    assert all(0 < r["recall@3"] <= 1 for r in rows)
    assert inner.cache.hits == 2 * len(qs)              # the sentences were searched once
    with pytest.raises(ValueError, match="window"):
        sweep.stats(-1)
    assert window_explorer(sweep).children


def test_a_readout_shows_the_last_setting_however_fast_the_controls_move(small_experiment):
    """Every dashboard's numbers live in widget state: after a burst of slider moves the
    readout's value is the text of the final setting. (This is the kernel's half; that the
    page draws that value is tests/browser/test_lab.py's, where printing into an Output
    once lost the last of several queued redraws.)"""
    import html

    from ragbook.widgets.view import READOUT_CLASS

    widget = chunking_explorer(small_experiment)
    size, overlap = widget.children[0].children
    readout = widget.children[-1]
    assert READOUT_CLASS in readout._dom_classes
    for o in [value for _, value in overlap.options] * 3:     # back and forth, last at the end
        overlap.value = o
    size.value = size.options[-1]
    stats = small_experiment.stats(size.value, overlap.value)
    assert f"{stats['chunks']:,} chunks" in html.unescape(readout.value)


def test_why_hit_explains_each_hit_with_parts_that_add_up(billing_hybrid):
    """Chapter 5's "why this hit?": for every rank of a question's top 5, the RRF line's
    score is the hit's fused score and its channel parts add up to it; each channel that
    ranked the hit gives its own reason (BM25's terms add up to BM25's score), and the
    explorer's readout is exactly why_hit for the setting chosen last."""
    import html

    from ragbook.widgets import why_explorer, why_hit

    hybrid, qs, _ = billing_hybrid
    q = qs[0].standalone
    hits = hybrid.search(q, k=5)
    for rank, hit in enumerate(hits, 1):
        text = why_hit(hybrid, q, rank)
        head = re.match(rf"rrf {re.escape(hit.id)}: (\S+) = sum of (\d) parts", text)
        assert head and abs(float(head[1]) - hit.score) < 5e-5, text
        channels = re.findall(r"^  (dense|bm25): \+(\S+)", text, re.M)
        assert abs(sum(float(v) for _, v in channels) - hit.score) < 2e-4
        for name, _ in channels:
            assert re.search(rf"^{name} rank \d+, because:$", text, re.M), text
        bm25 = re.search(r"^bm25 \S+: (\S+) = sum of \d+ parts\n((?:  .*\n?)*)", text, re.M)
        if bm25:
            terms = [float(v) for v in re.findall(r"^  \S+: \+(\S+)", bm25[2], re.M)]
            assert abs(sum(terms) - float(bm25[1])) < 5e-4 * len(terms)
    with pytest.raises(ValueError, match="choose a rank from 1 to 5"):
        why_hit(hybrid, q, 6)
    widget = why_explorer(hybrid, {x.id: x.standalone for x in qs[:3]})
    question, rank = widget.children[:2]
    question.value, rank.value = qs[2].id, 4
    assert html.unescape(widget.children[-1].value) == (
        f"<pre>{why_hit(hybrid, qs[2].standalone, 4)}</pre>")
