"""The HTTP/1.1 protocol ``ragbook serve`` runs under uvicorn: uvicorn's own, plus the two
guards that act on a connection before any request reaches the app — a request head that is
late (408), and one connection more than the server keeps open at once (503) — each
answered in the API's JSON error shape, as is a request the HTTP parser refuses (400: a
malformed line or header, a Content-Length sent twice, a bad chunk, a head too long), which
uvicorn alone answers in plain text."""
from __future__ import annotations

import json

from uvicorn.protocols.http.h11_impl import H11Protocol

from .guards import LINGER_S

__all__ = ["head_deadline"]


def _refusal(status: str, message: str, kind: str, extra: bytes = b"") -> bytes:
    """A whole JSON error response that closes its connection, for the protocol to write."""
    body = json.dumps({"error": {"message": message, "type": kind}}).encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + b"\r\n" + body


def head_deadline(seconds: float, max_open: int | None = None) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, but a connection whose request head (line and headers)
    has not arrived ``seconds`` after it opened — or after its previous response — is
    answered 408 and closed: an idle or trickling client cannot hold a place in the queue
    for ever (uvicorn alone waits for a first request for ever). A connection that would be
    open beyond ``max_open`` at once is answered 503 (JSON, ``Retry-After: 1``) and closed
    after a short drain (``guards.LINGER_S``: unread bytes would turn the close into a
    reset that loses the 503)."""
    late = _refusal("408 Request Timeout", f"the request line and headers did not arrive "
                    f"within header_timeout={seconds:g} s; send the request at once",
                    "invalid_request_error")
    full = _refusal("503 Service Unavailable", f"the server already has {max_open} "
                    "connections open (max_connections + max_waiting); retry shortly, or "
                    "start it with a larger max_waiting", "server_error", b"Retry-After: 1\r\n")

    malformed = _refusal("400 Bad Request", "the request is not well-formed HTTP/1.1 (a "
                         "malformed request line or header, a Content-Length sent twice or "
                         "not a number, a bad chunk, or a head over the size limit); send one "
                         "request with one Content-Length, or chunked", "invalid_request_error")

    class HeadDeadline(H11Protocol):
        refused = False

        def send_400_response(self, msg: str) -> None:
            """The parser's refusal in the API's JSON error shape (``msg`` is uvicorn's
            plain-text one), and the connection closed."""
            self.transport.write(malformed)
            self.transport.close()

        def connection_made(self, transport):
            if max_open is not None and len(self.connections) >= max_open:
                self.refused, self.transport = True, transport
                transport.write(full)
                if transport.can_write_eof():
                    transport.write_eof()
                self.loop.call_later(LINGER_S, transport.close)
                return
            super().connection_made(transport)
            self.loop.call_later(seconds, self.head_late, self.cycle)

        def data_received(self, data: bytes) -> None:
            if not self.refused:           # a refused one's request is drained unread
                super().data_received(data)

        def connection_lost(self, exc):
            if not self.refused:
                super().connection_lost(exc)

        def eof_received(self):
            if not self.refused:
                return super().eof_received()
            self.transport.close()

        def on_response_complete(self):
            super().on_response_complete()
            self.loop.call_later(seconds, self.head_late, self.cycle)

        def head_late(self, cycle) -> None:
            """408 and close, unless a request began since ``cycle`` (or one is running)."""
            waiting = self.cycle is cycle and (cycle is None or cycle.response_complete)
            if waiting and not self.transport.is_closing():
                self.transport.write(late)
                self.transport.close()

    return HeadDeadline
