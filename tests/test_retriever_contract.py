"""The retriever contract (DESIGN.md), checked for every retriever in the package:
search(query, k, where) -> list[Hit] sorted by score, ranks from 1, never padded, k < 1 raises."""
import pytest

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.fusion import HybridRetriever
from ragbook.rerank import CrossEncoderReranker, RerankedRetriever
from ragbook.retrieval import Retriever


@pytest.fixture(scope="module")
def chunks():
    return chunk_documents(load_helpcentre().documents, size=256, overlap=32)


def dense_flat(chunks):
    return DenseIndex(Encoder()).build(chunks)


def dense_hnsw(chunks):
    return DenseIndex(Encoder(), kind="hnsw").build(chunks)


def bm25(chunks):
    return BM25Index().build(chunks)


def hybrid(chunks):
    return HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks)


def reranked(chunks):
    return RerankedRetriever(BM25Index().build(chunks), CrossEncoderReranker(), candidates=20)


def _milvus(chunks, mode, **settings):
    """Milvus Lite in a temporary folder (removed when the retriever closes or at exit)."""
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from ragbook.backends.milvus import MilvusRetriever

    return MilvusRetriever(Encoder(), mode=mode, **settings).build(chunks)


def milvus_dense(chunks):
    return _milvus(chunks, "dense")


def milvus_hnsw(chunks):
    return _milvus(chunks, "dense", index="HNSW")


def milvus_bm25(chunks):
    return _milvus(chunks, "bm25")


def milvus_hybrid(chunks):
    return _milvus(chunks, "hybrid")


RETRIEVERS = [dense_flat, dense_hnsw, bm25, hybrid, reranked, milvus_dense, milvus_hnsw,
              milvus_bm25, milvus_hybrid]


@pytest.fixture(scope="module", params=RETRIEVERS, ids=lambda f: f.__name__)
def retriever(request, chunks):
    return request.param(chunks)


@pytest.mark.parametrize("query", ["refund window for enterprise contracts", "ERR_CONN_4021",
                                   "my dashboard is stuck loading"])
def test_sorted_ranked_and_at_most_k(retriever, query):
    hits = retriever.search(query, k=7)
    assert 0 < len(hits) <= 7
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert len({h.id for h in hits}) == len(hits)


def test_never_padded_and_filters_apply(retriever):
    where = {"department": "community", "status": "current"}
    hits = retriever.search("export tips", k=500, where=where)
    n_community = len([c for c in retriever.items_ if c["metadata"]["department"] == "community"])
    assert 0 < len(hits) <= n_community     # keyword search returns matching items only
    assert all(h.metadata["department"] == "community" for h in hits)
    assert retriever.search("export tips", k=5, where={"department": "no-such-department"}) == []


@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_raises(retriever, k):
    with pytest.raises(ValueError, match="k must be"):
        retriever.search("refunds", k=k)


def test_satisfies_the_protocol_and_fingerprints_its_corpus(retriever, chunks):
    assert isinstance(retriever, Retriever)
    assert len(retriever) == len(chunks)
    fp = retriever.corpus_fingerprint
    assert fp == retriever.corpus_fingerprint and fp.startswith(f"{len(chunks)}:")


def test_hits_point_back_into_their_documents(retriever):
    docs = {d.id: d.text for d in load_helpcentre().documents}
    for h in retriever.search("how long is the refund window", k=5):
        assert docs[h.doc_id][h.start:h.end] == h.text


@pytest.mark.parametrize("bad", [{"status": {"$like": "c%"}}, "status=current"])
def test_bad_filters_raise_before_searching(retriever, bad):
    with pytest.raises((ValueError, TypeError), match="where|operator"):
        retriever.search("refunds", k=3, where=bad)
