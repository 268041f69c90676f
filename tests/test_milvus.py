"""The Milvus backend (chapter 11): filter translation, the store's CRUD, persistence and the
one-process lock, the quirks of Milvus Lite we rely on, and equivalence with ragbook's own
retrievers. Every Milvus here is an embedded Milvus Lite in a temporary folder, started and
stopped by the test; nothing touches the network."""
import json
import logging
import math
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ragbook import Encoder
from ragbook.bm25 import BM25Index, Tokenizer
from ragbook.component import NotBuiltError
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex, EncoderMismatchError
from ragbook.evaluate import paired_bootstrap, per_query, retrieve_run
from ragbook.filters import matches
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.retrieval import records_from
from ragbook.scaling import bytes_per_vector, hnsw_graph_bytes, shards_needed
from ragbook.scaling.compare import overlap_at_k, rank_correlation
from ragbook.stores import (
    DEFAULT_ANALYZER,
    MATCH_NOTHING,
    MILVUS_STANDARD,
    MilvusStore,
    milvus_filter,
)
from ragbook.types import Chunk, Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # expected errors log tracebacks


def unit_rows(n, dim=8, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# -- filter translation (no Milvus needed) ---------------------------------------------------
@pytest.mark.parametrize("where,expected", [
    (None, ""),
    ({}, ""),
    ({"status": "current"},
     '(metadata["status"] == "current" or json_contains_any(metadata["status"], ["current"]))'),
    ({"n": 3, "ok": True},
     '(metadata["n"] == 3 or json_contains_any(metadata["n"], [3])) and '
     '(metadata["ok"] == true or json_contains_any(metadata["ok"], [true]))'),
    ({"plan": ["pro", "team"]},
     '(metadata["plan"] == "pro" or metadata["plan"] == "team" or '
     'json_contains_any(metadata["plan"], ["pro", "team"]))'),
    ({"plan": ["pro"]},
     '(metadata["plan"] == "pro" or json_contains_any(metadata["plan"], ["pro"]))'),
    ({"status": {"$ne": "superseded"}},
     '(metadata["status"] is null or not (metadata["status"] == "superseded" or '
     'json_contains_any(metadata["status"], ["superseded"])))'),
    ({"plan": {"$nin": ["free", "pro"]}},
     '(metadata["plan"] is null or not (metadata["plan"] == "free" or metadata["plan"] == "pro" '
     'or json_contains_any(metadata["plan"], ["free", "pro"])))'),
    ({"plan": {"$nin": ["free", None]}},
     '(metadata["plan"] is not null and not (metadata["plan"] == "free" or '
     'json_contains_any(metadata["plan"], ["free"])))'),
    ({"updated": {"$gte": "2025-01-01"}, "n": {"$lt": 2.5}},
     'dates["updated"] >= "2025-01-01T00:00:00.000000" and metadata["n"] < 2.5'),
    ({"owner": {"$ne": None}}, 'metadata["owner"] is not null'),
    ({"plan": {"$nin": []}}, ""),
    ({"plan": []}, MATCH_NOTHING),
    ({"plan": {"$eq": None}}, MATCH_NOTHING),
    ({"plan": [], "status": "current"}, MATCH_NOTHING),
])
def test_filters_translate_to_milvus_expressions(where, expected):
    assert milvus_filter(where) == expected


def test_values_and_keys_are_quoted_and_escaped():
    expr = milvus_filter({'we"ird\\key': 'say "hi"\\\n\tnow\r'})
    assert expr.startswith(r'(metadata["we\"ird\\key"] == "say \"hi\"\\\n\tnow\r" or ')
    assert milvus_filter({"name": "café 😀"}).startswith('(metadata["name"] == "café 😀" or')
    assert milvus_filter({"big": 2**62, "tiny": 1.5e-7}) == (
        f'(metadata["big"] == {2**62} or json_contains_any(metadata["big"], [{2**62}])) and '
        '(metadata["tiny"] == 1.5e-07 or json_contains_any(metadata["tiny"], [1.5e-07]))')


@pytest.mark.parametrize("where,error,match", [
    ({"status": {"$like": "c%"}}, ValueError, "unknown filter operator"),
    ({"status": "\ud800"}, ValueError, "lone surrogate"),
    ({"\udcff": "x"}, ValueError, "lone surrogate"),
    ({"n": {"$gt": None}}, TypeError, "finite number or an ISO date"),
    ({"n": {"$gt": "c"}}, ValueError, "is text"),
    ("status=current", TypeError, "where must be a mapping"),
])
def test_filters_that_cannot_be_written_raise_naming_the_problem(where, error, match):
    with pytest.raises(error, match=match):
        milvus_filter(where)


# -- sizing and comparison arithmetic --------------------------------------------------------
def test_sizing_arithmetic():
    assert [bytes_per_vector(384, e) for e in ("float32", "float16", "int8", "binary")] == \
        [1536, 768, 384, 48]
    assert bytes_per_vector(384, "pq", 48) == 48
    assert hnsw_graph_bytes(16) == pytest.approx(4 * (32 + 16 / 15))
    assert shards_needed(0, 2**30) == 1
    assert shards_needed(100, 100, fill=1.0) == 1 and shards_needed(101, 100, fill=1.0) == 2
    assert shards_needed(100e9, 64 * 2**30, fill=0.7) == math.ceil(100e9 / (64 * 2**30 * 0.7))
    with pytest.raises(ValueError, match="divides dim"):
        bytes_per_vector(384, "pq", 50)
    with pytest.raises(ValueError, match="encoding must be"):
        bytes_per_vector(384, "int4")
    with pytest.raises(ValueError, match="fill"):
        shards_needed(1, 1, fill=0)


def test_overlap_and_rank_correlation():
    assert overlap_at_k(["a", "b", "c"], ["c", "b", "a"], 3) == 1.0
    assert overlap_at_k(["a", "b"], ["a", "x"], 2) == 0.5
    assert overlap_at_k([], [], 10) == 1.0
    assert overlap_at_k(["a", "b"], ["a", "b"], 10) == 1.0       # both found only two
    assert rank_correlation(list("abcdef"), list("abcdef")) == pytest.approx(1.0)
    assert rank_correlation(list("abcdef"), list("fedcba")) == pytest.approx(-1.0)
    assert rank_correlation(list("abcd"), list("abdc"), n=4) == pytest.approx(0.8)
    assert rank_correlation(["a"], ["a"]) == 1.0
    with pytest.raises(ValueError, match="k must be"):
        overlap_at_k(["a"], ["a"], 0)


def test_a_missing_extra_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pymilvus", None)   # as if it were not installed
    with pytest.raises(ModuleNotFoundError, match=r'pip install "ragbook\[milvus\]"'):
        MilvusStore().create(8)


def test_bad_settings_are_refused_before_connecting():
    with pytest.raises(ValueError, match="ends in .db"):
        MilvusStore("some/folder")
    with pytest.raises(ValueError, match="index must be"):
        MilvusStore(index="IVF_PQ")
    with pytest.raises(ValueError, match="collection must be"):
        MilvusStore(collection="2-bad")
    with pytest.raises(ValueError, match="mode must be"):
        MilvusRetriever(Encoder(), mode="sparse")
    with pytest.raises(ValueError, match="rrf_k"):
        MilvusRetriever(Encoder(), rrf_k=60.5)
    with pytest.raises(NotBuiltError, match="build"):
        MilvusRetriever(Encoder()).search("refunds")


# -- the store against Milvus Lite -----------------------------------------------------------
METADATA_VALUES = ["current", "superseded", 'say "hi"', "back\\slash", "two\nlines", "café",
                   "2025-06-01", "2024-12-31", "2025", "later", 0, 1, 3, -2, 2.5, 1e-7, True,
                   # one instant written five ways, and others that sort wrong as text
                   "2025-06-01 12:00", "2025-06-01T12:00:00", "2025-06-01T12:00:00.000+02:00",
                   "2025-06-01T09:30Z", "2024-12-31 23:59:59.5", 2**53 + 1,
                   False, None, ["a", "b"], ("x", 1), ["current", "superseded"], [],
                   ["2025-06-01"], [None, "a"]]


def random_metadata(rng):
    keys = ["status", "n", "updated", 'odd "key"']
    return {k: rng.choice(METADATA_VALUES) for k in keys if rng.random() < 0.8}


def random_where(rng):
    where = {}
    for key in rng.sample(["status", "n", "updated", 'odd "key"'], rng.randint(1, 2)):
        op = rng.choice(["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "bare",
                         "list"])
        scalars = [v for v in METADATA_VALUES if not isinstance(v, (list, tuple))]
        if op in ("$in", "$nin", "list"):
            value = rng.sample(scalars, rng.randint(0, 3))
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            value = rng.choice([0, 1, 2.5, -3, 2**53, "2025-01-01", "2024-12-31T08:00",
                                "2025-06-01T12:00", "2025-06-01 09:30:00", "2025-06-01"])
        else:
            value = rng.choice(scalars)
        where[key] = value if op == "bare" else value if op == "list" else {op: value}
    return where


@pytest.fixture(scope="module")
def filter_store():
    rng = random.Random(0)
    items = [Document(id=f"item-{i}", text=f"item {i}", metadata=random_metadata(rng))
             for i in range(60)]
    records = records_from(items)
    store = MilvusStore().create(8)
    store.add(records, unit_rows(len(records)))
    yield store, records
    store.close()


@pytest.mark.needs_milvus
def test_milvus_filters_select_exactly_what_matches_selects(filter_store):
    """300 random filters over tricky metadata (quotes, backslashes, newlines, numbers vs
    strings, bools, None, missing keys, lists, tuples): Milvus's search, filtered inside,
    returns the same items as ragbook.filters.matches."""
    store, records = filter_store
    rng = random.Random(1)
    query = unit_rows(1, seed=9)
    for _ in range(300):
        where = random_where(rng)
        expected = {r["id"] for r in records if matches(r["metadata"], where)}
        ids, _ = store.search(query, k=len(records), where=where)
        assert set(ids[0]) == expected, (where, milvus_filter(where))


@pytest.mark.needs_milvus
def test_store_add_get_upsert_delete():
    items = [Chunk(id=f"d:{i}-{i + 5}", doc_id="d", text=f"txt{i:02d}", start=i, end=i + 5,
                   metadata={"tags": ("a", "b"), "n": i}) for i in range(0, 30, 10)]
    records = records_from(items, contexts=["a note", "", "another note"])
    with MilvusStore() as store:
        store.create(8)
        store.add(records, unit_rows(3))
        assert len(store) == 3
        assert store.get(["d:20-25", "d:0-5"]) == [records[2], records[0]]  # tuples, contexts
        assert store.records() == records
        fp = store.corpus_fingerprint
        with pytest.raises(ValueError, match="already in the collection"):
            store.add(records[:1], unit_rows(1))
        with pytest.raises(ValueError, match="dimension 4"):
            store.add(records_from([Document("new", "new text")]), unit_rows(1, dim=4))
        with pytest.raises(KeyError, match="no-such-id"):
            store.get(["d:0-5", "no-such-id"])
        changed = dict(records[1], text="txt X")
        new = records_from([Document("new", "brand new")])[0]
        assert store.upsert([changed, new], unit_rows(2, seed=3)) == (1, 1)
        assert store.records() == [records[0], changed, records[2], new]  # order kept
        assert store.corpus_fingerprint != fp
        assert store.delete(["d:0-5", "no-such-id"]) == 1     # Milvus echoes both ids
        assert len(store) == 3 and store.delete(["d:0-5"]) == 0


@pytest.mark.needs_milvus
def test_ids_with_quotes_and_backslashes():
    """pymilvus's get/delete by id write the ids into an expression unescaped; ours escape."""
    docs = [Document('say "hi"', "a b"), Document("back\\slash", "c d"),
            Document("it's", "e f"), Document("ünï 😀", "g h")]
    with MilvusStore() as store:
        store.create(8)
        store.add(records_from(docs), unit_rows(4))
        assert [r["id"] for r in store.get([d.id for d in docs])] == [d.id for d in docs]
        assert store.upsert(records_from(docs[:1]), unit_rows(1)) == (0, 1)
        assert store.delete([docs[0].id, docs[1].id]) == 2 and len(store) == 2


@pytest.mark.needs_milvus
def test_retriever_reopens_from_disk_and_checks_the_encoder(tmp_path, hc_chunks, encoder):
    uri = tmp_path / "helpcentre.db"
    built = MilvusRetriever(encoder, MilvusStore(uri), mode="dense").build(hc_chunks[:40])
    before = [h.id for h in built.search("refund window", k=5)]
    fp = built.corpus_fingerprint
    built.close()
    reopened = MilvusRetriever.open(uri, encoder, mode="dense")
    assert [h.id for h in reopened.search("refund window", k=5)] == before
    assert reopened.corpus_fingerprint == fp and len(reopened) == 40
    reopened.close()

    class OtherEncoder:
        fingerprint = "some-other-model|weights=0|prefix=none|max_length=256"

    with pytest.raises(EncoderMismatchError, match="some-other-model"):
        MilvusRetriever.open(uri, OtherEncoder(), mode="dense")
    with pytest.raises(FileNotFoundError, match="no collection 'nope'"):
        MilvusRetriever.open(MilvusStore(uri, "nope"), encoder)


@pytest.mark.needs_milvus
def test_a_second_process_is_told_about_the_one_process_lock(tmp_path):
    uri = str(tmp_path / "locked.db")
    with MilvusStore(uri) as store:
        store.create(8)
        code = textwrap.dedent(f"""
            import logging; logging.disable(logging.CRITICAL)
            from ragbook.stores import MilvusLockedError, MilvusStore
            try:
                MilvusStore({uri!r}).open()
            except MilvusLockedError as err:
                print("LOCKED:", err)
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120).stdout
    assert "LOCKED:" in out and "one process per database folder" in out, out
    with MilvusStore(uri) as again:          # closed here: the folder opens again
        assert len(again.open()) == 0


@pytest.mark.needs_milvus
def test_milvus_lite_quirks_we_rely_on(tmp_path):
    """Each quirk the backend works around, checked on the raw client: if one goes away in
    a newer Milvus Lite, this test says which workaround to revisit."""
    from pymilvus import MilvusClient
    from pymilvus.exceptions import MilvusException

    uri = str(tmp_path / "quirks.db")
    with MilvusStore(uri) as store:
        store.create(8)
        store.add(records_from([Document("a", "refund window refund", {"k": "x"}),
                                Document("b", "cancel plan", {"k": "y"})]), unit_rows(2))
        raw = store.client
        hits = raw.search("ragbook", data=["refund"], anns_field="sparse", limit=2)[0]
        assert [h["id"] for h in hits] == ["a"] and hits[0]["distance"] < 0   # -BM25
        store.add(records_from([Document("c", "refund again")]), unit_rows(1, seed=2))
        hits = raw.search("ragbook", data=["again"], anns_field="sparse", limit=2)[0]
        assert [h["id"] for h in hits] == ["c"]          # no flush needed to see new rows
        # BM25 statistics are per segment: the same text scores differently in the flushed
        # segment (a) and in the in-memory one (d), which a collection-wide IDF would not do
        store.flush()
        store.add(records_from([Document("d", "refund window refund")]), unit_rows(1, seed=3))
        scores = {h["id"]: h["distance"] for h in
                  raw.search("ragbook", data=["refund"], anns_field="sparse", limit=5)[0]}
        assert scores["a"] != pytest.approx(scores["d"], rel=1e-3), scores
        with pytest.raises(MilvusException, match="field reference"):
            raw.query("ragbook", filter='metadata["k"] in ["x"]')   # hence == ... or ...
        props = raw.describe_collection("ragbook")["fields"]
        text = next(f for f in props if f["name"] == "text")
        assert json.loads(text["params"]["analyzer_params"]) == DEFAULT_ANALYZER
    # Lite knows two tokenizers; a Milvus server has more ("english", "whitespace", ...)
    with pytest.raises(MilvusException, match="unknown tokenizer type: 'english'"), \
            MilvusStore(analyzer={"type": "english"}) as english:
        english.create(8)
    again = MilvusClient(uri)
    assert str(again.get_load_state("ragbook")["state"]) in ("NotLoad", "LoadState.NotLoad")
    again.close()
    from milvus_lite.server_manager import server_manager_instance
    server_manager_instance.release_server(uri)


# -- equivalence with ragbook's own retrievers -----------------------------------------------
@pytest.fixture(scope="module")
def encoder():
    return Encoder()


@pytest.fixture(scope="module")
def helpcentre_pair(hc_chunks, hc_hybrid, encoder):
    ours = hc_hybrid
    milvus = MilvusRetriever(encoder).build(hc_chunks)
    yield ours, milvus
    milvus.close()


@pytest.mark.needs_milvus
def test_same_corpus_fingerprint(helpcentre_pair):
    ours, milvus = helpcentre_pair
    assert milvus.corpus_fingerprint == ours.corpus_fingerprint
    assert milvus.items_ == ours.items_


@pytest.mark.needs_milvus
def test_dense_top10_matches_the_flat_index(helpcentre_pair):
    ours, milvus = helpcentre_pair
    dense = milvus.with_mode("dense")
    questions = [q.standalone for q in load_helpcentre().questions]
    for where in (None, {"status": {"$ne": "superseded"}}):
        overlaps = [overlap_at_k([h.id for h in ours.dense.search(q, 10, where)],
                                 [h.id for h in dense.search(q, 10, where)], 10)
                    for q in questions]
        assert np.mean(overlaps) >= 0.99, (where, np.mean(overlaps))
    q = questions[0]
    a, b = ours.dense.search(q, 5), dense.search(q, 5)
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)


@pytest.mark.needs_milvus
def test_bm25_ranks_like_ours_where_the_tokenizers_agree(helpcentre_pair):
    from milvus_lite.analyzer import create_analyzer

    ours, milvus = helpcentre_pair
    bm25 = milvus.with_mode("bm25")
    questions = [q.standalone for q in load_helpcentre().questions]
    rho = [rank_correlation([h.id for h in ours.bm25.search(q, 50)],
                            [h.id for h in bm25.search(q, 50)], n=10) for q in questions]
    assert np.mean(rho) >= 0.8, np.mean(rho)      # measured 0.87 (docs/benchmarks.md)
    # where they differ: codes joined by - and . are one token for us, split for Milvus;
    # we fold case with NFKC + casefold, Milvus lower-cases; the stopwords are ours in both
    milvus_tokens = create_analyzer(DEFAULT_ANALYZER).tokenize
    assert Tokenizer()("a 14-day refund in os.path") == ["14-day", "refund", "os.path"]
    assert milvus_tokens("a 14-day refund in os.path") == ["14", "day", "refund", "os", "path"]
    assert create_analyzer(MILVUS_STANDARD).tokenize("how do I") == ["how", "do", "i"]
    assert Tokenizer()("Straße") == ["strasse"] and milvus_tokens("Straße") == ["straße"]
    assert Tokenizer()("ERR_CONN_4021") == milvus_tokens("ERR_CONN_4021") == ["err_conn_4021"]


@pytest.mark.needs_milvus
def test_a_milvus_hybrids_rrf_confidence_is_never_compared_with_a_cosine_threshold(
        helpcentre_pair):
    from ragbook import Pipeline, SentenceReader

    ours, milvus = helpcentre_pair
    q = "how long is the refund window for enterprise contracts?"
    got = milvus.retrieve(q, k=10)
    lo, hi = milvus.confidence_bounds()
    assert got.confidence_kind == "rrf" and lo <= got.confidence <= hi < 0.04
    assert ours.retrieve(q, k=10).confidence_kind == "cosine"
    reader = SentenceReader(encoder=ours.dense.encoder)
    assert Pipeline(ours, reader=reader, min_confidence=0.5).min_confidence == 0.5
    with pytest.raises(ValueError, match="outside what this pipeline's confidence can be"):
        Pipeline(milvus, reader=reader, min_confidence=0.5)        # the same cosine threshold
    with pytest.raises(ValueError, match="a cosine threshold.*rrf score"):
        Pipeline(milvus, reader=reader, min_confidence=0.01, min_confidence_kind="cosine")
    dense = milvus.with_mode("dense")
    assert Pipeline(dense, reader=reader, min_confidence=0.5,
                    min_confidence_kind="cosine").confidence_kind == "cosine"


@pytest.mark.needs_milvus
def test_hybrid_recall_matches_ours_within_noise(helpcentre_pair):
    ours, milvus = helpcentre_pair
    hc = load_helpcentre()
    qs = [(q.id, q.standalone) for q in hc.split("test") if q.gold]
    qrels = hc.qrels("test")
    a = per_query(qrels, retrieve_run(ours, qs, k=10), "recall@10")
    b = per_query(qrels, retrieve_run(milvus, qs, k=10), "recall@10")
    diff, lo, hi = paired_bootstrap(a, b)
    assert lo <= 0 <= hi or abs(diff) < 0.03, (diff, lo, hi)


@pytest.mark.slow
@pytest.mark.needs_milvus
def test_bm25_on_the_python_docs(encoder):
    """All 10,370 sections (no embedding needed: placeholder unit vectors), FAQ queries."""
    py = load_pydocs()
    ours = BM25Index().build(py.documents)
    vectors = unit_rows(len(py.documents), dim=encoder.dim)
    with MilvusRetriever(encoder, mode="bm25").build(py.documents, vectors=vectors) as milvus:
        queries = [q.text for q in py.split("test")]
        rho = [rank_correlation([h.id for h in ours.search(q, 50)],
                                [h.id for h in milvus.search(q, 50)], n=10) for q in queries]
    assert np.mean(rho) >= 0.6, np.mean(rho)      # measured 0.72 on all FAQ questions


@pytest.mark.slow
@pytest.mark.needs_milvus
def test_dense_on_a_python_docs_sample(encoder):
    """The FAQ answers plus 1,500 other sections (the sample tests/test_evaluate.py embeds)."""
    py = load_pydocs()
    faq = [d for d in py.documents if d.metadata["file"].startswith("faq/")]
    others = [d for d in py.documents if not d.metadata["file"].startswith("faq/")][::7][:1500]
    ours = DenseIndex(encoder).build(faq + others)
    with MilvusRetriever(encoder, mode="dense").build(faq + others) as milvus:
        overlaps = [overlap_at_k([h.id for h in ours.search(q.text, 10)],
                                 [h.id for h in milvus.search(q.text, 10)], 10)
                    for q in py.split("test")]
    assert np.mean(overlaps) >= 0.99
