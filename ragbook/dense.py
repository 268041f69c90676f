"""DenseIndex = an Encoder + a VectorStore: nearest-neighbour search over unit vectors.

Unit vectors make the inner product equal to cosine similarity (chapter 2), so an exact
store ranks exactly as cosine would. The index talks to its store only through the
``VectorStore`` protocol (``ragbook.retrieval``), so the same ``DenseIndex`` runs in process
(the default store) or on Milvus (chapter 11), chosen by the ``store`` argument
(``ragbook.stores``). It also remembers *which* encoder (model weights, prefix scheme, input
length) made its vectors, and refuses queries from any other: vectors of two models live in
unrelated spaces, and mixing them fails silently otherwise.

Metadata filters (``where=``) run *inside* the store's search, so a narrow filter over a
large index still returns k hits. ``search_postfilter`` keeps the naive alternative — fetch
the ``k * overfetch`` nearest items, then filter — for chapter 3 to show failing.

The store given to ``DenseIndex`` is a template, settings only: ``build`` fills a fresh
store made from its settings (``store_``), at the encoder's dimension (``create(dim)``),
so one template can serve many indexes and a rebuild never mixes old rows with new.

>>> index = DenseIndex(Encoder()).build(chunks)                  # doctest: +SKIP
>>> index.search("refund window?", k=3, where={"status": "current"})  # doctest: +SKIP
[Hit(id='billing-refund-policy:0-812', score=0.71, rank=1, ...), ...]
>>> DenseIndex(Encoder(), FaissStore(kind="hnsw")).build(chunks)  # doctest: +SKIP
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .checks import check_k, check_query, check_threshold, check_vectors
from .component import NotBuiltError
from .embeddings import Encoder
from .filters import matches, scoped, validate_where
from .persist import CorruptIndexError, read_manifest, reading, save_atomic
from .retrieval import BaseRetriever, index_text, make_hit, records_from
from .similarity import top_k
from .stores import default_store, store_from_settings
from .types import Chunk, Document, Hit

__all__ = ["DenseIndex", "EncoderMismatchError", "NotBuiltError", "matches", "passage_vectors",
           "top_k_rows", "postfilter_rows"]

#: What ``DenseIndex`` calls on its store: the ``ragbook.retrieval.VectorStore`` methods, and
#: ``settings`` (a store is a ``Component``: a fresh copy per build, settings in a save).
STORE_METHODS = ("create", "add", "search", "get", "delete", "records", "properties", "write",
                 "read", "__len__", "settings")


class EncoderMismatchError(ValueError):
    """A query encoder differs from the one that built the index."""


def passage_vectors(encoder, records: list[dict], vectors=None) -> np.ndarray:
    """Unit vectors for ``records``: ``vectors`` checked (one unit row per record), or the
    records' indexed texts embedded as passages. Every dense store builds through this."""
    if vectors is None:
        vectors = encoder.encode_passages([index_text(r) for r in records])
    vectors = (check_vectors(vectors, None, len(records)) if len(records)
               else np.zeros((0, encoder.dim), np.float32))
    norms = np.linalg.norm(vectors, axis=1)
    if len(norms) and not np.allclose(norms, 1.0, atol=1e-3):
        raise ValueError("vectors must be unit length (inner product = cosine); normalise "
                         "them first (ragbook.similarity.normalise)")
    return vectors


def _fresh(store):
    """A new, empty store with ``store``'s settings (the template stays untouched)."""
    return type(store)(**store.settings(deep=False))


class DenseIndex(BaseRetriever):
    """Dense retriever: an ``Encoder`` + a ``VectorStore`` (settings here; ``build`` fills a
    fresh copy of the store, ``store_``).

    ``store``: any ``VectorStore`` (default: exact search in process,
    ``ragbook.stores.default_store()``; ``FaissStore(kind="hnsw")`` for a graph index,
    ``MilvusStore(uri)`` for Milvus). ``min_cosine`` drops hits below a cosine floor (so
    fewer than k may return); ``overfetch`` is how many times k the post-filter contrast
    fetches. Its confidence (``retrieve``) is the best hit's cosine.
    """

    confidence_kind = "cosine"

    def __init__(self, encoder: Encoder | None = None, store=None, *,
                 min_cosine: float | None = None, overfetch: int = 4):
        store = store if store is not None else default_store()
        missing = [m for m in STORE_METHODS if not callable(getattr(store, m, None))]
        if missing:
            raise TypeError(f"store must be a VectorStore (ragbook.retrieval), but "
                            f"{type(store).__name__} has no {', '.join(missing)}; use one "
                            f"from ragbook.stores")
        self.encoder = encoder if encoder is not None else Encoder()
        self.store = store
        self.min_cosine = check_threshold(min_cosine, "min_cosine")
        self.overfetch = check_k(overfetch, "overfetch")

    # -- building --------------------------------------------------------------------------
    def build(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None,
              contexts: Sequence[str] | None = None) -> DenseIndex:
        """Embed ``items`` as passages (or take ``vectors``, one unit row per item) and
        index them in a fresh store made from ``store``'s settings; returns self. Blank texts
        and duplicate ids are rejected (``ValueError``, naming the item), as are vectors of
        the wrong shape or not of unit length. ``contexts``: a note per item embedded in
        front of its text (contextual retrieval); hits still return the item's own text."""
        records = records_from(items, contexts)
        vectors = passage_vectors(self.encoder, records, vectors)
        dim = vectors.shape[1] if len(records) else self.encoder.dim
        fingerprint = self.encoder.fingerprint
        t = time.perf_counter()
        store = _fresh(self.store).create(dim, {"ragbook.encoder": fingerprint})
        store.add(records, vectors)
        self.build_seconds_ = time.perf_counter() - t
        self.store_, self.encoder_fingerprint_ = store, fingerprint
        return self

    @classmethod
    def from_store(cls, store, encoder: Encoder | None = None, *,
                   min_cosine: float | None = None, overfetch: int = 4) -> DenseIndex:
        """A DenseIndex over a store that already holds vectors (e.g. a reopened Milvus
        collection: ``MilvusStore(uri).open()``). The store remembers the encoder that
        filled it (its ``ragbook.encoder`` property, written by ``build``); a different
        query encoder is refused now (``EncoderMismatchError``), not at the first query."""
        self = cls(encoder, store, min_cosine=min_cosine, overfetch=overfetch)
        self.store_ = store
        self.encoder_fingerprint_ = store.properties().get("ragbook.encoder", "?")
        self.check_encoder()
        return self

    def add(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
            ) -> DenseIndex:
        """Embed and append more items to a built index."""
        self.check_encoder()
        records = records_from(items)
        self.store_.add(records, passage_vectors(self.encoder, records, vectors))
        return self

    def delete(self, ids: Sequence[str]) -> int:
        """Remove items by id; returns how many were removed."""
        return self._built().delete(list(ids))

    def update(self, upsert: Sequence[Chunk | Document] = (), delete: Sequence[str] = (),
               vectors: np.ndarray | None = None, contexts: Sequence[str] | None = None
               ) -> DenseIndex:
        """Add or replace the items in ``upsert`` and remove the ids in ``delete``, through
        the store: the replaced and deleted rows go, then the upserted ones are added, so
        the index holds what a rebuild on ``self.items_`` holds (the items kept, in order,
        then ``upsert``'s). Only the new texts are embedded (or ``vectors`` taken, one unit
        row per upserted item). Checked before the store changes: the query encoder, the
        items (blank texts, repeated ids), the vectors, and that every ``delete`` id is
        stored (``KeyError``) and not also upserted (``ValueError``). Returns self."""
        self.check_encoder()
        store = self._built()
        records = records_from(upsert, contexts)
        vectors = passage_vectors(self.encoder, records, vectors)
        if isinstance(delete, (str, bytes)):
            raise TypeError("delete must be a list of item ids, got a str; wrap one id in a list")
        delete = list(delete)
        store.get(delete)  # an unknown id is a KeyError naming it
        both = sorted({r["id"] for r in records} & set(delete))
        if both:
            raise ValueError(f"item id {both[0]!r} is both upserted and deleted; give each id "
                             f"in one of the two lists")
        store.delete([r["id"] for r in records] + delete)
        store.add(records, vectors)
        return self

    def _built(self):
        if not hasattr(self, "store_"):
            raise NotBuiltError("this DenseIndex is empty: call .build(chunks), "
                                "DenseIndex.load(path) or DenseIndex.from_store(store)")
        return self.store_

    def __len__(self) -> int:
        return len(self.store_) if hasattr(self, "store_") else 0

    @property
    def items_(self) -> list[dict]:
        """The stored records (id, doc_id, text, start, end, metadata), in index order."""
        return self._built().records()

    @property
    def corpus_fingerprint(self) -> str:
        """The store's fingerprint of ids and texts: equal across indexes of the same chunks, so
        ``HybridRetriever`` can refuse channels built from different corpora. Raises
        ``NotBuiltError`` before ``build``/``load``."""
        return self._built().corpus_fingerprint

    # -- searching -------------------------------------------------------------------------
    def check_encoder(self) -> None:
        """Raise ``NotBuiltError`` before ``build``/``load``, and ``EncoderMismatchError``
        when the query encoder is not the one whose vectors the store holds."""
        store = self._built()
        if self.encoder.fingerprint != self.encoder_fingerprint_:
            raise EncoderMismatchError(
                f"this index ({store!r}) was built with {self.encoder_fingerprint_!r} but the "
                f"query encoder is {self.encoder.fingerprint!r}; vectors of different models "
                f"(or prefix schemes) are not comparable. Query with the same encoder, or "
                f"rebuild the index with the new one (re-embedding the corpus)")

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None,
               min_cosine: float | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The top ``k`` items for ``query``, best first, filtered by ``where`` (and the
        application's ``scope``, ``filters.scoped``) during the search; ``min_cosine`` (or
        the index's) drops weaker hits, so fewer than k may return. Raises ``NotBuiltError``
        before ``build``/``load``, ``EncoderMismatchError`` when the query encoder is not
        the one that built the index, ``ValueError`` for a blank query or a bad ``k``,
        ``TypeError``/``ValueError`` for a malformed ``where``."""
        self.check_encoder()
        k, where = check_k(k), scoped(where, scope)
        qvec = self.encoder.encode_queries([check_query(query)])[0]
        return self.search_vector(qvec, k, where, min_cosine)

    def search_vector(self, qvec: np.ndarray, k: int = 10,
                      where: Mapping[str, Any] | None = None,
                      min_cosine: float | None = None, *,
                      scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """``search`` for an already-embedded query (unit vector from the same encoder)."""
        self.check_encoder()
        k = check_k(k)
        floor = self.min_cosine if min_cosine is None else check_threshold(min_cosine,
                                                                           "min_cosine")
        ids, scores = self.store_.search(np.asarray(qvec)[None], k, scoped(where, scope))
        return self._hits(ids[0], scores[0], k, floor)

    def search_postfilter(self, query: str, k: int = 10,
                          where: Mapping[str, Any] | None = None,
                          overfetch: int | None = None, *,
                          scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The naive way, kept for teaching: fetch the ``k * overfetch`` nearest items of the
        whole index (the store's plain, unfiltered search), *then* drop those failing
        ``where`` (or outside ``scope``). A narrow filter over a big index can leave nothing."""
        self.check_encoder()
        k, where = check_k(k), scoped(where, scope)
        fetch = k * check_k(overfetch or self.overfetch, "overfetch")
        qvec = self.encoder.encode_queries([check_query(query)])[0]
        ids, scores = self.store_.search(qvec[None], fetch)
        return self._hits(ids[0], scores[0], k, self.min_cosine, where)

    def _hits(self, ids, scores, k, floor, where=None) -> list[Hit]:
        hits = []
        for rec, s in zip(self.store_.get(list(ids)), scores, strict=True):
            if (floor is not None and s < floor) or not matches(rec["metadata"], where):
                continue
            hits.append(make_hit(rec, s, len(hits) + 1))
            if len(hits) == k:
                break
        return hits

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the index to folder ``path`` all-or-nothing: the store's files (its
        ``write``) and a manifest (counts, checksums, the settings — the store's included —
        and the encoder and corpus fingerprints) that ``load`` verifies; returns the folder.
        A crash mid-save leaves the previous save intact. ``NotBuiltError`` before
        ``build``."""
        store = self._built()
        settings = {k: v for k, v in self.settings().items() if k != "encoder"}
        info = {"count": len(store), "settings": settings,
                "encoder_fingerprint": self.encoder_fingerprint_,
                "corpus_fingerprint": store.corpus_fingerprint}
        return save_atomic(path, "DenseIndex", store.write, info)

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder | None = None) -> DenseIndex:
        """Read an index saved by ``save``, verifying every file against the manifest; its
        store is rebuilt from the saved settings and reads its files back. The query encoder
        must match the one that built it (checked now, not at the first query); without one,
        the profile's encoder in the saved precision (fp32 or bf16) is used. Raises
        ``FileNotFoundError`` when ``path`` holds no saved index, ``CorruptIndexError``
        when a file is missing or fails its checksum, ``EncoderMismatchError`` for another
        encoder."""
        path = Path(path)
        with reading(path):       # a save to the same path waits until every file is read
            m = read_manifest(path, "DenseIndex")
            settings = dict(m["settings"])
            if "store" not in settings:
                raise CorruptIndexError(f"{str(path)!r} was saved by an older ragbook (no store "
                                        f"settings in its manifest); rebuild and save it again")
            store = store_from_settings(settings.pop("store"))
            if encoder is None:  # the default model, in the precision the corpus was embedded in
                encoder = Encoder(precision=Encoder.precision_of(m["encoder_fingerprint"]))
            self = cls(encoder, store, **settings)
            self.store_ = _fresh(store).read(path)
            self.encoder_fingerprint_ = m["encoder_fingerprint"]
            if self.store_.corpus_fingerprint != m["corpus_fingerprint"]:
                raise CorruptIndexError(f"{str(path)!r}: the records read back by {self.store_!r} "
                                        f"do not hold the corpus the manifest describes; rebuild "
                                        f"and save the index again")
        self.check_encoder()
        return self

    def _repr_state(self) -> str:
        return (f"{len(self)} items, {self.encoder_fingerprint_}" if hasattr(self, "store_")
                else "not built")


# -- exact search over a plain matrix (the reference the indexes are measured against) ------

def top_k_rows(query, matrix, k: int, metadata: Sequence[Mapping[str, Any]] | None = None,
               where: Mapping[str, Any] | None = None) -> list[int]:
    """Row positions of the ``k`` rows of ``matrix`` with the highest inner product with
    ``query``, best first (ties: lower row first); with ``where``, only rows whose
    ``metadata`` ``matches`` it compete (filter *before* ranking, as ``DenseIndex.search``).
    Exact and index-free: what a flat index computes, in numpy.

    >>> m = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> top_k_rows(np.array([0.0, 1.0]), m, 2)
    [1, 2]
    >>> top_k_rows(np.array([0.0, 1.0]), m, 2, [{"d": "a"}, {"d": "b"}, {"d": "a"}], {"d": "a"})
    [2, 0]
    """
    matrix, where = np.asarray(matrix, dtype=np.float64), validate_where(where)
    if not where:
        return top_k(matrix @ np.asarray(query, dtype=np.float64), k)
    if metadata is None or len(metadata) != len(matrix):
        raise ValueError(f"a filter needs one metadata dict per row: got "
                         f"{'none' if metadata is None else len(metadata)} for {len(matrix)} rows")
    allowed = [i for i, md in enumerate(metadata) if matches(md, where)]
    scores = matrix[allowed] @ np.asarray(query, dtype=np.float64)
    return [allowed[j] for j in top_k(scores, k)]


def postfilter_rows(query, matrix, metadata: Sequence[Mapping[str, Any]],
                    where: Mapping[str, Any] | None, k: int, overfetch: int) -> list[int]:
    """The naive filter, in numpy: take the ``k * overfetch`` best rows of the whole matrix,
    *then* drop those whose metadata fails ``where``, keep at most ``k``. A narrow filter
    leaves fewer than ``k`` (``DenseIndex.search_postfilter`` does this over an index).

    >>> m = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    >>> postfilter_rows(np.array([0.0, 1.0]), m, [{"d": "a"}, {"d": "b"}, {"d": "a"}],
    ...                 {"d": "a"}, 1, 1)
    []
    """
    if overfetch < 1:
        raise ValueError(f"overfetch must be >= 1, got {overfetch}")
    where = validate_where(where)
    fetched = top_k_rows(query, matrix, k * overfetch)
    return [i for i in fetched if matches(metadata[i], where)][:k]

