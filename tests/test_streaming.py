"""Streamed answers (issue 22): the endpoint backend reads server-sent events, ``ChatServer``
sends them, and the generative reader and the pipeline stream — releasing only sentences
that passed their checks, and ending with the same checked answer as the non-streaming call.

The chat model is scripted (a test double of the *model*: its reply follows a fixed rule
from the passages in the prompt, sent in 3-character pieces as an endpoint's deltas arrive);
the reader, pipeline, server and client under test are the real ones, on the real help
centre. One slow test streams the real offline model (SmolLM2)."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ragbook import load_helpcentre
from ragbook.llm import LLMResponseError, LocalLLM, OpenAICompatibleLLM
from ragbook.pipeline import Pipeline
from ragbook.readers import GenerativeReader, split_claims, support
from ragbook.readers.generative import _final_claims
from ragbook.serving import ChatServer
from ragbook.streaming import Streamed, cut_at_stop, stream_reply, tidy_pieces
from ragbook.text import sentences
from ragbook.types import Hit

HC = load_helpcentre()
MESSAGES = [{"role": "user", "content": "Name the capital of France in one word."}]
_PASSAGE = re.compile(r'<passage n="(\d+)" source="[^"]*">\n(.*?)\n</passage>', re.DOTALL)


class Quoting:
    """A scripted chat backend. Its reply is built from the prompt's passages by ``mode``:
    ``quote`` (a sentence of passage 1 [1], then one of passage 2 [2]), ``abstain``
    (NOT_IN_CONTEXT), ``invented`` (a sentence no passage backs), ``mixed`` (quote, an
    invented sentence, quote: the middle one must be dropped), ``bad_cite`` (the second
    sentence also cites a passage that does not exist), ``repeated`` (quote, the same
    sentence again, quote: the repeat is dropped). ``stream`` sends it in 3-character
    pieces and counts what it has sent (``sent``), so a test can see *when* text came out."""

    def __init__(self, mode: str):
        self.mode, self.sent, self.pieces, self.calls = mode, 0, 0, 0

    def reply(self, messages) -> str:
        passages = {int(n): text for n, text in _PASSAGE.findall(messages[-1]["content"])}

        def quote(n: int) -> str:
            said = [s for s in sentences(passages[n]) if len(s.split()) >= 5
                    and s.endswith(".") and not s.startswith(("#", "-", "|"))]
            return (said[0] if said else passages[n].split("\n")[-1]).rstrip(".")

        return {"quote": f"{quote(1)} [1]. {quote(2)} [2].",
                "abstain": "NOT_IN_CONTEXT",
                "invented": "Refunds are paid in gold bars within 45 minutes [1].",
                "mixed": f"{quote(1)} [1]. The moon is made of green cheese [2]. "
                         f"{quote(2)} [2].",
                "bad_cite": f"{quote(1)} [1]. {quote(2)} [2] [7].",
                "uncited": f"{quote(1)}.",
                "repeated": f"{quote(1)} [1]. {quote(1)} [1]. {quote(2)} [2]."}[self.mode]

    def generate(self, messages, max_new_tokens=None, stop=()):
        self.calls += 1
        return self.reply(messages)

    def stream(self, messages, max_new_tokens=None, stop=()):
        self.calls += 1
        text = self.reply(messages)
        self.sent, self.pieces = 0, -(-len(text) // 3)
        for i in range(0, len(text), 3):
            self.sent += 1
            yield text[i:i + 3]


def asked_by(pipeline, question: str, path: str):
    """(the Result, the text shown while it streamed: "" for ``ask``) of ``question`` asked
    through ``path``, "ask" or "stream"."""
    if path == "ask":
        return pipeline.ask(question), ""
    streamed = pipeline.stream(question)
    shown = "".join(streamed)
    return streamed.result, shown


def reader(llm, **settings) -> GenerativeReader:
    return GenerativeReader(llm, keep=3, scored_citations=False, **settings)


def same(a, b) -> None:
    """Two pipeline Results agree in everything but the trace's timings."""
    da, db = a.to_dict(), b.to_dict()
    for d in (da, db):
        for stage in d["trace"]:
            stage.pop("seconds")
    assert da == db


QUESTIONS = [q for q in HC.questions if q.category == "paraphrase"][:3]


# -- the pieces add up to the whole reply ---------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=" \n.ab[1]", max_size=40), st.lists(st.integers(1, 40), max_size=8),
       st.sampled_from([(), ("\n\n",), ("]", "b."), ("\n",)]))
def test_tidy_pieces_join_to_what_generate_returns(raw, cuts, stop):
    bounds = sorted({min(c, len(raw)) for c in cuts})
    pieces = [raw[a:z] for a, z in zip([0, *bounds], [*bounds, len(raw)], strict=True)]
    assert "".join(tidy_pieces(pieces, stop)) == cut_at_stop(raw, stop).strip()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["Refunds take 14 days", "[1]", "[2]", ".", " ", "It is",
                                 "done", "!", "[", "1", "]", "e.g.", "Refunds take 14 days."]),
                max_size=14))
@example(["Refunds take 14 days.", " ", "[", "1", "]", " ", "done"])   # "[" opens a mark
@example(["It is", " ", "done", ".", " ", "[2]", ".", " ", "It is", " ", "done", "."])
def test_a_released_claim_is_never_changed_by_later_text(parts):
    """The safety property streaming rests on: the claims ``_final_claims`` calls final in
    any prefix of a reply are exactly the first claims of the whole reply (holding only the
    last claim fails the first example: "A. [" would release "A." before "[1]" joins it)."""
    reply = "".join(parts)
    whole = split_claims(reply)
    for end in range(len(reply) + 1):
        final = _final_claims(reply[:end])
        assert final == whole[:len(final)], (reply[:end], final, whole)


# -- the reader ------------------------------------------------------------------------------
CONTEXT = ("Refunds are issued within 14 days of the request. Enterprise contracts carry a "
           "30-day refund window.")


def hits():
    return [Hit("refund", 0.9, 1, doc_id="billing-refund-policy", text=CONTEXT),
            Hit("office", 0.5, 2, doc_id="office",
                text="Our office is closed on Sundays. Support answers chats every weekday.")]


@pytest.mark.parametrize("mode, released, reason", [
    ("quote", 2, None), ("abstain", 0, "not_in_context"), ("invented", 0, "unsupported"),
    ("mixed", 2, None), ("bad_cite", 1, "invalid_citation"), ("repeated", 2, None)])
def test_reader_stream_ends_with_the_answer_read_gives(mode, released, reason):
    llm = Quoting(mode)
    streamed = reader(llm).stream("How long do refunds take?", hits())
    assert isinstance(streamed, Streamed)
    pieces = list(streamed)
    answer = streamed.result
    assert answer == reader(Quoting(mode)).read("How long do refunds take?", hits())
    assert answer.reason == reason
    shown = "".join(pieces)
    assert (answer.text or "").startswith(shown) and len(pieces) == released
    for claim in split_claims(shown):        # every released sentence is backed by a passage
        assert max(support(claim, h.text) for h in hits()) >= 0.5
    assert "cheese" not in shown and "[7]" not in shown and "NOT_IN_CONTEXT" not in shown


def test_reader_releases_a_sentence_before_the_model_has_finished():
    llm = Quoting("quote")
    streamed = reader(llm).stream("How long do refunds take?", hits())
    pieces, when = [], []
    for piece in streamed:
        pieces.append(piece)
        when.append(llm.sent)
    assert when[0] < llm.pieces              # the first sentence went out mid-reply
    assert "".join(pieces) == streamed.result.text and streamed.result.reason is None


def test_reader_streams_nothing_unverified_when_verification_is_off():
    streamed = reader(Quoting("quote"), min_support=None).stream("refunds?", hits())
    assert list(streamed) == [] and streamed.result.text.endswith("[2].")


# -- the pipeline, on the help centre --------------------------------------------------------
@pytest.mark.parametrize("mode", ["quote", "abstain", "invented", "mixed", "bad_cite"])
def test_pipeline_stream_gives_the_result_ask_gives(hc_hybrid, mode):
    for q in QUESTIONS:
        streamed = Pipeline(hc_hybrid, reader=reader(Quoting(mode))).stream(q.text)
        pieces = list(streamed)
        asked = Pipeline(hc_hybrid, reader=reader(Quoting(mode))).ask(q.text)
        same(streamed.result, asked)
        if mode == "abstain":
            assert asked.reason == "reader_abstained"
        if mode in ("quote", "mixed"):       # answered, the first sentence before the end
            assert not asked.escalated and len(pieces) >= 2
        if mode in ("invented", "bad_cite"):  # the reader's own check failed the answer
            assert asked.reason == "unsupported_answer"
        if asked.escalated:                  # at most the verified sentences were shown
            assert all(max(support(c, h.text) for h in asked.candidates) >= 0.5
                       for c in split_claims("".join(pieces)))
        else:
            assert "".join(pieces) == asked.answer.text


@pytest.mark.parametrize("mode, verdict, settings", [
    ("invented", "unsupported", {}), ("bad_cite", "invalid_citation", {}),
    ("uncited", "uncited", {"min_support": None})])
@pytest.mark.parametrize("path", ["ask", "stream"])
def test_an_answer_its_own_check_failed_is_never_delivered(hc_hybrid, mode, verdict,
                                                           settings, path):
    """The reader flags the answer (its text kept, a reason set); the pipeline acts on the
    verdict: it escalates, says which check failed, and delivers no answer text — in
    ``ask`` and in ``stream`` alike."""
    p = Pipeline(hc_hybrid, reader=reader(Quoting(mode), **settings))
    q = QUESTIONS[0].text
    assert p.reader.read(q, p.prepare(q).candidates).reason == verdict   # the check's verdict
    result, shown = asked_by(p, q, path)
    assert result.escalated and result.reason == "unsupported_answer"
    assert result.answer.text is None and not result.sources
    assert result.trace[-1].detail["verdict"] == verdict and verdict in result.detail
    assert "gold bars" not in shown and "[7]" not in shown


def test_pipeline_escalation_before_reading_streams_nothing_and_calls_no_model(hc_hybrid):
    llm = Quoting("quote")
    strict = Pipeline(hc_hybrid, reader=reader(llm), min_confidence=0.99,
                      min_confidence_kind="cosine")
    streamed = strict.stream(QUESTIONS[0].text)
    assert list(streamed) == [] and streamed.result.reason == "low_confidence"
    assert llm.calls == 0
    same(streamed.result, strict.ask(QUESTIONS[0].text))


def test_pipeline_stream_of_an_extractive_reader_is_the_answer_at_the_end(hc_hybrid):
    p = Pipeline(hc_hybrid)
    streamed = p.stream(QUESTIONS[0].text)
    pieces = list(streamed)
    same(streamed.result, p.ask(QUESTIONS[0].text))
    assert pieces == ([streamed.result.answer.text] if not streamed.result.escalated else [])


def test_pipeline_stream_writes_the_same_trace_line(hc_hybrid, tmp_path):
    path = tmp_path / "trace.jsonl"
    p = Pipeline(hc_hybrid, reader=reader(Quoting("mixed")), trace_path=path)
    streamed = p.stream(QUESTIONS[1].text)
    list(streamed)
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["answer"] == streamed.result.answer.text


# -- over HTTP: ChatServer streams, OpenAICompatibleLLM reads the stream ------------------------
def test_pipeline_streams_end_to_end_over_http(hc_hybrid):
    backend = Quoting("mixed")
    with ChatServer(backend) as server:
        llm = OpenAICompatibleLLM(server.base_url, "local")
        p = Pipeline(hc_hybrid, reader=reader(llm))
        for q in QUESTIONS:
            streamed = p.stream(q.text)
            pieces = list(streamed)
            same(streamed.result, Pipeline(hc_hybrid, reader=reader(Quoting("mixed"))).ask(q.text))
            assert "".join(pieces) == streamed.result.answer.text and len(pieces) >= 2


def test_endpoint_stream_equals_generate_and_arrives_in_pieces():
    class Fixed(Quoting):
        def reply(self, messages):
            return "  Paris is the capital [1].\n\nIgnored after the stop."

    with ChatServer(Fixed("quote")) as server:
        llm = OpenAICompatibleLLM(server.base_url, "local")
        pieces = list(llm.stream(MESSAGES, stop=["\n\n"]))
        assert "".join(pieces) == llm.generate(MESSAGES, stop=["\n\n"]) == \
            "Paris is the capital [1]."
        assert len(pieces) > 3


def test_a_backend_without_stream_is_served_as_one_piece():
    class Plain:
        def generate(self, messages, max_new_tokens=None, stop=()):
            return "Paris."

    assert list(stream_reply(Plain(), MESSAGES)) == ["Paris."]
    with ChatServer(Plain()) as server:
        assert list(OpenAICompatibleLLM(server.base_url, "local").stream(MESSAGES)) == ["Paris."]


class FailingBackend:
    """A backend whose stream fails, after ``pieces`` pieces; ``generate`` still works."""

    def __init__(self, pieces):
        self.pieces = pieces

    def generate(self, messages, max_new_tokens=None, stop=()):
        return "Paris."

    def stream(self, messages, max_new_tokens=None, stop=()):
        if not self.pieces:   # fails on the call itself, before any iterator exists
            raise RuntimeError("out of memory")
        return self._pieces_then_failure()

    def _pieces_then_failure(self):
        yield from self.pieces
        raise RuntimeError("out of memory")


@pytest.mark.parametrize("pieces, error", [
    (["Paris is"], "failed mid-stream.*out of memory"),   # an error, not a short answer
    ([], "HTTP 500.*out of memory"),                      # nothing sent yet: a plain 500
], ids=["mid-stream", "before-the-first-piece"])
def test_a_backend_failing_while_streaming_is_an_error(pieces, error):
    with ChatServer(FailingBackend(pieces)) as server:
        llm = OpenAICompatibleLLM(server.base_url, "local")
        with pytest.raises(LLMResponseError, match=error):
            list(llm.stream(MESSAGES))
        assert llm.generate(MESSAGES) == "Paris."   # the generation lock was released


def sse_server(body: bytes, content_type: str = "text/event-stream"):
    """A bare HTTP server on 127.0.0.1 answering every POST with ``body``: streams no real
    chat-completions server should send."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def chunk(text):
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"


@pytest.mark.parametrize("body, content_type, expected", [
    (chunk("Par") + chunk("is.") + b"data: [DONE]\n\n", "text/event-stream", ["Par", "is."]),
    (b": keep-alive\n\n" + chunk("Paris.") + b'data: {"choices": [{"delta": {}, '
     b'"finish_reason": "stop"}]}\n\n', "text/event-stream", ["Paris."]),
    (json.dumps({"choices": [{"message": {"content": "Paris."}}]}).encode(),
     "application/json", ["Paris."]),
    (chunk("Par"), "text/event-stream", "ended before 'data: \\[DONE\\]'"),
    (chunk("Par") + b'data: {"error": {"message": "overloaded"}}\n\n', "text/event-stream",
     "failed mid-stream.*overloaded"),
    (chunk("Par") + b"data: <html>\n\n", "text/event-stream", "not a chat-completion chunk"),
])
def test_endpoint_streams_are_read_or_refused_by_name(body, content_type, expected):
    httpd = sse_server(body, content_type)
    try:
        host, port = httpd.server_address[:2]
        llm = OpenAICompatibleLLM(f"http://{host}:{port}/v1", "m", max_retries=0)
        if isinstance(expected, list):
            assert list(llm.stream(MESSAGES)) == expected
        else:
            with pytest.raises(LLMResponseError, match=expected):
                list(llm.stream(MESSAGES))
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_chat_server_refuses_a_stream_flag_that_is_not_a_bool():
    import urllib.error
    import urllib.request

    with ChatServer(Quoting("quote")) as server:
        req = urllib.request.Request(server.base_url + "/chat/completions", data=json.dumps(
            {"messages": MESSAGES, "stream": "yes"}).encode(),
            headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 400 and "'stream' must be true" in err.value.read().decode()


# -- the real offline model --------------------------------------------------------------------
@pytest.mark.slow
def test_local_model_streams_what_it_generates_and_serves_it_over_http():
    llm = LocalLLM(max_new_tokens=24, cache=False)
    pieces = list(llm.stream(MESSAGES, stop=["\n\n"]))
    whole = llm.generate(MESSAGES, stop=["\n\n"])
    assert "".join(pieces) == whole and whole and len(pieces) > 1
    with ChatServer(llm) as server:
        remote = OpenAICompatibleLLM(server.base_url, "local", timeout=120)
        assert "".join(remote.stream(MESSAGES, max_new_tokens=24, stop=["\n\n"])) == whole


# -- the command line ---------------------------------------------------------------------------
def test_cli_ask_generative_streams_the_answer_ask_gives(tmp_path, monkeypatch, capsys):
    from ragbook.cli import main
    from ragbook.datasets import data_dir

    src = tmp_path / "docs"
    src.mkdir()
    for name in ("billing-refund-policy", "billing-invoices", "account-export-csv"):
        (src / f"{name}.md").write_text(
            (data_dir() / "helpcentre" / "articles" / f"{name}.md").read_text())
    assert main(["index", str(src), "--out", str(tmp_path / "index")]) == 0
    capsys.readouterr()
    question = "how long is the refund window for enterprise contracts?"
    with ChatServer(Quoting("mixed")) as server:
        monkeypatch.setenv("RAGBOOK_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGBOOK_LLM_MODEL", "local")
        assert main(["ask", str(tmp_path / "index"), question, "--generative"]) == 0
        shown = capsys.readouterr().out
        assert main(["ask", str(tmp_path / "index"), question, "--generative", "--json"]) == 0
        asked = json.loads(capsys.readouterr().out)
    assert not asked["escalated"] and "cheese" not in asked["answer"]
    lines = shown.splitlines()
    assert lines[0] == "> " + asked["answer"] and "sources:" in lines   # a quoted block


def test_a_superseded_page_among_the_passages_holds_everything_until_the_verdict(hc_hybrid):
    traps = [q for q in HC.questions if q.category == "superseded_trap"][:6]
    reasons = []
    for q in traps:
        p = Pipeline(hc_hybrid, reader=reader(Quoting("quote")), exclude_superseded=False)
        streamed = p.stream(q.text)
        pieces = list(streamed)
        same(streamed.result, p.ask(q.text))
        reasons.append(streamed.result.reason)
        if streamed.result.escalated:
            assert pieces == []
    assert "superseded_source" in reasons


def test_scored_citations_stream_to_the_same_answer():
    class Scoring(Quoting):
        def score(self, messages, options, prefix=""):
            return [-float(n) for n in range(len(options))]      # always prefers [1]

    for mode in ("quote", "mixed", "bad_cite"):
        r = GenerativeReader(Scoring(mode), keep=2, scored_citations=True)
        streamed = r.stream("How long do refunds take?", hits())
        shown = "".join(streamed)
        answer = streamed.result
        assert answer == GenerativeReader(Scoring(mode), keep=2, scored_citations=True).read(
            "How long do refunds take?", hits())
        assert (answer.text or "").startswith(shown) and shown
