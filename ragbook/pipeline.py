"""The whole pipeline: condense → retrieve (the retriever's own stages) → rerank → thresholds →
read → an answer with its sources, or an escalation with the reason and what a human needs.

Every stage is one of the earlier chapters' pieces; this module only composes them, keeps a
trace of what each stage handed the next, and decides when *not* to answer:

=================== ==========================================================================
escalation reason   when
=================== ==========================================================================
no_candidates       retrieval found nothing (after filters)
rerank_threshold    no candidate scored at least the reranker's ``min_rerank_score``
low_confidence      the confidence (best reranked score, else the retriever's) < ``min_confidence``
reader_abstained    the reader found no answer good enough (its own reason is in ``detail``)
conflict            two sources from different documents answer with different figures
superseded_source   the answer would come from a page marked superseded
planted_instruction the best answer would be a planted instruction (``planted_spans``)
=================== ==========================================================================

``ask`` = ``prepare`` (everything that does not depend on the thresholds: retrieval,
reranking, each candidate's best answer span) + ``decide`` (the thresholds and escalation
rules). The chapter 9 widget calls ``decide`` of a copy with other thresholds
(``with_settings``) on cached ``prepare`` outputs, so a slider moves instantly and the
numbers it shows are exactly what ``ask`` would do.

>>> p = Pipeline(HybridRetriever(DenseIndex(), BM25Index()).build(chunks))   # doctest: +SKIP
>>> turns = [{"role": "user", "content": "csv on pro?"}]
>>> p.ask("and on the free plan?", history=turns)                             # doctest: +SKIP
Result(question='and on the free plan?', condensed='csv on free? and on the free plan?', ...)
"""
from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from . import telemetry
from .cache import Cache
from .checks import check_k, check_query, check_threshold
from .component import Component
from .condense import RuleCondenser
from .conflicts import find_conflict
from .filters import filter_keys, scoped, validate_where
from .readers import Span, default_extractive_reader, instruction_like, planted_spans
from .retrieval import check_confidence_threshold, trace_stage
from .streaming import Streamed
from .types import Answer, Hit, Stage

__all__ = ["Pipeline", "Result", "Prepared", "read_traces", "outcome", "ESCALATIONS",
           "CachedPipeline", "with_history", "gold_ranks"]

ESCALATIONS = ("no_candidates", "rerank_threshold", "low_confidence", "reader_abstained",
               "conflict", "superseded_source", "planted_instruction")


# -- what flows out ---------------------------------------------------------------------------
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
        """A JSON-ready dict (one trace line)."""
        def hit(h: Hit) -> dict:
            return {"id": h.id, "doc_id": h.doc_id, "start": h.start, "end": h.end,
                    "score": h.score, "rank": h.rank, "text": h.text,
                    "metadata": dict(h.metadata)}

        return {"question": self.question, "condensed": self.condensed,
                "answer": self.answer.text, "escalated": self.escalated, "reason": self.reason,
                "detail": self.detail, "answer_span": self.answer_span,
                "answer_scores": list(self.answer.scores),
                "confidence": self.confidence, "confidence_kind": self.confidence_kind,
                "sources": [hit(h) for h in self.sources],
                "candidates": [hit(h) for h in self.candidates],
                "trace": [asdict(s) for s in self.trace]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Result:
        """The ``Result`` that ``to_dict`` wrote (one trace line read back); ``KeyError`` or
        ``TypeError`` when ``d`` is not such a record (``read_traces`` turns those into a
        ``ValueError`` naming the line)."""
        def hit(x: Mapping[str, Any]) -> Hit:
            return Hit(x["id"], x["score"], x["rank"], x["doc_id"], x["text"], x["metadata"],
                       x["start"], x["end"])

        sources = tuple(hit(x) for x in d["sources"])
        answer = Answer(d["answer"], tuple(h.id for h in sources),
                        tuple(d.get("answer_scores", ())),
                        None if d["answer"] is not None else d["reason"])
        span = tuple(d["answer_span"]) if d.get("answer_span") else None
        return cls(d["question"], d["condensed"], answer, sources,
                   tuple(hit(x) for x in d["candidates"]), d["reason"], d["detail"], span,
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


# -- the pipeline ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prepared:
    """Everything ``ask`` computes before any threshold applies: the condensed question, the
    reader's candidates (reranked, not yet cut, when there is a reranker), the confidence
    the ``min_confidence`` threshold compares and its kind (``retrieval.CONFIDENCE_KINDS``),
    each candidate's best answer span (extractive readers), and the trace so far."""

    question: str
    condensed: str
    candidates: tuple[Hit, ...]
    confidence: float | None
    confidence_kind: str
    spans: tuple[Span | None, ...]
    trace: tuple[Stage, ...]


class Pipeline(Component):
    """Retriever → (reranker) → reader, with condensation, thresholds, escalation and a trace.

    The pipeline composes its components through their contracts and never opens them: the
    retriever's ``retrieve`` does its own stages with its own settings (a hybrid's depth,
    RRF constant, weights and floor are the hybrid's), the reranker's ``min_rerank_score``
    is the only rerank cut, the reader's ``accepts`` its only span floor.

    Settings: ``candidates`` hits asked of the retriever (50), ``keep`` hits the reader reads
    (5), ``min_confidence`` the low-confidence threshold on the *confidence* — the best
    reranked score when there is a reranker, else the retriever's own confidence (a hybrid's:
    the dense channel's best cosine; ``confidence_kind`` names it). ``min_confidence_kind``
    says what your threshold is on ("cosine", "bm25", "rrf", "rerank"); a threshold of another
    kind, or outside what the confidence can be, is refused (``calibrate`` sets both).
    ``exclude_superseded`` adds ``status != superseded`` to every filter,
    ``detect_conflicts`` escalates when sources disagree (within ``conflict_margin``),
    ``skip_instructions`` never lets a sentence planted for a model (``planted_spans``: an
    instruction to the AI, after Unicode and markup disguises are undone, alone or split over
    two sentences) be an extractive answer — when one would be the best answer, the question
    escalates (``planted_instruction``: the page needs a person's eyes); when a genuine
    answer ranks above it, that answer is given and the trace notes ``planted_skipped``,
    ``trace_path`` appends
    one JSON line per question. ``reader`` defaults to ``default_extractive_reader()``;
    ``condenser`` to ``RuleCondenser()``.
    """

    def __init__(self, retriever, reranker=None, reader=None, condenser=None, *,
                 candidates: int = 50, keep: int = 5, min_confidence: float | None = None,
                 min_confidence_kind: str | None = None, exclude_superseded: bool = True,
                 detect_conflicts: bool = True, conflict_margin: float = 0.05,
                 skip_instructions: bool = True,
                 trace_path: str | os.PathLike | None = None):
        if not callable(getattr(retriever, "retrieve", None)):
            raise TypeError(f"Pipeline needs a retriever with retrieve(query, k, where) -> "
                            f"Retrieved (the ragbook.Retriever contract); a "
                            f"{type(retriever).__name__} has none: subclass "
                            f"ragbook.BaseRetriever, which derives it from your search()")
        self.retriever, self.reranker = retriever, reranker
        self.reader = reader if reader is not None else default_extractive_reader()
        self.condenser = condenser if condenser is not None else RuleCondenser()
        self.candidates, self.keep = check_k(candidates, "candidates"), check_k(keep, "keep")
        scorer = reranker if reranker is not None else retriever
        self.min_confidence = check_confidence_threshold(
            min_confidence, scorer.confidence_kind, scorer.confidence_bounds(),
            min_confidence_kind)
        self.min_confidence_kind = min_confidence_kind
        self.exclude_superseded, self.detect_conflicts = exclude_superseded, detect_conflicts
        self.conflict_margin = check_threshold(conflict_margin, "conflict_margin")
        self.skip_instructions, self.trace_path = skip_instructions, trace_path

    @property
    def confidence_kind(self) -> str:
        """What ``min_confidence`` is compared with: the reranker's score kind when there is a
        reranker, else the retriever's confidence kind."""
        return (self.reranker if self.reranker is not None else self.retriever).confidence_kind

    # -- stage 1-4: everything before the thresholds ---------------------------------------
    def _where(self, where):
        where = dict(validate_where(where) or {})
        if self.exclude_superseded and "status" not in filter_keys(where):
            where["status"] = {"$ne": "superseded"}
        return where or None

    def prepare(self, question: str, history=None, where=None, *, scope=None) -> Prepared:
        """Condense, retrieve (the retriever's own stages, inside the application's ``scope``:
        see ``ask``), rerank (ordered, not cut), and
        find each candidate's best span: everything that does not depend on the thresholds,
        so ``decide`` can be re-run cheaply on copies with other thresholds (chapter 9's
        sliders). Raises ``ValueError`` for a blank question, ``TypeError`` for a malformed
        ``history`` or ``where``, and whatever the retriever raises (``NotBuiltError``,
        ``IndexDriftError``, ``EncoderMismatchError``)."""
        question = check_query(question)
        trace = []
        t = time.perf_counter()
        condensed = self.condenser.condense(question, history) if history else question
        trace.append(Stage("condense", time.perf_counter() - t,
                           detail={"input": question, "output": condensed,
                                   "history_turns": len(history or ())}))
        got = self.retriever.retrieve(condensed, k=self.candidates, where=self._where(where),
                                      scope=scope)
        trace += got.stages
        pool, confidence, kind = list(got.hits), got.confidence, got.confidence_kind
        if self.reranker is not None and pool:
            t = time.perf_counter()
            pool = self.reranker.order(condensed, pool, k=self.keep)  # cut in decide()
            trace.append(trace_stage("rerank", t, pool))
            confidence = pool[0].score if pool else None
            kind = self.reranker.confidence_kind
        else:
            pool = pool[:self.keep]
        spans: tuple[Span | None, ...] = ()
        if hasattr(self.reader, "hits_spans") and pool:  # an extractive reader: spans now
            t = time.perf_counter()
            spans = tuple(max((s for s in hit_spans
                               if not (self.skip_instructions and instruction_like(s.text))),
                              key=lambda s: s.score, default=None)
                          for hit_spans in self.reader.hits_spans(condensed, pool))
            read = [(h.id, s.score) for h, s in zip(pool, spans, strict=True) if s is not None]
            trace.append(Stage("read", time.perf_counter() - t, tuple(i for i, _ in read),
                               tuple(x for _, x in read)))
        return Prepared(question, condensed, tuple(pool), confidence, kind, spans,
                        tuple(trace))

    # -- stage 5-6: thresholds, reading, escalation ----------------------------------------
    def decide(self, prep: Prepared) -> Result:
        """Apply this pipeline's thresholds and escalation rules to a ``Prepared`` question:
        the reranker's cut, ``min_confidence``, the reader's own floor; read (for a generative
        reader) and build the ``Result``. To try other thresholds, decide on a copy:
        ``pipeline.with_settings(min_confidence=0.4).decide(prep)``."""
        t = time.perf_counter()
        if prep.confidence_kind != self.confidence_kind:
            raise ValueError(f"this Prepared carries a {prep.confidence_kind} confidence but "
                             f"this pipeline compares a {self.confidence_kind} one; prepare "
                             f"it with this pipeline's retriever and reranker")
        spans = prep.spans or (None,) * len(prep.candidates)
        passed = ({h.id for h in self.reranker.cut(prep.candidates)}
                  if self.reranker is not None else None)
        kept = [(h, s) for h, s in zip(prep.candidates, spans, strict=True)
                if passed is None or h.id in passed]

        def escalate(reason: str, detail: str, extra: Mapping[str, Any] | None = None) -> Result:
            stage = Stage("decide", time.perf_counter() - t, detail={"escalated": reason,
                                                                      **(extra or {})})
            return Result(prep.question, prep.condensed, Answer(None, reason=reason),
                          candidates=prep.candidates, reason=reason, detail=detail,
                          trace=prep.trace + (stage,), confidence=prep.confidence,
                          confidence_kind=prep.confidence_kind)

        if not prep.candidates:
            return escalate("no_candidates", "retrieval found nothing for this question "
                                             "(after filters): hand it to a person")
        if not kept:
            return escalate("rerank_threshold", f"no candidate scored "
                                                f"{self.reranker.min_rerank_score} or more "
                                                f"under the reranker (min_rerank_score)")
        floor = self.min_confidence
        if floor is not None and (prep.confidence is None or prep.confidence < floor):
            best = "no score" if prep.confidence is None else f"{prep.confidence:.3f}"
            return escalate("low_confidence", f"the best {prep.confidence_kind} score ({best}) "
                                              f"is under min_confidence={floor}")
        hits = [h for h, _ in kept]
        planted = self._planted(kept) if prep.spans and self.skip_instructions else {}
        if prep.spans:
            span = max((s for _, s in kept if s is not None and not _inside(s, planted)),
                       key=lambda s: s.score, default=None)
            good = span is not None and self.reader.accepts(span)
            bait = self._planted_answer(prep.condensed, kept, planted) if planted else None
            if bait is not None and (not good or bait.score > span.score):
                doc = next(h.doc_id for h, _ in kept if h.id == bait.source)
                return escalate("planted_instruction", f"the best answer would be a "
                                f"sentence written to a model, planted in {doc!r} "
                                f"(characters {bait.start}-{bait.end} of {bait.source!r}); it "
                                f"is never quoted, and a page carrying one needs a person's "
                                f"eyes", {"planted": [bait.source, bait.start, bait.end]})
            if not good:
                return escalate("reader_abstained", "the reader found no answer good enough "
                                                    "in the candidates (low_confidence)")
            answer = Answer(span.text, (span.source,), (span.score,))
        else:
            answer = self.reader.read(prep.condensed, hits)
            if answer.text is None:
                return escalate("reader_abstained", f"the reader abstained ({answer.reason})")
            span = None
        by_id = {h.id: h for h in hits}
        sources = tuple(by_id[s] for s in answer.sources if s in by_id)
        superseded = [h for h in sources if h.metadata.get("status") == "superseded"]
        if superseded:
            h = superseded[0]
            return escalate("superseded_source", f"the answer comes from {h.doc_id!r}, which "
                            f"is superseded by {h.metadata.get('superseded_by', '?')!r}")
        if self.detect_conflicts and span is not None:
            others = [s for h, s in kept if s is not None and h.doc_id not in
                      {x.doc_id for x in sources} and not _inside(s, planted)]
            clash = find_conflict(span, others, self.conflict_margin)
            if clash is not None:
                other_doc = by_id[clash.source].doc_id
                return escalate("conflict", f"{sources[0].doc_id!r} says {span.text!r} but "
                                            f"{other_doc!r} says {clash.text!r}",
                                {"statements": [span.text, clash.text]})
        answer_span = None
        if sources and sources[0].start is not None:
            at = sources[0].text.find(answer.text)
            if at >= 0:
                s0 = sources[0].start + at
                answer_span = (sources[0].doc_id, s0, s0 + len(answer.text))
        stage = Stage("decide", time.perf_counter() - t, tuple(h.id for h in sources),
                      tuple(answer.scores), {"planted_skipped": sorted(planted)} if planted
                      else {})
        return Result(prep.question, prep.condensed, answer, sources, prep.candidates,
                      None, "", answer_span, prep.trace + (stage,), prep.confidence,
                      prep.confidence_kind)

    @staticmethod
    def _planted(kept) -> dict[str, list[tuple[int, int]]]:
        """hit id -> the character spans of its sentences planted for a model."""
        found = {h.id: planted_spans(h.text) for h, _ in kept}
        return {i: spans for i, spans in found.items() if spans}

    def _planted_answer(self, question: str, kept, planted) -> Span | None:
        """The reader's best span *inside* a planted sentence, when the reader would accept
        it: what the customer would have been told had the sentence not been skipped
        (re-scored here, only for hits that hold one)."""
        bait = max((s for h, _ in kept if h.id in planted
                    for s in self.reader.hit_spans(question, h) if _inside(s, planted)),
                   key=lambda s: s.score, default=None)
        return bait if bait is not None and self.reader.accepts(bait) else None

    def ask(self, question: str, history=None, where=None, *, scope=None) -> Result:
        """Answer ``question`` (a follow-up is condensed against ``history``, a list of
        ``{"role", "content"}`` turns) from items passing ``where``, or escalate: the
        ``Result`` says which, why (``reason``, ``detail``) and what a person taking over
        needs (``candidates``). Not answering is a result, never an exception; errors are
        those of ``prepare``. ``scope`` is the access scope the *application* gives for the
        user (e.g. ``{"access": ["public"]}``), never taken from the question: it is AND-ed
        inside the retriever's search (``filters.scoped``), so ``where`` can only narrow it,
        and the retrieval stages of the trace record it."""
        result = self.decide(self.prepare(question, history, where, scope=scope))
        self._record(result)
        return result

    # -- streaming and recording (issue 22) ------------------------------------------------
    def stream(self, question: str, history=None, where=None, *, scope=None
               ) -> Streamed[Result]:
        """``ask``, streamed: iterate for the answer's text as it is released, then
        ``.result`` is the ``Result`` — the same one ``ask`` gives (answer, citations,
        escalation; only the trace's timings differ). Arguments and errors are ``ask``'s;
        errors of ``prepare`` are raised here, before anything streams::

            s = pipeline.stream("How long is the refund window?")
            for piece in s:
                print(piece, end="", flush=True)   # verified sentences, as they come
            s.result.escalated                      # the verdict, as ask() gives it

        What was shown cannot be taken back, so the thresholds that decide before reading
        (no candidates, the rerank cut, ``min_confidence``) are applied first; then a reader
        with ``stream`` (``GenerativeReader``) releases each sentence only once it has
        passed its checks (see ``GenerativeReader.stream``: verified against a passage it
        cites, citations that exist). The verdict on the whole answer comes at the end:
        when it answers, the pieces joined are exactly ``result.answer.text`` (what the
        reader held back follows the verdict); when it escalates, what was shown is at most
        the verified sentences released before it, and ``result`` says why — show the
        escalation after them. When a cited page may be superseded (``exclude_superseded``
        off and such a page among the passages) or the reader cannot stream (an extractive
        one), nothing is shown before the verdict."""
        prep = self.prepare(question, history, where, scope=scope)
        return Streamed(self._streamed(prep))

    def _streamed(self, prep: Prepared):
        t, shown = time.perf_counter(), ""
        try:                                 # decide up to the reading, without reading
            result = (self.with_settings(reader=_ReadOnce(self.reader)).decide(prep)
                      if callable(getattr(self.reader, "stream", None)) else self.decide(prep))
        except _WouldRead as asked:
            live = not any(h.metadata.get("status") == "superseded" for h in asked.hits)
            reading = self.reader.stream(asked.question, asked.hits)
            for piece in reading:
                if live:
                    shown += piece
                    yield piece
            result = self.with_settings(reader=_ReadOnce(self.reader, reading.result)
                                        ).decide(prep)
            last = result.trace[-1]          # decide's time includes the reading, as in ask
            result = replace(result, trace=result.trace[:-1] + (
                replace(last, seconds=time.perf_counter() - t),))
        text = result.answer.text
        if text is not None and text.startswith(shown) and len(text) > len(shown):
            yield text[len(shown):]
        self._record(result)
        return result

    def _record(self, result: Result) -> None:
        """Where every question ends: its OpenTelemetry spans (``telemetry.emit``; nothing
        without ``opentelemetry-api``) and its JSON line in ``trace_path``."""
        telemetry.emit(result)
        if self.trace_path is not None:
            with open(Path(self.trace_path), "a", encoding="utf-8") as f:
                f.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")

    def calibrate(self, prepared: Sequence[Prepared], questions: Sequence, *,
                  wrong_cost: float = 2.0) -> float | None:
        """Set ``min_confidence`` (and ``min_confidence_kind``) to the value that maximises
        (right answers − ``wrong_cost`` × wrong answers) over ``prepared`` questions
        (labelled: ``gold`` doc ids, empty when unanswerable), trying every observed
        confidence; return it. Calibrate on dev, report on test."""
        if len(prepared) != len(questions) or not prepared:
            raise ValueError(f"need one Prepared per question, got {len(prepared)} and "
                             f"{len(questions)}")
        grid = sorted({p.confidence for p in prepared if p.confidence is not None})
        best, best_value = None, -math.inf
        for th in [None, *grid]:
            trial = self.with_settings(min_confidence=th, min_confidence_kind=None)
            counts = {"right": 0, "wrong": 0, "escalated": 0}
            for p, q in zip(prepared, questions, strict=True):
                counts[outcome(trial.decide(p), q.gold)] += 1
            value = counts["right"] - wrong_cost * counts["wrong"]
            if value > best_value:
                best, best_value = th, value
        self.min_confidence = best
        self.min_confidence_kind = None if best is None else self.confidence_kind
        return best


class _WouldRead(Exception):
    """``decide`` got past every check that comes before reading: stream the reader now."""

    def __init__(self, question: str, hits: Sequence[Hit]):
        super().__init__(question)
        self.question, self.hits = question, list(hits)


class _ReadOnce:
    """The pipeline's reader inside ``Pipeline.stream``'s two ``decide`` runs, so that
    ``decide`` itself — every rule, before and after reading — makes the verdict: without an
    answer, ``read`` raises ``_WouldRead`` (time to stream); with one, it returns the answer
    the stream ended with. Everything else is the reader's own."""

    def __init__(self, reader, answer: Answer | None = None):
        self._reader, self._answer = reader, answer

    def __getattr__(self, name: str):
        return getattr(self._reader, name)

    def read(self, question: str, hits: Sequence[Hit]) -> Answer:
        if self._answer is None:
            raise _WouldRead(question, hits)
        return self._answer


def _inside(span: Span, planted: Mapping[str, Sequence[tuple[int, int]]]) -> bool:
    """``span`` overlaps a planted sentence of its hit (``Pipeline._planted``)."""
    return any(a < span.end and span.start < z for a, z in planted.get(span.source, ()))


def outcome(result: Result, gold: Sequence[str]) -> str:
    """``right`` (answered from a gold document), ``wrong`` (answered otherwise — any answer
    to an unanswerable question is wrong) or ``escalated``."""
    if result.escalated:
        return "escalated"
    return "right" if {h.doc_id for h in result.sources} & set(gold) else "wrong"


def with_history(question) -> tuple[str, list | None]:
    """(text, history) of a labelled ``Question``: follow-ups carry their earlier turns."""
    return question.text, (list(question.turns) or None)


class CachedPipeline(Component):
    """``Pipeline.ask`` with an answer cache for exact repeats: the key is the *condensed*
    question (so "and on free?" after different conversations are different keys) and the
    filter and the access scope (an answer found for one scope is never served to another);
    entries expire after ``ttl`` seconds (default 300); the namespace is the
    pipeline's ``fingerprint``: its corpus, every component's settings and models, its
    thresholds — change any and the cache misses."""

    def __init__(self, pipeline: Pipeline, ttl: float | None = 300.0,
                 path: str | Path | None = None):
        self.pipeline, self.ttl, self.path = pipeline, ttl, path
        self.cache = Cache("answers", pipeline.fingerprint, ttl, path)

    def ask(self, question: str, history=None, where=None, *, scope=None) -> Result:
        """``Pipeline.ask``, answered from the cache when the same condensed question, filter
        and scope were asked within ``ttl`` under the same corpus, models and thresholds."""
        question = check_query(question)
        condensed = (self.pipeline.condenser.condense(question, history) if history
                     else question)
        self.cache.namespace = self.pipeline.fingerprint
        key = Cache.key(condensed, validate_where(where), scoped(None, scope))  # scope as applied
        hit = self.cache.get(key)
        if hit is not None:
            return Result.from_dict(hit)
        result = self.pipeline.ask(question, history, where, scope=scope)
        self.cache.put(key, result.to_dict())
        return result


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
