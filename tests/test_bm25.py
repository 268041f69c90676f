import numpy as np
import pytest

from ragbook.bm25 import BM25Index, Tokenizer, idf_lucene
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.types import Document


def test_tokenizer_keeps_codes_and_settings_whole():
    tok = Tokenizer()
    assert tok("RATE_LIMIT_EXCEEDED after beta.smart_routing, a 14-day window.") == [
        "rate_limit_exceeded", "after", "beta.smart_routing", "14-day", "window"]
    assert Tokenizer(split_compounds=True)("ERR_CONN_4021") == [
        "err_conn_4021", "err", "conn", "4021"]
    assert Tokenizer(stopwords=False)("How do I") == ["how", "do", "i"]


@pytest.fixture(scope="module")
def pydocs_index():
    return BM25Index(k1=1.2, b=0.75).build(load_pydocs().documents)


def test_scores_equal_bm25s_lucene(pydocs_index):
    bm25s = pytest.importorskip("bm25s")
    py = load_pydocs()
    tok = pydocs_index.tokenizer
    ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene", dtype="float64")
    ref.index([tok(d.text) for d in py.documents], show_progress=False)
    for q in py.questions[::5]:
        ours = pydocs_index.scores(q.text)
        theirs = ref.get_scores(tok(q.text))
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)


def test_no_negative_idf_pathology():
    """rank_bm25's Okapi IDF is negative for a term in over half the documents (then
    patched with epsilon x average IDF); on this corpus it scores the matching documents 0,
    the same as a document without the term. Ours ranks the matches and nothing else."""
    docs = [Document("a", "refund"), Document("b", "refund"), Document("c", "hours")]
    rank_bm25 = pytest.importorskip("rank_bm25")
    theirs = rank_bm25.BM25Okapi([d.text.split() for d in docs]).get_scores(["refund"])
    assert list(theirs) == [0.0, 0.0, 0.0]
    hits = BM25Index().build(docs).search("refund", k=3)
    assert [h.id for h in hits] == ["a", "b"] and all(h.score > 0 for h in hits)
    assert idf_lucene(3, 3) > 0


@pytest.fixture(scope="module")
def hc_index():
    return BM25Index().build(load_helpcentre().documents)


@pytest.mark.parametrize("code,page", [("ERR_CONN_4021", "hardware-hub-err-conn-4021"),
                                       ("ERR_CONN_4022", "hardware-hub-err-conn-4022"),
                                       ("RATE_LIMIT_EXCEEDED", "api-rate-limits")])
def test_exact_codes_find_their_page_first(hc_index, code, page):
    assert hc_index.search(f"getting {code} what now", k=3)[0].doc_id in {page, page + "-2024"}


def test_split_compounds_matches_parts(hc_index):
    whole = hc_index.search("conn 4021", k=5)
    parts = BM25Index(tokenizer=Tokenizer(split_compounds=True)).build(load_helpcentre().documents)
    assert "hardware-hub-err-conn-4021" not in [h.id for h in whole]
    assert parts.search("conn 4021", k=1)[0].id == "hardware-hub-err-conn-4021"


def test_only_matching_documents_and_filters(hc_index):
    assert hc_index.search("zzzz qqqq", k=5) == []
    hits = hc_index.search("refund", k=50, where={"status": "superseded"})
    assert hits and all(h.metadata["status"] == "superseded" for h in hits)


def test_k1_zero_ignores_term_frequency():
    docs = [Document("once", "refund policy"), Document("thrice", "refund refund refund policy")]
    s = BM25Index(k1=0.0, b=0.0).build(docs).scores("refund")
    assert s[0] == pytest.approx(s[1])


def test_save_load_roundtrip(hc_index, tmp_path):
    hc_index.save(tmp_path / "bm25")
    again = BM25Index.load(tmp_path / "bm25")
    q = "csv export on the free plan"
    assert [(h.id, round(h.score, 9)) for h in again.search(q, 5)] == [
        (h.id, round(h.score, 9)) for h in hc_index.search(q, 5)]


def test_bad_settings():
    with pytest.raises(ValueError, match="b must be a number in"):
        BM25Index(b=1.5)
    with pytest.raises(ValueError, match="k1 must be"):
        BM25Index(k1=-1)
