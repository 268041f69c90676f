"""The ``where`` filter language over item metadata, and what metadata may hold.

``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or ``{key: {"$op": value}}`` with
``$eq $ne $in $nin $gt $gte $lt $lte``; all keys must hold, and ``{"$and": [filter, ...]}``
adds whole filters that must all hold too. There is no ``$or``: a filter can only narrow, which
is what lets ``scoped`` add an application's access scope that no caller's filter can widen.
``matches`` evaluates a filter in Python; ``translate_where`` hands each condition to a store
that filters natively.

>>> validate_where({"status": "current", "updated": {"$gte": "2025-01-01"}})
{'status': 'current', 'updated': {'$gte': '2025-01-01'}}
>>> matches({"status": "current", "updated": "2025-06-01"}, {"updated": {"$gte": "2025-01-01"}})
True
>>> scoped({"access": "internal"}, {"access": ["public"]})
{'$and': [{'access': ['public']}, {'access': 'internal'}]}
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["check_metadata", "validate_where", "matches", "translate_where", "scoped",
           "filter_keys", "OPERATORS"]


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
    $lte``; all keys must hold. ``{"$and": [filter, ...]}`` (alongside other keys or alone)
    holds when every filter in the list holds: how two filters on the same key are combined.
    Values are metadata scalars; ``$in``/``$nin`` take a list; ordering operators take a
    number or a str (compared as stored, so ISO dates work). Any other ``$`` key (``$or``,
    ``$not``) is refused: a filter can only narrow.
    """
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping like {{'status': 'current'}}, got "
                        f"{type(where).__name__}: {where!r:.60}")
    out = {}
    for key, cond in where.items():
        if not isinstance(key, str):
            raise TypeError(f"where key {key!r} must be a str (a metadata field name)")
        if key == "$and":
            if not isinstance(cond, (list, tuple)) or not all(isinstance(c, Mapping)
                                                              for c in cond):
                raise TypeError(f"where['$and'] must be a list of filters (mappings), got "
                                f"{cond!r:.60}")
            out[key] = [validate_where(c) for c in cond]
            continue
        if key.startswith("$"):
            raise ValueError(f"{key!r} is not part of the filter language: only '$and' "
                             f"combines filters, and nothing widens them (for one of several "
                             f"values of a key, use a list: {{'status': ['a', 'b']}})")
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
        out[key] = cond
    return out


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
        if key == "$and":
            if not all(matches(metadata, c) for c in cond):
                return False
            continue
        if key.startswith("$"):
            validate_where({key: cond})  # raises, naming the operator
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
        if key == "$and":  # every term is AND-ed, so the inner filters' terms simply join
            for c in cond:
                out += translate_where(c, term)
        elif isinstance(cond, Mapping):
            out += [term(key, op, arg) for op, arg in cond.items()]
        elif isinstance(cond, (list, tuple, set, frozenset)):
            out.append(term(key, "$in", list(cond)))
        else:
            out.append(term(key, "$eq", cond))
    return out


def _conditions(where: Mapping[str, Any] | None):
    """(key, condition) of every key of a validated filter, those inside ``$and`` included."""
    for key, cond in (where or {}).items():
        if key == "$and":
            for c in cond:
                yield from _conditions(c)
        else:
            yield key, cond


def filter_keys(where: Mapping[str, Any] | None) -> set[str]:
    """The metadata keys a filter looks at, those inside ``$and`` included.

    >>> sorted(filter_keys({"status": "current", "$and": [{"access": "public"}]}))
    ['access', 'status']
    """
    return {key for key, _ in _conditions(validate_where(where))}


def scoped(where: Mapping[str, Any] | None, scope: Mapping[str, Any] | None) -> dict | None:
    """The filter a search runs for a caller's ``where`` inside an application's ``scope``:
    ``{"$and": [scope, where]}``. The scope comes from the application (who the user is),
    never from the question; since the language has no ``$or`` and every part of ``$and``
    must hold, nothing in ``where`` can widen it. A document *without* a scope key is outside
    the scope even when a condition alone would let a missing key through (``$ne``, ``$nin``):
    such keys must also be present (``{"$ne": None}``). ``scope=None`` means no scope; an
    empty scope is refused (it would look like a restriction and be none).

    >>> scoped({"plan": "pro"}, {"access": {"$nin": ["internal"]}})
    {'$and': [{'access': {'$nin': ['internal']}}, {'access': {'$ne': None}}, {'plan': 'pro'}]}
    """
    where = validate_where(where) or None
    if scope is None:
        return where
    if not isinstance(scope, Mapping) or not scope:
        raise ValueError(f"scope must be a non-empty filter like {{'access': ['public']}} "
                         f"(or None for no scope), got {scope!r:.60}")
    scope = validate_where(scope)
    present = {key: {"$ne": None} for key, cond in _conditions(scope)
               if matches({}, {key: cond})}
    parts = [scope, *([present] if present else []), *([where] if where else [])]
    return parts[0] if len(parts) == 1 else {"$and": parts}
