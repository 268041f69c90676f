"""What ``ragbook serve`` refuses, and whose scope it serves: ``Policy`` (the guards that
need no body — header size, ``Host``, ``Origin``, content type and length — and the API keys
with their scopes) and ``narrow_scope`` (a request's scope can only narrow the server's).
Plain Python, no web framework: ``ragbook.serving.app`` applies them to every request."""
from __future__ import annotations

import hmac
from collections.abc import Mapping

from .guards import (
    check_allowed_hosts,
    check_allowed_origins,
    check_positive,
    is_loopback,
    split_host,
)

__all__ = ["Refused", "Policy", "narrow_scope"]


class Refused(Exception):
    """A request the server will not serve: ``status`` and a message that says what to do
    (never quoting the request); ``headers`` go with the reply (``Connection: close`` when
    the body was left unread, ``Retry-After`` when busy)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.kind, self.headers = status, kind, dict(headers or {})

    def body(self) -> dict:
        """The JSON error the client gets: ``{"error": {"message", "type"}}``."""
        return {"error": {"message": str(self), "type": self.kind}}


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _values(value, what: str) -> list[str]:
    """A scope condition as a list of values: a string, or a non-empty list of strings."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(
            isinstance(v, str) and v.strip() and _encodes(v) for v in values):
        raise Refused(400, f"{what} must map each metadata key to a value or a list of values "
                           f"(strings), e.g. {{\"access\": \"public\"}}")
    return values


def narrow_scope(fixed: Mapping | None, asked) -> dict | None:
    """The scope a request is served in: the server's ``fixed`` scope narrowed by the
    request's ``asked`` one (None: not narrowed). A key of ``fixed`` with plain values may be
    narrowed to a subset of them (asking for any other value is ``Refused`` 403); a key
    ``fixed`` does not name adds a condition; a key whose fixed condition is an operator is
    AND-ed with it. The result only ever holds fewer items than ``fixed``.

    >>> narrow_scope({"access": ["public", "customer"]}, {"access": "public", "plan": "all"})
    {'access': 'public', 'plan': 'all'}
    """
    if asked is None:
        return dict(fixed) if fixed is not None else None
    if not isinstance(asked, dict) or not asked or not all(
            isinstance(k, str) and k.strip() and not k.startswith("$") and _encodes(k)
            for k in asked):
        raise Refused(400, "'scope' must be an object of metadata keys (no operators), e.g. "
                           "{\"access\": \"public\"}, or left out")
    for value in asked.values():
        _values(value, "'scope'")
    if fixed is None:
        return dict(asked)
    merged, operators = dict(fixed), False
    for key, value in asked.items():
        granted = fixed.get(key)
        if isinstance(granted, (str, list)):
            allowed = {granted} if isinstance(granted, str) else set(granted)
            if not set(_values(value, "'scope'")) <= allowed:
                raise Refused(403, "the request's scope asks for items outside the scope this "
                                   "server grants (for this key); narrow it within that scope, "
                                   "or leave 'scope' out", "permission_error")
        elif key in fixed:           # an operator, a tuple, None (matches nothing): AND it
            operators = True
        merged[key] = value
    return {"$and": [dict(fixed), dict(asked)]} if operators else merged


class Policy:
    """What a server refuses and whose scope it serves (see the module notes); ``port`` is
    the one it listens on (the ``Host`` check allows it or none). Invalid settings raise
    ``ValueError`` naming the value and an example."""

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, scope=None,
                 keys: Mapping[str, Mapping | None] | None = None,
                 allowed_hosts=None, allowed_origins=None, max_body_bytes: int = 16_384,
                 max_header_bytes: int = 8_192, request_timeout: float = 10.0,
                 deadline: float = 60.0):
        if scope is not None and keys is not None:
            raise ValueError("give scope (one for the whole server) or keys (one scope per API "
                             "key), not both; e.g. keys={'k1': {'access': 'public'}}")
        if keys is not None and (not isinstance(keys, Mapping) or not keys or not all(
                isinstance(k, str) and len(k) >= 16 for k in keys)):
            raise ValueError("keys must map API keys (strings of 16 characters or more) to "
                             "scopes; e.g. keys={secrets.token_urlsafe(24): {'access': "
                             "'public'}}")
        for name, value in (("max_body_bytes", max_body_bytes),
                            ("max_header_bytes", max_header_bytes)):
            check_positive(name, value, int, "16384")
        self.request_timeout = float(check_positive("request_timeout", request_timeout,
                                                    (int, float), "10.0"))
        self.deadline = float(check_positive("deadline", deadline, (int, float), "60.0"))
        self.host, self.port, self.scope, self.keys = host, port, scope, keys
        self.max_body_bytes, self.max_header_bytes = max_body_bytes, max_header_bytes
        self.allowed_hosts = check_allowed_hosts(allowed_hosts)
        self.allowed_origins = check_allowed_origins(allowed_origins)
        self._hosts = {h.strip("[]").lower() for h in self.allowed_hosts or ()}
        if host and host.strip("[]") not in ("0.0.0.0", "::", ""):
            self._hosts.add(host.strip("[]").lower())
        self._origins = {o.rstrip("/").lower() for o in self.allowed_origins or ()}

    def check_head(self, scope: Mapping) -> None:
        """``Refused`` unless an HTTP request's head (an ASGI scope) passes every guard that
        needs no body: header size, ``Host``, ``Origin``, content type of a POST."""
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1"))
                   for k, v in scope.get("headers", ())]
        if sum(len(k) + len(v) + 4 for k, v in headers) > self.max_header_bytes:
            raise Refused(431, f"the request's headers are over max_header_bytes="
                               f"{self.max_header_bytes}; send fewer or shorter headers")
        hosts = [v for k, v in headers if k == "host"]
        parsed = split_host(hosts[0]) if len(hosts) == 1 else None
        if "*" not in self._hosts and not (
                parsed is not None and parsed[1] in (None, str(self.port))
                and (is_loopback(parsed[0]) or parsed[0] in self._hosts)):
            raise Refused(421, f"the Host header does not name this server: only localhost, "
                               f"127.0.0.1 or [::1] (with port {self.port} or none) are "
                               "served, so that no web page reaches it by DNS rebinding; "
                               f"connect to http://127.0.0.1:{self.port}/, or start it with "
                               "allowed_hosts=('myhost.lan',) to serve that name too")
        for origin in (v for k, v in headers if k == "origin"):
            key = origin.strip().rstrip("/").lower()
            scheme, _, netloc = key.partition("://")
            parts = split_host(netloc) if netloc and "/" not in netloc else None
            if not ("*" in self._origins or key in self._origins or (
                    scheme in ("http", "https") and parts is not None
                    and is_loopback(parts[0]))):
                raise Refused(403, "this Origin is not a loopback origin: a page from another "
                                   "site may not ask this server. Use the server's own page, "
                                   "a script (no Origin header), or start it with "
                                   "allowed_origins=('https://app.example',)", "permission_error")
        named = dict(headers)
        if "transfer-encoding" in named and "content-length" in named:   # any method
            raise Refused(400, "the request sends both Content-Length and Transfer-Encoding, "
                               "which a proxy and this server could read as different "
                               "bodies; send one of them")
        if scope.get("method") == "POST":
            ctype = named.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise Refused(415, "Content-Type must be application/json; send the request "
                                   "as JSON, e.g. {\"question\": \"...\"}")
            length = named.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                raise Refused(413, f"the body is over max_body_bytes={self.max_body_bytes} "
                                   "(or its Content-Length is not a number); send a shorter "
                                   "question")

    def scope_for(self, authorization: str | None) -> Mapping | None:
        """The scope the request's API key grants (``keys``), or the server's ``scope``;
        ``Refused`` 401 for a missing or unknown key when there are keys."""
        if self.keys is None:
            return self.scope
        given = (authorization or "").removeprefix("Bearer ").strip().encode()
        for key, scope in self.keys.items():
            if hmac.compare_digest(given, key.encode()):
                return scope
        raise Refused(401, "missing or unknown API key; send 'Authorization: Bearer <key>' "
                           "with a key this server was started with", "authentication_error")
