import numpy as np
import pytest

from ragbook import Encoder
from ragbook.dense import DenseIndex, EncoderMismatchError, NotBuiltError, matches
from ragbook.stores import FaissStore


@pytest.fixture(scope="module")
def index(hc_chunks):
    return DenseIndex(Encoder()).build(hc_chunks)


def test_filter_inside_the_search_keeps_k_where_postfilter_finds_nothing(index):
    q, where = "what is the refund window for enterprise contracts", {"department": "community"}
    post = index.search_postfilter(q, k=5, where=where)
    inside = index.search(q, k=5, where=where)
    assert len(post) < 5 and len(inside) == 5
    assert all(h.metadata["department"] == "community" for h in inside)


def test_min_cosine_can_return_fewer_or_nothing(index):
    hits = index.search("refund window for enterprise", k=10)
    cut = hits[2].score
    assert [h.id for h in index.search("refund window for enterprise", k=10, min_cosine=cut)] == [
        h.id for h in hits[:3]]
    assert index.search("refund window for enterprise", k=10, min_cosine=1.01) == []


def test_exact_search_equals_numpy_brute_force(index, hc_chunks):
    enc = index.encoder
    X = enc.encode_passages([c.text for c in hc_chunks])
    q = enc.encode_queries(["my dashboard is stuck loading"])[0]
    expected = [hc_chunks[i].id for i in np.argsort(-(X @ q))[:10]]
    assert [h.id for h in index.search("my dashboard is stuck loading", k=10)] == expected


def test_save_load_roundtrip(index, tmp_path):
    index.save(tmp_path / "idx")
    again = DenseIndex.load(tmp_path / "idx")
    q = "hub cannot reach the relay"
    assert [(h.id, h.score) for h in again.search(q, k=5)] == [
        (h.id, h.score) for h in index.search(q, k=5)]


def test_a_different_query_encoder_is_refused(index, tmp_path):
    index.save(tmp_path / "idx")
    with pytest.raises(EncoderMismatchError, match="all-MiniLM-L6-v2.*multilingual-e5-small"):
        DenseIndex.load(tmp_path / "idx", encoder=Encoder("prefix_encoder"))
    other = DenseIndex.load(tmp_path / "idx")
    other.encoder = Encoder("prefix_encoder", prefix_scheme="e5-passage-only")
    with pytest.raises(EncoderMismatchError, match="rebuild the index"):
        other.search("refunds", k=3)


def test_hnsw_is_close_to_exact(index, hc_chunks):
    approx = DenseIndex(index.encoder, FaissStore(kind="hnsw", ef_search=64)).build(
        hc_chunks, vectors=index.encoder.encode_passages([c.text for c in hc_chunks]))
    qs = ["refund window", "ERR_CONN_4021 on the hub", "export tickets to csv", "sso setup"]
    overlap = np.mean([len({h.id for h in approx.search(q, 10)}
                           & {h.id for h in index.search(q, 10)}) / 10
                       for q in qs])
    assert overlap >= 0.9
    assert len(approx.search("refunds", k=5, where={"department": "billing"})) == 5


def test_build_checks_its_inputs(hc_chunks):
    with pytest.raises(ValueError, match="unit length"):
        DenseIndex().build(hc_chunks[:2], vectors=np.ones((2, 384), dtype=np.float32))
    with pytest.raises(ValueError, match="2 vectors for 3 items"):
        DenseIndex().build(hc_chunks[:3], vectors=np.eye(2, 384, dtype=np.float32))
    with pytest.raises(ValueError, match="unique"):
        DenseIndex().build([hc_chunks[0], hc_chunks[0]])
    with pytest.raises(NotBuiltError, match="build"):
        DenseIndex().search("x")
    with pytest.raises(ValueError, match="kind must be"):
        FaissStore(kind="ivf")


def test_where_operators():
    meta = {"department": "billing", "updated": "2025-06-01", "status": "current"}
    assert matches(meta, {"department": ["billing", "account"],
                          "updated": {"$gte": "2025-01-01", "$lt": "2026-01-01"}})
    assert not matches(meta, {"status": {"$ne": "current"}})
    assert not matches(meta, {"missing": "x"})
    with pytest.raises(ValueError, match="unknown filter operator"):
        matches(meta, {"updated": {"$after": "2025"}})
