"""``ChatServer``: any ``ragbook.llm`` backend served over the OpenAI chat-completions
protocol on localhost — what the tests use to check ``OpenAICompatibleLLM`` against a real
HTTP server, and a quick way to share one loaded model between notebooks.

>>> with ChatServer(get_llm()) as server:                       # doctest: +SKIP
...     OpenAICompatibleLLM(server.base_url, "local").generate(messages)
"""
from __future__ import annotations

import hmac
import json
import socket
import threading
import time
import warnings
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from ..llm import check_messages, preview
from ..streaming import stream_reply
from .guards import (
    LINGER_S,
    CappedServer,
    DeadlineExceeded,
    DeadlineReader,
    check_allowed_hosts,
    check_allowed_origins,
    check_positive,
    is_loopback,
    split_host,
)

__all__ = ["ChatServer"]

#: the most stop strings a request may carry, and the longest one: each is checked against
#: the reply as it grows, and the local model compiles each against its whole vocabulary
MAX_STOPS, MAX_STOP_CHARS = 16, 256


class _BadRequest(ValueError):
    """A request the server refuses: ``status`` and the message sent back as JSON; ``close``
    when the body was left unread (the connection is then ended)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 close: bool = False):
        super().__init__(message)
        self.status, self.kind, self.close = status, kind, close


def _parse_request(body: bytes) -> tuple[list[dict], int | None, list[str], bool]:
    """(messages, max_tokens, stop, stream) of a chat-completions request body;
    ``_BadRequest`` (400) naming the field when it is not one."""
    try:
        req = json.loads(body)
    except (ValueError, RecursionError) as err:      # RecursionError: nested past Python
        raise _BadRequest(400, f"the body is not JSON ({type(err).__name__}: {err}); send a "
                               "chat-completions request, e.g. {\"messages\": "
                               "[{\"role\": \"user\", \"content\": \"hi\"}]}") from err
    if not isinstance(req, dict) or not isinstance(req.get("messages"), list) \
            or not all(isinstance(m, dict) for m in req["messages"]):
        raise _BadRequest(400, "'messages' must be a list of {'role': ..., 'content': ...} "
                               f"objects, got {preview(json.dumps(req), 120)}")
    try:
        messages = check_messages(req["messages"])
    except ValueError as err:
        raise _BadRequest(400, str(err)) from err
    max_tokens, stop = req.get("max_tokens"), req.get("stop")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                   or max_tokens < 1):
        raise _BadRequest(400, f"'max_tokens' must be an integer >= 1 or null, got {max_tokens!r}")
    stop = [stop] if isinstance(stop, str) else ([] if stop is None else stop)
    if not isinstance(stop, list) or not all(isinstance(x, str) for x in stop):
        raise _BadRequest(400, "'stop' must be a string, a list of strings or null, got "
                               f"{preview(repr(req['stop']), 120)}")
    if len(stop) > MAX_STOPS or any(len(x) > MAX_STOP_CHARS for x in stop):
        raise _BadRequest(400, f"'stop' has {len(stop)} strings, the longest of "
                               f"{max(map(len, stop))} characters; send at most {MAX_STOPS}, "
                               f"each of at most {MAX_STOP_CHARS} characters")
    stream = req.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise _BadRequest(400, f"'stream' must be true, false or null, got {stream!r}")
    return messages, max_tokens, stop, bool(stream)


def _completion(text: str, model: str) -> dict:
    """A chat-completion reply carrying ``text``."""
    return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}


def _chunk(text: str | None, model: str, started: int) -> bytes:
    """One server-sent event of a streamed reply: ``text`` as a ``chat.completion.chunk``
    delta, or (``text=None``) the closing chunk with ``finish_reason: "stop"``."""
    delta = {} if text is None else {"role": "assistant", "content": text}
    chunk = {"id": f"chatcmpl-{started}", "object": "chat.completion.chunk",
             "created": started // 10**9, "model": model,
             "choices": [{"index": 0, "delta": delta,
                          "finish_reason": None if text is not None else "stop"}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


class _Stream:
    """A streamed reply being generated: iterate for its text pieces. The first piece is
    made before any header goes out, so a backend that fails at once is still a 500; the
    generation lock is held until the stream is exhausted or ``close``d."""

    def __init__(self, server: ChatServer, messages, max_tokens, stop):
        self._lock = server._lock
        self._lock.acquire()
        try:
            self._pieces = stream_reply(server.llm, messages, max_tokens, stop)
            self._first = next(self._pieces, None)
        except BaseException:
            self._lock.release()
            raise
        self._open = True

    def __iter__(self):
        if self._first is not None:
            yield self._first
        yield from self._pieces

    def close(self) -> None:
        if self._open:
            self._open = False
            try:
                close = getattr(self._pieces, "close", None)
                if close is not None:
                    close()
            finally:
                self._lock.release()


class ChatServer:
    """Serve ``llm`` at ``http://host:port/v1/chat/completions`` (the OpenAI protocol's
    chat completions, streamed as server-sent events when a request says ``"stream": true``:
    pieces as the backend's ``stream`` writes them, one piece for a backend with only
    ``generate``) from a background thread. ``port=0`` picks a free port.

    Errors come back as OpenAI-style JSON (``{"error": {"message", "type"}}``): 400 for a
    malformed request, 401 without ``Authorization: Bearer <api_key>`` (when ``api_key`` is
    set), 404 for another path, 413 for a body over ``max_request_bytes`` (not read), 500
    when the backend raises — sent with ``x-should-retry: false``, since a greedy model fails
    the same way again and a retrying client would only run it again. Serving on anything
    but a loopback address warns: the model would answer anyone who can reach the port.

    Guards against web pages and stuck clients (each a constructor setting):

    - ``allowed_hosts``: the ``Host`` header must name this machine — ``localhost``,
      ``127.x.x.x`` or ``[::1]``, with this server's port or none (plus ``host`` itself when
      it is a specific address) — else 421: a DNS-rebinding page reaches the port under its
      own name. A tuple of extra names (no port) widens it; ``("*",)`` turns it off.
    - ``allowed_origins``: a request with an ``Origin`` header (a browser's) is served only
      from a loopback origin (``http://localhost:<any port>``, ...) or one listed here
      (``"https://app.example"``; ``("*",)`` for any), else 403.
    - POST bodies must be ``Content-Type: application/json`` (415): a cross-site form or
      ``text/plain`` "simple request" is refused, and a JSON one needs a CORS preflight,
      which this server does not grant.
    - ``Transfer-Encoding`` (chunked) bodies are refused with 411: send ``Content-Length``.
    - ``max_connections`` (default 16): requests served at once, each on a thread, the
      generating one included. A connection gets a thread only once its request line and
      headers (and a body of up to 64 KB) are in, so idle or stalled clients never hold one.
    - ``header_timeout`` (default 10 s): the request line and headers must arrive within it
      from the connection's start, else 408 and the connection is closed.
    - ``max_waiting`` (default 512): connections waiting at once — for their headers, or in
      the queue for a thread (first come first served); one more is answered 503
      (``Retry-After: 1``) at once and closed.
    - ``request_timeout`` (default 30 s): the whole request — line, headers and body — must
      arrive within it, else 408 and the connection is closed, however steadily the client
      trickles. Generation is not bounded by it.

    Invalid settings raise ``ValueError`` naming the value, the rule and an example.

    >>> with ChatServer(LocalLLM()) as server:          # doctest: +SKIP
    ...     OpenAICompatibleLLM(server.base_url, "local").generate(msgs)
    """

    def __init__(self, llm, host: str = "127.0.0.1", port: int = 0, model_name: str = "local",
                 max_request_bytes: int = 1_000_000, api_key: str | None = None,
                 allowed_hosts: tuple[str, ...] | None = None,
                 allowed_origins: tuple[str, ...] | None = None,
                 max_connections: int = 16, request_timeout: float = 30.0,
                 header_timeout: float = 10.0, max_waiting: int = 512):
        if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) \
                or max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be an int >= 1, got {max_request_bytes!r}; "
                             "e.g. max_request_bytes=1_000_000")
        self.max_connections = check_positive("max_connections", max_connections, int, "16")
        self.request_timeout = float(check_positive("request_timeout", request_timeout,
                                                     (int, float), "30.0"))
        self.header_timeout = float(check_positive("header_timeout", header_timeout,
                                                    (int, float), "10.0"))
        self.max_waiting = check_positive("max_waiting", max_waiting, int, "512")
        self.allowed_hosts = check_allowed_hosts(allowed_hosts)
        self.allowed_origins = check_allowed_origins(allowed_origins)
        if not is_loopback(host):
            warnings.warn(f"ChatServer host={host!r} is not a loopback address: anyone who can "
                          "reach this port can use the model. Use host='127.0.0.1' unless you "
                          "mean it (and then set api_key=)", UserWarning, stacklevel=2)
        self.llm, self.model_name = llm, model_name
        self.max_request_bytes, self.api_key = max_request_bytes, api_key
        self._hosts = {h.strip("[]").lower() for h in self.allowed_hosts or ()}
        if host and host.strip("[]") not in ("0.0.0.0", "::"):    # a specific address: its own
            self._hosts.add(host.strip("[]").lower())             # name is no rebinding
        self._origins = {o.rstrip("/").lower() for o in self.allowed_origins or ()}
        self._lock = threading.Lock()  # one generation at a time: the model is not re-entrant
        self._httpd = CappedServer((host, port), self._handler(), self)
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

    def _check_host(self, headers) -> None:
        """421 unless the one ``Host`` header names this machine (or an allowed name)."""
        if "*" in self._hosts:
            return
        port = str(self._httpd.server_address[1])
        values = headers.get_all("Host") or []
        parsed = split_host(values[0]) if len(values) == 1 else None
        if parsed is not None and parsed[1] in (None, port) \
                and (is_loopback(parsed[0]) or parsed[0] in self._hosts):
            return
        shown = values[0] if len(values) == 1 else values
        name = parsed[0] if parsed else "myhost.lan"
        raise _BadRequest(421, f"Host header {shown!r} is not this server: only localhost, "
                               f"127.0.0.1 or [::1] (with port {port} or none) are served, so "
                               "that a web page cannot reach the model by DNS rebinding; "
                               f"connect to http://127.0.0.1:{port}/v1, or construct "
                               f"ChatServer(..., allowed_hosts=({name!r},)) to serve that name "
                               "too")

    def _check_origin(self, headers) -> None:
        """403 when a browser sends the request from a page that is not local (or allowed)."""
        for origin in headers.get_all("Origin") or []:
            key = origin.strip().rstrip("/").lower()
            parts = urlsplit(key)
            netloc = split_host(parts.netloc) if parts.netloc else None
            if "*" in self._origins or key in self._origins or (
                    parts.scheme in ("http", "https") and netloc is not None
                    and is_loopback(netloc[0]) and not parts.path):
                continue
            raise _BadRequest(403, f"Origin {origin!r} is not a loopback origin: a web page from "
                                   "another site may not use this model. Call it from a script "
                                   "or notebook (no Origin header), or construct ChatServer(..., "
                                   f"allowed_origins=({origin.strip()!r},)) to allow that site")

    def _answer(self, path: str, headers, read) -> dict | _Stream:
        """The reply to one POST (``read(n)`` reads the body): a chat completion, or a
        ``_Stream`` when the request says ``"stream": true``; ``_BadRequest`` for a refusal."""
        if headers.get("Transfer-Encoding") is not None:
            raise _BadRequest(411, "Transfer-Encoding "
                                   f"{headers['Transfer-Encoding']!r} is not supported: send "
                                   "the body whole, with a Content-Length header", close=True)
        try:
            length = int(headers.get("Content-Length", 0))
            if length < 0:
                raise ValueError
        except ValueError:
            raise _BadRequest(400, "Content-Length must be an integer >= 0, got "
                                   f"{headers['Content-Length']!r}", close=True) from None
        if length > self.max_request_bytes:
            raise _BadRequest(413, f"the request has {length} bytes, over max_request_bytes="
                                   f"{self.max_request_bytes}; send fewer or shorter messages",
                              close=True)
        body = read(length)                  # read before refusing: no reset loses the answer
        self._check_host(headers)
        self._check_origin(headers)
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise _BadRequest(415, f"Content-Type must be application/json, got "
                                   f"{headers.get('Content-Type')!r}; send the chat-completions "
                                   "request as JSON with 'Content-Type: application/json'")
        if path.rstrip("/") != "/v1/chat/completions":
            raise _BadRequest(404, f"no route {path}; POST to /v1/chat/completions")
        if not self._authorized(headers.get("Authorization")):
            raise _BadRequest(401, "missing or wrong API key; send "
                                   "'Authorization: Bearer <api_key>'")
        messages, max_tokens, stop, stream = _parse_request(body)
        try:
            if stream:
                return _Stream(self, messages, max_tokens, stop)
            with self._lock:
                text = self.llm.generate(messages, max_new_tokens=max_tokens, stop=stop)
        except Exception as err:  # any backend failure: a 500, not a dropped connection
            raise _BadRequest(500, f"the backend failed: {type(err).__name__}: {err}",
                              "server_error") from err
        return _completion(text, self.model_name)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = None                   # the reader enforces request_timeout itself
            _linger = False

            def log_message(self, *args):  # keep notebooks and test output quiet
                pass

            def setup(self):
                super().setup()
                self.rfile.close()
                self.rfile = DeadlineReader(self.connection,
                                            server._httpd.take_head(self.connection))

            def handle_one_request(self):
                self.rfile.start(server.request_timeout)
                self.requestline, self.command, self.request_version = "", None, "HTTP/1.0"
                try:
                    super().handle_one_request()
                except DeadlineExceeded:
                    self.close_connection, self._linger = True, True
                    if self.request_version == "HTTP/0.9":
                        self.request_version = "HTTP/1.0"
                    error = {"error": {"message": "the request did not arrive whole within "
                                       f"request_timeout={server.request_timeout:g} s; send "
                                       "it at once (or construct ChatServer(..., "
                                       "request_timeout=...) with more time)",
                                       "type": "invalid_request_error"}}
                    try:
                        self._send(408, error, {"Connection": "close"})
                    except OSError:
                        pass

            def finish(self):
                try:
                    super().finish()
                    if self._linger:         # drain briefly so the close is not a reset
                        self.connection.shutdown(socket.SHUT_WR)
                        until = time.monotonic() + LINGER_S
                        while (left := until - time.monotonic()) > 0:
                            self.connection.settimeout(left)
                            if not self.connection.recv(65536):
                                break
                except OSError:
                    pass

            def _send(self, code: int, body: dict, headers: Mapping[str, str] | None = None):
                data = json.dumps(body).encode()
                self.connection.settimeout(server.request_timeout)   # bounds a stuck reader
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
                    if err.close:            # the body is left unread: end the connection
                        self.close_connection, self._linger = True, True
                        headers = {"Connection": "close"}
                    error = {"error": {"message": str(err), "type": err.kind}}
                    return self._send(err.status, error, headers)
                if isinstance(reply, _Stream):
                    return self._send_stream(reply)
                self._send(200, reply)

            def _send_stream(self, reply: _Stream):
                """Server-sent events, one ``chat.completion.chunk`` per piece as the backend
                writes it, then a ``finish_reason`` chunk and ``data: [DONE]``; the
                connection then closes (HTTP/1.0: no length is known in advance). A backend
                failing mid-stream gets an ``error`` event and no ``[DONE]``."""
                started, self.close_connection = time.time_ns(), True
                try:
                    self.connection.settimeout(server.request_timeout)  # bounds a stuck reader
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        for piece in reply:
                            self.wfile.write(_chunk(piece, server.model_name, started))
                    except OSError:
                        raise
                    except Exception as err:  # the backend failed after the 200 went out
                        error = {"error": {"message": f"the backend failed: "
                                           f"{type(err).__name__}: {err}", "type": "server_error"}}
                        self.wfile.write(b"data: " + json.dumps(error).encode() + b"\n\n")
                        return
                    self.wfile.write(_chunk(None, server.model_name, started))
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass                         # the client went away: stop generating
                finally:
                    reply.close()

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
