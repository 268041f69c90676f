"""DenseIndex: nearest-neighbour search over unit vectors with FAISS's inner-product index.

Unit vectors make the inner product equal to cosine similarity (chapter 2), so an exact
``IndexFlatIP`` ranks exactly as cosine would. The index also remembers *which* encoder
(model and prefix scheme) made its vectors, and refuses queries from any other: vectors of
two models live in unrelated spaces, and mixing them fails silently otherwise.

Metadata filters (``where=``) run *inside* the search through FAISS ID selectors, so a
narrow filter over a large index still returns k hits. ``search_postfilter`` keeps the
naive alternative — fetch ``k * overfetch`` then filter — for chapter 3 to show failing.

>>> index = DenseIndex(Encoder()).build(chunks)                  # doctest: +SKIP
>>> index.search("refund window?", k=3, where={"status": "current"})  # doctest: +SKIP
[Hit(id='billing-refund-policy:0-812', score=0.71, rank=1, ...), ...]
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .embeddings import Encoder
from .types import Chunk, Document, Hit

__all__ = ["DenseIndex", "EncoderMismatchError", "matches", "NotBuiltError"]

KINDS = ("flat", "hnsw")


class EncoderMismatchError(ValueError):
    """A query encoder differs from the one that built the index."""


class NotBuiltError(RuntimeError):
    """The index was used before ``build`` (or ``load``)."""


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Does ``metadata`` satisfy ``where``? Each key must hold; a value is compared by
    equality, a list/tuple/set means "one of", and a dict of operators
    (``$eq $ne $in $nin $gt $gte $lt $lte``) compares as named.

    >>> matches({"status": "current", "updated": "2025-06-01"},
    ...         {"status": "current", "updated": {"$gte": "2025-01-01"}})
    True
    """
    if not where:
        return True
    for key, cond in where.items():
        value = metadata.get(key)
        if isinstance(cond, Mapping):
            for op, arg in cond.items():
                if op not in _OPS:
                    raise ValueError(f"unknown filter operator {op!r} on {key!r}; use one of "
                                     f"{', '.join(_OPS)}")
                if value is None or not _OPS[op](value, arg):
                    return False
        elif isinstance(cond, (list, tuple, set, frozenset)):
            if value not in cond:
                return False
        elif value != cond:
            return False
    return True


_OPS = {"$eq": lambda v, a: v == a, "$ne": lambda v, a: v != a, "$in": lambda v, a: v in a,
        "$nin": lambda v, a: v not in a, "$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
        "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}


def _hit(item: dict, score: float, rank: int) -> Hit:
    """A Hit for one stored item (the dict form indexes keep: id, doc_id, text, metadata)."""
    return Hit(id=item["id"], score=float(score), rank=rank, doc_id=item["doc_id"],
               text=item["text"], metadata=item["metadata"])


def _item(x: Chunk | Document) -> dict:
    if isinstance(x, Chunk):
        return {"id": x.id, "doc_id": x.doc_id, "text": x.text, "metadata": dict(x.metadata)}
    if isinstance(x, Document):
        return {"id": x.id, "doc_id": x.id, "text": x.text, "metadata": dict(x.metadata)}
    raise TypeError(f"index Chunk or Document objects, got {type(x).__name__}")


class DenseIndex:
    """Dense retriever over FAISS (settings here; ``build`` fills it).

    ``kind="flat"`` is exact search (the default); ``kind="hnsw"`` an approximate graph
    index (``hnsw_m`` links per node, ``ef_search`` candidates explored per query: higher is
    slower and closer to exact). ``min_score`` drops hits below a similarity floor.
    ``overfetch`` is how many times k the post-filter contrast fetches.
    """

    def __init__(self, encoder: Encoder | None = None, *, kind: str = "flat",
                 min_score: float | None = None, overfetch: int = 4, hnsw_m: int = 32,
                 ef_search: int = 64, ef_construction: int = 80):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        if overfetch < 1:
            raise ValueError(f"overfetch must be >= 1, got {overfetch}")
        self.encoder = encoder if encoder is not None else Encoder()
        self.kind, self.min_score, self.overfetch = kind, min_score, overfetch
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction

    # -- building --------------------------------------------------------------------------
    def build(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None) -> "DenseIndex":
        """Embed ``items`` as passages (or take ``vectors``, one unit row per item) and index them."""
        self.items_ = [_item(x) for x in items]
        if len({it["id"] for it in self.items_}) != len(self.items_):
            raise ValueError("item ids must be unique; two chunks share an id")
        if vectors is None:
            vectors = self.encoder.encode_passages([it["text"] for it in self.items_])
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.shape[0] != len(self.items_):
            raise ValueError(f"got {vectors.shape[0]} vectors for {len(self.items_)} items")
        norms = np.linalg.norm(vectors, axis=1)
        if len(norms) and not np.allclose(norms, 1.0, atol=1e-3):
            raise ValueError("vectors must be unit length (inner product = cosine); normalise "
                             "them first (ragbook.similarity.normalise)")
        self.fingerprint_ = self.encoder.fingerprint
        t = time.perf_counter()
        self.index_ = self._new_index(vectors.shape[1] if len(vectors) else self.encoder.dim)
        if len(vectors):
            self.index_.add(vectors)
        self.build_seconds_ = time.perf_counter() - t
        return self

    def _new_index(self, dim: int):
        import faiss

        if self.kind == "flat":
            return faiss.IndexFlatIP(dim)
        index = faiss.IndexHNSWFlat(dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def __len__(self) -> int:
        return len(self.items_) if hasattr(self, "items_") else 0

    # -- searching -------------------------------------------------------------------------
    def _check(self, k: int) -> None:
        if not hasattr(self, "index_"):
            raise NotBuiltError("this DenseIndex is empty: call .build(chunks) or DenseIndex.load(path)")
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a whole number >= 1, got {k!r}")
        if self.encoder.fingerprint != self.fingerprint_:
            raise EncoderMismatchError(
                f"this index was built with {self.fingerprint_!r} but the query encoder is "
                f"{self.encoder.fingerprint!r}; vectors of different models (or prefix schemes) "
                f"are not comparable. Query with the same encoder, or rebuild the index with "
                f"the new one (re-embedding the corpus)")

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None,
               min_score: float | None = None) -> list[Hit]:
        """The top ``k`` items for ``query``, best first, filtered by ``where`` during the
        search; ``min_score`` (or the index's) drops weaker hits, so fewer than k may return."""
        self._check(k)
        qvec = self.encoder.encode_queries([query])[0]
        return self.search_vector(qvec, k, where, min_score)

    def search_vector(self, qvec: np.ndarray, k: int = 10, where: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[Hit]:
        """``search`` for an already-embedded query (unit vector from the same encoder)."""
        self._check(k)
        params = None
        if where:
            allowed = np.array([i for i, it in enumerate(self.items_) if matches(it["metadata"], where)],
                               dtype=np.int64)
            if not len(allowed):
                return []
            if self.kind == "hnsw" and len(allowed) <= max(2_000, 10 * k):
                # a selective filter starves a graph search of paths; score the few allowed
                # vectors exactly instead (what vector databases do for narrow filters)
                return self._exact_subset(qvec, allowed, k, min_score)
            params = self._params(allowed, k)
        elif self.kind == "hnsw":
            params = self._params(None, k)
        scores, ids = self._raw(qvec, k, params)
        return self._hits(scores, ids, k, self.min_score if min_score is None else min_score)

    def search_postfilter(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None,
                          overfetch: int | None = None) -> list[Hit]:
        """The naive way, kept for teaching: fetch ``k * overfetch`` nearest items, *then*
        drop those failing ``where``. A narrow filter over a big index can leave nothing."""
        self._check(k)
        qvec = self.encoder.encode_queries([query])[0]
        fetch = k * (overfetch or self.overfetch)
        scores, ids = self._raw(qvec, fetch, self._params(None, fetch) if self.kind == "hnsw" else None)
        keep = [(s, i) for s, i in zip(scores, ids) if i >= 0 and matches(self.items_[i]["metadata"], where)]
        return self._hits(np.array([s for s, _ in keep]), np.array([i for _, i in keep]), k, self.min_score)

    def _exact_subset(self, qvec, allowed: np.ndarray, k: int, min_score) -> list[Hit]:
        vecs = self.index_.reconstruct_batch(allowed)
        scores = vecs @ np.asarray(qvec, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return self._hits(scores[order], allowed[order], k,
                          self.min_score if min_score is None else min_score)

    def _params(self, allowed: np.ndarray | None, k: int):
        import faiss

        sel = faiss.IDSelectorBatch(allowed) if allowed is not None else None
        if self.kind == "hnsw":
            # a graph search cannot return more than efSearch results: explore at least k
            p = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
            if sel is not None:
                p.sel = sel
            return p
        return faiss.SearchParameters(sel=sel)

    def _raw(self, qvec: np.ndarray, k: int, params) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(np.asarray(qvec, dtype=np.float32).reshape(1, -1))
        k = min(k, len(self.items_)) if self.items_ else 1
        scores, ids = self.index_.search(q, k, params=params) if params is not None else self.index_.search(q, k)
        return scores[0], ids[0]

    def _hits(self, scores, ids, k, min_score) -> list[Hit]:
        hits = []
        for s, i in zip(scores, ids):
            if i < 0:  # FAISS pads with -1 when fewer than k items qualify: never pass those on
                continue
            if min_score is not None and s < min_score:
                continue
            hits.append(_hit(self.items_[int(i)], s, len(hits) + 1))
            if len(hits) == k:
                break
        return hits

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the FAISS index and the items + encoder stamp to folder ``path``."""
        import faiss

        if not hasattr(self, "index_"):
            raise NotBuiltError("nothing to save: call .build(chunks) first")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index_, str(path / "index.faiss"))
        meta = {"fingerprint": self.fingerprint_, "kind": self.kind, "min_score": self.min_score,
                "overfetch": self.overfetch, "hnsw_m": self.hnsw_m, "ef_search": self.ef_search,
                "ef_construction": self.ef_construction, "items": self.items_}
        (path / "items.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder | None = None) -> "DenseIndex":
        """Read an index saved by ``save``. The query encoder must match the one that built
        it (checked now, not at the first query)."""
        import faiss

        path = Path(path)
        if not (path / "index.faiss").exists():
            raise FileNotFoundError(f"no saved DenseIndex in {str(path)!r} (expected index.faiss "
                                    f"and items.json written by DenseIndex.save)")
        meta = json.loads((path / "items.json").read_text(encoding="utf-8"))
        self = cls(encoder, kind=meta["kind"], min_score=meta["min_score"], overfetch=meta["overfetch"],
                   hnsw_m=meta["hnsw_m"], ef_search=meta["ef_search"],
                   ef_construction=meta["ef_construction"])
        self.items_, self.fingerprint_ = meta["items"], meta["fingerprint"]
        self.index_ = faiss.read_index(str(path / "index.faiss"))
        self._check(1)
        return self

    def __repr__(self) -> str:
        state = f"{len(self)} items, {self.fingerprint_}" if hasattr(self, "index_") else "not built"
        return f"DenseIndex(kind={self.kind!r}, {state})"
