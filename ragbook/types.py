"""The small frozen records that flow between pipeline stages.

Every stage takes and returns these, so a learner can print what one stage handed the next:

    Document --chunking--> Chunk --retrievers--> Hit --readers--> Span / Answer

>>> Chunk(id="a:0-5", doc_id="a", text="hello", start=0, end=5)
Chunk(id='a:0-5', doc_id='a', text='hello', start=0, end=5, metadata={})
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Document", "Chunk", "Hit", "Span", "Answer", "Stage", "Retrieved", "plain"]


@dataclass(frozen=True)
class Document:
    """A source document: an id, its full text, a title and free-form metadata
    (department, status, updated date, access level, plan, ...)."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"Document.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str):
            raise TypeError(f"Document.text must be a str, got {type(self.text).__name__}")
        if not isinstance(self.metadata, Mapping):
            raise TypeError(f"Document.metadata must be a mapping (a dict), got "
                            f"{type(self.metadata).__name__}")


@dataclass(frozen=True)
class Chunk:
    """A piece of a document. The contract: ``text == document.text[start:end]``.

    Ids are derived from the document id and the offsets, never random, so the same
    split of the same document always yields the same ids.
    """

    id: str
    doc_id: str
    text: str
    start: int
    end: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(
                f"Chunk offsets must satisfy 0 <= start <= end, got start={self.start}, "
                f"end={self.end}")
        if len(self.text) != self.end - self.start:
            raise ValueError(
                f"Chunk text has {len(self.text)} characters but end - start = "
                f"{self.end - self.start}; text must equal document.text[start:end]")


@dataclass(frozen=True)
class Hit:
    """One retrieved item: what was found (``id``, usually a chunk id), how well it
    scored, and its 1-based rank in the list it came from. ``doc_id`` is the parent
    document; ``start``/``end`` are the item's character offsets in it (None when the
    item did not come from a chunked document), so a later stage can widen the hit to its
    surrounding section or sentences."""

    id: str
    score: float
    rank: int
    doc_id: str = ""
    text: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    start: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"Hit.rank is a whole number counting from 1, got {self.rank!r}")
        if isinstance(self.score, bool) or not isinstance(self.score, (int, float)) \
                or self.score != self.score:
            raise ValueError(f"Hit.score must be a number (not NaN), got {self.score!r}")

    def to_dict(self) -> dict[str, Any]:
        """The hit as a JSON-ready dict: the one spelling that caches, trace lines and
        ``Result.to_dict`` write (``from_dict`` reads it back).

        >>> hit = Hit("a:0-5", 0.5, 1, "a", "hello")
        >>> Hit.from_dict(hit.to_dict()) == hit
        True
        """
        out = {"id": self.id, "doc_id": self.doc_id, "start": self.start, "end": self.end,
               "score": self.score, "rank": self.rank, "text": self.text,
               "metadata": dict(self.metadata)}
        tuples = [k for k, v in self.metadata.items() if isinstance(v, tuple)]
        if tuples:                    # JSON has no tuple: name them, so from_dict restores them
            out["tuples"] = tuples
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Hit:
        """The ``Hit`` that ``to_dict`` wrote (checked as any ``Hit``; tuple-valued metadata
        restored); ``KeyError`` when a field is missing."""
        metadata = {k: tuple(v) if k in d.get("tuples", ()) else v
                    for k, v in d["metadata"].items()}
        return cls(d["id"], d["score"], d["rank"], d["doc_id"], d["text"], metadata,
                   d["start"], d["end"])


@dataclass(frozen=True)
class Span:
    """A candidate answer inside a hit: ``text == hit.text[start:end]``, with its score
    (p(start)·p(end) for ``ExtractiveReader``, a cosine for ``SentenceReader``) and
    ``source``, the id of its hit. What a ``SpanReader`` hands the pipeline."""

    text: str
    start: int
    end: int
    score: float
    source: str = ""


@dataclass(frozen=True)
class Answer:
    """What a reader returns. ``text`` is None when the reader abstains, and then
    ``reason`` says why (e.g. ``no_candidates``, ``low_confidence``, ``not_in_context``).
    Text *with* a ``reason`` is an answer the reader's own check failed (``unsupported``,
    ``uncited``, ``invalid_citation``): kept for inspection, never delivered by a
    ``Pipeline`` (it escalates, ``unsupported_answer``). ``sources`` are the ids of the hits
    the answer is grounded in, ``scores`` their scores."""

    text: str | None
    sources: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    reason: str | None = None

    @property
    def abstained(self) -> bool:
        """True when there is no answer text (the reader abstained or was flagged empty;
        ``reason`` says why)."""
        return self.text is None


def plain(value: Any) -> Any:
    """A JSON-ready copy of ``value``: sets become lists sorted by their JSON, tuples lists,
    mappings dicts with string keys, recursively (a trace line must be writable whatever a
    caller put in a ``where`` or ``scope``)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value),
                      key=lambda v: json.dumps(v, sort_keys=True, default=str))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class Stage:
    """One trace record: a stage's name, wall time, the ids and scores it passed on, and
    anything else worth reading when debugging (``detail``)."""

    name: str
    seconds: float
    ids: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Retrieved:
    """What ``retrieve`` returns: the hits, the stages that made them (one ``search`` stage
    for a plain retriever; dense, bm25 and fuse for a hybrid), and the retriever's
    *confidence* in its best hit — a number whose meaning ``confidence_kind`` names
    (``retrieval.CONFIDENCE_KINDS``: a cosine, a BM25 score, an RRF score, a reranker score),
    so no one compares a cosine threshold with an RRF score. None when nothing was found."""

    hits: tuple[Hit, ...]
    stages: tuple[Stage, ...]
    confidence: float | None
    confidence_kind: str
