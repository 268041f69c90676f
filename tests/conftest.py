"""Test-wide settings: the offline profile (nothing may touch the network), fixed seeds.

And the furniture many test files share, built once per session:

* ``hc``: the help centre (``load_helpcentre()``: articles, questions, splits);
* ``hc_chunks``: its articles chunked as most tests need them (256 tokens, overlap 32);
* ``hc_hybrid``: ``HybridRetriever(DenseIndex(Encoder()), BM25Index())`` built on ``hc_chunks``;
* ``@pytest.mark.needs_milvus``: skips a test unless pymilvus and Milvus Lite are installed.

Shared means read-only: search them, wrap them, slice them. A test that changes what it is
given (build/add/update/delete/close, settings set in place, list edits) builds its own.
ragbook is imported inside the fixtures, after the environment below is set."""
import os
from importlib.util import find_spec

import pytest

os.environ.setdefault("RAGBOOK_PROFILE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HAVE_MILVUS = find_spec("pymilvus") is not None and find_spec("milvus_lite") is not None


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_milvus: skipped unless pymilvus and Milvus Lite "
                                       'are installed (pip install "ragbook[milvus]")')


def pytest_collection_modifyitems(config, items):
    if HAVE_MILVUS:
        return
    skip = pytest.mark.skip(reason='needs pip install "ragbook[milvus]"')
    for item in items:
        if item.get_closest_marker("needs_milvus") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def hc():
    """The help centre: ``load_helpcentre()``."""
    from ragbook.datasets import load_helpcentre

    return load_helpcentre()


@pytest.fixture(scope="session")
def hc_chunks(hc):
    """The help centre's articles in chunks of 256 tokens with 32 of overlap (a list: do not
    edit it in place)."""
    from ragbook.chunking import chunk_documents

    return chunk_documents(hc.documents, size=256, overlap=32)


@pytest.fixture(scope="session")
def hc_hybrid(hc_chunks):
    """A hybrid with default settings on ``hc_chunks``, shared by every test that asks for it:
    never rebuild, update or close it, nor change its settings in place."""
    from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever

    return HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(hc_chunks)
