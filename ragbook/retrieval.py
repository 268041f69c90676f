"""The retrieval contract: what every retriever and vector store promises, in one place.

Dense, BM25, hybrid, reranked and scale-out (Milvus) retrievers all satisfy ``Retriever``;
in-process and remote vector stores satisfy ``VectorStore``. Everything they share lives
here, once: the checks on ``k``, queries, texts, thresholds and metadata, the ``where``
filter language, the stored record, the ``Hit`` builder, corpus fingerprints and atomic,
checksummed saves.

    Chunk/Document --record()--> record dict --store--> make_hit() --> Hit

>>> validate_where({"status": "current", "updated": {"$gte": "2025-01-01"}})
{'status': 'current', 'updated': {'$gte': '2025-01-01'}}
>>> matches({"status": "current", "updated": "2025-06-01"}, {"updated": {"$gte": "2025-01-01"}})
True
>>> check_k(3.0)
Traceback (most recent call last):
  ...
ValueError: k must be a whole number >= 1 (the number of results), got 3.0; pass e.g. k=10
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .component import Component, NotBuiltError
from .types import Chunk, Document, Hit, Retrieved, Stage

__all__ = ["Retriever", "BaseRetriever", "VectorStore", "NotBuiltError", "CONFIDENCE_KINDS",
           "check_confidence_threshold", "trace_stage", "CorruptIndexError", "check_k",
           "check_query", "check_text", "check_threshold", "check_metadata", "validate_where",
           "matches", "translate_where", "record", "records_from", "index_text", "make_hit",
           "corpus_fingerprint", "save_atomic", "read_manifest", "OPERATORS", "check_vectors"]

FORMAT_VERSION = 3  # 3: corpus fingerprints cover metadata


class CorruptIndexError(ValueError):
    """A saved index does not match its manifest (a file changed, is missing or is truncated)."""


#: What a retriever's (or reranker's) ``confidence`` is, and the values it can take. The
#: pipeline's ``min_confidence`` is compared with exactly one of these, never a mix.
CONFIDENCE_KINDS = {
    "cosine": ("cosine similarity of the best dense hit", -1.0, 1.0),
    "bm25": ("BM25 score of the best keyword hit (unbounded above, corpus-dependent)",
             0.0, math.inf),
    "rrf": ("reciprocal-rank-fusion score of the best fused hit: at most "
            "sum(weights) / (rrf_k + 1), about 0.033 with the defaults", 0.0, math.inf),
    "rerank": ("the reranker model's score of the best candidate (a logit or a probability, "
               "depending on the model)", -math.inf, math.inf),
}


@runtime_checkable
class Retriever(Protocol):
    """Anything that finds items for a query.

    ``search`` returns at most ``k`` hits (``k`` is always the number of results), sorted
    by score, ranks from 1, never padded; items failing ``where`` are never returned.
    ``retrieve`` returns the same hits as a ``Retrieved``: with the stages that made them and
    the retriever's confidence (of kind ``confidence_kind``). ``corpus_fingerprint`` changes
    whenever an item's id or text changes; ``fingerprint`` whenever anything a result depends
    on changes (corpus, settings, models) — what caches key on.
    """

    confidence_kind: str

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
               ) -> list[Hit]:
        """At most ``k`` hits for ``query``, best first, ranks from 1, none failing ``where``."""

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
                 ) -> Retrieved:
        """``search``'s hits with their stages and the confidence in the best one."""

    def __len__(self) -> int: ...

    @property
    def corpus_fingerprint(self) -> str:
        """A hash of the indexed ids and texts (``retrieval.corpus_fingerprint``)."""

    @property
    def fingerprint(self) -> str:
        """A hash of everything a result depends on (``component.Component.fingerprint``)."""


def trace_stage(name: str, started: float, hits: Sequence[Hit], detail=None) -> Stage:
    """The trace record of a stage that began at ``started`` (``time.perf_counter()``) and
    passed on ``hits``: its top 10 ids and scores and the count."""
    return Stage(name, time.perf_counter() - started, tuple(h.id for h in hits[:10]),
                 tuple(round(h.score, 6) for h in hits[:10]),
                 {"count": len(hits), **(detail or {})})


class BaseRetriever(Component):
    """What every retriever shares: settings and fingerprint (``Component``) and a default
    ``retrieve`` = one ``search`` stage whose confidence is the top hit's score, of the kind
    the class declares in ``confidence_kind``. A retriever with stages of its own (the hybrid)
    or another confidence overrides ``retrieve``."""

    confidence_kind = "cosine"

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None
                 ) -> Retrieved:
        """The ``k`` best hits (as ``search``) with one ``search`` stage and the top score as
        the confidence (None when nothing was found)."""
        t = time.perf_counter()
        hits = self.search(query, k=k, where=where)
        return Retrieved(tuple(hits), (trace_stage("search", t, hits, {"where": where}),),
                         hits[0].score if hits else None, self.confidence_kind)

    def confidence_bounds(self) -> tuple[float, float]:
        """The lowest and highest confidence this retriever can report (a ``min_confidence``
        outside them can never, or always, be met)."""
        _, lo, hi = CONFIDENCE_KINDS[self.confidence_kind]
        return lo, hi


def check_confidence_threshold(value: float | None, kind: str, bounds: tuple[float, float],
                               declared: str | None = None, name: str = "min_confidence"
                               ) -> float | None:
    """Refuse a threshold compared with a quantity of another kind: ``declared`` (what the
    caller says the threshold is on) must equal ``kind`` (what the confidence is), and the
    value must lie within the confidence's ``bounds`` (a cosine threshold of 0.4 on an RRF
    score, which never exceeds ~0.033, would escalate every question)."""
    value = check_threshold(value, name)
    if declared is not None and declared not in CONFIDENCE_KINDS:
        raise ValueError(f"{name}_kind must be one of {', '.join(CONFIDENCE_KINDS)}, got "
                         f"{declared!r}")
    if value is None:
        return None
    fix = ("calibrate it on labelled questions with Pipeline.calibrate(...), which sets a "
           "threshold of the right kind")
    if declared is not None and declared != kind:
        raise ValueError(f"{name}={value} is a {declared} threshold, but this pipeline's "
                         f"confidence is a {kind} score ({CONFIDENCE_KINDS[kind][0]}); a "
                         f"threshold on one quantity means nothing on another: {fix}")
    lo, hi = bounds
    if not lo <= value <= hi:
        raise ValueError(f"{name}={value} lies outside what this pipeline's confidence can be "
                         f"([{lo:.4g}, {hi:.4g}]: {CONFIDENCE_KINDS[kind][0]}), so every "
                         f"question would escalate or none; {fix}")
    return value


@runtime_checkable
class VectorStore(Protocol):
    """Where a ``DenseIndex`` keeps vectors and their records: ``ragbook.stores.FaissStore``
    in process, ``ragbook.stores.MilvusStore`` embedded or on a cluster. A store is a
    ``Component``: its ``__init__`` takes settings only, and ``create(dim)`` makes it an empty
    store for ``dim``-d vectors (the dimension is the encoder's, known only at build time).
    Scores are inner products of unit vectors (= cosine); ``where`` is evaluated *inside*
    the search, so a narrow filter still returns ``k`` hits when ``k`` items match.

    ``DenseIndex`` uses nothing else, so a new engine is one class with these methods."""

    def create(self, dim: int, properties: Mapping[str, str] | None = None) -> VectorStore:
        """Empty the store and size it for ``dim``-d vectors; ``properties`` (str -> str, e.g.
        the encoder's fingerprint) are kept with it. Returns the store."""

    def add(self, records: Sequence[dict], vectors: np.ndarray) -> None:
        """Store records (``id``, ``text``, ``metadata``, ...) with their unit vectors, one row
        each; an id already stored is an error."""

    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query vector (rows of a (q, dim) array): the ids and inner products of the best
        ``k`` records passing ``where``, best first, never padded. With ``where=None`` this is
        the plain top ``k`` of the whole store (what a post-filter starts from)."""

    def get(self, ids: Sequence[str]) -> list[dict]:
        """The stored records with these ids, in the order asked (an unknown id is a KeyError)."""

    def delete(self, ids: Sequence[str]) -> int:
        """Remove records by id; returns how many were removed (unknown ids are skipped)."""

    def records(self) -> list[dict]:
        """Every stored record, in the order the items were added."""

    def properties(self) -> dict[str, str]:
        """The ``properties`` given to ``create``, as the store keeps them."""

    @property
    def corpus_fingerprint(self) -> str:
        """``corpus_fingerprint(self.records())``, changed by every write."""

    def write(self, folder: Path) -> None:
        """Persist the store into ``folder`` (``DenseIndex.save`` makes the folder, adds a
        checksummed manifest holding the store's ``settings()``, and swaps it in atomically)."""

    def read(self, folder: Path) -> VectorStore:
        """Fill this store (made from the saved settings) from what ``write`` put in
        ``folder``; returns the store."""

    def __len__(self) -> int: ...


# -- argument checks ---------------------------------------------------------------------
def check_k(k: Any, name: str = "k") -> int:
    """``k`` as an int >= 1 (numpy integers accepted; bools, floats and strings rejected)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        what = " (the number of results)" if name == "k" else ""
        raise ValueError(f"{name} must be a whole number >= 1{what}, got {k!r}; "
                         f"pass e.g. {name}=10")
    return int(k)


def check_vectors(vectors: Any, dim: int | None, n: int | None = None) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 (n, dim) array (one vector becomes one row),
    refusing another dimension than ``dim``, another row count than ``n``, NaN and infinity."""
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


def check_text(text: Any, name: str = "text") -> str:
    """``text`` as a str that is not blank and encodes to UTF-8 (no lone surrogates)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    if not text.strip():
        raise ValueError(f"{name} is blank ({text!r}); give it some text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{name} holds a lone surrogate {text[err.start]!r} at position {err.start}, which "
            f"is not valid Unicode; decode the source bytes with errors='replace'") from None
    return text


def check_query(query: Any) -> str:
    """A search query: a non-blank, valid-Unicode str."""
    return check_text(query, "query")


def check_threshold(value: Any, name: str = "threshold") -> float | None:
    """A score threshold: None (no threshold) or a finite real number."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or None, got {value!r}; NaN or "
                         f"infinity would keep everything or nothing")
    return float(value)


_SCALARS = (str, bool, int, float, type(None))


def _check_scalar(v: Any, where: str) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} is {v!r}; metadata numbers must be finite")
    if not isinstance(v, _SCALARS) or isinstance(v, np.generic):
        hint = (" (store dates as ISO strings like '2025-06-01': they compare correctly)"
                if hasattr(v, "isoformat") else "")
        raise TypeError(f"{where} is a {type(v).__name__} ({v!r:.40}); metadata values must be "
                        f"str, int, float, bool, None, or a list/tuple of those{hint}")


def check_metadata(metadata: Any, item_id: str = "?") -> dict:
    """What metadata may hold, checked when an item is indexed: a mapping with str keys, and
    values that are str, int, float (finite), bool, None, or a list/tuple of those. Such
    metadata survives save/load unchanged (tuples stay tuples); anything else is an error
    now rather than a silent change later."""
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata of item {item_id!r} must be a mapping, got "
                        f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise TypeError(f"metadata key {key!r} of item {item_id!r} is a "
                            f"{type(key).__name__}; keys must be str (e.g. {str(key)!r})")
        where = f"metadata[{key!r}] of item {item_id!r}"
        if isinstance(value, (list, tuple)):
            for v in value:
                _check_scalar(v, f"an element of {where}")
        else:
            _check_scalar(value, where)
    return dict(metadata)


# -- the where-filter language -------------------------------------------------------------
_OPS = {"$eq": lambda v, a: v == a, "$ne": lambda v, a: v != a,
        "$in": lambda v, a: v in a, "$nin": lambda v, a: v not in a,
        "$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
        "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}
OPERATORS = tuple(_OPS)


def validate_where(where: Any) -> dict | None:
    """Check a filter and return it as a dict (None or {} mean no filter).

    The language: ``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or
    ``{key: {"$op": value, ...}}`` with the operators ``$eq $ne $in $nin $gt $gte $lt
    $lte``; all keys must hold. Values are metadata scalars; ``$in``/``$nin`` take a
    list; ordering operators take a number or a str (compared as stored, so ISO dates work).
    """
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping like {{'status': 'current'}}, got "
                        f"{type(where).__name__}: {where!r:.60}")
    for key, cond in where.items():
        if not isinstance(key, str):
            raise TypeError(f"where key {key!r} must be a str (a metadata field name)")
        if isinstance(cond, Mapping):
            if not cond:
                raise ValueError(f"where[{key!r}] is an empty operator mapping; use e.g. "
                                 f"{{'$eq': value}}")
            for op, arg in cond.items():
                _check_op(key, op, arg)
        elif isinstance(cond, (list, tuple, set, frozenset)):
            _check_op(key, "$in", list(cond))
        else:
            _check_op(key, "$eq", cond)
    return dict(where)


def _check_op(key: str, op: Any, arg: Any) -> None:
    if op not in _OPS:
        raise ValueError(f"unknown filter operator {op!r} on {key!r}; use one of "
                         f"{', '.join(_OPS)}")
    if op in ("$in", "$nin"):
        if not isinstance(arg, (list, tuple, set, frozenset)):
            raise TypeError(f"where[{key!r}][{op!r}] must be a list of values, got "
                            f"{type(arg).__name__}: {arg!r:.40}")
        for a in arg:
            _check_scalar(a, f"a value in where[{key!r}][{op!r}]")
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(arg, bool) or not isinstance(arg, (int, float, str)) or (
                isinstance(arg, float) and not math.isfinite(arg)):
            raise TypeError(f"where[{key!r}][{op!r}] must be a finite number or a str, got "
                            f"{arg!r:.40}")
    else:
        _check_scalar(arg, f"where[{key!r}][{op!r}]")


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Does ``metadata`` satisfy ``where`` (already validated)? A missing key fails every
    condition except ``$ne``/``$nin``; an ordering between a number and a str is False.

    >>> matches({"plan": "pro"}, {"plan": ["pro", "team"]})
    True
    """
    if not where:
        return True
    for key, cond in where.items():
        value = metadata.get(key)
        conds = (cond.items() if isinstance(cond, Mapping)
                 else [("$in", cond)] if isinstance(cond, (list, tuple, set, frozenset))
                 else [("$eq", cond)])
        for op, arg in conds:
            if op not in _OPS:
                _check_op(key, op, arg)  # raises, naming the operator and the key
            if value is None and op not in ("$ne", "$nin"):
                return False
            try:
                if not _OPS[op](value, arg):
                    return False
            except TypeError:  # "2025" > 3: incomparable values never match
                return False
    return True


def translate_where(where: Mapping[str, Any] | None, term) -> list:
    """The hook for stores that filter natively: validate ``where`` and call
    ``term(key, op, value)`` once per condition (list shorthand as ``$in``, a bare value as
    ``$eq``), returning the translated terms for the store to AND together. A store whose
    ``term`` cannot express a condition raises, so nothing is silently dropped."""
    where = validate_where(where) or {}
    out = []
    for key, cond in where.items():
        if isinstance(cond, Mapping):
            out += [term(key, op, arg) for op, arg in cond.items()]
        elif isinstance(cond, (list, tuple, set, frozenset)):
            out.append(term(key, "$in", list(cond)))
        else:
            out.append(term(key, "$eq", cond))
    return out


# -- records and hits ------------------------------------------------------------------------
def record(x: Chunk | Document) -> dict:
    """The dict a store keeps per item: id, doc_id (the parent document), text, the chunk's
    start/end offsets in that document (0/len for a whole document) and checked metadata."""
    if isinstance(x, Chunk):
        doc_id, start, end = x.doc_id, x.start, x.end
    elif isinstance(x, Document):
        doc_id, start, end = x.id, 0, len(x.text)
    else:
        raise TypeError(f"index Chunk or Document objects, got {type(x).__name__}")
    check_text(x.text, f"the text of item {x.id!r}")
    return {"id": x.id, "doc_id": doc_id, "text": x.text, "start": start, "end": end,
            "metadata": check_metadata(x.metadata, x.id)}


def records_from(items: Sequence[Chunk | Document],
                 contexts: Sequence[str] | None = None) -> list[dict]:
    """Records for ``items``, rejecting blank texts and duplicate ids (naming them).

    ``contexts`` (one str per item, chapter 10's contextual retrieval) is stored as the
    record's ``context``: indexes embed / tokenize ``index_text(record)`` = context + text,
    while hits still return the item's own text."""
    if isinstance(items, (str, bytes, Chunk, Document)) or not hasattr(items, "__iter__"):
        raise TypeError(f"items must be a list of Chunk or Document objects, got "
                        f"{type(items).__name__}")
    items = list(items)
    if contexts is not None:
        contexts = list(contexts)
        if len(contexts) != len(items):
            raise ValueError(f"{len(contexts)} contexts for {len(items)} items; give one "
                             f"context str per item ('' for none)")
    out, seen = [], set()
    for n, x in enumerate(items):
        r = record(x)
        if contexts is not None and contexts[n]:
            if not isinstance(contexts[n], str):
                raise TypeError(f"contexts[{n}] must be a str, got "
                                f"{type(contexts[n]).__name__}")
            r["context"] = contexts[n]
        if r["id"] in seen:
            raise ValueError(f"item id {r['id']!r} occurs twice; ids must be unique (chunk "
                             f"each document once, or give duplicates distinct ids)")
        seen.add(r["id"])
        out.append(r)
    return out


def index_text(rec: Mapping[str, Any]) -> str:
    """The text an index embeds or tokenizes for a record: its context (if any) + its text."""
    return f"{rec['context']}\n\n{rec['text']}" if rec.get("context") else rec["text"]


def make_hit(rec: Mapping[str, Any], score: float, rank: int) -> Hit:
    """The one way a stored record becomes a Hit (later stages use ``dataclasses.replace``)."""
    return Hit(id=rec["id"], score=float(score), rank=rank, doc_id=rec["doc_id"],
               text=rec["text"], metadata=rec["metadata"], start=rec.get("start"),
               end=rec.get("end"))


def corpus_fingerprint(records: Sequence[Mapping[str, Any]]) -> str:
    """A short hash of the items' ids, indexed texts (context included) and metadata, in
    order: equal fingerprints mean the same corpus, and it changes when any id, text or
    metadata value changes (a page marked superseded is a different corpus for a cache)."""
    h = hashlib.sha256()
    for r in records:
        h.update(r["id"].encode("utf-8", "surrogatepass") + b"\0")
        h.update(hashlib.sha256(index_text(r).encode("utf-8", "surrogatepass")).digest())
        meta = json.dumps(r.get("metadata") or {}, sort_keys=True, ensure_ascii=False,
                          default=str)
        h.update(hashlib.sha256(meta.encode("utf-8", "surrogatepass")).digest())
    return f"{len(records)}:{h.hexdigest()[:16]}"


# -- JSON that keeps tuples -------------------------------------------------------------------
def _encode(o: Any) -> Any:
    if isinstance(o, tuple):
        return {"__tuple__": [_encode(v) for v in o]}
    if isinstance(o, list):
        return [_encode(v) for v in o]
    if isinstance(o, dict):
        return {k: _encode(v) for k, v in o.items()}
    return o


def _decode(o: dict) -> Any:
    return tuple(o["__tuple__"]) if set(o) == {"__tuple__"} else o


def dumps(obj: Any) -> str:
    """JSON in which tuples come back as tuples (metadata round-trips unchanged)."""
    return json.dumps(_encode(obj), ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    return json.loads(text, object_hook=_decode)


# -- atomic, checksummed saves ------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_atomic(path: str | os.PathLike, kind: str, write, info: Mapping[str, Any]) -> Path:
    """Save a folder all-or-nothing: ``write(tmp)`` fills a temporary folder next to
    ``path``; a ``manifest.json`` (kind, format version, ``info`` such as counts and
    fingerprints, a SHA-256 per file) is added; then the folder replaces ``path`` by
    renames. A save that fails midway leaves the previous save untouched."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{str(path)!r} is a file; save an index to a folder path")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.saving-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {"kind": kind, "format_version": FORMAT_VERSION, **info, "files": files}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not path.exists():
            os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return path


def read_manifest(path: str | os.PathLike, kind: str) -> dict:
    """Check a folder written by ``save_atomic`` and return its manifest; raise
    ``CorruptIndexError`` naming the file that is missing or changed."""
    path = Path(path)
    mf = path / "manifest.json"
    if not mf.exists():
        raise FileNotFoundError(f"no saved {kind} in {str(path)!r} (no manifest.json); save "
                                f"one with .save(path) first")
    manifest = json.loads(mf.read_text(encoding="utf-8"))
    if manifest.get("kind") != kind:
        raise CorruptIndexError(f"{str(path)!r} holds a {manifest.get('kind')!r}, not a {kind}; "
                                f"load it with the matching class")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CorruptIndexError(
            f"{str(path)!r} was saved in format {manifest.get('format_version')}, this "
            f"ragbook reads format {FORMAT_VERSION}; rebuild and save the index again")
    for name, digest in manifest["files"].items():
        f = path / name
        if not f.exists():
            raise CorruptIndexError(f"{str(f)!r} is missing; the save in {str(path)!r} is "
                                    f"incomplete: rebuild and save the index again")
        if _sha256(f) != digest:
            raise CorruptIndexError(f"{str(f)!r} does not match its checksum in manifest.json "
                                    f"(changed or truncated since it was saved); rebuild and "
                                    f"save the index again")
    return manifest
