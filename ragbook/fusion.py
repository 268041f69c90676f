"""Combining rankings: reciprocal rank fusion, a score blend for contrast, and HybridRetriever.

Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) scores each document by
its *ranks*, never its scores:

    RRF(d) = Σ_{lists L containing d}  w_L / (k + rank_L(d)),   ranks from 1, k = 60

A document both lists like rises; one only one list likes survives; one neither ranks
stays down. Because only ranks enter, it needs no calibration between BM25's unbounded
scores and cosine similarities — unlike ``score_blend``, which min-max normalises and
mixes scores and so shifts whenever the corpus (and hence the score ranges) changes.

>>> from ragbook.types import Hit
>>> a = [Hit("x", 9.1, 1), Hit("y", 7.0, 2), Hit("z", 1.2, 3)]
>>> b = [Hit("y", 0.8, 1), Hit("x", 0.7, 2)]
>>> [(h.id, round(h.score, 5)) for h in reciprocal_rank_fusion([a, b])]
[('x', 0.03252), ('y', 0.03252), ('z', 0.01587)]
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .types import Chunk, Document, Hit

__all__ = ["reciprocal_rank_fusion", "score_blend", "HybridRetriever", "IndexDriftError"]


def _check_lists(rankings, weights):
    if not rankings:
        raise ValueError("give at least one ranking to fuse")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings; give one per ranking")
    return weights


def _rebuild(scores: dict[str, float], seen: dict[str, Hit], top: int | None) -> list[Hit]:
    order = sorted(scores, key=lambda d: (-scores[d], d))[:top]
    return [Hit(id=d, score=scores[d], rank=r, doc_id=seen[d].doc_id, text=seen[d].text,
                metadata=seen[d].metadata) for r, d in enumerate(order, 1)]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: int = 60,
                           weights: Sequence[float] | None = None, top: int | None = None) -> list[Hit]:
    """Fuse ranked lists of Hits by RRF; ``weights`` scale each list's contribution
    (weighted RRF), ``top`` cuts the fused list. Ties break by id."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    weights = _check_lists(rankings, weights)
    scores: dict[str, float] = {}
    seen: dict[str, Hit] = {}
    for hits, w in zip(rankings, weights):
        for h in hits:
            scores[h.id] = scores.get(h.id, 0.0) + w / (k + h.rank)
            seen.setdefault(h.id, h)
    return _rebuild(scores, seen, top)


def score_blend(rankings: Sequence[Sequence[Hit]], weights: Sequence[float] | None = None,
                top: int | None = None) -> list[Hit]:
    """Min-max normalise each list's scores to [0, 1] and add them, weighted: the
    calibration-dependent alternative chapter 5 shows breaking. A document missing from a
    list gets 0 from it."""
    weights = _check_lists(rankings, weights)
    scores: dict[str, float] = {}
    seen: dict[str, Hit] = {}
    for hits, w in zip(rankings, weights):
        if not hits:
            continue
        lo, hi = min(h.score for h in hits), max(h.score for h in hits)
        for h in hits:
            norm = (h.score - lo) / (hi - lo) if hi > lo else 1.0
            scores[h.id] = scores.get(h.id, 0.0) + w * norm
            seen.setdefault(h.id, h)
    return _rebuild(scores, seen, top)


class IndexDriftError(RuntimeError):
    """The dense and keyword indexes no longer cover the same items."""


class HybridRetriever:
    """Dense + BM25 over the same items, each fetched ``depth`` deep, fused by RRF.

    ``build(items)`` writes both indexes in one call, so they cannot be built from
    different corpora; every search re-checks that they still hold the same item ids and
    raises ``IndexDriftError`` if not. ``weights`` = (dense, bm25) for weighted RRF.
    """

    def __init__(self, dense, bm25, depth: int = 100, k_rrf: int = 60,
                 weights: tuple[float, float] = (1.0, 1.0)):
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.dense, self.bm25 = dense, bm25
        self.depth, self.k_rrf, self.weights = depth, k_rrf, tuple(weights)

    def build(self, items: Sequence[Chunk | Document], vectors=None) -> "HybridRetriever":
        items = list(items)
        self.dense.build(items, vectors=vectors)
        self.bm25.build(items)
        self.check()
        return self

    def check(self) -> int:
        """Raise ``IndexDriftError`` unless both indexes hold exactly the same item ids;
        return the item count."""
        n_dense, n_bm25 = len(self.dense), len(self.bm25)
        if n_dense != n_bm25 or [i["id"] for i in self.dense.items_] != [i["id"] for i in self.bm25.items_]:
            raise IndexDriftError(
                f"the dense index holds {n_dense} items and the BM25 index {n_bm25}"
                + ("" if n_dense != n_bm25 else " with different ids")
                + "; rebuild both from the same items with HybridRetriever.build(items)")
        return n_dense

    def channels(self, query: str, where: Mapping[str, Any] | None = None) -> tuple[list[Hit], list[Hit]]:
        """The two ranked lists before fusion, each ``depth`` deep."""
        self.check()
        return (self.dense.search(query, k=self.depth, where=where),
                self.bm25.search(query, k=self.depth, where=where))

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None) -> list[Hit]:
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a whole number >= 1, got {k!r}")
        dense, keyword = self.channels(query, where)
        return reciprocal_rank_fusion([dense, keyword], k=self.k_rrf, weights=self.weights, top=k)

    @property
    def items_(self):
        return self.dense.items_

    def __len__(self) -> int:
        return len(self.dense)
