"""``where`` filters as Milvus boolean expressions, with the meaning ragbook gives them.

Milvus filters a search with a boolean expression over the collection's fields; ragbook
keeps metadata in one JSON field, so ``{"status": "current"}`` becomes
``metadata["status"] == "current"``. Five things make the translation more than string
formatting:

* **Missing keys.** ``ragbook.filters.matches`` lets an item without the key pass ``$ne``
  and ``$nin``; in Milvus a comparison with a missing JSON key (or a JSON null) is false,
  so those terms become ``metadata["k"] is null or ...``.
* **Quoting.** Keys and string values are double-quoted, with backslash, double quote,
  newline, carriage return and tab escaped (the escapes both Milvus Lite and a Milvus server
  accept); anything else is written as itself. A value no expression can carry (a lone
  surrogate) raises, naming the key.
* **``in`` on a JSON path.** Milvus Lite rejects ``metadata["k"] in [...]``, so a list
  becomes ``==`` terms joined by ``or`` (a Milvus server accepts both).
* **List values.** A list in the metadata is a set of values (``ragbook.filters``), and a
  JSON array equals no scalar, so every ``==`` test also asks ``json_contains_any``;
  ``$ne``/``$nin`` are the negation of that whole test,
  so an item with any excluded value is out, as in Python.
* **Dates.** Milvus orders strings as text, and ISO dates as written do not sort as times
  (``"2025-06-01 12:00" < "2025-06-01T09:30"`` as text). Each row also keeps its metadata's
  dates in a ``dates`` JSON field as fixed-width ``filters.date_key`` text, and a date
  ordering compares that: ``dates["updated"] >= "2025-01-01T00:00:00.000000"``.

>>> milvus_filter({"status": {"$ne": "superseded"}})
'(metadata["status"] is null or not (metadata["status"] == "superseded" or \
json_contains_any(metadata["status"], ["superseded"])))'
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..filters import date_key, translate_where

__all__ = ["milvus_filter", "ids_filter", "any_of", "MATCH_NOTHING"]

MATCH_NOTHING = "false"    # what milvus_filter returns for a filter no item can pass
_OPS = {"$eq": "==", "$ne": "!=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _string(value: str, what: str) -> str:
    """A double-quoted Milvus string literal. Milvus's grammar allows C escapes; Milvus Lite
    accepts only \\\\ \\" \\n \\r \\t, so every other character is written as itself."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} = {value!r:.60} holds a lone surrogate, which no Milvus "
                         f"expression can carry; decode the source with errors='replace'") from None
    out = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
           .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{out}"'


def _literal(value: Any, what: str) -> str:
    """``value`` as a Milvus literal; a numpy scalar is refused (``validate_where`` refuses it
    first): ``repr(np.float64(3))`` is ``np.float64(3.0)``, which Milvus cannot parse."""
    if isinstance(value, np.generic):
        raise TypeError(f"{what} = {value!r:.40} is a numpy {type(value).__name__}; convert it "
                        f"with float(), int() or .item() before filtering on it")
    if isinstance(value, str):
        return _string(value, what)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    raise ValueError(f"{what} = {value!r:.40} cannot be written as a Milvus literal; filter on "
                     f"str, int, float or bool values")


def milvus_filter(where: Mapping[str, Any] | None, field: str = "metadata", *,
                  old_server: bool = False, dates: str | None = "dates") -> str:
    """``where`` (the ragbook filter language) as a Milvus boolean expression over the JSON
    ``field``, with the same meaning as ``ragbook.filters.matches``: '' for no filter,
    ``MATCH_NOTHING`` when nothing can pass (``{"k": []}``). A missing key fails every
    condition but ``$ne``/``$nin``, so those add ``is null or``. Values are quoted and
    escaped; one that cannot be written raises, naming the key. ``old_server=True`` writes
    for a Milvus server before 2.5 (``_old_server_term``). A date ordering compares the
    JSON field ``dates``, where each row keeps its ISO dates as ``filters.date_key`` text
    (None: a collection written without it, where a date ordering raises).

    >>> milvus_filter({"plan": ["pro", "team"], "seats": {"$gte": 10}})
    '(metadata["plan"] == "pro" or metadata["plan"] == "team" or \
json_contains_any(metadata["plan"], ["pro", "team"])) and metadata["seats"] >= 10'
    """
    def term(key: str, op: str, value: Any) -> str:
        path = f"{field}[{_string(key, f'where key {key!r}')}]"
        what = f"where[{key!r}][{op!r}]"
        if old_server:
            return _old_server_term(path, op, value, what, key)
        if op in ("$in", "$nin"):
            vals = [_literal(v, f"a value in {what}") for v in value if v is not None]
            if op == "$in":
                # matches(): None never equals anything; [] holds nothing
                return any_of(path, vals) if vals else MATCH_NOTHING
            if any(v is None for v in value):  # a null value is "in" [None]: exclude it
                return (f"({path} is not null and not {any_of(path, vals)})" if vals
                        else f"{path} is not null")
            return f"({path} is null or not {any_of(path, vals)})" if vals else ""
        if value is None:
            if op == "$ne":
                return f"{path} is not null"
            if op == "$eq":
                return MATCH_NOTHING
            raise ValueError(f"{what} is None; an ordering needs a number or a date")
        lit = _literal(value, what)
        if op == "$ne":
            return f"({path} is null or not {any_of(path, [lit])})"
        if op == "$eq":
            return any_of(path, [lit])
        if isinstance(value, str):
            return _date_ordering(key, op, value, dates)
        return f"{path} {_OPS[op]} {lit}"

    terms = [t for t in translate_where(where, term) if t]
    if MATCH_NOTHING in terms:
        return MATCH_NOTHING
    return " and ".join(terms)


def _date_ordering(key: str, op: str, value: str, dates: str | None) -> str:
    """An ordering on an ISO date (``validate_where`` refused other text). Milvus compares
    strings as text, and written dates do not sort as times ('2025-06-01 12:00' is below
    '2025-06-01T09:30' as text), so the term compares the row's ``dates`` field, which holds
    every ISO date of its metadata as ``date_key`` text (fixed width: text order is time
    order), with the bound written the same way; a value that is no date has no entry there,
    and a comparison with a missing key is false, as in ``matches``."""
    if dates is None:
        raise ValueError(f"where[{key!r}][{op!r}] compares dates, but this collection was "
                         f"written by an older ragbook that kept no comparable dates; rebuild "
                         f"it (ragbook index ... --out PATH), or filter on numbers (20250601)")
    path = f"{dates}[{_string(key, f'where key {key!r}')}]"
    return f"{path} {_OPS[op]} {_string(date_key(value), f'where[{key!r}][{op!r}]')}"


def any_of(path: str, literals: list[str]) -> str:
    """The JSON value at ``path`` is one of ``literals``, or is an array holding one of them
    (``json_contains_any``: a JSON array equals no scalar).

    >>> any_of('m["plan"]', ['"pro"'])
    '(m["plan"] == "pro" or json_contains_any(m["plan"], ["pro"]))'
    """
    eqs = [f"{path} == {lit}" for lit in literals]   # json_contains(p, -2) does not parse:
    contains = f"json_contains_any({path}, [{', '.join(literals)}])"   # the list form does
    return f"({' or '.join([*eqs, contains])})"


_TWINS = {"true": "1", "false": "0", "1": "true", "0": "false", "1.0": "true",
          "0.0": "false", "-0.0": "false"}
_PY = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _old_server_term(path: str, op: str, value: Any, what: str, key: str) -> str:
    """One condition for a Milvus server before 2.5 (measured on 2.3.5), which parses no
    ``is null`` but whose ``!=`` is already true for a missing key or a JSON null, and where
    a JSON bool never equals a number (``matches``, in Python, has ``True == 1``): each 0/1/
    True/False literal is compared with its twin too. A condition that must exclude None
    raises: such a server cannot tell a JSON null from a value.

    >>> _old_server_term('m["k"]', "$gte", 1, "where['k']['$gte']", "k")
    '(m["k"] >= 1 or m["k"] == true)'
    """
    if op in ("$ne", "$nin") and (value is None or op == "$nin" and None in value):
        raise ValueError(f"{what} excludes None, which needs 'is not null': Milvus servers "
                         f"before 2.5 cannot parse it (nor tell a JSON null from a value); "
                         f"filter on the values you want instead (e.g. {{{key!r}: [...]}}), "
                         f"or use Milvus >= 2.5 or Milvus Lite")
    if op in _PY and isinstance(value, str):
        raise ValueError(f"{what} compares ISO dates, which ragbook does not filter on "
                         f"Milvus servers before 2.5 (never measured there); use Milvus >= 2.5 "
                         f"or Milvus Lite, or store the date as a number (20250601)")
    if op in _PY:
        bools = [f"{path} == {b}" for b, n in (("true", 1), ("false", 0)) if _PY[op](n, value)]
        cmp = f"{path} {_OPS[op]} {_literal(value, what)}"
        return f"({' or '.join([cmp, *bools])})" if bools else cmp
    lits = [_literal(v, what) for v in (value if op in ("$in", "$nin") else [value])
            if v is not None]
    lits = list(dict.fromkeys(t for lit in lits for t in (lit, _TWINS.get(lit)) if t))
    if op in ("$eq", "$in"):
        return any_of(path, lits) if lits else MATCH_NOTHING
    return f"not {any_of(path, lits)}" if lits else ""         # $ne, $nin ([]: no limit)


def ids_filter(ids, field: str = "id") -> str:
    r"""``field in [...]`` for primary keys, each quoted and escaped. (pymilvus's own
    ``get``/``delete`` by id write ``id in ['...']`` unescaped, which breaks on an id holding a
    quote or a backslash; the store uses this instead.)

    >>> ids_filter(["a:0-5", 'say "hi"'])
    'id in ["a:0-5", "say \\"hi\\""]'
    """
    return f"{field} in [{', '.join(_string(i, 'item id') for i in ids)}]"
