"""The retrieval contract: what every retriever and vector store promises, in one place.

Dense, BM25, hybrid, reranked and scale-out (Milvus) retrievers all satisfy ``Retriever``
(``BaseRetriever`` gives the default ``retrieve``); in-process and remote vector stores
satisfy ``VectorStore``. What flows through them is defined here once: the kinds of
confidence, the stored record, the ``Hit`` builder and corpus fingerprints. The argument
checks live in ``ragbook.checks``, the filter language in ``ragbook.filters``, saving in
``ragbook.persist``.

    Chunk/Document --record()--> record dict --store--> make_hit() --> Hit

>>> make_hit(record(Document("faq", "Refunds take 14 days.")), 0.8, 1).doc_id
'faq'
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .checks import check_text, check_threshold
from .component import Component
from .filters import check_metadata, scoped
from .types import Chunk, Document, Hit, Retrieved, Stage

__all__ = ["Retriever", "BaseRetriever", "VectorStore", "CONFIDENCE_KINDS",
           "check_confidence_threshold", "trace_stage", "record", "records_from", "index_text",
           "make_hit", "corpus_fingerprint"]

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
    by score, ranks from 1, never padded; items failing ``where`` are never returned, nor
    items outside ``scope`` (the application's access scope, ``filters.scoped``: AND-ed
    inside the search, so ``where`` can only narrow it). ``retrieve`` returns the same hits
    as a ``Retrieved``: with the stages that made them and the retriever's confidence (of
    kind ``confidence_kind``). ``corpus_fingerprint`` changes
    whenever an item's id or text changes; ``fingerprint`` whenever anything a result depends
    on changes (corpus, settings, models) — what caches key on.
    """

    confidence_kind: str

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """At most ``k`` hits for ``query``, best first, ranks from 1, none failing ``where``
        or outside ``scope``."""

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
                 scope: Mapping[str, Any] | None = None) -> Retrieved:
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

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
                 scope: Mapping[str, Any] | None = None) -> Retrieved:
        """The ``k`` best hits (as ``search``, with ``scope`` AND-ed into ``where``) with one
        ``search`` stage (recording both) and the top score as the confidence (None when
        nothing was found)."""
        t = time.perf_counter()
        hits = self.search(query, k=k, where=scoped(where, scope))
        return Retrieved(tuple(hits), (trace_stage("search", t, hits, {"where": where,
                                                                        "scope": scope}),),
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
    """The one way a stored record becomes a Hit (later stages use ``dataclasses.replace``).

    The record was checked when it was indexed and ``rank`` is counted by the caller, so of
    ``Hit``'s own checks only "score is not NaN" is left to make; the rest are skipped by
    filling the frozen instance directly (0.4 µs instead of 1.7 µs a hit: for BM25 on 10,000
    sections, ten ``Hit(...)`` calls cost as much as ranking every score)."""
    score = float(score)
    if score != score:
        raise ValueError(f"Hit.score must be a number (not NaN), got {score!r} for "
                         f"{rec['id']!r}: check the index's vectors for NaN")
    hit = object.__new__(Hit)
    hit.__dict__.update(id=rec["id"], score=score, rank=rank, doc_id=rec["doc_id"],
                        text=rec["text"], metadata=rec["metadata"], start=rec.get("start"),
                        end=rec.get("end"))
    return hit


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


