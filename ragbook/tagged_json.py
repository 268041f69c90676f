"""JSON that keeps tuples: how saved indexes write metadata so it round-trips unchanged.

A tuple is written as ``{"__tuple__": [...]}``; a real dict whose only key is one of the
tags is written as ``{"__dict__": [[key, value]]}``, so no document's metadata can pose as
a tag. (``ragbook.persist`` re-exports ``dumps`` and ``loads``.)

>>> loads(dumps({"path": ("Library", "os")}))
{'path': ('Library', 'os')}
"""
from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "loads"]

_TAGS = ({"__tuple__"}, {"__dict__"})


def _encode(o: Any) -> Any:
    if isinstance(o, tuple):
        return {"__tuple__": [_encode(v) for v in o]}
    if isinstance(o, list):
        return [_encode(v) for v in o]
    if isinstance(o, dict):
        if set(o) in _TAGS:
            return {"__dict__": [[k, _encode(v)] for k, v in o.items()]}
        return {k: _encode(v) for k, v in o.items()}
    return o


def _decode(o: dict) -> Any:
    if set(o) == {"__tuple__"}:
        return tuple(o["__tuple__"])
    if set(o) == {"__dict__"} and isinstance(o["__dict__"], list):
        return dict(o["__dict__"])
    return o


def dumps(obj: Any) -> str:
    """JSON in which tuples come back as tuples (metadata round-trips unchanged)."""
    return json.dumps(_encode(obj), ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    """Read JSON written by ``dumps``: tuples come back as tuples."""
    return json.loads(text, object_hook=_decode)
