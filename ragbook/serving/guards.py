"""What a localhost HTTP server refuses, for ``ragbook.serving.ChatServer``: a ``Host`` or
``Origin`` that is not loopback (DNS rebinding, a cross-site page), more connections than its
cap (answered 503 from the accepting thread), and a request that does not arrive whole within
its deadline (a trickling or silent client, answered 408); and the checks of the settings
that configure those guards."""
from __future__ import annotations

import ipaddress
import json
import math
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["LINGER_S", "DeadlineExceeded", "DeadlineReader", "CappedServer", "is_loopback",
           "split_host", "check_allowed_hosts", "check_allowed_origins", "check_positive"]

LINGER_S = 0.5           # how long a refused connection is drained before it is closed
_MAX_LINGERING = 64      # refused sockets awaiting their close at once (beyond: closed at once)



class DeadlineExceeded(Exception):
    """The client did not send its whole request within ``request_timeout`` seconds. Not an
    ``OSError``: ``BaseHTTPRequestHandler`` swallows socket timeouts without answering."""


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:                       # a host name, or "" (every interface)
        return False


def split_host(value: str) -> tuple[str, str | None] | None:
    """(host, port or None) of a ``Host`` header or an origin's netloc (``[::1]:8000``,
    ``localhost``); None when it is malformed. The host is lower-cased, brackets removed."""
    value = value.strip().lower()
    if value.startswith("["):                # an IPv6 literal: [::1] or [::1]:port
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        host, port = value.split(":")
    elif ":" in value:                       # a bare IPv6 address is not a valid Host
        return None
    else:
        host, port = value, None
    if not host or (port is not None and not port.isdigit()):
        return None
    return host, port


def _check_names(name: str, values, example: str, check) -> tuple[str, ...] | None:
    """``values`` (None, or a tuple/list/set of strings each passing ``check``) as a tuple;
    ``ValueError`` naming the setting, the rule and an example otherwise."""
    if values is None:
        return None
    if not isinstance(values, (tuple, list, set, frozenset)) \
            or not all(isinstance(v, str) for v in values):
        raise ValueError(f"{name} must be a tuple of strings (or None), got {values!r}; e.g. "
                         f"{name}=({example!r},)")
    values = tuple(v.strip() for v in values)
    for value in values:
        problem = check(value)
        if problem:
            raise ValueError(f"{name} entry {value!r} {problem}; e.g. {name}=({example!r},), "
                             f"or {name}=('*',) to allow any")
    return values


def _host_problem(value: str) -> str | None:
    """Why ``value`` is not an allowed host entry, or None when it is one (or ``*``)."""
    if value == "*":
        return None
    if not value or any(c in value for c in "/ \t@?#"):
        return "is not a host name or address (no scheme, path or port)"
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    if ":" in bare:
        try:
            ipaddress.IPv6Address(bare)
        except ValueError:
            return "is not a host name or address (give the name without ':port')"
    return None


def _origin_problem(value: str) -> str | None:
    """Why ``value`` is not an allowed origin entry, or None when it is one (or ``*``)."""
    if value == "*":
        return None
    parts = urlsplit(value.rstrip("/"))
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path \
            or parts.query or parts.fragment or split_host(parts.netloc) is None:
        return "is not an origin (scheme://host[:port], no path)"
    return None


def check_allowed_hosts(values) -> tuple[str, ...] | None:
    """A server's ``allowed_hosts`` setting checked: None, or host names or addresses with
    no scheme, path or port (``"*"``: any); ``ValueError`` naming the bad entry otherwise."""
    return _check_names("allowed_hosts", values, "myhost.lan", _host_problem)


def check_allowed_origins(values) -> tuple[str, ...] | None:
    """A server's ``allowed_origins`` setting checked: None, or origins
    (``scheme://host[:port]``, no path; ``"*"``: any); ``ValueError`` naming the bad entry
    otherwise."""
    return _check_names("allowed_origins", values, "https://app.example", _origin_problem)


def check_positive(name: str, value, kind, example: str):
    """``value`` when it is a ``kind`` above 0 (and finite); ``ValueError`` naming the setting
    ``name``, the rule and ``example`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, kind) \
            or (isinstance(value, float) and not math.isfinite(value)) or value <= 0:
        what = "an int >= 1" if kind is int else "a positive, finite number of seconds"
        raise ValueError(f"{name} must be {what}, got {value!r}; e.g. {name}={example}")
    return value


def _error_bytes(status: int, reason: str, message: str, kind: str) -> bytes:
    """A whole HTTP/1.0 error response, for answering without a request handler."""
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    head = (f"HTTP/1.0 {status} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n")
    return head.encode() + body


class DeadlineReader:
    """The handler's ``rfile``: reads the socket, but the whole request (line, headers and
    body) must arrive before ``start(seconds)``'s deadline — each ``recv`` waits only for the
    time left, so a client trickling one byte a second is still cut. ``DeadlineExceeded``
    when late."""

    def __init__(self, sock: socket.socket):
        self._sock, self._buf, self._deadline = sock, bytearray(), math.inf

    def start(self, seconds: float) -> None:
        """Start a request's clock: all of it must arrive within ``seconds`` from now."""
        self._deadline = time.monotonic() + seconds

    def _fill(self) -> bool:
        """Receive more bytes; False at the end of the stream."""
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded
        self._sock.settimeout(left)
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            raise DeadlineExceeded from None
        self._buf += data
        return bool(data)

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def readline(self, limit: int = -1) -> bytes:
        """One line, ``\\n`` included (at most ``limit`` bytes); shorter at the stream's end."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0 and (limit < 0 or end < limit):
                return self._take(end + 1)
            if 0 <= limit <= len(self._buf) or not self._fill():
                return self._take(len(self._buf) if limit < 0 else limit)

    def read(self, n: int | None = -1) -> bytes:
        """``n`` bytes (None or negative: to the stream's end); shorter at the stream's end."""
        while (n is None or n < 0 or len(self._buf) < n) and self._fill():
            pass
        return self._take(len(self._buf) if n is None or n < 0 else n)

    def close(self) -> None:
        """Drop what was received and not read (the socket is the handler's to close)."""
        self._buf.clear()


class CappedServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` that serves at most ``chat.max_connections`` connections at
    once: one more is answered 503 from the accepting thread (no thread is started for it)
    and closed after a short drain."""

    def __init__(self, address, handler, chat):  # chat: the ChatServer (its settings)
        self._chat, self._active, self._count_lock = chat, 0, threading.Lock()
        self._lingering: list[tuple[float, socket.socket]] = []
        super().__init__(address, handler)

    @property
    def active_connections(self) -> int:
        """Connections being served now (the generating one included)."""
        return self._active

    def _release(self) -> None:
        with self._count_lock:
            self._active -= 1

    def process_request(self, request, client_address):
        """Serve ``request`` on a thread of its own, or refuse it (503) when at the cap."""
        with self._count_lock:
            full = self._active >= self._chat.max_connections
            if not full:
                self._active += 1
        if full:
            return self._refuse(request)
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request, client_address):
        """Serve ``request`` (on its thread), then count its connection as gone."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _refuse(self, request: socket.socket) -> None:
        cap = self._chat.max_connections
        reply = _error_bytes(503, "Service Unavailable",
                             f"the server already has {cap} connections open "
                             f"(max_connections={cap}); retry shortly, or construct "
                             f"ChatServer(..., max_connections={2 * cap}) to serve more at once",
                             "server_error")
        try:
            request.setblocking(False)
            request.send(reply)                    # small: fits a fresh socket's send buffer
            request.shutdown(socket.SHUT_WR)
        except OSError:
            return request.close()
        # closed a little later (service_actions), after draining what the client sent, so
        # that unread request bytes do not turn the close into a reset that loses the 503
        self._lingering.append((time.monotonic() + LINGER_S, request))
        while len(self._lingering) > _MAX_LINGERING:
            self._lingering.pop(0)[1].close()

    def service_actions(self):
        """Between requests: close the refused sockets whose clients closed or whose drain
        time is over."""
        super().service_actions()
        now, keep = time.monotonic(), []
        for until, sock in self._lingering:
            try:
                while sock.recv(65536):
                    pass
                sock.close()                       # the client closed its side
            except BlockingIOError:
                if until > now:
                    keep.append((until, sock))
                else:
                    sock.close()
            except OSError:
                sock.close()
        self._lingering = keep

    def server_close(self):
        """Close the listening socket and every refused socket still draining."""
        super().server_close()
        for _, sock in self._lingering:
            sock.close()
        self._lingering = []
