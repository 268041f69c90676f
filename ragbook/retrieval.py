"""The contracts: what every role in a pipeline promises, one Protocol each, in one place.

=================== ======================================================= ===================
role                promises                                                written once in
=================== ======================================================= ===================
``Retriever``       ``search``, ``retrieve``, ``confidence_bounds``          ``BaseRetriever``,
                                                                            ``WrapperRetriever``
``VectorStore``     vectors and records for a ``DenseIndex``                 (stores/)
``Reranker``        ``order``, ``cut``, ``rerank``, ``confidence_kind``,     ``BaseReranker``
                    ``confidence_bounds``, ``min_rerank_score``               (rerank.py)
``Reader``          ``read(question, hits) -> Answer``                      (readers/)
``SpanReader``      a ``Reader`` that scores the candidate spans of a whole  ``BaseSpanReader``
                    candidate list in one call (``hits_spans``) and judges   (readers/)
                    one (``accepts``)
``StreamingReader`` a ``Reader`` that can also ``stream`` its answer         ``GenerativeReader``
=================== ======================================================= ===================

A composer (``Pipeline``) checks each role with ``check_role`` when it is built, so a wrong
object fails there, naming the role and what it lacks, and dispatches on these Protocols
(``isinstance(reader, SpanReader)``) — never by probing for methods. What flows through them
is defined here once too: the kinds of confidence, the stored record, the ``Hit`` builder and
corpus fingerprints. The argument checks live in ``ragbook.checks``, the filter language in
``ragbook.filters``, saving in ``ragbook.persist``.

    Chunk/Document --record()--> Record --store--> make_hit() --> Hit

>>> make_hit(record(Document("faq", "Refunds take 14 days.")), 0.8, 1).doc_id
'faq'
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, NotRequired, Protocol, TypedDict, runtime_checkable

import numpy as np

from .checks import check_text, check_threshold
from .component import Component
from .filters import check_metadata, own_metadata, scoped
from .streaming import Streamed
from .types import Answer, Chunk, Document, Hit, Retrieved, Span, Stage

__all__ = ["Retriever", "BaseRetriever", "WrapperRetriever", "VectorStore", "Reranker",
           "Reader", "SpanReader", "StreamingReader", "check_role", "Record",
           "CONFIDENCE_KINDS", "check_confidence_threshold", "trace_stage", "record",
           "records_from", "index_text", "make_hit", "corpus_fingerprint"]

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

    def confidence_bounds(self) -> tuple[float, float]:
        """The lowest and highest confidence ``retrieve`` can report (what a
        ``min_confidence`` is checked against)."""

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


class WrapperRetriever(BaseRetriever):
    """A retriever built around another (``self.retriever``) whose corpus and confidence it
    passes on unchanged: a cache, parent-document or sentence-window expansion, a reranking
    stage. The delegation is written here once; a wrapper overrides only what it changes
    (a reranked retriever's confidence kind, the parents' corpus fingerprint)."""

    def __init__(self, retriever: Retriever):
        self.retriever = retriever

    @property
    def confidence_kind(self) -> str:
        """The wrapped retriever's: this wrapper passes its scores on unchanged."""
        return self.retriever.confidence_kind

    def confidence_bounds(self) -> tuple[float, float]:
        """The wrapped retriever's confidence range."""
        return self.retriever.confidence_bounds()

    def __len__(self) -> int:
        return len(self.retriever)

    @property
    def corpus_fingerprint(self) -> str:
        """The wrapped retriever's corpus fingerprint (wrapping is not a different corpus)."""
        return self.retriever.corpus_fingerprint

    @property
    def items_(self):
        """The wrapped retriever's indexed records."""
        return self.retriever.items_


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
class Reranker(Protocol):
    """A second stage: re-scores a first stage's candidates and keeps the best few.

    ``order`` re-scores and sorts (ranks renumbered from 1) without cutting; ``cut`` drops
    what scores under ``min_rerank_score`` (the only rerank threshold: a pipeline applies it
    through ``cut``, after its own checks); ``rerank`` = ``cut(order(...))``. Scores are of
    ``confidence_kind`` and lie within ``confidence_bounds()``. ``rerank.BaseReranker``
    writes all but ``score`` once."""

    confidence_kind: str
    min_rerank_score: float | None

    def order(self, query: str, hits: Sequence[Hit], k: int = 5) -> list[Hit]:
        """The ``k`` best of ``hits`` by this stage's score, best first, ranks from 1."""

    def cut(self, hits: Sequence[Hit]) -> list[Hit]:
        """The ordered ``hits`` scoring at least ``min_rerank_score``."""

    def rerank(self, query: str, hits: Sequence[Hit], k: int = 5) -> list[Hit]:
        """``cut(order(query, hits, k))``."""

    def confidence_bounds(self) -> tuple[float, float]:
        """The lowest and highest score this stage can give."""


@runtime_checkable
class Reader(Protocol):
    """Turns a question and the hits it was handed into an ``Answer``: text with the ids of
    the hits it came from, or ``text=None`` and a ``reason`` when it abstains."""

    def read(self, question: str, hits: Sequence[Hit]) -> Answer:
        """The answer to ``question`` from ``hits`` (or an abstention)."""


@runtime_checkable
class SpanReader(Reader, Protocol):
    """A ``Reader`` whose answer is a span of a hit: it scores the candidate spans of a
    whole candidate list in one call (``hits_spans``, one list per hit, so a reader can
    batch its model calls), of one hit (``hit_spans``), and says whether it would answer
    with a span (``accepts``: its floor). A pipeline reads such a reader's spans itself, so
    its checks (planted instructions, conflicts) see every candidate."""

    def hits_spans(self, question: str, hits: Sequence[Hit]) -> list[list[Span]]:
        """The candidate spans of each hit, in order."""

    def hit_spans(self, question: str, hit: Hit) -> list[Span]:
        """The candidate spans of one hit."""

    def accepts(self, span: Span) -> bool:
        """True when the reader would answer with ``span`` rather than abstain."""


@runtime_checkable
class StreamingReader(Reader, Protocol):
    """A ``Reader`` that can also release its answer piece by piece: iterate ``stream``'s
    result for the text as it is verified, then its ``.result`` is the ``Answer`` that
    ``read`` would have returned."""

    def stream(self, question: str, hits: Sequence[Hit]) -> Streamed[Answer]:
        """``read``, streamed."""


def _members(protocol: type) -> list[str]:
    """The methods and attributes a Protocol (and the Protocols it extends) declares."""
    names: list[str] = []
    for cls in reversed(protocol.__mro__):
        if cls in (object, Protocol, Generic) or not getattr(cls, "_is_protocol", False):
            continue
        names += [n for n in (*vars(cls), *getattr(cls, "__annotations__", {}))
                  if n == "__len__" or not n.startswith("_")]
    return list(dict.fromkeys(names))


def check_role(value: Any, protocol: type, role: str, fix: str = "") -> Any:
    """``value`` when it has every member of ``protocol`` (looked up statically: nothing is
    evaluated, so an unbuilt index passes), else a ``TypeError`` naming the role, the class
    and what it lacks, and ``fix``.

    >>> check_role(object(), Reader, "reader")
    Traceback (most recent call last):
    TypeError: the reader must satisfy ragbook.retrieval.Reader, but 'object' has no read
    """
    missing = []
    for name in _members(protocol):
        try:
            inspect.getattr_static(value, name)
        except AttributeError:
            missing.append(name)
    if missing:
        raise TypeError(f"the {role} must satisfy ragbook.retrieval.{protocol.__name__}, but "
                        f"{type(value).__name__!r} has no {', '.join(missing)}"
                        + (f": {fix}" if fix else ""))
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

    def add(self, records: Sequence[Record], vectors: np.ndarray) -> None:
        """Store records (``id``, ``text``, ``metadata``, ...) with their unit vectors, one row
        each; an id already stored is an error."""

    def search(self, vectors: np.ndarray, k: int, where: Mapping[str, Any] | None = None
               ) -> tuple[list[list[str]], list[np.ndarray]]:
        """Per query vector (rows of a (q, dim) array): the ids and inner products of the best
        ``k`` records passing ``where``, best first, never padded. With ``where=None`` this is
        the plain top ``k`` of the whole store (what a post-filter starts from)."""

    def get(self, ids: Sequence[str]) -> list[Record]:
        """The stored records with these ids, in the order asked (an unknown id is a KeyError)."""

    def delete(self, ids: Sequence[str]) -> int:
        """Remove records by id; returns how many were removed (unknown ids are skipped)."""

    def records(self) -> list[Record]:
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
class Record(TypedDict):
    """What a store keeps per item (the one layout every store reads and writes; a Milvus
    row is converted to and from it): the item's id, its parent document, its text, its
    character offsets in that document (0/len for a whole document), its checked metadata,
    and — for chapter 10's contextual retrieval — the note indexed in front of it."""

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    metadata: dict[str, Any]
    context: NotRequired[str]


def record(x: Chunk | Document) -> Record:
    """The dict a store keeps per item: id, doc_id (the parent document), text, the chunk's
    start/end offsets in that document (0/len for a whole document) and checked metadata."""
    if isinstance(x, Chunk):
        doc_id, start, end = x.doc_id, x.start, x.end
    elif isinstance(x, Document):
        doc_id, start, end = x.id, 0, len(x.text)
    else:
        raise TypeError(f"index Chunk or Document objects, got {type(x).__name__}")
    check_text(x.text, f"the text of item {x.id!r}")
    return Record(id=x.id, doc_id=doc_id, text=x.text, start=start, end=end,
                  metadata=check_metadata(x.metadata, x.id))


def records_from(items: Sequence[Chunk | Document],
                 contexts: Sequence[str] | None = None) -> list[Record]:
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
    filling the frozen instance directly (0.9 µs instead of 1.4 µs a hit on a 2-core Intel
    Xeon, the metadata copy included: for BM25 on 10,000 sections, ten ``Hit(...)`` calls
    cost as much as ranking every score). The Hit gets its
    own copy of the metadata (``own_metadata``): a caller editing it must not edit the index,
    whose scopes would then admit what they should not."""
    score = float(score)
    if score != score:
        raise ValueError(f"Hit.score must be a number (not NaN), got {score!r} for "
                         f"{rec['id']!r}: check the index's vectors for NaN")
    hit = object.__new__(Hit)
    hit.__dict__.update(id=rec["id"], score=score, rank=rank, doc_id=rec["doc_id"],
                        text=rec["text"], metadata=own_metadata(rec["metadata"]),
                        start=rec.get("start"),
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


