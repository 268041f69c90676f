"""OpenTelemetry spans (issue 22): one ``ragbook.ask`` span per question with a child per
trace stage, carrying what the JSONL trace line carries — read back with the SDK's
in-memory exporter from a real pipeline on the help centre; and the package without
opentelemetry (the import blocked) still answers and writes its JSONL trace."""
import json
import subprocess
import sys

import pytest

from ragbook import load_helpcentre, telemetry
from ragbook.pipeline import Pipeline
from ragbook.result import read_traces
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
    assert root.attributes["ragbook.question"] == REFUND.text
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
    attrs = telemetry.stage_attributes(stage)
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
