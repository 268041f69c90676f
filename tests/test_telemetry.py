"""OpenTelemetry spans (issue 22): one ``ragbook.ask`` span per question with a child per
trace stage, carrying what the JSONL trace line carries — read back with the SDK's
in-memory exporter from a real pipeline on the help centre; and the package without
opentelemetry (the import blocked) still answers and writes its JSONL trace."""
import hashlib
import hmac
import json
import subprocess
import sys

import pytest

from ragbook import load_helpcentre, telemetry
from ragbook.pipeline import Pipeline
from ragbook.result import read_traces
from ragbook.telemetry import hash_key
from ragbook.types import Stage

trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

HC = load_helpcentre()
REFUND = next(q for q in HC.questions if q.id == "ba-q001")


@pytest.fixture(scope="module")
def exporter():
    """An in-memory exporter on the global tracer provider (an SDK provider is installed if
    none is: the global one can be set once per process)."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    found = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(found))
    return found


def test_one_question_gives_a_span_per_stage_under_a_question_span(hc_hybrid, exporter,
                                                                    tmp_path):
    exporter.clear()
    path = tmp_path / "trace.jsonl"
    result = Pipeline(hc_hybrid, trace_path=path).ask(REFUND.text)
    spans = exporter.get_finished_spans()
    root = next(s for s in spans if s.name == "ragbook.ask")
    children = sorted((s for s in spans if s is not root), key=lambda s: s.start_time)
    assert [s.name for s in children] == [f"ragbook.{st.name}" for st in result.trace] == [
        "ragbook.condense", "ragbook.dense", "ragbook.bm25", "ragbook.fuse", "ragbook.read",
        "ragbook.decide"]
    assert len(spans) == 1 + len(result.trace)
    for span, stage in zip(children, result.trace, strict=True):
        assert span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert span.attributes["ragbook.stage"] == stage.name
        assert tuple(span.attributes.get("ragbook.ids", ())) == stage.ids
        assert tuple(span.attributes.get("ragbook.scores", ())) == pytest.approx(stage.scores)
        assert span.end_time - span.start_time == int(stage.seconds * 1e9)
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time
    dense = children[1].attributes
    assert dense["ragbook.count"] == result.trace[1].detail["count"] >= len(dense["ragbook.ids"])
    assert dense["ragbook.detail.count"] == result.trace[1].detail["count"]
    assert "ragbook.question" not in root.attributes          # texts are hashed by default
    assert root.attributes["ragbook.question.hmac"] == hmac.new(      # keyed: no guessing
        hash_key(), REFUND.text.encode(), hashlib.sha256).hexdigest()[:16] != hashlib.sha256(
        REFUND.text.encode()).hexdigest()[:16]
    assert root.attributes["ragbook.question.chars"] == len(REFUND.text)
    assert root.attributes["ragbook.escalated"] is result.escalated is False
    assert tuple(root.attributes["ragbook.sources"]) == tuple(h.id for h in result.sources)
    assert {h.doc_id for h in result.sources} & set(REFUND.gold)
    # the JSONL trace stays, and says the same
    (line,) = read_traces(path)
    assert [(s.name, s.ids) for s in line.trace] == [
        (s.attributes["ragbook.stage"], tuple(s.attributes.get("ragbook.ids", ())))
        for s in children]


def test_an_escalation_carries_its_reason(hc_hybrid, exporter):
    exporter.clear()
    result = Pipeline(hc_hybrid, min_confidence=0.99, min_confidence_kind="cosine").ask(REFUND.text)
    root = next(s for s in exporter.get_finished_spans() if s.name == "ragbook.ask")
    assert root.attributes["ragbook.escalated"] is True
    assert root.attributes["ragbook.reason"] == result.reason == "low_confidence"
    decide = next(s for s in exporter.get_finished_spans() if s.name == "ragbook.decide")
    assert decide.attributes["ragbook.detail.escalated"] == "low_confidence"


def test_detail_values_become_valid_attributes(exporter):
    stage = Stage("fuse", 0.25, ("a", "b"), (1, 0.5), {
        "count": 2, "where": None, "scope": {"access": ["public"]}, "weights": [1, 0.5],
        "channels": ["dense", "bm25"], "flags": [True, False], "mixed": [1, "a"]})
    attrs = telemetry.stage_attributes(stage, text=True)        # the caller opted in
    assert attrs["ragbook.scores"] == [1.0, 0.5] and attrs["ragbook.count"] == 2
    assert attrs["ragbook.detail.where"] == "null"
    assert json.loads(attrs["ragbook.detail.scope"]) == {"access": ["public"]}
    assert attrs["ragbook.detail.weights"] == [1.0, 0.5]
    assert attrs["ragbook.detail.channels"] == ["dense", "bm25"]
    assert attrs["ragbook.detail.flags"] == [True, False]
    assert attrs["ragbook.detail.mixed"] == '[1, "a"]'
    exporter.clear()
    span = trace.get_tracer("test").start_span("x", attributes=attrs)
    span.end()
    (done,) = exporter.get_finished_spans()
    assert dict(done.attributes) == {k: (tuple(v) if isinstance(v, list) else v)
                                     for k, v in attrs.items()}   # the SDK dropped nothing


def test_without_opentelemetry_the_pipeline_answers_and_traces_as_before(
        hc_hybrid, exporter, monkeypatch, tmp_path):
    exporter.clear()
    for name in [m for m in sys.modules if m == "opentelemetry" or
                 m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)      # "import opentelemetry" now fails
    with pytest.raises(ImportError):
        import opentelemetry.trace  # noqa: F401
    path = tmp_path / "trace.jsonl"
    result = Pipeline(hc_hybrid, trace_path=path).ask(REFUND.text)
    assert not result.escalated and len(read_traces(path)) == 1
    assert telemetry.emit(result) is False
    assert exporter.get_finished_spans() == ()


def test_importing_ragbook_does_not_import_opentelemetry():
    code = ("import sys; import ragbook, ragbook.pipeline, ragbook.telemetry; "
            "print(any(m.split('.')[0] == 'opentelemetry' for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


SECRET_KEY = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
EMAIL = "dana.owner@example.com"


def every_attribute(spans) -> str:
    return json.dumps([{k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in s.attributes.items()} for s in spans], ensure_ascii=False)


@pytest.mark.parametrize("reader_escalates", [False, True])
def test_no_question_text_key_or_scope_value_in_any_span_by_default(
        hc_hybrid, exporter, monkeypatch, reader_escalates):
    """A key pasted into a question (and into an earlier turn, so the condenser sees it) and
    an e-mail in the access scope go through every stage — answered and escalated — and
    appear in no span attribute; the same run with the opt-in carries them."""
    monkeypatch.delenv("RAGBOOK_TELEMETRY_TEXT", raising=False)
    question = f"my key is {SECRET_KEY}, how long is the refund window for {EMAIL}?"
    history = [{"role": "user", "content": f"I am {EMAIL}, key {SECRET_KEY}"}]
    scope = {"access": {"$nin": ["internal", EMAIL]}}      # a deny-list naming a user
    extra = {"min_confidence": 0.99, "min_confidence_kind": "cosine"} if reader_escalates else {}
    pipeline = Pipeline(hc_hybrid, **extra)
    exporter.clear()
    result = pipeline.ask(question, history=history, scope=scope)
    assert result.reason == ("low_confidence" if reader_escalates else result.reason)
    assert reader_escalates or "read" in [st.name for st in result.trace]
    spans = exporter.get_finished_spans()
    assert len(spans) == 1 + len(result.trace) >= 5
    seen = every_attribute(spans)
    for secret in (SECRET_KEY, EMAIL, "refund window", "dana.owner"):
        assert secret not in seen, secret
    assert "ragbook.detail.scope.hmac" in seen and "ragbook.detail.input.hmac" in seen

    exporter.clear()
    monkeypatch.setenv("RAGBOOK_TELEMETRY_TEXT", "1")
    pipeline.ask(question, history=history, scope=scope)
    opted = every_attribute(exporter.get_finished_spans())
    assert SECRET_KEY in opted and EMAIL in opted


class _ReasonedReader:
    """A custom reader whose own check fails its answer with a reason that quotes the
    question (an LLM judge's verdict, say)."""

    def read(self, question, hits):
        from ragbook.types import Answer

        return Answer("refunds", (hits[0].id,), (1.0,), reason=f"unsupported: {question}")


def test_a_label_key_holding_free_text_is_hashed_like_text(exporter, monkeypatch):
    """'verdict' and 'reason' were sent as they were, whatever they held: a custom reader's
    reason carried the question (and its pasted key) into the decide span. Only the labels
    the package emits pass; any other string under a label key is hashed."""
    from ragbook import BM25Index
    from ragbook.types import Document

    monkeypatch.delenv("RAGBOOK_TELEMETRY_TEXT", raising=False)
    docs = [Document(f"d{i}", f"refund policy number {i}") for i in range(3)]
    pipeline = Pipeline(BM25Index().build(docs), reader=_ReasonedReader())
    exporter.clear()
    result = pipeline.ask(f"refund policy {SECRET_KEY}")
    assert result.reason == "unsupported_answer" and SECRET_KEY in result.detail
    assert result.trace[-1].detail == {"escalated": "unsupported_answer", "verdict": "other"}
    seen = every_attribute(exporter.get_finished_spans())
    assert SECRET_KEY not in seen and '"ragbook.detail.verdict": "other"' in seen
    assert telemetry._redacted("ragbook.reason", "low_confidence") == {
        "ragbook.reason": "low_confidence"}
    free = telemetry.stage_attributes(Stage("decide", 0.1, (), (), {
        "verdict": f"unsupported: {SECRET_KEY}", "escalated": ["x"],
        "reason": "unsupported_directive"}))
    assert SECRET_KEY not in json.dumps(free) and "ragbook.detail.verdict.hmac" in free
    assert "ragbook.detail.escalated.hmac" in free
    assert free["ragbook.detail.reason"] == "unsupported_directive"
