"""What a localhost HTTP server refuses, for ``ragbook.serving.ChatServer``: a ``Host`` or
``Origin`` that is not loopback (DNS rebinding, a cross-site page), more connections than its
cap (answered 503 from the accepting thread), and a request that does not arrive whole within
its deadline (a trickling or silent client, answered 408); and the checks of the settings
that configure those guards.

Why stalled clients cannot starve real ones: a connection gets a thread (one of
``max_connections``) only once its request line and headers have arrived whole. Until then
it waits in a gate — one thread and a selector for all of them, reading what they send —
and is answered 408 when its head is not in within ``header_timeout`` (or ``request_timeout``
when shorter). A body of up to 64 KB (a chat request) is read by the gate too, within
``request_timeout``, so a client that stalls mid-body holds no thread either. Connections
whose request is in queue, first come first served, for a free thread; only beyond
``max_waiting`` connections waiting at once is one refused (503). So 100 idle sockets cost
100 selector entries and no thread, and a well-formed request behind them is served as soon
as a thread is free."""
from __future__ import annotations

import ipaddress
import json
import math
import re
import selectors
import socket
import threading
import time
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["LINGER_S", "DeadlineExceeded", "DeadlineReader", "CappedServer", "is_loopback",
           "split_host", "check_allowed_hosts", "check_allowed_origins", "check_positive"]

LINGER_S = 0.5           # how long a refused connection is drained before it is closed
_MAX_LINGERING = 64      # refused sockets awaiting their close at once (beyond: closed at once)
_MAX_HEAD = 65536        # a request line and headers longer than this go to a thread (431/400)
_GATE_BODY = 65536       # bodies up to this are read whole by the gate (larger: by the thread)
_LENGTH = re.compile(rb"\ncontent-length[ \t]*:[ \t]*(\d{1,12})[ \t]*\r?\n", re.I)



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

    def __init__(self, sock: socket.socket, head: bytes = b""):
        self._sock, self._buf, self._deadline = sock, bytearray(head), math.inf

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
    """A ``ThreadingHTTPServer`` that serves at most ``chat.max_connections`` requests at
    once, each on a thread given only once its head has arrived (see the module notes); the
    others wait, up to ``chat.max_waiting`` at once; one more is answered 503 from the
    accepting thread and closed after a short drain."""

    request_queue_size = 1024   # the listen backlog (socketserver's 5 drops bursts' SYNs)

    def __init__(self, address, handler, chat):  # chat: the ChatServer (its settings)
        self._chat, self._active, self._count_lock = chat, 0, threading.Lock()
        self._lingering: list[tuple[float, socket.socket]] = []
        self._new: list[tuple[socket.socket, object]] = []      # accepted, not yet in the gate
        self._waiting: dict[socket.socket, list] = {}  # gate only: sock -> [addr, head, until]
        # (moves between these lists happen under _count_lock, so a waiting one is always counted)
        self._ready: list[tuple[socket.socket, object]] = []   # head in: waiting for a thread
        self._heads: dict[int, bytes] = {}                      # fileno -> head, for setup
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._stopping, self._gate = False, None
        super().__init__(address, handler)   # a failed bind calls server_close: all is closed
        self._gate = threading.Thread(target=self._run_gate, daemon=True, name="ragbook-gate")
        self._gate.start()

    @property
    def active_connections(self) -> int:
        """Requests being served now on a thread (the generating one included)."""
        return self._active

    @property
    def waiting_connections(self) -> int:
        """Connections waiting for their head to arrive or for a free thread."""
        with self._count_lock:
            return len(self._new) + len(self._waiting) + len(self._ready)

    def take_head(self, sock: socket.socket) -> bytes:
        """What the gate already read from ``sock`` (its request line and headers)."""
        with self._count_lock:
            return self._heads.pop(sock.fileno(), b"")

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # the wake-up pipe is full: the gate is awake anyway
            pass

    def _release(self) -> None:
        with self._count_lock:
            self._active -= 1
        self._wake()

    def process_request(self, request, client_address):
        """Hand ``request`` to the gate, or refuse it (503) when ``max_waiting`` wait."""
        with self._count_lock:
            full = len(self._new) + len(self._waiting) + len(self._ready) \
                >= self._chat.max_waiting
            if not full:
                self._new.append((request, client_address))
        if full:
            return self._refuse(request)
        self._wake()

    def process_request_thread(self, request, client_address):
        """Serve ``request`` (on its thread), then count its connection as gone."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    # -- the gate: one thread reading the heads of every waiting connection -------------------
    def _run_gate(self) -> None:
        while not self._stopping:
            head_s = min(self._chat.header_timeout, self._chat.request_timeout)
            now = time.monotonic()
            with self._count_lock:      # moved in one step: a waiting one is always counted
                new, self._new = self._new, []
                for sock, address in new:   # [address, bytes in, deadline, body deadline, body?]
                    self._waiting[sock] = [address, bytearray(), now + head_s,
                                           now + self._chat.request_timeout, False]
            for sock, _ in new:
                try:
                    sock.setblocking(False)
                    self._selector.register(sock, selectors.EVENT_READ)
                except (OSError, ValueError):
                    self._drop(sock)
            try:
                events = self._selector.select(timeout=0.1)
            except OSError:  # pragma: no cover - the selector was closed by server_close
                return
            for key, _ in events:
                if key.fileobj is self._wake_r:
                    try:
                        while self._wake_r.recv(4096):
                            pass
                    except OSError:
                        pass
                else:
                    self._receive(key.fileobj)
            self._expire()
            self._dispatch()

    def _drop(self, sock: socket.socket) -> None:
        self._waiting.pop(sock, None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError, OSError):
            pass
        sock.close()

    def _receive(self, sock: socket.socket) -> None:
        """Read what ``sock`` sent; move it to the ready queue once its head is whole."""
        entry = self._waiting.get(sock)
        if entry is None:
            return
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            return self._drop(sock)
        head = entry[1]
        head += data
        ends = [i + len(sep) for sep in (b"\r\n\r\n", b"\n\n") if (i := head.find(sep)) >= 0]
        if data and not ends and len(head) < _MAX_HEAD:
            return
        if data and ends:             # the head is in: wait for a small body too
            length = _LENGTH.search(b"\n" + head[:min(ends)])
            need = int(length[1]) if length else 0
            if need <= _GATE_BODY and len(head) - min(ends) < need:
                if not entry[4]:
                    entry[2], entry[4] = entry[3], True   # now the body's deadline applies
                return
        if not head:                  # closed without sending anything
            return self._drop(sock)
        with self._count_lock:        # a client that closed mid-head is answered by a thread
            self._waiting.pop(sock)
            self._ready.append((sock, entry[0]))
            self._heads[sock.fileno()] = bytes(head)
        self._selector.unregister(sock)

    def _expire(self) -> None:
        """Answer 408 to every waiting connection whose head (or small body) is late."""
        now = time.monotonic()
        late = [sock for sock, entry in self._waiting.items() if entry[2] <= now]
        chat = self._chat
        for sock in late:
            if self._waiting[sock][4]:
                name, seconds, what = "request_timeout", chat.request_timeout, "request body"
            else:
                name = "header_timeout" if chat.header_timeout <= chat.request_timeout \
                    else "request_timeout"
                seconds, what = getattr(chat, name), "request line and headers"
            reply = _error_bytes(408, "Request Timeout",
                                 f"the {what} did not arrive within {name}={seconds:g} s; send "
                                 f"the request at once (or construct ChatServer(..., "
                                 f"{name}=...) with more time)", "invalid_request_error")
            try:
                sock.send(reply)      # all it sent was read: the close is a clean FIN
            except OSError:
                pass
            self._drop(sock)

    def _dispatch(self) -> None:
        """Give free threads to ready connections, first come first served."""
        while True:
            with self._count_lock:
                if not self._ready or self._active >= self._chat.max_connections:
                    return
                sock, address = self._ready.pop(0)
                self._active += 1
            try:
                sock.setblocking(True)
                ThreadingHTTPServer.process_request(self, sock, address)
            except BaseException:
                with self._count_lock:
                    self._heads.pop(sock.fileno(), None)
                self._release()
                sock.close()

    def _refuse(self, request: socket.socket) -> None:
        cap = self._chat.max_waiting
        reply = _error_bytes(503, "Service Unavailable",
                             f"the server already has {cap} connections waiting "
                             f"(max_waiting={cap}); retry shortly, or construct "
                             f"ChatServer(..., max_waiting={2 * cap}) to queue more",
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
        """Close the listening socket, stop the gate, and close every socket still waiting
        or draining."""
        super().server_close()
        self._stopping = True
        self._wake()
        if self._gate is not None:
            self._gate.join(timeout=2)
        for _, sock in self._lingering:
            sock.close()
        self._lingering = []
        with self._count_lock:
            new, self._new, ready, self._ready = self._new, [], self._ready, []
            self._heads.clear()
        for sock in [s for s, _ in new + ready] + list(self._waiting):
            sock.close()
        self._waiting.clear()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
