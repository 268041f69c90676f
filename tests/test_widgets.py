"""The pure functions behind the widgets, and that each widget builds."""
import pytest

from ragbook import Encoder
from ragbook.datasets import load_helpcentre
from ragbook.widgets import (ChunkingExperiment, chunking_explorer, cost_explorer, cost_table,
                             similarity_playground, similarity_rankings)


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
    return ChunkingExperiment(docs, qs, Encoder(), sizes=(128,), overlaps=(0.0, 0.25)).build(progress=False)


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
