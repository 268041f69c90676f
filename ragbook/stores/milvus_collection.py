"""One Milvus collection as ``MilvusStore`` lays it out, as functions of a pymilvus client and
a name: creating it (schema, indexes, the BM25 function), the alias a rebuild switches
(``NAME`` -> ``NAME__vN``, ``MilvusStore.create``), reading its rows by id or all of them,
one search of it (dense, BM25 or both fused inside Milvus), and the ``milvus.json`` pointer
to it that a saved index keeps.

One row per item (``milvus_rows`` converts between rows and records)::

    id (primary key)  doc_id  text  context_chars  start  end  metadata (JSON)  dates (JSON)
    tuples  seq
    vector  (FLOAT_VECTOR, FLAT or HNSW index, inner product)
    sparse  (SPARSE_FLOAT_VECTOR, written by Milvus's BM25 function from ``text``)

``MilvusStore`` keeps the state (which build awaits its first write, the next corpus
position, the fingerprint) and decides when each of these runs; nothing here holds any.

Measured quirks of Milvus Lite 3.2.2 (``tests/test_milvus.py`` pins each one): BM25
distances come back negative (``-score``; a server returns ``+score``), so scores are
``abs(distance)``; a reopened collection is not loaded (``open_collection`` loads it); a
second process opening the same folder fails with a bare "Open local milvus failed"
(``milvus_lite.open_lite`` says why); Lite knows only the ``standard`` and ``jieba``
tokenizers, always lower-cases, and ignores every filter but ``stop`` (a server's
``standard`` tokenizer needs the ``lowercase`` filter to match); BM25 statistics (IDF,
average length) are per segment, not per collection; ``in`` is not accepted on JSON paths
(``ragbook.stores.expressions``); Lite's BM25 ``k1`` defaults to 1.5, Milvus's and ours to
1.2, so it is always set (``create_collection``). New rows are searchable by BM25 without a
``flush`` (Strong consistency), but scored with the statistics of the segment they sit in:
``MilvusRetriever.build`` flushes the bulk load into one segment, while a row added or
upserted later sits in a small segment of its own and gets a near-zero IDF there (chapter 11
shows an edited chunk falling out of the BM25 top 20; rebuilding cures it). Dense search is
unaffected.

Rebuilds switch an alias: each ``create`` is a collection of its own, ``NAME__vN``, and
``NAME`` is an alias (Milvus Lite has aliases too) moved to it once its rows are written, so
a failed rebuild leaves the old collection live (``MilvusStore.create``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .expressions import ids_filter
from .milvus_lite import import_pymilvus, quiet

__all__ = ["FORMAT", "create_collection", "open_collection", "live_collection", "builds",
           "switch_alias", "drop_builds_before", "rows_by_id", "scan", "count_rows",
           "delete_rows", "search_collection", "write_pointer", "check_pointer"]

FORMAT = "1"   # the layout's version, kept as the collection property ``ragbook.format``


def create_collection(client, name: str, dim: int, properties: Mapping[str, str] | None, *,
                      index: str, hnsw_m: int, ef_construction: int,
                      analyzer: Mapping[str, Any] | None, bm25_k1: float,
                      bm25_b: float) -> dict[str, str]:
    """Create and load collection ``name``: one row per item (``milvus_rows.to_row``), the
    ``vector`` field for ``dim``-d vectors under an ``index`` (FLAT or HNSW with ``hnsw_m``
    links and ``ef_construction``) searched by inner product. ``analyzer`` analyzes ``text``
    and adds the ``sparse`` field Milvus's BM25 function writes from it (``bm25_k1``,
    ``bm25_b``); None makes a dense-only collection (a Milvus server before 2.5). Returns
    the properties kept with it: ``properties`` (as str) and ragbook's own
    (``ragbook.format``, ``ragbook.dim``, ``ragbook.index``)."""
    pm = import_pymilvus()
    s = pm.MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
    s.add_field("id", pm.DataType.VARCHAR, is_primary=True, max_length=1024)
    s.add_field("doc_id", pm.DataType.VARCHAR, max_length=1024)
    analyzed = ({"enable_analyzer": True, "analyzer_params": analyzer}
                if analyzer is not None else {})
    s.add_field("text", pm.DataType.VARCHAR, max_length=65_535, **analyzed)
    for field in ("context_chars", "start", "end", "seq"):
        s.add_field(field, pm.DataType.INT64)
    s.add_field("metadata", pm.DataType.JSON)
    s.add_field("dates", pm.DataType.JSON)      # the ISO dates in metadata, fixed width
    s.add_field("tuples", pm.DataType.VARCHAR, max_length=4096)
    s.add_field("vector", pm.DataType.FLOAT_VECTOR, dim=dim)
    ip = client.prepare_index_params()
    params = {"M": hnsw_m, "efConstruction": ef_construction} if index == "HNSW" else {}
    ip.add_index(field_name="vector", index_type=index, metric_type="IP", params=params)
    if analyzer is not None:
        s.add_field("sparse", pm.DataType.SPARSE_FLOAT_VECTOR)
        s.add_function(pm.Function(name="bm25", function_type=pm.FunctionType.BM25,
                                   input_field_names=["text"],
                                   output_field_names=["sparse"]))
        ip.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX",
                     metric_type="BM25", params={"bm25_k1": bm25_k1, "bm25_b": bm25_b})
    props = {"ragbook.format": FORMAT, "ragbook.dim": str(dim), "ragbook.index": index,
             **{str(k): str(v) for k, v in (properties or {}).items()}}
    client.create_collection(name, schema=s, index_params=ip, consistency_level="Strong",
                             properties=props)
    client.load_collection(name)
    return props


def open_collection(client, name: str, where: str | None) -> tuple[dict[str, str], set[str]]:
    """Load the existing collection ``name`` (a reopened one must be loaded before searching)
    and return its properties and its fields' names (``sparse``: it has BM25; ``dates``:
    written by a ragbook that keeps dates comparable, see ``milvus_rows.check_record``).
    ``FileNotFoundError`` when
    there is none (``where``: the database, for the message), ``ValueError`` when this
    ragbook did not write it."""
    if not client.has_collection(name):
        raise FileNotFoundError(f"no collection {name!r} at {where!r} (it has "
                                f"{client.list_collections()}); build one first")
    desc = client.describe_collection(name)
    props = dict(desc.get("properties") or {})
    if props.get("ragbook.format") != FORMAT:
        raise ValueError(f"collection {name!r} was not written by this "
                         f"ragbook (format {props.get('ragbook.format')!r}); rebuild it")
    client.load_collection(name)
    return props, {f["name"] for f in desc.get("fields", [])}


# -- which collection holds the name: rebuilds switch an alias ------------------------------
def live_collection(client, alias: str) -> str | None:
    """The collection behind the name ``alias`` (the alias's target; the name itself for a
    collection built before aliases), None when there is none."""
    if not client.has_collection(alias):
        return None
    return client.describe_collection(alias)["collection_name"]


def builds(client, alias: str) -> dict[str, int]:
    """The builds of the name ``alias``: ``NAME__vN`` -> N."""
    pattern = re.compile(re.escape(alias) + r"__v(\d+)")
    return {n: int(m[1]) for n in client.list_collections() if (m := pattern.fullmatch(n))}


def switch_alias(client, alias: str, new: str) -> None:
    """Point the name ``alias`` at collection ``new`` (one alias switch); a collection that
    still holds the name itself (built before aliases) is dropped first."""
    old = live_collection(client, alias)
    if old == alias:   # built before aliases: the name is a real collection
        client.drop_collection(old)   # (the new one is complete; only the name is missing)
        old = None
    if old is None:
        client.create_alias(new, alias)
    else:
        client.alter_alias(new, alias)


def drop_builds_before(client, alias: str, new: str) -> None:
    """Drop every build of ``alias`` older than ``new``: the one it replaced, and any that
    died before its switch."""
    versions = builds(client, alias)
    for name, n in versions.items():
        if n < versions.get(new, 0):
            client.drop_collection(name)


# -- reading rows ----------------------------------------------------------------------------
def rows_by_id(client, name: str, ids: Sequence[str], fields=("seq",)) -> dict[str, dict]:
    """id -> row (``id`` and ``fields``) of the rows of collection ``name`` with ``ids``
    that exist, queried a thousand ids at a time."""
    out: dict[str, dict] = {}
    ids = list(ids)
    for i in range(0, len(ids), 1000):
        rows = client.query(name, filter=ids_filter(ids[i:i + 1000]),
                            output_fields=["id", *fields])
        out.update({r["id"]: r for r in rows})
    return out


def scan(client, name: str, fields: list[str]) -> list[dict]:
    """Every row of collection ``name`` (its ``fields``), read with a query iterator."""
    with quiet("pymilvus.client.iterator.query_iterator"):  # Lite: no session timestamp
        it = client.query_iterator(name, batch_size=1000, filter="", output_fields=fields)
    rows = []
    try:
        while batch := it.next():
            rows += batch
    finally:
        it.close()
    return rows


def count_rows(client, name: str) -> int:
    """How many rows collection ``name`` holds."""
    rows = client.query(name, filter="", output_fields=["count(*)"])
    return int(rows[0]["count(*)"])


def delete_rows(client, name: str, ids: Sequence[str]) -> None:
    """Delete the rows of collection ``name`` with ``ids``, a thousand at a time."""
    ids = list(ids)
    for i in range(0, len(ids), 1000):
        client.delete(name, filter=ids_filter(ids[i:i + 1000]))


# -- searching -------------------------------------------------------------------------------
def _dense_params(index: str, ef_search: int, k: int) -> dict:
    if index == "HNSW":  # a graph search returns at most ef results: explore >= k
        return {"metric_type": "IP", "params": {"ef": max(ef_search, k)}}
    return {"metric_type": "IP"}


def search_collection(client, name: str, field: str, data: list, k: int, expr: str, *,
                      output_fields: list[str], index: str, ef_search: int,
                      vectors: list | None = None, depth: int = 0,
                      rrf_k: int = 60) -> list[list[tuple[dict, float]]]:
    """Per query, the best ``k`` (hit, score) pairs of one search of collection ``name``,
    ``expr`` applied inside it: ``field="vector"`` searches ``data``'s vectors (inner
    product; HNSW explores ``max(ef_search, k)``), ``"sparse"`` BM25 over ``data``'s texts,
    ``"hybrid"`` both (``vectors`` the dense side), each ``depth`` deep, fused by
    ``RRFRanker(rrf_k)``. A hit is pymilvus's (``id``, ``entity`` with ``output_fields``)."""
    if field == "hybrid":
        pm = import_pymilvus()
        reqs = [pm.AnnSearchRequest(data=vectors, anns_field="vector",
                                    param=_dense_params(index, ef_search, depth), limit=depth,
                                    expr=expr or None),
                pm.AnnSearchRequest(data=data, anns_field="sparse", param={},
                                    limit=depth, expr=expr or None)]
        res = client.hybrid_search(name, reqs, ranker=pm.RRFRanker(rrf_k), limit=k,
                                   output_fields=output_fields)
    else:
        params = _dense_params(index, ef_search, k) if field == "vector" else {}
        res = client.search(name, data=data, anns_field=field, filter=expr, limit=k,
                            output_fields=output_fields, search_params=params)
    # BM25: Milvus Lite returns -score, a Milvus server +score; a BM25 score is >= 0
    fix = abs if field == "sparse" else float
    return [[(h, fix(float(h["distance"]))) for h in hits] for hits in res]


# -- the pointer a saved index keeps ----------------------------------------------------------
def write_pointer(folder, uri: str, name: str, count: int) -> None:
    """Write ``milvus.json`` into ``folder``: where collection ``name`` is and its rows."""
    (Path(folder) / "milvus.json").write_text(json.dumps(
        {"uri": uri, "collection": name, "count": count}), encoding="utf-8")


def check_pointer(folder, uri: str | None, name: str) -> None:
    """``ValueError`` unless the ``milvus.json`` in ``folder`` points to collection ``name``
    at ``uri``."""
    saved = json.loads((Path(folder) / "milvus.json").read_text(encoding="utf-8"))
    if (saved["uri"], saved["collection"]) != (uri, name):
        raise ValueError(f"{str(folder)!r} points to collection {saved['collection']!r} at "
                         f"{saved['uri']!r}, not this store's {name!r} at {uri!r}")
