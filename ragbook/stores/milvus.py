"""MilvusStore: the ``VectorStore`` on Milvus, one client for Milvus Lite and a cluster.

``pymilvus.MilvusClient`` talks to a Milvus Lite database when given a local path ending in
``.db`` (a *folder*: Milvus Lite keeps a write-ahead log, Parquet segments and FAISS indexes
there, and serves them over gRPC from a thread of this process) and to a Milvus standalone
server or cluster when given ``http://host:19530``. Nothing else in this module changes.

One collection holds everything, one row per item (its layout: ``milvus_collection``), so
the dense and the keyword index are written by one insert and cannot drift apart.
``DenseIndex(encoder, MilvusStore(uri))`` uses the ``VectorStore`` protocol (the dense
field); ``MilvusRetriever`` (``ragbook.milvus_retriever``) adds what only Milvus does: BM25
on the sparse field (``keyword_search``) and both fused inside Milvus (``hybrid_search``).
``where`` filters become Milvus boolean expressions on the JSON field and run *inside* the
search (``ragbook.stores.expressions``); a condition that cannot be written is an error,
never dropped.

>>> MilvusStore("milvus/helpcentre.db", index="HNSW")      # settings only: nothing connects yet
MilvusStore(uri='milvus/helpcentre.db', index='HNSW')

Milvus Lite's measured quirks, and how each is met, are noted in ``milvus_collection``, which
also holds the alias that rebuilds switch. Every row is checked against a Milvus server's
limits before any is written (``milvus_rows.check_record``).

A Milvus server before 2.5 (tested against the 2.3.5 standalone server of the pip package
``milvus``: ``tests/test_milvus_server.py``) has no BM25 function, no sparse vectors and no
``is null``: there ``create`` makes a dense-only collection, ``keyword_search`` and
``hybrid_search`` raise ``MilvusVersionError`` (naming the version and the way out), and
filters are written for it (``expressions.milvus_filter(old_server=True)``).
"""
from __future__ import annotations

import contextlib
import os
import re
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import check_k, check_vectors
from ..component import Component, NotBuiltError
from ..retrieval import corpus_fingerprint
from ..text import STOPWORDS
from .expressions import MATCH_NOTHING, milvus_filter
from .milvus_collection import (
    builds,
    check_pointer,
    count_rows,
    create_collection,
    delete_rows,
    drop_builds_before,
    live_collection,
    open_collection,
    rows_by_id,
    scan,
    search_collection,
    switch_alias,
    write_pointer,
)
from .milvus_lite import MilvusLockedError, import_pymilvus, is_local, open_lite, release
from .milvus_rows import check_record, from_row, hit_row, to_rows

__all__ = ["MilvusStore", "MilvusLockedError", "MilvusVersionError", "DEFAULT_ANALYZER",
           "MILVUS_STANDARD", "INDEXES", "MAX_K"]

# Milvus's standard analyzer, plus the stopwords ragbook's BM25 drops: without them a
# question's "how do I" outweighs its content words (Spearman's rho with our BM25 on the
# Python docs: 0.10 without, 0.72 with; docs/benchmarks.md)
MILVUS_STANDARD = {"tokenizer": "standard", "filter": ["lowercase"]}
DEFAULT_ANALYZER = {"tokenizer": "standard",
                    "filter": ["lowercase", {"type": "stop", "stop_words": sorted(STOPWORDS)}]}
MAX_K = 16_384             # Milvus's ceiling on topk / limit
INDEXES = ("FLAT", "HNSW")
_OUT = ["doc_id", "text", "context_chars", "start", "end", "metadata", "tuples"]


class MilvusVersionError(RuntimeError):
    """The Milvus server is too old for what was asked (BM25 and hybrid need >= 2.5)."""


class MilvusStore(Component):
    """The ``VectorStore`` on Milvus (settings here; ``create`` or ``open`` connects).

    ``uri``: a Milvus Lite folder ending in ``.db`` (None: a temporary one, deleted on
    ``close``), or ``http://host:19530`` for a server or cluster. ``token``: for a server that
    needs one; empty reads ``MILVUS_TOKEN`` from the environment when connecting (a token
    given here is a setting like any other, so ``write`` refuses to save it into a manifest).
    ``index``: ``FLAT`` (exact) or ``HNSW`` (``hnsw_m`` links, ``ef_construction``,
    ``ef_search`` candidates per query). ``analyzer`` (None: ``DEFAULT_ANALYZER``),
    ``bm25_k1``, ``bm25_b``: the keyword side. Writes and reads use Strong consistency, so a
    search sees every earlier write.
    """

    def __init__(self, uri: str | os.PathLike | None = None, collection: str = "ragbook", *,
                 index: str = "FLAT", hnsw_m: int = 16, ef_construction: int = 200,
                 ef_search: int = 64, analyzer: Mapping[str, Any] | None = None,
                 bm25_k1: float = 1.2, bm25_b: float = 0.75, token: str = "",
                 batch_size: int = 512):
        if index not in INDEXES:
            raise ValueError(f"index must be one of {', '.join(INDEXES)}, got {index!r}")
        if not isinstance(collection, str) or not re.fullmatch(r"[A-Za-z_]\w{0,239}",
                                                               collection):
            raise ValueError(f"collection must be a Milvus name (at most 240 letters, digits "
                             f"and _, not starting with a digit), got {collection!r}")
        uri = None if uri is None else os.fspath(uri)
        if uri is not None and is_local(uri) and not uri.endswith(".db"):
            raise ValueError(f"uri {uri!r}: a Milvus Lite database is a folder whose name ends "
                             f"in .db (e.g. 'milvus/helpcentre.db'); a server is http://host:19530")
        if analyzer is not None and not isinstance(analyzer, Mapping):
            raise TypeError(f"analyzer must be a mapping of Milvus analyzer params (e.g. "
                            f"MILVUS_STANDARD) or None, got {type(analyzer).__name__}")
        self.uri, self.collection, self.index, self.token = uri, collection, index, token
        self.hnsw_m, self.ef_construction = check_k(hnsw_m, "hnsw_m"), ef_construction
        self.ef_search, self.batch_size = check_k(ef_search, "ef_search"), batch_size
        self.analyzer = None if analyzer is None else dict(analyzer)
        self.bm25_k1, self.bm25_b = float(bm25_k1), float(bm25_b)
        self._client = None

    # -- connecting ------------------------------------------------------------------------
    @property
    def client(self):
        """The pymilvus ``MilvusClient``, connected on first use (Milvus Lite for a local
        folder or no ``uri``). Raises ``ModuleNotFoundError`` (with the pip command) when
        milvus-lite is missing, ``MilvusLockedError`` when another process has the folder."""
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self):
        uri = getattr(self, "uri_", None) or self.uri
        if uri is not None and not is_local(uri):
            pymilvus = import_pymilvus()
            self.uri_ = uri
            return pymilvus.MilvusClient(uri=uri,
                                         token=self.token or os.environ.get("MILVUS_TOKEN", ""))
        client, folder = open_lite(uri)    # Milvus Lite, served from a thread of this process
        self.uri_ = folder
        self._closer = weakref.finalize(self, release, folder)
        return client

    def close(self) -> None:
        """Disconnect; a Milvus Lite server this process started stops with its last store
        (a temporary database is deleted). The folder can then be opened again, here or by
        another process."""
        if self._client is not None:
            self._abandon()
            self._client.close()
            self._client = None
            if hasattr(self, "_closer"):
                self._closer()

    def __enter__(self) -> MilvusStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- creating and opening --------------------------------------------------------------
    def create(self, dim: int, properties: Mapping[str, str] | None = None) -> MilvusStore:
        """Create an empty collection for ``dim``-d vectors under this store's name;
        ``properties`` (str -> str) are kept with it, e.g. the encoder's fingerprint.

        A rebuild never loses what it replaces: each build is a collection of its own,
        ``NAME__vN``, reached through the alias ``NAME``. While an older collection holds
        the name, the alias moves only when the first write (the build's ``add``, every row
        checked before any is written) has succeeded, and the old collection is dropped
        after that; a failed write, or ``close`` before any write, drops the new collection
        and leaves the old one live and untouched. On a Milvus server before 2.5 the
        collection has no BM25 field (see ``require_bm25``)."""
        import_pymilvus()                     # without it: say what to install, first
        dim, c = check_k(dim, "dim"), self.client
        self._abandon()                       # an earlier create of this store, never written
        live, full = live_collection(c, self.collection), self._full()
        name = f"{self.collection}__v{max(builds(c, self.collection).values(), default=0) + 1}"
        props = create_collection(c, name, dim, properties, index=self.index,
                                  hnsw_m=self.hnsw_m, ef_construction=self.ef_construction,
                                  analyzer=(self.analyzer or DEFAULT_ANALYZER) if full else None,
                                  bm25_k1=self.bm25_k1, bm25_b=self.bm25_b)
        self.dim_, self.index_, self.properties_, self.bm25_ = dim, self.index, props, full
        self.dates_ = True
        self._fingerprint, self._next_seq, self._pending = None, 0, name
        if live is None:                      # nothing to protect: live at once
            self._publish()
        return self

    def open(self) -> MilvusStore:
        """Attach to an existing collection (a reopened one must be loaded before searching:
        this does it) and read its dimension, index type and properties. Raises
        ``FileNotFoundError`` when there is no such collection."""
        c = self.client
        self._abandon()
        props, fields = open_collection(c, self.collection, self.uri_ or self.uri)
        self.dim_, self.properties_ = int(props["ragbook.dim"]), props
        self.index_ = props.get("ragbook.index", self.index)
        self.bm25_, self.dates_ = "sparse" in fields, "dates" in fields
        self._fingerprint = self._next_seq = None
        return self

    # -- which collection holds the name: rebuilds switch an alias -------------------------
    @property
    def _name(self) -> str:
        """Where reads and writes go: a collection ``create`` made and no write has
        published yet, else the alias (so a rebuild elsewhere is seen at once)."""
        return getattr(self, "_pending", None) or self.collection

    def _publish(self) -> None:
        """Point the name at the collection ``create`` made (one alias switch), then drop
        the collection it replaces and any older build that died before its switch."""
        new = getattr(self, "_pending", None)
        if new is None:
            return
        switch_alias(self.client, self.collection, new)
        self._pending = None
        drop_builds_before(self.client, self.collection, new)

    def _abandon(self) -> None:
        """Drop a collection ``create`` made that no write has published: the live one is
        untouched, and this store is unconnected until the next ``create``/``open``."""
        name, self._pending = getattr(self, "_pending", None), None
        if name is not None:
            self.__dict__.pop("dim_", None)
            with contextlib.suppress(Exception):   # unreachable: the next publish drops it
                self.client.drop_collection(name)

    @contextlib.contextmanager
    def _publishing(self):
        """Around a write: on success publish a new build, on any failure abandon it."""
        try:
            yield
        except BaseException:
            self._abandon()
            raise
        self._publish()

    # -- what the server can do ------------------------------------------------------------
    def server_version(self) -> str:
        """The version the Milvus this store talks to reports (``v2.5.4``; Milvus Lite:
        ``milvus_lite-3.2.2``)."""
        if getattr(self, "server_version_", None) is None:
            self.server_version_ = str(self.client.get_server_version())
        return self.server_version_

    def _full(self) -> bool:
        """Milvus Lite or a server >= 2.5: a BM25 function, sparse vectors and ``is null``
        (an unreadable version string is taken as new)."""
        uri = getattr(self, "uri_", None) or self.uri
        if uri is None or is_local(uri):
            return True
        m = re.search(r"(\d+)\.(\d+)", self.server_version())
        return m is None or (int(m[1]), int(m[2])) >= (2, 5)

    def require_bm25(self, what: str = "BM25 and hybrid search") -> None:
        """Raise ``MilvusVersionError`` when ``what`` cannot run here: the server is older
        than Milvus 2.5, or the collection was built on one (it has no BM25 field)."""
        if not self._full():
            raise MilvusVersionError(
                f"{what} needs Milvus >= 2.5 (its BM25 function and sparse vectors), but the "
                f"server at {self.uri_ or self.uri} is Milvus {self.server_version()}. Search "
                f"it dense-only (MilvusRetriever(..., mode='dense'), or DenseIndex(encoder, "
                f"MilvusStore(uri))), or use a Milvus >= 2.5 server or Milvus Lite (a local "
                f"folder ending in .db)")
        if not getattr(self, "bm25_", True):
            raise MilvusVersionError(
                f"{what} needs a BM25 field, and collection {self.collection!r} was built "
                f"without one (on a Milvus server before 2.5): rebuild it on this server")

    def check_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Raise ``ValueError`` for the first record a Milvus server could not store (naming
        it, the limit and the fix: ``milvus_rows.check_record``), before any is written."""
        for r in records:
            check_record(r)

    def _where(self, where: Mapping[str, Any] | None) -> str:
        dates = "dates" if getattr(self, "dates_", True) else None
        return milvus_filter(where, old_server=not self._full(), dates=dates)

    def _ready(self):
        if not hasattr(self, "dim_"):
            raise NotBuiltError("this MilvusStore is not connected to a collection: call "
                                ".create(dim) or .open()")
        return self.client

    def properties(self) -> dict[str, str]:
        """The collection's properties: ``create``'s ``properties`` plus ragbook's own
        (``ragbook.format``, ``ragbook.dim``, ``ragbook.index``)."""
        self._ready()
        return dict(self.properties_)

    # -- writing ---------------------------------------------------------------------------
    def _existing(self, ids: Sequence[str], fields=("seq",)) -> dict[str, dict]:
        return rows_by_id(self._ready(), self._name, ids, fields)

    def _seq(self) -> int:
        if getattr(self, "_next_seq", None) is None:
            seqs = [r["seq"] for r in scan(self._ready(), self._name, ["seq"])]
            self._next_seq = max(seqs, default=-1) + 1
        return self._next_seq

    def _write(self, method: str, rows: list[dict]) -> None:
        if not self.dates_:                     # a collection from before the dates field
            rows = [{k: v for k, v in r.items() if k != "dates"} for r in rows]
        for i in range(0, len(rows), self.batch_size):
            getattr(self.client, method)(self._name, rows[i:i + self.batch_size])
        self._fingerprint = None

    def add(self, records: Sequence[dict], vectors: np.ndarray) -> None:
        """Insert records and their vectors (dense and BM25 in one write); an id already
        stored is an error (``upsert`` replaces)."""
        self._ready()
        with self._publishing():
            taken = self._existing([r["id"] for r in records], ())
            if taken:
                raise ValueError(f"item id {next(iter(taken))!r} is already in the "
                                 f"collection; use upsert to replace it, or delete it first")
            start = self._seq()
            rows = to_rows(records, vectors, range(start, start + len(records)), self.dim_)
            self._write("insert", rows)
        self._next_seq = start + len(records)

    def upsert(self, records: Sequence[dict], vectors: np.ndarray) -> tuple[int, int]:
        """Insert new records, replace stored ones with the same id (keeping their place in
        the corpus order); returns (added, replaced). On Milvus Lite the written rows get
        their own segment's BM25 statistics (see ``milvus_collection``'s notes)."""
        self._ready()
        with self._publishing():
            old = self._existing([r["id"] for r in records])
            n, seqs = self._seq(), []
            for r in records:
                seqs.append(old[r["id"]]["seq"] if r["id"] in old else n)
                n += r["id"] not in old
            self._write("upsert", to_rows(records, vectors, seqs, self.dim_))
        self._next_seq = n
        return len(records) - len(old), len(old)

    def delete(self, ids: Sequence[str]) -> int:
        """Remove the items with ``ids`` (unknown ids are ignored); return how many went.
        (Milvus's delete by ids echoes the ids it was given, found or not, so we look first.)"""
        found = list(self._existing(list(ids), ()))
        delete_rows(self.client, self._name, found)
        if found:
            self._fingerprint = None
        return len(found)

    def flush(self) -> None:
        """Seal what was written into segments (on a cluster: lets indexes build on them; on
        Milvus Lite: one segment, so one set of BM25 statistics, for the bulk load)."""
        self._ready().flush(self._name)

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return count_rows(self._ready(), self._name)

    def get(self, ids: Sequence[str]) -> list[dict]:
        """The records for ``ids`` in that order; an unknown id is a KeyError naming it."""
        rows = self._existing(list(ids), _OUT)
        missing = [i for i in ids if i not in rows]
        if missing:
            raise KeyError(f"no item with id {missing[0]!r} in collection {self.collection!r} "
                           f"({len(missing)} unknown ids)")
        return [from_row(rows[i]) for i in ids]

    def records(self) -> list[dict]:
        """Every stored record, in the order the items were first added."""
        rows = sorted(scan(self._ready(), self._name, [*_OUT, "seq"]), key=lambda r: r["seq"])
        return [from_row(r) for r in rows]

    @property
    def corpus_fingerprint(self) -> str:
        """``ragbook.retrieval.corpus_fingerprint`` of the records in corpus order: equal to a
        FaissStore's holding the same items (cached; reset by this store's writes)."""
        if getattr(self, "_fingerprint", None) is None:
            self._fingerprint = corpus_fingerprint(self.records())
        return self._fingerprint

    # -- searching -------------------------------------------------------------------------
    def _search(self, field: str, data: list, k: int, expr: str, ids_only: bool = False,
                **extra) -> list[list]:
        """Per query: [(record, score), ...] best first, ``expr`` applied in the search;
        ``ids_only``: [(id, score), ...], fetching no stored fields."""
        k = min(check_k(k), MAX_K)
        if expr == MATCH_NOTHING:
            return [[] for _ in data]
        if field == "hybrid":
            extra["depth"] = min(max(extra["depth"], k), MAX_K)
        found = search_collection(self._ready(), self._name, field, data, k, expr,
                                  output_fields=[] if ids_only else _OUT, index=self.index_,
                                  ef_search=self.ef_search, **extra)
        row = (lambda h: h["id"]) if ids_only else (lambda h: from_row(hit_row(h)))
        return [[(row(h), score) for h, score in hits] for hits in found]

    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query row: the ids and inner products of the best ``k`` records passing
        ``where`` (filtered inside Milvus's search)."""
        self._ready()
        q = check_vectors(vectors, self.dim_)
        found = self._search("vector", q.tolist(), k, self._where(where), ids_only=True)
        return ([[i for i, _ in hits] for hits in found],
                [np.array([s for _, s in hits], dtype=np.float32) for hits in found])

    def keyword_search(self, queries: Sequence[str], k: int,
                       where: Mapping[str, Any] | None = None) -> list[list[tuple[dict, float]]]:
        """Milvus's BM25 over the ``text`` field (analyzed by ``analyzer``): per query, the
        best ``k`` (record, BM25 score) pairs passing ``where``, best first."""
        self.require_bm25("keyword_search (BM25)")
        expr = self._where(where)
        return self._search("sparse", list(queries), k, expr)

    def hybrid_search(self, queries: Sequence[str], vectors: np.ndarray, k: int,
                      where: Mapping[str, Any] | None = None, *, depth: int = 100,
                      rrf_k: int = 60) -> list[list[tuple[dict, float]]]:
        """Dense (``vectors``) and BM25 (``queries``) searches, each ``depth`` deep with
        ``where`` applied, fused inside Milvus by ``RRFRanker(rrf_k)`` in one
        ``hybrid_search`` call: per query, the best ``k`` (record, RRF score) pairs."""
        self.require_bm25("hybrid_search")
        expr = self._where(where)
        self._ready()
        q = check_vectors(vectors, self.dim_, len(queries))
        return self._search("hybrid", list(queries), k, expr, vectors=q.tolist(),
                            depth=check_k(depth, "depth"), rrf_k=rrf_k)

    # -- persistence: the collection persists itself ------------------------------------------
    def write(self, folder: Path) -> None:
        """Milvus keeps the data: flush it, and write ``milvus.json`` (where the collection
        is, how many rows) into ``folder``; the saved ``settings()`` reopen it. Refuses a
        temporary database (``uri=None``, deleted on close) and a ``token`` (it would be
        written into the manifest; give it through ``MILVUS_TOKEN`` instead)."""
        if self.uri is None:
            raise ValueError("this MilvusStore is a temporary Milvus Lite database (uri=None), "
                             "deleted when it closes, so a save could not reopen it: give it "
                             "a uri (a folder ending in .db, or http://host:19530)")
        if self.token:
            raise ValueError("this MilvusStore was given a token, and a save writes its "
                             "settings into manifest.json; pass the token through the "
                             "MILVUS_TOKEN environment variable instead")
        self._publish()
        self.flush()
        write_pointer(folder, self.uri, self.collection, len(self))

    def read(self, folder: Path) -> MilvusStore:
        """Reopen the collection a saved ``milvus.json`` in ``folder`` points to (this store's
        settings are the saved ones); returns the store. ``FileNotFoundError`` when the
        collection is gone."""
        check_pointer(folder, self.uri, self.collection)
        return self.open()

    def _repr_state(self) -> str:
        return "" if self._client is None else f"connected to {self.uri_!r}"
