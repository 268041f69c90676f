"""Sizing an index on paper: bytes per vector, graph overhead, and machines needed.

The arithmetic chapter 11 does before anyone buys a cluster. A vector index must sit in
the memory of the machines that search it (a DiskANN index keeps only compressed codes in
memory and the graph on NVMe); everything else follows from bytes per vector:

    float32: 4 · dim      float16: 2 · dim      int8 (scalar quantisation, SQ8): 1 · dim
    PQ (product quantisation): pq_m bytes, one 8-bit code per sub-vector of dim / pq_m

>>> bytes_per_vector(384, "float32"), bytes_per_vector(384, "int8"), bytes_per_vector(384, "pq", 48)
(1536, 384, 48)
>>> shards_needed(10_000_000 * 1_700, 64 * 2**30)
1
"""
from __future__ import annotations

import math

__all__ = ["bytes_per_vector", "hnsw_graph_bytes", "shards_needed", "ENCODINGS"]

ENCODINGS = {"float32": 4.0, "float16": 2.0, "int8": 1.0, "binary": 1 / 8}


def bytes_per_vector(dim: int, encoding: str = "float32", pq_m: int | None = None) -> int:
    """Bytes one ``dim``-d vector takes in an index: ``dim`` × bytes per number for
    ``float32`` / ``float16`` / ``int8`` / ``binary`` (bits), or ``pq_m`` one-byte codes for
    ``pq`` (``pq_m`` must divide ``dim``)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise ValueError(f"dim must be a whole number >= 1, got {dim!r}")
    if encoding == "pq":
        if not isinstance(pq_m, int) or pq_m < 1 or dim % pq_m:
            raise ValueError(f"pq needs pq_m, a whole number that divides dim={dim} (e.g. "
                             f"{dim // 8}), got {pq_m!r}")
        return pq_m
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join([*ENCODINGS, 'pq'])}, "
                         f"got {encoding!r}")
    return math.ceil(dim * ENCODINGS[encoding])


def hnsw_graph_bytes(m: int = 16) -> float:
    """Average bytes of HNSW links per vector: 2·M neighbour ids (4 bytes each) on the bottom
    layer, and M on each upper layer, which a node reaches with probability 1/M per layer
    (so M/(M−1) more on average). FAISS and Milvus's knowhere store them like this."""
    if isinstance(m, bool) or not isinstance(m, int) or m < 2:
        raise ValueError(f"m (links per node) must be a whole number >= 2, got {m!r}")
    return 4 * (2 * m + m / (m - 1))


def shards_needed(total_bytes: float, node_bytes: float, fill: float = 0.7) -> int:
    """How many machines an index of ``total_bytes`` must be split over when each has
    ``node_bytes`` of memory and may fill only ``fill`` of it (the rest: the operating
    system, query buffers, segments being loaded or compacted). Always at least 1."""
    if not 0 < fill <= 1:
        raise ValueError(f"fill must be in (0, 1], got {fill!r}")
    if total_bytes < 0 or node_bytes <= 0:
        raise ValueError(f"total_bytes must be >= 0 and node_bytes > 0, got {total_bytes!r}, "
                         f"{node_bytes!r}")
    return max(1, math.ceil(total_bytes / (node_bytes * fill)))
