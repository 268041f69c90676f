"""Vector stores: where a ``DenseIndex`` keeps its vectors, behind one protocol.

``ragbook.retrieval.VectorStore`` is the contract (``create``, ``add``, ``search``, ``get``,
``delete``, ``records``, ``properties``, ``corpus_fingerprint``, ``write``/``read``,
``len``); ``DenseIndex`` talks to a store through nothing else, so the same index runs on

* ``FaissStore`` — in process, exact (``kind="flat"``, the default) or HNSW;
* ``MilvusStore`` — Milvus Lite in a local ``*.db`` folder, or a Milvus server or cluster
  at ``http://host:19530`` (``pip install "ragbook[milvus]"``; pymilvus is imported only
  when a store connects, so this package loads without it).

A store is a ``Component``: ``__init__`` takes its settings, ``create(dim)`` makes it an empty
store for the encoder's dimension (``DenseIndex.build`` does that on a fresh copy of the
store it was given). Adding an engine is one module here with one such class, listed below.

``expressions`` writes the ``where`` language as Milvus boolean expressions.

>>> from ragbook.stores import FaissStore, store_from_settings
>>> store_from_settings({"type": "FaissStore", **FaissStore(kind="hnsw").settings()})
FaissStore(kind='hnsw')
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import expressions
from .expressions import MATCH_NOTHING, ids_filter, milvus_filter
from .faiss import FaissStore
from .milvus import DEFAULT_ANALYZER, MILVUS_STANDARD, MilvusStore
from .milvus_lite import MilvusLockedError

__all__ = ["FaissStore", "MilvusStore", "STORES", "default_store", "store_from_settings",
           "MilvusLockedError", "DEFAULT_ANALYZER", "MILVUS_STANDARD", "milvus_filter",
           "ids_filter", "MATCH_NOTHING", "expressions"]

#: Every store class, by name: what ``store_from_settings`` (and so ``DenseIndex.load``)
#: can rebuild from a saved manifest.
STORES = {cls.__name__: cls for cls in (FaissStore, MilvusStore)}


def default_store() -> FaissStore:
    """The store a ``DenseIndex`` gets when given none: exact search in process."""
    return FaissStore()


def store_from_settings(settings: Mapping[str, Any]):
    """A new, empty store from ``{"type": class name, **its settings()}`` (what
    ``Component.settings()`` writes for a sub-component, and a saved manifest holds)."""
    settings = dict(settings)
    name = settings.pop("type", None)
    if name not in STORES:
        raise ValueError(f"unknown vector store type {name!r}; ragbook.stores has "
                         f"{', '.join(STORES)}")
    return STORES[name](**settings)
