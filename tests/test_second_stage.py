"""Late interaction (MaxSim) and the learned reranker, on real help-centre text."""
from __future__ import annotations

import numpy as np
import pytest

from ragbook import NotBuiltError
from ragbook.bm25 import BM25Index
from ragbook.late_interaction import MaxSimReranker, MaxSimScorer, maxsim
from ragbook.learned_rerank import FEATURES, LearnedReranker
from ragbook.types import Hit

QUESTION = "Which port does the Hub need to reach the relay?"


@pytest.fixture(scope="module")
def scorer():
    return MaxSimScorer(dense_weight=0.0)


def test_maxsim_from_scratch_equals_the_scorer(hc, scorer):
    passage = hc.doc("hardware-hub-err-conn-4021").text
    model = scorer.encoder.model
    tok = model.tokenizer
    # from scratch: run the transformer, keep each token's last hidden state, drop [CLS]/[SEP]
    import torch

    vecs = []
    for text in (QUESTION, passage):
        enc = tok(text, return_tensors="pt", truncation=True, max_length=256)
        with torch.no_grad():
            hidden = model[0].auto_model(**enc).last_hidden_state[0, 1:-1].numpy()
        vecs.append(hidden / np.linalg.norm(hidden, axis=1, keepdims=True))
    by_hand = float((vecs[0] @ vecs[1].T).max(axis=1).mean())
    assert by_hand == pytest.approx(maxsim(*vecs), abs=1e-6)
    assert by_hand == pytest.approx(float(scorer.predict([(QUESTION, passage)])[0]), abs=2e-3)


@pytest.mark.parametrize("qid, other", [
    ("ba-q036", "billing-update-card"),        # an exact code against a card page
    ("ba-q020", "account-profile-settings"),   # a language question against a settings page
    ("ba-q028", "billing-update-card"),        # "proof of payment" against another billing page
])
def test_maxsim_prefers_the_passage_with_the_answer(hc, hc_chunks, scorer, qid, other):
    """The chunk holding the labelled answer against the first chunk of another page."""
    q = next(q for q in hc.questions if q.id == qid)
    gold = next(c.text for c in hc_chunks
                if c.doc_id == q.gold[0] and q.answers[0]["text"] in c.text)
    wrong = next(c.text for c in hc_chunks if c.doc_id == other)
    s = scorer.predict([(q.standalone, gold), (q.standalone, wrong)])
    assert s[0] > s[1], (qid, s)


@pytest.fixture(scope="module")
def fitted(hc, hc_chunks):
    first = BM25Index().build(hc_chunks)
    train = [(q.id, q.standalone) for q in hc.split("train") if q.gold][:12]
    reranker = LearnedReranker(MaxSimScorer(), candidates=10)
    return reranker.fit(train, hc.qrels("train"), first), first


def test_learned_reranker_round_trip_keeps_scores_and_fingerprint(fitted, tmp_path):
    reranker, first = fitted
    hits = first.search(QUESTION, k=10)
    path = reranker.save(tmp_path / "learned.json")
    again = LearnedReranker.load(path, MaxSimScorer())
    assert again.fingerprint == reranker.fingerprint
    np.testing.assert_allclose(again.score(QUESTION, hits), reranker.score(QUESTION, hits),
                               atol=1e-6)
    assert [h.id for h in again.rerank(QUESTION, hits, k=5)] == \
        [h.id for h in reranker.rerank(QUESTION, hits, k=5)]
    assert reranker.features(QUESTION, hits).shape == (len(hits), len(FEATURES))


def test_load_refuses_another_scorer(fitted, tmp_path):
    path = fitted[0].save(tmp_path / "learned.json")
    with pytest.raises(ValueError, match="fingerprint"):
        LearnedReranker.load(path, MaxSimScorer(dense_weight=0.3))


def test_fingerprints_change_with_settings(fitted):
    assert MaxSimScorer().fingerprint != MaxSimScorer(dense_weight=0.3).fingerprint
    assert MaxSimReranker().fingerprint != MaxSimReranker(dense_weight=0.3).fingerprint
    assert LearnedReranker().fingerprint != LearnedReranker(C=2.0).fingerprint
    unfitted = LearnedReranker(MaxSimScorer(), candidates=10)
    assert unfitted.fingerprint != fitted[0].fingerprint      # the weights are part of it


def test_learned_reranker_refuses_to_score_before_fit():
    hit = Hit(id="a", score=1.0, rank=1, text="The Hub uses TCP port 8883.")
    reranker = LearnedReranker()
    with pytest.raises(NotBuiltError, match="fit"):
        reranker.rerank(QUESTION, [hit])
    with pytest.raises(NotBuiltError):
        reranker.save("unused.json")


def test_maxsim_reranker_keeps_the_reranker_contract(hc):
    texts = [hc.doc("billing-refund-policy").text, hc.doc("hardware-hub-err-conn-4021").text]
    hits = [Hit(id=str(i), score=0.0, rank=i + 1, text=t) for i, t in enumerate(texts)]
    reranked = MaxSimReranker(dense_weight=0.5).rerank(QUESTION, hits, k=2)
    assert [h.id for h in reranked] == ["1", "0"] and [h.rank for h in reranked] == [1, 2]
    assert all(-1 <= h.score <= 1 for h in reranked)
    floor = MaxSimReranker(min_rerank_score=reranked[0].score).rerank(QUESTION, hits, k=2)
    assert [h.id for h in floor] == ["1"]
