"""Chapter 2 (solutions/02-similarity.py): cosine similarity, unit vectors, distance and
top-k by inner product, then a word-count cosine between help-centre articles."""
from __future__ import annotations

from collections import Counter

import numpy as np

from .. import datasets
from .. import similarity as sim
from ..bm25 import Tokenizer
from .core import Case, Chapter, Mistake, divide_quietly, predicted, show

CHAPTER = Chapter("02-similarity")

_rng = np.random.default_rng(7)
_VECS = [(np.array([3.0, 4.0]), np.array([4.0, 3.0])), (np.array([1.0, 0.0]), np.array([0.0, 2.0])),
         (np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, -3.0]))] + \
        [(_rng.normal(size=16), _rng.normal(size=16)) for _ in range(3)]

_RAW_DOT = "the raw dot product, not normalised"


@CHAPTER.exercise("cosine",
                  "dot product divided by the product of the two lengths (np.linalg.norm)",
                  mistakes=(Mistake(_RAW_DOT, "divide the dot product by np.linalg.norm(a) * "
                                    "np.linalg.norm(b)", lambda a, b: float(np.dot(a, b))),))
def cosine_cases():
    """Pairs of vectors: similar, orthogonal, opposite and random."""
    for a, b in _VECS:
        yield Case((a, b), sim.cosine(a, b))


@CHAPTER.exercise("normalise",
                  "divide the vector by its length; leave an all-zero vector as it is",
                  mistakes=(Mistake("a division by the squared length", "the length is the "
                                    "square root of a @ a: np.linalg.norm(a)",
                                    lambda a: divide_quietly(a, np.dot(a, a))),
                            Mistake("the zero vector divided by 0", "a vector of length 0 has "
                                    "no direction: return it unchanged when "
                                    "np.linalg.norm(a) == 0",
                                    lambda a: divide_quietly(a, np.linalg.norm(a)))))
def normalise_cases():
    """The first vector of each pair, and an all-zero vector."""
    for a, _b in _VECS + [(np.zeros(3), None)]:
        yield Case((a,), sim.normalise(a))


@CHAPTER.exercise("distance_from_cosine",
                  "for unit vectors |a - b|^2 = 2 - 2 cos(a, b); take the square root",
                  mistakes=(Mistake("the squared distance", "2 - 2 cos is |a - b| squared: "
                                    "take its square root", lambda c: 2 - 2 * c),))
def distance_from_cosine_cases():
    """Cosines from -1 to 1."""
    for c in (0.9, 0.5, 1.0, 0.0, -1.0, 0.25):
        yield Case((c,), sim.distance_from_cosine(c))


@CHAPTER.exercise(
    "top_k_by_inner_product",
    "once every vector has length 1 the inner product is the cosine; then you need the "
    "positions of the k largest scores, best first",
    mistakes=(Mistake(_RAW_DOT, "divide each row of docs by its length before the "
                      "product, or a long vector wins whatever it points at",
                      lambda q, docs, k: [int(i) for i in np.argsort(-(docs @ q))[:k]]),
              Mistake("the k lowest scores", "np.argsort sorts from low to high: sort "
                      "-scores, or reverse the order", lambda q, docs, k:
                      [int(i) for i in np.argsort(sim.cosine(q, docs)[0])[:k]])))
def top_k_by_inner_product_cases():
    """A query against 20 rows of very different lengths, so raw dot products mislead."""
    for seed, k in ((0, 3), (1, 5), (2, 1)):
        r = np.random.default_rng(seed)
        q, docs = r.normal(size=8) * 3, r.normal(size=(20, 8)) * r.uniform(0.1, 5, size=(20, 1))
        expected = sim.top_k(sim.cosine(q, docs)[0], k)
        yield Case((q, docs, k), verify=lambda got, e=expected: None if [int(i) for i in got] == e
                   else f"expected: {e}\n  got:      {show(list(got))}")


# -- on the real corpus

def _hc_terms(doc_id: str) -> list[str]:
    return Tokenizer()(datasets.load_helpcentre().doc(doc_id).text)


def _term_cosine(a: list[str], b: list[str]) -> float:
    vocab = sorted(set(a) | set(b))
    ca, cb = Counter(a), Counter(b)
    return float(sim.cosine(np.array([ca[t] for t in vocab], dtype=float),
                            np.array([cb[t] for t in vocab], dtype=float)))


_COSINE_PAIRS = (("api-rate-limits", "security-sso-setup"),
                 ("billing-refund-policy", "billing-refund-policy"),
                 ("api-rate-limits", "api-rate-limits-2024"),
                 ("security-sso-setup", "security-sso-setup-legacy"))


@CHAPTER.exercise("term_cosine",
                  "one axis per distinct word of the two lists; each text's vector counts its "
                  "words; then the cosine of the two vectors")
def term_cosine_cases():
    """The tokens of pairs of articles: unrelated, identical, and old and new versions."""
    for a, b in _COSINE_PAIRS:
        ta, tb = _hc_terms(a), _hc_terms(b)
        yield Case((ta, tb), _term_cosine(ta, tb))


@CHAPTER.exercise("predict_term_cosine",
                  "the retired page and its replacement describe the same policy in mostly "
                  "the same words, with a few figures changed")
def predict_term_cosine_cases():
    """The learner's guess of the refund policy's cosine with its 2024 version, within 0.15."""
    actual = _term_cosine(_hc_terms("billing-refund-policy"),
                          _hc_terms("billing-refund-policy-2024"))
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                    "a prediction within 0.15 passes"))
