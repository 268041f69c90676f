"""Chapter 4 (solutions/04-evaluating-retrieval.py): recall, hit rate, reciprocal rank, MRR
and nDCG at k, with the common ways to get k or the average wrong; then BM25's recall on the
help centre's dev questions."""
from __future__ import annotations

import math

from .. import evaluate
from .core import Case, Chapter, Mistake, predicted
from .corpus import answerable_dev_questions, bm25_ranking

CHAPTER = Chapter("04-evaluating-retrieval")

# The first relevant document sits at rank 1, 3, none, 1, none, 2, 4: with k = 1, 2, 3 some
# ranking has it exactly at rank k and another at k + 1, so a k off by one fails a case.
# "b" graded 0 is not relevant; nothing relevant at all gives 0.0.
_RANKED = [["a", "b", "c", "d", "e"], ["x", "y", "a", "b"], ["x", "y", "z"], ["b", "x", "a"], [],
           ["x", "g", "y", "z"], ["x", "y", "z", "g", "h"], ["b", "a"], ["a", "b"]]
_RELEVANT = [{"a": 1}, {"a": 1, "b": 1}, {"q": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1},
             {"g": 1}, {"g": 1, "h": 1}, {"b": 0, "a": 1}, {}]


def _shorter_k(metric):
    """The k off by one: ``ranked[:k-1]``, one result fewer than asked for."""
    return lambda relevant, ranked, k: metric(relevant, ranked[:k - 1], k)


def _ignoring_k(metric):
    """No cut at k: the whole ranking counts."""
    return lambda relevant, ranked, k: metric(relevant, ranked, max(len(ranked), len(relevant), 1))


def _recall_over_k(relevant, ranked, k):
    """Wrong: divides by k, not by the number of relevant documents."""
    return len({d for d, r in relevant.items() if r > 0}.intersection(ranked[:k])) / k


def _rr_from_0(relevant, ranked, k):
    """Wrong: ranks counted from 0, so the top result divides by zero."""
    for rank, d in enumerate(ranked[:k]):
        if relevant.get(d, 0) > 0:
            return 1.0 / rank
    return 0.0


def _mean_of(rr):
    """MRR built on a given reciprocal rank function."""
    return lambda rels, rankeds, k: (sum(rr(r, d, k) for r, d in zip(rels, rankeds, strict=True))
                                     / len(rels))


def _mrr_over_found(rels, rankeds, k):
    """Wrong: averages over the questions whose answer was found, not over all of them."""
    rrs = [evaluate.reciprocal_rank(r, d, k) for r, d in zip(rels, rankeds, strict=True)]
    found = [x for x in rrs if x > 0]
    return sum(found) / len(found) if found else 0.0


def _ndcg_with(discount, cut_ideal=True):
    """nDCG with another discount, or with the ideal ordering not cut at k."""
    def ndcg(relevant, ranked, k):
        dcg = lambda gains: sum(g / discount(r) for r, g in enumerate(gains, 1))  # noqa: E731
        ideal = sorted((r for r in relevant.values() if r > 0), reverse=True)
        best = dcg(ideal[:k] if cut_ideal else ideal)
        return dcg([relevant.get(d, 0) for d in ranked[:k]]) / best if best > 0 else 0.0
    return ndcg


_K_SHORT = ("a k off by one (ranked[:k-1])", "the first k results are ranked[:k]: rank k is "
            "included and rank k + 1 is not")
_K_IGNORED = ("no cut at k", "only the first k results count: slice with ranked[:k]")
_RECALL_MISTAKES = (Mistake(*_K_SHORT, _shorter_k(evaluate.recall_at_k)),
                    Mistake(*_K_IGNORED, _ignoring_k(evaluate.recall_at_k)),
                    Mistake("precision@k handed in as recall", "recall divides by the number "
                            "of relevant documents; dividing by k gives precision@k",
                            _recall_over_k))
_RR_MISTAKES = (Mistake(*_K_SHORT, _shorter_k(evaluate.reciprocal_rank)),
                Mistake(*_K_IGNORED, _ignoring_k(evaluate.reciprocal_rank)),
                Mistake("ranks counted from 0", "enumerate(..., 1): the top result has rank 1, "
                        "so its reciprocal rank is 1.0", _rr_from_0))


def _graded_rankings(ks):
    """(relevant, ranked, k) for every sample ranking at every k in ``ks``."""
    for rel, ranked in zip(_RELEVANT, _RANKED, strict=True):
        for k in ks:
            yield rel, ranked, k


@CHAPTER.exercise("recall_at_k",
                  "of the relevant documents, what share appears in the first k of the "
                  "ranking?", mistakes=_RECALL_MISTAKES)
def recall_at_k_cases():
    """Every sample ranking at k = 1, 2, 3, 5."""
    for rel, ranked, k in _graded_rankings((1, 2, 3, 5)):
        yield Case((rel, ranked, k), evaluate.recall_at_k(rel, ranked, k))


@CHAPTER.exercise(
    "hit_at_k", "1.0 if at least one relevant document is in the first k, else 0.0",
    mistakes=(Mistake(*_K_SHORT, _shorter_k(evaluate.hit_at_k)),
              Mistake(*_K_IGNORED, _ignoring_k(evaluate.hit_at_k)),
              Mistake("grade 0 counted as relevant", "a document is relevant only when "
                      "its grade is above 0",
                      lambda rel, ranked, k: float(any(d in rel for d in ranked[:k])))))
def hit_at_k_cases():
    """Every sample ranking at k = 1, 2, 3, 5."""
    for rel, ranked, k in _graded_rankings((1, 2, 3, 5)):
        yield Case((rel, ranked, k), evaluate.hit_at_k(rel, ranked, k))


@CHAPTER.exercise("reciprocal_rank",
                  "walk down the first k results; at the first relevant one return "
                  "1 / its rank (ranks count from 1); none found -> 0.0",
                  mistakes=_RR_MISTAKES)
def reciprocal_rank_cases():
    """Every sample ranking at k = 1, 2, 3, 10."""
    for rel, ranked, k in _graded_rankings((1, 2, 3, 10)):
        yield Case((rel, ranked, k), evaluate.reciprocal_rank(rel, ranked, k))


@CHAPTER.exercise(
    "mean_reciprocal_rank",
    "the mean over queries of the reciprocal rank; the chapter's worked example "
    "(first correct at ranks 1, 3, 2, not found, 1) gives 0.567",
    mistakes=tuple(Mistake(m.name, m.advice + " (in reciprocal_rank, which MRR calls)",
                           _mean_of(m.wrong)) for m in _RR_MISTAKES) +
    (Mistake("the mean over the questions answered", "divide by the number of questions: "
             "one whose answer is not found counts as 0", _mrr_over_found),))
def mean_reciprocal_rank_cases():
    """The chapter's worked example and all the sample rankings, at four k."""
    worked = [["g", "a"], ["a", "b", "g"], ["a", "g"], ["a", "b", "c"], ["g"]]
    for k in (10, 1, 2, 3):
        yield Case(([{"g": 1}] * 5, worked, k),
                   evaluate.mean_reciprocal_rank([{"g": 1}] * 5, worked, k))
    for k in (10, 1, 2, 3):
        yield Case((_RELEVANT, _RANKED, k), evaluate.mean_reciprocal_rank(_RELEVANT, _RANKED, k))


@CHAPTER.exercise(
    "ndcg_at_k",
    "DCG sums relevance / log2(rank + 1) over the first k; divide by the DCG of the best "
    "possible ordering of the relevant documents",
    mistakes=(Mistake(*_K_SHORT, _shorter_k(evaluate.ndcg_at_k)),
              Mistake(*_K_SHORT, lambda rel, ranked, k: evaluate.ndcg_at_k(rel, ranked, k - 1)),
              Mistake(*_K_IGNORED, _ignoring_k(evaluate.ndcg_at_k)),
              Mistake("a discount of log2(rank)", "the discount is log2(rank + 1) with "
                      "ranks from 1 (log2(i + 2) with i from 0), so rank 1 counts in full",
                      _ndcg_with(math.log2)),
              Mistake("an ideal DCG not cut at k", "the ideal ordering is cut to its "
                      "first k grades too", _ndcg_with(lambda r: math.log2(r + 1), False))))
def ndcg_at_k_cases():
    """The sample rankings and three with graded relevance, at k = 1, 2, 3, 10."""
    graded = [{"a": 3, "b": 1}, {"c": 2, "a": 1}]
    extra = [(graded[0], ["b", "x", "a"]), (graded[1], ["a", "c"]), (graded[1], ["x", "c", "a"])]
    for rel, ranked in list(zip(_RELEVANT, _RANKED, strict=True)) + extra:
        for k in (1, 2, 3, 10):
            yield Case((rel, ranked, k), evaluate.ndcg_at_k(rel, ranked, k))


# -- on the real corpus

def _hc_dev_run(k: int = 10):
    """(qrels list, rankings, labels) of BM25 on the help centre's answerable dev questions."""
    qs = answerable_dev_questions(None)
    return ([{d: 1 for d in q.gold} for q in qs], [bm25_ranking(q.text, k) for q in qs],
            [f"{q.id} {q.text!r}" for q in qs])


def _mean_recall(relevant, rankings, k) -> float:
    qrels = {str(i): rel for i, rel in enumerate(relevant)}
    run = {str(i): {d: float(len(r) - n) for n, d in enumerate(r)} for i, r in enumerate(rankings)}
    return evaluate.evaluate(qrels, run, f"recall@{k}")


def _mean_precision(relevant, rankings, k) -> float:
    """Wrong: precision@k (found / k) averaged, handed in as recall."""
    return sum(_recall_over_k(rel, ranked, k)
               for rel, ranked in zip(relevant, rankings, strict=True)) / len(relevant)


@CHAPTER.exercise("mean_recall",
                  "recall@k of each question (its relevant documents found in the first k, as "
                  "a share), then the mean over the questions",
                  mistakes=(Mistake(_RECALL_MISTAKES[2].name, _RECALL_MISTAKES[2].advice,
                                    _mean_precision),))
def mean_recall_cases():
    """BM25's rankings of every answerable dev question, at k = 1, 5, 10, and of five at 3;
    a failure names the first question whose own recall differs."""
    relevant, rankings, labels = _hc_dev_run()

    def case(n: int, k: int) -> Case:
        rel, ranked = relevant[:n], rankings[:n]
        return Case((rel, ranked, k), _mean_recall(rel, ranked, k),
                    about=f"BM25's top 10 for the first {n} answerable help-centre dev "
                          f"questions, their gold documents, k={k}",
                    items=lambda: ((labels[i], ([rel[i]], [ranked[i]], k),
                                    _mean_recall([rel[i]], [ranked[i]], k)) for i in range(n)))

    for k in (1, 5, 10):
        yield case(len(relevant), k)
    yield case(5, 3)


@CHAPTER.exercise("predict_bm25_recall",
                  "the dev split mixes easy exact-token questions with paraphrases and "
                  "look-alike pages; BM25 only matches words")
def predict_bm25_recall_cases():
    """The learner's guess of BM25's mean recall@5 on the dev split, within 0.15."""
    relevant, rankings, _ = _hc_dev_run()
    actual = _mean_recall(relevant, rankings, 5)
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                    "a prediction within 0.15 passes"))
