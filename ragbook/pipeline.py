"""The whole pipeline: condense → retrieve (the retriever's own stages) → rerank → admit →
read → conclude: an answer with its sources, or an escalation with the reason and what a
human needs.

Every stage is one of the earlier chapters' pieces; this module only composes them — each
role through its contract in ``ragbook.retrieval``, checked when the pipeline is built —
keeps a trace of what each stage handed the next, and decides when *not* to answer:

=================== ==========================================================================
escalation reason   when
=================== ==========================================================================
no_candidates       retrieval found nothing (after filters)
rerank_threshold    no candidate scored at least the reranker's ``min_rerank_score``
low_confidence      the confidence (best reranked score, else the retriever's) < ``min_confidence``
planted_instruction the best answer would be a planted instruction (``planted_spans``)
reader_abstained    the reader found no answer good enough (its own reason is in ``detail``)
unsupported_answer  the reader's own check failed its answer (unsupported, uncited, ...), or the
                    answer is a directive no other document states (``guards``: verdict
                    ``unsupported_directive``)
superseded_source   the answer would come from a page marked superseded
conflict            two sources from different documents answer with different figures
=================== ==========================================================================

``ask`` = ``prepare`` (everything that does not depend on the thresholds: retrieval,
reranking, each candidate's answer spans) + ``decide``, which is ``admit`` (the checks that
come before reading: the first four reasons) → read → ``conclude`` (the checks on the
answer). ``stream`` runs the same three steps, streaming the reading. The chapter 9 widget
calls ``decide`` of a copy with other thresholds (``with_settings``) on cached ``prepare``
outputs, so a slider moves instantly and the numbers it shows are exactly what ``ask``
would do. ``Result`` and how a labelled question's outcome is counted live in
``ragbook.result``.

>>> p = Pipeline(HybridRetriever(DenseIndex(), BM25Index()).build(chunks))   # doctest: +SKIP
>>> turns = [{"role": "user", "content": "csv on pro?"}]
>>> p.ask("and on the free plan?", history=turns)                             # doctest: +SKIP
Result(question='and on the free plan?', condensed='csv on free? and on the free plan?', ...)
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import calibration, telemetry
from .checks import check_k, check_query, check_threshold
from .component import Component
from .condense import RuleCondenser
from .conflicts import find_conflict
from .filters import filter_keys, matches, validate_where
from .guards import inside, planted_answer, planted_in, withheld
from .injection import instruction_like
from .readers import default_extractive_reader
from .result import Result, outcome
from .retrieval import (
    Reader,
    Reranker,
    Retriever,
    SpanReader,
    StreamingReader,
    check_confidence_threshold,
    check_role,
    trace_stage,
)
from .streaming import Streamed
from .types import Answer, Hit, Span, Stage

__all__ = ["Pipeline", "Prepared", "Admitted"]
_SUPERSEDED = {"status": "superseded"}   # with matches(): a list holding it counts too


@dataclass(frozen=True)
class Prepared:
    """Everything ``ask`` computes before any threshold applies: the condensed question, the
    reader's candidates (reranked, not yet cut, when there is a reranker), the confidence
    the ``min_confidence`` threshold compares and its kind (``retrieval.CONFIDENCE_KINDS``),
    each candidate's best answer span (a ``SpanReader``), and the trace so far."""

    question: str
    condensed: str
    candidates: tuple[Hit, ...]
    confidence: float | None
    confidence_kind: str
    spans: tuple[Span | None, ...]
    trace: tuple[Stage, ...]


@dataclass(frozen=True)
class Admitted:
    """A prepared question that passed every check that comes before reading (``admit``):
    the candidates the reader may use, each with its best span (``None`` for a reader
    without spans), the sentences planted for a model found in them (hit id -> character
    spans), the best genuine span (span readers) and when deciding began."""

    kept: tuple[tuple[Hit, Span | None], ...]
    planted: Mapping[str, Sequence[tuple[int, int]]]
    span: Span | None
    started: float

    @property
    def hits(self) -> list[Hit]:
        """The candidates the reader reads, best first."""
        return [h for h, _ in self.kept]


class Pipeline(Component):
    """Retriever → (reranker) → reader, with condensation, thresholds, escalation and a trace.

    It composes its components through their contracts (``retrieval.Retriever``,
    ``Reranker``, ``Reader``: checked here, naming the role) and never opens them: the
    retriever's ``retrieve`` runs its own stages and settings, the reranker's
    ``min_rerank_score`` is the only rerank cut, the reader's ``accepts`` its only span floor.

    Settings: ``candidates`` hits asked of the retriever (50), ``keep`` hits the reader reads
    (5), ``min_confidence`` the low-confidence threshold on the *confidence* — the best
    reranked score when there is a reranker, else the retriever's own confidence (a hybrid's:
    the dense channel's best cosine; ``confidence_kind`` names it). ``min_confidence_kind``
    says what your threshold is on ("cosine", "bm25", "rrf", "rerank"); a threshold of another
    kind, or outside what the confidence can be, is refused (``calibrate`` sets both).
    ``exclude_superseded`` adds ``status != superseded`` to every filter,
    ``detect_conflicts`` escalates when sources disagree (within ``conflict_margin``; a
    generated claim: ``guards.contradicted_claim``, and it is not streamed),
    ``skip_instructions`` never lets a page carrying a sentence planted for a model
    (``planted_spans``: an instruction to the AI, after Unicode and markup disguises are
    undone, alone or split over two sentences) give an extractive answer, from any of its
    sentences (``guards.planted_in``) — when one would be the best answer, the question
    escalates (``planted_instruction``: the page needs a person's eyes); when a genuine
    answer ranks above it, that answer is given and the trace notes ``planted_skipped``.
    ``guard_directives`` never delivers (nor streams) an answer sentence that is a directive
    — a policy changed "from now on", a request for a password, words addressed to the
    assistant, alone or after such a lead-in — unless another document states it too
    (``guards.unsupported_directive``).
    ``trace_path`` appends one JSON line per question (a ``neutral_settings``). ``reader``
    defaults to ``default_extractive_reader()``; ``condenser`` to ``RuleCondenser()``.
    """

    neutral_settings = frozenset({"trace_path"})

    def __init__(self, retriever, reranker=None, reader=None, condenser=None, *,
                 candidates: int = 50, keep: int = 5, min_confidence: float | None = None,
                 min_confidence_kind: str | None = None, exclude_superseded: bool = True,
                 detect_conflicts: bool = True, conflict_margin: float = 0.05,
                 skip_instructions: bool = True, guard_directives: bool = True,
                 trace_path: str | os.PathLike | None = None):
        self.retriever = check_role(retriever, Retriever, "retriever",
                                    "subclass ragbook.BaseRetriever, which derives retrieve() "
                                    "and confidence_bounds() from your search()")
        self.reranker = reranker if reranker is None else check_role(
            reranker, Reranker, "reranker", "subclass ragbook.rerank.BaseReranker, which "
            "derives order/cut/rerank from your score()")
        self.reader = check_role(reader if reader is not None else default_extractive_reader(),
                                 Reader, "reader")
        self.condenser = condenser if condenser is not None else RuleCondenser()
        self.candidates, self.keep = check_k(candidates, "candidates"), check_k(keep, "keep")
        self.min_confidence = check_confidence_threshold(
            min_confidence, self._scorer.confidence_kind, self._scorer.confidence_bounds(),
            min_confidence_kind)
        self.min_confidence_kind = min_confidence_kind
        self.exclude_superseded, self.detect_conflicts = exclude_superseded, detect_conflicts
        self.conflict_margin = check_threshold(conflict_margin, "conflict_margin")
        self.skip_instructions, self.trace_path = skip_instructions, trace_path
        self.guard_directives = guard_directives

    @property
    def _scorer(self):
        """Whose score ``min_confidence`` is on: the reranker's, else the retriever's."""
        return self.reranker if self.reranker is not None else self.retriever

    @property
    def confidence_kind(self) -> str:
        """What ``min_confidence`` is compared with (``retrieval.CONFIDENCE_KINDS``)."""
        return self._scorer.confidence_kind

    # -- everything before the thresholds ------------------------------------------------------
    def _where(self, where):
        where = dict(validate_where(where) or {})
        if self.exclude_superseded and "status" not in filter_keys(where):
            where["status"] = {"$ne": "superseded"}
        return where or None

    def prepare(self, question: str, history=None, where=None, *, scope=None) -> Prepared:
        """Condense, retrieve (the retriever's own stages, inside the application's ``scope``:
        see ``ask``), rerank (ordered, not cut), and find each candidate's best span (a
        ``SpanReader``): everything that does not depend on the thresholds, so ``decide`` can
        be re-run cheaply on copies with other thresholds (chapter 9's sliders). Raises
        ``ValueError`` for a blank question, ``TypeError`` for a malformed ``history`` or
        ``where``, and whatever the retriever raises (``NotBuiltError``, ``IndexDriftError``,
        ``EncoderMismatchError``)."""
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
        if self.reranker is not None:    # its kind even with nothing to order (no_candidates)
            t = time.perf_counter()
            pool = self.reranker.order(condensed, pool, k=self.keep) if pool else []
            trace.append(trace_stage("rerank", t, pool))
            confidence = pool[0].score if pool else None
            kind = self.reranker.confidence_kind
        else:
            pool = pool[:self.keep]
        spans: tuple[Span | None, ...] = ()
        if isinstance(self.reader, SpanReader) and pool:  # its spans now, thresholds later
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

    # -- the decision: admit -> read -> conclude -----------------------------------------------
    def decide(self, prep: Prepared) -> Result:
        """Apply this pipeline's thresholds and escalation rules to a ``Prepared`` question:
        ``admit`` (the checks before reading), read (a ``SpanReader``'s best prepared span,
        or the reader's ``read``), ``conclude`` (the checks on the answer). To try other
        thresholds, decide on a copy:
        ``pipeline.with_settings(min_confidence=0.4).decide(prep)``."""
        admitted = self.admit(prep)
        if isinstance(admitted, Result):
            return admitted
        return self.conclude(prep, admitted, self._read(prep, admitted))

    def admit(self, prep: Prepared) -> Result | Admitted:
        """The checks that come before reading, in order: no candidates, the reranker's cut,
        ``min_confidence``, and (span readers) a planted instruction that would be the best
        answer. Returns the escalation ``Result`` when one fails, else what the reader may
        read (``Admitted``): nothing has been shown to anyone yet."""
        t = time.perf_counter()
        if prep.confidence_kind != self.confidence_kind:
            raise ValueError(f"this Prepared carries a {prep.confidence_kind} confidence but "
                             f"this pipeline compares a {self.confidence_kind} one; prepare "
                             f"it with this pipeline's retriever and reranker")
        spans = prep.spans or (None,) * len(prep.candidates)
        passed = ({h.id for h in self.reranker.cut(prep.candidates)}
                  if self.reranker is not None else None)
        kept = tuple((h, s) for h, s in zip(prep.candidates, spans, strict=True)
                     if passed is None or h.id in passed)
        if not prep.candidates:
            return self._escalated(prep, t, "no_candidates", "retrieval found nothing for this "
                                   "question (after filters): hand it to a person")
        if not kept:
            return self._escalated(prep, t, "rerank_threshold", f"no candidate scored "
                                   f"{self.reranker.min_rerank_score} or more under the "
                                   f"reranker (min_rerank_score)")
        floor = self.min_confidence
        if floor is not None and (prep.confidence is None or prep.confidence < floor):
            best = "no score" if prep.confidence is None else f"{prep.confidence:.3f}"
            return self._escalated(prep, t, "low_confidence", f"the best "
                                   f"{prep.confidence_kind} score ({best}) is under "
                                   f"min_confidence={floor}")
        planted = planted_in(kept) if prep.spans and self.skip_instructions else {}
        span = None
        if prep.spans:
            span = max((s for _, s in kept if s is not None and not inside(s, planted)),
                       key=lambda s: s.score, default=None)
            good = span is not None and self.reader.accepts(span)
            bait = (planted_answer(self.reader, prep.condensed, kept, planted) if planted
                    else None)
            if bait is not None and (not good or bait.score > span.score):
                doc = next(h.doc_id for h, _ in kept if h.id == bait.source)
                return self._escalated(prep, t, "planted_instruction", f"the best answer "
                                       f"would come from {doc!r}, a page that carries a "
                                       f"sentence written to a model (the answer: characters "
                                       f"{bait.start}-{bait.end} of {bait.source!r}); such a "
                                       f"page is never quoted and needs a person's eyes",
                                       {"planted": [bait.source, bait.start, bait.end]})
        return Admitted(kept, planted, span, t)

    def _read(self, prep: Prepared, admitted: Admitted) -> Answer:
        """The reading step of ``decide``: a span reader's best admitted span (its spans were
        scored in ``prepare``), else the reader's own ``read`` of the admitted hits."""
        if not prep.spans:
            return self.reader.read(prep.condensed, admitted.hits)
        span = admitted.span
        if span is None or not self.reader.accepts(span):
            return Answer(None, reason="low_confidence")
        return Answer(span.text, (span.source,), (span.score,))

    def conclude(self, prep: Prepared, admitted: Admitted, answer: Answer) -> Result:
        """The checks on an answer read from ``admitted`` — the reader abstained or its own
        check failed the answer, it comes from a superseded page, its sources conflict — and
        the ``Result``: the escalation, or the answer with its sources and its span."""
        t = admitted.started
        if answer.text is None:
            detail = ("the reader found no answer good enough in the candidates "
                      "(low_confidence)" if prep.spans
                      else f"the reader abstained ({answer.reason})")
            return self._escalated(prep, t, "reader_abstained", detail)
        if answer.reason is not None:     # text, but its reader's own check failed it
            return self._escalated(prep, t, "unsupported_answer", "the reader's check failed "
                                   f"its answer: {answer.reason}", telemetry.verdict(answer.reason))
        why = withheld(answer.text, admitted.hits, self.guard_directives,
                       self.detect_conflicts and not prep.spans)
        if why is not None:
            return self._escalated(prep, t, *why)
        by_id = {h.id: h for h in admitted.hits}
        sources = tuple(by_id[s] for s in answer.sources if s in by_id)
        h = next((h for h in sources if matches(h.metadata, _SUPERSEDED)), None)
        if h is not None:
            return self._escalated(prep, t, "superseded_source", f"the answer comes from "
                                   f"{h.doc_id!r}, which is superseded by "
                                   f"{h.metadata.get('superseded_by', '?')!r}")
        span, planted = admitted.span if prep.spans else None, admitted.planted
        if self.detect_conflicts and span is not None:
            others = [s for h, s in admitted.kept if s is not None and h.doc_id not in
                      {x.doc_id for x in sources} and not inside(s, planted)]
            clash = find_conflict(span, others, self.conflict_margin)
            if clash is not None:
                other_doc = by_id[clash.source].doc_id
                return self._escalated(prep, t, "conflict", f"{sources[0].doc_id!r} says "
                                       f"{span.text!r} but {other_doc!r} says {clash.text!r}",
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
    def _escalated(prep: Prepared, started: float, reason: str, detail: str,
                   extra: Mapping[str, Any] | None = None) -> Result:
        """The ``Result`` handing ``prep`` over for ``reason`` (one of ``ESCALATIONS``)."""
        stage = Stage("decide", time.perf_counter() - started,
                      detail={"escalated": reason, **(extra or {})})
        return Result(prep.question, prep.condensed, Answer(None, reason=reason),
                      candidates=prep.candidates, reason=reason, detail=detail,
                      trace=prep.trace + (stage,), confidence=prep.confidence,
                      confidence_kind=prep.confidence_kind)

    # -- asking, streaming, recording ----------------------------------------------------------
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

        What was shown cannot be taken back, so ``admit`` runs first; a ``StreamingReader``
        releases a sentence once it passed its checks (``GenerativeReader.stream``), the
        pipeline shows it once the *next* one passed too (``guards.withheld``: no lead-in of a
        withheld directive is shown), and ``conclude`` judges the whole answer: when it
        answers, the pieces joined are exactly ``result.answer.text``; when it escalates, what
        was shown is verified sentences before it — show the escalation after them.
        When a cited page may be superseded (``exclude_superseded`` off) or the reader cannot
        stream (a span reader), nothing is shown before the verdict."""
        prep = self.prepare(question, history, where, scope=scope)
        return Streamed(self._streamed(prep))

    def _streamed(self, prep: Prepared):
        admitted, shown = self.admit(prep), ""
        if isinstance(admitted, Result):
            result = admitted
        else:
            if not prep.spans and isinstance(self.reader, StreamingReader):
                live = not any(matches(h.metadata, _SUPERSEDED) for h in admitted.hits)
                reading, held = self.reader.stream(prep.condensed, admitted.hits), ""
                for piece in reading:     # a sentence is shown once the next one passed too
                    live = live and withheld(shown + held + piece, admitted.hits,
                                             self.guard_directives, self.detect_conflicts) is None
                    if live and held:
                        shown += held
                        yield held
                    held = piece if live else held
                answer = reading.result
            else:
                answer = self._read(prep, admitted)
            result = self.conclude(prep, admitted, answer)
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
                  wrong_cost: float | None = None, target_error: float | None = None,
                  probability: float = 0.9, verbose: bool = True) -> Pipeline:
        """A copy of this pipeline (this one is left as it is) with ``min_confidence`` and its
        kind chosen on ``prepared`` labelled questions (``gold`` doc ids, empty when
        unanswerable; judged by ``result.outcome``) by one of two rules (``calibration``):
        maximise right − ``wrong_cost`` (default 2) × wrong; or, given ``target_error=α``,
        the lowest threshold at which at most α of delivered answers are wrong with
        ``probability``: ``calibrated.guarantee_`` (printed unless ``verbose=False``)."""
        if len(prepared) != len(questions) or not prepared:
            raise ValueError(f"need one Prepared per question, got {len(prepared)} and "
                             f"{len(questions)}")
        if wrong_cost is not None and target_error is not None:
            raise ValueError("give wrong_cost (maximise right - wrong_cost x wrong) or "
                             "target_error (a guarantee on the delivered error), not both")
        base = self.with_settings(min_confidence=None, min_confidence_kind=None)
        curve = calibration.risk_curve([p.confidence for p in prepared],
                                       [outcome(base.decide(p), q.gold)
                                        for p, q in zip(prepared, questions, strict=True)])
        guarantee = None if target_error is None else calibration.controlled_threshold(
            curve, len(prepared), target_error, probability)
        best = (calibration.cost_threshold(curve, 2.0 if wrong_cost is None else wrong_cost)
                if guarantee is None else self._scorer.confidence_bounds()[1]
                if guarantee.escalate_all else guarantee.threshold)
        calibrated = self.with_settings(min_confidence=best, min_confidence_kind=None
                                        if best is None else self.confidence_kind)
        calibrated.guarantee_ = guarantee
        if verbose and guarantee is not None:
            print(guarantee)
        return calibrated

