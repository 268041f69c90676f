"""Rows <-> records: how a ``retrieval.record`` is laid out in the Milvus collection
(``MilvusStore``'s schema) and read back unchanged (context split off again, tuples kept)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..retrieval import index_text


def _row(rec: Mapping[str, Any], vector: np.ndarray, seq: int) -> dict:
    body, context = index_text(rec), rec.get("context") or ""
    if len(body.encode("utf-8")) > 65_535:
        raise ValueError(f"item {rec['id']!r} is {len(body.encode('utf-8')):,} bytes of text; a "
                         f"Milvus VARCHAR holds at most 65,535: chunk the document first")
    if len(rec["id"].encode("utf-8")) > 1024 or len(rec["doc_id"].encode("utf-8")) > 1024:
        raise ValueError(f"item id {rec['id']!r:.60} or its doc_id is over 1,024 bytes")
    md = rec["metadata"]
    return {"id": rec["id"], "doc_id": rec["doc_id"], "text": body,
            "context_chars": len(context),
            "start": -1 if rec.get("start") is None else rec["start"],
            "end": -1 if rec.get("end") is None else rec["end"],
            "metadata": {k: list(v) if isinstance(v, tuple) else v for k, v in md.items()},
            "tuples": json.dumps([k for k, v in md.items() if isinstance(v, tuple)]),
            "seq": seq, "vector": vector.tolist()}


def _record(row: Mapping[str, Any]) -> dict:
    body, n = row["text"], row["context_chars"]
    tuples = set(json.loads(row["tuples"] or "[]"))
    md = {k: tuple(v) if k in tuples else v for k, v in (row["metadata"] or {}).items()}
    rec = {"id": row["id"], "doc_id": row["doc_id"], "text": body[n + 2:] if n else body,
           "start": None if row["start"] < 0 else row["start"],
           "end": None if row["end"] < 0 else row["end"], "metadata": md}
    if n:
        rec["context"] = body[:n]
    return rec


def _entity(hit: Mapping[str, Any]) -> dict:
    """A search hit's row (pymilvus nests output fields under ``entity``)."""
    row = dict(hit.get("entity") or {})
    row["id"] = hit.get("id", row.get("id"))
    return row
