"""Text that arrives in pieces: a chat model's reply streamed, and what a streaming call of
the reader or the pipeline returns.

* ``tidy_pieces`` turns a backend's raw pieces into pieces of exactly what its ``generate`` returns
  (cut at the first stop string, white space stripped), releasing each as soon as it is
  certain — so streamed and whole replies can be compared character for character;
* ``stream_reply(llm, ...)`` streams any backend: its own ``stream``, or its ``generate``
  reply as one piece;
* ``Streamed`` is what ``GenerativeReader.stream`` and ``Pipeline.stream`` return: iterate
  for the text pieces they release, then ``result`` is their checked outcome;
* ``capped_chunks`` bounds an endpoint's reply as a whole: the per-read timeout alone lets
  a server that sends a keep-alive comment every few seconds, or an endless reply (or
  line), hold a caller for ever;
* ``exchange`` is the endpoint backend's bounded POST: one deadline for the whole call
  (a watchdog closes the socket, so a byte-at-a-time server cannot outlast it), every
  body read through one reader that counts bytes after decompression (``STREAM_CHARS``)
  and checks time on every chunk (partial lines too), ``Retry-After`` never slept past the
  deadline, redirects named instead of followed.
"""
from __future__ import annotations

import codecs
import contextlib
import math
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["stream_reply", "Streamed", "capped_chunks", "split_lines", "exchange", "Failures",
           "STREAM_SECONDS", "STREAM_CHARS"]

STREAM_SECONDS = 300.0     # the longest a streamed reply may take, keep-alives included
STREAM_CHARS = 2_000_000   # the most bytes (after decompression) read from one reply


Messages = Sequence[Mapping[str, str]]


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first of the ``stop`` strings it contains (all of it when none)."""
    for s in stop:
        if s and s in text:
            text = text[:text.index(s)]
    return text


def tidy_pieces(pieces: Iterable[str], stop: Sequence[str]) -> Iterator[str]:
    """Raw reply ``pieces`` as pieces of ``cut_at_stop(reply, stop).strip()`` — what ``generate``
    returns — released as soon as that is certain: the last ``len(longest stop) - 1``
    characters are held (a stop string may be starting there), and so is trailing white
    space (``strip`` drops it at the end). Stops reading ``pieces`` at the first stop string.

    >>> list(tidy_pieces([" Hi", " the", "re. And", " more"], ["."]))
    ['Hi', ' the', 're']
    """
    stop = [s for s in stop if s]
    hold, text, out = max(map(len, stop), default=1) - 1, "", 0
    source = iter(pieces)
    try:
        for piece in source:
            text += piece
            cut = cut_at_stop(text, stop)
            if len(cut) < len(text):                        # a stop string: the reply ends
                break
            ready = text[:len(text) - hold].lstrip().rstrip()
            if len(ready) > out:
                yield ready[out:]
                out = len(ready)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()                                          # stops the model or the stream
    last = cut_at_stop(text, stop).strip()[out:]
    if last:
        yield last


def stream_reply(llm, messages: Messages, max_new_tokens: int | None = None,
                 stop: Sequence[str] = ()) -> Iterator[str]:
    """``llm``'s reply as text pieces: its own ``stream`` when it has one, else its whole
    ``generate`` reply as one piece. Either way ``"".join`` of the pieces is what
    ``llm.generate(messages, max_new_tokens, stop)`` returns."""
    if callable(getattr(llm, "stream", None)):
        return iter(llm.stream(messages, max_new_tokens=max_new_tokens, stop=stop))
    reply = llm.generate(messages, max_new_tokens=max_new_tokens, stop=stop)
    return iter([reply] if reply else [])


T = TypeVar("T")


class Streamed(Generic[T]):
    """What a streaming call returns: iterate it for the text pieces it releases (``str``),
    then read ``result`` — the checked outcome (an ``Answer`` from
    ``GenerativeReader.stream``, a ``Result`` from ``Pipeline.stream``), equal to what the
    non-streaming call returns. Reading ``result`` before the pieces are all taken runs the
    rest of the stream without showing it. One pass: the pieces are not kept.

    >>> def steps():
    ...     yield "Hello"
    ...     yield " world."
    ...     return "checked"
    >>> s = Streamed(steps())
    >>> "".join(s), s.result
    ('Hello world.', 'checked')
    """

    def __init__(self, steps: Generator[str, None, T]):
        self._steps, self._result, self._done = steps, None, False

    def __iter__(self) -> Iterator[str]:
        while not self._done:
            try:
                piece = next(self._steps)
            except StopIteration as end:
                self._result, self._done = end.value, True
                return
            yield piece

    @property
    def result(self) -> T:
        """The outcome, once the stream has ended (the rest of it is run first if need be)."""
        for _ in self:
            pass
        return self._result


# -- an endpoint's reply, bounded as a whole: bytes, time, redirects, retries -------------------
# httpx's timeout is per read, and a body may be chunked, compressed or endless: so every call
# runs under a watchdog that closes its socket at the deadline, and every byte (after
# decompression) is counted, partial lines included.

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
RETRY_SLEEP = 8.0          # the longest pause between attempts, whatever Retry-After says


@dataclass(frozen=True)
class Failures:
    """How an exchange names what went wrong: ``unavailable`` (no reply in time, no
    connection), ``failed`` (a reply that is not what was asked for), ``hint(status)``."""
    unavailable: type[Exception]
    failed: type[Exception]
    hint: Callable[[int], str]


class Watchdog:
    """Shuts the call's socket down when ``error`` is due (``arm``): a server that sends a
    byte now and then, or headers a byte at a time, cannot hold the call past its deadline."""

    def __init__(self, seconds: float, error: Exception):
        self._stream, self._timer, self.fired = None, None, False
        self.arm(seconds, error)

    def arm(self, seconds: float, error: Exception) -> None:
        """(Re)start the clock: ``error`` is raised for the call in ``seconds``."""
        self.cancel()
        self.until, self.error = time.monotonic() + seconds, error
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def left(self) -> float:
        return self.until - time.monotonic()

    def trace(self, event: str, info: dict) -> None:
        """httpcore's trace hook: keeps the connection's stream so ``_fire`` can shut it."""
        if event == "connection.connect_tcp.complete":
            self._stream = info.get("return_value")
            if self.fired:
                self._shut()

    def _fire(self) -> None:
        self.fired = True
        self._shut()

    def _shut(self) -> None:
        sock = self._stream.get_extra_info("socket") if self._stream is not None else None
        with contextlib.suppress(OSError, AttributeError):
            sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def capped_chunks(chunks: Iterable[bytes], url: str, error: type[Exception],
                  seconds: float | None = None, max_bytes: int | None = None
                  ) -> Iterator[bytes]:
    """``chunks`` until they pass ``max_bytes`` (default ``STREAM_CHARS``) or have run
    ``seconds`` (default ``STREAM_SECONDS``); then ``error``. Checked on every chunk, so a
    line that never ends is cut like an endless reply.

    >>> list(capped_chunks([b"da", b"ta"], "http://x", ValueError, max_bytes=10))
    [b'da', b'ta']
    """
    max_bytes = STREAM_CHARS if max_bytes is None else max_bytes
    seconds = STREAM_SECONDS if seconds is None else seconds
    until, read = time.monotonic() + seconds, 0
    for chunk in chunks:
        read += len(chunk)
        if read > max_bytes:
            raise error(f"the reply from {url} sent over {max_bytes:,} characters without "
                        "finishing; the reply is cut: ask for fewer tokens (max_new_tokens) "
                        "or check the server")
        if time.monotonic() > until:
            raise error(f"the stream from {url} did not finish within {seconds:g} s; the "
                        "reply is cut: check the server, then ask again")
        yield chunk


def decoded(chunks: Iterable[bytes], encoding: str, url: str,
            error: type[Exception]) -> Iterator[bytes]:
    """Raw body ``chunks`` decompressed (``Content-Encoding`` gzip or deflate) in pieces of
    at most 64 KiB, so a small bomb is cut by ``capped_chunks`` before it fills memory. A gzip
    body of several members (RFC 1952 allows it; a proxy that compresses each flush writes
    one) is read whole, not to its first member's end; one that stops before its end marker,
    or goes on with bytes that are not another member, is ``error``: a cut reply is not read
    as a whole one."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        yield from chunks
        return
    if encoding not in ("gzip", "x-gzip", "deflate"):
        raise error(f"{url} answered with Content-Encoding {encoding!r}, which ragbook does "
                    "not read; configure the server to send gzip or no compression")
    inflate, fed = zlib.decompressobj(47), False     # 32 + 15: a gzip or a zlib header
    try:
        for chunk in chunks:
            while chunk:
                fed = True
                yield inflate.decompress(chunk, 65536)
                if inflate.eof:                      # the member ended: another may follow
                    chunk, inflate, fed = inflate.unused_data, zlib.decompressobj(47), False
                else:
                    chunk = inflate.unconsumed_tail
    except zlib.error as err:
        raise error(f"{url} sent a {encoding} body that does not decompress ({err}); "
                    "check the server") from err
    if fed:
        raise error(f"{url} sent a {encoding} body that stops before its end: the reply is "
                    "cut; check the server (or a proxy in between), then ask again")


_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines (``\\n``, ``\\r\\n`` or ``\\r``: an event stream's breaks) of UTF-8 byte
    ``chunks``; each chunk is scanned once, so a long line costs linear time. Bytes that are
    not UTF-8 raise ``UnicodeDecodeError`` (a character split across chunks is joined):
    text replaced by U+FFFD would pass on a reply nobody sent."""
    decode, pending = codecs.getincrementaldecoder("utf-8")("strict").decode, []
    for chunk in chunks:
        text = decode(chunk)
        if "\n" not in text and "\r" not in text:
            pending.append(text)
            continue
        text, held = "".join(pending) + text, ""
        if text.endswith("\r"):                    # may be the first half of \r\n
            text, held = text[:-1], "\r"
        *lines, rest = _BREAK.split(text)
        yield from lines
        pending = [rest, held]
    rest = ("".join(pending) + decode(b"", True)).rstrip("\r")
    if rest:
        yield from _BREAK.split(rest)


class Reply:
    """A 200 answer of ``exchange``: ``headers``, and its body read through one bounded
    reader (``chunks``, ``text``, ``lines``)."""

    def __init__(self, response, url: str, failures: Failures, watchdog: Watchdog):
        self.headers, self._response, self._url = response.headers, response, url
        self._failures, self._watchdog = failures, watchdog

    def chunks(self, seconds: float = math.inf) -> Iterator[bytes]:
        """The body, decompressed, cut at ``STREAM_CHARS`` bytes, after ``seconds`` or at the
        watchdog's deadline (its error)."""
        raw = decoded(self._response.iter_raw(), self.headers.get("content-encoding", ""),
                      self._url, self._failures.failed)
        for chunk in capped_chunks(raw, self._url, self._failures.failed, seconds):
            if self._watchdog.fired:
                raise self._watchdog.error
            yield chunk

    def text(self) -> str:
        """The whole body as text (bounded like ``chunks``); ``UnicodeDecodeError`` when it
        is not UTF-8."""
        return b"".join(self.chunks()).decode("utf-8")

    def lines(self) -> Iterator[str]:
        """The body as event-stream lines, within ``STREAM_SECONDS`` from now as a whole."""
        seconds = STREAM_SECONDS
        self._watchdog.arm(seconds + 1, self._failures.failed(
            f"the stream from {self._url} did not finish within {seconds:g} s; the reply is "
            "cut: check the server, then ask again"))
        return split_lines(self.chunks(seconds))


def _retry_after(response, attempt: int) -> float:
    """Seconds to wait before the next attempt: the server's ``Retry-After`` (in seconds)
    if it gives one, else 0.5, 1, 2, ... s."""
    with contextlib.suppress(TypeError, ValueError):
        wait = float(response.headers.get("retry-after", ""))
        if math.isfinite(wait) and wait >= 0:
            return wait
    return 0.5 * 2 ** attempt


def _send(client, request, url: str, attempts: int, failures: Failures, watchdog: Watchdog):
    """The first answer that is not worth retrying, as a streamed httpx response; connection
    failures, time-outs and ``RETRY_STATUSES`` are retried while attempts and time are left."""
    import httpx

    for attempt in range(attempts):
        last = attempt == attempts - 1
        try:
            response = client.send(request, stream=True)
        except httpx.HTTPError as err:
            if watchdog.fired:
                raise watchdog.error from err
            if last or watchdog.left() <= 0:
                raise _unreachable(err, url, attempts, client.timeout.read, failures) from err
            time.sleep(min(0.5 * 2 ** attempt, RETRY_SLEEP, max(watchdog.left(), 0)))
            continue
        if response.status_code < 300:
            return response
        wait = _retry_after(response, attempt)
        retry = response.status_code in RETRY_STATUSES and not last \
            and response.headers.get("x-should-retry") != "false"
        if retry and min(wait, RETRY_SLEEP) < watchdog.left():
            response.close()
            time.sleep(min(wait, RETRY_SLEEP))
            continue
        raise _status_error(response, url, failures, wait if retry else None)
    raise AssertionError("unreachable")                         # pragma: no cover


def _unreachable(err, url: str, attempts: int, timeout: float, failures: Failures):
    import httpx

    tries = f"{attempts} attempt(s)"
    if isinstance(err, httpx.TimeoutException):
        return failures.unavailable(
            f"no reply from {url} within timeout={timeout:g} s ({tries}); check the server "
            "is up and answering, or raise timeout= for a slow model")
    return failures.unavailable(f"could not connect to {url} ({tries}): {err}; start the "
                                "server, or fix base_url= (RAGBOOK_LLM_BASE_URL)")


def _status_error(response, url: str, failures: Failures, wait: float | None):
    """``failures.failed`` for a non-2xx answer; a redirect is named as one (not followed:
    it could loop, or carry the API key to another host)."""
    status = response.status_code
    if 300 <= status < 400:
        response.close()
        return failures.failed(
            f"{url} answered HTTP {status}, a redirect to {response.headers.get('location')!r}"
            "; ragbook does not follow redirects: fix base_url= (RAGBOOK_LLM_BASE_URL) to the "
            "address that serves the chat completions")
    body = ""
    with contextlib.suppress(Exception):
        raw = decoded(response.iter_raw(), response.headers.get("content-encoding", ""),
                      url, ValueError)
        body = b"".join(capped_chunks(raw, url, ValueError, max_bytes=65536)
                        ).decode("utf-8", "replace")
    response.close()
    later = "" if wait is None else (f" (it asked to retry after {wait:g} s, past this call's "
                                     "deadline: raise timeout= or ask later)")
    shown = body if len(body) <= 200 else body[:200] + f"... ({len(body)} characters)"
    return failures.failed(f"{url} answered HTTP {status}: {shown!r}{later}; "
                           f"{failures.hint(status)}")


@contextlib.contextmanager
def exchange(url: str, payload: dict, headers: Mapping[str, str], timeout: float,
             max_retries: int, failures: Failures) -> Iterator[Reply]:
    """POST ``payload`` as JSON to ``url`` and yield the 200 ``Reply``. The whole call —
    every attempt, every pause between them, and reading the body through ``Reply`` — ends
    within ``timeout * (1 + max_retries)`` seconds (``Reply.lines`` then allows
    ``STREAM_SECONDS`` for a stream), else ``failures.unavailable`` saying what to raise.
    Redirects are not followed; a transport failure mid-body is ``failures.failed``."""
    import httpx

    attempts = 1 + max_retries
    deadline = timeout * attempts
    watchdog = Watchdog(deadline, failures.unavailable(
        f"no complete reply from {url} within {deadline:g} s (timeout={timeout:g} s x "
        f"{attempts} attempt(s)); check the server, or raise timeout= (or max_retries=) "
        "for a slow model"))
    client = httpx.Client(timeout=timeout, follow_redirects=False)
    request = client.build_request(
        "POST", url, json=payload, extensions={"trace": watchdog.trace},
        headers={"Accept-Encoding": "gzip, deflate", **headers})
    response = None
    try:
        response = _send(client, request, url, attempts, failures, watchdog)
        yield Reply(response, url, failures, watchdog)
    except httpx.HTTPError as err:
        if watchdog.fired:
            raise watchdog.error from err
        if isinstance(err, httpx.TimeoutException):
            raise _unreachable(err, url, attempts, timeout, failures) from err
        raise failures.failed(f"the reply from {url} broke off ({type(err).__name__}: {err}); "
                              "it is incomplete: check the server's log, then ask again") from err
    finally:
        watchdog.cancel()
        if response is not None:
            response.close()
        client.close()
