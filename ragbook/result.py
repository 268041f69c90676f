"""What a pipeline hands back, and how it is judged: ``Result`` (an answer with its sources,
or an escalation with its reason), its JSON trace lines, and the outcome of a labelled
question — right, wrong or escalated — counted the same way by ``Pipeline.calibrate``, the
threshold widget and the chapters.

>>> r = Result("q", "q", Answer(None, reason="no_candidates"), reason="no_candidates")
>>> r.escalated, outcome(r, ["faq"]), Result.from_dict(r.to_dict()) == r
(True, 'escalated', True)
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .evaluate import f1_score, normalize_answer
from .types import Answer, Hit, Stage, plain

__all__ = ["Result", "ESCALATIONS", "read_traces", "outcome", "answer_outcome", "count_outcomes",
           "with_history", "gold_ranks"]

#: Every reason a pipeline hands a question over (``Pipeline``'s docstring says when).
ESCALATIONS = ("no_candidates", "rerank_threshold", "low_confidence", "reader_abstained",
               "unsupported_answer", "conflict", "superseded_source", "planted_instruction")


@dataclass(frozen=True)
class Result:
    """What ``Pipeline.ask`` returns. ``answer.text`` is None when escalated; then
    ``reason`` is one of ``ESCALATIONS`` and ``detail`` says it in words. ``sources`` are the
    hits the answer came from (with their character offsets in their document) and
    ``answer_span`` = (doc_id, start, end) of the answer text itself; ``candidates`` are
    what the reader was handed — what a human needs to take over an escalation.
    ``confidence`` is the number ``min_confidence`` was compared with, of kind
    ``confidence_kind`` (e.g. "cosine": the dense channel's best match): the quantity to show
    a person, not a candidate's fused rank score."""

    question: str
    condensed: str
    answer: Answer
    sources: tuple[Hit, ...] = ()
    candidates: tuple[Hit, ...] = ()
    reason: str | None = None
    detail: str = ""
    answer_span: tuple[str, int, int] | None = None
    trace: tuple[Stage, ...] = ()
    confidence: float | None = None
    confidence_kind: str | None = None

    @property
    def escalated(self) -> bool:
        """True when the pipeline handed the question over instead of answering (``reason`` says
        why)."""
        return self.answer.text is None

    def to_dict(self) -> dict:
        """A JSON-ready dict (one trace line; hits as ``Hit.to_dict`` writes them)."""
        return {"question": self.question, "condensed": self.condensed,
                "answer": self.answer.text, "escalated": self.escalated, "reason": self.reason,
                "detail": self.detail, "answer_span": self.answer_span,
                "answer_scores": list(self.answer.scores),
                "confidence": self.confidence, "confidence_kind": self.confidence_kind,
                "sources": [h.to_dict() for h in self.sources],
                "candidates": [h.to_dict() for h in self.candidates],
                "trace": [plain(asdict(s)) for s in self.trace]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        """The ``Result`` that ``to_dict`` wrote (one trace line read back); ``KeyError`` or
        ``TypeError`` when ``d`` is not such a record (``read_traces`` turns those into a
        ``ValueError`` naming the line)."""
        sources = tuple(Hit.from_dict(x) for x in d["sources"])
        answer = Answer(d["answer"], tuple(h.id for h in sources),
                        tuple(d.get("answer_scores", ())),
                        None if d["answer"] is not None else d["reason"])
        span = tuple(d["answer_span"]) if d.get("answer_span") else None
        return cls(d["question"], d["condensed"], answer, sources,
                   tuple(Hit.from_dict(x) for x in d["candidates"]), d["reason"], d["detail"], span,
                   tuple(Stage(s["name"], s["seconds"], tuple(s["ids"]), tuple(s["scores"]),
                               s["detail"]) for s in d["trace"]),
                   d.get("confidence"), d.get("confidence_kind"))


def read_traces(path: str | os.PathLike) -> list[Result]:
    """Read back a trace file written with ``Pipeline(trace_path=...)`` (one JSON line per
    question); a bad line is an error naming its number."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Result.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{str(path)!r} line {n} is not a ragbook trace record "
                                 f"({type(err).__name__}: {err}); was it written by "
                                 f"Pipeline(trace_path=...)?") from None
    return out


def outcome(result: Result, gold: Sequence[str]) -> str:
    """``right`` (answered from a gold document), ``wrong`` (answered otherwise — any answer
    to an unanswerable question is wrong) or ``escalated``."""
    if result.escalated:
        return "escalated"
    return "right" if {h.doc_id for h in result.sources} & set(gold) else "wrong"


def answer_outcome(result: Result, answers: Sequence[str], min_f1: float = 0.5) -> str:
    """Judged by the answer, not the page: ``right`` when the answer holds one of the gold
    ``answers`` (SQuAD-normalised, citation marks dropped) or overlaps one with token F1 of
    at least ``min_f1``; ``wrong`` otherwise (any answer to an unanswerable question, no
    ``answers``, is wrong); ``escalated``. A right page can still give a wrong answer — a
    neighbouring sentence, a fragment — which ``outcome`` would count as right."""
    if result.escalated:
        return "escalated"
    said = normalize_answer(re.sub(r"\s*\[\d+\]", "", result.answer.text or ""))
    golds = [a["text"] if isinstance(a, Mapping) else a for a in answers]
    inside = any(normalize_answer(g) and normalize_answer(g) in said for g in golds)
    return "right" if golds and (inside or f1_score(said, golds) >= min_f1) else "wrong"


def count_outcomes(pipeline, prepared: Sequence, questions: Sequence) -> dict[str, int]:
    """How many of ``questions`` (labelled: ``gold`` doc ids, empty when unanswerable)
    ``pipeline.decide`` answers right, answers wrong or escalates, from their cached
    ``prepare`` outputs (one per question): what ``Pipeline.calibrate`` maximises over and
    the threshold widget shows, counted in one place."""
    if len(prepared) != len(questions):
        raise ValueError(f"need one Prepared per question, got {len(prepared)} and "
                         f"{len(questions)}")
    counts = {"right": 0, "wrong": 0, "escalated": 0}
    for prep, q in zip(prepared, questions, strict=True):
        counts[outcome(pipeline.decide(prep), q.gold)] += 1
    return counts


def with_history(question) -> tuple[str, list | None]:
    """(text, history) of a labelled ``Question``: follow-ups carry their earlier turns."""
    return question.text, (list(question.turns) or None)


def gold_ranks(trace: Sequence, gold) -> dict[str, int | None]:
    """Where the answer got lost: for each stage of a trace that passes items on (all but
    ``condense``), the rank (from 1) of the first ``gold`` item id among the ids it recorded,
    else None. Retrieval stages record their top 10, ``read`` the candidates the reader was
    handed, ``decide`` the answer's sources (none when it escalated). ``trace``: ``Stage``
    objects or their dicts (``Result.to_dict()["trace"]``, one line of a trace file).

    >>> gold_ranks([Stage("dense", 0.1, ("a:0-9", "b:0-9")), Stage("read", 0.2, ("b:0-9",))],
    ...            {"a:0-9"})
    {'dense': 1, 'read': None}
    """
    gold, ranks = set(gold), {}
    for s in trace:
        name, ids = (s["name"], s["ids"]) if isinstance(s, Mapping) else (s.name, s.ids)
        if name != "condense":
            ranks[name] = next((r for r, i in enumerate(ids, 1) if i in gold), None)
    return ranks
