"""The retriever contract on engines that scale past one process (chapter 11).

``ragbook.backends.milvus``: a ``VectorStore`` and a ``Retriever`` on Milvus through
``pymilvus.MilvusClient`` — Milvus Lite (embedded, a local ``*.db`` folder) by default, a
Milvus standalone server or cluster when given ``http://host:19530``, with the same code.
``ragbook.backends.sizing``: the memory arithmetic for indexes too big for one machine.

Neither imports pymilvus until a store is opened, so this package loads without the
optional extra (``pip install "ragbook[milvus]"``).
"""
from .milvus import MilvusLockedError, MilvusRetriever, MilvusStore, milvus_filter
from .sizing import bytes_per_vector, hnsw_graph_bytes, shards_needed

__all__ = ["MilvusStore", "MilvusRetriever", "MilvusLockedError", "milvus_filter",
           "bytes_per_vector", "hnsw_graph_bytes", "shards_needed"]
