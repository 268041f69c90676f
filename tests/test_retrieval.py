"""The contract layer (ragbook.retrieval) and the defects it fixed: each test here failed
before the fix it names."""
import datetime
import json
import math

import numpy as np
import pytest

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.checks import check_k, check_threshold
from ragbook.chunking import chunk_documents
from ragbook.component import NotBuiltError
from ragbook.datasets import load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.filters import check_metadata, matches, translate_where, validate_where
from ragbook.fusion import HybridRetriever, IndexDriftError
from ragbook.persist import CorruptIndexError
from ragbook.retrieval import Retriever, VectorStore
from ragbook.stores import FaissStore
from ragbook.types import Chunk, Document


@pytest.fixture(scope="module")
def docs():
    return load_helpcentre().documents[:12]


@pytest.fixture(scope="module")
def chunks(docs):
    return chunk_documents(docs, size=128, overlap=16)


@pytest.fixture(scope="module")
def dense(chunks):
    return DenseIndex(Encoder()).build(chunks)


# -- checks ---------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 7, np.int64(3), np.int32(1)])
def test_k_accepts_whole_numbers_including_numpy(k):
    assert check_k(k) == int(k) and type(check_k(k)) is int


@pytest.mark.parametrize("k", [0, -2, True, False, 2.0, "5", None, float("nan")])
def test_k_rejects_everything_else(k):
    with pytest.raises(ValueError,
                       match=r"k must be a whole number >= 1 \(the number of results\)"):
        check_k(k)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0.5", True, [0.5]])
def test_thresholds_must_be_finite_numbers(value):
    with pytest.raises(ValueError, match="threshold must be a finite number or None"):
        check_threshold(value)


def test_nan_min_cosine_no_longer_returns_everything(dense):
    """DenseIndex(min_cosine=nan) used to keep every hit (nothing compares below NaN)."""
    with pytest.raises(ValueError, match="min_cosine"):
        DenseIndex(Encoder(), min_cosine=float("nan"))
    with pytest.raises(ValueError, match="min_cosine"):
        dense.search("refund", k=3, min_cosine="0.5")
    with pytest.raises(ValueError, match="min_rerank_score"):
        from ragbook.rerank import CrossEncoderReranker
        CrossEncoderReranker(min_rerank_score=math.nan)


def test_metadata_is_checked_at_build_time():
    ok = check_metadata({"plan": "pro", "seats": 3, "price": 9.5, "beta": False,
                         "tags": ["a", "b"], "path": ("Library", "os"), "owner": None})
    assert ok["path"] == ("Library", "os")
    with pytest.raises(TypeError, match=r"keys must be str"):
        check_metadata({1: "x"}, "a")
    with pytest.raises(TypeError, match=r"store dates as ISO strings"):
        check_metadata({"updated": datetime.date(2025, 6, 1)}, "a")
    with pytest.raises(ValueError, match="finite"):
        check_metadata({"score": float("nan")}, "a")
    with pytest.raises(TypeError, match="an element of metadata"):
        check_metadata({"tags": [{"nested": 1}]}, "a")
    with pytest.raises(TypeError, match="metadata values must be"):
        DenseIndex(Encoder()).build([Document("a", "text",
                                              metadata={"when": datetime.date.today()})])


def test_metadata_round_trips_through_save_and_load(tmp_path):
    """Int keys became strings, tuples became lists, and dates failed the save."""
    md = {"path": ("Library", "os"), "tags": ["x", "y"], "seats": 3, "beta": True, "none": None}
    items = [Document("a", "alpha text about refunds", metadata=md),
             Document("b", "beta text about exports", metadata={"path": ("Tutorial",)})]
    for index, cls in ((DenseIndex(Encoder()), DenseIndex), (BM25Index(), BM25Index)):
        index.build(items).save(tmp_path / cls.__name__)
        again = cls.load(tmp_path / cls.__name__)
        assert again.items_[0]["metadata"] == md
        assert type(again.items_[0]["metadata"]["path"]) is tuple
        assert again.search("refunds", k=1)[0].metadata == md


# -- the where language -----------------------------------------------------------------------
@pytest.mark.parametrize("where, error, message", [
    ("status=current", TypeError, "where must be a mapping"),
    ({"updated": {"$after": "2025"}}, ValueError,
     r"unknown filter operator '\$after' on 'updated'"),
    ({"plan": {"$in": "pro"}}, TypeError, r"where\['plan'\]\['\$in'\] must be a list"),
    ({"seats": {"$gt": None}}, TypeError, r"where\['seats'\]\['\$gt'\] must be a finite number"),
    ({"plan": {}}, ValueError, r"where\['plan'\] is an empty operator mapping"),
    ({3: "x"}, TypeError, "where key 3 must be a str"),
    ({"plan": object()}, TypeError, r"where\['plan'\]\['\$eq'\] is a object"),
])
def test_bad_filters_are_refused_naming_the_key(where, error, message):
    with pytest.raises(error, match=message):
        validate_where(where)


def test_every_retriever_validates_where_before_searching(dense, chunks):
    for r in (dense, BM25Index().build(chunks),
              HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks)):
        with pytest.raises(ValueError, match="unknown filter operator"):
            r.search("refund window", k=3, where={"status": {"$like": "cur%"}})


def test_matches_semantics():
    md = {"plan": "pro", "updated": "2025-06-01", "seats": 5}
    assert matches(md, {"plan": ["pro", "team"], "updated": {"$gte": "2025-01-01"}})
    assert not matches(md, {"missing": "x"})
    assert matches(md, {"missing": {"$ne": "x"}})
    assert not matches(md, {"seats": {"$gt": "3"}})      # a number vs a str never matches


def test_translate_where_hands_each_condition_to_the_store():
    terms = translate_where({"plan": ["pro", "team"], "seats": {"$gte": 2, "$lt": 9},
                             "status": "current"}, lambda k, op, v: (k, op, v))
    assert terms == [("plan", "$in", ["pro", "team"]), ("seats", "$gte", 2), ("seats", "$lt", 9),
                     ("status", "$eq", "current")]

    def no_ranges(k, op, v):
        if op not in ("$eq", "$in"):
            raise ValueError(f"this store cannot filter {op}")
        return (k, op, v)

    with pytest.raises(ValueError, match="cannot filter"):
        translate_where({"seats": {"$gt": 1}}, no_ranges)


# -- inputs that used to be indexed or to crash ------------------------------------------------
@pytest.mark.parametrize("make", [DenseIndex, BM25Index])
def test_blank_texts_are_refused_naming_the_item(make):
    """A blank document used to be indexed and then win every dense query (score 1.0)."""
    items = [Document("good", "Refunds take five days."), Document("empty", "   ")]
    index = make(Encoder()) if make is DenseIndex else make()
    with pytest.raises(ValueError, match="the text of item 'empty' is blank"):
        index.build(items)


@pytest.mark.parametrize("make", [DenseIndex, BM25Index])
def test_duplicate_ids_are_refused_naming_the_id(make):
    items = [Document("a", "one text"), Document("b", "two"), Document("a", "another text")]
    index = make(Encoder()) if make is DenseIndex else make()
    with pytest.raises(ValueError, match="item id 'a' occurs twice"):
        index.build(items)


@pytest.mark.parametrize("query, error", [("", ValueError), ("  ", ValueError), (None, TypeError),
                                          (42, TypeError), ("caf\udce9", ValueError)])
def test_bad_queries_get_clear_errors(dense, query, error):
    for r in (dense, BM25Index().build(dense.items_ and [Document("a", "café")])):
        with pytest.raises(error, match="query"):
            r.search(query, k=3)


def test_wrong_dimension_vectors_get_a_clear_error(dense, chunks):
    with pytest.raises(ValueError, match="dimension 8 but this store holds 384-d"):
        dense.search_vector(np.ones(8, np.float32) / np.sqrt(8), k=3)
    with pytest.raises(ValueError, match="got 2 vectors for"):
        DenseIndex(Encoder()).build(chunks[:3], vectors=np.eye(2, 384, dtype=np.float32))


def test_huge_k_is_clamped_for_hnsw(chunks):
    """HNSW used to pass k into efSearch unclamped: OverflowError."""
    index = DenseIndex(Encoder(), FaissStore(kind="hnsw")).build(chunks)
    assert len(index.search("refund", k=10**12)) == len(chunks)
    assert len(index.search("refund", k=np.int64(5))) == 5


def test_an_unbuilt_index_inside_a_hybrid_says_what_to_call(dense):
    hybrid = HybridRetriever(dense, BM25Index())
    with pytest.raises(NotBuiltError, match=r"BM25 index .* not built: call HybridRetriever.build"):
        hybrid.search("refund", k=3)


def test_hybrid_compares_fingerprints_so_changed_text_is_drift(chunks):
    """The old check compared ids only: the same ids with edited text passed."""
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks)
    edited = [Chunk(c.id, c.doc_id, c.text.upper(), c.start, c.end, c.metadata) for c in chunks]
    hybrid.bm25.build(edited)
    with pytest.raises(IndexDriftError, match="different ids or texts"):
        hybrid.search("refund", k=3)


def test_hits_carry_offsets_into_their_document(dense, docs):
    text = {d.id: d.text for d in docs}
    for r in (dense, BM25Index().build(dense.items_ and chunk_documents(docs, 128, 16))):
        for h in r.search("how long is the refund window", k=5):
            assert text[h.doc_id][h.start:h.end] == h.text


# -- the store and the protocols ------------------------------------------------------------------
def test_everything_satisfies_the_protocols(dense, chunks):
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks)
    for r in (dense, BM25Index().build(chunks), hybrid):
        assert isinstance(r, Retriever)
    assert isinstance(dense.store_, VectorStore)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_store_add_get_delete_search(kind):
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(6, 4)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    recs = [{"id": f"r{i}", "doc_id": "d", "text": f"t{i}", "start": 0, "end": 2,
             "metadata": {"even": i % 2 == 0}} for i in range(6)]
    store = FaissStore(kind=kind).create(4)
    store.add(recs, vecs)
    assert len(store) == 6 and store.get(["r3", "r0"]) == [recs[3], recs[0]]
    ids, scores = store.search(vecs[[2]], k=2)
    assert ids[0][0] == "r2" and scores[0][0] == pytest.approx(1.0, abs=1e-5)
    order = [f"r{i}" for i in np.argsort(-(vecs[[0, 2, 4]] @ vecs[1]), kind="stable") * 2]
    assert store.search(vecs[[1]], k=6, where={"even": True})[0][0] == order   # best first
    before = store.corpus_fingerprint
    assert store.delete(["r2", "nope"]) == 1 and len(store) == 5
    assert store.corpus_fingerprint != before
    assert "r2" not in store.search(vecs[[2]], k=5)[0][0]
    assert store.search(vecs[[3]], k=1)[0][0] == ["r3"]      # positions stay aligned after delete
    with pytest.raises(ValueError, match="already in the store"):
        store.add(recs[:1], vecs[:1])
    with pytest.raises(KeyError, match="r2"):
        store.get(["r2"])


def test_dense_add_and_delete_keep_search_consistent(chunks):
    index = DenseIndex(Encoder()).build(chunks[:10])
    index.add(chunks[10:14])
    assert len(index) == 14
    target = chunks[12]
    assert index.search(target.text, k=1)[0].id == target.id
    assert index.delete([target.id]) == 1
    assert target.id not in [h.id for h in index.search(target.text, k=14)]


# -- atomic, verified saves -----------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: DenseIndex(Encoder()), BM25Index])
def test_a_save_that_fails_midway_leaves_the_old_index_whole(make, chunks, tmp_path, monkeypatch):
    """A failed save over an existing index used to leave new vectors next to old records,
    which loaded silently with wrong labels."""
    path = tmp_path / "idx"
    old = make().build(chunks[:20])
    old.save(path)
    new = make().build(chunks[20:45])
    def boom(obj):
        raise OSError("disk full (simulated)")

    import ragbook.bm25
    import ragbook.stores.faiss
    monkeypatch.setattr(ragbook.stores.faiss, "dumps", boom)
    monkeypatch.setattr(ragbook.bm25, "dumps", boom)
    with pytest.raises(OSError, match="disk full"):
        new.save(path)
    monkeypatch.undo()
    again = type(old).load(path)
    assert [r["id"] for r in again.items_] == [c.id for c in chunks[:20]]
    hit = again.search(chunks[3].text, k=1)[0]
    assert hit.text == chunks[3].text
    assert not [p for p in tmp_path.iterdir() if p.name != "idx"]   # no temporary left behind


@pytest.mark.parametrize("make, victim", [(lambda: DenseIndex(Encoder()), "index.faiss"),
                                          (lambda: DenseIndex(Encoder()), "records.json"),
                                          (BM25Index, "weights.npz"), (BM25Index, "bm25.json")])
def test_load_verifies_the_manifest_and_names_the_bad_file(make, victim, chunks, tmp_path):
    path = make().build(chunks[:10]).save(tmp_path / "idx")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["count"] == 10 and victim in manifest["files"]
    data = bytearray((path / victim).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / victim).write_bytes(bytes(data))
    cls = DenseIndex if victim in ("index.faiss", "records.json") else BM25Index
    with pytest.raises(CorruptIndexError, match=f"{victim}' does not match its checksum"):
        cls.load(path)
    (path / victim).unlink()
    with pytest.raises(CorruptIndexError, match=f"{victim}' is missing"):
        cls.load(path)


def test_loading_the_wrong_kind_or_nothing_says_so(chunks, tmp_path):
    BM25Index().build(chunks[:5]).save(tmp_path / "bm25")
    with pytest.raises(CorruptIndexError, match="holds a 'BM25Index', not a DenseIndex"):
        DenseIndex.load(tmp_path / "bm25")
    with pytest.raises(FileNotFoundError, match="no saved DenseIndex"):
        DenseIndex.load(tmp_path / "nothing")


def test_saved_manifest_records_the_encoder(dense, tmp_path):
    path = dense.save(tmp_path / "d")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["encoder_fingerprint"] == Encoder().fingerprint
    assert manifest["corpus_fingerprint"] == dense.corpus_fingerprint


# -- the BM25 tokenizer --------------------------------------------------------------------
def test_bm25_tokenizer_is_unicode_aware():
    """It kept only ASCII [0-9a-z]: café became caf, and CJK/Arabic text had no tokens."""
    from ragbook.bm25 import Tokenizer

    tok = Tokenizer()
    assert tok("Le café CRÈME") == ["le", "café", "crème"]
    assert tok("Straße ＡＢＣ") == ["strasse", "abc"]                  # casefold, NFKC
    assert tok("خطأ في الاتصال") == ["خطأ", "في", "الاتصال"]
    assert tok("返金期間") == ["返", "金", "期", "間"]
    assert tok("ERR_CONN_4021 in os.path.join") == ["err_conn_4021", "os.path.join"]
    index = BM25Index().build([Document("fr", "Le café est fermé."),
                               Document("jp", "返金期間は14日です"),
                               Document("en", "Refunds take fourteen days.")])
    assert index.search("café", k=1)[0].id == "fr"
    assert index.search("返金", k=1)[0].id == "jp"


def test_make_hit_equals_the_checked_constructor_and_refuses_nan():
    from ragbook.retrieval import make_hit, record
    from ragbook.types import Document, Hit

    rec = record(Document("faq", "Refunds take 14 days.", metadata={"lang": "en"}))
    hit = make_hit(rec, np.float32(0.5), 2)
    assert hit == Hit(id="faq", score=0.5, rank=2, doc_id="faq", text="Refunds take 14 days.",
                      metadata={"lang": "en"}, start=rec.get("start"), end=rec.get("end"))
    assert type(hit.score) is float
    with pytest.raises(ValueError, match="not NaN"):
        make_hit(rec, float("nan"), 1)
