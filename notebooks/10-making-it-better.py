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
# # 10 · Making it better
#
# Chapters 3–9 built a pipeline that works. This chapter tries five well-known ways to make it
# work *better*. Each is a small `ragbook` piece that keeps the retriever contract
# (`search(query, k, where)` returns ranked hits), so it drops into the pipeline unchanged:
#
# 1. **parent-document retrieval** — search small children, hand over the larger section
#    they lie in;
# 2. **sentence-window retrieval** — search single sentences, hand over ±3 sentences;
# 3. **contextual retrieval** — index each chunk with a short note that situates it;
# 4. **metadata filters** — keep superseded pages out, inside the search;
# 5. **caching** — embeddings, query results, answers.
#
# Each is measured on both test splits against plain retrieval, with paired bootstrap
# intervals (chapter 4). A published gain is a hypothesis about *your* data; where a
# technique loses here, this chapter says so.
#
# **Why a subset of the Python docs.** Sentence windows and parent sections need new
# embeddings — one per sentence, one per child. For the help centre that is cheap;
# for the whole Python docs it is the sentence count printed above, several minutes of CPU on
# every cold run of this notebook. So every Python-docs comparison in this chapter runs on one
# documented subset: all sections of the FAQ pages (where every test question's answer lies)
# plus a fixed random sample of other sections as distractors. The plain baseline runs on the
# same subset, so each comparison stays paired and fair; the absolute numbers are not chapter
# 5's, which searched all sections.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=10)

# %%
import random
import time

import matplotlib.pyplot as plt
import numpy as np

from ragbook import Encoder, models
from ragbook.bm25 import BM25Index
from ragbook.cache import CachedPipeline, CachedRetriever
from ragbook.chunking import chunk_documents, count_tokens
from ragbook.contextual import LLMContext, contexts_for, section_path, title_context
from ragbook.datasets import data_dir, load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import bootstrap_ci, format_table, paired_bootstrap, per_query, run_from_hits
from ragbook.expansion import (
    ParentDocumentRetriever,
    SentenceWindowRetriever,
    fit_budget,
    parent_child_chunks,
    sentence_chunks,
    sentence_spans,
)
from ragbook.filters import matches, scoped
from ragbook.fusion import HybridRetriever
from ragbook.pipeline import Pipeline
from ragbook.readers import default_extractive_reader
from ragbook.rerank import CrossEncoderReranker, WindowScorer
from ragbook.retrieval import index_text
from ragbook.types import Chunk

t_start = time.perf_counter()
hc, py = load_helpcentre(), load_pydocs()
encoder = Encoder()
print(f"profile: {models.active_profile()}; dense: {encoder.fingerprint}")

# the help centre: the 256-token chunks of every chapter since 4
hc_chunks = chunk_documents(hc.documents, size=256, overlap=32)
# the Python docs: whole sections (as in chapters 3-6), of a documented subset (see below)
faq = [d for d in py.documents if d.metadata["file"].startswith("faq/")]
others = [d for d in py.documents if not d.metadata["file"].startswith("faq/")]
py_docs = faq + random.Random(10).sample(others, 500)
py_sections = [Chunk(d.id, d.id, d.text, 0, len(d.text), d.metadata) for d in py_docs]
CORPORA = {"help centre": (hc.documents, hc_chunks), "python docs": (py_docs, py_sections)}
SPLITS = {
    "help centre": ([(q.id, q.standalone) for q in hc.split("test") if q.gold], hc.qrels("test"),
                    {q.id: q.answers for q in hc.split("test") if q.answers}),
    "python docs": ([(q.id, q.text) for q in py.split("test")], py.qrels("test"),
                    {q.id: q.answers for q in py.split("test") if q.answers})}
plain = {name: DenseIndex(encoder).build(items) for name, (_, items) in CORPORA.items()}
for name, (docs, items) in CORPORA.items():
    qs, _, answers = SPLITS[name]
    print(f"{name}: {len(docs):,} documents, {len(items):,} items indexed; {len(qs)} answerable "
          f"test questions, {len(answers)} with an answer span")
gold_files = {py.doc(g).metadata["file"] for q in py.questions for g in q.gold}
print(f"python docs subset: the {len(faq)} sections of the {len({d.metadata['file'] for d in faq})} "
      f"FAQ pages (every FAQ answer is on one: {gold_files <= {d.metadata['file'] for d in faq}}) "
      f"+ {len(py_docs) - len(faq)} other sections drawn with seed 10")
print(f"the whole python docs: {len(py.documents):,} sections, "
      f"{len(sentence_chunks(py.documents)):,} sentences")


def search_all(retriever, name, k):
    return {qid: retriever.search(text, k=k) for qid, text in SPLITS[name][0]}


def answer_found(hits, answers):
    """1.0 when a gold answer span lies whole inside text the reader is handed."""
    return float(any(h.doc_id == a["doc"] and a["text"] in h.text for h in hits for a in answers))


def paired_rows(values, baseline):
    """compare_runs-style rows for per-question values {run: {metric: {qid: value}}}."""
    rows = []
    for run, metrics in values.items():
        row = {"run": run}
        for m, v in metrics.items():
            row[m] = bootstrap_ci(list(v.values()))
            if run != baseline:
                row[f"Δ{m}"] = paired_bootstrap(values[baseline][m], v)
        rows.append(row)
    return rows


# %% [markdown]
# ## Parent-document retrieval: search small, return the section
#
# A small child (`child_size=200` tokens below) embeds one idea, so it matches a question
# sharply; the section it lies in (`parent_size=1000`) holds what a reader needs around it. `parent_child_chunks` cuts each
# document into parents and each parent into children, so every child lies inside exactly
# one parent. `ParentDocumentRetriever` wraps any retriever over the children: it reads
# `k × 4` children, maps each to its parent, and returns each parent once, scored by its
# best child.

# %%
families = {name: parent_child_chunks(docs, parent_size=1000, child_size=200)
            for name, (docs, _) in CORPORA.items()}
parent = {name: ParentDocumentRetriever(DenseIndex(encoder).build(children), parents)
          for name, (parents, children) in families.items()}
for name, (parents, children) in families.items():
    print(f"{name}: {len(children):,} children of ~200 tokens in {len(parents):,} parents of "
          f"<= 1,000 tokens")

# from scratch: the best children, each mapped to the parent that contains it, once
name = "help centre"
parents, children = families[name]
query = SPLITS[name][0][0][1]
seen = []
for h in parent[name].retriever.search(query, k=20):
    owner = next(p for p in parents if p.doc_id == h.doc_id and p.start <= h.start < p.end)
    if owner.id not in seen:
        seen.append(owner.id)
print(query)
print("from scratch:", seen[:5])
assert seen[:5] == [h.id for h in parent[name].search(query, k=5)]
print("== ParentDocumentRetriever")

# %% [markdown]
# Help-centre articles are short, so almost every parent is a whole article (compare the
# parent and article counts above); in the Python docs most sections are shorter than one
# child, so for them a child *is* the section, and only long sections are really split.

# %% [markdown]
# ## Sentence-window retrieval: search sentences, return their neighbours
#
# The sharpest match of all is one sentence; the reader then gets the hit widened to `n`
# sentences on *each* side. `SentenceWindowRetriever` wraps a retriever over
# `sentence_chunks`, widens each hit, and merges windows that overlap so no text is handed
# over twice.

# %%
sentences = {name: sentence_chunks(docs) for name, (docs, _) in CORPORA.items()}
sentence_index = {name: DenseIndex(encoder).build(s) for name, s in sentences.items()}
window = {name: SentenceWindowRetriever(sentence_index[name], CORPORA[name][0], window=3)
          for name in CORPORA}
for name, s in sentences.items():
    print(f"{name}: {len(s):,} sentences indexed")

# from scratch: the hit's sentence i, and 3 on each side
name = "help centre"
docs = {d.id: d for d in hc.documents}
hit = sentence_index[name].search(query, k=1)[0]
spans = sentence_spans(docs[hit.doc_id].text)
i = [a for a, _ in spans].index(hit.start)
symmetric = spans[max(i - 3, 0):i + 3 + 1]
llama_like = spans[max(i - 3, 0):min(i + 3, len(spans))]  # llama-index's slice
print(f"hit: sentence {i} of {len(spans)} in {hit.doc_id}: {hit.text!r}")
print(f"symmetric ±3: sentences {max(i - 3, 0)}..{min(i + 3, len(spans) - 1)} "
      f"({len(symmetric)} sentences)")
print(f"llama-index window_size=3: {len(llama_like)} sentences, the last one after the hit is "
      f"{spans.index(llama_like[-1]) - i} away")
assert (symmetric[0][0], symmetric[-1][1]) == window[name].widen(hit)
print("symmetric == SentenceWindowRetriever.widen")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · A gotcha when comparing with a library
#
# llama-index's `SentenceWindowNodeParser` builds
# its window as `nodes[max(0, i - window_size) : min(i + window_size, len(nodes))]`
# (llama-index-core, `node_parser/text/sentence_window.py`). A Python slice excludes its end,
# so `window_size=3` is three sentences before the hit and only two after — the cell above
# shows the difference on a real hit. Check what a library's window actually holds before you
# compare its numbers with yours.

# %% [markdown]
# ## Equal k is not a fair race
#
# First the comparison most write-ups make: the top 5 of each method. Recall is judged on
# documents (chapter 4); *answer* is stricter — does a gold answer span lie whole inside the
# text the reader is handed? *tokens* is how much text that is (the encoder's tokens,
# `count_tokens`, the unit chunk sizes are measured in).

# %%
METHODS = {name: {"chunks" if name == "help centre" else "sections": plain[name],
                  "parent (200 → 1,000)": parent[name], "sentence ±3": window[name]}
           for name in CORPORA}


def at_k(name, k=5):
    qs, qrels, answers = SPLITS[name]
    values = {}
    for method, retriever in METHODS[name].items():
        top = search_all(retriever, name, k)
        values[method] = {f"recall@{k}": per_query(qrels, run_from_hits(top), f"recall@{k}"),
                          "answer": {q: answer_found(top[q], answers[q]) for q in answers},
                          "tokens": {q: float(sum(count_tokens(h.text) for h in top[q]))
                                     for q in top}}
    return values


for name in CORPORA:
    print(f"-- {name} test, top 5 of each (answer = a gold answer span inside the 5 texts)")
    print(format_table(paired_rows(at_k(name), next(iter(METHODS[name])))))

# %% [markdown]
# On the help centre, five parents find more answers than five chunks — and hand the reader
# several times the tokens (the `Δtokens` column). Five sentence windows hand over fewer
# tokens than five chunks and find no more answers (on the Python docs, fewer). More text
# finds more; at equal k that is all a comparison shows. The fair race gives every method
# the same **token budget**.
#
# ## Equal budgets
#
# `fit_budget(hits, budget)` hands over hits in rank order, whole while they fit; the first
# one that does not fit is cut to what is left (a reader's context window does exactly that),
# and nothing after it. A cut hit still counts for document recall — generous to big pieces —
# so read the *answer* column too: a parent cut after its first 256 tokens rarely still holds
# the answer. (Each method searches deep enough to fill the largest budget. Sentence windows
# that overlap are merged, so in a deep search a later hit can widen an earlier window: a
# window's size depends on k, one more reason to compare at equal tokens.)

# %%
BUDGETS = (256, 512, 1024, 2048)
DEPTH = {"help centre": 40, "python docs": 60}      # deep enough to fill 2,048 tokens
hits = {name: {method: search_all(r, name, DEPTH[name]) for method, r in METHODS[name].items()}
        for name in CORPORA}


def at_budget(name, budget):
    _, qrels, answers = SPLITS[name]
    values = {}
    for method, res in hits[name].items():
        handed = {q: fit_budget(h, budget) for q, h in res.items()}
        values[method] = {"recall": per_query(qrels, run_from_hits(handed), "recall@1000"),
                          "answer": {q: answer_found(handed[q], answers[q]) for q in answers}}
    return values


budget_values = {(name, b): at_budget(name, b) for name in CORPORA for b in BUDGETS}
for name in CORPORA:
    rows = []
    for b in BUDGETS:
        for r in paired_rows(budget_values[name, b], next(iter(hits[name]))):
            rows.append({**r, "run": f"{b:5d} tokens · {r['run']}"})
    print(f"-- {name} test: what the reader is handed within a budget of encoder tokens")
    print(format_table(rows))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
for ax, name in zip(axes, CORPORA, strict=True):
    for method in hits[name]:
        ys = [np.mean(list(budget_values[name, b][method]["answer"].values())) for b in BUDGETS]
        ax.plot(BUDGETS, ys, "o-", label=method)
    ax.set_xscale("log", base=2), ax.set_xticks(BUDGETS, [str(b) for b in BUDGETS])
    ax.set_title(name), ax.set_xlabel("tokens handed to the reader")
axes[0].set_ylabel("answer span in the context"), axes[0].legend(fontsize=8)
plt.show()

# %% [markdown]
# Read the intervals of the differences, not the means:
#
# * **parent documents do not beat plain chunks at any budget, on either corpus.** At small
#   budgets they lose (a 256-token budget holds only the start of one section); from 1,024
#   tokens on the differences shrink and their intervals reach zero. Their win at equal k
#   was bought with tokens;
# * **sentence windows tie with chunks on the help centre** at every budget, and **lose on the
#   Python docs at small budgets**, where a whole section is already a small, coherent unit
#   and a window cuts it;
# * on both corpora, every method's curve rises with the budget — the budget matters more than
#   the method. That is chapter 3's recall-against-context trade again.
#
# Small-to-big retrieval is built for long documents whose chunks lose their context; our
# short help articles and FAQ sections are not that case, and the measurement says so.
#
# ## Try it: the window
#
# How wide should the window be? `WindowSweep.stats(n)` widens the same sentence hits (the
# sentence searches are cached, so only the widening is recomputed) and reports recall@5,
# the answer-in-context share and the tokens handed over per question:

# %%
from ragbook.widgets import WindowSweep, window_explorer

sweeps = {name: WindowSweep(CachedRetriever(sentence_index[name], path=":memory:"),
                            CORPORA[name][0], *SPLITS[name], k=5) for name in CORPORA}
print(f"{'± sentences':>11s} | {'help centre: recall@5 / answer / tokens':>40s} | "
      f"{'python docs: recall@5 / answer / tokens':>40s}")
for n in (0, 1, 2, 3, 4, 6):
    a, b = sweeps["help centre"].stats(n), sweeps["python docs"].stats(n)
    print(f"{n:11d} | {a['recall@5']:17.3f} / {a['answer_in_context']:.3f} / {a['tokens']:6.0f} | "
          f"{b['recall@5']:17.3f} / {b['answer_in_context']:.3f} / {b['tokens']:6.0f}")
print(f"sentence searches served from the query cache: "
      f"{sweeps['help centre'].retriever.cache.hit_rate:.0%}")

window_explorer(sweeps["help centre"])

# %% [markdown]
# Recall hardly moves with the window — the same sentences are found whatever their
# surroundings. What grows is the share of answers that lie whole in the windows, and the
# tokens, at a steady rate per step: the window is a budget knob, and the equal-budget table
# above is the fair way to set it. The slider shows the help centre.
#
#
# ## Contextual retrieval
#
# Cut from the middle of a page, "It is 14 days for annual contracts." has lost the words that
# say *what* it is about. Contextual retrieval puts them back: a short note that situates the
# chunk in its document is prepended to the chunk **before embedding and before BM25
# indexing**, while the reader is still handed the chunk's own text (the index embeds
# `context + text`; hits return `text`). Two kinds of note:
#
# * **title + section path** — the cheap baseline: the article's title and the Markdown
#   headings above the chunk (`title_context`; `section_path` walks the headings);
# * **an LLM-written note** — the published method: a chat model reads the document and the
#   chunk and writes one or two sentences (`LLMContext`). Here the offline generator,
#   SmolLM2-135M, writes them. Notes are greedy and cached on disk, keyed by the generator's
#   name, a hash of its weights, the prompt and both texts. Generating all help-centre notes
#   takes many minutes on a laptop CPU, so they were made once with
#   `tools/make_contextual_notes.py` and ship in `data/helpcentre/contextual_notes.jsonl`;
#   `load_notes` seeds the cache from that file. With another generator (another profile, an
#   endpoint in `RAGBOOK_LLM_*`) the file's notes do not match, and `contexts_for` generates
#   new ones — expect a long first run.
#
# For the Python docs only path notes are used: an LLM note for each of thousands of sections
# would cost hours of CPU per cold cache. A section there *is* the unit retrieved, so its
# "section path" is the page plus the section's own heading — and the FAQ questions are those
# headings, word for word. So two variants: **page path** (the page and the headings above the
# section) and **page path + heading** (the faithful title + section path, which contains the
# question itself).

# %%
def pydocs_page_path(chunk, doc):
    """The page and the headings above the section, without the section's own heading."""
    return " > ".join(doc.metadata["path"][:-1])


def pydocs_full_path(chunk, doc):
    """title + section path as for the help centre: the page, ..., the section's heading."""
    return " > ".join(doc.metadata["path"])


llm_notes = LLMContext()
taken = llm_notes.load_notes(data_dir() / "helpcentre" / "contextual_notes.jsonl")
notes = {"help centre": {"title + section path": contexts_for(hc_chunks, hc.documents),
                         "LLM note": contexts_for(hc_chunks, hc.documents, llm_notes,
                                                     show_progress=False)},
         "python docs": {"page path": contexts_for(py_sections, py_docs, pydocs_page_path),
                         "page path + heading": contexts_for(py_sections, py_docs, pydocs_full_path)}}
print(f"LLM notes: {taken} loaded from the shipped file, {llm_notes.cache.misses} generated now; "
      f"{len(set(notes['help centre']['LLM note']))} distinct notes for {len(hc_chunks)} chunks")
for c in (200, 57, 101):
    print(f"\nchunk {hc_chunks[c].id}:\n  text: {hc_chunks[c].text[:160]!r}...")
    for kind, ns in notes["help centre"].items():
        print(f"  {kind}: {ns[c]!r}")
same_words = np.mean([q.text == py.doc(q.gold[0]).title for q in py.split("test")])
print(f"\npython docs: questions identical to their gold section's heading: {same_words:.0%}")

# %%
# The cheap note from scratch, and what the index keeps: it embeds note + text, it returns
# the text.
chunk = hc_chunks[200]
doc = hc.doc(chunk.doc_id)
scratch = " > ".join([doc.title] + [h for h in section_path(doc, chunk.start) if h != doc.title])
assert scratch == title_context(chunk, doc) == notes["help centre"]["title + section path"][200]
ctx_index = DenseIndex(encoder).build(hc_chunks, contexts=notes["help centre"]["title + section path"])
record = next(r for r in ctx_index.items_ if r["id"] == chunk.id)
hit = ctx_index.search(index_text(record), k=1)[0]
assert hit.id == chunk.id
print(f"embedded: {index_text(record)[:140]!r}...")
print(f"returned: {hit.text[:140]!r}... (the chunk's own text: {hit.text == chunk.text})")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Measured like the published figures
#
# Anthropic's report on contextual retrieval (Anthropic,
# Sept 2024) counts *top-20 retrieval failures* — questions whose answer is not in the top 20
# — and quotes, relative to plain embeddings: **−35%** with contextual embeddings, **−49%**
# adding contextual BM25, **−67%** adding reranking (their datasets, embedding models, a
# large commercial model writing the notes and a commercial reranker — figures quoted from
# outside, not measured here). The same ladder on our test questions, two ways of counting a
# failure: no gold *document* in the top 20 (chapter 4's document-level runs), and no top-20
# hit containing a gold *answer span* (closer to their chunk-level count). Offline, the
# reranker in this ladder is chapter 6's window re-reading over the hybrid top 50 — chapter
# 6's baseline second stage, not its winner (the MaxSim blend, the offline `cross_encoder`
# role, which this ladder does not run).

# %%
offline = models.active_profile() == "offline"
reranker = CrossEncoderReranker(WindowScorer(encoder)) if offline else CrossEncoderReranker()
spec = models.resolve("cross_encoder")


def ladder(name):
    """Top-20 hit lists of each step: plain and contextual, dense and hybrid, then rerank."""
    qs, _, _ = SPLITS[name]
    _, items = CORPORA[name]
    lists = {"dense, plain": search_all(plain[name], name, 20),
             "hybrid, plain": search_all(
                 HybridRetriever(DenseIndex(encoder), BM25Index()).build(items), name, 20)}
    for kind, ctx in notes[name].items():
        dense = DenseIndex(encoder).build(items, contexts=ctx)
        hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(items, contexts=ctx)
        lists[f"dense, {kind}"] = search_all(dense, name, 20)
        lists[f"hybrid, {kind}"] = search_all(hybrid, name, 20)
        lists[f"hybrid, {kind} + rerank"] = {
            qid: reranker.rerank(text, hybrid.search(text, k=50), k=20) for qid, text in qs}
    return lists


def failures(name, lists):
    """Per question, 1 when the top 20 miss every gold document (docs@20) / every gold answer
    span (spans@20); and the same for answer spans in the top 5 (spans@5)."""
    _, qrels, answers = SPLITS[name]
    return {run: {"docs@20": {q: 1 - v for q, v in per_query(qrels, run_from_hits(res),
                                                             "recall@20").items()},
                  "spans@20": {q: 1 - answer_found(res[q], answers[q]) for q in answers},
                  "spans@5": {q: 1 - answer_found(res[q][:5], answers[q]) for q in answers}}
            for run, res in lists.items()}


def failure_change(base, new, n=2000, seed=0):
    """Relative change of the failure rate, new / base - 1, with a paired bootstrap CI
    (resamples where the baseline has no failure at all are skipped)."""
    qids = sorted(base)
    b, x = np.array([base[q] for q in qids]), np.array([new[q] for q in qids])
    idx = np.random.default_rng(seed).integers(0, len(qids), (n, len(qids)))
    fb, fx = b[idx].mean(1), x[idx].mean(1)
    ratio = fx[fb > 0] / fb[fb > 0] - 1
    return x.mean() / b.mean() - 1, np.percentile(ratio, 2.5), np.percentile(ratio, 97.5)


fails = {name: failures(name, ladder(name)) for name in CORPORA}
uncut = sum(any(a["text"] in c.text for c in hc_chunks for a in spans)
            for spans in SPLITS["help centre"][2].values())
print(f"help centre: {uncut} of {len(SPLITS['help centre'][2])} answer spans lie whole inside "
      f"some chunk (the ceiling of the span count)")
for name in CORPORA:
    rows = []
    for run, f in fails[name].items():
        row = {"run": run}
        for level, v in f.items():
            row[level] = f"{int(sum(v.values()))}/{len(v)}"
            if run != "dense, plain":
                row[f"Δ rel. {level}"] = failure_change(fails[name]["dense, plain"][level], v)
        rows.append(row)
    print(f"\n-- {name} test: questions failed, and the relative change against dense, plain "
          f"(-0.5 = half the failures); reranker "
          f"{'window re-reading (offline baseline)' if offline else spec.name}")
    print(format_table(rows))

# %% [markdown]
# The same steps side by side with the published ones (relative change of top-20 failures,
# counted on answer spans; bootstrap intervals in brackets):

# %%
PUBLISHED = {"contextual embeddings": ("dense", -0.35),
             "+ contextual BM25": ("hybrid", -0.49),
             "+ reranking": ("hybrid+rerank", -0.67)}
columns = [("help centre", "title + section path"), ("help centre", "LLM note"),
           ("python docs", "page path"), ("python docs", "page path + heading")]
print("relative change of top-20 failures [95% bootstrap interval]; Anthropic's figures quoted, not measured")
print(f"{'step':22s} {'Anthropic':>10s} | " + " | ".join(f"{n[:6]}: {k:19s}" for n, k in columns))
for step, (kind, published) in PUBLISHED.items():
    cells = []
    for name, note in columns:
        run = {"dense": f"dense, {note}", "hybrid": f"hybrid, {note}",
               "hybrid+rerank": f"hybrid, {note} + rerank"}[kind]
        m, lo, hi = failure_change(fails[name]["dense, plain"]["spans@20"], fails[name][run]["spans@20"])
        cells.append(f"{m:+5.0%} [{lo:+5.0%}, {hi:+5.0%}]")
    print(f"{step:22s} {published:>+10.0%} | " + " | ".join(f"{c:27s}" for c in cells))

# %% [markdown]
# Reading the two tables:
#
# * **Top-20 failures are too rare here to measure a relative change.** Plain dense retrieval
#   misses at top 20 for only a handful of test questions (the counts above), so each
#   interval runs from "all failures gone" to "more failures than before". Nothing about the
#   published top-20 figures can be confirmed or refuted with our data, in either direction.
# * **At top 5 there are enough failures to count** (`spans@5`). On the help centre, title +
#   section path in *both* indexes, dense and BM25, removes about half of the top-5 failures,
#   with an interval clear of zero. Part of that is hybrid retrieval itself (the `hybrid,
#   plain` row); in the dense index alone the note's gain has an interval that reaches zero.
#   The words a title adds ("refund policy", "Hub") are exactly the keywords a question
#   shares with its page, which is why BM25 profits.
# * **Window re-reading takes part of the gain back**, as it lost to the first stage in
#   chapter 6: the published −67% is a trained cross-encoder's, and window re-reading is not
#   one (nor is it chapter 6's winner, MaxSim).
# * **On the Python docs the honest path note does not help and may hurt**: every section of
#   a page gets the same page name in front, which makes a page's sections look alike to
#   both indexes (and hybrid is weaker than dense there already, chapter 5).
# * **The faithful title + section path scores zero failures on the Python docs — a leak, not
#   a result.** Every FAQ question *is* its section's heading (printed above), so that note
#   writes the question into its own answer's index entry. Questions written from headings
#   make any heading-based technique look perfect; that row measures the labels.
# * **LLM-written notes from the 135M offline model did not help.** In the dense index they
#   left the top-5 failures where plain chunks had them, and the hybrid index with LLM notes
#   failed more questions than the one with title paths (the counts above). The examples
#   printed earlier show why: the small model describes things that are not there, loops, or
#   copies the page's opening lines. The published notes came from a large model; the
#   mechanics here (generate once, cache, ship, load) are the same for any generator, and
#   `RAGBOOK_LLM_BASE_URL` / `RAGBOOK_LLM_MODEL` point `LLMContext` at a stronger one —
#   which writes its own notes, since the shipped ones are stamped with SmolLM2's identity.
#
# What reproduces with the offline models: the direction of the gain from contextual
# embeddings *plus* contextual BM25, with the cheap title-and-path note, on the help centre,
# counted at top 5. Not the size of the top-20 figures (our failures are too few to measure
# it), not the reranking step (our reranker is a stand-in), and not the LLM-note method (our
# generator is too small to write useful notes).

# %% [markdown]
# ## Metadata filters: the superseded-page trap
#
# Three help-centre pages are retired policies (`status: superseded`). A retired policy
# matches a question as well as the current one does — it was written about the same thing —
# so no similarity score keeps it out. On the 20 trap questions (all splits: the filter has no
# setting to tune), with the hybrid retriever of chapter 5:

# %%
hc_hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(hc_chunks)
traps = [q for q in hc.questions if q.category == "superseded_trap"]
current = {"status": "current"}


def first(hits, doc):
    return next((h.rank for h in hits if h.doc_id == doc), None)


above = {"no filter": {}, "status = current": {}}
for q in traps:
    for label, where in (("no filter", None), ("status = current", current)):
        res = hc_hybrid.search(q.standalone, k=20, where=where)
        r_gold, r_trap = first(res, q.gold[0]), first(res, q.extra["trap"])
        above[label][q.id] = float(r_trap is not None and (r_gold is None or r_trap < r_gold))
for label, v in above.items():
    m, lo, hi = bootstrap_ci(list(v.values()))
    print(f"{label:17s}: superseded page above the current one for {int(sum(v.values()))} of "
          f"{len(traps)} trap questions ({m:.2f} [{lo:.2f}, {hi:.2f}])")
trap_delta = paired_bootstrap(above["no filter"], above["status = current"])

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · What the trap does to an answer
#
# What that does to an answer — chapter 7's extractive reader, handed the top 5. Its
# abstention threshold is switched off here to show which sentence it would quote; the line
# under each answer says whether the shipped threshold would have held it back:

# %%
shipped_floor = default_extractive_reader().min_span_score
reader = default_extractive_reader(min_span_score=None)
q = next(q for q in traps if q.id == "ba-q088")
print(q.text)
for label, where in (("no filter", None), ("status = current", current)):
    top5 = hc_hybrid.search(q.standalone, k=5, where=where)
    ans = reader.read(q.standalone, top5)
    print(f"\n{label}: {ans.text!r}\n   from {ans.sources}, score {ans.scores[0]:.3f} "
          f"(shipped min_span_score {shipped_floor}: {'abstain' if ans.scores[0] < shipped_floor else 'answer'})"
          f"\n   top 5: {[h.doc_id for h in top5]}")

# %% [markdown]
# Unfiltered, the reader's best sentence is the retired guarantee, quoted as fact. The
# shipped abstention threshold may hold one such answer back (the line above says whether it
# did here), but a similarity threshold is not a status check: a retired page that matches
# the question well clears it (chapter 9 counts the trap questions that still took their
# answer from a retired page with the threshold on). With the filter the retired page cannot be retrieved at all;
# the current refund policy is in the top 5 (printed), and which sentence the reader picks
# is the reader's problem, not a stale one. Excluding
# superseded pages is a correctness requirement, so chapter 9's `Pipeline` adds
# `status != superseded` to every search unless told otherwise.
#
# A date range is no substitute. Keeping only recently updated pages (since `2025-01-01`) also drops the retired
# pages here — and current pages that simply have not changed:

# %%
recent = {"updated": {"$gte": "2025-01-01"}}
kept = [d for d in hc.documents if matches(d.metadata, recent)]
lost = [q for q in hc.split("test") if q.gold and not any(matches(hc.doc(g).metadata, recent)
                                                          for g in q.gold)]
print(f"updated >= 2025-01-01 keeps {len(kept)} of {len(hc.documents)} pages "
      f"(superseded kept: {sum(d.metadata['status'] == 'superseded' for d in kept)}); "
      f"{len(lost)} answerable test questions lose every gold page")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ### Deep dive · Inside the search, or after it?
#
# Chapter 3 showed a post-filter (fetch `k × 4`, then drop what fails) returning nothing for
# a narrow filter. Here are the counts: every help-centre test question, filters from
# permissive to narrow, k = 5:

# %%
FILTERS = {"status = current": current, "department = billing": {"department": "billing"},
           "plan = enterprise": {"plan": "enterprise"}, "access = internal": {"access": "internal"}}
texts = [q.standalone for q in hc.split("test")]
print(f"{'filter':22s} {'share of chunks':>15s} | {'post-filter: <5 hits / none':>28s} | "
      f"{'inside: <5 / none':>17s}   ({len(texts)} test questions, k=5, fetch 20)")
for label, where in FILTERS.items():
    share = np.mean([matches(c.metadata, where) for c in hc_chunks])
    post = [len(plain["help centre"].search_postfilter(t, k=5, where=where, overfetch=4))
            for t in texts]
    inside = [len(plain["help centre"].search(t, k=5, where=where)) for t in texts]
    print(f"{label:22s} {share:15.1%} | {sum(n < 5 for n in post):17d} / {sum(n == 0 for n in post):4d}"
          f"     | {sum(n < 5 for n in inside):8d} / {sum(n == 0 for n in inside):4d}")

# %% [markdown]
# And on all 10,370 Python-docs sections, each test question filtered to its own FAQ page —
# the kind of filter a product or version selector produces:

# %%
py_full = DenseIndex(encoder).build(py.documents)
post_found = inside_found = post_empty = 0
shares = []
for q in py.split("test"):
    where = {"file": py.doc(q.gold[0]).metadata["file"]}
    shares.append(np.mean([d.metadata["file"] == where["file"] for d in py.documents]))
    post = py_full.search_postfilter(q.text, k=5, where=where, overfetch=4)
    inside = py_full.search(q.text, k=5, where=where)
    post_empty += not post
    post_found += any(h.doc_id in q.gold for h in post)
    inside_found += any(h.doc_id in q.gold for h in inside)
n = len(py.split("test"))
print(f"python docs, all {len(py.documents):,} sections, filter = the question's FAQ page "
      f"(keeps {min(shares):.2%}-{max(shares):.2%} of the index), k=5:")
print(f"   post-filter (fetch 20): nothing returned for {post_empty} of {n}; gold in top 5 for {post_found}")
print(f"   inside the search:      gold in top 5 for {inside_found} of {n}")

# %% [markdown]
# A filter that keeps nearly everything (`status = current`) works either way. As the share
# kept falls, the post-filter returns fewer than k for most questions and nothing for many;
# on the Python docs it returned nothing for some questions and missed the gold section for
# more. Filtering inside the search (`DenseIndex` hands FAISS the allowed ids) always
# returns k when k items match. Filter inside the search; keep over-fetching for score
# thresholds and de-duplication.

# %% [markdown]
# ### Filters that only narrow: who may see what
#
# The help centre marks every page `access: public`, `customer` or `internal` (runbooks for
# staff). Which of those a user may read is not the question's business: the *application*
# knows who is asking and passes a `scope`, which every retriever's `search` and `retrieve`,
# `Pipeline.ask` and `ragbook ask --scope access=public` take. The scope is AND-ed inside the
# search with whatever filter the question brings (`{"$and": [scope, where]}`, written by
# `ragbook.filters.scoped`), and the filter language has no `$or`, so a `where` can only narrow
# it. A page without the scope's key is outside it. Here a hostile filter tries to widen a
# public user's scope to a staff runbook:

# %%
public = {"access": "public"}
runbook_q = "how many days can a billing agent extend the grace period of an overdue invoice?"
for label, where, scope in (("no scope, where access = internal", {"access": "internal"}, None),
                            ("public scope, same where", {"access": "internal"}, public),
                            ("public scope, where access != public",
                             {"access": {"$ne": "public"}}, public),
                            ("public scope, no where", None, public)):
    hits = hc_hybrid.search(runbook_q, k=5, where=where, scope=scope)
    print(f"{label:36s}: {len(hits)} hits, access {sorted({h.metadata['access'] for h in hits})}")
print("what the search ran:", scoped({"access": {"$ne": "public"}}, public))
try:
    scoped({"$or": [{"access": "internal"}]}, public)
except ValueError as err:
    print("a where with $or:", str(err).split(":")[0])
hostile = [{"access": "internal"}, {"access": {"$ne": "public"}},
           {"access": {"$nin": ["public"]}}, {"access": ["internal", "public"]}]
leaked = sum(h.metadata["access"] != "public" for t in texts for w in hostile
             for h in hc_hybrid.search(t, k=5, where=w, scope=public))
print(f"{len(texts)} test questions x {len(hostile)} hostile filters, public scope: "
      f"{leaked} non-public hits")

# %% [markdown]
# Without a scope the caller's filter picks the runbooks; with one, the same filter finds
# nothing, a filter that excludes public pages finds nothing, and the scope alone finds public
# pages only (the lines above). The scope is also part of every cache key (`CachedRetriever`,
# `CachedPipeline`) and of the trace (each retrieval stage records it), so a staff member's
# cached answer is never served to a customer.

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · Caching
#
# Three caches, each with a hit counter, each namespaced by what its values depend on, so a
# changed corpus, setting or model misses instead of serving stale results. Nobody lists
# those dependencies by hand: every retriever, reranker, reader and pipeline declares its
# settings (read from its `__init__`) and a `fingerprint` over them, its corpus and its models,
# and the caches key on that:
#
# | cache | key | namespace | expiry |
# |---|---|---|---|
# | embeddings (`Encoder`, since chapter 3) | hash of the exact text embedded | model name + weights hash + input length | never (deterministic) |
# | query results (`CachedRetriever`) | query, k, filter and scope | the retriever's `fingerprint`: corpus (ids, texts, metadata), settings, models | a day by default (`ttl`) |
# | answers (`CachedPipeline`) | *condensed* question, filter, scope | the pipeline's `fingerprint`: every component's | short (`ttl=300` s by default) |
#
# The embedding cache has been at work all chapter:

# %%
print(f"embedding cache, this notebook so far: {encoder.cache_hits:,} vectors read back, "
      f"{encoder.cache_misses:,} computed")
short = Encoder(max_length=128)
print(f"another input length is another model identity (and another cache file):\n"
      f"  {encoder.fingerprint}\n  {short.fingerprint}")

# %% [markdown]
# (On a cold cache the second number is large; on a re-run it is near zero.) Support questions
# repeat: a few are asked all the time. A simulated query log — test questions drawn with
# Zipf-like frequencies (the i-th most common asked about 1/i as often as the first):

# %%
rng = np.random.default_rng(0)
pool = [q.standalone for q in hc.split("test")]
weights = 1 / np.arange(1, len(pool) + 1)
log = [pool[i] for i in rng.choice(len(pool), size=400, p=weights / weights.sum())]
print(f"a query log of {len(log)} questions, {len(set(log))} distinct")

index = DenseIndex(encoder).build(hc_chunks)
cached = CachedRetriever(index, path=":memory:")
t = time.perf_counter()
for text in log:
    cached.search(text, k=5)
print(f"query cache: {cached.cache.hits} hits, {cached.cache.misses} misses "
      f"(hit rate {cached.cache.hit_rate:.0%}), {1e3 * (time.perf_counter() - t) / len(log):.2f} ms per query")
print(f"namespace: {index.fingerprint}  settings: {index.settings(deep=False)}")
index.add(chunk_documents([hc.documents[0]], size=64, overlap=0))    # the corpus changes
before = cached.cache.misses
cached.search(log[0], k=5)
print(f"namespace: {index.fingerprint}")
print(f"after adding chunks, a repeated question: misses {before} -> {cached.cache.misses}")
floored = CachedRetriever(index.with_settings(min_cosine=0.5), path=":memory:")
print(f"the same index with a cosine floor is another namespace: {floored.cache.namespace}")

# %% [markdown]
# The answer cache keys on the *condensed* question (chapter 9), so the same words in two
# conversations are two entries, and its entries expire: an answer is only as fresh as the
# pages it quotes.

# %%
pipeline = Pipeline(HybridRetriever(DenseIndex(encoder), BM25Index()).build(hc_chunks))
answers = CachedPipeline(pipeline, ttl=300, path=":memory:")
seconds = {"hit": [], "miss": []}
for text in log[:100]:
    before, t = answers.cache.misses, time.perf_counter()
    answers.ask(text)
    seconds["miss" if answers.cache.misses > before else "hit"].append(time.perf_counter() - t)
print(f"answer cache (ttl 300 s): {answers.cache.hits} hits, {answers.cache.misses} misses; "
      f"median {1e3 * np.median(seconds['miss']):.1f} ms to answer, "
      f"{1e3 * np.median(seconds['hit']):.2f} ms to read back")
turns = {"refunds": [{"role": "user", "content": "can I get a refund on pro?"}],
         "export": [{"role": "user", "content": "can I export tickets to csv on pro?"}]}
for topic, history in turns.items():
    r = answers.ask("and on the free plan?", history=history)
    print(f"'and on the free plan?' after {topic}: key {r.condensed!r}")
print(f"misses now {answers.cache.misses}: the same words, two keys")

short_lived = CachedPipeline(pipeline, ttl=0.5, path=":memory:")
short_lived.ask(log[0]), short_lived.ask(log[0])
time.sleep(0.6)
short_lived.ask(log[0])
print(f"ttl 0.5 s, asked at 0 s, 0 s and 0.6 s: hits {short_lived.cache.hits}, "
      f"misses {short_lived.cache.misses}")
pipeline.retriever = HybridRetriever(DenseIndex(encoder), BM25Index()).build(hc_chunks[:-1])
before = answers.cache.misses
answers.ask(log[0])
print(f"corpus changed, a repeated question: misses {before} -> {answers.cache.misses}")

# %% [markdown]
# The offline pipeline answers in milliseconds because its vectors are cached; with a
# generative reader (chapter 8) each miss costs a model call, and that is what the answer
# cache saves.
# The tests (`tests/test_advanced.py`, `tests/test_embeddings.py`) check for each cache that
# a changed corpus or model misses.

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · Your labels decide: choosing settings without fooling yourself
#
# Every technique in this chapter has settings, and so has the hybrid of chapter 5 (the RRF
# constant, each channel's depth and weight). The tempting way to set them: try many, keep the
# best on your labelled questions, quote its score. That score is the maximum of many noisy
# numbers, so it is biased upwards — the more settings tried and the fewer questions, the
# more. The trap on the help centre: 27 fusion settings scored on the dev questions, the best
# kept — then the same choice scored on the test questions it never saw.

# %%
from ragbook.evaluate import compare_runs, held_out_choice
from ragbook.fusion import reciprocal_rank_fusion

hc_hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(hc_chunks)
fusion_settings = [(rrf_k, depth, w) for rrf_k in (1, 10, 60) for depth in (10, 25, 100)
                   for w in ((1.0, 1.0), (2.0, 1.0), (1.0, 2.0))]
DEFAULT_FUSION = (60, 100, (1.0, 1.0))      # the hybrid's own settings


def fusion_runs(split):
    """{setting: run} of every fusion setting on a help-centre split's answerable questions."""
    channels = {q.id: hc_hybrid.channels(q.standalone) for q in hc.split(split) if q.gold}
    return {(k, d, w): run_from_hits(
                {q: reciprocal_rank_fusion([dense[:d], bm25[:d]], k=10, rrf_k=k, weights=w)
                 for q, (dense, bm25) in channels.items()})
            for k, d, w in fusion_settings}


runs = {split: fusion_runs(split) for split in ("dev", "test")}
fusion = {split: {s: per_query(hc.qrels(split), run, "mrr@10") for s, run in rs.items()}
          for split, rs in runs.items()}
mean = {split: {s: np.mean(list(v.values())) for s, v in scores.items()}
        for split, scores in fusion.items()}
best_on_dev = max(fusion_settings, key=mean["dev"].get)
print(f"{len(fusion_settings)} settings; best on dev: rrf_k {best_on_dev[0]}, depth "
      f"{best_on_dev[1]}, weights {best_on_dev[2]}")
for split in ("dev", "test"):
    gain = mean[split][best_on_dev] - mean[split][DEFAULT_FUSION]
    print(f"  {split:4s} MRR@10: best-on-dev {mean[split][best_on_dev]:.3f}, default "
          f"{mean[split][DEFAULT_FUSION]:.3f}, gain {gain:+.3f}")

# %% [markdown]
# Less than half of the gain seen on dev is there on test: the rest was the luck of those
# questions, which the choice was made to fit. Two remedies, both in `ragbook`. First, judge
# the *choice* on questions it did not see: `held_out_choice` splits the dev questions into five
# folds, chooses on four and scores on the fifth, five times (exercise 8 builds it). Second,
# when a table compares many settings with one baseline, widen every interval for the number of
# comparisons — `compare_runs` does this by itself (Bonferroni intervals, Holm-adjusted p) and
# says so under the table. Here are both, and the three best dev settings on test:

# %%
dev_ids = sorted(next(iter(fusion["dev"].values())))
folds = [dev_ids[i::5] for i in range(5)]
print(f"{len(dev_ids)} dev questions, best in hindsight {mean['dev'][best_on_dev]:.3f}; held-out estimate of choosing "
      f"{held_out_choice(fusion['dev'], folds):.3f}; the default {mean['dev'][DEFAULT_FUSION]:.3f}; "
      f"the choice on test {mean['test'][best_on_dev]:.3f}")
top3 = sorted(fusion_settings, key=mean["dev"].get, reverse=True)[:3]
print(format_table(compare_runs(hc.qrels("test"), {
    "default": runs["test"][DEFAULT_FUSION],
    **{f"dev #{n + 1}: rrf_k {k}, depth {d}, w {w}": runs["test"][(k, d, w)]
       for n, (k, d, w) in enumerate(top3)}}, ["mrr@10"], baseline="default")))

# %% [markdown]
# The held-out estimate is the number to believe: choosing among 27 settings on 63 questions is
# worth about nothing — it lands below the default — and the test split agrees: the setting
# that won on dev is within noise of the default there. (One of the three, `rrf_k` 10, does
# clear the corrected interval on test; a second look on fresh questions is how you would
# find out whether that holds, not a reason to adopt it now.)
# %% [markdown]
# ### The tuner: both remedies, over a declared space
#
# `ragbook.tune` does this for the choices that matter most — the channel (dense, BM25, the
# hybrid with one change each of depth, RRF constant and weight) and the second stage (none,
# chapter 6's MaxSim blend, the learned reranker fitted on the training folds only) — with
# your labelled questions. Every question is held out once, so each setting's numbers below are
# held out; the intervals against dense are corrected for the number of settings; the rule that
# chooses is itself judged by nested cross-validation. It adopts a setting only when its gain
# over dense passes Holm's test with the family-wise error held at 5% — the default hybrid and
# the second stages are tested first, the first-stage variants only if all of those pass (an
# order fixed before any label is read) — and otherwise keeps the simpler one and says why. On
# the help-centre dev questions:

# %%
from ragbook import tune

report = tune(hc_hybrid, [(q.id, q.standalone, q.gold) for q in hc.split("dev") if q.gold],
              folds=5, seed=0, progress=False)
print(report.reason)
print(format_table(report.vs_dense))
report.plot()
plt.title("help centre dev: held-out gain over dense, every setting")
plt.tight_layout()
plt.show()

# %% [markdown]
# The winner is adopted because its gain survives the correction, not because it came first;
# the nested row says what the whole procedure — choosing included — is worth on questions it
# did not choose with. `bench/tune.py` runs the same on each corpus's training labels and then
# measures the choice on the test split (recorded in `docs/benchmarks.md`): there the help
# centre's choice beat dense by an amount inside the nested estimate's interval, and on the Python
# docs the tuner adopted a learned second stage whose gain on its training questions only just
# passed the test and then held on the test split. Conservative on purpose: a tuner that adopts
# only what it can support will sometimes leave a real gain on the table (with fewer labels,
# or had the test not put the second stages first), and never adopts a loss it could have seen. The settings go to a file that `Pipeline` and
# `ragbook ask --settings` load, refused against any other index.

# %% [markdown]
# ## What you built / what you measured
#
# Parent-document and sentence-window retrievers, contextual notes in both indexes, a status
# filter inside the search, and three caches. What each technique bought against plain
# retrieval on both test splits (paired differences with their bootstrap intervals; the Python
# docs on this chapter's subset):

# %%
def cell(v, pct=False):
    return (f"{v[0]:+.0%} [{v[1]:+.0%}, {v[2]:+.0%}]" if pct
            else f"{v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]")


summary = []
for label, method in (("parent documents: Δ answer in context @1,024 tokens", "parent (200 → 1,000)"),
                      ("sentence window ±3: Δ answer in context @1,024 tokens", "sentence ±3")):
    row = [label]
    for name in CORPORA:
        vals = budget_values[name, 1024]
        row.append(cell(paired_bootstrap(vals[next(iter(vals))]["answer"], vals[method]["answer"])))
    summary.append(row)
for label, kind in (("contextual embeddings", "dense"), ("+ contextual BM25", "hybrid"),
                    ("+ rerank", "hybrid+rerank"), ("LLM-written notes instead (dense)", "llm")):
    for level in ("spans@20", "spans@5"):
        row = [f"{label}: failures, {level}"]
        for name, note in (("help centre", "title + section path"), ("python docs", "page path")):
            run = {"dense": f"dense, {note}", "hybrid": f"hybrid, {note}", "llm": "dense, LLM note",
                   "hybrid+rerank": f"hybrid, {note} + rerank"}[kind]
            row.append(cell(failure_change(fails[name]["dense, plain"][level],
                                           fails[name][run][level]), pct=True)
                       if run in fails[name] else "not measured (cost)")
        summary.append(row)
summary.append(["status filter: Δ superseded page above current", cell(trap_delta),
                "no status metadata"])
summary.append(["query cache: hit rate on the simulated log", f"{cached.cache.hit_rate:.0%}",
                "not measured"])
print(f"profile {models.active_profile()}; paired differences [95% bootstrap interval]")
print(f"{'technique':55s} {'help centre':>27s}   {'python docs (subset)':>27s}")
for label, a, b in summary:
    print(f"{label:55s} {a:>27s}   {b:>27s}")
print(f"\n(notes: help centre title + section path; python docs page path without the heading; "
      f"notebook ran in {time.perf_counter() - t_start:.0f} s)")

# %% [markdown]
# What to take from this chapter:
#
# * **Parent documents and sentence windows** did not beat plain chunks once every method
#   could hand the reader the same number of tokens; at small budgets they lost. They are
#   built for long documents whose chunks lose their context — measure them on yours at equal
#   tokens, never at equal k.
# * **Contextual notes** indexed in both dense and BM25 cut the help centre's top-5 failures;
#   top-20 failures are too rare here to measure the published effect; the honest path note
#   did nothing for the Python docs, and the heading note "worked" only by leaking the
#   question. Notes written by the 135M offline generator added nothing.
# * **A status filter** is a correctness fix, not a ranking tweak: it took the superseded
#   page out of every trap question's results. Filter inside the search.
# * **Caches** cost nothing in quality and are namespaced so that a changed corpus or model
#   can never serve stale results; the answer cache also expires.
#
# The order that pays first: filters and caches (correctness and cost), then whichever
# retrieval technique your own labelled questions say helps.
