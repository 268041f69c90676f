"""The contracts (ragbook.retrieval), checked for every store and every retriever in the package.

VectorStore: create/add/search/get/delete/records/properties/corpus_fingerprint/write/read,
run on each engine in STORES. Retriever: search(query, k, where) -> list[Hit] sorted by
score, ranks from 1, never padded, k < 1 raises; retrieve() -> the same hits with their
stages and a confidence of a declared kind, within the retriever's bounds. Every dense
retriever runs once per store. Adding an engine: one module in ragbook/stores, one line in
STORES."""
import json
import logging

import numpy as np
import pytest

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.component import NotBuiltError
from ragbook.datasets import load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.filters import matches
from ragbook.fusion import HybridRetriever
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.rerank import CrossEncoderReranker, RerankedRetriever
from ragbook.retrieval import (
    CONFIDENCE_KINDS,
    Retriever,
    VectorStore,
    corpus_fingerprint,
    records_from,
)
from ragbook.stores import FaissStore, MilvusStore, store_from_settings
from ragbook.types import Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)

# One line per engine: a store (settings only) made in a temporary folder.
STORES = [
    pytest.param(lambda tmp: FaissStore(), id="faiss-flat"),
    pytest.param(lambda tmp: FaissStore(kind="hnsw"), id="faiss-hnsw"),
    pytest.param(lambda tmp: MilvusStore(tmp / "lite.db"), id="milvus-lite",
                 marks=pytest.mark.needs_milvus),
    pytest.param(lambda tmp: MilvusStore(tmp / "lite.db", index="HNSW"), id="milvus-lite-hnsw",
                 marks=pytest.mark.needs_milvus),
]


def _close(store):
    if hasattr(store, "close"):
        store.close()


# -- the VectorStore contract ------------------------------------------------------------------
DIM = 8


def unit_rows(n, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(params=STORES)
def empty_store(request, tmp_path):
    store = request.param(tmp_path)
    yield store
    _close(store)


@pytest.fixture
def filled(empty_store):
    """A store holding 40 records (metadata: a colour for 3 of them, a parity for all)."""
    docs = [Document(f"item-{i}", f"text {i}", metadata={"even": i % 2 == 0,
                                                         **({"colour": "red"} if i in (3, 17, 31)
                                                            else {})})
            for i in range(40)]
    records, vectors = records_from(docs), unit_rows(40)
    store = empty_store.create(DIM, {"ragbook.encoder": "unit-test"})
    store.add(records, vectors)
    return store, records, vectors


def test_a_store_is_settings_until_create(empty_store):
    settings = empty_store.settings()
    json.dumps(settings)                                  # a manifest can hold them
    again = store_from_settings({"type": type(empty_store).__name__, **settings})
    assert type(again) is type(empty_store) and again.settings() == settings
    with pytest.raises(NotBuiltError, match=r"create\(dim\)"):
        empty_store.search(unit_rows(1), 3)
    assert empty_store.create(DIM) is empty_store and len(empty_store) == 0
    assert isinstance(empty_store, VectorStore)     # (Python 3.11 reads its properties)
    ids, scores = empty_store.search(unit_rows(1), 3)
    assert ids == [[]] and len(scores[0]) == 0


def test_add_get_records_and_properties(filled):
    store, records, _ = filled
    assert isinstance(store, VectorStore) and len(store) == 40
    assert store.get(["item-7", "item-0"]) == [records[7], records[0]]
    assert store.records() == records
    assert store.properties()["ragbook.encoder"] == "unit-test"
    assert store.corpus_fingerprint == corpus_fingerprint(records)
    with pytest.raises(KeyError, match="no-such-id"):
        store.get(["item-1", "no-such-id"])
    with pytest.raises(ValueError, match="already in the"):
        store.add(records[:1], unit_rows(1))
    with pytest.raises(ValueError, match="dimension 4"):
        store.add(records_from([Document("new", "new text")]), np.ones((1, 4), np.float32))


def test_search_returns_inner_products_best_first_never_padded(filled):
    store, records, vectors = filled
    q = unit_rows(2, seed=9)
    ids, scores = store.search(q, k=5)
    assert len(ids) == len(scores) == 2
    for row, got_ids, got in zip(q, ids, scores, strict=True):
        exact = vectors @ row
        assert got_ids == [records[i]["id"] for i in np.argsort(-exact)[:5]]
        assert list(got) == pytest.approx(sorted(exact, reverse=True)[:5], abs=1e-5)
    assert store.search(vectors[[12]], k=1)[0] == [["item-12"]]
    assert len(store.search(q[:1], k=500)[0][0]) == 40          # all there is, no padding


def test_where_is_evaluated_inside_the_search(filled):
    store, records, vectors = filled
    q = unit_rows(1, seed=5)
    red = {r["id"] for r in records if matches(r["metadata"], {"colour": "red"})}
    assert set(store.search(q, k=3, where={"colour": "red"})[0][0]) == red   # k of k, not 0
    even = store.search(q, k=40, where={"even": True})[0][0]
    assert len(even) == 20 and all(int(i.split("-")[1]) % 2 == 0 for i in even)
    ids, scores = store.search(q, k=5, where={"colour": "blue"})
    assert ids == [[]] and len(scores[0]) == 0
    with pytest.raises((ValueError, TypeError), match="operator"):
        store.search(q, k=5, where={"colour": {"$like": "r%"}})


def test_delete_keeps_search_and_fingerprint_consistent(filled):
    store, records, vectors = filled
    before = store.corpus_fingerprint
    assert store.delete(["item-12", "no-such-id"]) == 1 and len(store) == 39
    assert store.corpus_fingerprint != before
    assert store.corpus_fingerprint == corpus_fingerprint(records[:12] + records[13:])
    assert "item-12" not in store.search(vectors[[12]], k=5)[0][0]
    assert store.search(vectors[[30]], k=1)[0] == [["item-30"]]   # rows stay aligned
    assert store.delete(["item-12"]) == 0


def test_write_and_read_round_trip(filled, tmp_path):
    store, records, _ = filled
    folder = tmp_path / "saved"
    folder.mkdir()
    store.write(folder)
    q = unit_rows(1, seed=3)
    expected = store.search(q, k=5, where={"even": False})
    _close(store)                          # (Milvus Lite: another store opens the same folder)
    again = store_from_settings({"type": type(store).__name__, **store.settings()}).read(folder)
    try:
        assert again.records() == records and again.corpus_fingerprint == corpus_fingerprint(
            records)
        assert again.properties()["ragbook.encoder"] == "unit-test"
        got = again.search(q, k=5, where={"even": False})
        assert got[0] == expected[0] and list(got[1][0]) == pytest.approx(list(expected[1][0]))
    finally:
        _close(again)


# -- the Retriever contract, for every retriever and every store -------------------------------
def _dense_on(make_store):
    return lambda chunks, tmp: DenseIndex(Encoder(), make_store(tmp)).build(chunks)


def _milvus(mode):
    return lambda chunks, tmp: MilvusRetriever(Encoder(), MilvusStore(tmp / f"{mode}.db"),
                                               mode=mode).build(chunks)


RETRIEVERS = [
    *[pytest.param(_dense_on(p.values[0]), id=f"dense-{p.id}", marks=p.marks) for p in STORES],
    pytest.param(lambda chunks, tmp: BM25Index().build(chunks), id="bm25"),
    pytest.param(lambda chunks, tmp: HybridRetriever(DenseIndex(Encoder()), BM25Index())
                 .build(chunks), id="hybrid"),
    pytest.param(lambda chunks, tmp: RerankedRetriever(BM25Index().build(chunks),
                                                       CrossEncoderReranker(), candidates=20),
                 id="reranked"),
    *[pytest.param(_milvus(mode), id=f"milvus-{mode}", marks=pytest.mark.needs_milvus)
      for mode in ("dense", "bm25", "hybrid")],
]


@pytest.fixture(scope="module", params=RETRIEVERS)
def retriever(request, hc_chunks, tmp_path_factory):
    r = request.param(hc_chunks, tmp_path_factory.mktemp("retriever"))
    yield r
    for obj in (r, getattr(r, "store_", None)):
        if hasattr(obj, "close"):
            obj.close()
            break


QUERIES = ["refund window for enterprise contracts", "ERR_CONN_4021",
           "my dashboard is stuck loading"]


@pytest.mark.parametrize("query", QUERIES)
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


def test_satisfies_the_protocol_and_fingerprints_its_corpus(retriever, hc_chunks):
    assert isinstance(retriever, Retriever)
    assert len(retriever) == len(hc_chunks)
    fp = retriever.corpus_fingerprint
    assert fp == retriever.corpus_fingerprint and fp.startswith(f"{len(hc_chunks)}:")


def test_hits_point_back_into_their_documents(retriever):
    docs = {d.id: d.text for d in load_helpcentre().documents}
    for h in retriever.search("how long is the refund window", k=5):
        assert docs[h.doc_id][h.start:h.end] == h.text


@pytest.mark.parametrize("bad", [{"status": {"$like": "c%"}}, "status=current"])
def test_bad_filters_raise_before_searching(retriever, bad):
    with pytest.raises((ValueError, TypeError), match="where|operator"):
        retriever.search("refunds", k=3, where=bad)


@pytest.mark.parametrize("query", QUERIES)
def test_retrieve_is_search_with_stages_and_a_bounded_confidence(retriever, query):
    got = retriever.retrieve(query, k=7)
    assert got.hits == tuple(retriever.search(query, k=7))
    assert got.stages and all(s.seconds >= 0 for s in got.stages)
    assert got.confidence_kind in CONFIDENCE_KINDS
    assert got.confidence_kind == retriever.confidence_kind
    lo, hi = retriever.confidence_bounds()
    assert got.confidence is not None and lo <= got.confidence <= hi, (got.confidence, lo, hi)


def test_retrieve_finding_nothing_has_no_confidence(retriever):
    got = retriever.retrieve("export tips", k=5, where={"department": "no-such-department"})
    assert got.hits == () and got.confidence is None and got.stages
