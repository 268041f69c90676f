"""Components that declare themselves: settings read from ``__init__``, and a fingerprint.

Every retriever, store, reranker, reader and condenser is a ``Component`` (scikit-learn's
``get_params`` is the model). ``__init__`` only stores its arguments, each under its own name
(``self.depth = depth``; a lazily loaded model may sit under ``_name``), so the class can
answer two questions without anyone listing its settings by hand:

* ``settings()`` — the ``__init__`` arguments as they are now, sub-components as their own
  ``settings()`` (what ``__repr__`` and save manifests show);
* ``fingerprint`` — a short hash of everything a result depends on: the class, every setting
  (a sub-component by *its* fingerprint, an encoder by model, weights digest, prefixes and
  input length), the indexed corpus when built, and the model weights a component loads
  lazily. Caches namespace their entries by it, so a changed setting is a cache miss, never
  a stale answer. A new setting is one new ``__init__`` argument: nothing else to update.
  Settings that change no result — where a trace is written, a batch size, how long a
  cache entry lives — are declared in the class's ``neutral_settings`` and left out, so
  changing them does not empty every cache (secrets are left out too, and never shown).

>>> class Floor(Component):
...     def __init__(self, min_cosine=0.3, k=5):
...         self.min_cosine, self.k = min_cosine, k
>>> Floor().settings()
{'min_cosine': 0.3, 'k': 5}
>>> Floor(), Floor(k=8)
(Floor(), Floor(k=8))
>>> Floor().fingerprint == Floor(k=5).fingerprint, Floor().fingerprint == Floor(k=6).fingerprint
(True, False)
"""
from __future__ import annotations

import hashlib
import inspect
import json
import os
from typing import Any

from .types import Chunk, Document

__all__ = ["Component", "identity_of", "NotBuiltError"]


class NotBuiltError(RuntimeError):
    """A component was used before ``build`` (or ``load``)."""

#: Settings never shown by ``__repr__`` nor hashed into a fingerprint (a key changes who may
#: ask, not what the answer is).
SECRETS = frozenset({"api_key", "token", "password", "secret"})


class Component:
    """Base of every pipeline component: ``settings()``, ``fingerprint``, ``with_settings``
    and a ``__repr__`` that shows the settings differing from the defaults."""

    #: the settings that change no result (left out of ``fingerprint``; shown by ``repr``)
    neutral_settings: frozenset[str] = frozenset()

    @classmethod
    def _parameters(cls) -> list[inspect.Parameter]:
        """The settings: ``__init__``'s named parameters (read once per class)."""
        if "_params" not in cls.__dict__:
            sig = inspect.signature(cls.__init__)
            cls._params = [p for p in list(sig.parameters.values())[1:]
                           if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return cls._params

    @classmethod
    def _setting_names(cls) -> list[str]:
        return [p.name for p in cls._parameters()]

    def _setting(self, name: str) -> Any:
        if name in self.__dict__:
            return self.__dict__[name]
        if f"_{name}" in self.__dict__:
            return self.__dict__[f"_{name}"]
        raise AttributeError(
            f"{type(self).__name__}.__init__ takes {name!r} but keeps it neither as "
            f"self.{name} nor self._{name}; a component stores every __init__ argument under "
            f"its own name so settings() and fingerprint can read it")

    def settings(self, deep: bool = True) -> dict[str, Any]:
        """The ``__init__`` arguments as this object holds them, in signature order; with
        ``deep`` a sub-component appears as ``{"type": name, **its settings()}``."""
        out = {}
        for name in self._setting_names():
            value = self._setting(name)
            if deep and isinstance(value, Component):
                value = {"type": type(value).__name__, **value.settings()}
            out[name] = value
        return out

    def with_settings(self, **changes: Any) -> Component:
        """A copy with some settings changed and checked by ``__init__`` as usual (what a
        widget varies: ``reranker.with_settings(min_rerank_score=0.4)``). Built state
        (attributes ending in ``_`` that ``__init__`` does not set, e.g. a built index) is
        shared with the original; what ``__init__`` starts afresh (a latency log) starts
        afresh; models a component loads lazily are loaded again by the copy when needed."""
        names = self._setting_names()
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no setting {unknown[0]!r}; its "
                            f"settings are {', '.join(names)}")
        new = type(self).__new__(type(self))
        new.__init__(**{**self.settings(deep=False), **changes})
        new.__dict__.update({k: v for k, v in self.__dict__.items()  # what __init__ left unset
                             if k.endswith("_") and not k.startswith("_")
                             and k not in new.__dict__})
        return new

    def _fingerprint_extra(self) -> dict[str, Any]:
        """What else a result depends on that no setting shows (e.g. the weights of a model
        loaded lazily from the profile). Subclasses add to it; the base adds nothing."""
        return {}

    @property
    def fingerprint(self) -> str:
        """A short hash of the class, every setting but the ``neutral_settings`` and secrets
        (sub-components by their fingerprint), the corpus when built (``corpus_fingerprint``)
        and ``_fingerprint_extra()``: equal fingerprints give equal results, and changing
        any other setting changes it."""
        parts: dict[str, Any] = {"type": f"{type(self).__module__}.{type(self).__qualname__}",
                                 "settings": {n: identity_of(self._setting(n))
                                              for n in self._setting_names()
                                              if n not in SECRETS
                                              and n not in self.neutral_settings}}
        if hasattr(type(self), "corpus_fingerprint"):
            try:
                parts["corpus"] = self.corpus_fingerprint
            except NotBuiltError:
                parts["corpus"] = None
        parts.update(self._fingerprint_extra())
        text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def __repr__(self) -> str:
        shown = []
        for p in self._parameters():
            name, value = p.name, self._setting(p.name)
            try:
                same = p.default is not p.empty and bool(value == p.default)
            except Exception:  # arrays and other values without a plain truth value
                same = False
            if not same:
                shown.append(f"{name}={'***' if name in SECRETS else _short(value)}")
        state = self._repr_state()
        return f"{type(self).__name__}({', '.join(shown + ([state] if state else []))})"

    def _repr_state(self) -> str:
        """What ``__repr__`` adds after the settings (e.g. "123 items"); "" for nothing."""
        return ""


def _items_digest(items) -> str:
    """A short hash of Chunks/Documents: ids, texts, offsets, metadata, in order."""
    h = hashlib.sha256()
    for x in items:
        h.update(json.dumps([type(x).__name__, x.id, getattr(x, "doc_id", ""), x.text,
                             getattr(x, "start", None), getattr(x, "end", None),
                             getattr(x, "title", ""), dict(x.metadata)], sort_keys=True,
                            ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return f"{len(items)}:{h.hexdigest()[:16]}"


def _short(value: Any) -> str:
    if isinstance(value, Component):
        return repr(value)
    text = repr(value)
    return text if len(text) <= 60 else f"<{type(value).__name__}>"


def identity_of(value: Any) -> Any:
    """What a setting contributes to a fingerprint: a component or an encoder by its own
    ``fingerprint``, plain values as they are, containers element by element, a function
    or class by its qualified name; anything else by type and ``repr``."""
    if isinstance(value, Component):
        return {"component": value.fingerprint}
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (Chunk, Document)) for v in value):
        return {"items": _items_digest(value)}   # a corpus handed over as a setting
    if isinstance(value, (list, tuple)):
        return [identity_of(v) for v in value]
    if isinstance(value, dict):       # keys and set members typed: {1} is not {"1"}
        return {_typed(k): identity_of(v)
                for k, v in sorted(value.items(), key=lambda kv: _typed(kv[0]))}
    if isinstance(value, (set, frozenset)):
        return sorted(_typed(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    fp = getattr(value, "fingerprint", None)
    if isinstance(fp, str):
        return {"fingerprint": fp}
    if inspect.isfunction(value):
        return _function_identity(value)
    if inspect.isclass(value) or inspect.isbuiltin(value):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', value)}"
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return value.tolist()
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"


def _typed(value: Any) -> str:
    """A dict key or set member as text that keeps its type apart (a str as itself, as
    fingerprints have always written it; ``1`` as ``int:1``)."""
    return value if isinstance(value, str) else f"{type(value).__name__}:{identity_of(value)!r}"


def _function_identity(f) -> dict:
    """A function by what it does, not only its name: two closures from one factory, two
    lambdas, or a function redefined in a notebook share a qualified name and compute
    different things, so the identity also holds a digest of its code (bytecode, constants,
    names; not its file or line) and its defaults and closure values (a function among them
    by name and code only, so a recursive closure ends)."""
    return {"function": f"{f.__module__}.{f.__qualname__}", "code": _code_digest(f.__code__),
            "defaults": identity_of(list(f.__defaults__ or ())),
            "kwdefaults": identity_of(dict(f.__kwdefaults__ or {})),
            "closure": [_cell_identity(c) for c in f.__closure__ or ()]}


def _cell_identity(cell) -> Any:
    try:
        value = cell.cell_contents
    except ValueError:                # a cell not yet filled
        return None
    if inspect.isfunction(value):
        return {"function": value.__qualname__, "code": _code_digest(value.__code__)}
    return identity_of(value)


def _code_digest(code) -> str:
    h = hashlib.sha256(code.co_code)
    for const in code.co_consts:
        h.update((_code_digest(const) if inspect.iscode(const) else repr(const)).encode(
            "utf-8", "surrogatepass"))
    h.update(repr((code.co_names, code.co_varnames)).encode())
    return h.hexdigest()[:16]

