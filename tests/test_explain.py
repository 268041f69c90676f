"""Explanations add up: every hit of 50 help-centre dev questions, BM25 per term and RRF per
channel, sum to the hit's score within 1e-9."""

import pytest

from ragbook.explain import explain_bm25, explain_rrf


@pytest.fixture(scope="module")
def dev_questions(hc):
    return [q.standalone for q in hc.split("dev")][:50]


def test_bm25_terms_sum_to_the_score(hc_hybrid, dev_questions):
    checked = 0
    for q in dev_questions:
        for hit in hc_hybrid.bm25.search(q, k=10):
            e = explain_bm25(hc_hybrid.bm25, q, hit)
            assert abs(e.total() - hit.score) <= 1e-9, (q, hit.id, e.text())
            assert all(p.detail["tf"] > 0 for p in e.parts)
            checked += 1
    assert checked >= 400


def test_rrf_channels_sum_to_the_fused_score(hc_hybrid, dev_questions):
    for q in dev_questions:
        for hit in hc_hybrid.search(q, k=10):
            e = explain_rrf(hc_hybrid, q, hit)
            assert abs(e.total() - hit.score) <= 1e-9, (q, hit.id, e.text())
            assert 1 <= len(e.parts) <= 2


def test_text_names_each_term_and_a_wrong_index_is_refused(hc_hybrid, dev_questions):
    q = dev_questions[0]
    hit = hc_hybrid.bm25.search(q, k=1)[0]
    e = explain_bm25(hc_hybrid.bm25, q, hit)
    assert all(p.name in e.text() for p in e.parts) and "idf=" in e.text()
    with pytest.raises(KeyError, match="not in this BM25 index"):
        explain_bm25(hc_hybrid.bm25, q, type(hit)("no-such-id", 1.0, 1))
