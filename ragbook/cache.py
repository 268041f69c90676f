"""Caching: one small persistent cache, and the two things chapter 10 caches with it.

``Cache`` is a key → JSON value store in SQLite (safe for two notebooks at once; a killed
run keeps what it wrote), *namespaced* by a fingerprint of everything the values depend on,
with an optional expiry and hit/miss counters. Change the corpus or the model and the
namespace changes, so stale entries are never served — they are simply never asked for.

* ``CachedRetriever``: retrieval results per (query, k, where and scope), namespaced by the
  retriever's ``fingerprint`` (corpus, settings, models) — repeated questions skip
  embedding and search.
* ``CachedPipeline``: whole answers per (condensed question, where and scope), with a
  short expiry, namespaced by the pipeline's ``fingerprint`` (every component's).
* ``LocalLLM`` keeps greedy replies in one, ``LLMContext`` its notes.

The embedding cache (``Encoder``) keeps its own binary vector store: it reads hundreds of
vectors per call and is keyed by text hash alone (the file is per model).

>>> c = Cache("doctest", namespace="v1", path=":memory:")
>>> c.get("q") is None, c.put("q", {"a": 1}), c.get("q"), (c.hits, c.misses)
(True, None, {'a': 1}, (1, 1))
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import models
from .canonical import canonical_json
from .checks import check_k, check_query, check_threshold
from .component import Component
from .filters import scoped, validate_where
from .result import Result
from .retrieval import WrapperRetriever, trace_stage
from .types import Hit, Retrieved

__all__ = ["Cache", "CachedRetriever", "CachedPipeline"]


def guarded(cache, what: str, action, fallback):
    """Run ``action`` on a SQLite-backed cache (with ``path`` and ``broken`` attributes). A
    cache that fails — corrupt, read-only, locked, disk full — warns once, naming the file and
    the fix, and is off for the rest of the run (``fallback`` is returned): a cache fault
    never stops an index build or an answer, it only costs the time the cache would save."""
    if cache.broken:
        return fallback
    try:
        return action()
    except (sqlite3.Error, OSError) as err:   # OSError: its folder cannot be made
        cache.broken = str(err)
        where = repr(str(cache.path)) if cache.path is not None else "(its folder)"
        warnings.warn(f"{what} {where} failed ({err}); going on without it for this run. "
                      f"Delete the file (it is rebuilt), or check the disk and its permissions "
                      f"(RAGBOOK_CACHE sets the folder)", stacklevel=4)
        return fallback


class Cache:
    """Persistent key → JSON value cache under ``cache_dir("cache")/<name>.sqlite``
    (``path=":memory:"`` for a throwaway one). ``namespace``: a fingerprint of what the
    values depend on. ``ttl``: seconds an entry stays valid (None: forever)."""

    def __init__(self, name: str, namespace: str, ttl: float | None = None,
                 path: str | Path | None = None):
        if not isinstance(name, str) or not name or not name.replace("-", "").replace(
                "_", "").isalnum():
            raise ValueError(f"cache name must be letters, digits, '-' or '_', got {name!r}")
        self.name, self.namespace = name, str(namespace)
        self.ttl = check_threshold(ttl, "ttl")
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError(f"ttl must be > 0 seconds (or None for no expiry), got {ttl!r}")
        self.path = path              # default: cache_dir("cache"), made when opened
        self.hits = self.misses = 0
        self.broken: str | None = None   # why the cache is off for this run, once it fails
        self._lock = threading.Lock()
        self._db = None

        def open_db():
            if self.path is None:
                self.path = models.cache_dir("cache") / f"{name}.sqlite"
            self._db = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
            with self._db:
                self._db.execute("CREATE TABLE IF NOT EXISTS entry (ns TEXT, key TEXT, "
                                 "value TEXT, at REAL, PRIMARY KEY (ns, key))")

        guarded(self, f"the {name!r} cache", open_db, None)

    @staticmethod
    def key(*parts: Any) -> str:
        """A stable key for ``parts`` (sha256 of their typed encoding, ``canonical.typed``):
        values that mean different things never share a key — a set is not its string, a
        bool not an int — and a set's key does not depend on its iteration order."""
        return hashlib.sha256(canonical_json(parts).encode("utf-8", "surrogatepass")
                              ).hexdigest()

    def get(self, key: str) -> Any | None:
        """The value stored under ``key`` in this namespace, or None (a miss)."""
        def read():
            with self._lock:
                return self._db.execute("SELECT value, at FROM entry WHERE ns = ? AND key = ?",
                                        (self.namespace, key)).fetchone()

        row = guarded(self, f"the {self.name!r} cache", read, None)
        try:  # a damaged row (not JSON, no time) is a miss, recomputed and overwritten
            value = json.loads(row[0]) if row is not None else None
            fresh = row is not None and (self.ttl is None or time.time() - row[1] <= self.ttl)
        except (TypeError, ValueError):
            value, fresh = None, False
        if not fresh or value is None:
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (anything JSON can write; NaN is refused with ``ValueError``) under
        ``key`` in the current namespace, replacing an older entry and restarting its ttl."""
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)

        def write():
            with self._lock, self._db:
                self._db.execute("INSERT OR REPLACE INTO entry VALUES (?, ?, ?, ?)",
                                 (self.namespace, key, text, time.time()))

        guarded(self, f"the {self.name!r} cache", write, None)

    def get_or_make(self, key: str, make) -> Any:
        """The cached value, or ``make()`` stored and returned."""
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def __len__(self) -> int:
        def count():
            with self._lock:
                return self._db.execute("SELECT COUNT(*) FROM entry WHERE ns = ?",
                                        (self.namespace,)).fetchone()[0]

        return guarded(self, f"the {self.name!r} cache", count, 0)

    def clear(self) -> None:
        """Forget this namespace's entries (other namespaces are kept)."""
        def delete():
            with self._lock, self._db:
                self._db.execute("DELETE FROM entry WHERE ns = ?", (self.namespace,))

        guarded(self, f"the {self.name!r} cache", delete, None)

    @property
    def hit_rate(self) -> float:
        """Share of ``get`` calls answered from the cache since it was opened (0.0 before any)."""
        asked = self.hits + self.misses
        return self.hits / asked if asked else 0.0

    def __repr__(self) -> str:
        return (f"Cache({self.name!r}, hits={self.hits}, misses={self.misses}, "
                f"ttl={self.ttl})")


class CachedRetriever(WrapperRetriever):
    """A ``Retriever`` that remembers its results per (query, k, where). The namespace is the
    wrapped retriever's ``fingerprint`` — corpus (ids, texts, metadata), every setting, every
    model — taken at each call, so a rebuilt corpus, a changed setting or another model misses
    instead of serving stale hits. Entries also expire after ``ttl`` seconds (a day by
    default; None keeps them until the fingerprint changes), for stores another process may
    change. What is cached is the whole ``retrieve`` result: hits, confidence and its kind."""

    #: where entries live and how long they last change no result (``Component``)
    neutral_settings = frozenset({"ttl", "path"})

    def __init__(self, retriever, ttl: float | None = 86_400.0,
                 path: str | Path | None = None):
        self.retriever, self.ttl, self.path = retriever, ttl, path
        self.cache = Cache("retrieval", retriever.fingerprint, ttl, path)

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The wrapped retriever's hits, from the cache when the same (query, k, where,
        scope) was asked of the same corpus, settings and models before; the same argument
        errors as any retriever."""
        return list(self.retrieve(query, k, where, scope=scope).hits)

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
                 scope: Mapping[str, Any] | None = None) -> Retrieved:
        """The wrapped retriever's ``retrieve``, from the cache when it can be: then the
        stages are one ``cache`` stage (the original stages took no time this call). The
        ``scope`` is AND-ed into ``where`` first, so it is part of the key: a result found
        for one user's scope is never served to another's."""
        k, query, where = check_k(k), check_query(query), validate_where(where)
        t = time.perf_counter()
        self.cache.namespace = self.retriever.fingerprint
        key = Cache.key(query, k, scoped(where, scope))
        row = self.cache.get(key)
        if row is None:
            got = self.retriever.retrieve(query, k=k, where=where, scope=scope)
            self.cache.put(key, {"hits": [h.to_dict() for h in got.hits],
                                 "confidence": got.confidence, "kind": got.confidence_kind})
            return got
        try:
            hits = tuple(Hit.from_dict({**r, "rank": n}) for n, r in enumerate(row["hits"], 1))
            confidence, kind = row["confidence"], row["kind"]
        except (KeyError, TypeError, ValueError):    # a damaged row: recompute, overwrite
            got = self.retriever.retrieve(query, k=k, where=where, scope=scope)
            self.cache.put(key, {"hits": [h.to_dict() for h in got.hits],
                                 "confidence": got.confidence, "kind": got.confidence_kind})
            return got
        return Retrieved(hits, (trace_stage("cache", t, hits, {"where": where,
                                                                "scope": scope}),),
                         confidence, kind)


class CachedPipeline(Component):
    """``Pipeline.ask`` with an answer cache for exact repeats: the key is the *condensed*
    question (so "and on free?" after different conversations are different keys) and the
    filter and the access scope (an answer found for one scope is never served to another);
    entries expire after ``ttl`` seconds (default 300); the namespace is the
    pipeline's ``fingerprint``: its corpus, every component's settings and models, its
    thresholds — change any and the cache misses."""

    #: where entries live and how long they last change no answer (``Component``)
    neutral_settings = frozenset({"ttl", "path"})

    def __init__(self, pipeline, ttl: float | None = 300.0, path: str | Path | None = None):
        self.pipeline, self.ttl, self.path = pipeline, ttl, path
        self.cache = Cache("answers", pipeline.fingerprint, ttl, path)

    def ask(self, question: str, history=None, where=None, *, scope=None) -> Result:
        """``Pipeline.ask``, answered from the cache when the same condensed question, filter
        and scope were asked within ``ttl`` under the same corpus, models and thresholds."""
        question = check_query(question)
        condensed = (self.pipeline.condenser.condense(question, history) if history
                     else question)
        self.cache.namespace = self.pipeline.fingerprint
        key = Cache.key(condensed, validate_where(where), scoped(None, scope))  # as applied
        hit = self.cache.get(key)
        if hit is not None:
            try:
                return _asked_by(Result.from_dict(hit), question, history)
            except (KeyError, TypeError, ValueError):  # a damaged row: recompute, overwrite
                pass
        result = self.pipeline.ask(question, history, where, scope=scope)
        self.cache.put(key, result.to_dict())
        return result


def _asked_by(result: Result, question: str, history) -> Result:
    """A cached ``result`` as this asker's: their own question and conversation length in
    it, not those of whoever asked first — two conversations that condense to the same
    question share the answer, never each other's words."""
    trace = tuple(replace(s, detail={**s.detail, "input": question,
                                     "history_turns": len(history or ())})
                  if s.name == "condense" else s for s in result.trace)
    return replace(result, question=question, trace=trace)
