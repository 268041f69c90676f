"""OpenTelemetry spans for each question the pipeline answers — when ``opentelemetry-api`` is
installed; without it, ``emit`` does nothing (the import is tried on each call, so the
package never needs it).

One span per question, ``ragbook.ask``, with one child per trace stage (``ragbook.condense``,
``ragbook.dense``, ``ragbook.bm25``, ``ragbook.fuse``, ``ragbook.rerank``, ``ragbook.read``,
``ragbook.decide`` — whatever stages the ``Result``'s trace holds), carrying what the JSONL
trace line carries: the ids and scores a stage passed on, their count, its seconds and its
``detail`` (``ragbook.detail.<key>``; a value that is not a string, number, bool or a list of
one of those is written as JSON). The question span carries the question, the condensed
question, whether it escalated and why, and the answer's sources and scores.

**Nothing a user typed leaves by default.** A question can hold a pasted API key, a scope the
user's e-mail, a passage anything at all; a trace backend is read by more people than the
application. So by default the spans carry ids, counts, timings, scores, numbers and the
labels the package itself emits (``LABEL_VALUES``: the escalation reason, a reader's verdict;
a custom reader's own reason is text) — and for every text or structured value (the
question, the condensed question, a stage's ``where`` and ``scope``, the condenser's input
and output, an escalation's detail, conflicting statements) only its
length and a keyed hash (``<key>.hmac``, an HMAC-SHA256 prefix): equal values can still be
matched across spans, and the value cannot be read back — not even by hashing guesses, which
a plain hash would allow for an e-mail or a 4-digit PIN in 10,000 tries. The key is
``RAGBOOK_TELEMETRY_KEY`` from the environment (set it to match values across processes and
restarts; keep it out of the trace backend), else random for each process. Opt in to the
text with ``emit(..., text=True)`` or ``RAGBOOK_TELEMETRY_TEXT=1`` in the environment.

The stages are timed inside the pipeline (``Stage.seconds``), and the spans are written when
the question is done, from its trace: the stages ran one after another, so they are laid end
to end, the last ending now. Where the spans go is the application's choice — configure a
``TracerProvider`` with an exporter (OTLP, console, the SDK's ``InMemorySpanExporter``) as
usual; with none configured the API's default tracer drops them::

    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    pipeline.ask("How long is the refund window?")   # prints ragbook.ask and its stages
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from .canonical import canonical_json
from .result import ESCALATIONS

__all__ = ["emit", "stage_attributes", "hash_key", "verdict", "LABELS", "LABEL_VALUES"]

_PRIMITIVE = (str, bool, int, float)
#: Detail keys whose string values are labels from a fixed vocabulary (``LABEL_VALUES``).
LABELS = frozenset({"escalated", "verdict", "reason"})
#: Every label the package writes under those keys: the escalation reasons, the readers' own
#: reasons, the guards' verdict and ``verdict``'s "other". Only these are sent as they are:
#: a custom reader's reason (an LLM's verdict, which may quote the question) is text.
LABEL_VALUES = frozenset({*ESCALATIONS, "not_in_context", "unsupported", "uncited",
                          "invalid_citation", "unsupported_directive", "other"})


def _text_allowed(text: bool | None) -> bool:
    return os.environ.get("RAGBOOK_TELEMETRY_TEXT", "") == "1" if text is None else text


_PROCESS_KEY = os.urandom(32)


def hash_key() -> bytes:
    """The HMAC key texts are hashed with: ``RAGBOOK_TELEMETRY_KEY``, else this process's."""
    return os.environ.get("RAGBOOK_TELEMETRY_KEY", "").encode("utf-8") or _PROCESS_KEY


def verdict(reason: str | None) -> dict[str, str]:
    """The ``decide`` stage's detail for a reader whose own check failed its answer:
    ``{"verdict": reason}`` when ``reason`` is one of ``LABEL_VALUES``, else ``{"verdict":
    "other"}`` — a custom reader's free-text reason stays in the result's ``detail`` (which
    spans carry only hashed), never in a field read as a label."""
    return {"verdict": reason if reason in LABEL_VALUES else "other"}


def _redacted(key: str, value: Any) -> dict[str, Any]:
    """``{key: value}`` when the value is a number, a bool, or under a ``LABELS`` key one of
    ``LABEL_VALUES``; else its length and a keyed hash of its canonical JSON (``key.hmac``,
    ``key.chars``; module docstring): a label key holding free text is hashed like text. The
    JSON is ``canonical.canonical_json``'s: a set hashes alike in every process (its ``repr``
    follows the hash seed) and unlike its own string, and keys of mixed types cannot raise."""
    if isinstance(value, (bool, int, float)) or (key.rsplit(".", 1)[-1] in LABELS
                                                  and isinstance(value, str)
                                                  and value in LABEL_VALUES):
        return {key: value}
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float))
                                                for v in value):
        return {key: _value(value)}
    blob = value if isinstance(value, str) else canonical_json(value, strict=False)
    digest = hmac.new(hash_key(), blob.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return {f"{key}.hmac": digest.hexdigest()[:16], f"{key}.chars": len(blob)}


def _value(value: Any) -> Any:
    """``value`` as an OpenTelemetry attribute value: a str, bool, int or float, or a list of
    one type of those (ints among floats become floats); anything else (None, a dict, a
    mixed list) as its JSON text."""
    if isinstance(value, _PRIMITIVE):
        return value
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items and all(isinstance(v, str) for v in items):
        return items
    if items and all(isinstance(v, bool) for v in items):
        return items
    if items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return items if all(isinstance(v, int) for v in items) else [float(v) for v in items]
    return json.dumps(value, ensure_ascii=False, default=str)


def stage_attributes(stage, text: bool | None = None) -> dict[str, Any]:
    """The span attributes of one trace ``Stage``: ``ragbook.stage``, ``ragbook.seconds``,
    ``ragbook.ids``, ``ragbook.scores``, ``ragbook.count`` (the ids it recorded, or its
    ``count`` detail when it passed on more) and ``ragbook.detail.<key>`` per detail —
    texts and structures only as a hash and a length unless ``text`` (module docstring).

    >>> from ragbook.types import Stage
    >>> stage_attributes(Stage("bm25", 0.002, ("a", "b"), (3.5, 1.25), {"count": 7}))
    ... # doctest: +NORMALIZE_WHITESPACE
    {'ragbook.stage': 'bm25', 'ragbook.seconds': 0.002, 'ragbook.ids': ['a', 'b'],
     'ragbook.scores': [3.5, 1.25], 'ragbook.count': 7, 'ragbook.detail.count': 7}
    """
    detail = dict(stage.detail or {})
    out: dict[str, Any] = {"ragbook.stage": stage.name, "ragbook.seconds": float(stage.seconds)}
    if stage.ids:
        out["ragbook.ids"] = [str(i) for i in stage.ids]
    if stage.scores:
        out["ragbook.scores"] = [float(s) for s in stage.scores]
    count = detail.get("count", len(stage.ids))
    out["ragbook.count"] = count if isinstance(count, int) else len(stage.ids)
    for key, value in detail.items():
        if _text_allowed(text):
            out[f"ragbook.detail.{key}"] = _value(value)
        else:
            out.update(_redacted(f"ragbook.detail.{key}", value))
    return out


def _question_attributes(result, text: bool | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"ragbook.escalated": result.escalated,
           "ragbook.sources": [h.id for h in result.sources],
           "ragbook.answer_scores": [float(s) for s in result.answer.scores],
           "ragbook.candidates": len(result.candidates),
           "ragbook.stages": len(result.trace)}
    said = {"ragbook.question": result.question, "ragbook.condensed": result.condensed}
    if result.reason is not None:
        out.update(_redacted("ragbook.reason", result.reason))
        said["ragbook.detail"] = result.detail
    for key, value in said.items():
        out.update({key: value} if _text_allowed(text) else _redacted(key, value))
    return {k: v for k, v in out.items() if v != []}


def _tracer():
    """The ``ragbook`` tracer of the global provider, or None without ``opentelemetry-api``."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("ragbook")
    except PackageNotFoundError:   # run from a checkout that was never installed
        release = None
    return trace.get_tracer("ragbook", release)


def emit(result, end_ns: int | None = None, *, text: bool | None = None) -> bool:
    """Write ``result``'s spans (a ``result.Result``: the question span and one per stage
    of its trace, laid end to end and ending at ``end_ns``, default now), texts hashed
    unless ``text`` (default: ``RAGBOOK_TELEMETRY_TEXT=1``). Returns False, and does
    nothing, when ``opentelemetry-api`` is not installed."""
    tracer = _tracer()
    if tracer is None:
        return False
    end = time.time_ns() if end_ns is None else end_ns
    stages: Sequence = result.trace
    start = end - sum(int(s.seconds * 1e9) for s in stages)
    root = tracer.start_span("ragbook.ask", start_time=start,
                             attributes=_question_attributes(result, text))
    try:
        from opentelemetry import trace

        context = trace.set_span_in_context(root)
        at = start
        for stage in stages:
            until = at + int(stage.seconds * 1e9)
            span = tracer.start_span(f"ragbook.{stage.name}", context=context, start_time=at,
                                     attributes=stage_attributes(stage, text))
            span.end(end_time=until)
            at = until
    finally:
        root.end(end_time=end)
    return True

