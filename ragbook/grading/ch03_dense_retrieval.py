"""Chapter 3 (solutions/03-dense-retrieval.py): top-k by one matrix product, filtering before
and after the search, and the context a reader is handed; then post-filtering help-centre
rankings."""
from __future__ import annotations

import numpy as np

from .. import cost, datasets, dense, filters
from .. import similarity as sim
from .core import Case, Chapter, Mistake, predicted
from .corpus import answerable_dev_questions, bm25_ranking

CHAPTER = Chapter("03-dense-retrieval")


def _retrieval_case(seed: int, n: int = 40, dim: int = 8):
    r = np.random.default_rng(seed)
    m = sim.normalise(r.normal(size=(n, dim)))
    q = sim.normalise(r.normal(size=dim))
    meta = [{"department": ["billing", "technical", "security"][i % 3],
             "status": "superseded" if i % 7 == 0 else "current"} for i in range(n)]
    return q, m, meta


@CHAPTER.exercise("top_k", "score every row against the query with one matrix product, then "
                           "take the positions of the k highest scores, best first",
                  mistakes=(Mistake("the k lowest scores", "np.argsort sorts from low to high: "
                                    "sort -scores, or reverse the order",
                                    lambda q, m, k: [int(i) for i in np.argsort(m @ q)[:k]]),))
def top_k_cases():
    """A random unit query against 40 unit rows, for k from 1 to all of them."""
    for seed, k in ((0, 1), (1, 5), (2, 40)):
        q, m, _ = _retrieval_case(seed)
        yield Case((q, m, k), dense.top_k_rows(q, m, k))


@CHAPTER.exercise(
    "filtered_top_k",
    "keep only the rows whose metadata has every key/value of `where`, rank just those, "
    "and return their original row positions",
    mistakes=(Mistake("positions among the kept rows", "return each row's position in "
                      "the whole matrix: keep the list of kept row numbers and map back",
                      lambda q, m, meta, where, k: dense.top_k_rows(
                          q, np.asarray(m)[[i for i, md in enumerate(meta) if all(
                              md.get(key) == v for key, v in where.items())]], k)),))
def filtered_top_k_cases():
    """Filters on one key, two keys, and a value no row has."""
    for seed, where, k in ((3, {"department": "security"}, 5), (4, {"status": "superseded"}, 10),
                           (5, {"department": "billing", "status": "current"}, 3),
                           (6, {"department": "legal"}, 5)):
        q, m, meta = _retrieval_case(seed)
        yield Case((q, m, meta, where, k), dense.top_k_rows(q, m, k, meta, where))


@CHAPTER.exercise(
    "postfilter",
    "first take the k * overfetch best rows of the whole matrix, then drop the ones "
    "that fail the filter, then keep at most k — and see how few can be left",
    mistakes=(Mistake("filtering before ranking", "a post-filter ranks the whole matrix, "
                      "takes the k * overfetch best, and only then filters",
                      lambda q, m, meta, where, k, over:
                      dense.top_k_rows(q, m, k, meta, where)),
              Mistake("no overfetch", "fetch k * overfetch rows before filtering",
                      lambda q, m, meta, where, k, over:
                      dense.postfilter_rows(q, m, meta, where, k, 1))))
def postfilter_cases():
    """A rare and a common filter value, with and without overfetch."""
    for seed, where, k, over in ((7, {"status": "superseded"}, 5, 1),
                                 (8, {"status": "superseded"}, 5, 4),
                                 (9, {"department": "technical"}, 4, 2)):
        q, m, meta = _retrieval_case(seed)
        yield Case((q, m, meta, where, k, over), dense.postfilter_rows(q, m, meta, where, k, over))


@CHAPTER.exercise("context_tokens",
                  "the reader is handed the first k chunks of the ranking; add up their token "
                  "counts (fewer if the ranking is shorter than k)")
def context_tokens_cases():
    """Token counts of rankings shorter and longer than k, and an empty one."""
    for counts, k in (([120, 80, 200, 40], 2), ([120, 80, 200, 40], 10), ([256] * 50, 20), ([], 5)):
        yield Case((counts, k), cost.context_tokens(counts, k))


# -- on the real corpus

def _hc_metadata() -> dict:
    return {d.id: dict(d.metadata) for d in datasets.load_helpcentre().documents}


@CHAPTER.exercise("postfilter_survivors",
                  "take the first k * overfetch ids of the ranking, keep those whose metadata "
                  "has every key/value of `where`, then keep at most k")
def postfilter_survivors_cases():
    """BM25 rankings of three dev questions, post-filtered three ways."""
    meta = _hc_metadata()
    for q in answerable_dev_questions(3):
        ranked = bm25_ranking(q.text, 20)
        for where, k, over in (({"department": meta[q.gold[0]]["department"]}, 5, 1),
                               ({"status": "current"}, 3, 2),
                               ({"department": "security", "status": "current"}, 5, 4)):
            yield Case((ranked, meta, where, k, over),
                       [d for d in ranked[:k * over] if filters.matches(meta[d], where)][:k])


def _survivors_of_security_filter() -> int:
    q = answerable_dev_questions(1)[0]
    meta = _hc_metadata()
    return sum(filters.matches(meta[d], {"department": "security"})
               for d in bm25_ranking(q.text, 5))


@CHAPTER.exercise("predict_postfilter_survivors",
                  "a billing question's top 5 is mostly billing pages; a security filter "
                  "applied after the search keeps only the security pages among those 5")
def predict_postfilter_survivors_cases():
    """The learner's guess of the security pages in a billing question's top 5, within 1."""
    actual = _survivors_of_security_filter()
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 1,
                                    "a prediction within 1 passes"))
