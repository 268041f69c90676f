"""Chapter 11 (solutions/11-beyond-one-machine.py): Milvus filter expressions, the bytes of a
vector and of its HNSW links, shards, and how far two backends' rankings agree; then the
memory of the workbook's own corpora."""
from __future__ import annotations

import math

from .. import datasets
from ..scaling import compare, sizing
from ..stores import expressions
from .core import Case, Chapter, Mistake, predicted

CHAPTER = Chapter("11-beyond-one-machine")


@CHAPTER.exercise(
    "milvus_term",
    "metadata[<quoted key>] <operator> <literal>: strings in double quotes with \\ and \" "
    "(and newline, return, tab) escaped, bools as true/false; $eq/$in are == terms plus "
    "json_contains_any(path, [values]), joined by or in parentheses (a JSON array equals no "
    "scalar); $ne is (path is null or not <that test>)")
def milvus_term_cases():
    """One filter term per operator, on strings, numbers, bools and keys that need quoting."""
    for key, op, value in (("status", "$eq", "current"), ("seats", "$gte", 10),
                           ("price", "$lt", 9.5), ("archived", "$eq", False),
                           ("status", "$ne", "superseded"), ("plan", "$in", ["pro"]),
                           ("plan", "$in", ["pro", "team", "enterprise"]),
                           ("title", "$eq", 'the "new" policy'), ("path", "$eq", "C:\\data"),
                           ("note", "$eq", "two\nlines"), ('odd "key"', "$gt", 1),
                           ("access", "$ne", "internal"), ("n", "$eq", -2)):
        yield Case((key, op, value), expressions.milvus_filter({key: {op: value}}))


@CHAPTER.exercise(
    "bytes_per_vector",
    "dim numbers of 4 (float32), 2 (float16) or 1 (int8) bytes; binary is one bit per "
    "number; product quantisation keeps one byte per sub-vector: pq_m bytes",
    mistakes=(Mistake("a byte per number for binary", "binary keeps one bit per number: "
                      "dim / 8 bytes", lambda dim, encoding, pq_m: dim if encoding ==
                      "binary" else sizing.bytes_per_vector(dim, encoding, pq_m)),))
def bytes_per_vector_cases():
    """Common dimensions in every encoding."""
    for dim, encoding, pq_m in ((384, "float32", None), (1536, "float32", None),
                                (768, "float16", None), (384, "int8", None),
                                (1024, "binary", None), (384, "pq", 48), (768, "pq", 96)):
        yield Case((dim, encoding, pq_m), sizing.bytes_per_vector(dim, encoding, pq_m))


@CHAPTER.exercise(
    "hnsw_graph_bytes",
    "4 bytes per link: 2*M links on the bottom layer, plus M links on each upper layer, "
    "which add up to M / (M - 1) links on average",
    mistakes=(Mistake("the bottom layer only", "the upper layers add M / (M - 1) links "
                      "per node on average", lambda m: 4 * 2 * m),
              Mistake("links, not bytes", "each link is a 4-byte id: multiply by 4",
                      lambda m: 2 * m + m / (m - 1))))
def hnsw_graph_bytes_cases():
    """HNSW's M from 2 to 48."""
    for m in (16, 32, 8, 48, 2):
        yield Case((m,), sizing.hnsw_graph_bytes(m))


@CHAPTER.exercise(
    "shards_needed",
    "each machine may use only fill * node_bytes; divide and round up (math.ceil), and "
    "never answer fewer than 1",
    mistakes=(Mistake("no floor of one machine", "even an empty index needs a machine: "
                      "max(1, ...)", lambda total, node, fill:
                      math.ceil(total / (node * fill))),
              Mistake("rounded down", "a partial machine is a whole machine: math.ceil",
                      lambda total, node, fill: max(1, int(total // (node * fill))))))
def shards_needed_cases():
    """Index sizes that fit one machine, several, exactly, just over, and an empty one."""
    gib = 2**30
    for total, node, fill in ((16.7e9, 64 * gib, 0.7), (167e9, 64 * gib, 0.7),
                              (167e9, 256 * gib, 0.8), (0, 64 * gib, 0.7),
                              (100, 100, 1.0), (101, 100, 1.0), (5.2e9, 16 * gib, 0.5)):
        yield Case((total, node, fill), sizing.shards_needed(total, node, fill))


@CHAPTER.exercise(
    "overlap_at_k",
    "compare the sets of the first k ids of each list and divide the shared count by k "
    "(by the longer list's length when both have fewer than k); two empty lists agree: 1.0",
    mistakes=(Mistake("always dividing by k", "when both lists have fewer than k ids, "
                      "divide by the longer one's length; two empty lists agree (1.0)",
                      lambda a, b, k: len(set(a[:k]) & set(b[:k])) / k),))
def overlap_at_k_cases():
    """Rankings that agree, reorder, differ, and are shorter than k or empty."""
    for a, b, k in ((["a", "b", "c"], ["c", "a", "d"], 3), (["a", "b", "c"], ["c", "b", "a"], 3),
                    (["a", "b", "c", "d"], ["a", "x", "y", "z"], 2),
                    (["a", "b"], ["a", "b"], 10), (["a", "b", "c"], ["a"], 10), ([], [], 5),
                    (list("abcdefghij"), list("abcdefghxy"), 10)):
        yield Case((a, b, k), compare.overlap_at_k(a, b, k))


# -- on the real corpus

@CHAPTER.exercise(
    "corpus_vector_bytes",
    "per vector: bytes_per_vector(dim, encoding, pq_m), plus hnsw_graph_bytes(hnsw_m) when "
    "hnsw_m is given; times the number of vectors")
def corpus_vector_bytes_cases():
    """The Python docs' and the help centre's sizes, in several encodings, with and without
    an HNSW graph."""
    n_py = len(datasets.load_pydocs().documents)
    n_hc = len(datasets.load_helpcentre().documents)
    for n, dim, enc, pq, m in ((n_py, 384, "float32", None, None), (n_py, 384, "float32", None, 16),
                               (n_py, 768, "pq", 96, 32), (n_hc, 384, "int8", None, None),
                               (n_hc * 1000, 1024, "binary", None, 16)):
        per = sizing.bytes_per_vector(dim, enc, pq) + (sizing.hnsw_graph_bytes(m) if m else 0)
        yield Case((n, dim, enc, pq, m), n * per)


@CHAPTER.exercise("predict_pydocs_mib",
                  "each section is one vector of 384 float32 numbers; count the sections, "
                  "multiply, divide by 2**20")
def predict_pydocs_mib_cases():
    """The learner's guess of the Python docs' float32 vectors in MiB, within 25%."""
    n = len(datasets.load_pydocs().documents)
    actual = n * sizing.bytes_per_vector(384, "float32", None) / 2**20
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.25 * actual,
                                    "a prediction within 25% passes"))
