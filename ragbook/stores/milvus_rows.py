"""Rows <-> records: how a ``retrieval.record`` is laid out in the Milvus collection
(``MilvusStore``'s schema) and read back unchanged (context split off again, tuples kept), and
the limits a row must fit, checked for every row before anything is written.

A Milvus server counts a ``VARCHAR``'s length in UTF-8 bytes and refuses a JSON value over
65,536 bytes; Milvus Lite counts characters and has no JSON limit, so a collection that fits
on Lite could fail to load into a server. We check the server's limits everywhere. Integers
in the JSON field must be int64 (pymilvus refuses |n| >= 2**64 only after the collection was
touched; Milvus compares JSON integers as int64).

>>> check_record({"id": "a", "doc_id": "a", "text": "hi", "metadata": {"n": 2**64}})
Traceback (most recent call last):
...
ValueError: item 'a': metadata['n'] = 18446744073709551616 is outside Milvus's int64 range ...
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..checks import check_vectors
from ..filters import INT64, date_key
from ..retrieval import index_text

__all__ = ["check_record", "to_row", "to_rows", "from_row", "hit_row", "VARCHAR_BYTES",
           "JSON_BYTES", "INT64"]

#: field -> the most UTF-8 bytes a Milvus server stores in it (the schema's max_length)
VARCHAR_BYTES = {"id": 1024, "doc_id": 1024, "text": 65_535, "tuples": 4096}
JSON_BYTES = 65_536                  # a Milvus server's limit on one JSON value
_FIX = {"id": "use shorter ids", "doc_id": "use shorter document ids",
        "text": "chunk the document first (ragbook.chunking.chunk_documents), or shorten "
                "its context",
        "tuples": "store fewer tuple-valued metadata keys, or shorter key names"}


def _utf8(value: str, item: str, what: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"item {item!r:.80}: {what} holds a lone surrogate, which Milvus "
                         f"cannot store (not valid UTF-8); decode the source with "
                         f"errors='replace'") from None


def _check_int(value: Any, item: str, key: str) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and \
            not INT64[0] <= value <= INT64[1]:
        raise ValueError(f"item {item!r:.80}: metadata[{key!r}] = {value} is outside Milvus's "
                         f"int64 range (-2**63 .. 2**63-1); store it as a str")


def check_record(rec: Mapping[str, Any]) -> dict:
    """The row fields of ``rec`` that are limited (id, doc_id, text with its context, tuples,
    metadata, its dates), checked against a Milvus server's limits; a ``ValueError`` names
    the item, the limit and the fix. Returns those fields, ready to write."""
    item = rec["id"]
    md = rec["metadata"]
    fields = {"id": item, "doc_id": rec["doc_id"], "text": index_text(rec),
              "tuples": json.dumps([k for k, v in md.items() if isinstance(v, tuple)])}
    for name, limit in VARCHAR_BYTES.items():
        n = len(_utf8(fields[name], item, f"its {name}"))
        if n > limit:
            raise ValueError(f"item {item!r:.80}: its {name} is {n:,} bytes of UTF-8; a Milvus "
                             f"VARCHAR field {name!r} holds at most {limit:,}: {_FIX[name]}")
    for key, value in md.items():
        for v in value if isinstance(value, (list, tuple)) else (value,):
            _check_int(v, item, key)
    fields["metadata"] = {k: list(v) if isinstance(v, tuple) else v for k, v in md.items()}
    # each ISO date again, as text whose order is time order: what date orderings compare
    fields["dates"] = {k: date_key(v) for k, v in md.items() if date_key(v) is not None}
    for name in ("metadata", "dates"):
        text = json.dumps(fields[name], ensure_ascii=False, separators=(",", ":"))
        n = len(_utf8(text, item, f"its {name}"))
        if n > JSON_BYTES:
            raise ValueError(f"item {item!r:.80}: its {name} is {n:,} bytes as JSON; a Milvus "
                             f"JSON field holds at most {JSON_BYTES:,}: keep long values out "
                             f"of metadata (in the text, or a reference to them)")
    return fields


def to_row(rec: Mapping[str, Any], vector: np.ndarray, seq: int) -> dict:
    """The collection row for record ``rec`` with its ``vector`` at corpus position ``seq``
    (checked by ``check_record``)."""
    context = rec.get("context") or ""
    return {**check_record(rec), "context_chars": len(context),
            "start": -1 if rec.get("start") is None else rec["start"],
            "end": -1 if rec.get("end") is None else rec["end"],
            "seq": seq, "vector": vector.tolist()}


def to_rows(records: Sequence[Mapping[str, Any]], vectors, seqs, dim: int) -> list[dict]:
    """The rows for ``records`` with their ``vectors`` (checked: ``dim``-d, one per record)
    at corpus positions ``seqs``; ``ValueError`` when an id repeats."""
    vectors = check_vectors(vectors, dim, len(records))
    if len({r["id"] for r in records}) != len(records):
        raise ValueError("the records to write repeat an id; ids must be unique")
    return [to_row(r, v, s) for r, v, s in zip(records, vectors, seqs, strict=True)]


def from_row(row: Mapping[str, Any]) -> dict:
    """The record a collection row was written from (``to_row`` undone): context split off
    the text again, tuple-valued metadata restored, -1 offsets back to None."""
    body, n = row["text"], row["context_chars"]
    tuples = set(json.loads(row["tuples"] or "[]"))
    md = {k: tuple(v) if k in tuples else v for k, v in (row["metadata"] or {}).items()}
    rec = {"id": row["id"], "doc_id": row["doc_id"], "text": body[n + 2:] if n else body,
           "start": None if row["start"] < 0 else row["start"],
           "end": None if row["end"] < 0 else row["end"], "metadata": md}
    if n:
        rec["context"] = body[:n]
    return rec


def hit_row(hit: Mapping[str, Any]) -> dict:
    """A search hit's row (pymilvus nests output fields under ``entity``)."""
    row = dict(hit.get("entity") or {})
    row["id"] = hit.get("id", row.get("id"))
    return row
