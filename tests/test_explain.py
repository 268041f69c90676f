"""Explanations add up: every hit of 50 help-centre dev questions, BM25 per term and RRF per
channel, sum to the hit's score within 1e-9, and MaxSim per query token (with its dense
share) to the reranker's score within 1e-5 (the score may come from the MaxSim store, made
in another batch: padding moves token vectors by ~1e-6); ``explain`` picks the explanation
by component, a reranker's says where the hit stood before, a filter's which conditions the
hit met."""

import pytest

from ragbook.explain import (
    explain,
    explain_bm25,
    explain_dense,
    explain_filter,
    explain_result,
    explain_rrf,
)


@pytest.fixture(scope="module")
def dev_questions(hc):
    return [q.standalone for q in hc.split("dev")][:50]


@pytest.fixture(scope="module")
def maxsim_reranker():
    """The offline ``cross_encoder`` role: ``CrossEncoderReranker()`` resolving to MaxSim."""
    from ragbook import CrossEncoderReranker, MaxSimScorer

    reranker = CrossEncoderReranker()
    assert isinstance(reranker.model, MaxSimScorer), type(reranker.model)
    return reranker


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


def test_maxsim_alignments_sum_to_the_reranked_score(hc_hybrid, dev_questions,
                                                     maxsim_reranker):
    """Every reranked hit: the dense share plus one part per query token, naming the passage
    token it aligned with, add up to the score the reranker returned."""
    scorer, checked = maxsim_reranker.model, 0
    for q in dev_questions:
        words = scorer.token_strings(q, "query")
        for hit in maxsim_reranker.order(q, hc_hybrid.search(q, k=20), k=10):
            e = explain(maxsim_reranker, q, hit)
            assert e.stage == "maxsim" and e.score == hit.score
            assert abs(e.total() - hit.score) <= 1e-5, (q, hit.id, e.text())
            tokens, pieces = e.parts[1:], scorer.token_strings(hit.text)
            assert len(tokens) == e.detail["query_tokens"] == len(words) >= 1
            assert [p.name for p in tokens] == [f"{w} -> {pieces[p.detail['passage_token']]}"
                                                for w, p in zip(words, tokens, strict=True)]
            assert all(-1 <= p.detail["cosine"] <= 1 for p in tokens)
            checked += 1
    assert checked == 500


def test_a_rerank_says_the_rank_and_score_before_and_after(hc_hybrid, dev_questions,
                                                           maxsim_reranker):
    from ragbook import RerankedRetriever

    reranked = RerankedRetriever(hc_hybrid, maxsim_reranker, candidates=20)
    moved = 0
    for q in dev_questions[:5]:
        first = {h.id: h for h in hc_hybrid.search(q, k=20)}
        for hit in reranked.search(q, k=5):
            e = explain(reranked, q, hit)
            d = e.detail
            assert (d["rank_before"], d["score_before"]) == (first[hit.id].rank,
                                                              first[hit.id].score)
            assert (d["rank_after"], d["score_after"]) == (hit.rank, hit.score)
            assert d["moved"] == d["rank_before"] - d["rank_after"] and d["scorer"] == "maxsim"
            assert abs(e.total() - hit.score) <= 1e-5, e.text()
            moved += d["moved"] != 0
    assert moved > 0          # the reranker did reorder something: the test can tell


def test_dense_names_the_cosine_and_both_prefixes(hc_hybrid, dev_questions):
    q = dev_questions[0]
    prefixes = hc_hybrid.dense.encoder.prefixes
    for hit in hc_hybrid.dense.search(q, k=5):
        e = explain(hc_hybrid.dense, q, hit)
        assert e == explain_dense(hc_hybrid.dense, q, hit) and e.stage == "dense"
        assert e.total() == hit.score and [p.name for p in e.parts] == ["cosine"]
        assert (e.detail["query_prefix"], e.detail["passage_prefix"]) == (prefixes.query,
                                                                          prefixes.passage)
        assert e.detail["query_embedded"] == prefixes.query + q
        assert "query_prefix=" in e.text() and "passage_prefix=" in e.text()


def test_explain_picks_the_explanation_by_component(hc_hybrid, dev_questions):
    q = dev_questions[1]
    hit = hc_hybrid.search(q, k=1)[0]
    assert explain(hc_hybrid, q, hit) == explain_rrf(hc_hybrid, q, hit)
    bm25_hit = hc_hybrid.bm25.search(q, k=1)[0]
    assert explain(hc_hybrid.bm25, q, bm25_hit).stage == "bm25"
    with pytest.raises(TypeError, match="explain a Pipeline"):
        explain(object(), q, hit)


def test_filter_lists_each_condition_the_hit_met(hc_hybrid):
    scope, where = {"access": {"$nin": ["internal"]}}, {"department": "billing"}
    hits = hc_hybrid.search("refund window", k=5, where=where, scope=scope)
    assert hits
    for hit in hits:
        e = explain_filter(hit, where, scope=scope)
        assert e.total() == e.score == 3.0        # the scope, access present, the where
        assert [p.detail["from"] for p in e.parts] == ["scope", "scope", "where"]
        assert e.parts[0].detail["stored"] == hit.metadata["access"]
    internal = next(h for h in hc_hybrid.search("refund window", k=50)
                    if h.metadata["access"] == "internal")
    e = explain_filter(internal, where, scope=scope)
    assert e.parts[0].value == 0.0 and not e.parts[0].detail["met"] and e.total() < e.score


def test_a_results_sources_are_explained_with_the_filter_it_ran(hc_hybrid, dev_questions,
                                                                maxsim_reranker):
    from ragbook import Pipeline

    for pipeline, stage, tol in ((Pipeline(hc_hybrid), "rrf", 1e-9),
                                 (Pipeline(hc_hybrid, maxsim_reranker, candidates=20),
                                  "rerank", 1e-5)):
        explained = 0
        for q in dev_questions[:5]:
            result = pipeline.ask(q, scope={"access": "public"})
            for hit, (why, met) in zip(result.sources, explain_result(pipeline, result),
                                       strict=True):
                assert why.stage == stage and abs(why.total() - hit.score) <= tol, why.text()
                assert met.stage == "filter" and met.total() == met.score >= 2  # scope, status
                assert any(p.name.startswith("status $ne") for p in met.parts)
                explained += 1
        assert explained > 0


def test_text_names_each_term_and_a_wrong_index_is_refused(hc_hybrid, dev_questions):
    q = dev_questions[0]
    hit = hc_hybrid.bm25.search(q, k=1)[0]
    e = explain_bm25(hc_hybrid.bm25, q, hit)
    assert all(p.name in e.text() for p in e.parts) and "idf=" in e.text()
    with pytest.raises(KeyError, match="not in this BM25 index"):
        explain_bm25(hc_hybrid.bm25, q, type(hit)("no-such-id", 1.0, 1))
