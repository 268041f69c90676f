"""``where`` filters as Milvus boolean expressions, with the meaning ragbook gives them.

Milvus filters a search with a boolean expression over the collection's fields; ragbook
keeps metadata in one JSON field, so ``{"status": "current"}`` becomes
``metadata["status"] == "current"``. Three things make the translation more than string
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

>>> milvus_filter({"department": "community", "status": {"$ne": "superseded"}})
'metadata["department"] == "community" and (metadata["status"] is null or \
metadata["status"] != "superseded")'
"""
from __future__ import annotations

import math
import operator
from collections.abc import Mapping
from typing import Any

from ..filters import translate_where

__all__ = ["milvus_filter", "ids_filter", "MATCH_NOTHING"]

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
                  old_server: bool = False) -> str:
    """``where`` (the ragbook filter language) as a Milvus boolean expression over the JSON
    ``field``, with the same meaning as ``ragbook.filters.matches``: '' for no filter,
    ``MATCH_NOTHING`` when nothing can pass (``{"k": []}``). A missing key fails every
    condition but ``$ne``/``$nin``, so those add ``is null or``. Values are quoted and
    escaped; one that cannot be written raises, naming the key. ``old_server=True`` writes
    for a Milvus server before 2.5 (``_old_server_term``).

    >>> milvus_filter({"plan": ["pro", "team"], "updated": {"$gte": "2025-01-01"}})
    '(metadata["plan"] == "pro" or metadata["plan"] == "team") and \
metadata["updated"] >= "2025-01-01"'
    """
    def term(key: str, op: str, value: Any) -> str:
        path = f"{field}[{_string(key, f'where key {key!r}')}]"
        what = f"where[{key!r}][{op!r}]"
        if old_server:
            return _old_server_term(path, op, value, what, key)
        if op in ("$in", "$nin"):
            vals = [_literal(v, f"a value in {what}") for v in value if v is not None]
            if op == "$in":
                if not vals:  # matches(): None never equals anything; [] holds nothing
                    return MATCH_NOTHING
                ors = " or ".join(f"{path} == {v}" for v in vals)
                return f"({ors})" if len(vals) > 1 else ors
            ands = " and ".join(f"{path} != {v}" for v in vals)
            if any(v is None for v in value):  # a null value is "in" [None]: exclude it
                return f"({path} is not null and {ands})" if vals else f"{path} is not null"
            if len(vals) > 1:
                ands = f"({ands})"
            return f"({path} is null or {ands})" if vals else ""
        if value is None:
            if op == "$ne":
                return f"{path} is not null"
            if op == "$eq":
                return MATCH_NOTHING
            raise ValueError(f"{what} is None; an ordering needs a number or a str")
        lit = _literal(value, what)
        if op == "$ne":
            return f"({path} is null or {path} != {lit})"
        return f"{path} {_OPS[op]} {lit}"

    terms = [t for t in translate_where(where, term) if t]
    if MATCH_NOTHING in terms:
        return MATCH_NOTHING
    return " and ".join(terms)


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
    if op in _PY:
        bools = [f"{path} == {b}" for b, n in (("true", 1), ("false", 0))
                 if not isinstance(value, str) and _PY[op](n, value)]
        cmp = f"{path} {_OPS[op]} {_literal(value, what)}"
        return f"({' or '.join([cmp, *bools])})" if bools else cmp
    lits = [_literal(v, what) for v in (value if op in ("$in", "$nin") else [value])
            if v is not None]
    lits = list(dict.fromkeys(t for lit in lits for t in (lit, _TWINS.get(lit)) if t))
    if op in ("$eq", "$in"):
        if not lits:
            return MATCH_NOTHING
        ors = " or ".join(f"{path} == {t}" for t in lits)
        return f"({ors})" if len(lits) > 1 else ors
    ands = " and ".join(f"{path} != {t}" for t in lits)       # $ne, $nin
    return f"({ands})" if len(lits) > 1 else ands


def ids_filter(ids, field: str = "id") -> str:
    r"""``field in [...]`` for primary keys, each quoted and escaped. (pymilvus's own
    ``get``/``delete`` by id write ``id in ['...']`` unescaped, which breaks on an id holding a
    quote or a backslash; the store uses this instead.)

    >>> ids_filter(["a:0-5", 'say "hi"'])
    'id in ["a:0-5", "say \\"hi\\""]'
    """
    return f"{field} in [{', '.join(_string(i, 'item id') for i in ids)}]"
