"""FaissStore: the in-process ``VectorStore`` (``ragbook.retrieval``), on FAISS.

Records (dicts from ``retrieval.record``) sit in a Python list and their unit vectors in a
FAISS inner-product index, row i of FAISS = record i. ``kind="flat"`` is exact search
(``IndexFlatIP``: every vector scored); ``kind="hnsw"`` an approximate graph (``hnsw_m``
links per node, ``ef_construction`` candidates while inserting, ``ef_search`` candidates
explored per query: higher is slower and closer to exact).

Filters (``where=``) run *inside* the search: the rows that pass become a FAISS ID selector,
so a narrow filter over a large store still returns k hits. (For HNSW a very selective
filter starves the graph walk of paths, so the few allowed vectors are scored exactly, as
vector databases do.)

The settings are the ``__init__`` arguments; ``create(dim)`` (which ``DenseIndex.build``
calls with the encoder's dimension) makes the empty FAISS index:

>>> store = FaissStore(kind="hnsw", ef_search=128)
>>> store.settings()
{'kind': 'hnsw', 'hnsw_m': 32, 'ef_search': 128, 'ef_construction': 80}
>>> len(store.create(4)), store.dim_
(0, 4)
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import check_k, check_vectors
from ..component import Component, NotBuiltError
from ..filters import matches, validate_where
from ..persist import CorruptIndexError, dumps, loads
from ..retrieval import corpus_fingerprint
from ..similarity import top_k

__all__ = ["FaissStore", "KINDS"]

KINDS = ("flat", "hnsw")


class FaissStore(Component):
    """The in-process ``VectorStore``: records and their vectors in a FAISS inner-product
    index (settings here; ``create(dim)`` makes the empty index, ``add`` fills it).

    ``kind``: ``"flat"`` (exact) or ``"hnsw"`` (approximate graph: ``hnsw_m`` links per
    node, ``ef_construction`` at insertion, ``ef_search`` candidates per query).
    """

    def __init__(self, kind: str = "flat", *, hnsw_m: int = 32, ef_search: int = 64,
                 ef_construction: int = 80):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind, self.hnsw_m = kind, check_k(hnsw_m, "hnsw_m")
        self.ef_search = check_k(ef_search, "ef_search")
        self.ef_construction = check_k(ef_construction, "ef_construction")

    # -- creating --------------------------------------------------------------------------
    def create(self, dim: int, properties: Mapping[str, str] | None = None) -> FaissStore:
        """Empty the store and size it for ``dim``-d vectors; ``properties`` are kept with it
        (and saved by ``write``). Returns the store."""
        self.dim_ = check_k(dim, "dim")
        self.properties_ = {str(k): str(v) for k, v in (properties or {}).items()}
        self.index_ = self._new_index()
        self.records_: list[dict] = []
        self.positions_: dict[str, int] = {}
        self._corpus = None
        return self

    def _new_index(self):
        import faiss

        if self.kind == "flat":
            return faiss.IndexFlatIP(self.dim_)
        index = faiss.IndexHNSWFlat(self.dim_, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.ef_construction
        return index

    def _built(self):
        if not hasattr(self, "index_"):
            raise NotBuiltError("this FaissStore has no index yet: call .create(dim) "
                                "(DenseIndex.build does) or .read(folder)")
        return self.index_

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.records_) if hasattr(self, "records_") else 0

    def records(self) -> list[dict]:
        """Every stored record, in the order the items were added (a new list)."""
        self._built()
        return list(self.records_)

    def properties(self) -> dict[str, str]:
        """The ``properties`` given to ``create`` (e.g. ``ragbook.encoder``)."""
        self._built()
        return dict(self.properties_)

    @property
    def corpus_fingerprint(self) -> str:
        """Hash of the stored records' ids and texts, in order (``retrieval.corpus_fingerprint``),
        computed once and reset by every write."""
        self._built()
        if getattr(self, "_corpus", None) is None:
            self._corpus = corpus_fingerprint(self.records_)
        return self._corpus

    def get(self, ids: Sequence[str]) -> list[dict]:
        """The records for ``ids`` in that order; an unknown id is a KeyError naming it."""
        self._built()
        missing = [i for i in ids if i not in self.positions_]
        if missing:
            raise KeyError(f"no item with id {missing[0]!r} in the store "
                           f"({len(missing)} unknown ids)")
        return [self.records_[self.positions_[i]] for i in ids]

    # -- writing ---------------------------------------------------------------------------
    def add(self, records: Sequence[dict], vectors: np.ndarray) -> None:
        """Append records and their vectors; an id already stored is an error (delete first)."""
        self._built()
        vectors = check_vectors(vectors, self.dim_, len(records))
        for r in records:
            if r["id"] in self.positions_:
                raise ValueError(f"item id {r['id']!r} is already in the store; delete it "
                                 f"first to replace it")
        if len({r["id"] for r in records}) != len(records):
            raise ValueError("the records to add repeat an id; ids must be unique")
        if len(records):
            self.index_.add(vectors)
        for r in records:
            self.positions_[r["id"]] = len(self.records_)
            self.records_.append(r)
        self._corpus = None

    def delete(self, ids: Sequence[str]) -> int:
        """Remove the items with ``ids`` (unknown ids are ignored); return how many went."""
        self._built()
        drop = sorted({self.positions_[i] for i in ids if i in self.positions_})
        if not drop:
            return 0
        keep = np.setdiff1d(np.arange(len(self.records_)), drop)
        if self.kind == "flat":
            self.index_.remove_ids(np.asarray(drop, dtype=np.int64))
        else:  # a graph index cannot remove nodes: rebuild it from the kept vectors
            kept = self.index_.reconstruct_batch(keep) if len(keep) else None
            self.index_ = self._new_index()
            if kept is not None:
                self.index_.add(kept)
        self.records_ = [self.records_[i] for i in keep]
        self.positions_ = {r["id"]: i for i, r in enumerate(self.records_)}
        self._corpus = None
        return len(drop)

    # -- searching -------------------------------------------------------------------------
    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query row: the ids and scores of the best ``k`` records passing ``where``
        (filtered inside the search), best first; fewer when fewer qualify, never padded."""
        self._built()
        k = check_k(k)
        where = validate_where(where)
        q = check_vectors(vectors, self.dim_)
        ids, scores = [], []
        for row in q:
            s, pos = self._search_one(row, k, where)
            ids.append([self.records_[i]["id"] for i in pos])
            scores.append(s)
        return ids, scores

    def _search_one(self, qvec: np.ndarray, k: int, where: Mapping[str, Any] | None
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Scores and record positions of the best ``k`` (at most len(self)) for one query."""
        k = min(k, len(self.records_))
        if k == 0:
            return np.zeros(0, np.float32), np.zeros(0, np.int64)
        allowed = None
        if where:
            allowed = np.array([i for i, r in enumerate(self.records_)
                                if matches(r["metadata"], where)], dtype=np.int64)
            if not len(allowed):
                return np.zeros(0, np.float32), np.zeros(0, np.int64)
            if self.kind == "hnsw" and len(allowed) <= max(2_000, 10 * k):
                # a selective filter starves a graph search of paths; score the few allowed
                # vectors exactly instead (what vector databases do for narrow filters)
                return self._exact(qvec, k, allowed)
        if self.kind == "flat":
            return self._exact(qvec, k, allowed)
        scores, pos = self._faiss_search(qvec, k, allowed)
        keep = pos >= 0  # FAISS pads with -1 when fewer than k items qualify: drop those
        return scores[keep], pos[keep]

    def _faiss_search(self, qvec: np.ndarray, k: int, allowed: np.ndarray | None):
        """The HNSW graph's top ``k`` (already clamped to the store's size), within
        ``allowed``."""
        import faiss

        # a graph search cannot return more than efSearch results: explore at least k
        params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
        if allowed is not None:
            params.sel = faiss.IDSelectorBatch(allowed)
        scores, pos = self.index_.search(qvec.reshape(1, -1), k, params=params)
        return scores[0], pos[0]

    def _exact(self, qvec: np.ndarray, k: int, allowed: np.ndarray | None):
        """The exact top ``k`` (ties: lower position first) of all vectors or of ``allowed``,
        as a numpy product. A flat index's vectors are read in place from FAISS's own array:
        for one query a matrix-vector product beats FAISS's flat search, which uses BLAS only
        for batches of 20+ queries (bench/dense.py: 0.32 vs 0.79 ms at 10,370 vectors, 5.1 vs
        15.1 ms at 100,000); an HNSW index hands back the allowed vectors it stores."""
        import faiss

        if self.kind == "flat":
            n = self.index_.ntotal
            vectors = faiss.rev_swig_ptr(self.index_.get_xb(), n * self.dim_).reshape(n, -1)
            vectors = vectors if allowed is None else vectors[allowed]
        else:
            vectors = self.index_.reconstruct_batch(allowed)
        scores = vectors @ np.asarray(qvec, dtype=np.float32)
        top = np.asarray(top_k(scores, k), dtype=np.int64)
        return scores[top], (top if allowed is None else allowed[top])

    # -- persistence: files inside a folder that DenseIndex saves atomically ------------------
    def write(self, folder: Path) -> None:
        """Write ``index.faiss``, ``records.json`` and ``store.json`` (kind, dimension,
        properties) into ``folder`` (``DenseIndex.save`` makes the folder, checksums the
        files in its manifest and swaps it in atomically)."""
        import faiss

        self._built()
        folder = Path(folder)
        faiss.write_index(self.index_, str(folder / "index.faiss"))
        (folder / "records.json").write_text(dumps(self.records_), encoding="utf-8")
        (folder / "store.json").write_text(
            json.dumps({"kind": self.kind, "dim": self.dim_, "properties": self.properties_}),
            encoding="utf-8")

    def read(self, folder: Path) -> FaissStore:
        """Fill this store from what ``write`` put in ``folder`` (``DenseIndex.load`` checks
        the folder's checksums first); returns the store. The saved index must be of this
        store's kind and hold one vector per record."""
        import faiss

        folder = Path(folder)
        meta = json.loads((folder / "store.json").read_text(encoding="utf-8"))
        if meta["kind"] != self.kind:
            raise ValueError(f"{str(folder)!r} holds a {meta['kind']!r} FAISS index, but this "
                             f"store is kind={self.kind!r}")
        self.create(meta["dim"], meta["properties"])
        try:
            self.index_ = faiss.read_index(str(folder / "index.faiss"))
        except RuntimeError as err:    # damaged before its checksum was taken
            reason = str(err).rsplit(": ", 1)[-1].strip()
            raise CorruptIndexError(f"{str(folder / 'index.faiss')!r} is not an index FAISS "
                                    f"can read ({reason})",
                                    "rebuild and save the index again") from None
        self.records_ = loads((folder / "records.json").read_text(encoding="utf-8"))
        self.positions_ = {r["id"]: i for i, r in enumerate(self.records_)}
        if self.index_.ntotal != len(self.records_) or self.index_.d != self.dim_:
            raise ValueError(f"{str(folder)!r}: index.faiss holds {self.index_.ntotal} "
                             f"{self.index_.d}-d vectors for {len(self.records_)} records")
        return self

    def _repr_state(self) -> str:
        return f"{self.dim_}-d, {len(self)} items" if hasattr(self, "index_") else ""
