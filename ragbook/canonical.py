"""A canonical, typed JSON encoding of plain values: what a cache key and a telemetry hash
are taken of, so values that mean different things never share one and equal values always do.

``json.dumps(value, default=repr)`` is neither: a set is written as its ``repr``, whose order
follows the process's hash seed (one scope, a different text in every process) and which is
the very text of a string (``{'internal'}`` the set and ``"{'internal'}"`` the str read
alike); ``sort_keys`` raises on a mapping whose keys mix types. ``typed`` records each
value's type in the JSON's shape and sorts what has no order of its own.

>>> canonical_json({"access": {"b", "a"}}) == canonical_json({"access": {"a", "b"}})
True
>>> canonical_json({"internal"}) == canonical_json("{'internal'}")
False
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["typed", "canonical_json"]


def typed(value: Any, strict: bool = True) -> Any:
    """``value`` as JSON whose shape records its type: mappings as ``{"map": [[key, value],
    ...]}`` sorted, sets as ``{"set": [...]}`` sorted, lists and tuples as lists, numbers,
    strings, bools and None as themselves (JSON keeps 1, 1.0, true and "1" apart), a float
    that JSON cannot write as ``{"float": repr}``. Anything else is refused (``strict``: its
    text could pass for a string's) or written as ``{"object": "module.Type:repr"}``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"float": repr(value)}
    if isinstance(value, Mapping):
        return {"map": sorted(([typed(k, strict), typed(v, strict)] for k, v in value.items()),
                              key=_sort_key)}
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((typed(v, strict) for v in value), key=_sort_key)}
    if isinstance(value, (list, tuple)):
        return [typed(v, strict) for v in value]
    if strict:
        raise TypeError(f"a cache key cannot hold a {type(value).__name__} ({value!r:.60}); "
                        "use str, int, float, bool, None, or lists, sets and mappings of those")
    return {"object": f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"}


def _sort_key(encoded: Any) -> str:
    """The order of set members and mapping items: their JSON text (ASCII-escaped, as cache
    keys have always been sorted, so existing entries keep their keys)."""
    return json.dumps(encoded)


def canonical_json(value: Any, strict: bool = True) -> str:
    """``typed(value, strict)`` as compact JSON text (non-ASCII kept as itself)."""
    return json.dumps(typed(value, strict), ensure_ascii=False, allow_nan=False)
