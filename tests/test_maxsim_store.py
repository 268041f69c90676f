"""MaxSim scores kept and shipped (issue 34): a pair scored once is never read token by token
again — a second scorer reads it from the on-disk store, a first run from the scores shipped
for the pinned encoder once its model agrees with the file's probe — and the scores read
back are the ones the model computes."""
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from ragbook import Encoder, shipped
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.late_interaction import MaxSimScorer
from ragbook.shipped import SCORE_TOLERANCE, ShippedScores

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import ship_scores  # noqa: E402  (writes the shipped file from a cache folder)

REAL_FOLDER = shipped.FOLDER                    # before any test swaps it


@pytest.fixture(scope="module")
def pairs():
    hc = load_helpcentre()
    docs = hc.documents[:6]
    return [(q.text, d.text[:1200]) for q in hc.split("test")[:3] for d in docs]


@pytest.fixture
def no_shipped(tmp_path, monkeypatch):
    """``data/vectors`` swapped for an empty folder: no shipped file serves the test."""
    monkeypatch.setattr(shipped, "FOLDER", tmp_path / "vectors")
    monkeypatch.setattr(ship_scores, "FOLDER", tmp_path / "vectors")
    monkeypatch.setattr(shipped, "_OPEN", {})
    (tmp_path / "vectors").mkdir()


def scorer_in(cache: Path, monkeypatch) -> MaxSimScorer:
    monkeypatch.setenv("RAGBOOK_CACHE", str(cache))
    return MaxSimScorer(Encoder(show_progress=False))


def read_tokens(scorer: MaxSimScorer) -> int:
    """How many texts ``scorer`` has read token by token (its in-memory token cache)."""
    return len(scorer._tokens.rows)


def test_a_scored_pair_is_read_from_disk_by_the_next_scorer(pairs, tmp_path, monkeypatch,
                                                             no_shipped):
    first = scorer_in(tmp_path, monkeypatch)
    scores = first.predict(pairs)
    assert read_tokens(first) == 3 + 6                     # 3 questions, 6 passages
    second = MaxSimScorer(Encoder(show_progress=False), dense_weight=0.5)   # a new "run"
    dense, late = second.parts(pairs)
    assert read_tokens(second) == 0                        # nothing read token by token
    assert np.allclose(0.2 * dense + 0.8 * late, scores, atol=1e-7)
    assert np.allclose(second.predict(pairs), 0.5 * dense + 0.5 * late, atol=1e-7)


def test_an_encoder_without_a_cache_keeps_no_scores(pairs, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    cold = MaxSimScorer(Encoder(cache=False, show_progress=False))
    cold.predict(pairs[:2])
    assert not list(tmp_path.rglob("maxsim__*"))
    again = MaxSimScorer(Encoder(cache=False, show_progress=False))
    again.predict(pairs[:2])
    assert read_tokens(again) == 1 + 2


def test_keep_scores_false_reads_every_pairs_tokens(pairs, tmp_path, monkeypatch, no_shipped):
    """What chapter 6's latency measurement asks for: a cached encoder, yet every pair scored
    from token vectors, none read from or written to the MaxSim store."""
    kept = scorer_in(tmp_path, monkeypatch).predict(pairs[:2])
    timed = MaxSimScorer(Encoder(show_progress=False), keep_scores=False)
    assert np.allclose(timed.predict(pairs[:2]), kept, atol=1e-6)
    assert read_tokens(timed) == 1 + 2
    assert timed.fingerprint == MaxSimScorer(timed.encoder).fingerprint   # same scores


def test_shipped_scores_serve_a_first_run_after_one_probe(pairs, tmp_path, monkeypatch,
                                                           no_shipped):
    """The whole path: a run fills a cache, ``tools/ship_scores.py`` ships it, and a first
    run in an empty cache reads the probe's tokens and no pair's."""
    made = scorer_in(tmp_path / "book", monkeypatch).predict(pairs)
    monkeypatch.setattr(sys, "argv", ["ship_scores.py", str(tmp_path / "book")])
    assert ship_scores.main() == 0
    monkeypatch.setattr(shipped, "_OPEN", {})           # a new process: files looked up anew
    fresh = scorer_in(tmp_path / "empty", monkeypatch)
    assert np.allclose(fresh.predict(pairs), made, atol=1e-6)
    probe = ship_scores.probe_pairs()
    assert read_tokens(fresh) == len({q for q, _ in probe}) + len({p for _, p in probe})
    file = shipped.shipped_for(fresh._late_store()[1], ShippedScores)[0]
    assert file.usable is True and file.taken == len(pairs)


def test_scores_this_model_does_not_give_are_refused(pairs, tmp_path, monkeypatch):
    scorer = scorer_in(tmp_path, monkeypatch)
    probe = ship_scores.probe_pairs()[:2]
    path = tmp_path / "other.npz"
    np.savez(path, hashes=np.zeros((1, 32), np.uint8), vectors=np.ones((1, 1), np.float32),
             probe_texts=np.array(probe),
             probe_vectors=scorer._maxsim_rows(probe) + 2 * SCORE_TOLERANCE)
    file = ShippedScores(path)
    with pytest.warns(UserWarning, match="scores other.npz are not used.*differ.*another model"):
        assert file.take(["00" * 32], scorer._maxsim_rows) == {}


def test_the_books_scores_are_shipped_and_cover_chapter_9(monkeypatch, tmp_path):
    """The file exists, and a first run of chapter 9's Python-docs pipeline on three of its
    questions reads the tokens of the file's probe and of no candidate (fails when a corpus
    or the retrieval under the second stage changes: rerun ``tools/ship_scores.py`` as its
    docstring says)."""
    from ragbook import BM25Index, CrossEncoderReranker, DenseIndex, HybridRetriever, Pipeline

    monkeypatch.setattr(shipped, "_OPEN", {})   # a new process: the file verified afresh
    scorer = scorer_in(tmp_path, monkeypatch)
    assert (REAL_FOLDER / f"{scorer._late_store()[1]}.npz").is_file(), \
        "no shipped MaxSim scores: run tools/ship_scores.py"
    py = load_pydocs()
    hybrid = HybridRetriever(DenseIndex(scorer.encoder), BM25Index()).build(py.documents)
    pipeline = Pipeline(hybrid, reranker=CrossEncoderReranker(scorer))
    for q in random.Random(0).sample(py.split("test"), 40)[:3]:
        assert pipeline.prepare(q.text).candidates
    probe = ship_scores.probe_pairs()
    assert read_tokens(scorer) == len({q for q, _ in probe}) + len({p for _, p in probe})
