# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 11 · Beyond one machine
#
# Everything so far lives inside one Python process: `DenseIndex` keeps every vector in the
# notebook's memory, `BM25Index` its sparse matrix, and a restart reads both back from a
# folder. That design stops working for three reasons, none of them about retrieval quality:
# the index outgrows one machine's memory; more than one process must write (ingestion
# workers) while others read; and the service must keep answering when a machine dies.
#
# Those are a distributed database's problems, and this chapter hands them to one rather than
# growing a home-made one: **Milvus**, through `pymilvus.MilvusClient`. Here it runs as
# **Milvus Lite**, embedded in this process and storing a local folder; in production the
# same code talks to a Milvus cluster when given `http://host:19530` instead of a path.
# Two pieces put the retriever contract of the earlier chapters on it. `MilvusStore`
# (`ragbook.stores`) is a vector store like the `FaissStore` inside chapter 3's `DenseIndex`,
# so `DenseIndex(encoder, MilvusStore(uri))` is dense retrieval on Milvus with nothing else
# changed. `MilvusRetriever` (`ragbook.milvus_retriever`) adds what only Milvus does — BM25 and hybrid
# search inside the database: `MilvusRetriever.search(query, k, where) -> list[Hit]`, dense,
# BM25 or hybrid.
#
# The plan: check that nothing about the *answers* changes (dense, BM25, hybrid, the whole
# chapter 9 pipeline), then look at what does change — filters become expressions, writes
# become upserts, an index becomes a collection that outlives the process — and finally size
# the thing on paper for tens and hundreds of millions of chunks.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=11)

# %%
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import matplotlib.pyplot as plt
import numpy as np
from milvus_lite.analyzer import create_analyzer  # Milvus Lite's own tokenizers

from ragbook import Encoder, models
from ragbook.bm25 import BM25Index, Tokenizer
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex, EncoderMismatchError
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, retrieve_run
from ragbook.filters import date_key
from ragbook.fusion import HybridRetriever
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.pipeline import Pipeline
from ragbook.result import with_history
from ragbook.retrieval import index_text
from ragbook.scaling.compare import overlap_at_k, rank_correlation
from ragbook.scaling.sizing import bytes_per_vector, hnsw_graph_bytes, shards_needed
from ragbook.stores import DEFAULT_ANALYZER, MILVUS_STANDARD, MilvusStore, milvus_filter

hc = load_helpcentre()
encoder = Encoder()
print(f"profile: {models.active_profile()}; dense: {encoder.fingerprint}")
chunks = chunk_documents(hc.documents, size=256, overlap=32)
ours = HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)

workdir = tempfile.mkdtemp(prefix="ragbook-ch11-")
uri = os.path.join(workdir, "helpcentre.db")          # a Milvus Lite database is a folder
milvus = MilvusRetriever(encoder, MilvusStore(uri)).build(chunks)
logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # the errors we provoke below
print(f"ours: {len(ours)} chunks; Milvus Lite: {len(milvus)} rows, built in "
      f"{milvus.build_seconds_:.1f} s")
print(f"same corpus (ids and texts, in order): "
      f"{milvus.corpus_fingerprint == ours.corpus_fingerprint} ({milvus.corpus_fingerprint})")

# %% [markdown]
# ## 1. One collection, both indexes, one write
#
# `HybridRetriever` keeps two indexes and checks on every search that they still hold the
# same items. Milvus keeps one **collection** with one row per chunk, and both indexes are
# *fields of that row*: the dense vector, and a sparse vector that Milvus's built-in BM25
# function computes from the `text` field as the row is inserted. One insert writes both, so
# they cannot drift apart. The `where` metadata is a JSON field.

# %%
schema = milvus.store_.client.describe_collection("ragbook")
for field in schema["fields"]:
    extra = {k: v for k, v in field["params"].items() if k in ("dim", "max_length")}
    made_by = " (written by the BM25 function)" if field.get("is_function_output") else ""
    print(f"{field['name']:14s} {field['type'].name:20s} {extra or ''}{made_by}")
print("consistency:", schema["consistency_level_name"], "| properties:",
      {k: v[:40] for k, v in schema["properties"].items()})

# %% [markdown]
# ## 2. Filters run inside the search, as expressions
#
# Chapter 3 showed why a filter must be applied *during* the search, not after it. Milvus
# does that natively, but it takes a boolean *expression* over the fields, not a dict. From
# scratch, a translator for the common cases is a few lines. Three details decide whether it
# is correct: values must be quoted and escaped (a `"` inside a value would end the string);
# a missing key must pass `$ne` as it does in `ragbook.filters.matches` — in Milvus a
# comparison with a missing JSON key is false, so `!=` alone would drop every item without
# the key; and a list in the metadata (`access: ["public", "internal"]`) is a set of values
# that equals no single value, so each `==` also asks `json_contains_any`, and `$ne` negates the
# whole test — an access filter `access != internal` that forgot lists would show that page.
# Orderings take numbers or ISO dates, never text. Milvus compares strings as text, and dates
# as people write them do not sort as times: `"2025-06-01 12:00" < "2025-06-01T09:30"` as text
# (a space sorts before `T`). So each row keeps its dates a second time, in a `dates` JSON
# field, as fixed-width text whose order is time order (`filters.date_key`), and a date
# ordering compares that field with the bound written the same way.

# %%
def quote(text):
    for raw, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        text = text.replace(raw, escaped)
    return f'"{text}"'


def literal(v):
    return quote(v) if isinstance(v, str) else ("true" if v else "false") if isinstance(v, bool) else repr(v)


def any_of(path, values):
    """path equals one of values, or is a JSON array holding one of them."""
    lits = [literal(v) for v in values]
    contains = f"json_contains_any({path}, [{', '.join(lits)}])"
    return "(" + " or ".join([f"{path} == {lit}" for lit in lits] + [contains]) + ")"


def to_expression(where):
    """The where language (bare value, list, or {"$op": value}) as a Milvus expression."""
    ops = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
    terms = []
    for key, cond in where.items():
        path = f"metadata[{quote(key)}]"
        conds = cond.items() if isinstance(cond, dict) else [("$in" if isinstance(cond, list) else "$eq", cond)]
        for op, value in conds:
            if op in ("$eq", "$in"):
                terms.append(any_of(path, value if op == "$in" else [value]))
            elif op == "$ne":
                terms.append(f"({path} is null or not {any_of(path, [value])})")
            elif isinstance(value, str):   # an ISO date: compare the fixed-width copy
                terms.append(f"dates[{quote(key)}] {ops[op]} {quote(date_key(value))}")
            else:
                terms.append(f"{path} {ops[op]} {literal(value)}")
    return " and ".join(terms)


filters = [{"department": "billing"},
           {"status": {"$ne": "superseded"}},
           {"plan": ["pro", "team"], "updated": {"$gte": "2025-01-01"}},
           {"title": 'the "new" refund policy', "access": {"$ne": "internal"}}]
for where in filters:
    assert to_expression(where) == milvus_filter(where)
    print(f"{str(where):62s} -> {milvus_filter(where)}")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · What no expression can carry, and a check of the filtered search
#
# `milvus_filter` also handles `$nin`, `None` and empty lists, and refuses what no expression
# can carry instead of dropping the condition (a dropped filter would quietly return pages a
# user may not see):

# %%
for bad in ({"status": "\ud800"}, {"status": {"$like": "curr%"}}):
    try:
        milvus_filter(bad)
    except (ValueError, TypeError) as err:
        print(f"{type(err).__name__}: {err}")

# %% [markdown]
# Does the filtered search return what the filter allows, and k of them when k qualify? The
# chapter 9 pipeline adds `status != superseded` to every query; here it is on both
# retrievers, with a narrow department filter on top:

# %%
where = {"department": "community", "status": {"$ne": "superseded"}}
allowed = {r["id"] for r in ours.items_ if r["metadata"].get("department") == "community"
           and r["metadata"].get("status") != "superseded"}
a = ours.dense.search("export tips", k=10, where=where)
b = milvus.with_mode("dense").search("export tips", k=10, where=where)
print(f"{len(allowed)} chunks pass; DenseIndex returned {len(a)}, Milvus {len(b)}; all allowed: "
      f"{all(h.id in allowed for h in b)}; same ids: {[h.id for h in a] == [h.id for h in b]}")

# %% [markdown]
# ## 3. Same results? Dense, BM25, hybrid
#
# **Dense.** The dense mode *is* chapter 3's `DenseIndex`, on the collection's `MilvusStore`
# instead of a `FaissStore` (`milvus.dense_`). With a `FLAT` index Milvus searches exactly,
# like the default `FaissStore()` and like the numpy top-k of chapter 3. From scratch: score
# every chunk vector against every question and keep the top 10; then compare with Milvus's
# top 10 for the same questions.

# %%
questions = [q.standalone for q in hc.questions]
matrix = encoder.encode_passages([index_text(r) for r in ours.items_])
ids = np.array([r["id"] for r in ours.items_])
qvecs = encoder.encode_queries(questions)
scratch = [list(ids[np.argsort(-(matrix @ q), kind="stable")[:10]]) for q in qvecs]
dense = milvus.with_mode("dense")
got = [[h.id for h in dense.search(q, k=10)] for q in questions]
overlaps = [overlap_at_k(a, b, 10) for a, b in zip(scratch, got, strict=True)]
mean, lo, hi = bootstrap_ci(overlaps)
print(f"dense top-10 overlap, numpy from scratch vs Milvus FLAT, {len(questions)} questions: "
      f"{mean:.3f} [{lo:.3f}, {hi:.3f}]; below 1.0 on {sum(o < 1 for o in overlaps)}")
assert mean >= 0.99

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Where the tokenizers differ
#
# **BM25.** Milvus's BM25 has the same formula (with Lucene's IDF and an extra `(k1 + 1)`
# factor that scales every score and changes no ranking), but not our tokenizer. Where they
# split text differently:

# %%
milvus_tokens = create_analyzer
for analyzer_name, analyzer in (("Milvus standard", MILVUS_STANDARD), ("+ our stopwords", DEFAULT_ANALYZER)):
    print(f"{analyzer_name}: {milvus_tokens(analyzer).tokenize('How do I get a 14-day refund?')}")
print(f"{'text':32s} {'ragbook Tokenizer':36s} Milvus (default analyzer)")
for text in ["How do I get a 14-day refund?", "ERR_CONN_4021 on the Hub", "call os.path.join",
             "Straße, CAFÉ", "U.S. billing", "请求超时"]:
    print(f"{text:32s} {str(Tokenizer()(text)):36s} {milvus_tokens(DEFAULT_ANALYZER).tokenize(text)}")

# %% [markdown]
# Both keep `ERR_CONN_4021` whole (`_` is a word character to Milvus's tokenizer too). Milvus
# splits `14-day` and `os.path.join` at the hyphen and dots, lower-cases without Unicode
# folding (`straße` stays, where we write `strasse`) and keeps a run of Chinese characters
# as one token where we index each character. Stopwords matter most: Milvus's standard
# analyzer keeps them, so a question's "how do I" outweighs its content words. That is why
# `MilvusRetriever`'s default analyzer adds our stopword list as a `stop` filter (valid on
# Milvus Lite and on a server). The effect, as Spearman's rank correlation with `BM25Index`
# over the union of both top 10s, and as top-10 overlap:

# %%
def bm25_agreement(analyzer, items, queries, ours_bm25):
    placeholder = np.zeros((len(items), encoder.dim), np.float32)
    placeholder[:, 0] = 1.0                         # BM25 needs no real vectors
    store = MilvusStore(analyzer=analyzer)              # a temporary Milvus Lite database
    with MilvusRetriever(encoder, store, mode="bm25").build(items, vectors=placeholder) as bm:
        pairs = [([h.id for h in ours_bm25.search(q, 50)], [h.id for h in bm.search(q, 50)]) for q in queries]
    return ([rank_correlation(a, b, 10) for a, b in pairs], [overlap_at_k(a, b, 10) for a, b in pairs])


def show(label, values):
    mean, lo, hi = bootstrap_ci(values)
    return f"{label} {mean:.3f} [{lo:.3f}, {hi:.3f}]"


for name, analyzer in (("standard + lowercase", MILVUS_STANDARD), ("+ our stopwords", DEFAULT_ANALYZER)):
    rho, ov = bm25_agreement(analyzer, chunks, questions, ours.bm25)
    print(f"help centre, {name:21s}: {show('rho', rho)}, {show('overlap@10', ov)}")

# %% [markdown]
# ### Hybrid
#
# **Hybrid.** `MilvusRetriever(mode="hybrid")` sends both searches in one `hybrid_search`
# call, each `depth = 100` deep with the filter applied, and fuses them inside Milvus with
# `RRFRanker(60)` — the same reciprocal rank fusion as chapter 5, ranks from 1. What matters
# is recall, with its uncertainty; on the help-centre test questions:

# %%
def recall_pair(ours_retriever, milvus_retriever, qs, qrels):
    """Per-question recall@10 of both retrievers and the paired difference (Milvus - ours)."""
    a = per_query(qrels, retrieve_run(ours_retriever, qs, k=10), "recall@10")
    b = per_query(qrels, retrieve_run(milvus_retriever, qs, k=10), "recall@10")
    diff, lo, hi = paired_bootstrap(a, b)
    print(f"{len(a)} questions: HybridRetriever {show('', a.values())}, Milvus hybrid "
          f"{show('', b.values())}; Milvus - ours {diff:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    return diff, lo, hi


measured = {"dense top-10 overlap, help centre": float(np.mean(overlaps))}   # the chapter's key numbers, for the summary
measured["BM25 top-10 overlap (our stopwords), help centre"] = float(np.mean(ov))
hc_test = [(q.id, q.standalone) for q in hc.split("test") if q.gold]
print("help centre recall@10,", end=" ")
measured["hybrid recall@10, Milvus - ours, help centre"] = recall_pair(ours, milvus, hc_test, hc.qrels("test"))

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · The same on the Python docs
#
# The same three measurements on the Python documentation (its size is printed first;
# recall is measured on the test questions). The embeddings come from the cache chapter 3
# filled.

# %%
py = load_pydocs()
print(f"Python docs: {len(py.documents):,} sections, {len(py.questions)} FAQ questions, "
      f"{len(py.split('test'))} of them test")
t = time.perf_counter()
py_ours = HybridRetriever(DenseIndex(encoder), BM25Index()).build(py.documents)
t_ours = time.perf_counter() - t
py_milvus = MilvusRetriever(encoder, MilvusStore(os.path.join(workdir, "pydocs.db"))).build(py.documents)
print(f"built: ours {t_ours:.1f} s, Milvus Lite {py_milvus.build_seconds_:.1f} s "
      f"(vectors from the cache; Milvus also analyzes every text for BM25)")
py_questions = [q.text for q in py.questions]
py_dense = py_milvus.with_mode("dense")
ov = [overlap_at_k([h.id for h in py_ours.dense.search(q, 10)], [h.id for h in py_dense.search(q, 10)], 10)
      for q in py_questions]
print(f"dense, {show('overlap@10 with DenseIndex', ov)}")
rho, ovb = bm25_agreement(DEFAULT_ANALYZER, py.documents, py_questions, py_ours.bm25)
print(f"BM25 (our stopwords), {show('rho', rho)}, {show('overlap@10', ovb)}")
print("hybrid recall@10,", end=" ")
measured["dense top-10 overlap, Python docs"] = float(np.mean(ov))
measured["BM25 top-10 overlap (our stopwords), Python docs"] = float(np.mean(ovb))
measured["hybrid recall@10, Milvus - ours, Python docs"] = recall_pair(
    py_ours, py_milvus, [(q.id, q.text) for q in py.split("test")], py.qrels("test"))

# %% [markdown]
# Reading the numbers above: exact dense search agrees top-10 for top-10 — moving the
# vectors moved nothing. BM25 agrees less, and less on the Python docs than on the help
# centre, because their text is full of `os.path.join`, `str.split()` and `3.11`, exactly
# the tokens the two tokenizers cut differently. Hybrid recall@10 differs little between
# the two engines; read the paired interval on the difference, not the two means. A team
# moving to Milvus should expect — and measure, as here — that keyword search changes with
# the analyzer, and decide which behaviour it wants.
#
# ## 4. The chapter 9 pipeline on Milvus: one line
#
# `ragbook.pipeline.Pipeline(retriever)` accepts any retriever. Moving the whole
# condense → retrieve → read → decide chain onto Milvus changes the line that builds it:

# %%
qa_here = Pipeline(ours)
qa_milvus = Pipeline(milvus)           # the one line that changes

dev = hc.split("dev")
here = [qa_here.ask(*with_history(q)) for q in dev]
there = [qa_milvus.ask(*with_history(q)) for q in dev]
same = [a.answer.text == b.answer.text for a, b in zip(here, there, strict=True)]
same_sources = [[h.doc_id for h in a.sources] == [h.doc_id for h in b.sources] for a, b in zip(here, there, strict=True)]
print(f"{len(dev)} dev questions: same answer {sum(same)}, same source pages {sum(same_sources)}, "
      f"escalated here {sum(r.escalated for r in here)} / on Milvus {sum(r.escalated for r in there)}")
measured["pipeline: same answer on dev questions"] = f"{sum(same)} of {len(dev)}"
for q, a, b, s in zip(dev, here, there, same, strict=True):
    if not s:
        print(f"\n{q.text[:90]}\n  here:   {str(a.answer.text)[:90]}\n  Milvus: {str(b.answer.text)[:90]}")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Where the two pipelines' answers differ
#
# Where the answers differ, the fused candidate lists differ, because the BM25 channel
# tokenizes differently (section 3): the five candidates the reader reads are not the same
# five, and it picks its sentence from another page. The trace each answer carries (chapter
# 9) shows where to look: on Milvus, retrieval is one `search` stage (the fusion happens
# inside Milvus), where ours logs `dense`, `bm25` and `fuse` separately.

# %%
print([s.name for s in here[0].trace], [s.name for s in there[0].trace])

# %% [markdown]
# ## 5. Living data: upsert, delete, reopen
#
# A help centre changes every day. In Milvus a changed article is an **upsert** (insert, or
# replace the row with the same id) and a retired one a **delete**; both channels change in
# the same write. Here the refund policy's first chunk gets a new refund window; where does
# it rank, in each channel, for a question about the new window?

# %%
from ragbook.types import Chunk, Document  # noqa: E402

old = next(c for c in chunks if c.doc_id == "billing-refund-policy")
new_text = old.text + " Update: annual plans now have a 30-day refund window."
changed = Chunk(id=old.id, doc_id=old.doc_id, text=new_text, start=old.start,
                end=old.start + len(new_text), metadata=old.metadata)
print("upsert the changed chunk (added, replaced):", milvus.upsert([changed]))
question = "30-day refund window for annual plans"


def rank_of(item_id, hits):
    return next((h.rank for h in hits if h.id == item_id), "not in top 20")


ours_after = BM25Index().build([changed if c.id == old.id else c for c in chunks])
for mode in ("dense", "bm25", "hybrid"):
    print(f"  Milvus Lite {mode:6s}: rank {rank_of(old.id, milvus.with_mode(mode).search(question, k=20))}")
print(f"  BM25Index rebuilt with the change: rank {rank_of(old.id, ours_after.search(question, k=20))}")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Lite's BM25 after edits, reopening, and the file lock
#
# The dense channel sees the new text at once. Milvus Lite's BM25 does not rank it at all,
# and that is a property of Lite, not of BM25: Lite computes BM25 statistics (document count,
# document frequencies, average length) *per segment* — its README lists this among its
# limitations against a Milvus server. The bulk load sits in one sealed segment; the upserted
# row sits alone in the in-memory segment, where every term occurs in the only document, so
# its IDF is close to zero. Hybrid fusion then ranks a chunk that dense puts first far down.
# Rebuilding the collection puts every row back into one segment:

# %%
rebuilt = MilvusRetriever(encoder, MilvusStore(os.path.join(workdir, "rebuilt.db"))).build(
    [changed if c.id == old.id else c for c in chunks])
for mode in ("bm25", "hybrid"):
    print(f"rebuilt, Milvus Lite {mode:6s}: rank {rank_of(old.id, rebuilt.with_mode(mode).search(question, k=20))}")
rebuilt.close()

# %% [markdown]
# So with Milvus Lite, keyword search over edited rows is only trustworthy after a rebuild;
# the dense channel and the filters are not affected. Deletes and additions keep the corpus
# fingerprint honest either way:

# %%
print("upsert the original back (added, replaced):", milvus.upsert([old]),
      "| fingerprint ours again:", milvus.corpus_fingerprint == ours.corpus_fingerprint)
retired = Document("billing-legacy-discounts", "Legacy discount codes expire on 1 March.",
                   metadata={**old.metadata, "status": "superseded"})
print("add a page (added, replaced):", milvus.upsert([retired]), "| rows:", len(milvus))
print("delete it:", milvus.delete([retired.id]), "| rows:", len(milvus),
      "| fingerprint ours again:", milvus.corpus_fingerprint == ours.corpus_fingerprint)

# %% [markdown]
# The collection outlives the process. Closing stops the embedded server; `open` starts it
# again on the same folder, loads the collection (a reopened Milvus collection must be
# *loaded* into memory before it can be searched) and checks the encoder, as
# `DenseIndex.load` does:

# %%
before = [h.id for h in milvus.search("how long is the refund window", k=5)]
milvus.close()
milvus = MilvusRetriever.open(uri, encoder)
print("reopened:", len(milvus), "rows; same top 5:",
      [h.id for h in milvus.search("how long is the refund window", k=5)] == before)


class AnotherModel:
    fingerprint = "BAAI/bge-small-en-v1.5|weights=...|prefix=bge|max_length=512"


try:
    MilvusRetriever.open(uri, AnotherModel())
except EncoderMismatchError as err:
    print("EncoderMismatchError:", str(err)[:150], "...")

# %% [markdown]
# Milvus Lite is one process per database folder (it holds a file lock). A second notebook
# opening the same folder would get pymilvus's bare "Open local milvus failed"; ragbook says
# what happened and what to do:

# %%
code = textwrap.dedent(f"""
    from ragbook.stores import MilvusLockedError, MilvusStore
    try:
        MilvusStore({uri!r}).open()
    except MilvusLockedError as err:
        print(err)
""")
second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
print(second.stdout.replace(workdir, "<workdir>"))

# %% [markdown]
# That lock is the first thing a cluster removes: many clients, one service.

# %% [markdown]
# ## 6. Speed on one machine
#
# `FaissStore` (inside `DenseIndex`) and `MilvusStore` implement the same `VectorStore`
# protocol, `search(vectors, k, where) -> ids, scores`, so they can be timed with the same
# loop, one question at a time, on the Python docs (both exact: FAISS's flat index, and
# Milvus Lite's `FLAT`, which is a numpy brute-force scan):

# %%
from threadpoolctl import threadpool_limits  # noqa: E402


def latency_ms(store, vectors, rounds=2):
    times = []
    with threadpool_limits(limits=1):   # one core each: latency, not this machine's core count
        for _ in range(rounds):
            for v in vectors:
                t = time.perf_counter()
                store.search(v[None], 10)
                times.append(time.perf_counter() - t)
    return 1e3 * np.percentile(times, 50)


py_qvecs = encoder.encode_queries(py_questions)
faiss_ms, milvus_ms = latency_ms(py_ours.dense.store_, py_qvecs), latency_ms(py_milvus.store_, py_qvecs)
print(f"median per query over {len(py_qvecs)} questions x 2, {len(py_ours):,} vectors: FaissStore "
      f"{faiss_ms:.2f} ms, MilvusStore (Lite) {milvus_ms:.2f} ms: Milvus Lite takes "
      f"{milvus_ms / faiss_ms:.1f}x as long")
measured["Milvus Lite / FaissStore median search time (this machine)"] = f"{milvus_ms / faiss_ms:.1f}x"

# %% [markdown]
# Each Milvus search is, besides the scan itself, a gRPC call to a server thread, a filter
# compilation, a merge over segments and a row fetch, in Python; the ratio above shows what
# that costs on this machine. It is the price of code that runs unchanged against a cluster,
# where the search itself is parallel C++ and the bottleneck is elsewhere.
# `bench/milvus.py` measures build time, latency and peak memory at two corpus sizes
# against `DenseIndex` flat and HNSW, one process per configuration (source: its results
# in `docs/benchmarks.md`; not re-run here).
#
# ## 7. Sizing on paper: tens and hundreds of millions of chunks
#
# Before a cluster is bought, its memory is arithmetic. Per chunk a query node holds the
# vector (in the index's encoding), the index structure (HNSW's links), and — unless they
# are memory-mapped — the scalar fields (text and metadata) and the BM25 sparse vector. The
# last two are measured on our own chunks:

# %%
text_bytes = np.mean([len(c.text.encode()) + len(str(c.metadata)) for c in chunks])
terms = np.mean([len(set(milvus_tokens(DEFAULT_ANALYZER).tokenize(c.text))) for c in chunks])
sparse_bytes = terms * 8                      # uint32 term id + float32 weight per term
dim, m = encoder.dim, 16
print(f"per chunk: text + metadata {text_bytes:.0f} B, {terms:.0f} distinct terms -> BM25 "
      f"{sparse_bytes:.0f} B; HNSW links at M={m}: {hnsw_graph_bytes(m):.0f} B")
print(f"{dim}-d vector: float32 {bytes_per_vector(dim)} B, int8 {bytes_per_vector(dim, 'int8')} B, "
      f"PQ48 {bytes_per_vector(dim, 'pq', 48)} B")

node_gib, fill, replicas = 64, 0.7, 2
indexes = {  # bytes per chunk in query-node memory
    "HNSW float32": bytes_per_vector(dim) + hnsw_graph_bytes(m),
    "HNSW_SQ8 (int8)": bytes_per_vector(dim, "int8") + hnsw_graph_bytes(m),
    "IVF_PQ, 48 codes + 8-byte id": bytes_per_vector(dim, "pq", 48) + 8,
    "DISKANN (PQ codes, 1/8 of raw)": bytes_per_vector(dim) / 8,
}
print(f"\n{node_gib} GiB query nodes filled to {fill:.0%}, {replicas} replicas; "
      f"'+ fields' adds text, metadata and BM25 in memory")
print(f"{'index':32s} {'chunks':>6s} {'vectors GiB':>11s} {'+ fields GiB':>12s} {'nodes':>6s}")
for n in (10_000_000, 100_000_000):
    for name, per in indexes.items():
        vec_gib = n * per / 2**30
        all_bytes = n * (per + text_bytes + sparse_bytes)
        nodes = shards_needed(all_bytes, node_gib * 2**30, fill) * replicas
        print(f"{name:32s} {n // 1_000_000:>5d}M {vec_gib:11.1f} {all_bytes / 2**30:12.1f} {nodes:6d}")
        if name == "HNSW float32":
            measured[f"query nodes for {n // 1_000_000}M chunks, HNSW float32 + fields, "
                     f"{replicas} replicas"] = nodes

# the same arithmetic as curves: memory of one replica against corpus size, per index type
sizes = np.logspace(6, 9, 13)
fig, ax = plt.subplots(figsize=(7, 3.6))
for name, per in indexes.items():
    ax.plot(sizes, sizes * (per + text_bytes + sparse_bytes) / 2**30, "o-", ms=3, label=name)
ax.axhline(node_gib * fill, ls="--", c="grey", lw=1)
ax.text(sizes[0], node_gib * fill * 1.15, f"one {node_gib} GiB node, {fill:.0%} full", fontsize=8)
ax.set_xscale("log"), ax.set_yscale("log"), ax.grid(alpha=0.3), ax.legend(fontsize=8)
ax.set_xlabel("chunks"), ax.set_ylabel("GiB in query-node memory (one replica)")
plt.show()

# %% [markdown]
# Reading the table: at 10 million chunks the float32 HNSW index alone fits in one 64 GiB
# node; keeping text, metadata and the BM25 vectors in memory as well, and two replicas,
# makes it a small cluster. At 100 million, float32 HNSW needs several nodes for the vectors
# alone, before replicas;
# that is where Milvus deployments switch index type: `HNSW_SQ8` (a quarter of the vector
# bytes, a small recall loss) or `DISKANN`, which keeps only compressed codes in memory and
# the graph and full vectors on NVMe (milliseconds more per query, a fraction of the memory),
# and memory-map the scalar fields (`mmap`) so that text stays on disk. IVF_PQ is smallest
# and the least accurate without re-ranking on full vectors.

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · Updating ragbook's own indexes: one write to both channels, checked
#
# Section 5 showed Milvus Lite scoring an edited row with the statistics of its own small
# segment. The in-process `HybridRetriever` has no segments, and it can be updated without a
# rebuild too: `update(upsert=[...], delete=[ids])` writes one change to both channels in
# one operation. It checks everything first (ids, texts, metadata, that each id to delete is
# indexed, the encoder) and embeds the new texts before either channel changes; BM25 keeps
# each chunk's term counts, so it recomputes the document frequencies, the average length
# and every weight without reading the other texts again; and it ends with the count and
# fingerprint check. The change: three chunks of the refund policy edited, two pages added,
# a two-chunk page retired:

# %%
import dataclasses  # noqa: E402

from ragbook.fusion import IndexDriftError  # noqa: E402

note = " Update: annual plans now have a 30-day refund window."
edits = [dataclasses.replace(c, text=c.text + note, end=c.end + len(note))
         for c in chunks if c.doc_id == "billing-refund-policy"][:3]
pages = [Document("billing-annual-refunds", "Annual plans can be refunded within 30 days of "
                  "the renewal date. Ask from Billing > Invoices.", metadata=dict(old.metadata)),
         Document("billing-refund-methods", "Refunds go back to the card or account that paid "
                  "the invoice, within 5 to 10 working days.", metadata=dict(old.metadata))]
retired = [c.id for c in chunks if c.doc_id == "account-light-agents"]
live = HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)  # `ours` stays as built
live.update(upsert=edits + pages, delete=retired)
print(f"{len(edits)} chunks changed, {len(pages)} added, {len(retired)} deleted: {len(chunks)} -> "
      f"{len(live)} chunks; dense holds {len(live.dense)}, BM25 {len(live.bm25)}, same "
      f"fingerprint: {live.dense.corpus_fingerprint == live.bm25.corpus_fingerprint}")

# %% [markdown]
# Is the updated index the index a rebuild would make? Build one from the final chunks (the
# kept ones in order, then the upserted) and compare both channels on every dev question:

# %%
gone = {c.id for c in edits} | set(retired)
rebuilt_ours = HybridRetriever(DenseIndex(encoder), BM25Index()).build(
    [c for c in chunks if c.id not in gone] + edits + pages)
dev_texts = [q.text for q in hc.split("dev")]
same_fused, same_channels, worst = 0, 0, {"dense": 0.0, "bm25": 0.0}
for q in dev_texts:
    for name, a, b in zip(("dense", "bm25"), live.channels(q), rebuilt_ours.channels(q)):
        same_channels += [h.id for h in a] == [h.id for h in b]
        worst[name] = max([worst[name]] + [abs(x.score - y.score) for x, y in zip(a, b)])
    same_fused += [h.id for h in live.search(q)] == [h.id for h in rebuilt_ours.search(q)]
print(f"update vs rebuild, {len(dev_texts)} dev questions: same channel rankings "
      f"{same_channels} of {2 * len(dev_texts)}, same fused top 10 {same_fused} of "
      f"{len(dev_texts)}; largest score difference dense {worst['dense']:.1e}, BM25 "
      f"{worst['bm25']:.1e}; same corpus fingerprint: "
      f"{live.corpus_fingerprint == rebuilt_ours.corpus_fingerprint}")
print(f"the edited chunk for {question!r}: BM25 rank "
      f"{rank_of(old.id, live.bm25.search(question, k=20))}, hybrid rank "
      f"{rank_of(old.id, live.search(question, k=20))}")
measured["update vs rebuild: same fused top 10, help-centre dev questions"] = (
    f"{same_fused} of {len(dev_texts)}")

# %% [markdown]
# The count and fingerprint check is what catches a write that reached one channel only
# (a crash between two writes, a script that updated one index). Every search runs it, and
# the error names the items that differ:

# %%
live.bm25.delete([pages[-1].id])            # a write that reaches one channel only
try:
    live.search("refund window")
except IndexDriftError as err:
    print("IndexDriftError:", err)
live.bm25.upsert([pages[-1]])               # written again: the channels agree
print("check():", live.check(), "items in both channels")

# %% [markdown]
# On disk an update is load, update, save (what `ragbook index SRC --out PATH` does on an
# existing index, re-chunking only the files whose content hash changed): the save swaps
# the new folder in atomically, so a crash leaves the previous index whole.
#
# **What to do on Milvus.** There both channels are one collection and cannot drift apart,
# but BM25 statistics can: Milvus Lite scores each segment with its own document count,
# document frequencies and average length (section 5). Sealing the segment (`flush`) and
# asking for a compaction do not merge those statistics on Lite:

# %%
milvus.upsert([changed])
milvus.store_.flush()
milvus.store_.client.compact(milvus.store_.collection)
print(f"Milvus Lite after upsert, flush and compact: BM25 rank "
      f"{rank_of(old.id, milvus.with_mode('bm25').search(question, k=20))}")
restored = milvus.upsert([old])          # (added, replaced) counts; not needed here

# %% [markdown]
# So with Milvus Lite, rebuild the collection from the current items (`MilvusRetriever.build`
# into a fresh collection, as section 5 did) after each batch of edits or on a schedule, and
# check after each rebuild that a few questions find their edited pages (what the
# comparison above does for ragbook's own index). A Milvus server keeps BM25 statistics per
# collection rather than per segment, so edited rows are scored like the rest; there, let
# compaction (`client.compact(collection)`, run in the background by the server) rewrite the
# segments that many small upserts and deletes leave behind.

# %% [markdown]
# ## 8. What changes at cluster scale
#
# The code does not change — `MilvusRetriever.open("http://milvus:19530", encoder)` is the
# whole migration — but four things behave differently, and each ties to the table above.
#
# **Shards and replicas.** A collection's writes go through *shards* (write channels, fixed
# when it is created), while its sealed *segments* are spread over the query nodes that
# search them: the "nodes" column is how many machines share the segments, times the
# *replicas* (`load_collection(..., replica_number=2)`). Replicas double memory and double
# read throughput, and let a node die without losing the segments it served.
#
# **Consistency levels.** The collections here use `Strong` consistency, so a search sees
# every write before it (the upsert in section 5 was visible to the dense channel at once,
# and the tests rely on it). On a cluster, Strong means each search waits for every write channel to catch up;
# Milvus's default, `Bounded`, accepts a few seconds of staleness for lower latency;
# `Session` guarantees a client sees its own writes; `Eventually` nothing. A help centre can
# live with Bounded: an article edited a second ago may still show its old text.
#
# **Segments and compaction.** New rows land in *growing* segments, which are *sealed* when
# full or flushed, and indexed only then. A delete is a tombstone until *compaction* rewrites
# the segment without the row; an upsert is a delete plus an insert. Many small upserts make
# many small segments and many tombstones, so compaction (which Milvus runs in the
# background) is what keeps search fast and memory honest — budget for it, which is one
# reason the sizing fills each node only to 70%. Milvus Lite showed the segment model in
# miniature in section 5: a row in its own segment was scored with its own statistics.
#
# **One process, many.** The lock of section 5 disappears: any number of ingestion workers
# and query services connect to the same collection, which is the point of the move.
#
# **Tested against a server, and only against Lite.** `tests/test_milvus_server.py` starts a
# real Milvus server (the `2.3.5` standalone server the pip package `milvus` ships, with
# embedded etcd and local storage) and runs `MilvusStore` over `http://127.0.0.1:PORT`: dense
# search (the same top 10 as the in-process flat index on the help centre, filtered or not),
# the hostile `where` filters of the Lite tests, upsert, get and delete, two client processes
# writing and reading at once, a rebuild whose new rows are refused (the old collection stays
# live behind its alias), and a `kill -9` of the server during upserts (after a restart every
# acknowledged write is there). Server-side BM25 and `hybrid_search` need Milvus `>= 2.5` (its
# BM25 function and sparse vectors): on that server the store builds a dense-only collection,
# and `mode="bm25"` or `"hybrid"` stops with a `MilvusVersionError` naming the version and the
# way out. So everything this chapter showed of Milvus's BM25 and hybrid search, per-segment
# statistics included, was measured on Milvus Lite only; so was `is null` in the filter
# translation, which that server cannot parse (a filter that must exclude a missing value is
# refused there).

# %% [markdown]
# ## What you built / what you measured
#
# * a translator from the `where` language to Milvus expressions (quoted, escaped, `$ne`
#   passing a missing key), checked against `milvus_filter`;
# * the retriever contract on Milvus Lite — dense, BM25 and hybrid in one collection — and
#   the chapter 9 pipeline on it by changing one line;
# * upsert, delete and reopen on a collection that outlives the process, and a sizing table
#   for a cluster;
# * an update of ragbook's own hybrid index, both channels in one checked write, equal to a
#   rebuild — and, for Milvus Lite, the rebuild its per-segment BM25 statistics call for.
#
# The key numbers, as measured above, and the profile and encoder that made them:

# %%
print(f"profile: {models.active_profile()}; dense: {encoder.fingerprint}")
for name, value in measured.items():
    if isinstance(value, tuple):
        value = "{:+.3f} [{:+.3f}, {:+.3f}]".format(*value)
    elif isinstance(value, float):
        value = f"{value:.3f}"
    print(f"{name:66s} {value}")

milvus.close()
py_milvus.close()
shutil.rmtree(workdir, ignore_errors=True)
print("closed; temporary databases removed")
