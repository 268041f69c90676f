"""HybridRetriever.save/load: one folder, both indexes and the fusion settings, verified."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.embeddings import Encoder
from ragbook.fusion import HybridRetriever
from ragbook.persist import CorruptIndexError

QUERIES = ["how long is the refund window for enterprise contracts?", "export tickets to CSV",
           "ERR_CONN_4021"]


@pytest.fixture(scope="module")
def hybrid():
    docs = [d for d in load_helpcentre().documents][:12]
    chunks = chunk_documents(docs, size=128, overlap=16)
    return HybridRetriever(DenseIndex(Encoder()), BM25Index(), depth=40, rrf_k=30,
                           weights=(1.0, 0.5), min_rrf=0.001).build(chunks)


def test_round_trip_gives_identical_results(hybrid, tmp_path):
    hybrid.save(tmp_path / "idx")
    assert {p.name for p in (tmp_path / "idx").iterdir()} == {"dense", "bm25", "hybrid.json",
                                                              "manifest.json"}
    loaded = HybridRetriever.load(tmp_path / "idx")
    assert (loaded.depth, loaded.rrf_k, loaded.weights, loaded.min_rrf) == (40, 30, (1.0, 0.5),
                                                                              0.001)
    assert loaded.corpus_fingerprint == hybrid.corpus_fingerprint
    for q in QUERIES:
        assert loaded.search(q, k=10) == hybrid.search(q, k=10)
        assert loaded.search(q, k=5, where={"status": "current"}) == \
            hybrid.search(q, k=5, where={"status": "current"})


def test_saving_again_replaces_the_folder(hybrid, tmp_path):
    hybrid.save(tmp_path / "idx")
    hybrid.save(tmp_path / "idx")
    assert HybridRetriever.load(tmp_path / "idx").search(QUERIES[0], k=3) == \
        hybrid.search(QUERIES[0], k=3)


@pytest.mark.parametrize("victim", ["bm25/records.json", "dense/index.faiss", "hybrid.json"])
def test_a_corrupted_file_is_reported(hybrid, tmp_path, victim):
    hybrid.save(tmp_path / "idx")
    target = tmp_path / "idx" / victim
    target.write_bytes(target.read_bytes()[:-20])
    with pytest.raises(CorruptIndexError, match=f"{target.name}.*does not match its checksum"):
        HybridRetriever.load(tmp_path / "idx")


def test_a_missing_sub_index_and_a_wrong_kind_are_reported(hybrid, tmp_path):
    hybrid.save(tmp_path / "idx")
    (tmp_path / "idx" / "bm25" / "weights.npz").unlink()
    with pytest.raises(CorruptIndexError, match=r"weights\.npz' is missing"):
        HybridRetriever.load(tmp_path / "idx")
    with pytest.raises(CorruptIndexError, match="holds a 'DenseIndex', not a HybridRetriever"):
        HybridRetriever.load(tmp_path / "idx" / "dense")
    with pytest.raises(FileNotFoundError, match="no saved HybridRetriever"):
        HybridRetriever.load(tmp_path / "nothing")


def test_settings_are_in_the_checksummed_file(hybrid, tmp_path):
    hybrid.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["kind"] == "HybridRetriever" and "hybrid.json" in manifest["files"]
    assert manifest["count"] == len(hybrid)


def test_metadata_that_looks_like_a_save_tag_round_trips(tmp_path):
    """A page whose front matter says `__tuple__: x` once loaded back as a tuple and broke
    every question asked of the index."""
    from ragbook.types import Document

    docs = [Document("a", "Refunds take 14 days on every plan.", metadata={"__tuple__": "x"}),
            Document("b", "Exports hold 10,000 rows.", metadata={"__dict__": ["y"],
                                                                  "path": ("Billing", "FAQ")})]
    saved = BM25Index().build(docs).save(tmp_path / "bm25")
    back = BM25Index.load(saved)
    assert [h.metadata for h in back.search("refunds exports", k=2)] == [
        h.metadata for h in BM25Index().build(docs).search("refunds exports", k=2)]
    assert back.items_[0]["metadata"] == {"__tuple__": "x"}
    assert back.items_[1]["metadata"]["path"] == ("Billing", "FAQ")


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
keys = st.one_of(st.sampled_from(["__tuple__", "__dict__", "status", ""]), st.text(max_size=6))
metadata = st.dictionaries(keys, st.one_of(scalars, st.lists(scalars, max_size=3),
                                           st.lists(scalars, max_size=3).map(tuple)),
                           max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(st.lists(metadata, min_size=1, max_size=3))
def test_any_allowed_metadata_round_trips_through_every_save(tmp_path_factory, metas):
    """Whatever keys and values check_metadata allows come back exactly (types included:
    tuples stay tuples, ints stay ints) from BM25Index and DenseIndex on FAISS (what a hybrid
    saves)."""
    import numpy as np

    from ragbook.types import Document

    docs = [Document(f"d{i}", f"refund window number {i}", metadata=m)
            for i, m in enumerate(metas)]
    rng = np.random.default_rng(len(metas))
    vectors = rng.normal(size=(len(docs), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    folder = tmp_path_factory.mktemp("save")
    bm25 = BM25Index.load(BM25Index().build(docs).save(folder / "bm25"))
    dense = DenseIndex.load(DenseIndex(Encoder()).build(docs, vectors=vectors)
                            .save(folder / "dense"), encoder=Encoder())

    def typed(v):
        return [(type(x).__name__, x) for x in v] if isinstance(v, (list, tuple)) else v

    for index in (bm25, dense):
        for doc, rec in zip(docs, index.items_, strict=True):
            assert rec["metadata"] == doc.metadata
            assert {k: (type(v).__name__, typed(v)) for k, v in rec["metadata"].items()} == \
                {k: (type(v).__name__, typed(v)) for k, v in doc.metadata.items()}


@pytest.mark.parametrize("content", ["", '{"kind": "Hybrid', "[1, 2]", '{"kind": 3}', "\xff"])
def test_a_damaged_manifest_is_named(hybrid, tmp_path, content):
    hybrid.save(tmp_path / "idx")
    (tmp_path / "idx" / "manifest.json").write_bytes(content.encode("latin1"))
    with pytest.raises(CorruptIndexError, match=r"manifest\.json.*rebuild and save"):
        HybridRetriever.load(tmp_path / "idx")
