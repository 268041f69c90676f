"""Chapter 6 (solutions/06-reranking.py): a thresholded rerank, word windows for a long
passage and their best score, how many pairs fit a latency budget; then windows over
help-centre articles, and MaxSim over token vectors."""
from __future__ import annotations

import math

import numpy as np

from .. import datasets, late_interaction, rerank
from .core import Case, Chapter, Mistake, predicted

CHAPTER = Chapter("06-reranking")


@CHAPTER.exercise(
    "thresholded_rerank",
    "order the candidates by the reranker's score (ties: original order), keep those at or "
    "above the threshold, and at most k of them — an empty list is a valid answer",
    mistakes=(Mistake("a strict threshold (>)", "a score equal to the threshold is kept: "
                      ">=", lambda ids, scores, k, th: [ids[i] for i in
                                           rerank.rerank_positions(
                                               scores, k, math.nextafter(th, math.inf))]),))
def thresholded_rerank_cases():
    """Five scored candidates (two tied) at thresholds that keep all, some, one or none."""
    ids = ["c1", "c2", "c3", "c4", "c5"]
    scores = [0.20, 0.91, 0.35, 0.91, 0.05]
    for k, th in ((3, 0.0), (3, 0.3), (2, 0.9), (5, 0.95), (1, 0.3), (5, 0.35)):
        yield Case((ids, scores, k, th), [ids[i] for i in rerank.rerank_positions(scores, k, th)])


@CHAPTER.exercise("word_windows",
                  "windows of `size` words starting every `step` words, as (first word, end "
                  "word) index pairs; the last window must reach the last word; a short text "
                  "is one window")
def word_windows_cases():
    """Word counts longer than, equal to and shorter than one window."""
    for n, size, step in ((250, 100, 50), (100, 100, 50), (30, 100, 50), (11, 4, 3), (10, 5, 5)):
        yield Case((n, size, step), rerank.word_window_spans(n, size, overlap=size - step))


@CHAPTER.exercise("max_window_score", "a passage is as relevant as its best window: the max of "
                                      "its window scores, one number per passage",
                  mistakes=(Mistake("the mean of the windows", "one good window is enough: take "
                                    "the max, not the mean",
                                    lambda s: [sum(w) / len(w) for w in s]),))
def max_window_score_cases():
    """Window scores of one or several passages, negative ones included."""
    for scores in ([[0.1, 0.7, 0.3]], [[0.2], [0.5, 0.4], [0.9, 0.1, 0.1, 0.2]], [[-0.2, -0.1]]):
        yield Case((scores,), rerank.max_window_scores(scores))


@CHAPTER.exercise(
    "candidates_for_budget",
    "how many (query, passage) pairs fit in the latency budget? whole candidates only "
    "(round down), never more than are available",
    mistakes=(Mistake("no cap at the number available", "you cannot rerank more than "
                      "retrieval returned: min(..., available)",
                      lambda ms, budget, available: int(budget // ms)),
              Mistake("rounding to the nearest", "a pair that does not fully fit is over "
                      "budget: round down (//)", lambda ms, budget, available:
                      min(available, round(budget / ms)))))
def candidates_for_budget_cases():
    """Budgets that fit some, all and none of the candidates."""
    for ms_per_pair, budget, available in ((2.0, 100.0, 50), (2.0, 100.0, 30), (3.0, 100.0, 80),
                                           (7.5, 5.0, 50), (1.0, 250.0, 100)):
        yield Case((ms_per_pair, budget, available),
                   rerank.candidates_within_budget(ms_per_pair, budget, available))


# -- on the real corpus

def _by_words(rank: int = 0):
    """The help-centre article with the ``rank``-th most words (0 = the longest)."""
    docs = sorted(datasets.load_helpcentre().documents,
                  key=lambda d: (-len(d.text.split()), d.id))
    return docs[rank]


@CHAPTER.exercise("passage_windows",
                  "find each word's character span (re.finditer(r'\\S+', text)); window i "
                  "runs from the start of its first word to the end of its last; a text of at "
                  "most `size` words is one window, text.strip()")
def passage_windows_cases():
    """A long, a middling and a short article, at three (size, step)."""
    for rank in (0, 40, 120):
        text = _by_words(rank).text
        for size, step in ((100, 50), (60, 60), (500, 250)):
            yield Case((text, size, step), rerank.windows(text, size, size - step))


@CHAPTER.exercise("predict_window_count",
                  "windows of 100 words starting every 50: about one window per 50 words of "
                  "the page")
def predict_window_count_cases():
    """The learner's guess of the longest article's 100/50 windows, within 1."""
    actual = len(rerank.windows(_by_words(0).text, 100, 50))
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 1,
                                    "a prediction within 1 passes"))


def _unit_rows(r: np.random.Generator, n: int, dim: int = 8) -> np.ndarray:
    rows = r.normal(size=(n, dim))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@CHAPTER.exercise(
    "maxsim",
    "cosines of every (question token, passage token) pair: query_tokens @ passage_tokens.T; "
    "for each question token (row) its best passage token, then the mean over the question",
    tolerance=1e-5,
    mistakes=(Mistake("the best match per passage token", "the max runs over the passage's "
                      "tokens for each question token: max(axis=1), then the mean",
                      lambda q, p: float((q @ p.T).max(axis=0).mean())),
              Mistake("a sum over the question's tokens", "ragbook averages over the "
                      "question's tokens (ColBERT sums): the mean keeps the cosine's scale",
                      lambda q, p: float((q @ p.T).max(axis=1).sum())),
              Mistake("the mean of every similarity", "each question token counts only its "
                      "best passage token: the max first, then the mean",
                      lambda q, p: float((q @ p.T).mean()))))
def maxsim_cases():
    """Random unit token vectors (question and passage of several lengths, one token each),
    a perfect match, and a half match."""
    r = np.random.default_rng(6)
    for n_query, n_passage in ((3, 5), (1, 4), (6, 1), (4, 12), (2, 2)):
        q, p = _unit_rows(r, n_query), _unit_rows(r, n_passage)
        yield Case((q, p), late_interaction.maxsim(q, p))
    q = np.eye(2)
    for p in (q, q[:1]):
        yield Case((q, p), late_interaction.maxsim(q, p))
