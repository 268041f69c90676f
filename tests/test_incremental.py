"""Incremental updates equal a rebuild: BM25 (property test over random upserts and deletes),
dense, the hybrid's one-operation update with its checks, a saved index and the CLI."""
import dataclasses
import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragbook.bm25 import BM25Index, Tokenizer
from ragbook.chunking import chunk_documents
from ragbook.cli import main
from ragbook.datasets import data_dir, load_helpcentre
from ragbook.dense import DenseIndex
from ragbook.embeddings import Encoder
from ragbook.fusion import HybridRetriever, IndexDriftError
from ragbook.ingest import sync_index
from ragbook.types import Chunk, Document

# -- BM25: any sequence of upserts and deletes scores as a rebuild does -----------------------
WORDS = ["refund", "window", "invoice", "err_conn_4021", "export", "csv", "plan", "annual",
         "hub", "port", "8883", "sso", "the", "not"]
QUERIES = [*WORDS, "refund window annual", "export csv csv", "err conn 4021", "sso hub port"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
ids = st.integers(0, 11).map(lambda n: f"d{n}")
steps = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.dictionaries(ids, texts, min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.lists(ids, min_size=1, max_size=3))), max_size=8)


def rebuilt(index: BM25Index, corpus: dict[str, str]) -> BM25Index:
    """A fresh index with ``index``'s settings over ``corpus`` in its order."""
    return BM25Index(index.k1, index.b, index.tokenizer).build(
        [Document(i, t) for i, t in corpus.items()])


def assert_same_scores(a: BM25Index, b: BM25Index) -> None:
    assert [r["id"] for r in a.items_] == [r["id"] for r in b.items_]
    assert a.corpus_fingerprint == b.corpus_fingerprint
    assert set(a.vocab_) == set(b.vocab_)  # terms no document holds any more are gone
    np.testing.assert_array_equal(a.doc_len_, b.doc_len_)
    for term in b.vocab_:
        assert a.idf_[a.vocab_[term]] == pytest.approx(b.idf_[b.vocab_[term]], abs=1e-12)
    for q in QUERIES:
        np.testing.assert_allclose(a.scores(q), b.scores(q), rtol=0, atol=1e-9)
        if a.items_:
            assert [(h.id, h.rank) for h in a.search(q, k=5)] == \
                [(h.id, h.rank) for h in b.search(q, k=5)]


@settings(max_examples=150, deadline=None)
@given(start=st.dictionaries(ids, texts, min_size=1, max_size=8), steps=steps,
       k1=st.sampled_from([0.0, 0.9, 1.2, 2.0]), b=st.sampled_from([0.0, 0.75, 1.0]),
       split=st.booleans())
def test_bm25_upserts_and_deletes_score_as_a_rebuild(start, steps, k1, b, split):
    index = BM25Index(k1, b, Tokenizer(split_compounds=split)).build(
        [Document(i, t) for i, t in start.items()])
    corpus = dict(start)  # the model: kept items in order, then each upsert's, appended
    for op, arg in steps:
        if op == "upsert":
            replaced = len(set(arg) & set(corpus))
            assert index.upsert([Document(i, t) for i, t in arg.items()]) == \
                (len(arg) - replaced, replaced)
            for i, t in arg.items():
                corpus.pop(i, None)
                corpus[i] = t
        else:
            assert index.delete(arg) == len(set(arg) & set(corpus))  # unknown ids skipped
            for i in arg:
                corpus.pop(i, None)
        assert_same_scores(index, rebuilt(index, corpus))


def test_bm25_update_replaces_adds_and_deletes_in_one_step():
    docs = [Document(f"d{n}", " ".join(WORDS[n:n + 4])) for n in range(8)]
    index = BM25Index().build(docs)
    index.update(upsert=[Document("d1", "refund refund plan"), Document("new", "sso port")],
                 delete=["d2", "d3"])
    assert [r["id"] for r in index.items_] == ["d0", "d4", "d5", "d6", "d7", "d1", "new"]
    assert_same_scores(index, rebuilt(index, {r["id"]: r["text"] for r in index.items_}))


def test_bm25_update_refuses_bad_changes_and_changes_nothing():
    index = BM25Index().build([Document("a", "refund window"), Document("b", "export csv")])
    before = index.corpus_fingerprint
    with pytest.raises(KeyError, match="cannot delete 'zz'"):
        index.update(upsert=[Document("c", "sso")], delete=["zz"])
    with pytest.raises(ValueError, match="'a' is both upserted and deleted"):
        index.update(upsert=[Document("a", "sso")], delete=["a"])
    with pytest.raises(ValueError, match="occurs twice"):
        index.upsert([Document("c", "sso"), Document("c", "hub")])
    with pytest.raises(TypeError, match="wrap a single id in a list"):
        index.update(delete="a")
    assert index.corpus_fingerprint == before and len(index) == 2


def test_bm25_updates_after_a_load_and_after_loading_an_older_save(tmp_path):
    docs = [Document(f"d{n}", " ".join(WORDS[n:n + 5])) for n in range(9)]
    BM25Index().build(docs).save(tmp_path / "idx")
    # an index saved before updates existed has no tf.npz: the counts come from its records
    older = tmp_path / "older"
    shutil.copytree(tmp_path / "idx", older)
    (older / "tf.npz").unlink()
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["files"]["tf.npz"]
    (older / "manifest.json").write_text(json.dumps(manifest))
    change = dict(upsert=[Document("d0", "annual plan invoice"), Document("x", "hub 8883")],
                  delete=["d4"])
    for path in (tmp_path / "idx", older):
        index = BM25Index.load(path).update(**change)
        assert_same_scores(index, rebuilt(index, {r["id"]: r["text"] for r in index.items_}))


# -- dense and hybrid, on help-centre chunks (embeddings from the warm cache) -----------------
HC_QUERIES = ["how long is the refund window for annual plans?", "export tickets to CSV",
              "ERR_CONN_4021", "single sign-on setup", "cancel my subscription"]
NOTE = " Update: annual plans now have a 30-day refund window."


def edited(c: Chunk) -> Chunk:
    return dataclasses.replace(c, text=c.text + NOTE, end=c.end + len(NOTE))


@pytest.fixture(scope="module")
def corpus():
    """Chunks of 14 help-centre articles: the index's starting items and the change."""
    docs = list(load_helpcentre().documents)[:14]
    chunks = chunk_documents(docs, size=128, overlap=16)
    start, new = chunks[:-2], chunks[-2:]
    changed = [edited(c) for c in (start[0], start[7], start[20])]
    deleted = [start[3].id, start[11].id]
    gone = {c.id for c in changed} | set(deleted)
    final = [c for c in start if c.id not in gone] + changed + new
    return start, changed + new, deleted, final


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


def hybrid(encoder) -> HybridRetriever:
    return HybridRetriever(DenseIndex(encoder), BM25Index(), depth=30)


def test_dense_update_equals_a_rebuild(corpus, encoder):
    start, upsert, deleted, final = corpus
    index = DenseIndex(encoder).build(start).update(upsert=upsert, delete=deleted)
    fresh = DenseIndex(encoder).build(final)
    assert index.corpus_fingerprint == fresh.corpus_fingerprint
    for q in HC_QUERIES:
        a, b = index.search(q, k=10), fresh.search(q, k=10)
        assert [h.id for h in a] == [h.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-6)


def test_hybrid_update_equals_a_rebuild(corpus, encoder):
    start, upsert, deleted, final = corpus
    updated = hybrid(encoder).build(start)
    updated.update(upsert=upsert, delete=deleted)
    fresh = hybrid(encoder).build(final)
    assert len(updated) == len(fresh) == len(start) + 2 - 2
    assert updated.corpus_fingerprint == fresh.corpus_fingerprint
    for q in HC_QUERIES:
        (d1, k1), (d2, k2) = updated.channels(q), fresh.channels(q)
        assert [h.id for h in k1] == [h.id for h in k2]
        np.testing.assert_allclose([h.score for h in k1], [h.score for h in k2], atol=1e-9)
        assert [h.id for h in d1] == [h.id for h in d2]
        np.testing.assert_allclose([h.score for h in d1], [h.score for h in d2], atol=1e-6)
        assert [(h.id, h.rank) for h in updated.search(q, k=10)] == \
            [(h.id, h.rank) for h in fresh.search(q, k=10)]
    # the edited chunk is found by its new text in both channels
    assert edited(start[0]).id in [h.id for h in updated.search("30-day refund window", k=10)]


@pytest.mark.parametrize("change, error", [
    (dict(upsert=["not a chunk"]), TypeError),
    (dict(delete=["no-such-chunk"]), KeyError),
    (dict(upsert=[Document("x", "   ")]), ValueError),
    (dict(upsert=[Document("x", "text", metadata={"tags": {"a": 1}})]), TypeError),
    (dict(upsert=[Document("x", "text")], vectors=np.ones((2, 384), np.float32)), ValueError),
])
def test_a_bad_update_changes_neither_channel(corpus, encoder, change, error):
    start = corpus[0]
    retriever = hybrid(encoder).build(start)
    before = retriever.corpus_fingerprint
    with pytest.raises(error):
        retriever.update(**change)
    assert retriever.corpus_fingerprint == before and len(retriever.bm25) == len(start)
    assert len(retriever.dense) == len(start)


def test_drift_is_reported_with_the_ids_that_differ(corpus, encoder):
    start = corpus[0]
    retriever = hybrid(encoder).build(start)
    retriever.bm25.delete([start[4].id])  # a write to one channel only
    with pytest.raises(IndexDriftError, match=rf"only in dense: '{start[4].id}'"):
        retriever.update(upsert=[Document("x", "a new page")])
    retriever.bm25.upsert([edited(start[4])])
    with pytest.raises(IndexDriftError, match="different text or metadata"):
        retriever.search("refund")


def test_a_crash_while_saving_an_update_leaves_the_previous_index(corpus, encoder, tmp_path,
                                                                 monkeypatch):
    start, upsert, deleted, final = corpus
    hybrid(encoder).build(start).save(tmp_path / "idx")
    before = HybridRetriever.load(tmp_path / "idx").corpus_fingerprint
    retriever = HybridRetriever.load(tmp_path / "idx").update(upsert=upsert, delete=deleted)

    def crash(self, path):
        raise KeyboardInterrupt("killed mid-save")

    with monkeypatch.context() as m:  # the dense channel is written, then the process dies
        m.setattr(BM25Index, "save", crash)
        with pytest.raises(KeyboardInterrupt):
            retriever.save(tmp_path / "idx")
    assert HybridRetriever.load(tmp_path / "idx").corpus_fingerprint == before
    retriever.save(tmp_path / "idx")
    assert HybridRetriever.load(tmp_path / "idx").corpus_fingerprint == \
        hybrid(encoder).build(final).corpus_fingerprint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no leftovers


def test_sync_index_updates_only_what_changed(encoder, tmp_path):
    docs = list(load_helpcentre().documents)[:5]
    out, extra = tmp_path / "index", list(load_helpcentre().documents)[5]
    first = sync_index(docs, out, encoder, size=128, overlap=16)
    assert first.rebuilt and first.reason is None and first.saved
    assert first.added == tuple(d.id for d in docs)
    same = sync_index(docs, out, encoder, size=128, overlap=16)
    assert not same.rebuilt and not same.saved and same.unchanged == 5

    now = [dataclasses.replace(docs[0], text=docs[0].text + NOTE), *docs[2:], extra]
    done = sync_index(now, out, encoder, size=128, overlap=16)
    assert (done.added, done.changed, done.deleted) == ((extra.id,), (docs[0].id,),
                                                          (docs[1].id,))
    assert done.saved and not done.rebuilt and done.unchanged == 3
    fresh = hybrid(encoder).build(chunk_documents(now, size=128, overlap=16))
    assert {r["id"]: r["text"] for r in HybridRetriever.load(out).items_} == \
        {r["id"]: r["text"] for r in fresh.items_}

    said = []
    again = sync_index(now, out, encoder, size=256, overlap=32, on_full_build=said.append)
    assert again.rebuilt and said == [again.reason]
    assert again.reason.startswith("it was chunked with --size 128 --overlap 16")


# -- the command line ----------------------------------------------------------------------
ARTICLES = ["billing-refund-policy", "billing-cancel-subscription", "billing-invoices",
            "account-enterprise-plan", "account-export-csv", "account-free-plan-overview"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_cli_updates_only_what_changed(tmp_path, capsys):
    src = tmp_path / "docs"
    src.mkdir()
    for name in ARTICLES[:5]:
        shutil.copy(data_dir() / "helpcentre" / "articles" / f"{name}.md", src / f"{name}.md")
    out = tmp_path / "index"
    assert run(capsys, "index", src, "--out", out).startswith("indexed 5 documents as ")
    assert "0 added, 0 changed, 0 deleted, 5 unchanged documents" in \
        run(capsys, "index", src, "--out", out)

    refund = src / "billing-refund-policy.md"
    refund.write_text(refund.read_text() + "\nAnnual plans now have a 30-day refund window.\n")
    (src / "billing-invoices.md").unlink()
    shutil.copy(data_dir() / "helpcentre" / "articles" / f"{ARTICLES[5]}.md", src)
    said = run(capsys, "index", src, "--out", out)
    assert said.startswith("1 added, 1 changed, 1 deleted, 3 unchanged documents (")
    assert f"saved to {out}" in said

    run(capsys, "index", src, "--out", tmp_path / "fresh")
    updated, fresh = HybridRetriever.load(out), HybridRetriever.load(tmp_path / "fresh")
    assert {r["id"]: r["text"] for r in updated.items_} == \
        {r["id"]: r["text"] for r in fresh.items_}
    assert not any(r["doc_id"] == "billing-invoices" for r in updated.items_)
    for q in HC_QUERIES:
        a, b = updated.search(q, k=8), fresh.search(q, k=8)
        assert [h.id for h in a] == [h.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-9)

    # --rebuild, other chunk settings, or an index without hashes: a full build, said so
    assert run(capsys, "index", src, "--out", out, "--rebuild").startswith("indexed 5 documents")
    said = run(capsys, "index", src, "--out", out, "--size", 128, "--overlap", 16)
    assert said.startswith(f"building {out} again in full: it was chunked with --size 256")
    HybridRetriever.load(out).save(out)  # saved from Python: no hashes kept
    said = run(capsys, "index", src, "--out", out)
    assert said.startswith(f"building {out} again in full: it keeps no hash per document")
    (out / "hybrid.json").write_text("{}")  # a damaged index: --rebuild is the way out
    assert main(["index", str(src), "--out", str(out)]) == 1
    assert "run the same command with --rebuild" in capsys.readouterr().err
    assert run(capsys, "index", src, "--out", out, "--rebuild").startswith("indexed 5 documents")
