"""``ChatServer``: any ``ragbook.llm`` backend served over the OpenAI chat-completions
protocol on localhost — what the tests use to check ``OpenAICompatibleLLM`` against a real
HTTP server, and a quick way to share one loaded model between notebooks.

>>> with ChatServer(get_llm()) as server:                       # doctest: +SKIP
...     OpenAICompatibleLLM(server.base_url, "local").generate(messages)
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import threading
import time
import warnings
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .llm import _check, _preview

__all__ = ["ChatServer"]


class _BadRequest(ValueError):
    """A request the server refuses: ``status`` and the message sent back as JSON."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.kind = status, kind


def _is_loopback(host: str) -> bool:
    """``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:                       # a host name, or "" (every interface)
        return False


def _parse_request(body: bytes) -> tuple[list[dict], int | None, list[str]]:
    """(messages, max_tokens, stop) of a chat-completions request body; ``_BadRequest`` (400)
    naming the field when it is not one."""
    try:
        req = json.loads(body)
    except ValueError as err:
        raise _BadRequest(400, f"the body is not JSON ({err}); send a chat-completions request, "
                               "e.g. {\"messages\": [{\"role\": \"user\", "
                               "\"content\": \"hi\"}]}") from err
    if not isinstance(req, dict) or not isinstance(req.get("messages"), list) \
            or not all(isinstance(m, dict) for m in req["messages"]):
        raise _BadRequest(400, "'messages' must be a list of {'role': ..., 'content': ...} "
                               f"objects, got {_preview(json.dumps(req), 120)}")
    try:
        messages = _check(req["messages"])
    except ValueError as err:
        raise _BadRequest(400, str(err)) from err
    max_tokens, stop = req.get("max_tokens"), req.get("stop")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or max_tokens < 1):
        raise _BadRequest(400, f"'max_tokens' must be an integer >= 1 or null, got {max_tokens!r}")
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
        raise _BadRequest(400, "'stop' must be a string, a list of strings or null, got "
                               f"{req['stop']!r}")
    return messages, max_tokens, stop


def _completion(text: str, model: str) -> dict:
    """A chat-completion reply carrying ``text``."""
    return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


class ChatServer:
    """Serve ``llm`` at ``http://host:port/v1/chat/completions`` (the OpenAI protocol's
    non-streaming subset) from a background thread. ``port=0`` picks a free port.

    Errors come back as OpenAI-style JSON (``{"error": {"message", "type"}}``): 400 for a
    malformed request, 401 without ``Authorization: Bearer <api_key>`` (when ``api_key`` is
    set), 404 for another path, 413 for a body over ``max_request_bytes`` (not read), 500
    when the backend raises — sent with ``x-should-retry: false``, since a greedy model fails
    the same way again and a retrying client would only run it again. Serving on anything
    but a loopback address warns: the model would answer anyone who can reach the port.

    >>> with ChatServer(LocalLLM()) as server:          # doctest: +SKIP
    ...     OpenAICompatibleLLM(server.base_url, "local").generate(msgs)
    """

    def __init__(self, llm, host: str = "127.0.0.1", port: int = 0, model_name: str = "local",
                 max_request_bytes: int = 1_000_000, api_key: str | None = None):
        if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) \
                or max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be an int >= 1, got {max_request_bytes!r}; "
                             "e.g. max_request_bytes=1_000_000")
        if not _is_loopback(host):
            warnings.warn(f"ChatServer host={host!r} is not a loopback address: anyone who can "
                          "reach this port can use the model. Use host='127.0.0.1' unless you "
                          "mean it (and then set api_key=)", UserWarning, stacklevel=2)
        self.llm, self.model_name = llm, model_name
        self.max_request_bytes, self.api_key = max_request_bytes, api_key
        self._lock = threading.Lock()  # one generation at a time: the model is not re-entrant
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The server's OpenAI-compatible root, ``http://127.0.0.1:<port>/v1``: give it to
        ``OpenAICompatibleLLM(base_url=...)``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _authorized(self, header: str | None) -> bool:
        if self.api_key is None:
            return True
        return hmac.compare_digest((header or "").encode(), f"Bearer {self.api_key}".encode())

    def _answer(self, path: str, headers, read) -> dict:
        """The reply to one POST (``read(n)`` reads the body); ``_BadRequest`` for a refusal."""
        try:
            length = int(headers.get("Content-Length", 0))
        except ValueError:
            raise _BadRequest(400, "Content-Length must be an integer, got "
                                   f"{headers['Content-Length']!r}") from None
        if length > self.max_request_bytes:
            raise _BadRequest(413, f"the request has {length} bytes, over max_request_bytes="
                                   f"{self.max_request_bytes}; send fewer or shorter messages")
        body = read(max(length, 0))
        if path.rstrip("/") != "/v1/chat/completions":
            raise _BadRequest(404, f"no route {path}; POST to /v1/chat/completions")
        if not self._authorized(headers.get("Authorization")):
            raise _BadRequest(401, "missing or wrong API key; send "
                                   "'Authorization: Bearer <api_key>'")
        messages, max_tokens, stop = _parse_request(body)
        try:
            with self._lock:
                text = self.llm.generate(messages, max_new_tokens=max_tokens, stop=stop)
        except Exception as err:  # any backend failure: a 500, not a dropped connection
            raise _BadRequest(500, f"the backend failed: {type(err).__name__}: {err}",
                              "server_error") from err
        return _completion(text, self.model_name)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 60                     # seconds a client may stall mid-request

            def log_message(self, *args):  # keep notebooks and test output quiet
                pass

            def _send(self, code: int, body: dict, headers: Mapping[str, str] | None = None):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                try:
                    reply = server._answer(self.path, self.headers, self.rfile.read)
                except _BadRequest as err:
                    headers = {"x-should-retry": "false"} if err.status == 500 else {}
                    if err.status == 413:            # the body is left unread: end the connection
                        self.close_connection = True
                        headers = {"Connection": "close"}
                    error = {"error": {"message": str(err), "type": err.kind}}
                    return self._send(err.status, error, headers)
                self._send(200, reply)

        return Handler

    def start(self) -> ChatServer:
        """Serve in a background thread; returns self (``with ChatServer(...) as s`` calls it)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
