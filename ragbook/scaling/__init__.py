"""Scaling arithmetic for chapter 11: what an index costs, and whether two engines agree.

``ragbook.scaling.sizing``: the memory arithmetic for indexes too big for one machine
(bytes per vector, HNSW links, machines needed). ``ragbook.scaling.compare``: top-k overlap
and rank correlation between two retrievers' rankings. The stores themselves (FAISS,
Milvus) live in ``ragbook.stores``, Milvus's BM25 and hybrid search in ``ragbook.milvus_retriever``.
"""
from .sizing import bytes_per_vector, hnsw_graph_bytes, shards_needed

__all__ = ["bytes_per_vector", "hnsw_graph_bytes", "shards_needed"]
