"""What an OpenAI-compatible chat endpoint sends back, read strictly: a chat-completion body
(``completion_text``) or a stream of server-sent events (``event_text``), each refused with
an error that names the endpoint and what came back — a reply that is not UTF-8 (or holds a
JSON ``\\ud83d`` escape without its partner), an event the stream stops inside, an ``error``
event, a chunk of the wrong shape, and a reply the server itself marks as unfinished: cut at
the token budget (``finish_reason: "length"``), stopped by a content filter, a tool call or a
``refusal`` instead of an answer. Only the first choice (``index`` 0) is read: a server
answering with several (``n > 1``) cannot splice another into it. ``without_thinking`` drops
a reasoning model's ``<think>...</think>`` text. ``ragbook.llm``'s ``OpenAICompatibleLLM``
reads its replies through these; the errors are ``ragbook.llm``'s."""
from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator

__all__ = ["LLMUnavailableError", "LLMResponseError", "preview", "completion_text",
           "event_text", "utf8", "json_or_none", "without_thinking", "FINISHED"]


class LLMUnavailableError(RuntimeError):
    """The endpoint could not be reached, or did not answer within the timeout."""


class LLMResponseError(RuntimeError):
    """The endpoint answered, but not with a chat completion (an HTTP error status, a body
    that is not JSON, no ``choices``, no ``message``, ``content`` that is not a string), or
    with one it marks as unfinished (``finish_reason``, ``refusal``, ``tool_calls``)."""


#: the ``finish_reason`` values of a reply that ended as the model meant it to (None too)
FINISHED = frozenset({"stop", "eos", "eos_token", "stop_sequence", "end_turn"})

_TOOL = ("the model called a tool instead of answering (ragbook offers it none); check the "
         "model's settings on the server")
_UNFINISHED = {
    "length": "it was cut at the token budget: raise max_new_tokens= or ask for a shorter answer",
    "max_tokens": "it was cut at the token budget: raise max_new_tokens= or ask for a shorter "
                  "answer",
    "content_filter": "the endpoint's content filter stopped it: what it had written is not "
                      "used",
    "tool_calls": _TOOL, "function_call": _TOOL,
}


def preview(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters for an error message (an HTML page can be long)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _first_choice(choices: list, url: str, shown: str):
    """The choice with ``index`` 0 (the first one listed when none says), or None when
    ``choices`` holds only others (another of ``n`` replies); ``LLMResponseError`` for a
    choice that is not an object or an ``index`` that is not an integer."""
    for choice in choices:
        index = choice.get("index", 0) if isinstance(choice, dict) else None
        if isinstance(index, bool) or not isinstance(index, int):
            raise LLMResponseError(f"{url} sent a choice that is not {{'index': int, ...}}: "
                                   f"{preview(shown)!r}; check the server")
        if index == 0:
            return choice
    return None


def _check_finished(choice: dict, part: dict, url: str) -> None:
    """``LLMResponseError`` when the server says the reply is not a finished answer: a
    ``refusal`` or a tool call in ``part`` (the message or delta), or a ``finish_reason``
    other than ``FINISHED`` in ``choice`` — a half sentence is not delivered as an answer."""
    refusal = part.get("refusal")
    if refusal not in (None, ""):
        raise LLMResponseError(f"{url}: the model refused to answer ({preview(str(refusal))!r});"
                               " nothing it wrote is used: rephrase the question, or check the "
                               "model's safety settings on the server")
    if part.get("tool_calls") or part.get("function_call"):
        raise LLMResponseError(f"{url}: {_TOOL}")
    reason = choice.get("finish_reason")
    if reason not in (None, "") and reason not in FINISHED:
        hint = _UNFINISHED.get(reason) if isinstance(reason, str) else None
        raise LLMResponseError(
            f"{url} ended its reply with finish_reason {reason!r}: "
            f"{hint or 'not a finished answer'}; the reply is incomplete and is not used")


def completion_text(body: str, url: str) -> str:
    """The assistant's text in a chat-completion JSON ``body``; ``LLMResponseError`` naming
    what came back when ``body`` is not a chat completion, or one marked unfinished."""
    reply = json_or_none(body)
    choices = reply.get("choices") if isinstance(reply, dict) else None
    first = _first_choice(choices, url, body) if isinstance(choices, list) else None
    message = first.get("message") if isinstance(first, dict) else None
    if isinstance(message, dict):
        _check_finished(first, message, url)
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise LLMResponseError(
            f"{url} did not answer with a chat completion (expected "
            f"{{'choices': [{{'message': {{'content': str}}}}]}}), got: {preview(body)!r}; check "
            "that base_url is an OpenAI-compatible /v1 endpoint that serves chat completions")
    return paired(content, url)


def json_or_none(text: str):
    """``text`` parsed as JSON, or None when it is not JSON — or nested too deeply for the
    parser (``[[[[...``: a ``RecursionError`` is a bad reply, not a crash)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def paired(text: str, url: str) -> str:
    """``text`` with each UTF-16 surrogate pair (JSON's ``\\ud83d\\ude00``) made the one
    character it stands for; ``LLMResponseError`` for a surrogate without its partner — text
    that is not Unicode, which no page can show and no trace can write."""
    if not _SURROGATE.search(text):
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        lone = _SURROGATE.search(_PAIR.sub("", text))
        raise LLMResponseError(
            f"{url} sent text with an unpaired UTF-16 surrogate ({lone[0]!r}, a JSON \\u "
            "escape without its partner): it is not valid Unicode; check the server's "
            "encoding, then ask again") from None


@contextlib.contextmanager
def utf8(url: str):
    """A reply that is not UTF-8 raises ``LLMResponseError`` naming the endpoint, not text
    with U+FFFD in it."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise LLMResponseError(f"{url} sent bytes that are not UTF-8 ({err.reason} at byte "
                               f"{err.start} of a chunk): its reply cannot be read as text; "
                               f"check the server's encoding, then ask again") from None


def _events(lines: Iterable[str], url: str) -> Iterator[tuple[str, str]]:
    """(type, data) of each server-sent event: its ``event:`` name ("" when unnamed) and its
    ``data:`` lines joined by newlines, as the event-stream format says, dispatched at the
    blank line that ends it — or at once when a ``data:`` line is a whole event by itself
    (servers that omit the blank line). An event the stream stops inside raises
    ``LLMResponseError`` ("cut off"), not a parse error."""
    held: list[str] = []
    kind = ""
    for line in lines:
        if not line:
            if held:
                yield kind, "\n".join(held)
                held = []
            kind = ""
            continue
        if line.startswith("event:"):
            kind = line[6:].strip()
            continue
        if not line.startswith("data:"):
            continue                         # ": keep-alive", "id: ...", "retry: ..."
        data = line[5:].removeprefix(" ")
        if not held and (data.strip() == "[DONE]" or json_or_none(data) is not None):
            yield kind, data
            kind = ""
        else:
            held.append(data)
    if held:
        raise LLMResponseError(f"the stream from {url} was cut off in the middle of an event "
                               f"({preview(chr(10).join(held))!r}): the reply is incomplete; "
                               f"check the server's log, then ask again")


def _delta(data: str, url: str) -> tuple[dict, dict] | None:
    """(choice, delta) of the first choice in one stream event's ``data``, or None when the
    event carries only other choices; ``LLMResponseError`` for an ``error`` or an event that
    is not a ``chat.completion.chunk``."""
    event = json_or_none(data)
    if isinstance(event, dict) and "error" in event:
        raise LLMResponseError(f"{url} failed mid-stream: {preview(json.dumps(event))}; "
                               "check the server's log")
    choices = event.get("choices") if isinstance(event, dict) else None
    first = _first_choice(choices, url, data) if isinstance(choices, list) else {}
    if first is None:
        return None
    delta = first.get("delta", {}) if isinstance(first, dict) else None
    content = delta.get("content") if isinstance(delta, dict) else None
    if not isinstance(choices, list) or not isinstance(delta, dict) \
            or not isinstance(content, (str, type(None))):
        raise LLMResponseError(
            f"{url} sent a stream event that is not a chat-completion chunk (expected "
            f"{{'choices': [{{'delta': {{'content': str}}}}]}}), got: {preview(data)!r}")
    return first, delta


def event_text(lines: Iterable[str], url: str) -> Iterator[str]:
    """The text deltas of a chat-completions event stream (``data: {...}`` events, ending
    with ``data: [DONE]``; ``_events``); ``LLMResponseError`` for an ``error`` event (by
    name, ``event: error``, or by content), an event that is not a
    ``chat.completion.chunk``, a reply marked unfinished (``_check_finished``), or a
    stream that stops before ``[DONE]`` or a ``finish_reason`` (the reply would be silently
    cut). Events of another name are not the reply's. The first choice's ``finish_reason``
    ends the reply: anything sent after it is not part of it. A surrogate pair split
    between two events is joined (``paired``)."""
    high = ""                                # a high surrogate waiting for its partner
    for kind, data in _events(lines, url):
        if kind == "error":
            raise LLMResponseError(f"{url} sent an error event mid-stream: "
                                   f"{preview(data)!r}; check the server's log")
        if kind not in ("", "message"):
            continue
        if data.strip() == "[DONE]":
            break
        got = _delta(data.strip(), url)
        if got is None:
            continue
        choice, delta = got
        _check_finished(choice, delta, url)
        text = high + (delta.get("content") or "")
        high = text[-1] if text and "\ud800" <= text[-1] <= "\udbff" else ""
        text = text[:len(text) - len(high)]
        if text:
            yield paired(text, url)
        if choice.get("finish_reason"):
            break
    else:
        raise LLMResponseError(f"the stream from {url} ended before 'data: [DONE]': the reply "
                               "is incomplete; check the server's log, then ask again")
    if high:
        paired(high, url)                    # raises: its partner never came


_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.I)
_THINK_TAGS = ("<think>", "<thinking>", "<reasoning>")


def _partial_open(text: str) -> int:
    """How many characters at the end of ``text`` could begin an opening tag."""
    low = text[-11:].lower()
    return max((n for n in range(1, len(low) + 1) for tag in _THINK_TAGS
                if tag.startswith(low[-n:])), default=0)


def without_thinking(pieces: Iterable[str]) -> Iterator[str]:
    """``pieces`` of a reply with every ``<think>...</think>`` (``<thinking>``,
    ``<reasoning>``) span left out, tags included, and everything after an opening tag that
    is never closed: a reasoning model's working is not its answer, and must not reach the
    user. Tags split across pieces are found; text is released once no tag can start in it.

    >>> "".join(without_thinking(["<thi", "nk>hmm</th", "ink>Paris."]))
    'Paris.'
    """
    source = iter(pieces)
    try:
        yield from _unthought(source)
    finally:
        getattr(source, "close", lambda: None)()     # stops the stream when the reader does


def _unthought(source: Iterator[str]) -> Iterator[str]:
    """``without_thinking``'s work, on the pieces of ``source``."""
    text, close = "", None
    for piece in source:
        text += piece
        while True:
            if close is None:
                found = _THINK_OPEN.search(text)
                if found is None:
                    keep = len(text) - _partial_open(text)
                    if keep:
                        yield text[:keep]
                    text = text[keep:]
                    break
                if found.start():
                    yield text[:found.start()]
                text, close = text[found.end():], f"</{found[1].lower()}>"
            else:
                end = text.lower().find(close)
                if end < 0:
                    text = text[-(len(close) - 1):]      # a closing tag may be starting
                    break
                text, close = text[end + len(close):], None
    if close is None and text:
        yield text
