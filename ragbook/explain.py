"""Explanations whose parts add up to the hit's score.

``explain_bm25`` splits a BM25 score into one part per query term (tf, idf, length norm,
contribution) through the index's own tokeniser, IDF and ``term_weight``: the same code path
as the scorer, so the sum cannot drift from it. ``explain_rrf`` splits a hybrid's fused score
into one part per channel (its rank and ``weight / (rrf_k + rank)``), asking the hybrid for its
channels' ranked lists without opening the channels themselves.

>>> e = Explanation("bm25", "h1", 1.5, (Part("refund", 1.0), Part("order", 0.5)))
>>> e.total()
1.5
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .bm25 import term_weight
from .types import Hit

__all__ = ["Part", "Explanation", "explain_bm25", "explain_rrf"]


@dataclass(frozen=True)
class Part:
    """One term of the sum: what it is (``name``), what it adds (``value``) and how it came
    about (``detail``: tf, idf, rank, ...)."""

    name: str
    value: float
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """Why ``hit_id`` scored ``score`` in ``stage``: ``parts`` add up to ``score``."""

    stage: str
    hit_id: str
    score: float
    parts: tuple[Part, ...]

    def total(self) -> float:
        """The sum of the parts (equals ``score`` up to rounding)."""
        return sum(p.value for p in self.parts)

    def text(self) -> str:
        """One line for the hit, one indented line per part."""
        lines = [f"{self.stage} {self.hit_id}: {self.score:.4f} = sum of {len(self.parts)} parts"]
        for p in self.parts:
            detail = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in p.detail.items())
            lines.append(f"  {p.name}: {p.value:+.4f}  ({detail})")
        return "\n".join(lines)


def explain_bm25(index, query: str, hit: Hit) -> Explanation:
    """One part per query term (a repeated term once per occurrence, as the scorer counts
    it) of ``hit``'s BM25 score in ``index``. Raises ``KeyError`` when the hit's id is not
    in the index (explain with the index that found it)."""
    row = {it["id"]: i for i, it in enumerate(index.items_)}.get(hit.id)
    if row is None:
        raise KeyError(f"{hit.id!r} is not in this BM25 index; explain a hit with the index "
                       "that returned it")
    doc_len, parts = float(index.doc_len_[row]), []
    norm = index.k1 * (1 - index.b + index.b * doc_len / max(index.avgdl_, 1e-9))
    for term in index.tokenizer(query):
        col = index.vocab_.get(term)
        tf = 0.0 if col is None else float(index.tf_[row, col])
        if tf == 0:
            continue
        idf = float(index.idf_[col])
        value = float(term_weight(tf, doc_len, max(index.avgdl_, 1e-9), idf, index.k1, index.b))
        parts.append(Part(term, value, {"tf": tf, "idf": idf, "length_norm": norm,
                                        "doc_len": doc_len}))
    return Explanation("bm25", hit.id, hit.score, tuple(parts))


def explain_rrf(hybrid, query: str, hit: Hit, where: Mapping[str, Any] | None = None, *,
                scope: Mapping[str, Any] | None = None) -> Explanation:
    """One part per channel that ranked ``hit`` (dense, then bm25): its rank there and
    ``weight / (rrf_k + rank)``, which add up to the fused score. Give the same ``where`` and
    ``scope`` as the search that returned the hit."""
    parts = []
    lists = hybrid.channels(query, where, scope=scope)
    for name, hits, weight in zip(("dense", "bm25"), lists, hybrid.weights, strict=True):
        found = next((h for h in hits if h.id == hit.id), None)
        if found is not None:
            parts.append(Part(name, weight / (hybrid.rrf_k + found.rank),
                              {"rank": found.rank, "weight": weight, "rrf_k": hybrid.rrf_k,
                               "channel_score": found.score}))
    return Explanation("rrf", hit.id, hit.score, tuple(parts))
