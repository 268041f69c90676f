"""The ``where`` filter language over item metadata, and what metadata may hold.

``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or ``{key: {"$op": value}}`` with
``$eq $ne $in $nin $gt $gte $lt $lte``; all keys must hold. ``matches`` evaluates a filter in
Python; ``translate_where`` hands each condition to a store that filters natively.

>>> validate_where({"status": "current", "updated": {"$gte": "2025-01-01"}})
{'status': 'current', 'updated': {'$gte': '2025-01-01'}}
>>> matches({"status": "current", "updated": "2025-06-01"}, {"updated": {"$gte": "2025-01-01"}})
True
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["check_metadata", "validate_where", "matches", "translate_where", "OPERATORS"]


_SCALARS = (str, bool, int, float, type(None))


def _check_scalar(v: Any, where: str) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} is {v!r}; metadata numbers must be finite")
    if not isinstance(v, _SCALARS) or isinstance(v, np.generic):
        hint = (" (store dates as ISO strings like '2025-06-01': they compare correctly)"
                if hasattr(v, "isoformat") else "")
        raise TypeError(f"{where} is a {type(v).__name__} ({v!r:.40}); metadata values must be "
                        f"str, int, float, bool, None, or a list/tuple of those{hint}")


def check_metadata(metadata: Any, item_id: str = "?") -> dict:
    """What metadata may hold, checked when an item is indexed: a mapping with str keys, and
    values that are str, int, float (finite), bool, None, or a list/tuple of those. Such
    metadata survives save/load unchanged (tuples stay tuples); anything else is an error
    now rather than a silent change later."""
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata of item {item_id!r} must be a mapping, got "
                        f"{type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise TypeError(f"metadata key {key!r} of item {item_id!r} is a "
                            f"{type(key).__name__}; keys must be str (e.g. {str(key)!r})")
        where = f"metadata[{key!r}] of item {item_id!r}"
        if isinstance(value, (list, tuple)):
            for v in value:
                _check_scalar(v, f"an element of {where}")
        else:
            _check_scalar(value, where)
    return dict(metadata)


_OPS = {"$eq": lambda v, a: v == a, "$ne": lambda v, a: v != a,
        "$in": lambda v, a: v in a, "$nin": lambda v, a: v not in a,
        "$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
        "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}
OPERATORS = tuple(_OPS)


def validate_where(where: Any) -> dict | None:
    """Check a filter and return it as a dict (None or {} mean no filter).

    The language: ``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or
    ``{key: {"$op": value, ...}}`` with the operators ``$eq $ne $in $nin $gt $gte $lt
    $lte``; all keys must hold. Values are metadata scalars; ``$in``/``$nin`` take a
    list; ordering operators take a number or a str (compared as stored, so ISO dates work).
    """
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping like {{'status': 'current'}}, got "
                        f"{type(where).__name__}: {where!r:.60}")
    for key, cond in where.items():
        if not isinstance(key, str):
            raise TypeError(f"where key {key!r} must be a str (a metadata field name)")
        if isinstance(cond, Mapping):
            if not cond:
                raise ValueError(f"where[{key!r}] is an empty operator mapping; use e.g. "
                                 f"{{'$eq': value}}")
            for op, arg in cond.items():
                _check_op(key, op, arg)
        elif isinstance(cond, (list, tuple, set, frozenset)):
            _check_op(key, "$in", list(cond))
        else:
            _check_op(key, "$eq", cond)
    return dict(where)


def _check_op(key: str, op: Any, arg: Any) -> None:
    if op not in _OPS:
        raise ValueError(f"unknown filter operator {op!r} on {key!r}; use one of "
                         f"{', '.join(_OPS)}")
    if op in ("$in", "$nin"):
        if not isinstance(arg, (list, tuple, set, frozenset)):
            raise TypeError(f"where[{key!r}][{op!r}] must be a list of values, got "
                            f"{type(arg).__name__}: {arg!r:.40}")
        for a in arg:
            _check_scalar(a, f"a value in where[{key!r}][{op!r}]")
    elif op in ("$gt", "$gte", "$lt", "$lte"):
        if isinstance(arg, bool) or not isinstance(arg, (int, float, str)) or (
                isinstance(arg, float) and not math.isfinite(arg)):
            raise TypeError(f"where[{key!r}][{op!r}] must be a finite number or a str, got "
                            f"{arg!r:.40}")
    else:
        _check_scalar(arg, f"where[{key!r}][{op!r}]")


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Does ``metadata`` satisfy ``where`` (already validated)? A missing key fails every
    condition except ``$ne``/``$nin``; an ordering between a number and a str is False.

    >>> matches({"plan": "pro"}, {"plan": ["pro", "team"]})
    True
    """
    if not where:
        return True
    for key, cond in where.items():
        value = metadata.get(key)
        conds = (cond.items() if isinstance(cond, Mapping)
                 else [("$in", cond)] if isinstance(cond, (list, tuple, set, frozenset))
                 else [("$eq", cond)])
        for op, arg in conds:
            if op not in _OPS:
                _check_op(key, op, arg)  # raises, naming the operator and the key
            if value is None and op not in ("$ne", "$nin"):
                return False
            try:
                if not _OPS[op](value, arg):
                    return False
            except TypeError:  # "2025" > 3: incomparable values never match
                return False
    return True


def translate_where(where: Mapping[str, Any] | None, term) -> list:
    """The hook for stores that filter natively: validate ``where`` and call
    ``term(key, op, value)`` once per condition (list shorthand as ``$in``, a bare value as
    ``$eq``), returning the translated terms for the store to AND together. A store whose
    ``term`` cannot express a condition raises, so nothing is silently dropped."""
    where = validate_where(where) or {}
    out = []
    for key, cond in where.items():
        if isinstance(cond, Mapping):
            out += [term(key, op, arg) for op, arg in cond.items()]
        elif isinstance(cond, (list, tuple, set, frozenset)):
            out.append(term(key, "$in", list(cond)))
        else:
            out.append(term(key, "$eq", cond))
    return out
