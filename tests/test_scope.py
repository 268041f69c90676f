"""Who may see what: an access scope given by the application (``scope=``), AND-ed inside the
search of every retriever and store, part of every cache key and trace. A caller's ``where``
can only narrow it: every hostile filter below, on every retriever and store, returns nothing
outside the scope — checked against the documents' own metadata, not the hits' copies."""
import json
import logging
import shutil

import numpy as np
import pytest

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, load_helpcentre
from ragbook.cache import CachedPipeline, CachedRetriever
from ragbook.chunking import chunk_documents
from ragbook.cli import main
from ragbook.datasets import data_dir
from ragbook.expansion import (
    ParentDocumentRetriever,
    SentenceWindowRetriever,
    parent_child_chunks,
    sentence_chunks,
)
from ragbook.filters import filter_keys, matches, scoped, translate_where, validate_where
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.pipeline import Pipeline
from ragbook.rerank import CrossEncoderReranker, RerankedRetriever
from ragbook.result import read_traces
from ragbook.retrieval import records_from
from ragbook.stores import FaissStore, MilvusStore, milvus_filter
from ragbook.types import Chunk, Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)

HC = load_helpcentre()
# Two notes that answer the runbook questions but carry no access level: outside every scope.
UNMARKED = [Document("note-no-access", "Grace period extension for an overdue invoice: a billing "
                     "agent may extend the grace period by up to 7 days.",
                     metadata={"status": "current", "department": "billing"}),
            Document("note-null-access", "Workspace ownership recovery when no owner is "
                     "reachable needs a signed letter on company letterhead.",
                     metadata={"status": "current", "access": None})]
DOCS = [*HC.documents, *UNMARKED]
META = {d.id: dict(d.metadata) for d in DOCS}          # the truth, by document id
INTERNAL = {d.id for d in HC.documents if d.metadata.get("access") == "internal"}

QUERIES = ["how many days can a billing agent extend the grace period of an overdue invoice?",
           "recover workspace ownership when no owner is reachable signed letter letterhead",
           "verify identity before resetting two-factor authentication of the only owner",
           "suspected account takeover revoke sessions protective hold"]
SCOPES = [{"access": "public"}, {"access": ["public", "customer"]},
          {"access": {"$nin": ["internal"]}}]          # $nin alone would let a missing key in
HOSTILE = [None, {"access": "internal"}, {"access": {"$ne": "public"}},
           {"access": {"$nin": ["public"]}}, {"access": {"$in": ["internal", "public"]}},
           {"access": ["internal", "customer", "public"]}, {"access": {"$ne": None}},
           {"access": {"$eq": None}}, {"unknown_key": {"$ne": "x"}},
           {"unknown_key": {"$nin": ["x"]}}, {"status": {"$ne": "superseded"}},
           {"status": ["current", "superseded"]},
           {"$and": [{"access": {"$ne": "public"}}, {"$and": [{"status": "current"}]}]},
           {"$and": []}, {"department": "billing", "$and": [{"access": "internal"}]}]


def in_scope(hit, scope, where):
    """The returned item is inside the scope (every scope key present, not null, and passing)
    and passes the caller's filter, judged by its document's own metadata and by what the hit
    carries."""
    truth = META[hit.doc_id]
    return all(matches(m, scope) and all(m.get(key) is not None for key in filter_keys(scope))
               and matches(m, validate_where(where)) for m in (truth, hit.metadata))


def check_never_outside(retriever, queries=QUERIES, scopes=SCOPES, wheres=HOSTILE, k=8):
    """Every (query, scope, hostile where) on ``retriever``: nothing outside the scope, by
    ``search`` and by ``retrieve``; and the scope alone still finds something."""
    for scope in scopes:
        for query in queries:
            for where in wheres:
                hits = retriever.search(query, k=k, where=where, scope=scope)
                bad = [h.doc_id for h in hits if not in_scope(h, scope, where)]
                assert not bad, (query, scope, where, bad)
            got = retriever.retrieve(query, k=k, scope=scope)
            assert got.hits and all(in_scope(h, scope, None) for h in got.hits), (query, scope)
            assert scope in [s.detail.get("scope") for s in got.stages], got.stages


# -- the filter language -------------------------------------------------------------------------
def test_and_combines_filters_and_nothing_widens_them():
    both = {"status": "current", "$and": [{"access": ["public", "customer"]},
                                          {"$and": [{"access": {"$ne": "customer"}}]}]}
    assert validate_where(both) == both
    assert matches({"status": "current", "access": "public"}, both)
    assert not matches({"status": "current", "access": "customer"}, both)
    assert filter_keys(both) == {"status", "access"}
    for bad, message in (({"$or": [{"access": "internal"}]}, "'\\$or' is not part"),
                         ({"$not": {"access": "public"}}, "'\\$not' is not part"),
                         ({"$and": {"access": "x"}}, "must be a list of filters"),
                         ({"$and": ["access"]}, "must be a list of filters"),
                         ({"$and": [{"access": {"$regex": "x"}}]}, "unknown filter operator")):
        with pytest.raises((TypeError, ValueError), match=message):
            validate_where(bad)
    with pytest.raises(ValueError, match="'\\$or' is not part"):
        scoped({"$or": [{"access": "internal"}]}, {"access": "public"})
    with pytest.raises(ValueError, match="'\\$or' is not part"):
        matches({"access": "public"}, {"$or": [{"access": "internal"}]})


def test_scoped_ands_the_scope_and_requires_its_keys():
    assert scoped(None, None) is None and scoped({}, None) is None
    assert scoped({"plan": "pro"}, None) == {"plan": "pro"}
    assert scoped(None, {"access": "public"}) == {"access": "public"}
    assert scoped({"access": "internal"}, {"access": ["public"]}) == \
        {"$and": [{"access": ["public"]}, {"access": "internal"}]}
    assert scoped(None, {"access": {"$ne": "internal"}}) == \
        {"$and": [{"access": {"$ne": "internal"}}, {"access": {"$ne": None}}]}
    for empty in ({}, [], "access=public"):
        with pytest.raises(ValueError, match="scope must be a non-empty filter"):
            scoped(None, empty)
    # a document without the scope key, or with null, is outside every scope on that key
    for scope in SCOPES + [{"access": {"$ne": "internal"}}]:
        for where in HOSTILE:
            w = scoped(where, scope)
            assert not matches({"status": "current"}, w) and not matches({"access": None}, w)
            assert not matches({"access": "internal"}, w), (scope, where)


def test_and_translates_for_milvus_as_more_and_terms():
    terms = translate_where({"a": 1, "$and": [{"b": 2}, {"$and": [{"a": {"$ne": 3}}]}]},
                            lambda key, op, v: (key, op, v))
    assert terms == [("a", "$eq", 1), ("b", "$eq", 2), ("a", "$ne", 3)]
    public = ('(m == "public" or json_contains_any(m, ["public"]))'
              .replace("m", 'metadata["access"]'))
    internal = public.replace("public", "internal")
    assert milvus_filter(scoped({"access": "internal"}, {"access": ["public"]})) == \
        f'{public} and {internal}'
    assert milvus_filter(scoped({"access": {"$nin": ["public"]}},
                                {"access": {"$ne": "internal"}})) == (
        f'(metadata["access"] is null or not {internal}) and '
        'metadata["access"] is not null and '
        f'(metadata["access"] is null or not {public})')


@pytest.mark.needs_milvus
def test_milvus_and_matches_agree_on_scoped_filters():
    """Missing keys, nulls, lists and numbers under every scope and hostile filter: Milvus's
    filtered search returns exactly the items ``matches`` lets through."""
    values = ["public", "customer", "internal", None, 3, ["public"], "Public"]
    docs = [Document(f"d{i}", f"text {i}", metadata={"access": v, "status": "current"})
            for i, v in enumerate(values)]
    docs += [Document("missing", "no access key", metadata={"status": "current"}),
             Document("old", "superseded", metadata={"access": "public", "status": "superseded"})]
    records, one = records_from(docs), np.eye(1, 4, dtype=np.float32)
    with MilvusStore() as store:
        store.create(4)
        store.add(records, np.repeat(one, len(records), axis=0))
        for scope in SCOPES + [{"access": {"$ne": "internal"}}, {"status": "current"}]:
            for where in HOSTILE:
                w = scoped(where, scope)
                ids, _ = store.search(one, k=len(records), where=w)
                expected = {r["id"] for r in records if matches(r["metadata"], w)}
                assert set(ids[0]) == expected, (scope, where, milvus_filter(w))
                if "access" in scope:   # never internal, null or missing
                    assert not expected & {"d2", "d3", "missing"}, (scope, where)


# -- every retriever and store -----------------------------------------------------------------
@pytest.fixture(scope="module")
def chunks():
    return chunk_documents(DOCS, size=256, overlap=32)


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


@pytest.fixture(scope="module")
def hybrid(chunks, encoder):
    return HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)


def test_without_a_scope_the_hostile_filters_do_reach_internal_pages(hybrid):
    """The tests below can fail: unscoped, these queries and filters find the runbooks."""
    for query in QUERIES:
        assert {h.doc_id for h in hybrid.search(query, k=5)} & (INTERNAL | {"note-no-access",
                                                                            "note-null-access"})
    assert {h.doc_id for h in hybrid.search(QUERIES[0], k=5, where={"access": "internal"})} \
        <= INTERNAL


@pytest.mark.parametrize("name", ["faiss-flat", "faiss-hnsw", "bm25", "hybrid"])
def test_in_process_retrievers_never_return_outside_the_scope(name, chunks, encoder, hybrid):
    retriever = {"faiss-flat": lambda: hybrid.dense, "bm25": lambda: hybrid.bm25,
                 "hybrid": lambda: hybrid,
                 "faiss-hnsw": lambda: DenseIndex(encoder, FaissStore(kind="hnsw")).build(
                     chunks)}[name]()
    check_never_outside(retriever)


def test_reranked_retriever_never_returns_outside_the_scope(hybrid):
    reranked = RerankedRetriever(hybrid, CrossEncoderReranker(), candidates=10)
    check_never_outside(reranked, queries=QUERIES[:2], scopes=SCOPES[:1], k=3)


def test_cached_retriever_keys_on_the_scope(hybrid, tmp_path):
    cached = CachedRetriever(hybrid, path=tmp_path / "retrieval.sqlite")
    query, staff = QUERIES[0], {"access": ["internal", "public", "customer"]}
    for where in HOSTILE:              # warm with a staff member's results for every filter
        cached.search(query, k=8, where=where, scope=staff)
    assert {h.doc_id for h in cached.search(query, k=8, scope=staff)} & INTERNAL
    check_never_outside(cached, queries=[query])                    # cold per scope
    misses = cached.cache.misses
    check_never_outside(cached, queries=[query])                    # now every one is a hit
    assert cached.cache.misses == misses and cached.cache.hits > 0
    got = cached.retrieve(query, k=8, where={"access": "internal"}, scope={"access": "public"})
    assert got.stages[0].name == "cache" and got.stages[0].detail["scope"] == {"access":
                                                                              "public"}


def test_parent_and_window_retrievers_check_what_they_return(encoder):
    parents, children = parent_child_chunks(DOCS, parent_size=512, child_size=128)
    parent = ParentDocumentRetriever(BM25Index().build(children), parents)
    check_never_outside(parent, k=4)
    window = SentenceWindowRetriever(BM25Index().build(sentence_chunks(DOCS)), DOCS, window=2)
    check_never_outside(window, k=4)
    # the matched piece is in scope but what would be returned is not: nothing comes back
    doc = Document("mixed", "Refunds take 14 days. Internal: approve refunds up to 500 EUR.",
                   metadata={"access": "internal"})
    child = Chunk("mixed:0-21", "mixed", doc.text[:21], 0, 21, {"access": "public"})
    whole = Chunk("mixed:0-62", "mixed", doc.text, 0, len(doc.text), {"access": "internal"})
    inner = BM25Index().build([child])
    assert inner.search("refunds", scope={"access": "public"})
    assert ParentDocumentRetriever(inner, [whole]).search("refunds",
                                                          scope={"access": "public"}) == []
    assert SentenceWindowRetriever(inner, [doc]).search("refunds",
                                                        scope={"access": "public"}) == []
    assert SentenceWindowRetriever(inner, [doc]).search("refunds")   # unscoped: returned


@pytest.mark.needs_milvus
def test_milvus_store_and_retriever_never_return_outside_the_scope(chunks, encoder, hybrid,
                                                                   tmp_path):
    """``MilvusRetriever`` in each mode; its dense mode is a ``DenseIndex`` over a
    ``MilvusStore``, which finds exactly what FAISS finds under every scope and filter."""
    with MilvusRetriever(encoder, MilvusStore(tmp_path / "lite.db")).build(chunks) as milvus:
        dense = milvus.with_mode("dense")
        for scope in SCOPES:
            for where in HOSTILE:
                ours = [h.id for h in hybrid.dense.search(QUERIES[0], k=5, where=where,
                                                          scope=scope)]
                theirs = [h.id for h in dense.search(QUERIES[0], k=5, where=where,
                                                     scope=scope)]
                assert theirs == ours, (scope, where)
        check_never_outside(dense, queries=QUERIES[:2])
        for mode in ("bm25", "hybrid"):
            check_never_outside(milvus.with_mode(mode), queries=QUERIES[:2])


# -- the pipeline, cached or not, and the command line -------------------------------------------
GRACE = "how many days of grace extension can a billing agent give for an overdue invoice?"
PUBLIC = {"access": "public"}


def quoted_from(result):
    """Document ids whose text holds the answer (an answer quoted from an internal page)."""
    return {d.id for d in DOCS if result.answer.text and result.answer.text in d.text}


def test_a_public_user_never_gets_an_internal_page_or_answer(hybrid, tmp_path):
    pipeline = Pipeline(hybrid, trace_path=tmp_path / "trace.jsonl")
    staff = pipeline.ask(GRACE, scope={"access": ["public", "customer", "internal"]})
    assert not staff.escalated and staff.sources[0].doc_id == "billing-internal-grace-extension"
    for question in [GRACE, *QUERIES]:
        for where in HOSTILE:
            r = pipeline.ask(question, where=where, scope=PUBLIC)
            seen = [h.doc_id for h in r.sources + r.candidates]
            assert all(META[d].get("access") == "public" for d in seen), (question, where, seen)
            assert not quoted_from(r) - {d for d in META if META[d].get("access") == "public"}
    traces = read_traces(tmp_path / "trace.jsonl")
    assert all(any(s.detail.get("scope") == PUBLIC for s in t.trace) for t in traces[1:])


def test_the_pipeline_reads_status_inside_and_and_keeps_the_scope_apart(hybrid):
    pipeline = Pipeline(hybrid)
    assert pipeline._where(None) == {"status": {"$ne": "superseded"}}
    asked = {"$and": [{"status": "superseded"}]}           # the caller asked for old pages
    assert pipeline._where(asked) == asked
    prep = pipeline.prepare(GRACE, where=asked, scope=PUBLIC)
    old_public = {"access": "public", "status": "superseded"}
    assert prep.candidates and all(META[h.doc_id] == {**META[h.doc_id], **old_public}
                                   for h in prep.candidates)


def test_a_warm_answer_cache_never_serves_another_scopes_answer(hybrid, tmp_path):
    cached = CachedPipeline(Pipeline(hybrid), path=tmp_path / "answers.sqlite")
    staff = cached.ask(GRACE, scope={"access": "internal"})
    assert staff.sources[0].doc_id in INTERNAL                     # the cache now holds it
    public = cached.ask(GRACE, scope=PUBLIC)
    assert cached.cache.hits == 0
    assert all(META[h.doc_id]["access"] == "public" for h in public.sources + public.candidates)
    assert not quoted_from(public) & INTERNAL
    again = cached.ask(GRACE, scope=PUBLIC)                        # its own entry, from cache
    assert cached.cache.hits == 1 and again.to_dict() == public.to_dict()
    # a caller's where naming the scope's value is not the scope: another key, another entry
    assert cached.ask(GRACE, where={"access": "internal"}).sources[0].doc_id in INTERNAL
    assert cached.cache.hits == 1


def test_cli_ask_takes_a_scope(tmp_path, capsys):
    src = tmp_path / "docs"
    src.mkdir()
    for name in ("billing-internal-grace-extension", "billing-failed-payments",
                 "billing-reactivate-suspended-workspace"):
        shutil.copy(data_dir() / "helpcentre" / "articles" / f"{name}.md", src / f"{name}.md")
    assert main(["index", str(src), "--out", str(tmp_path / "idx")]) == 0
    capsys.readouterr()

    def ask(*extra):
        assert main(["ask", str(tmp_path / "idx"), GRACE, "--json", *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        return {p["doc_id"] for p in out["sources"] + out["candidates"]}

    assert "billing-internal-grace-extension" in ask()
    assert "billing-internal-grace-extension" in ask("--scope", "access=public,internal")
    seen = ask("--scope", "access=public")
    assert seen and "billing-internal-grace-extension" not in seen
    assert ask("--scope", "access=public", "--scope", "department=security") == set()
    for bad in (["--scope", "access"], ["--scope", "=public"], ["--scope", "access=a,"],
                ["--scope", "access=public", "--scope", "access=internal"]):
        assert main(["ask", str(tmp_path / "idx"), GRACE, *bad]) == 2
        assert "--scope" in capsys.readouterr().err
