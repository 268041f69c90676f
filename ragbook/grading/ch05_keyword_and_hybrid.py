"""Chapter 5 (solutions/05-keyword-and-hybrid.py): BM25's IDF and term score, reciprocal rank
fusion, what fusion rescues, min-max normalisation; then IDF and document frequency on the
help centre."""
from __future__ import annotations

import math

import numpy as np

from .. import bm25, datasets, fusion
from ..types import Hit
from .core import Case, Chapter, Mistake, divide_quietly, predicted
from .corpus import helpcentre_bm25

CHAPTER = Chapter("05-keyword-and-hybrid")


@CHAPTER.exercise("bm25_idf", "Lucene's IDF: the log of 1 + (N - n + 0.5) / (n + 0.5); it stays "
                              "above zero even for a term in every document",
                  mistakes=(Mistake("the classic IDF without the 1 +", "Lucene adds 1 inside "
                                    "the log, so a term in most documents does not score below "
                                    "zero", lambda n_docs, df:
                                    math.log((n_docs - df + 0.5) / (df + 0.5))),))
def bm25_idf_cases():
    """Document frequencies from one document to every document."""
    for n_docs, df in ((1000, 1), (1000, 10), (1000, 500), (1000, 1000), (3, 2), (10_370, 4_321)):
        yield Case((n_docs, df), bm25.idf_lucene(n_docs, df))


@CHAPTER.exercise(
    "bm25_term_score",
    "idf times a saturating tf: tf / (tf + k1 * (1 - b + b * doc_len / avgdl)); b decides "
    "how much longer-than-average documents are penalised",
    mistakes=(Mistake("the (k1 + 1) factor", "Lucene's BM25, the one this workbook "
                      "uses, drops the constant (k1 + 1) from the numerator",
                      lambda tf, dl, avgdl, idf, k1, b:
                      bm25.term_weight(tf, dl, avgdl, idf, k1, b) * (k1 + 1)),
              Mistake("doc_len / avgdl upside down", "a longer-than-average document "
                      "is penalised: b * doc_len / avgdl", lambda tf, dl, avgdl, idf, k1, b:
                      bm25.term_weight(tf, avgdl, dl, idf, k1, b))))
def bm25_term_score_cases():
    """Term frequencies, document lengths and (k1, b) settings, a missing term included."""
    for args in ((1, 100, 100, 2.0, 1.2, 0.75), (5, 100, 100, 2.0, 1.2, 0.75),
                 (3, 400, 100, 1.5, 1.2, 0.75), (3, 400, 100, 1.5, 1.2, 0.0),
                 (2, 50, 120, 0.7, 2.0, 1.0), (0, 80, 100, 3.0, 1.2, 0.75)):
        yield Case(args, bm25.term_weight(*args))


def _rrf_ids(rankings, rrf_k):
    hits = [[Hit(d, 0.0, r) for r, d in enumerate(rank, 1)] for rank in rankings]
    return [(h.id, h.score) for h in fusion.reciprocal_rank_fusion(hits, rrf_k=rrf_k)]


def _rrf_variant(first_rank: int, ties_by_id: bool):
    """RRF with ranks counted from ``first_rank``, ties broken by id or left as first seen."""
    def rrf(rankings, rrf_k):
        totals = {}
        for ranking in rankings:
            for rank, doc in enumerate(ranking, first_rank):
                totals[doc] = totals.get(doc, 0.0) + 1.0 / (rrf_k + rank)
        return sorted(totals.items(), key=lambda t: (-t[1], t[0]) if ties_by_id else -t[1])
    return rrf


@CHAPTER.exercise("rrf", "each list adds 1 / (rrf_k + rank) to a document it contains, "
                         "ranks counting from 1; sort by the total, highest first, ties by id",
                  mistakes=(Mistake("ranks counted from 0", "enumerate(ranking, 1): the top "
                                    "document adds 1 / (rrf_k + 1)", _rrf_variant(0, True)),
                            Mistake("ties left in the order first seen", "sort with a key of "
                                    "(-total, id), so equal totals come out by id",
                                    _rrf_variant(1, False))))
def rrf_cases():
    """Overlapping, disjoint, empty and tied rankings, at rrf_k = 60, 0 and 1."""
    for rankings, rrf_k in (([["a", "b", "c"], ["b", "a"]], 60),
                            ([["a", "b", "c"], ["c", "d"]], 60), ([["x"], [], ["y", "x"]], 60),
                            ([["a", "b"], ["b", "a"]], 0), ([["p", "q", "r"]], 1),
                            ([["b", "a"], ["a", "b"]], 60)):
        yield Case((rankings, rrf_k), _rrf_ids(rankings, rrf_k))


@CHAPTER.exercise("rescued_documents",
                  "a rescued document is in the fused top n, not in the dense top n, and was "
                  "found by the keyword list; keep the fused order")
def rescued_documents_cases():
    """One dense, keyword and fused ranking, cut at n = 1, 3, 5, 7."""
    dense = ["d1", "d2", "d3", "d4", "d5", "d6"]
    keyword = ["k1", "d3", "k2", "d9", "d1"]
    fused = ["d3", "d1", "k1", "d2", "k2", "d4", "d9"]
    for n in (1, 3, 5, 7):
        yield Case((dense, keyword, fused, n), fusion.rescued(dense, keyword, fused, n))


_EQUAL_SCORES = ("no special case for equal scores", "when the highest equals the lowest, "
                 "hi - lo is 0: give every score 1.0 instead of dividing")


@CHAPTER.exercise(
    "minmax_normalise",
    "map the smallest score to 0 and the largest to 1; if all scores are "
    "equal, give every one 1.0; an empty list stays empty",
    mistakes=(Mistake(*_EQUAL_SCORES, lambda s: [(x - min(s)) / (max(s) - min(s)) for x in s]),
              Mistake(*_EQUAL_SCORES, lambda s: list(divide_quietly(np.subtract(s, min(s)),
                                                                    max(s) - min(s)))),
              Mistake("equal scores given 0.0", "when all scores are equal every one is "
                      "the best: 1.0", lambda s: [0.0] * len(s) if max(s) == min(s)
                      else fusion.minmax_normalise(s))))
def minmax_normalise_cases():
    """Scores of several signs and spreads, a single one, equal ones and none."""
    for scores in ([3.0, 1.0, 2.0], [12.5, 7.25, 0.5, 9.0], [0.42], [2.0, 2.0], [-1.0, 0.0, 1.0],
                   []):  # a channel that found nothing: nothing to scale
        yield Case((scores,), fusion.minmax_normalise(scores))


# -- on the real corpus

def _hc_doc_terms() -> list[list[str]]:
    """Every help-centre article as the BM25 index tokenizes it."""
    tok = helpcentre_bm25().tokenizer
    return [tok(d.text) for d in datasets.load_helpcentre().documents]


def _idf_from_index(term: str) -> float:
    idx = helpcentre_bm25()
    if term in idx.vocab_:
        return float(idx.idf_[idx.vocab_[term]])
    return bm25.idf_lucene(len(idx), 0)


def _idf_counting_occurrences(docs, term):
    """Wrong: n counts every occurrence of the term, not the documents containing it."""
    return bm25.idf_lucene(len(docs), sum(d.count(term) for d in docs))


@CHAPTER.exercise("corpus_idf",
                  "n = the number of documents whose token list contains the term (once per "
                  "document); then Lucene's IDF: log(1 + (N - n + 0.5) / (n + 0.5))",
                  mistakes=(Mistake("document frequency counting occurrences", "n is the "
                                    "number of documents that contain the term at least once "
                                    "(term in set(doc)), not how often it occurs",
                                    _idf_counting_occurrences),))
def corpus_idf_cases():
    """Every article's tokens, with rare, common and absent terms."""
    docs = _hc_doc_terms()
    for term in ("refund", "plan", "saml", "invoice", "zebra"):
        n = sum(term in set(d) for d in docs)
        yield Case((docs, term), _idf_from_index(term),
                   about=f"the {len(docs)} help-centre articles as token lists, term {term!r} "
                         f"(in {n} of them)")


@CHAPTER.exercise("predict_plan_df",
                  "this is a SaaS help centre: plans (Free, Starter, Pro, Enterprise) come up "
                  "on billing, account and feature pages alike")
def predict_plan_df_cases():
    """The learner's guess of how many articles contain "plan", within 25%."""
    actual = sum("plan" in set(t) for t in _hc_doc_terms())
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.25 * actual,
                                    "a prediction within 25% passes"))
