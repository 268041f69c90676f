"""Text that arrives in pieces: a chat model's reply streamed, and what a streaming call of
the reader or the pipeline returns.

* ``tidy_pieces`` turns a backend's raw pieces into pieces of exactly what its ``generate`` returns
  (cut at the first stop string, white space stripped), releasing each as soon as it is
  certain — so streamed and whole replies can be compared character for character;
* ``stream_reply(llm, ...)`` streams any backend: its own ``stream``, or its ``generate``
  reply as one piece;
* ``Streamed`` is what ``GenerativeReader.stream`` and ``Pipeline.stream`` return: iterate
  for the text pieces they release, then ``result`` is their checked outcome;
* ``capped_lines`` bounds an endpoint's event stream as a whole: the per-read timeout
  alone lets a server that sends a keep-alive comment every few seconds, or an endless
  reply, hold a caller for ever.
"""
from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

__all__ = ["stream_reply", "Streamed", "capped_lines", "STREAM_SECONDS", "STREAM_CHARS"]

STREAM_SECONDS = 300.0     # the longest a streamed reply may take, keep-alives included
STREAM_CHARS = 2_000_000   # the most characters of event lines read from one streamed reply


def capped_lines(lines: Iterable[str], url: str, error: type[Exception],
                 seconds: float | None = None, max_chars: int | None = None
                 ) -> Iterator[str]:
    """``lines`` until the stream has run ``seconds`` (default ``STREAM_SECONDS``) or sent
    ``max_chars`` characters (default ``STREAM_CHARS``); then ``error`` naming the limit,
    so the caller escalates instead of waiting or reading for ever.

    >>> list(capped_lines(["data: a", "data: b"], "http://x", ValueError, max_chars=100))
    ['data: a', 'data: b']
    """
    seconds = STREAM_SECONDS if seconds is None else seconds
    max_chars = STREAM_CHARS if max_chars is None else max_chars
    until, read = time.monotonic() + seconds, 0
    for line in lines:
        read += len(line) + 1
        if read > max_chars:
            raise error(f"the stream from {url} sent over {max_chars:,} characters without "
                        "finishing; the reply is cut: ask for fewer tokens (max_new_tokens) "
                        "or check the server")
        if time.monotonic() > until:
            raise error(f"the stream from {url} did not finish within {seconds:g} s (it "
                        "kept the connection busy, e.g. with keep-alive comments); the reply "
                        "is cut: check the server, then ask again")
        yield line

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
