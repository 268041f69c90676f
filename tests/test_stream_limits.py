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
from ragbook.llm import LLMResponseError, OpenAICompatibleLLM

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
