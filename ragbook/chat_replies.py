"""What an OpenAI-compatible chat endpoint sends back, read strictly: a chat-completion body
(``completion_text``) or a stream of server-sent events (``event_text``), each refused with
an error that names the endpoint and what came back — a reply that is not UTF-8, an event
the stream stops inside, an ``error`` event, a chunk of the wrong shape. ``ragbook.llm``'s
``OpenAICompatibleLLM`` reads its replies through these; the errors are ``ragbook.llm``'s."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator

__all__ = ["LLMUnavailableError", "LLMResponseError", "preview", "completion_text",
           "event_text", "utf8", "json_or_none"]


class LLMUnavailableError(RuntimeError):
    """The endpoint could not be reached, or did not answer within the timeout."""


class LLMResponseError(RuntimeError):
    """The endpoint answered, but not with a chat completion (an HTTP error status, a body
    that is not JSON, no ``choices``, no ``message``, ``content`` that is not a string)."""


def preview(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters for an error message (an HTML page can be long)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def completion_text(body: str, url: str) -> str:
    """The assistant's text in a chat-completion JSON ``body``; ``LLMResponseError`` naming
    what came back when ``body`` is not a chat completion."""
    reply = json_or_none(body)
    choices = reply.get("choices") if isinstance(reply, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise LLMResponseError(
            f"{url} did not answer with a chat completion (expected "
            f"{{'choices': [{{'message': {{'content': str}}}}]}}), got: {preview(body)!r}; check "
            "that base_url is an OpenAI-compatible /v1 endpoint that serves chat completions")
    return content


def json_or_none(text: str):
    """``text`` parsed as JSON, or None when it is not JSON — or nested too deeply for the
    parser (``[[[[...``: a ``RecursionError`` is a bad reply, not a crash)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


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


def _events(lines: Iterable[str], url: str) -> Iterator[str]:
    """The data of each server-sent event: its ``data:`` lines joined by newlines, as the
    event-stream format says, dispatched at the blank line that ends it — or at once when a
    ``data:`` line is a whole event by itself (servers that omit the blank line). An event
    the stream stops inside raises ``LLMResponseError`` ("cut off"), not a parse error."""
    held: list[str] = []
    for line in lines:
        if not line:
            if held:
                yield "\n".join(held)
                held = []
            continue
        if not line.startswith("data:"):
            continue                         # ": keep-alive", "event: ...", "id: ..."
        data = line[5:].removeprefix(" ")
        if not held and (data.strip() == "[DONE]" or json_or_none(data) is not None):
            yield data
        else:
            held.append(data)
    if held:
        raise LLMResponseError(f"the stream from {url} was cut off in the middle of an event "
                               f"({preview(chr(10).join(held))!r}): the reply is incomplete; "
                               f"check the server's log, then ask again")


def event_text(lines: Iterable[str], url: str) -> Iterator[str]:
    """The text deltas of a chat-completions event stream (``data: {...}`` events, ending
    with ``data: [DONE]``; ``_events``); ``LLMResponseError`` for an ``error`` event, an
    event that is not a ``chat.completion.chunk``, or a stream that stops before ``[DONE]``
    or a ``finish_reason`` (the reply would be silently cut). The first choice's
    ``finish_reason`` ends the reply: anything sent after it is not part of it."""
    for data in _events(lines, url):
        data = data.strip()
        if data == "[DONE]":
            return
        event = json_or_none(data)
        if isinstance(event, dict) and "error" in event:
            raise LLMResponseError(f"{url} failed mid-stream: {preview(json.dumps(event))}; "
                                   "check the server's log")
        choices = event.get("choices") if isinstance(event, dict) else None
        first = choices[0] if isinstance(choices, list) and choices else {}
        delta = first.get("delta", {}) if isinstance(first, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else None
        if not isinstance(choices, list) or not isinstance(delta, dict) \
                or not isinstance(content, (str, type(None))):
            raise LLMResponseError(
                f"{url} sent a stream event that is not a chat-completion chunk (expected "
                f"{{'choices': [{{'delta': {{'content': str}}}}]}}), got: {preview(data)!r}")
        if content:
            yield content
        if first.get("finish_reason"):
            return
    raise LLMResponseError(f"the stream from {url} ended before 'data: [DONE]': the reply "
                           "is incomplete; check the server's log, then ask again")
