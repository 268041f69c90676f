"""A streamed reply is bounded as a whole (issue 36, item 7): keep-alive comments do not
keep a caller waiting past ``STREAM_SECONDS``, an endless reply is cut at ``STREAM_CHARS``;
both are an ``LLMResponseError`` the pipeline escalates, not a hang."""
import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import ragbook.streaming as streaming
from ragbook.llm import LLMResponseError, LLMUnavailableError, OpenAICompatibleLLM

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
PIECE = b'data: ' + json.dumps({"choices": [{"delta": {"content": "x"}}]}).encode() + b"\n\n"


@contextlib.contextmanager
def endless_server(line: bytes):
    """Answers every POST with an event stream that sends ``line`` every 20 ms, for ever."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                while not stop.is_set():
                    self.wfile.write(line)
                    self.wfile.flush()
                    time.sleep(0.02)
            except OSError:
                pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        stop.set()
        httpd.shutdown()
        httpd.server_close()


def test_keep_alive_comments_do_not_wait_past_the_overall_deadline(monkeypatch):
    monkeypatch.setattr(streaming, "STREAM_SECONDS", 1.0)
    with endless_server(b": keep-alive\n\n") as url:
        llm = OpenAICompatibleLLM(base_url=url, model="m", max_retries=0, timeout=5)
        t = time.monotonic()
        with pytest.raises(LLMResponseError, match=r"did not finish within 1 s"):
            "".join(llm.stream(MESSAGES))
        assert time.monotonic() - t < 15


def test_an_endless_reply_is_cut_at_the_size_cap(monkeypatch):
    monkeypatch.setattr(streaming, "STREAM_CHARS", 5_000)
    with endless_server(PIECE) as url:
        llm = OpenAICompatibleLLM(base_url=url, model="m", max_retries=0, timeout=5)
        got = []
        with pytest.raises(LLMResponseError, match=r"over 5,000 characters"):
            for piece in llm.stream(MESSAGES):
                got.append(piece)
        assert len("".join(got)) < 5_000


# -- hostile endpoints (issue: overall deadline, bounded bodies, partial lines, deep JSON,
# -- Retry-After, redirects, content after finish_reason) -----------------------------------

OK = json.dumps({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}).encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@contextlib.contextmanager
def raw_endpoint(respond):
    """A raw-socket server: ``respond(sock, hit)`` writes whatever it likes (``hit`` counts
    the requests) for each POST; the URL it yields is a base_url."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    hits, stop = [0], threading.Event()

    def serve(sock):
        with sock, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(65536)
            head, _, rest = data.partition(b"\r\n\r\n")
            length = int(next((h.split(b":")[1] for h in head.split(b"\r\n")
                               if h.lower().startswith(b"content-length:")), b"0"))
            while len(rest) < length:
                rest += sock.recv(65536)
            hits[0] += 1
            respond(sock, hits[0], stop)

    def accept():
        with contextlib.suppress(OSError):
            while True:
                threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", hits
    finally:
        stop.set()
        listener.close()


def head(ctype: str, extra: str = "", length: int | None = None) -> bytes:
    size = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{size}\r\n{extra}\r\n".encode()


def drip(sock, hit, stop):          # a valid completion, one byte every 0.1 s
    body = b" " * 200 + OK
    sock.sendall(head("application/json", length=len(body)))
    for i in range(len(body)):
        if stop.is_set():
            return
        sock.sendall(body[i:i + 1])
        time.sleep(0.1)


def drip_head(sock, hit, stop):     # the status line and headers, one byte every 0.1 s
    data = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 200
    for i in range(len(data)):
        if stop.is_set():
            return
        sock.sendall(data[i:i + 1])
        time.sleep(0.1)


@pytest.mark.parametrize("respond", [drip, drip_head], ids=["body", "headers"])
def test_generate_ends_within_timeout_times_attempts_however_slowly_the_server_drips(respond):
    with raw_endpoint(respond) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=0.5, max_retries=1)
        t = time.monotonic()
        with pytest.raises(LLMUnavailableError, match=r"within 1 s.*raise timeout="):
            llm.generate(MESSAGES)
        assert time.monotonic() - t < 3


def endless(ctype: str, prefix: bytes = b""):
    def respond(sock, hit, stop):
        sock.sendall(head(ctype) + chunk(prefix))
        while not stop.is_set():
            sock.sendall(chunk(b" " * 8192))
    return respond


@pytest.mark.parametrize("ctype, how", [("application/json", "generate"),
                                        ("application/json", "stream"),
                                        ("text/event-stream", "stream")])
def test_an_endless_body_or_line_is_cut_at_the_size_cap(monkeypatch, ctype, how):
    monkeypatch.setattr(streaming, "STREAM_CHARS", 50_000)
    with raw_endpoint(endless(ctype, b"data: ")) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        with pytest.raises(LLMResponseError, match=r"over 50,000 characters"):
            "".join(getattr(llm, how)(MESSAGES))


def test_a_compressed_body_is_counted_after_decompression(monkeypatch):
    import gzip

    monkeypatch.setattr(streaming, "STREAM_CHARS", 100_000)
    bomb = gzip.compress(b" " * 5_000_000 + OK)           # about 5 KB on the wire

    def respond(sock, hit, stop):
        sock.sendall(head("application/json", "Content-Encoding: gzip\r\n", len(bomb)) + bomb)

    with raw_endpoint(respond) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        with pytest.raises(LLMResponseError, match=r"over 100,000 characters"):
            llm.generate(MESSAGES)


def test_a_partial_event_line_trickling_in_is_cut_at_the_stream_deadline(monkeypatch):
    monkeypatch.setattr(streaming, "STREAM_SECONDS", 1.0)

    def respond(sock, hit, stop):
        sock.sendall(head("text/event-stream") + chunk(b": keep"))
        while not stop.is_set():
            sock.sendall(chunk(b"a"))
            time.sleep(0.1)

    with raw_endpoint(respond) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        t = time.monotonic()
        with pytest.raises(LLMResponseError, match=r"did not finish within 1 s"):
            "".join(llm.stream(MESSAGES))
        assert time.monotonic() - t < 5


def sends(*bodies: bytes, ctype: str = "application/json"):
    def respond(sock, hit, stop):
        body = bodies[min(hit, len(bodies)) - 1]
        sock.sendall(body if body.startswith(b"HTTP/") else head(ctype, length=len(body)) + body)
    return respond


@pytest.mark.parametrize("body, ctype, how", [
    (b"[" * 100_000, "application/json", "generate"),
    (b'{"choices":' + b"[" * 100_000, "application/json", "generate"),
    (b"data: " + b"[" * 100_000 + b"\n\n", "text/event-stream", "stream")],
    ids=["array", "in-object", "event"])
def test_deeply_nested_json_is_a_response_error_not_a_recursion_error(body, ctype, how):
    with raw_endpoint(sends(body, ctype=ctype)) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        with pytest.raises(LLMResponseError, match="chat-completion|chat completion"):
            "".join(getattr(llm, how)(MESSAGES))


BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        b"Content-Length: 28\r\nRetry-After: %s\r\n\r\n" b'{"error":{"message":"busy"}}')


def test_a_long_retry_after_is_not_slept_past_the_deadline_and_a_short_one_is_retried():
    with raw_endpoint(sends(BUSY % b"50")) as (url, hits):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=1, max_retries=1)
        t = time.monotonic()
        with pytest.raises(LLMResponseError, match=r"HTTP 503.*retry after 50 s"):
            llm.generate(MESSAGES)
        assert time.monotonic() - t < 3
    with raw_endpoint(sends(BUSY % b"0", OK)) as (url, hits):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=1, max_retries=1)
        assert llm.generate(MESSAGES) == "fine" and hits[0] == 2


def test_a_redirect_is_named_and_not_followed():
    def respond(sock, hit, stop):
        sock.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://localhost:9/v1/"
                     b"chat/completions\r\nContent-Length: 0\r\n\r\n")

    with raw_endpoint(respond) as (url, hits):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=1, max_retries=1)
        with pytest.raises(LLMResponseError, match=r"HTTP 307.*redirect.*localhost:9.*base_url"):
            llm.generate(MESSAGES)
        assert hits[0] == 1


def test_a_stream_ends_at_the_first_choice_finish_reason():
    events = (b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
              b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n'
              b'data: {"choices":[{"delta":{"content":"AFTER-FINISH"}}]}\n\n')
    with raw_endpoint(sends(events, ctype="text/event-stream")) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        assert "".join(llm.stream(MESSAGES)) == "hi"


def test_event_lines_split_on_any_break_across_chunk_boundaries():
    chunks = [b"data: a\r", b"\ndata: b\rdata: c", b"\xc3", b"\xa9\n", b"tail"]
    assert list(streaming.split_lines(chunks)) == ["data: a", "data: b", "data: cé", "tail"]


@pytest.mark.parametrize("body, said", [
    (b'data: {"choices":[{"delta":{"content":"Thirty days \xff\xfe is the window"}}]}\n\n'
     b"data: [DONE]\n\n", "not UTF-8"),
    (b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
     b'data: {"choices": [{"delta": {"content": "Refunds are', "cut off in the middle"),
], ids=["not-utf8", "cut-mid-event"])
def test_a_reply_that_is_not_utf8_or_stops_inside_an_event_is_named_for_what_it_is(body, said):
    """Bytes that are not UTF-8 were passed on as U+FFFD inside the answer; a stream cut
    inside an event was reported as "not a chat-completion chunk" (the hostile probe)."""
    with raw_endpoint(sends(body, ctype="text/event-stream")) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        with pytest.raises(LLMResponseError, match=said):
            "".join(llm.stream(MESSAGES))


def test_an_event_of_several_data_lines_is_joined_as_the_event_stream_format_says():
    body = (b'data: {"choices": [{"delta":\ndata: {"content": "Thirty days."}}]}\n\n'
            b"data: [DONE]\n\n")
    with raw_endpoint(sends(body, ctype="text/event-stream")) as (url, _):
        llm = OpenAICompatibleLLM(base_url=url, model="m", timeout=5, max_retries=0)
        assert "".join(llm.stream(MESSAGES)) == "Thirty days."
