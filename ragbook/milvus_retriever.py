"""MilvusRetriever: what Milvus does natively — BM25 and hybrid search — on top of the dense
index every store gets.

Dense retrieval on Milvus is nothing special: it is ``DenseIndex(encoder, MilvusStore(uri))``,
the same class as in process, through the ``VectorStore`` protocol. What Milvus adds is a
second index in the same collection (a sparse vector written by its BM25 function from the
``text`` field) and a ``hybrid_search`` that runs both searches and fuses them with
reciprocal rank fusion inside Milvus. ``MilvusRetriever`` is exactly that: one collection,
three ``mode``\\ s — ``dense`` (the ``DenseIndex``), ``bm25`` (``MilvusStore.keyword_search``),
``hybrid`` (``MilvusStore.hybrid_search``, ``RRFRanker(rrf_k)``) — and ``with_mode`` to view
the same collection another way.

>>> retriever = MilvusRetriever(Encoder(), MilvusStore("hc.db")).build(chunks)  # doctest: +SKIP
>>> retriever.search("refund window?", k=3, where={"status": "current"})   # doctest: +SKIP
[Hit(id='billing-refund-policy:0-812', score=0.0325..., rank=1, ...), ...]
>>> MilvusRetriever(Encoder(), mode="bm25").confidence_kind   # settings only: nothing connects
'bm25'
>>> lo, hi = MilvusRetriever(Encoder(), mode="hybrid", rrf_k=60).confidence_bounds()
>>> lo, round(hi, 6), round(2 / 61, 6)          # two channels of weight 1, each rank 1
(0.0, 0.032787, 0.032787)
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .checks import check_k, check_query
from .component import NotBuiltError
from .dense import DenseIndex, passage_vectors
from .embeddings import Encoder
from .filters import scoped
from .retrieval import BaseRetriever, make_hit, records_from
from .stores.milvus import MilvusStore
from .types import Chunk, Document, Hit

__all__ = ["MilvusRetriever", "MODES"]

#: The retrieval modes and the confidence each reports (``retrieval.CONFIDENCE_KINDS``).
MODES = {"dense": "cosine", "bm25": "bm25", "hybrid": "rrf"}


class MilvusRetriever(BaseRetriever):
    """Dense, BM25 or hybrid retrieval on one Milvus collection, satisfying the ``Retriever``
    contract (settings here; ``build`` or ``open`` fills ``dense_``).

    ``store``: the ``MilvusStore`` (default: a temporary Milvus Lite database). ``mode``:
    ``dense`` (``DenseIndex`` on the store: cosine), ``bm25`` (Milvus's BM25 function over
    ``text``) or ``hybrid`` (both, each ``depth`` deep, fused by Milvus's ``RRFRanker(rrf_k)``
    inside ``hybrid_search``; the two channels weigh 1 each, so an RRF score is at most
    ``2 / (rrf_k + 1)``). ``with_mode`` gives another view of the same collection.
    """

    def __init__(self, encoder: Encoder | None = None, store: MilvusStore | None = None, *,
                 mode: str = "hybrid", depth: int = 100, rrf_k: int = 60):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or not 0 < rrf_k < 16_384:
            raise ValueError(f"rrf_k must be a whole number in 1..16383 (Milvus's RRFRanker "
                             f"takes an int), got {rrf_k!r}")
        self.encoder = encoder if encoder is not None else Encoder()
        self.store = store if store is not None else MilvusStore()
        self.mode, self.depth, self.rrf_k = mode, check_k(depth, "depth"), rrf_k

    @property
    def confidence_kind(self) -> str:
        """``cosine``, ``bm25`` or ``rrf``, by ``mode``."""
        return MODES[self.mode]

    def confidence_bounds(self) -> tuple[float, float]:
        """Hybrid: RRF over two channels of weight 1, at most ``2 / (rrf_k + 1)`` (an item
        first in both), widened by two float32 steps because Milvus returns float32 scores
        (``2 / 3`` in float32 is above ``2 / 3`` in float64); otherwise the bounds of the
        mode's kind."""
        if self.mode == "hybrid":
            return 0.0, 2 / (self.rrf_k + 1) * (1 + 2**-22)
        return super().confidence_bounds()

    # -- building, reopening, writing ------------------------------------------------------
    def build(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None,
              contexts: Sequence[str] | None = None) -> MilvusRetriever:
        """Embed ``items`` (or take ``vectors``) and write them, with their BM25 vectors, into a
        fresh collection (one that exists is replaced), then flush it into one segment (one
        set of BM25 statistics). ``contexts``: a note per item indexed in front of its text
        by both channels; hits return the item's own text. Returns self. Raises
        ``ValueError`` for blank texts, duplicate ids or bad vectors (naming the item),
        ``ModuleNotFoundError`` when pymilvus/milvus-lite are not installed (with the pip
        command), ``MilvusLockedError`` when another process has the local database open,
        ``MilvusVersionError`` for ``bm25``/``hybrid`` on a Milvus server before 2.5. Rows
        that a Milvus server could not store (text over 65,535 bytes, an int outside int64)
        are refused before anything is embedded, and the collection being replaced stays
        live until the new one is written (``MilvusStore.create``)."""
        if self.mode != "dense":
            self.store.require_bm25(f"mode={self.mode!r}")
        self.store.check_records(records_from(items, contexts))
        dense = DenseIndex(self.encoder, self.store).build(items, vectors, contexts)
        t = time.perf_counter()
        dense.store_.flush()
        self.build_seconds_ = dense.build_seconds_ + time.perf_counter() - t  # not embedding
        self.dense_ = dense
        return self

    @classmethod
    def open(cls, store: MilvusStore | str | os.PathLike, encoder: Encoder | None = None, *,
             mode: str = "hybrid", depth: int = 100, rrf_k: int = 60) -> MilvusRetriever:
        """Reopen a collection written by ``build`` (this or another session): ``store`` is
        a ``MilvusStore`` or just its uri. The query encoder must be the one that built it:
        checked now, not at the first query (``EncoderMismatchError``).
        ``FileNotFoundError`` when there is no such collection, ``MilvusVersionError`` for
        ``bm25``/``hybrid`` on a collection without BM25 (a Milvus server before 2.5)."""
        store = store if isinstance(store, MilvusStore) else MilvusStore(store)
        self = cls(encoder, store, mode=mode, depth=depth, rrf_k=rrf_k)
        self.dense_ = DenseIndex.from_store(store.open(), self.encoder)
        if mode != "dense":
            store.require_bm25(f"mode={mode!r}")
        return self

    def add(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
            ) -> MilvusRetriever:
        """Embed and insert more items (an id already stored is an error)."""
        self._dense().add(items, vectors)
        return self

    def upsert(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
               ) -> tuple[int, int]:
        """Insert or replace items by id, both channels in one write; (added, replaced)."""
        dense = self._dense()
        dense.check_encoder()
        records = records_from(items)
        return dense.store_.upsert(records, passage_vectors(self.encoder, records, vectors))

    def delete(self, ids: Sequence[str]) -> int:
        """Remove items by id; returns how many were removed."""
        return self._dense().delete(ids)

    def close(self) -> None:
        """Close the store (see ``MilvusStore.close``); a retriever that was never built has
        nothing to close. Using it as a context manager calls this on exit."""
        if hasattr(self, "dense_"):
            self.dense_.store_.close()

    def __enter__(self) -> MilvusRetriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the contract ----------------------------------------------------------------------
    def _dense(self) -> DenseIndex:
        if not hasattr(self, "dense_"):
            raise NotBuiltError("this MilvusRetriever is empty: call .build(chunks) or "
                                "MilvusRetriever.open(uri)")
        return self.dense_

    @property
    def store_(self) -> MilvusStore:
        """The connected ``MilvusStore`` holding the collection."""
        return self._dense().store_

    def with_mode(self, mode: str) -> MilvusRetriever:
        """The same collection searched another way (``dense``, ``bm25`` or ``hybrid``)."""
        return self.with_settings(mode=mode)

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The best ``k`` items for ``query``, best first, filtered by ``where`` and the
        application's ``scope`` (``filters.scoped``) inside the search (dense: cosine; bm25:
        BM25 score; hybrid: RRF score). Raises ``NotBuiltError``
        before ``build``/``open``, ``EncoderMismatchError`` when the query encoder is not
        the one that built the collection, ``ValueError`` for a blank query or a bad ``k``,
        ``TypeError``/``ValueError`` for a ``where`` that cannot be translated to a Milvus
        filter."""
        dense, where = self._dense(), scoped(where, scope)
        if self.mode == "dense":
            return dense.search(query, k, where)
        k, query = check_k(k), check_query(query)
        if self.mode == "bm25":
            found = dense.store_.keyword_search([query], k, where)
        else:
            dense.check_encoder()
            found = dense.store_.hybrid_search([query], self.encoder.encode_queries([query]),
                                               k, where, depth=self.depth, rrf_k=self.rrf_k)
        return [make_hit(rec, score, r) for r, (rec, score) in enumerate(found[0], 1)]

    def __len__(self) -> int:
        return len(self.dense_) if hasattr(self, "dense_") else 0

    @property
    def items_(self) -> list[dict]:
        """Every stored record (id, doc_id, text, start, end, metadata), in corpus order."""
        return self._dense().items_

    @property
    def corpus_fingerprint(self) -> str:
        """The store's ``corpus_fingerprint`` (ids and texts, in order): equal to a
        ``DenseIndex`` built from the same chunks. Raises ``NotBuiltError`` before ``build``."""
        return self._dense().corpus_fingerprint

    def _repr_state(self) -> str:
        return (f"{self.store_.uri_!r}/{self.store_.collection}" if hasattr(self, "dense_")
                else "not built")
