"""``ragbook serve`` against a running server (uvicorn on a free loopback port, spoken to over
real sockets): its answers are ``Pipeline.ask``'s on every help-centre dev question, its
stream ends with the same ``Result``, and what a hostile client sends — a forged ``Host``, a
foreign ``Origin``, an oversize body or head, a wider scope — is refused with the right
status, leaving nothing of the request in the reply or the logs."""
import http.client
import json
import logging
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from ragbook.serving.app import RagServer, pipeline_for  # noqa: E402
from ragbook.serving.policy import Policy, Refused, narrow_scope  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REFUND = "how long is the refund window for annual contracts?"
INTERNAL = "how many days of grace extension may a billing agent grant on an overdue invoice?"
MARKER = "zq-marker-7731"       # planted in refused requests: must show up nowhere


def article_names():
    return tuple(sorted(p.stem for p in (ROOT / "data" / "helpcentre" / "articles")
                        .glob("*.md")))


@pytest.fixture(scope="module")
def index(article_index):
    return article_index(article_names())


@pytest.fixture(scope="module")
def pipeline(index):
    return pipeline_for(index)


@pytest.fixture(scope="module")
def server(pipeline):
    with RagServer(pipeline) as running:
        yield running


@pytest.fixture(scope="module")
def public(pipeline):
    """A server whose scope is the public articles only."""
    with RagServer(pipeline, scope={"access": ["public"]}) as running:
        yield running


def call(server, method, path, body=None, headers=None, raw=None):
    """(status, headers, text) of one request over a fresh connection."""
    host, port = server.base_url.split("//")[1].rstrip("/").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    sent = {"Content-Type": "application/json"} if body is not None else {}
    sent.update(headers or {})
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    conn.request(method, path, data, sent)
    reply = conn.getresponse()
    out = reply.status, dict(reply.getheaders()), reply.read().decode()
    conn.close()
    return out


def same(result: dict) -> dict:
    """A result as JSON carries it, without what differs between two runs of one question:
    the timings."""
    result = json.loads(json.dumps(result))
    return {**result, "trace": [{**s, "seconds": None} for s in result["trace"]]}


def events(text: str) -> list[tuple[str, dict]]:
    out = []
    for block in text.strip().split("\n\n"):
        kind = re.search(r"^event: (.*)$", block, re.M)[1]
        out.append((kind, json.loads(re.search(r"^data: (.*)$", block, re.M)[1])))
    return out


# -- answers ---------------------------------------------------------------------------------
def test_ask_answers_what_pipeline_asks_on_every_dev_question(server, pipeline, hc):
    """Every help-centre dev question: the server's JSON is ``Pipeline.ask(q).to_dict()``,
    answer, escalation, sources, candidates and trace (less its timings) alike."""
    questions = hc.split("dev")
    assert len(questions) >= 70
    escalated = 0
    for q in questions:
        status, _, text = call(server, "POST", "/ask", {"question": q.text})
        assert status == 200, text
        served = json.loads(text)
        assert same(served) == same(pipeline.ask(q.text).to_dict()), q.id
        escalated += served["escalated"]
    assert 0 < escalated < len(questions)   # both kinds of result went through


def test_stream_sends_verified_sentences_then_the_same_result(server, pipeline, hc):
    """``/stream``: 'sentence' events whose text joined is the answer, then one 'result'
    event equal to ``Pipeline.ask``'s — for answered and escalated questions alike."""
    kinds = set()
    for q in [*hc.split("dev")[:12], "what is the capital of mongolia's moon base?"]:
        text = q if isinstance(q, str) else q.text
        status, headers, body = call(server, "POST", "/stream", {"question": text})
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        got = events(body)
        assert [k for k, _ in got[:-1]] == ["sentence"] * (len(got) - 1) and \
            got[-1][0] == "result", body
        result = got[-1][1]
        assert same(result) == same(pipeline.ask(text).to_dict())
        assert "".join(d["text"] for _, d in got[:-1]) == (result["answer"] or "")
        kinds.add(result["escalated"])
    assert kinds == {True, False}


class Quoting:
    """A scripted chat backend (the model, not what is tested here): it answers with the
    first full sentence of passages 1 and 2, each citing its passage, sent 3 characters at
    a time — so a generative reader releases the first verified sentence before the last."""

    def reply(self, messages) -> str:
        from ragbook.text import sentences

        found = re.findall(r'<passage n="(\d+)" source="[^"]*">\n(.*?)\n</passage>',
                           messages[-1]["content"], re.DOTALL)
        said = {int(n): [x for x in sentences(text) if len(x.split()) >= 5
                         and x.endswith(".") and not x.startswith(("#", "-", "|"))]
                for n, text in found}
        return " ".join(f"{said[n][0].rstrip('.')} [{n}]." for n in (1, 2) if said.get(n))

    def generate(self, messages, max_new_tokens=None, stop=()):
        return self.reply(messages)

    def stream(self, messages, max_new_tokens=None, stop=()):
        text = self.reply(messages)
        for i in range(0, len(text), 3):
            yield text[i:i + 3]


def test_a_generative_answer_streams_sentence_by_sentence(index, hc):
    """With a generative reader, ``/stream`` sends each sentence as ``Pipeline.stream``
    releases it (several events, not one), then the ``Result`` ``Pipeline.ask`` gives."""
    from ragbook import GenerativeReader, HybridRetriever, Pipeline

    retriever = HybridRetriever.load(index)

    def pipeline():
        return Pipeline(retriever, reader=GenerativeReader(Quoting(), keep=3,
                                                           scored_citations=False))
    several = 0
    with RagServer(pipeline()) as server:
        for q in hc.split("dev")[:6]:
            got = events(call(server, "POST", "/stream", {"question": q.text})[2])
            streamed = pipeline().stream(q.text)
            pieces = list(streamed)
            assert [d["text"] for k, d in got if k == "sentence"] == pieces
            assert got[-1][0] == "result"
            assert same(got[-1][1]) == same(streamed.result.to_dict()) == \
                same(pipeline().ask(q.text).to_dict())
            several += len(pieces) >= 2
    assert several >= 1


def test_explain_gives_parts_that_add_up_for_each_source(server):
    status, _, text = call(server, "POST", "/explain", {"question": REFUND})
    assert status == 200, text
    data = json.loads(text)
    assert len(data["explanations"]) == len(data["result"]["sources"]) > 0
    for parts in data["explanations"]:
        first = parts[0]
        assert abs(sum(p["value"] for p in first["parts"]) - first["score"]) < 1e-9


def test_schema_and_page(server):
    status, headers, text = call(server, "GET", "/schema")
    schema = json.loads(text)
    assert status == 200 and schema["$defs"]["AskRequest"]["required"] == ["question"]
    assert set(schema["endpoints"]) >= {"POST /ask", "POST /stream", "POST /explain",
                                        "POST /document"}
    status, headers, page = call(server, "GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert '<label for="question">' in page and 'id="question"' in page
    assert not re.search(r"""(src|href)=["']https?://""", page)      # nothing from elsewhere
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'sha256-" in csp


# -- scope -----------------------------------------------------------------------------------
def test_narrow_scope_only_narrows():
    fixed = {"access": ["public", "customer"]}
    assert narrow_scope(fixed, None) == fixed
    assert narrow_scope(fixed, {"access": "public"}) == {"access": "public"}
    assert narrow_scope(fixed, {"plan": "all"}) == {"access": ["public", "customer"],
                                                    "plan": "all"}
    assert narrow_scope(None, {"access": "public"}) == {"access": "public"}
    op = {"access": {"$nin": ["internal"]}}
    assert narrow_scope(op, {"access": "public"}) == {"$and": [op, {"access": "public"}]}
    for wider in ({"access": "internal"}, {"access": ["public", "internal"]}):
        with pytest.raises(Refused) as err:
            narrow_scope(fixed, wider)
        assert err.value.status == 403
    for bad in ({}, {"$and": []}, {"access": {"$ne": "x"}}, {"access": []}, ["access"]):
        with pytest.raises(Refused) as err:
            narrow_scope(fixed, bad)
        assert err.value.status == 400


def test_a_request_can_narrow_the_scope_but_never_widen_it(public, pipeline):
    """The public server answers its internal runbook question from public pages only; a
    request narrowing the scope gets ``Pipeline.ask`` in that scope; one asking for internal
    pages — by scope, by a ``where`` field, by an operator — is refused before any search."""
    status, _, text = call(public, "POST", "/ask", {"question": INTERNAL})
    served = json.loads(text)
    assert status == 200
    hits = served["sources"] + served["candidates"]
    assert hits and all(h["metadata"]["access"] == "public" for h in hits)
    unscoped = pipeline.ask(INTERNAL).to_dict()
    assert any(h["metadata"]["access"] == "internal" for h in unscoped["candidates"])
    narrowed = {"question": REFUND, "scope": {"access": "public", "department": "billing"}}
    status, _, text = call(public, "POST", "/ask", narrowed)
    assert status == 200
    assert same(json.loads(text)) == same(pipeline.ask(REFUND, scope=narrowed["scope"])
                                          .to_dict())
    for body, code in (({"scope": {"access": "internal"}}, 403),
                       ({"scope": {"access": ["public", "internal"]}}, 403),
                       ({"scope": {"$and": [{"access": "internal"}]}}, 400),
                       ({"scope": {"access": {"$in": ["internal"]}}}, 400),
                       ({"where": {"access": "internal"}}, 400)):
        for path in ("/ask", "/stream", "/explain"):
            status, _, text = call(public, "POST", path,
                                   {"question": f"{INTERNAL} {MARKER}", **body})
            assert status == code, (path, body, text)
            assert MARKER not in text and "grace" not in text and "internal" not in text


def test_a_document_is_served_whole_within_the_scope_only(public, hc):
    """``/document``: a public article's text, stitched from its chunks, is the article's
    own (offsets included); an internal one is 404 with the very reply an unknown id gets,
    and a request scope reaching for it is 403."""
    status, _, text = call(public, "POST", "/document", {"doc_id": "billing-refund-policy"})
    assert status == 200
    segments = json.loads(text)["segments"]
    article = hc.doc("billing-refund-policy").text
    start, whole = segments[0]
    assert len(segments) == 1 and whole == article[start:start + len(whole)]
    assert article[:start].strip() == article[start + len(whole):].strip() == ""
    hidden = call(public, "POST", "/document", {"doc_id": "billing-internal-grace-extension"})
    absent = call(public, "POST", "/document", {"doc_id": "no-such-article"})
    assert hidden[0] == absent[0] == 404 and hidden[2] == absent[2]
    assert call(public, "POST", "/document", {"doc_id": "billing-internal-grace-extension",
                                              "scope": {"access": "internal"}})[0] == 403


def test_api_keys_each_fix_their_own_scope(pipeline):
    staff, guest = "k-staff-0123456789abcdef", "k-guest-0123456789abcdef"
    with RagServer(pipeline, keys={staff: None, guest: {"access": "public"}}) as server:
        assert call(server, "POST", "/ask", {"question": REFUND})[0] == 401
        assert call(server, "POST", "/ask", {"question": REFUND},
                    {"Authorization": "Bearer k-guest-wrong"})[0] == 401
        for key, seen in ((staff, "internal"), (guest, "public")):
            status, _, text = call(server, "POST", "/ask", {"question": INTERNAL},
                                   {"Authorization": f"Bearer {key}"})
            assert status == 200
            access = {h["metadata"]["access"] for h in json.loads(text)["candidates"]}
            assert seen in access and (key == staff or access == {"public"})
        status, _, text = call(server, "POST", "/ask", {"question": INTERNAL, "scope": {
            "access": "internal"}}, {"Authorization": f"Bearer {guest}"})
        assert status == 403 and "grace" not in text


# -- hostile requests ------------------------------------------------------------------------
def test_hostile_requests_are_refused_and_leave_no_trace(pipeline):
    """Each refusal has its status and a message saying what to do; neither the reply nor
    any log line (uvicorn's access log on) holds the question the request carried."""
    with RagServer(pipeline, scope={"access": ["public"]}, log_level="debug",
                   max_body_bytes=2048) as server:
        seen = []

        class Keep(logging.Handler):
            def emit(self, record):
                seen.append(self.format(record))

        keep = Keep(logging.DEBUG)
        names = ("", "uvicorn", "uvicorn.error", "uvicorn.access", "ragbook")
        for name in names:
            logging.getLogger(name).addHandler(keep)
        try:
            ask = {"question": f"{INTERNAL} {MARKER}"}
            port = server.policy.port
            cases = [
                (421, dict(body=ask, headers={"Host": f"evil.example:{port}"})),
                (421, dict(body=ask, headers={"Host": f"127.0.0.1:{port + 1}"})),
                (403, dict(body=ask, headers={"Origin": "https://evil.example"})),
                (403, dict(body=ask, headers={"Origin": "http://127.0.0.1.evil.example"})),
                (415, dict(body=ask, headers={"Content-Type": "text/plain"})),
                (413, dict(body={**ask, "pad": "x" * 4096})),
                (431, dict(body=ask, headers={"X-Pad": "y" * 9000})),
                (431, dict(body=ask, headers={"X-Pad": "y" * 40000})),
                (403, dict(body={**ask, "scope": {"access": "internal"}})),
                (400, dict(body={**ask, "history": [{"role": "user", "content": MARKER}]})),
                (400, dict(raw=f"not json {MARKER}".encode(), headers={
                    "Content-Type": "application/json"})),
            ]
            for code, kw in cases:
                status, _, text = call(server, "POST", "/ask", **kw)
                assert status == code, (code, text)
                assert MARKER not in text and "grace" not in text, text
            # a chunked body is counted as it arrives: over the cap is 413 all the same
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                         b"application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(4):
                sock.sendall(b"400\r\n" + b" " * 1024 + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 413")
            sock.close()
            # and a loopback page's own request is served
            status, _, _ = call(server, "POST", "/ask", {"question": REFUND},
                                {"Origin": f"http://127.0.0.1:{port}"})
            assert status == 200
        finally:
            for name in names:
                logging.getLogger(name).removeHandler(keep)
        assert any("POST /ask" in line for line in seen), seen   # the access log was on
        assert not [line for line in seen if MARKER in line or "grace" in line]


def test_deadline_and_connection_cap(pipeline):
    class Slow(type(pipeline)):
        """The same pipeline, 0.3 s slower to prepare: a warm cache cannot make either
        endpoint beat the 0.1 ms deadline, so the test does not race the machine."""
        def prepare(self, *args, **kwargs):
            time.sleep(0.3)
            return super().prepare(*args, **kwargs)

    slow = Slow(pipeline.retriever, reader=pipeline.reader)
    with RagServer(slow, deadline=1e-4) as server:
        status, _, text = call(server, "POST", "/ask", {"question": REFUND})
        assert status == 503 and "deadline" in text
        status, _, text = call(server, "POST", "/stream", {"question": REFUND})
        assert status == 503 and "deadline" in text
    with RagServer(pipeline, max_connections=1, max_waiting=1) as server:
        idle = [socket.create_connection(("127.0.0.1", server.policy.port)) for _ in range(2)]
        time.sleep(0.3)
        try:                       # one connection beyond max_connections + max_waiting
            assert call(server, "GET", "/schema")[0] == 503
        finally:
            for sock in idle:
                sock.close()
        time.sleep(0.3)
        assert call(server, "GET", "/schema")[0] == 200


def test_idle_and_slow_clients_are_cut_so_they_cannot_fill_the_cap(pipeline):
    """A connection that sends no head (or half of one) is answered 408 at header_timeout
    and closed, freeing its slot; a body that stalls is 408 at request_timeout."""
    with RagServer(pipeline, max_connections=1, max_waiting=1, header_timeout=1.0,
                   request_timeout=1.0) as server:
        port = server.policy.port
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)
        half = socket.create_connection(("127.0.0.1", port), timeout=10)
        half.sendall(b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.3)
        assert call(server, "GET", "/schema")[0] == 503          # the cap is full ...
        for sock in (idle, half):
            assert sock.recv(4096).startswith(b"HTTP/1.1 408")  # ... until the deadline
            sock.close()
        time.sleep(0.2)
        assert call(server, "GET", "/schema")[0] == 200
        slow = socket.create_connection(("127.0.0.1", port), timeout=10)
        slow.sendall(b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                     b"application/json\r\nContent-Length: 100\r\n\r\n{\"quest")
        reply, until = b"", time.monotonic() + 10
        while b"request_timeout" not in reply and time.monotonic() < until:
            reply += slow.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408") and b"request_timeout" in reply
        slow.close()


def test_a_settings_file_serves_what_ask_settings_answers(index, tmp_path):
    """``--settings`` (``pipeline_for``): the server asks with the tuned settings — here BM25
    alone — exactly as ``Pipeline(**load_settings(...))`` does."""
    from ragbook import HybridRetriever, Pipeline, load_settings, save_settings
    from ragbook.tuning import search_space

    retriever = HybridRetriever.load(index)
    chosen = next(s for s in search_space(retriever) if s.name == "bm25")
    path = save_settings(tmp_path / "tuned.json", chosen, retriever)
    tuned = Pipeline(**load_settings(path, retriever))
    with RagServer(pipeline_for(index, path)) as server:
        for question in (REFUND, INTERNAL):
            served = json.loads(call(server, "POST", "/ask", {"question": question})[2])
            assert same(served) == same(tuned.ask(question).to_dict())
            assert served["confidence_kind"] == tuned.confidence_kind != "cosine"


def test_settings_are_checked():
    with pytest.raises(ValueError, match="not both"):
        Policy(scope={"access": "public"}, keys={"k" * 16: None})
    with pytest.raises(ValueError, match="16 characters"):
        Policy(keys={"short": None})
    with pytest.raises(ValueError, match="deadline"):
        Policy(deadline=0)


# -- the command line ------------------------------------------------------------------------
def test_ragbook_serve_errors_are_one_line(tmp_path, capsys):
    from ragbook.cli import main

    assert main(["serve", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ragbook: error: ") and "ragbook index SRC --out" in err
    assert "\n" not in err
    assert main(["serve", str(tmp_path), "--scope", "access"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err
    assert main(["serve", str(tmp_path), "--scope", "a=x", "--scope", "a=y"]) == 2
    assert "names a KEY twice" in capsys.readouterr().err


def test_ragbook_serve_starts_a_server_in_its_scope(index, tmp_path):
    """``python -m ragbook serve INDEX --port 0 --scope access=public`` says where it serves
    and serves there, in that scope; Ctrl-C (SIGINT) stops it."""
    proc = subprocess.Popen([sys.executable, "-m", "ragbook", "serve", str(index), "--port",
                             "0", "--scope", "access=public"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        url = re.search(r"at (http://127\.0\.0\.1:\d+/)", line)
        assert url and '{"access": "public"}' in line, line
        host, port = url[1][7:-1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("POST", "/ask", json.dumps({"question": INTERNAL, "scope": {
            "access": "internal"}}), {"Content-Type": "application/json"})
        assert conn.getresponse().status == 403
    finally:
        proc.send_signal(2)
        assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("raw", [b"[" * 10_000, b'{"question": "refund window", "scope": ' +
                                 b'{"access": "public", "x\\ud800": "public"}}',
                                 b'{"question": "refund window", "scope": {"access": "\\udc00"}}'])
def test_a_body_nested_past_python_or_holding_a_lone_surrogate_is_a_400_json_error(server, raw):
    """Both once gave a 500 with a traceback in the log (RecursionError is not a
    ValueError; a surrogate in the scope failed only when the reply was encoded) and /stream
    a 200 cut off mid-body."""
    for path in ("/ask", "/stream", "/explain"):
        status, headers, text = call(server, "POST", path, raw=raw,
                                     headers={"Content-Type": "application/json"})
        assert status == 400 and headers["content-type"].startswith("application/json"), \
            (path, status, text)
        assert json.loads(text)["error"]["message"]


@pytest.mark.parametrize("method, path, code", [("GET", "/ask", 405), ("GET", "/nope", 404),
                                                ("POST", "/nope", 404)])
def test_a_wrong_path_or_method_is_refused_in_the_json_error_shape(server, method, path, code):
    status, headers, text = call(server, method, path, {} if method == "POST" else None)
    assert status == code and headers["content-type"].startswith("application/json"), text
    assert "GET /schema" in json.loads(text)["error"]["message"]      # where to look
    assert "nope" not in text                                         # nothing echoed
