"""DenseIndex = an Encoder + a VectorStore: nearest-neighbour search over unit vectors.

Unit vectors make the inner product equal to cosine similarity (chapter 2), so an exact
``IndexFlatIP`` ranks exactly as cosine would. ``FaissStore`` is the in-process
``VectorStore`` (``ragbook.retrieval``); the Milvus store of chapter 11 is another. The index
also remembers *which* encoder (model weights, prefix scheme, input length) made its
vectors, and refuses queries from any other: vectors of two models live in unrelated
spaces, and mixing them fails silently otherwise.

Metadata filters (``where=``) run *inside* the search through FAISS ID selectors, so a
narrow filter over a large index still returns k hits. ``search_postfilter`` keeps the
naive alternative — fetch ``k * overfetch`` then filter — for chapter 3 to show failing.

>>> index = DenseIndex(Encoder()).build(chunks)                  # doctest: +SKIP
>>> index.search("refund window?", k=3, where={"status": "current"})  # doctest: +SKIP
[Hit(id='billing-refund-policy:0-812', score=0.71, rank=1, ...), ...]
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .embeddings import Encoder
from .retrieval import (
    NotBuiltError,
    check_k,
    check_query,
    check_threshold,
    corpus_fingerprint,
    dumps,
    index_text,
    loads,
    make_hit,
    matches,
    read_manifest,
    records_from,
    save_atomic,
    validate_where,
)
from .similarity import top_k
from .types import Chunk, Document, Hit

__all__ = ["DenseIndex", "FaissStore", "EncoderMismatchError", "NotBuiltError", "matches"]

KINDS = ("flat", "hnsw")


class EncoderMismatchError(ValueError):
    """A query encoder differs from the one that built the index."""


def _check_vectors(vectors: Any, dim: int | None, n: int | None = None) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v.reshape(1, -1)
    if v.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array (n, dim), got shape {v.shape}")
    if dim is not None and v.shape[1] != dim:
        raise ValueError(f"vectors have dimension {v.shape[1]} but this store holds "
                         f"{dim}-d vectors; embed with the encoder that built it")
    if n is not None and v.shape[0] != n:
        raise ValueError(f"got {v.shape[0]} vectors for {n} items; give one row per item")
    if not np.isfinite(v).all():
        raise ValueError("vectors contain NaN or infinity; check the encoder's output")
    return np.ascontiguousarray(v)


def passage_vectors(encoder, records: list[dict], vectors=None) -> np.ndarray:
    """Unit vectors for ``records``: ``vectors`` checked (one unit row per record), or the
    records' indexed texts embedded as passages. Every dense store builds through this."""
    if vectors is None:
        vectors = encoder.encode_passages([index_text(r) for r in records])
    vectors = (_check_vectors(vectors, None, len(records)) if len(records)
               else np.zeros((0, encoder.dim), np.float32))
    norms = np.linalg.norm(vectors, axis=1)
    if len(norms) and not np.allclose(norms, 1.0, atol=1e-3):
        raise ValueError("vectors must be unit length (inner product = cosine); normalise "
                         "them first (ragbook.similarity.normalise)")
    return vectors


class FaissStore:
    """The in-process ``VectorStore``: records (dicts from ``retrieval.record``) and their
    vectors in a FAISS inner-product index, row i of FAISS = ``records[i]``.

    ``kind="flat"`` is exact search; ``kind="hnsw"`` an approximate graph (``hnsw_m`` links
    per node, ``ef_search`` candidates explored per query: higher is slower, closer to exact).
    """

    def __init__(self, dim: int, kind: str = "flat", hnsw_m: int = 32, ef_search: int = 64,
                 ef_construction: int = 80):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.dim = check_k(dim, "dim")
        self.kind, self.hnsw_m = kind, check_k(hnsw_m, "hnsw_m")
        self.ef_search = check_k(ef_search, "ef_search")
        self.ef_construction = check_k(ef_construction, "ef_construction")
        self.records: list[dict] = []
        self._pos: dict[str, int] = {}
        self._fingerprint: str | None = None
        self.index = self._new_index()

    def _new_index(self):
        import faiss

        if self.kind == "flat":
            return faiss.IndexFlatIP(self.dim)
        index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def __len__(self) -> int:
        return len(self.records)

    @property
    def corpus_fingerprint(self) -> str:
        """Hash of the stored records' ids and texts, in order (``retrieval.corpus_fingerprint``),
        computed once and reset by every write."""
        if self._fingerprint is None:
            self._fingerprint = corpus_fingerprint(self.records)
        return self._fingerprint

    def add(self, records: Sequence[dict], vectors: np.ndarray) -> None:
        """Append records and their vectors; an id already stored is an error (delete first)."""
        vectors = _check_vectors(vectors, self.dim, len(records))
        for r in records:
            if r["id"] in self._pos:
                raise ValueError(f"item id {r['id']!r} is already in the store; delete it "
                                 f"first to replace it")
        if len({r["id"] for r in records}) != len(records):
            raise ValueError("the records to add repeat an id; ids must be unique")
        if len(records):
            self.index.add(vectors)
        for r in records:
            self._pos[r["id"]] = len(self.records)
            self.records.append(r)
        self._fingerprint = None

    def get(self, ids: Sequence[str]) -> list[dict]:
        """The records for ``ids`` in that order; an unknown id is a KeyError naming it."""
        missing = [i for i in ids if i not in self._pos]
        if missing:
            raise KeyError(f"no item with id {missing[0]!r} in the store "
                           f"({len(missing)} unknown ids)")
        return [self.records[self._pos[i]] for i in ids]

    def delete(self, ids: Sequence[str]) -> int:
        """Remove the items with ``ids`` (unknown ids are ignored); return how many went."""
        drop = sorted({self._pos[i] for i in ids if i in self._pos})
        if not drop:
            return 0
        keep = np.setdiff1d(np.arange(len(self.records)), drop)
        if self.kind == "flat":
            self.index.remove_ids(np.asarray(drop, dtype=np.int64))
        else:  # a graph index cannot remove nodes: rebuild it from the kept vectors
            kept = self.index.reconstruct_batch(keep) if len(keep) else None
            self.index = self._new_index()
            if kept is not None:
                self.index.add(kept)
        self.records = [self.records[i] for i in keep]
        self._pos = {r["id"]: i for i, r in enumerate(self.records)}
        self._fingerprint = None
        return len(drop)

    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query row: the ids and scores of the best ``k`` records passing ``where``."""
        k = check_k(k)
        where = validate_where(where)
        q = _check_vectors(vectors, self.dim)
        ids, scores = [], []
        for row in q:
            s, pos = self.search_positions(row, k, where)
            ids.append([self.records[i]["id"] for i in pos])
            scores.append(s)
        return ids, scores

    def search_positions(self, qvec: np.ndarray, k: int, where: Mapping[str, Any] | None
                         ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and record positions of the best ``k`` (at most len(self)) for one query."""
        k = min(k, len(self.records))
        if k == 0:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        allowed = None
        if where:
            allowed = np.array([i for i, r in enumerate(self.records)
                                if matches(r["metadata"], where)], dtype=np.int64)
            if not len(allowed):
                return np.zeros(0, np.float32), np.zeros(0, np.int64)
            if self.kind == "hnsw" and len(allowed) <= max(2_000, 10 * k):
                # a selective filter starves a graph search of paths; score the few allowed
                # vectors exactly instead (what vector databases do for narrow filters)
                return self._exact_subset(qvec, allowed, k)
        scores, pos = self.raw(qvec, k, allowed)
        keep = pos >= 0  # FAISS pads with -1 when fewer than k items qualify: drop those
        return scores[keep], pos[keep]

    def raw(self, qvec: np.ndarray, k: int, allowed: np.ndarray | None = None):
        """FAISS's own top ``k`` (clamped to the store's size), restricted to ``allowed``."""
        import faiss

        k = min(k, len(self.records))
        sel = faiss.IDSelectorBatch(allowed) if allowed is not None else None
        if self.kind == "hnsw":
            # a graph search cannot return more than efSearch results: explore at least k
            params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
            if sel is not None:
                params.sel = sel
        else:
            params = faiss.SearchParameters(sel=sel) if sel is not None else None
        q = _check_vectors(qvec, self.dim)
        scores, pos = self.index.search(q, k, params=params)
        return scores[0], pos[0]

    def _exact_subset(self, qvec, allowed: np.ndarray, k: int):
        scores = self.index.reconstruct_batch(allowed) @ np.asarray(qvec, dtype=np.float32)
        order = np.argsort(-scores, kind="stable")[:k]
        return scores[order], allowed[order]

    # -- persistence: files inside a folder that DenseIndex saves atomically ------------------
    def write(self, folder: Path) -> None:
        """Write ``index.faiss`` and ``records.json`` into ``folder`` (``DenseIndex.save``
        makes the folder and swaps it in atomically)."""
        import faiss

        faiss.write_index(self.index, str(folder / "index.faiss"))
        (folder / "records.json").write_text(dumps(self.records), encoding="utf-8")

    @classmethod
    def read(cls, folder: Path, settings: Mapping[str, Any]) -> FaissStore:
        """A store read back from what ``write`` put in ``folder``, with its saved
        ``settings`` (``DenseIndex.load`` checks the folder before calling this)."""
        import faiss

        self = cls(**settings)
        self.index = faiss.read_index(str(folder / "index.faiss"))
        self.records = loads((folder / "records.json").read_text(encoding="utf-8"))
        self._pos = {r["id"]: i for i, r in enumerate(self.records)}
        if self.index.ntotal != len(self.records) or self.index.d != self.dim:
            raise ValueError(f"{str(folder)!r}: index.faiss holds {self.index.ntotal} "
                             f"{self.index.d}-d vectors for {len(self.records)} records")
        return self


class DenseIndex:
    """Dense retriever: an ``Encoder`` + a ``FaissStore`` (settings here; ``build`` fills it).

    ``kind``, ``hnsw_m``, ``ef_search``, ``ef_construction`` configure the store;
    ``min_score`` drops hits below a cosine floor (so fewer than k may return);
    ``overfetch`` is how many times k the post-filter contrast fetches.
    """

    def __init__(self, encoder: Encoder | None = None, *, kind: str = "flat",
                 min_score: float | None = None, overfetch: int = 4, hnsw_m: int = 32,
                 ef_search: int = 64, ef_construction: int = 80):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.encoder = encoder if encoder is not None else Encoder()
        self.kind, self.min_score = kind, check_threshold(min_score, "min_score")
        self.overfetch = check_k(overfetch, "overfetch")
        self.hnsw_m, self.ef_search, self.ef_construction = hnsw_m, ef_search, ef_construction

    def _settings(self, dim: int) -> dict:
        return {"dim": dim, "kind": self.kind, "hnsw_m": self.hnsw_m,
                "ef_search": self.ef_search, "ef_construction": self.ef_construction}

    # -- building --------------------------------------------------------------------------
    def build(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None,
              contexts: Sequence[str] | None = None) -> DenseIndex:
        """Embed ``items`` as passages (or take ``vectors``, one unit row per item) and
        index them; returns self. Blank texts and duplicate ids are rejected (``ValueError``,
        naming the item), as are vectors of the wrong shape or not of unit length.
        ``contexts``: a note per item embedded in front of its text (contextual retrieval);
        hits still return the item's own text."""
        records = records_from(items, contexts)
        vectors = self._vectors(records, vectors)
        dim = vectors.shape[1] if len(records) else self.encoder.dim
        t = time.perf_counter()
        store = FaissStore(**self._settings(dim))
        store.add(records, vectors)
        self.build_seconds_ = time.perf_counter() - t
        self.store_, self.encoder_fingerprint_ = store, self.encoder.fingerprint
        return self

    def add(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
            ) -> DenseIndex:
        """Embed and append more items to a built index."""
        self._built()
        records = records_from(items)
        self.store_.add(records, self._vectors(records, vectors))
        return self

    def delete(self, ids: Sequence[str]) -> int:
        """Remove items by id; returns how many were removed."""
        return self._built().delete(list(ids))

    def _vectors(self, records: list[dict], vectors) -> np.ndarray:
        return passage_vectors(self.encoder, records, vectors)

    def _built(self) -> FaissStore:
        if not hasattr(self, "store_"):
            raise NotBuiltError("this DenseIndex is empty: call .build(chunks) or "
                                "DenseIndex.load(path)")
        return self.store_

    def __len__(self) -> int:
        return len(self.store_) if hasattr(self, "store_") else 0

    @property
    def items_(self) -> list[dict]:
        """The stored records (id, doc_id, text, start, end, metadata), in index order."""
        return self._built().records

    @property
    def corpus_fingerprint(self) -> str:
        """The store's fingerprint of ids and texts: equal across indexes of the same chunks, so
        ``HybridRetriever`` can refuse channels built from different corpora. Raises
        ``NotBuiltError`` before ``build``/``load``."""
        return self._built().corpus_fingerprint

    # -- searching -------------------------------------------------------------------------
    def _check(self, k: int) -> int:
        self._built()
        k = check_k(k)
        if self.encoder.fingerprint != self.encoder_fingerprint_:
            raise EncoderMismatchError(
                f"this index was built with {self.encoder_fingerprint_!r} but the query "
                f"encoder is {self.encoder.fingerprint!r}; vectors of different models (or "
                f"prefix schemes) are not comparable. Query with the same encoder, or rebuild "
                f"the index with the new one (re-embedding the corpus)")
        return k

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None,
               min_score: float | None = None) -> list[Hit]:
        """The top ``k`` items for ``query``, best first, filtered by ``where`` during the
        search; ``min_score`` (or the index's) drops weaker hits, so fewer than k may return.
        Raises ``NotBuiltError`` before ``build``/``load``, ``EncoderMismatchError`` when the
        query encoder is not the one that built the index, ``ValueError`` for a blank query
        or a bad ``k``, ``TypeError``/``ValueError`` for a malformed ``where``."""
        k = self._check(k)
        qvec = self.encoder.encode_queries([check_query(query)])[0]
        return self.search_vector(qvec, k, where, min_score)

    def search_vector(self, qvec: np.ndarray, k: int = 10,
                      where: Mapping[str, Any] | None = None,
                      min_score: float | None = None) -> list[Hit]:
        """``search`` for an already-embedded query (unit vector from the same encoder)."""
        k = self._check(k)
        floor = self.min_score if min_score is None else check_threshold(min_score)
        scores, pos = self.store_.search_positions(qvec, k, validate_where(where))
        return self._hits(scores, pos, k, floor)

    def search_postfilter(self, query: str, k: int = 10,
                          where: Mapping[str, Any] | None = None,
                          overfetch: int | None = None) -> list[Hit]:
        """The naive way, kept for teaching: fetch ``k * overfetch`` nearest items, *then*
        drop those failing ``where``. A narrow filter over a big index can leave nothing."""
        k = self._check(k)
        where = validate_where(where)
        qvec = self.encoder.encode_queries([check_query(query)])[0]
        scores, pos = self.store_.raw(qvec, k * check_k(overfetch or self.overfetch, "overfetch"))
        recs = self.store_.records
        keep = [j for j, i in enumerate(pos) if i >= 0 and matches(recs[i]["metadata"], where)]
        return self._hits(scores[keep], pos[keep], k, self.min_score)

    def _hits(self, scores, pos, k, floor) -> list[Hit]:
        recs, hits = self.store_.records, []
        for s, i in zip(scores, pos, strict=True):
            if floor is not None and s < floor:
                continue
            hits.append(make_hit(recs[int(i)], s, len(hits) + 1))
            if len(hits) == k:
                break
        return hits

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the index to folder ``path`` all-or-nothing, with a manifest (counts,
        checksums, encoder and corpus fingerprints) that ``load`` verifies; returns the
        folder. A crash mid-save leaves the previous save intact. ``NotBuiltError`` before
        ``build``."""
        store = self._built()
        info = {"count": len(store), "dim": store.dim, "settings": self._settings(store.dim),
                "min_score": self.min_score, "overfetch": self.overfetch,
                "encoder_fingerprint": self.encoder_fingerprint_,
                "corpus_fingerprint": store.corpus_fingerprint}
        return save_atomic(path, "DenseIndex", store.write, info)

    @classmethod
    def load(cls, path: str | Path, encoder: Encoder | None = None) -> DenseIndex:
        """Read an index saved by ``save``, verifying every file against the manifest. The
        query encoder must match the one that built it (checked now, not at the first query).
        Raises ``FileNotFoundError`` when ``path`` holds no saved index, ``CorruptIndexError``
        when a file is missing or fails its checksum, ``EncoderMismatchError`` for another
        encoder."""
        path = Path(path)
        m = read_manifest(path, "DenseIndex")
        st = m["settings"]
        self = cls(encoder, kind=st["kind"], min_score=m["min_score"], overfetch=m["overfetch"],
                   hnsw_m=st["hnsw_m"], ef_search=st["ef_search"],
                   ef_construction=st["ef_construction"])
        self.store_ = FaissStore.read(path, st)
        self.encoder_fingerprint_ = m["encoder_fingerprint"]
        if self.store_.corpus_fingerprint != m["corpus_fingerprint"]:
            raise ValueError(f"{str(path)!r}: records.json does not hold the corpus the "
                             f"manifest describes; rebuild and save the index again")
        self._check(1)
        return self

    def __repr__(self) -> str:
        state = (f"{len(self)} items, {self.encoder_fingerprint_}" if hasattr(self, "store_")
                 else "not built")
        return f"DenseIndex(kind={self.kind!r}, {state})"


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


__all__ += ["top_k_rows", "postfilter_rows"]
