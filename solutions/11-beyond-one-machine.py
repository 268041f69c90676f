# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Beyond one machine — exercises
#
# Chapter 11 moves retrieval from an index inside the notebook's process to Milvus, a vector
# database that runs embedded here (Milvus Lite) and as a cluster in production with the same
# client code. Most of what changes is arithmetic and translation, and that is what you write
# here:
#
# * **A filter, in Milvus's words.** One `where` condition as a Milvus boolean expression.
# * **Bytes per vector.** What one embedding costs in memory, raw and compressed.
# * **The graph's share.** What HNSW's links add to every vector.
# * **Machines needed.** How many nodes an index must be split over.
# * **Did the move change the answers?** Top-k overlap between two retrievers.
#
# Plain Python (`math`) is enough; no model or database is loaded. `check(name, function)`
# compares your function with `ragbook` on several inputs. If a case fails, it shows you the
# input, the expected value and what you returned.

# %%
import math

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. One filter condition as a Milvus expression
#
# ragbook keeps an item's metadata in one JSON field called `metadata`, so the condition
# "status is current" is written `metadata["status"] == "current"`. Milvus parses the
# expression, so every key and every string value must be quoted, and the characters that
# would end or bend the quoted string must be escaped.
#
# **Task.** `milvus_term(key, op, value)` returns the expression for one condition:
#
# * the field path: `metadata["<key>"]`, the key quoted like a string value;
# * a string value in double quotes, with `\` written `\\`, `"` written `\"`, and a newline,
#   carriage return and tab written `\n`, `\r`, `\t` (escape the backslash first);
#   `True`/`False` as `true`/`false`; numbers as Python prints them (`repr`);
# * `$gt $gte $lt $lte` → `path > value`, `>=`, `<`, `<=`;
# * `$eq` and `$in` (a list) → "any of": `path == v` for each value, then
#   `json_contains_any(path, [v1, v2, ...])`, all joined by ` or ` in parentheses;
# * `$ne` → `(path is null or not <the $eq test>)`.
#
# **Examples.**
# `milvus_term("seats", "$gte", 10)` → `metadata["seats"] >= 10`,
# `milvus_term("status", "$eq", "current")` →
# `(metadata["status"] == "current" or json_contains_any(metadata["status"], ["current"]))`,
# `milvus_term("archived", "$eq", False)` →
# `(metadata["archived"] == false or json_contains_any(metadata["archived"], [false]))`,
# `milvus_term("plan", "$in", ["pro", "team"])` → `(metadata["plan"] == "pro" or
# metadata["plan"] == "team" or json_contains_any(metadata["plan"], ["pro", "team"]))`,
# `milvus_term("status", "$ne", "superseded")` → `(metadata["status"] is null or not
# (metadata["status"] == "superseded" or json_contains_any(metadata["status"], ["superseded"])))`
#
# **Why `is null or` for `$ne`.** In ragbook, an item without a `status` key passes
# `status != superseded`: nothing says it is superseded. In Milvus, comparing a missing JSON
# key gives false, so the plain `!=` would silently drop every item without the key; the
# pipeline's "exclude superseded pages" filter would lose pages. **Why `json_contains`.** A
# list in the metadata (`access: ["public", "internal"]`) is a set of values; a JSON array
# equals no single value, so `==` alone misses it, and a `$ne` built on `==` alone would let
# an `internal` page through an `access != internal` scope (`json_contains_any`, not
# `json_contains`: Milvus parses no negative number as its second argument). **Why `or` for `$in`.** Milvus
# Lite refuses `in [...]` on a JSON path; a chain of `==` works on Lite and on a server alike.

# %%
def milvus_term(key, op, value):
    """One where condition (key, operator, value) as a Milvus boolean expression."""
    ### BEGIN SOLUTION hint: write two helpers first, quote(text) and literal(value); then the orderings are one f-string and $eq/$in/$ne share one "any of" test
    def quote(text):
        for raw, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"),
                             ("\t", "\\t")):
            text = text.replace(raw, escaped)
        return f'"{text}"'

    def literal(v):
        if isinstance(v, str):
            return quote(v)
        if isinstance(v, bool):  # before numbers: True is also an int
            return "true" if v else "false"
        return repr(v)

    path = f"metadata[{quote(key)}]"
    if op in ("$gt", "$gte", "$lt", "$lte"):
        symbol = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}[op]
        return f"{path} {symbol} {literal(value)}"
    lits = [literal(v) for v in (value if op == "$in" else [value])]
    contains = f"json_contains_any({path}, [{', '.join(lits)}])"
    any_of = "(" + " or ".join([f"{path} == {lit}" for lit in lits] + [contains]) + ")"
    return f"({path} is null or not {any_of})" if op == "$ne" else any_of
    ### END SOLUTION


# %%
check("milvus_term", milvus_term)

# %% [markdown]
# ## 2. Bytes per vector
#
# An index must hold its vectors where it searches them: in memory, for HNSW and IVF. The
# first number in any sizing is what one vector costs.
#
# **Task.** `bytes_per_vector(dim, encoding, pq_m)` returns the bytes of one `dim`-dimensional
# vector as an `int`: `float32` 4 bytes per number, `float16` 2, `int8` (scalar quantisation)
# 1, `binary` one *bit* per number (round up to whole bytes), and `pq` (product quantisation)
# `pq_m` bytes: the vector is cut into `pq_m` sub-vectors and each is replaced by the 8-bit
# number of its nearest centroid. `pq_m` is `None` except for `pq`.
#
# **Examples.**
# `bytes_per_vector(384, "float32", None)` → `1536`,
# `bytes_per_vector(384, "int8", None)` → `384`,
# `bytes_per_vector(1024, "binary", None)` → `128`,
# `bytes_per_vector(384, "pq", 48)` → `48`
#
# Our encoder's 384-d float32 vectors are 1.5 KB each: 15 GB for 10 million chunks before any
# index structure. int8 keeps a quarter of that at a small loss of precision; PQ with 48 codes
# keeps 1/32 and needs a re-ranking step on full vectors to recover accuracy.

# %%
def bytes_per_vector(dim, encoding, pq_m=None):
    """Bytes one dim-d vector takes as float32 / float16 / int8 / binary, or pq_m PQ codes."""
    ### BEGIN SOLUTION hint: a dict {encoding: bytes per number} covers four cases; binary is 1/8 of a byte per number, and math.ceil rounds up
    if encoding == "pq":
        return pq_m
    per_number = {"float32": 4, "float16": 2, "int8": 1, "binary": 1 / 8}[encoding]
    return math.ceil(dim * per_number)
    ### END SOLUTION


# %%
check("bytes_per_vector", bytes_per_vector)

# %% [markdown]
# ## 3. What HNSW's graph adds
#
# An HNSW index stores, next to each vector, the ids of its neighbours: `2·M` of them on the
# bottom layer, which holds every vector, and `M` on each upper layer. A vector reaches layer 1
# with probability `1/M`, layer 2 with `1/M²`, and so on, so on average it has
# `M · (1/M + 1/M² + ...) = M / (M − 1)` upper-layer links. Each id is 4 bytes.
#
# **Task.** `hnsw_graph_bytes(m)` returns the average bytes of links per vector, a `float`:
# `4 · (2·M + M / (M − 1))`.
#
# **Examples.**
# `hnsw_graph_bytes(16)` → `132.26666666666668`,
# `hnsw_graph_bytes(32)` → `260.1290322580645`
#
# At `M = 16` the graph adds 9% to a float32 vector of 384 dimensions, but a third to an int8
# one: once vectors are compressed, the graph is a large part of the bill.

# %%
def hnsw_graph_bytes(m):
    """Average bytes of HNSW neighbour links per vector for M links per node."""
    ### BEGIN SOLUTION hint: count the links first (bottom layer plus the upper layers' average), then multiply by the 4 bytes of an id
    links = 2 * m + m / (m - 1)
    return 4 * links
    ### END SOLUTION


# %%
check("hnsw_graph_bytes", hnsw_graph_bytes)

# %% [markdown]
# ## 4. How many machines
#
# A machine cannot give all its memory to the index: the operating system, query buffers and
# segments being loaded or compacted need room, so plan to fill a fraction `fill` of it
# (0.7 is a common choice).
#
# **Task.** `shards_needed(total_bytes, node_bytes, fill)` returns how many machines of
# `node_bytes` memory an index of `total_bytes` must be spread over, an `int`, at least 1.
#
# **Examples** (64 GiB nodes, `64 * 2**30` bytes, filled to 0.7):
# `shards_needed(16.7e9, 64 * 2**30, 0.7)` → `1`,
# `shards_needed(167e9, 64 * 2**30, 0.7)` → `4`,
# `shards_needed(0, 64 * 2**30, 0.7)` → `1`
#
# Replicas multiply this: two in-memory copies of every segment (for throughput, and to
# survive a node failing) need twice the machines.

# %%
def shards_needed(total_bytes, node_bytes, fill):
    """Machines of node_bytes memory, each filled to `fill`, needed to hold total_bytes."""
    ### BEGIN SOLUTION hint: divide by the usable bytes per machine and round up; an empty index still needs one machine
    usable = node_bytes * fill
    return max(1, math.ceil(total_bytes / usable))
    ### END SOLUTION


# %%
check("shards_needed", shards_needed)

# %% [markdown]
# ## 5. Did moving the index change the answers?
#
# After a migration, run the same questions through the old and the new retriever and compare
# their top k. Two exact dense searches over the same vectors should agree almost everywhere
# (ties may swap); an approximate index or another BM25 tokenizer will not.
#
# **Task.** `overlap_at_k(a, b, k)` takes two rankings (lists of ids, best first) and returns
# the share of the first `k` ids of `a` that are also among the first `k` of `b`, a `float`.
# When both lists hold fewer than `k` ids, divide by the longer one's length instead of `k`;
# two empty lists agree completely (1.0).
#
# **Examples.**
# `overlap_at_k(["a", "b", "c"], ["c", "a", "d"], 3)` → `0.6666666666666666`,
# `overlap_at_k(["a", "b", "c"], ["c", "b", "a"], 3)` → `1.0` (order does not matter),
# `overlap_at_k(["a", "b", "c"], ["a"], 10)` → `0.3333333333333333`,
# `overlap_at_k([], [], 5)` → `1.0`

# %%
def overlap_at_k(a, b, k):
    """Share of the top k of `a` that the top k of `b` also holds."""
    ### BEGIN SOLUTION hint: take set(a[:k]) and set(b[:k]); the denominator is k, unless both lists are shorter than k
    top_a, top_b = set(a[:k]), set(b[:k])
    if not top_a and not top_b:
        return 1.0
    return len(top_a & top_b) / min(k, max(len(top_a), len(top_b)))
    ### END SOLUTION


# %%
check("overlap_at_k", overlap_at_k)

# %% [markdown]
# ## 6. The memory of an index over a real corpus
#
# Sizing starts from a count. Below, the number of sections in the Python documentation corpus,
# the book's second labelled corpus: one vector per section.
#
# **Task.** `corpus_vector_bytes(n_vectors, dim, encoding, pq_m, hnsw_m)` returns the bytes the
# index holds: per vector your `bytes_per_vector(dim, encoding, pq_m)`, plus your
# `hnsw_graph_bytes(hnsw_m)` when `hnsw_m` is not None; times `n_vectors`. The check uses the real
# corpus sizes.

# %%
from ragbook.datasets import load_pydocs

n_sections = len(load_pydocs().documents)
print(f"{n_sections:,} sections in the Python documentation corpus")


# %%
def corpus_vector_bytes(n_vectors, dim, encoding, pq_m, hnsw_m):
    """Bytes of the vectors (and the HNSW graph, if any) of an index."""
    ### BEGIN SOLUTION hint: n_vectors * (bytes_per_vector(dim, encoding, pq_m) + (hnsw_graph_bytes(hnsw_m) if hnsw_m else 0))
    per_vector = bytes_per_vector(dim, encoding, pq_m)
    if hnsw_m is not None:
        per_vector += hnsw_graph_bytes(hnsw_m)
    return n_vectors * per_vector
    ### END SOLUTION


# %%
check("corpus_vector_bytes", corpus_vector_bytes)

# %% [markdown]
# ## 7. Predict, then run: does it fit on a laptop?
#
# **Before running the cell after next**, predict the size in MiB (2**20 bytes) of a flat float32
# index of these sections with the offline profile's 384-dimensional encoder. A prediction within
# `25%` passes.

# %%
def predict_pydocs_mib():
    """My prediction in MiB, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a number; sections x 384 numbers x 4 bytes, over 2**20
    return 10_000 * 384 * 4 / 2**20
    ### END SOLUTION


# %%
from ragbook.scaling.sizing import bytes_per_vector as package_bytes
from ragbook.scaling.sizing import hnsw_graph_bytes as package_graph

flat = n_sections * package_bytes(384, "float32", None) / 2**20
graph = n_sections * (package_bytes(384, "float32", None) + package_graph(32)) / 2**20
print(f"flat float32: {flat:.1f} MiB; with an HNSW graph (M=32): {graph:.1f} MiB")

# %%
check("predict_pydocs_mib", predict_pydocs_mib)

# %% [markdown]
# MiB, not GiB: a corpus of this size fits in any laptop's memory many times over, so one machine
# serves it with a flat index. The arithmetic of section 4 starts to matter only orders of
# magnitude later, which is why chapter 11 sizes before it shards.

# %% [markdown]
# ## Try it (ungraded)
#
# Size an index for 100 million chunks of 384-d vectors with your functions. Change the
# encoding, `M`, the node size or the number of replicas and watch the machine count move.

# %%
n_chunks, dim, m, node_gib, replicas = 100_000_000, 384, 16, 64, 2
with trying("bytes_per_vector", "hnsw_graph_bytes", "shards_needed"):
    for encoding, pq_m in (("float32", None), ("int8", None), ("pq", 48)):
        per_vector = bytes_per_vector(dim, encoding, pq_m)
        per_vector += hnsw_graph_bytes(m) if encoding != "pq" else 8  # IVF_PQ: an 8-byte id
        total = n_chunks * per_vector
        nodes = shards_needed(total, node_gib * 2**30, 0.7) * replicas
        print(f"{encoding:8s} {per_vector:7.1f} B/vector  {total / 2**30:7.1f} GiB  "
              f"{nodes} nodes of {node_gib} GiB ({replicas} replicas)")
