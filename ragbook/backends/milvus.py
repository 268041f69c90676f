"""The retriever contract on Milvus: one client for Milvus Lite (embedded) and a cluster.

``pymilvus.MilvusClient`` talks to a Milvus Lite database when given a local path ending in
``.db`` (a *folder*: Milvus Lite keeps a write-ahead log, Parquet segments and FAISS indexes
there, and serves them over gRPC from a thread of this process) and to a Milvus standalone
server or cluster when given ``http://host:19530``. Nothing else in this module changes.

One collection holds everything a retriever needs, one row per item::

    id (primary key)  doc_id  text  context_chars  start  end  metadata (JSON)  tuples  seq
    vector  (FLOAT_VECTOR, FLAT or HNSW index, inner product)
    sparse  (SPARSE_FLOAT_VECTOR, written by Milvus's BM25 function from ``text``)

so the dense and the keyword index are written by one insert and cannot drift apart.
``where`` filters become Milvus boolean expressions on the JSON field and run *inside* the
search (``milvus_filter``, ``ragbook.backends.expressions``); a condition that cannot be
written is an error, never dropped.

>>> milvus_filter({"department": "community", "status": {"$ne": "superseded"}})
'metadata["department"] == "community" and (metadata["status"] is null or \
metadata["status"] != "superseded")'
>>> retriever = MilvusRetriever(Encoder(), uri="milvus/hc.db").build(chunks)  # doctest: +SKIP
>>> retriever.search("refund window?", k=3, where={"status": "current"})   # doctest: +SKIP
[Hit(id='billing-refund-policy:0-812', score=0.0325..., rank=1, ...), ...]

Measured quirks of Milvus Lite 3.2.2 (``tests/test_milvus.py`` pins each one): BM25
distances come back negative (``-score``; a server returns ``+score``), so scores are
``abs(distance)``; a reopened collection is not loaded (``open`` loads it); a second process
opening the same folder fails with a bare "Open local milvus failed" (we say why); Lite
knows only the ``standard`` and ``jieba`` tokenizers, always lower-cases, and ignores every
filter but ``stop`` (a server's ``standard`` tokenizer needs the ``lowercase`` filter to
match); BM25 statistics (IDF, average length) are per segment, not per collection; ``in`` is
not accepted on JSON paths (``ragbook.backends.expressions``); Lite's BM25 ``k1`` defaults
to 1.5, Milvus's and ours to 1.2, so it is always set. New rows are searchable by BM25
without a ``flush`` (Strong consistency), but scored with the statistics of the segment they
sit in: ``build`` flushes the bulk load into one segment, while a row added or upserted later
sits in a small segment of its own and gets a near-zero IDF there (chapter 11 shows an edited
chunk falling out of the BM25 top 20; rebuilding cures it). Dense search is unaffected.
"""
from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import re
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..bm25 import STOPWORDS
from ..dense import EncoderMismatchError, _check_vectors, passage_vectors
from ..embeddings import Encoder
from ..retrieval import (
    NotBuiltError,
    check_k,
    check_query,
    corpus_fingerprint,
    index_text,
    make_hit,
    records_from,
)
from ..types import Chunk, Document, Hit
from .expressions import MATCH_NOTHING, ids_filter, milvus_filter

__all__ = ["MilvusStore", "MilvusRetriever", "MilvusLockedError", "milvus_filter",
           "DEFAULT_ANALYZER", "MILVUS_STANDARD", "MATCH_NOTHING"]

# Milvus's standard analyzer, plus the stopwords ragbook's BM25 drops: without them a
# question's "how do I" outweighs its content words (Spearman's rho with our BM25 on the
# Python docs: 0.10 without, 0.72 with; docs/benchmarks.md)
MILVUS_STANDARD = {"tokenizer": "standard", "filter": ["lowercase"]}
DEFAULT_ANALYZER = {"tokenizer": "standard",
                    "filter": ["lowercase", {"type": "stop", "stop_words": sorted(STOPWORDS)}]}
MAX_K = 16_384             # Milvus's ceiling on topk / limit
INDEXES = ("FLAT", "HNSW")
MODES = ("dense", "bm25", "hybrid")
FORMAT = "1"
_OUT = ["doc_id", "text", "context_chars", "start", "end", "metadata", "tuples"]


class MilvusLockedError(RuntimeError):
    """A Milvus Lite folder is open in another process (one process per folder)."""


def _pymilvus():
    try:
        import pymilvus
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            'the Milvus backend needs pymilvus and milvus-lite: pip install "ragbook[milvus]" '
            '(or make setup)') from err
    return pymilvus


# -- rows <-> records ----------------------------------------------------------------------
def _row(rec: Mapping[str, Any], vector: np.ndarray, seq: int) -> dict:
    body, context = index_text(rec), rec.get("context") or ""
    if len(body.encode("utf-8")) > 65_535:
        raise ValueError(f"item {rec['id']!r} is {len(body.encode('utf-8')):,} bytes of text; a "
                         f"Milvus VARCHAR holds at most 65,535: chunk the document first")
    if len(rec["id"].encode("utf-8")) > 1024 or len(rec["doc_id"].encode("utf-8")) > 1024:
        raise ValueError(f"item id {rec['id']!r:.60} or its doc_id is over 1,024 bytes")
    md = rec["metadata"]
    return {"id": rec["id"], "doc_id": rec["doc_id"], "text": body,
            "context_chars": len(context),
            "start": -1 if rec.get("start") is None else rec["start"],
            "end": -1 if rec.get("end") is None else rec["end"],
            "metadata": {k: list(v) if isinstance(v, tuple) else v for k, v in md.items()},
            "tuples": json.dumps([k for k, v in md.items() if isinstance(v, tuple)]),
            "seq": seq, "vector": vector.tolist()}


def _record(row: Mapping[str, Any]) -> dict:
    body, n = row["text"], row["context_chars"]
    tuples = set(json.loads(row["tuples"] or "[]"))
    md = {k: tuple(v) if k in tuples else v for k, v in (row["metadata"] or {}).items()}
    rec = {"id": row["id"], "doc_id": row["doc_id"], "text": body[n + 2:] if n else body,
           "start": None if row["start"] < 0 else row["start"],
           "end": None if row["end"] < 0 else row["end"], "metadata": md}
    if n:
        rec["context"] = body[:n]
    return rec


def _entity(hit: Mapping[str, Any]) -> dict:
    """A search hit's row (pymilvus nests output fields under ``entity``)."""
    row = dict(hit.get("entity") or {})
    row["id"] = hit.get("id", row.get("id"))
    return row


@contextlib.contextmanager
def _quiet(*loggers: str):
    """Silence log lines we turn into a clearer exception (or that are noise, like Lite's
    missing iterator timestamp), for the duration of one call."""
    saved = [(lg, lg.level) for lg in map(logging.getLogger, loggers)]
    for lg, _ in saved:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


# -- the Milvus Lite servers this process started ------------------------------------------
_OPEN: dict[str, int] = {}   # folder -> stores using it here
_LOCAL_GRPC = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": 0}


def _is_local(uri: str) -> bool:
    return not re.match(r"^(https?|tcp|unix):", uri)


def _locked_elsewhere(folder: str) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: no flock to probe with
        return False
    lock = os.path.join(folder, "LOCK")
    if not os.path.exists(lock):
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _release(folder: str, scratch: str | None) -> None:
    """Stop this process's Milvus Lite server for ``folder`` when no store uses it."""
    _OPEN[folder] = _OPEN.get(folder, 1) - 1
    if _OPEN[folder] <= 0:
        _OPEN.pop(folder, None)
        try:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(folder)
        except ImportError:
            pass
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)


class MilvusStore:
    """The ``VectorStore`` on Milvus (settings here; ``create`` or ``open`` connects).

    ``uri``: a Milvus Lite folder ending in ``.db`` (None: a temporary one, deleted on
    ``close``), or ``http://host:19530`` for a server or cluster (``token`` if it needs one).
    ``index``: ``FLAT`` (exact) or ``HNSW`` (``hnsw_m`` links, ``ef_construction``,
    ``ef_search`` candidates per query). ``analyzer``, ``bm25_k1``, ``bm25_b``: the keyword
    side. Writes and reads use Strong consistency, so a search sees every earlier write.
    """

    def __init__(self, uri: str | os.PathLike | None = None, collection: str = "ragbook", *,
                 index: str = "FLAT", hnsw_m: int = 16, ef_construction: int = 200,
                 ef_search: int = 64, analyzer: Mapping[str, Any] | None = None,
                 bm25_k1: float = 1.2, bm25_b: float = 0.75, token: str = "",
                 batch_size: int = 512):
        if index not in INDEXES:
            raise ValueError(f"index must be one of {', '.join(INDEXES)}, got {index!r}")
        if not isinstance(collection, str) or not re.fullmatch(r"[A-Za-z_]\w{0,254}",
                                                               collection):
            raise ValueError(f"collection must be a Milvus name (letters, digits and _, not "
                             f"starting with a digit), got {collection!r}")
        uri = None if uri is None else os.fspath(uri)
        if uri is not None and _is_local(uri) and not uri.endswith(".db"):
            raise ValueError(f"uri {uri!r}: a Milvus Lite database is a folder whose name ends "
                             f"in .db (e.g. 'milvus/helpcentre.db'); a server is http://host:19530")
        self.uri, self.collection, self.index, self.token = uri, collection, index, token
        self.hnsw_m, self.ef_construction = check_k(hnsw_m, "hnsw_m"), ef_construction
        self.ef_search, self.batch_size = check_k(ef_search, "ef_search"), batch_size
        self.analyzer = dict(analyzer or DEFAULT_ANALYZER)
        self.bm25_k1, self.bm25_b = float(bm25_k1), float(bm25_b)
        self._client = None
        self._fingerprint: str | None = None
        self._next_seq: int | None = None

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
        pymilvus = _pymilvus()
        if self.uri is not None and not _is_local(self.uri):
            return pymilvus.MilvusClient(uri=self.uri, token=self.token)
        scratch = None
        if self.uri is None:
            scratch = tempfile.mkdtemp(prefix="ragbook-milvus-")
            self.uri = os.path.join(scratch, "milvus.db")
        folder = os.path.abspath(self.uri)
        Path(folder).parent.mkdir(parents=True, exist_ok=True)
        try:
            import milvus_lite  # noqa: F401
        except ModuleNotFoundError as err:
            raise ModuleNotFoundError('a local Milvus database needs milvus-lite: pip install '
                                      '"ragbook[milvus]"') from err
        try:
            with _quiet("milvus_lite.server_manager"):
                # no keepalive pings to our own thread: Lite's server answers an idle client's
                # 10 s pings with GOAWAY "too_many_pings", logged by gRPC on stderr
                client = pymilvus.MilvusClient(folder, grpc_options=_LOCAL_GRPC)
        except Exception as err:
            if folder not in _OPEN and _locked_elsewhere(folder):
                raise MilvusLockedError(
                    f"the Milvus Lite database {folder!r} is open in another process, and "
                    f"Milvus Lite allows one process per database folder. Close the other "
                    f"process (or its retriever: .close()), work on a copy of the folder, or "
                    f"serve it once with `milvus-lite server --data-dir {folder}` and connect "
                    f"every process to http://127.0.0.1:19530") from None
            raise RuntimeError(f"could not open Milvus Lite at {folder!r}: {err}") from err
        _OPEN[folder] = _OPEN.get(folder, 0) + 1
        self._closer = weakref.finalize(self, _release, folder, scratch)
        return client

    def close(self) -> None:
        """Disconnect; a Milvus Lite server this process started stops with its last store
        (a temporary database is deleted). The folder can then be opened again, here or by
        another process."""
        if self._client is not None:
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
        """(Re)create the collection for ``dim``-d vectors, dropping any of the same name;
        ``properties`` (str -> str) are kept with it, e.g. the encoder's fingerprint."""
        pm = _pymilvus()
        dim, c = check_k(dim, "dim"), self.client
        if c.has_collection(self.collection):
            c.drop_collection(self.collection)
        s = pm.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", pm.DataType.VARCHAR, is_primary=True, max_length=1024)
        s.add_field("doc_id", pm.DataType.VARCHAR, max_length=1024)
        s.add_field("text", pm.DataType.VARCHAR, max_length=65_535, enable_analyzer=True,
                    analyzer_params=self.analyzer)
        for name in ("context_chars", "start", "end", "seq"):
            s.add_field(name, pm.DataType.INT64)
        s.add_field("metadata", pm.DataType.JSON)
        s.add_field("tuples", pm.DataType.VARCHAR, max_length=4096)
        s.add_field("vector", pm.DataType.FLOAT_VECTOR, dim=dim)
        s.add_field("sparse", pm.DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(pm.Function(name="bm25", function_type=pm.FunctionType.BM25,
                                   input_field_names=["text"], output_field_names=["sparse"]))
        ip = c.prepare_index_params()
        params = ({"M": self.hnsw_m, "efConstruction": self.ef_construction}
                  if self.index == "HNSW" else {})
        ip.add_index(field_name="vector", index_type=self.index, metric_type="IP",
                     params=params)
        ip.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX",
                     metric_type="BM25", params={"bm25_k1": self.bm25_k1, "bm25_b": self.bm25_b})
        props = {"ragbook.format": FORMAT, "ragbook.dim": str(dim),
                 "ragbook.index": self.index, **(properties or {})}
        c.create_collection(self.collection, schema=s, index_params=ip,
                            consistency_level="Strong", properties=props)
        c.load_collection(self.collection)
        self.dim_, self.properties_ = dim, props
        self._fingerprint, self._next_seq = None, 0
        return self

    def open(self) -> MilvusStore:
        """Attach to an existing collection (a reopened one must be loaded before searching:
        this does it) and read its dimension and properties."""
        c = self.client
        if not c.has_collection(self.collection):
            raise FileNotFoundError(f"no collection {self.collection!r} at {self.uri!r} (it "
                                    f"has {c.list_collections()}); build one first")
        props = dict(c.describe_collection(self.collection).get("properties") or {})
        if props.get("ragbook.format") != FORMAT:
            raise ValueError(f"collection {self.collection!r} was not written by this "
                             f"ragbook (format {props.get('ragbook.format')!r}); rebuild it")
        c.load_collection(self.collection)
        self.dim_, self.properties_ = int(props["ragbook.dim"]), props
        self.index = props.get("ragbook.index", self.index)
        self._fingerprint = self._next_seq = None
        return self

    def _ready(self):
        if not hasattr(self, "dim_"):
            raise NotBuiltError("this MilvusStore is not connected to a collection: call "
                                ".create(dim) or .open()")
        return self.client

    # -- writing ---------------------------------------------------------------------------
    def _existing(self, ids: Sequence[str], fields=("seq",)) -> dict[str, dict]:
        out: dict[str, dict] = {}
        ids = list(ids)
        for i in range(0, len(ids), 1000):
            rows = self._ready().query(self.collection, filter=ids_filter(ids[i:i + 1000]),
                                       output_fields=["id", *fields])
            out.update({r["id"]: r for r in rows})
        return out

    def _seq(self) -> int:
        if self._next_seq is None:
            seqs = [r["seq"] for r in self._scan(["seq"])]
            self._next_seq = max(seqs, default=-1) + 1
        return self._next_seq

    def _write(self, method: str, rows: list[dict]) -> None:
        for i in range(0, len(rows), self.batch_size):
            getattr(self.client, method)(self.collection, rows[i:i + self.batch_size])
        self._fingerprint = None

    def _rows(self, records, vectors, seqs) -> list[dict]:

        vectors = _check_vectors(vectors, self.dim_, len(records))
        if len({r["id"] for r in records}) != len(records):
            raise ValueError("the records to write repeat an id; ids must be unique")
        return [_row(r, v, s) for r, v, s in zip(records, vectors, seqs, strict=True)]

    def add(self, records: Sequence[dict], vectors: np.ndarray) -> None:
        """Insert records and their vectors (dense and BM25 in one write); an id already
        stored is an error (``upsert`` replaces)."""
        self._ready()
        taken = self._existing([r["id"] for r in records], ())
        if taken:
            raise ValueError(f"item id {next(iter(taken))!r} is already in the collection; "
                             f"use upsert to replace it, or delete it first")
        start = self._seq()
        rows = self._rows(records, vectors, range(start, start + len(records)))
        self._write("insert", rows)
        self._next_seq = start + len(records)

    def upsert(self, records: Sequence[dict], vectors: np.ndarray) -> tuple[int, int]:
        """Insert new records, replace stored ones with the same id (keeping their place in
        the corpus order); returns (added, replaced). On Milvus Lite the written rows get
        their own segment's BM25 statistics (see the module notes)."""
        self._ready()
        old = self._existing([r["id"] for r in records])
        n, seqs = self._seq(), []
        for r in records:
            seqs.append(old[r["id"]]["seq"] if r["id"] in old else n)
            n += r["id"] not in old
        self._write("upsert", self._rows(records, vectors, seqs))
        self._next_seq = n
        return len(records) - len(old), len(old)

    def delete(self, ids: Sequence[str]) -> int:
        """Remove the items with ``ids`` (unknown ids are ignored); return how many went.
        (Milvus's delete by ids echoes the ids it was given, found or not, so we look first.)"""
        found = list(self._existing(list(ids), ()))
        for i in range(0, len(found), 1000):
            self.client.delete(self.collection, filter=ids_filter(found[i:i + 1000]))
        if found:
            self._fingerprint = None
        return len(found)

    def flush(self) -> None:
        """Seal what was written into segments (on a cluster: lets indexes build on them)."""
        self._ready().flush(self.collection)

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        rows = self._ready().query(self.collection, filter="", output_fields=["count(*)"])
        return int(rows[0]["count(*)"])

    def get(self, ids: Sequence[str]) -> list[dict]:
        """The records for ``ids`` in that order; an unknown id is a KeyError naming it."""
        rows = self._existing(list(ids), _OUT)
        missing = [i for i in ids if i not in rows]
        if missing:
            raise KeyError(f"no item with id {missing[0]!r} in collection {self.collection!r} "
                           f"({len(missing)} unknown ids)")
        return [_record(rows[i]) for i in ids]

    def _scan(self, fields: list[str]) -> list[dict]:
        with _quiet("pymilvus.client.iterator.query_iterator"):  # Lite: no session timestamp
            it = self._ready().query_iterator(self.collection, batch_size=1000, filter="",
                                              output_fields=fields)
        rows = []
        try:
            while batch := it.next():
                rows += batch
        finally:
            it.close()
        return rows

    def records(self) -> list[dict]:
        """Every stored record, in the order the items were first added."""
        rows = sorted(self._scan([*_OUT, "seq"]), key=lambda r: r["seq"])
        return [_record(r) for r in rows]

    @property
    def corpus_fingerprint(self) -> str:
        """``ragbook.retrieval.corpus_fingerprint`` of the records in corpus order: equal to a
        DenseIndex's built from the same items (cached; reset by this store's writes)."""
        if self._fingerprint is None:
            self._fingerprint = corpus_fingerprint(self.records())
        return self._fingerprint

    def _search(self, field: str, data: list, k: int, expr: str, ids_only: bool = False,
                **extra) -> list[list]:
        """Per query: [(record, score), ...] best first, ``expr`` applied in the search;
        ``ids_only``: [(id, score), ...], fetching no stored fields."""
        k = min(check_k(k), MAX_K)
        if expr == MATCH_NOTHING:
            return [[] for _ in data]
        c, out = self._ready(), [] if ids_only else _OUT
        if field == "hybrid":
            pm = _pymilvus()
            depth = min(max(extra["depth"], k), MAX_K)
            reqs = [pm.AnnSearchRequest(data=extra["vectors"], anns_field="vector",
                                        param=self._dense_params(depth), limit=depth,
                                        expr=expr or None),
                    pm.AnnSearchRequest(data=data, anns_field="sparse", param={},
                                        limit=depth, expr=expr or None)]
            res = c.hybrid_search(self.collection, reqs, ranker=pm.RRFRanker(extra["rrf_k"]),
                                  limit=k, output_fields=out)
        else:
            params = self._dense_params(k) if field == "vector" else {}
            res = c.search(self.collection, data=data, anns_field=field, filter=expr,
                           limit=k, output_fields=out, search_params=params)
        # BM25: Milvus Lite returns -score, a Milvus server +score; a BM25 score is >= 0
        fix = abs if field == "sparse" else float
        row = (lambda h: h["id"]) if ids_only else (lambda h: _record(_entity(h)))
        return [[(row(h), fix(float(h["distance"]))) for h in hits] for hits in res]

    def _dense_params(self, k: int) -> dict:
        if self.index == "HNSW":  # a graph search returns at most ef results: explore >= k
            return {"metric_type": "IP", "params": {"ef": max(self.ef_search, k)}}
        return {"metric_type": "IP"}

    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query row: the ids and inner products of the best ``k`` records passing
        ``where`` (filtered inside Milvus's search)."""

        self._ready()
        q = _check_vectors(vectors, self.dim_)
        found = self._search("vector", q.tolist(), k, milvus_filter(where), ids_only=True)
        return ([[i for i, _ in hits] for hits in found],
                [np.array([s for _, s in hits], dtype=np.float32) for hits in found])

    def __repr__(self) -> str:
        where = "not connected" if self._client is None else f"{self.uri!r}"
        return f"MilvusStore({where}, collection={self.collection!r}, index={self.index!r})"


class MilvusRetriever:
    """Dense, BM25 or hybrid retrieval on Milvus, satisfying the ``Retriever`` contract.

    ``mode``: ``dense`` (inner product of unit vectors = cosine), ``bm25`` (Milvus's BM25
    function over ``text``) or ``hybrid`` (both, each ``depth`` deep, fused by Milvus's
    ``RRFRanker(rrf_k)`` inside ``hybrid_search``). One collection serves all three:
    ``with_mode`` gives another view of it. The other settings go to ``MilvusStore``.
    """

    def __init__(self, encoder=None, *, uri: str | os.PathLike | None = None,
                 collection: str = "ragbook", mode: str = "hybrid", depth: int = 100,
                 rrf_k: int = 60, **store_settings):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or not 0 < rrf_k < 16_384:
            raise ValueError(f"rrf_k must be a whole number in 1..16383 (Milvus's RRFRanker "
                             f"takes an int), got {rrf_k!r}")
        if encoder is None:
            encoder = Encoder()
        self.encoder, self.uri, self.collection, self.mode = encoder, uri, collection, mode
        self.depth, self.rrf_k = check_k(depth, "depth"), rrf_k
        self.store_settings = store_settings

    # -- building, reopening, writing ------------------------------------------------------
    def build(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None,
              contexts: Sequence[str] | None = None) -> MilvusRetriever:
        """Embed ``items`` (or take ``vectors``) and write them, with their BM25 vectors, into a
        fresh collection (one that exists is replaced). ``contexts``: a note per item indexed
        in front of its text by both channels; hits return the item's own text. Returns self.
        Raises ``ValueError`` for blank texts, duplicate ids or bad vectors (naming the item),
        ``ModuleNotFoundError`` when pymilvus/milvus-lite are not installed (with the pip
        command), ``MilvusLockedError`` when another process has the local database open."""
        records = records_from(items, contexts)
        vectors = self._vectors(records, vectors)
        t = time.perf_counter()
        store = MilvusStore(self.uri, self.collection, **self.store_settings)
        store.create(vectors.shape[1] if len(records) else self.encoder.dim,
                     {"ragbook.encoder": self.encoder.fingerprint})
        store.add(records, vectors)
        store.flush()
        self.build_seconds_ = time.perf_counter() - t
        self.store_, self.uri = store, store.uri
        self.encoder_fingerprint_ = self.encoder.fingerprint
        return self

    @classmethod
    def open(cls, uri: str | os.PathLike, encoder=None, *, collection: str = "ragbook",
             mode: str = "hybrid", depth: int = 100, rrf_k: int = 60, **store_settings
             ) -> MilvusRetriever:
        """Reopen a collection written by ``build`` (this or another session). The query
        encoder must be the one that built it: checked now, not at the first query
        (``EncoderMismatchError``). ``FileNotFoundError`` when there is no such collection."""
        self = cls(encoder, uri=uri, collection=collection, mode=mode, depth=depth,
                   rrf_k=rrf_k, **store_settings)
        self.store_ = MilvusStore(uri, collection, **store_settings).open()
        self.encoder_fingerprint_ = self.store_.properties_.get("ragbook.encoder", "?")
        self._check_encoder()
        return self

    def _vectors(self, records: list[dict], vectors) -> np.ndarray:
        return passage_vectors(self.encoder, records, vectors)

    def add(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
            ) -> MilvusRetriever:
        """Embed and insert more items (an id already stored is an error)."""
        self._check_encoder()
        records = records_from(items)
        self._built().add(records, self._vectors(records, vectors))
        return self

    def upsert(self, items: Sequence[Chunk | Document], vectors: np.ndarray | None = None
               ) -> tuple[int, int]:
        """Insert or replace items by id, both channels in one write; (added, replaced)."""
        self._check_encoder()
        records = records_from(items)
        return self._built().upsert(records, self._vectors(records, vectors))

    def delete(self, ids: Sequence[str]) -> int:
        """Remove items by id; returns how many were removed."""
        return self._built().delete(list(ids))

    def close(self) -> None:
        """Close the store (see ``MilvusStore.close``); a retriever that was never built has
        nothing to close. Using it as a context manager calls this on exit."""
        if hasattr(self, "store_"):
            self.store_.close()

    def __enter__(self) -> MilvusRetriever:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the contract ----------------------------------------------------------------------
    def _built(self) -> MilvusStore:
        if not hasattr(self, "store_"):
            raise NotBuiltError("this MilvusRetriever is empty: call .build(chunks) or "
                                "MilvusRetriever.open(uri)")
        return self.store_

    def _check_encoder(self) -> None:

        self._built()
        if self.encoder.fingerprint != self.encoder_fingerprint_:
            raise EncoderMismatchError(
                f"collection {self.collection!r} was built with {self.encoder_fingerprint_!r} "
                f"but the query encoder is {self.encoder.fingerprint!r}; vectors of different "
                f"models are not comparable. Query with the same encoder, or rebuild")

    def with_mode(self, mode: str) -> MilvusRetriever:
        """The same collection searched another way (``dense``, ``bm25`` or ``hybrid``)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        view = copy.copy(self)
        view.mode = mode
        return view

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
               ) -> list[Hit]:
        """The best ``k`` items for ``query``, best first, filtered by ``where`` inside the
        search (dense: cosine; bm25: BM25 score; hybrid: RRF score). Raises ``NotBuiltError``
        before ``build``/``open``, ``EncoderMismatchError`` when the query encoder is not
        the one that built the collection, ``ValueError`` for a blank query or a bad ``k``,
        ``TypeError``/``ValueError`` for a ``where`` that cannot be translated to a Milvus
        filter."""
        store = self._built()
        k, query = check_k(k), check_query(query)
        expr = milvus_filter(where)
        if self.mode == "bm25":
            found = store._search("sparse", [query], k, expr)
        else:
            self._check_encoder()
            qv = self.encoder.encode_queries([query]).tolist()
            if self.mode == "dense":
                found = store._search("vector", qv, k, expr)
            else:
                found = store._search("hybrid", [query], k, expr, vectors=qv,
                                      depth=self.depth, rrf_k=self.rrf_k)
        return [make_hit(rec, score, r) for r, (rec, score) in enumerate(found[0], 1)]

    def __len__(self) -> int:
        return len(self.store_) if hasattr(self, "store_") else 0

    @property
    def items_(self) -> list[dict]:
        """Every stored record (id, doc_id, text, start, end, metadata), in corpus order."""
        return self._built().records()

    @property
    def corpus_fingerprint(self) -> str:
        """The store's ``corpus_fingerprint`` (ids and texts, in order): equal to a
        ``DenseIndex`` built from the same chunks. Raises ``NotBuiltError`` before ``build``."""
        return self._built().corpus_fingerprint

    def __repr__(self) -> str:
        state = (f"{self.store_.uri!r}/{self.collection}" if hasattr(self, "store_")
                 else "not built")
        return f"MilvusRetriever(mode={self.mode!r}, {state})"
