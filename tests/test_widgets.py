"""The pure functions behind the widgets, and that each widget builds."""
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
