"""The ``where`` filter language over item metadata, and what metadata may hold.

``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or ``{key: {"$op": value}}`` with
``$eq $ne $in $nin $gt $gte $lt $lte``; all keys must hold, and ``{"$and": [filter, ...]}``
adds whole filters that must all hold too. There is no ``$or``: a filter can only narrow, which
is what lets ``scoped`` add an application's access scope that no caller's filter can widen.
``matches`` evaluates a filter in Python; ``translate_where`` hands each condition to a store
that filters natively.

What the conditions *mean* is fixed here, so that an access scope built from them cannot leak:

* **A list-valued field is a set of values.** ``$eq``/``$in`` hold when the set holds the
  value / any of the values; ``$ne``/``$nin`` are their negations, so an item with *any*
  denied value is out (a deny-list is safe). An empty list holds no value (it fails
  ``$eq``/``$in`` and passes ``$ne``/``$nin``) but is not missing. An ordering never holds
  for a list.
* **Orderings compare numbers or dates, never text.** ``$gt $gte $lt $lte`` take a number
  (a stored bool counts as 1 or 0) or an ISO date (``'2025-06-01'``, ``'2025-06-01T09:30'``)
  and hold only for a stored value of the same kind: ``'10' <= '3'`` as text would pass a
  clearance check it should fail, so ``{'level': {'$lte': '3'}}`` is refused (write ``3``)
  and a stored ``'10'`` fails ``<= 3``.
* **Text is compared as the same text, however it is encoded**: keys and str values are
  Unicode NFC when indexed (``check_metadata``) and when filtered (``validate_where``), so a
  deny-list of ``'café'`` also drops an item labelled ``'cafe\u0301'`` (the same word,
  decomposed: what macOS file names and some editors write). Case and width stay
  significant (``'ACME'`` and ``'acme'`` may be two tenants).
* **A scope must constrain something** (``scoped``): ``{'$and': []}`` — what a caller builds
  for a user with no groups — and ``{'access': {'$nin': []}}`` — an empty deny-list, for a
  user with nothing denied (or ``{'$nin': [None]}``, ``{'$ne': None}``: it denies only a
  missing key) — are refused instead of granting everything.

>>> validate_where({"status": "current", "updated": {"$gte": "2025-01-01"}})
{'status': 'current', 'updated': {'$gte': '2025-01-01'}}
>>> matches({"status": "current", "updated": "2025-06-01"}, {"updated": {"$gte": "2025-01-01"}})
True
>>> matches({"access": ["public", "internal"]}, {"access": {"$nin": ["internal"]}})
False
>>> scoped({"access": "internal"}, {"access": ["public"]})
{'$and': [{'access': ['public']}, {'access': 'internal'}]}
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

__all__ = ["check_metadata", "own_metadata", "date_key", "validate_where", "matches",
           "translate_where", "scoped", "filter_keys", "nfc", "OPERATORS"]


_SCALARS = (str, bool, int, float, type(None))
INT64 = (-2**63, 2**63 - 1)          # the integers every store (Milvus's JSON too) holds exactly
MAX_DEPTH = 32                       # nested $and levels a filter may have


def _check_scalar(v: Any, where: str) -> None:
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"{where} is {v!r}; metadata numbers must be finite")
    if isinstance(v, int) and not isinstance(v, bool) and not INT64[0] <= v <= INT64[1]:
        raise ValueError(f"{where} is {v}, outside the int64 range (-2**63 .. 2**63-1) that "
                         f"every store compares exactly; store it as a str (it then compares "
                         f"by equality only)")
    if not isinstance(v, _SCALARS) or isinstance(v, np.generic):
        hint = (" (store dates as ISO strings like '2025-06-01': they compare correctly)"
                if hasattr(v, "isoformat") else
                " (a numpy scalar: convert it with float(), int(), bool() or .item())"
                if isinstance(v, np.generic) else "")
        raise TypeError(f"{where} is a {type(v).__name__} ({v!r:.40}); metadata values must be "
                        f"str, int, float, bool, None, or a list/tuple of those{hint}")


def nfc(value: Any) -> Any:
    """``value`` with each str in it (itself, or a member of a list, tuple or set) in Unicode
    NFC, the composed form, so that canonically equivalent texts are equal; anything else as
    it is. ASCII needs no work, and an unchanged container is returned as it is.

    >>> nfc("cafe\u0301") == "caf\u00e9", nfc(["a", 1])
    (True, ['a', 1])
    """
    if isinstance(value, str):
        return value if value.isascii() else unicodedata.normalize("NFC", value)
    if isinstance(value, (list, tuple, set, frozenset)) and any(
            isinstance(v, str) and not v.isascii() for v in value):
        kind = type(value) if type(value) in (list, tuple, set, frozenset) else list
        return kind(nfc(v) for v in value)
    return value


def check_metadata(metadata: Any, item_id: str = "?") -> dict:
    """What metadata may hold, checked when an item is indexed: a mapping with str keys, and
    values that are str, int, float (finite), bool, None, or a list/tuple of those. Such
    metadata survives save/load unchanged (tuples stay tuples); anything else is an error
    now rather than a silent change later. Keys and str values are returned in NFC (``nfc``:
    what filters compare); two keys that are one text in two encodings are an error."""
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
    out = own_metadata({nfc(k): nfc(v) for k, v in metadata.items()})
    if len(out) < len(metadata):
        twin = next(k for k in out if sum(nfc(m) == k for m in metadata) > 1)
        raise ValueError(f"metadata of item {item_id!r} holds the key {twin!r} twice, in two "
                         f"Unicode encodings (composed and decomposed); keep one")
    return out


def own_metadata(metadata: Mapping[str, Any]) -> dict:
    """A copy of checked ``metadata`` that shares no mutable value with it (lists copied;
    tuples and scalars are immutable): an index keeps its own, and a Hit hands out its own,
    so changing one afterwards cannot move an item into or out of a scope."""
    return {k: list(v) if isinstance(v, list) else v for k, v in metadata.items()}


_OPS = {"$eq": lambda v, a: v == a, "$ne": lambda v, a: v != a,
        "$in": lambda v, a: v in a, "$nin": lambda v, a: v not in a,
        "$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
        "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}
_NEGATED = {"$ne": "$eq", "$nin": "$in"}           # a negation holds where its positive does not
_RANGES = ("$gt", "$gte", "$lt", "$lte")
OPERATORS = tuple(_OPS)


def validate_where(where: Any, _depth: int = 0) -> dict | None:
    """Check a filter and return it as a dict (None or {} mean no filter).

    The language: ``{key: value}`` (equality), ``{key: [v1, v2]}`` (one of), or
    ``{key: {"$op": value, ...}}`` with the operators ``$eq $ne $in $nin $gt $gte $lt
    $lte``; all keys must hold. ``{"$and": [filter, ...]}`` (alongside other keys or alone)
    holds when every filter in the list holds: how two filters on the same key are combined.
    Values are metadata scalars; ``$in``/``$nin`` take a list; ordering operators take a
    number or a str (compared as stored, so ISO dates work). Any other ``$`` key (``$or``,
    ``$not``) is refused: a filter can only narrow. Keys and str values come back in NFC
    (``nfc``), as ``check_metadata`` stores them.
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
            if _depth >= MAX_DEPTH:
                raise ValueError(f"the filter nests '$and' more than {MAX_DEPTH} levels deep; "
                                 f"'$and' is associative: list every filter in one '$and'")
            out[key] = [validate_where(c, _depth + 1) for c in cond]
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
        if nfc(key) in out:
            raise ValueError(f"where names the key {nfc(key)!r} twice, in two Unicode "
                             f"encodings (composed and decomposed); to combine two conditions "
                             f"on one key, use {{'$and': [{{key: ...}}, {{key: ...}}]}}")
        out[nfc(key)] = ({op: nfc(arg) for op, arg in cond.items()} if isinstance(cond, Mapping)
                         else nfc(cond))
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
    elif op in _RANGES:
        if isinstance(arg, np.generic):  # refused as for $eq: np.float64 is a float, but a
            _check_scalar(arg, f"where[{key!r}][{op!r}]")  # store writes "np.float64(3.0)"
        if isinstance(arg, str) and _as_date(arg) is None:
            fix = (f"write {arg.strip()}" if _NUMBER.fullmatch(arg.strip())
                   else "write a number, or a date as '2025-06-01'")
            raise ValueError(f"where[{key!r}][{op!r}] = {arg!r:.40} is text; {op} compares "
                             f"numbers or ISO dates, never text (as text '10' < '3'): {fix}")
        if isinstance(arg, bool) or not isinstance(arg, (int, float, str)) or (
                isinstance(arg, float) and not math.isfinite(arg)):
            raise TypeError(f"where[{key!r}][{op!r}] must be a finite number or an ISO date "
                            f"('2025-06-01'), got {arg!r:.40}")
        if isinstance(arg, int):
            _check_scalar(arg, f"where[{key!r}][{op!r}]")
    else:
        _check_scalar(arg, f"where[{key!r}][{op!r}]")


def matches(metadata: Mapping[str, Any], where: Mapping[str, Any] | None) -> bool:
    """Does ``metadata`` satisfy ``where`` (already validated)? A missing key (or None) fails
    every condition except ``$ne``/``$nin``; a list value holds a
    condition when any of its values does (``$ne``/``$nin``: when none is excluded); an
    ordering holds only between numbers or between ISO dates (module docstring).

    >>> matches({"plan": "pro"}, {"plan": ["pro", "team"]})
    True
    >>> [matches({"level": v}, {"level": {"$lte": 3}}) for v in ("10", 2)]
    [False, True]
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
        # the filter's texts are NFC (validate_where), and so are indexed ones
        # (check_metadata), but not those an older ragbook saved: compare like with like
        value = nfc(metadata.get(key))
        conds = (cond.items() if isinstance(cond, Mapping)
                 else [("$in", cond)] if isinstance(cond, (list, tuple, set, frozenset))
                 else [("$eq", cond)])
        for op, arg in conds:
            if op not in _OPS:
                _check_op(key, op, arg)  # raises, naming the operator and the key
            if not _holds(op, value, arg):
                return False
    return True


def _holds(op: str, value: Any, arg: Any) -> bool:
    """One condition on one stored value, with the meanings of the module docstring."""
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    values = [v for v in values if v is not None]
    if op in _NEGATED:                       # no stored value is the excluded one
        if arg is None or (op == "$nin" and None in arg):
            if value is None:
                return False                 # missing, and a missing value is excluded
            arg = arg if op == "$ne" else [a for a in arg if a is not None]
        return not any(_holds(_NEGATED[op], v, arg) for v in values)
    if not values:
        return False                         # missing or empty: fails every positive condition
    if op in _RANGES:
        if isinstance(value, (list, tuple)):
            return False                     # an ordering never holds for a list
        v, a = _comparable(values[0]), _comparable(arg)
        if v is None or a is None or v[0] != a[0]:
            return False
        return _OPS[op](v[1], a[1])
    return any(_OPS[op](v, arg) for v in values)


# a plain decimal literal, the only text a "write it as a number" hint may repeat
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def _as_date(text: str) -> datetime | None:
    """An ISO date or date-time (``'2025-06-01'``, ``'2025-06-01T09:30'``) as a naive
    datetime (a time zone is dropped: dates are compared on their own clock), else None."""
    if len(text) < 10 or not text[:4].isdigit() or text[4] != "-":
        return None
    try:
        return datetime.fromisoformat(text).replace(tzinfo=None)
    except ValueError:
        return None


def date_key(value: Any) -> str | None:
    """The ISO date ``value`` as fixed-width text whose text order is time order
    (``'2025-06-01 12:00'`` -> ``'2025-06-01T12:00:00.000000'``), or None when it is not
    one: what a store that compares dates as text (Milvus) keeps and compares instead of the
    text as written, where a space, a missing seconds field or an offset would sort wrong.

    >>> date_key("2025-06-01"), date_key("later")
    ('2025-06-01T00:00:00.000000', None)
    """
    date = _as_date(value) if isinstance(value, str) else None
    return None if date is None else date.isoformat(timespec="microseconds")


def _comparable(x: Any) -> tuple[str, int | float | datetime] | None:
    """What an ordering compares, with its kind: a number as itself (int and float compare
    exactly in Python, so 2**53 + 1 stays above 2**53; a stored bool as 1 or 0, as Python and
    Milvus both count it; a bool *bound* is refused by ``validate_where``), an ISO date
    string as a datetime; None for anything else (text), which no ordering holds for."""
    if isinstance(x, (int, float)):
        return "number", int(x) if isinstance(x, bool) else x
    if isinstance(x, str):
        date = _as_date(x)
        return None if date is None else ("date", date)
    return None


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


def _denies_nothing(cond: Any) -> bool:
    """Is a scope condition only deny-lists that deny no value: ``{'$nin': []}``, and the
    spellings of "nothing denied" that hold only None (``{'$nin': [None]}``, ``{'$ne':
    None}``, what ``{'$ne': user.denied_group}`` is for a user with none)? Excluding None only
    excludes a missing key, which a scope excludes anyway: it then requires no more than the
    key's presence, a restriction that is none."""
    return isinstance(cond, Mapping) and all(
        (op == "$nin" and all(a is None for a in arg)) or (op == "$ne" and arg is None)
        for op, arg in cond.items())


def scoped(where: Mapping[str, Any] | None, scope: Mapping[str, Any] | None) -> dict | None:
    """The filter a search runs for a caller's ``where`` inside an application's ``scope``:
    ``{"$and": [scope, where]}``. The scope comes from the application (who the user is),
    never from the question; since the language has no ``$or`` and every part of ``$and``
    must hold, nothing in ``where`` can widen it. A document *without* a scope key is outside
    the scope even when a condition alone would let a missing key through (``$ne``, ``$nin``):
    such keys must also be present (``{"$ne": None}``). ``scope=None`` means no scope; a
    scope that constrains nothing (``{}``, ``{"$and": []}``) is refused: it would look like a
    restriction and be none, and so is one made only of empty deny-lists
    (``{'access': {'$nin': []}}``, ``{'$nin': [None]}``, ``{'$ne': None}``: every item with
    the key passes). An empty allow-list
    (``{'access': []}``) is kept: it is the scope no item passes.

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
    if next(_conditions(scope), None) is None:
        raise ValueError(f"scope {scope!r:.80} constrains nothing, so it would grant every "
                         f"item: a user with no groups needs a scope no item passes (e.g. "
                         f"{{'access': {{'$in': []}}}}) or no search at all; scope=None is how "
                         f"to say 'no scope'")
    if all(_denies_nothing(cond) for _, cond in _conditions(scope)):
        raise ValueError(f"scope {scope!r:.80} constrains nothing: an empty deny-list "
                         f"({{'$nin': []}}, {{'$nin': [None]}} or {{'$ne': None}}, what a caller "
                         f"builds for a user with nothing denied) would grant every item that "
                         f"has the key; scope by what the user may see (e.g. {{'access': "
                         f"['public', 'internal']}}), or pass scope=None to say 'no scope'")
    present = {key: {"$ne": None} for key, cond in _conditions(scope)
               if matches({}, {key: cond})}
    parts = [scope, *([present] if present else []), *([where] if where else [])]
    return parts[0] if len(parts) == 1 else {"$and": parts}
