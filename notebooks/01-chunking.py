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
# # 01 · Chunking
#
# A retriever compares a question with *pieces* of documents, not whole documents. Why cut
# at all, how many pieces does a cut make, where should the cuts fall, and what does overlap
# buy? Every number below is computed on the Brightdesk help centre (`data/helpcentre`) with
# the offline encoder, all-MiniLM-L6-v2.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=1)

# %%
import re

import matplotlib.pyplot as plt
import numpy as np

from ragbook import Encoder, models
from ragbook.chunking import (
    RecursiveSplitter,
    chunk_documents,
    count_tokens,
    rough_window_count,
    sliding_windows,
    window_count,
)
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
encoder = Encoder()
print(f"profile: {models.active_profile()}, encoder: {encoder.model_id}, "
      f"reads at most {encoder.max_length} tokens per text")

# %% [markdown]
# ## Topic dilution: one vector for a long page means nothing in particular
#
# `hardware-hub-orders-billing-returns` is one long page about ordering, paying for,
# shipping, returning and warranting the Hub. Compare a specific question with one vector
# for the whole page, and with one vector per section.

# %%
page = hc.doc("hardware-hub-orders-billing-returns")
sections = re.split(r"\n(?=## )", page.text)
print(f"{count_tokens(page.text):,} tokens in {len(sections)} sections:",
      [s.splitlines()[0].lstrip("# ") for s in sections[1:]])

long_page_qs = [q for q in hc.questions if q.gold == ("hardware-hub-orders-billing-returns",)
                and q.category == "paraphrase"]
page_vec = encoder.encode_passages([page.text])[0]
section_vecs = encoder.encode_passages(sections)
rows = []
for q in long_page_qs:
    qv = encoder.encode_queries([q.text])[0]
    home = next(i for i, s in enumerate(sections) if q.answers[0]["text"] in s)
    rows.append((page_vec @ qv, section_vecs[home] @ qv))
    print(f"whole page {rows[-1][0]:.3f}   its section {rows[-1][1]:.3f}   {q.text[:60]}")
whole, section = np.array(rows).T
print(f"mean: whole page {whole.mean():.3f}, right section {section.mean():.3f}; "
      f"the section wins for {np.sum(section > whole)} of {len(rows)} questions")

# %% [markdown]
# The section that holds the answer is closer to the question than the whole page. Two
# things dilute the page vector: it averages every topic on the page, and — with this
# encoder — it is built from the first 256 tokens only, because the model truncates longer
# inputs (the page is several times longer: its token count is printed above). Splitting
# fixes both: each piece is about one thing and fits the model's window.
#
# ## Overlap arithmetic
#
# Cut a document of `total` tokens into windows of `size` tokens that share `overlap`
# tokens with the previous window. Each new window advances by the **stride**
# `size − overlap`. The first window covers `size` tokens; the remaining `total − size`
# need `ceil((total − size) / stride)` more windows. The back-of-envelope version divides
# the whole total by the stride, which overcounts: it prices the first window at one
# stride instead of `size`, so it is high by about `overlap / stride` windows (the floor or
# the ceiling of it). Below half overlap that is at most one window; at high overlap it is
# many. From scratch:

# %%
import math


def exact_count(total, size, overlap):
    return 1 if total <= size else math.ceil((total - size) / (size - overlap)) + 1


def rough_count(total, size, overlap):
    return math.ceil(total / (size - overlap))


total, size = 100_000, 500
base = exact_count(total, size, 0)
print(f"{'overlap':>8s} {'stride':>7s} {'exact':>6s} {'rough':>6s} {'premium':>8s}")
for overlap in (0, 50, 100, 250):
    n = exact_count(total, size, overlap)
    print(f"{overlap:8d} {size - overlap:7d} {n:6d} {rough_count(total, size, overlap):6d} "
          f"{n / base - 1:+8.0%}")

# %% [markdown]
# 100 tokens of overlap (20%) cost 25% more vectors to store, embed and search; 250 (50%)
# nearly doubles the index — 399 windows exactly, 400 by the rough formula. The package's
# functions agree, and so does a real sliding window: below, 100,000 actual tokens (the
# tokenised ticket corpus) are cut by `sliding_windows` and the windows counted.

# %%
from ragbook.datasets import generate_tickets

n_tokens = 0
for t in generate_tickets(200, seed=0):
    n_tokens += count_tokens(t.text)
    if n_tokens >= 100_000:
        break
print(f"tokenised tickets: {n_tokens:,} tokens; cutting the first 100,000")
n_tokens = 100_000
for overlap in (0, 100, 250):
    windows = sliding_windows(n_tokens, 500, overlap)
    assert len(windows) == window_count(n_tokens, 500, overlap) == exact_count(n_tokens, 500, overlap)
    assert rough_window_count(n_tokens, 500, overlap) == rough_count(n_tokens, 500, overlap)
    assert windows[-1][1] == n_tokens
    print(f"overlap {overlap:3d}: {len(windows)} windows, last one {windows[-1]}")

# %%
overlaps = np.arange(0, 451, 25)
fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
a1.plot(overlaps / 500, [window_count(100_000, 500, int(o)) for o in overlaps], "o-")
a1.set_xlabel("overlap (fraction of a 500-token chunk)"), a1.set_ylabel("chunks for 100k tokens")
a1.set_title("index size vs overlap"), a1.grid(alpha=0.3)
chunk_sizes = np.array([64, 128, 256, 384, 512, 768, 1024])
for frac in (0.0, 0.2, 0.5):
    a2.plot(chunk_sizes, [window_count(100_000, int(s), round(s * frac)) for s in chunk_sizes], "o-",
            label=f"{frac:.0%} overlap")
a2.set_xscale("log"), a2.set_yscale("log"), a2.set_xlabel("chunk size (tokens)")
a2.set_ylabel("chunks"), a2.set_title("chunk count vs size"), a2.legend(), a2.grid(alpha=0.3)
plt.tight_layout()
plt.show()

# %% [markdown]
# The left curve bends upward: each extra step of overlap costs more than the last, since
# the stride shrinks towards zero. That is why small overlaps are the usual choice.
#
# ## What overlap is for: an answer cut at a boundary
#
# In `billing-failed-payments` the sentence "How long you have before suspension depends
# on your plan:" ends one paragraph and the numbers open the next. A splitter that likes
# paragraph breaks may cut exactly there.

# %%
doc = hc.doc("billing-failed-payments")
lead = "How long you have before suspension depends on your plan:"
answer = "Enterprise workspaces get 21 days."
span = (doc.text.index(lead), doc.text.index(answer) + len(answer))


def whole_in_some_chunk(chunks):
    return any(c.start <= span[0] and c.end >= span[1] for c in chunks)


kept = {}   # overlap -> is the lead-in and its answer whole in some chunk?
for overlap in (0, 16):
    chunks = RecursiveSplitter(size=64, overlap=overlap).split(doc)
    near = [c for c in chunks if c.end > span[0] and c.start < span[1]]
    kept[overlap] = whole_in_some_chunk(chunks)
    print(f"size 64, overlap {overlap}: {len(chunks)} chunks; question and answer together "
          f"in one chunk: {kept[overlap]}")
    for c in near:
        print(f"   [{c.start}:{c.end}] ...{c.text[-70:]!r}" if c.start < span[0] else
              f"   [{c.start}:{c.end}] {c.text[:70]!r}...")

# %%
# the same cut drawn on the text: one bar per chunk (size 64, overlap 16); where two bars
# run under the same characters, those tokens are in both chunks
from ragbook.figures import chunk_boundaries

chunks = RecursiveSplitter(size=64, overlap=16).split(doc)
near = [c for c in chunks if c.end > span[0] and c.start < span[1]]
lo, hi = near[0].start, near[-1].end
_ = chunk_boundaries(doc.text[lo:hi], [(c.start - lo, c.end - lo) for c in near])

# %% [markdown]
# Without overlap, one chunk ends with the lead-in and the next starts with "Starter and
# Pro workspaces get 7 days…" — neither says what the days are *for*. With 16 tokens of
# overlap a chunk carries both.
#
# How often does a cut destroy an answer? Take every labelled answer span in the help
# centre and count the spans that no chunk contains whole — first for plain fixed-size
# token windows (`sliding_window_chunks`, which cut wherever the count lands), then for
# the structure-aware splitter introduced below.
#
# A fractional overlap is rounded to the nearest whole token (`round(size * fraction)`), here
# and in `ChunkingExperiment` at the end, so both tables count the same chunks.

# %%
from ragbook.chunking import sliding_window_chunks

spans = sorted({(a["doc"], hc.doc(a["doc"]).text.index(a["text"]),
                 hc.doc(a["doc"]).text.index(a["text"]) + len(a["text"]))
                for q in hc.questions for a in q.answers})
print(f"{len(spans)} distinct answer spans")


def cut_spans(chunks):
    by_doc = {}
    for c in chunks:
        by_doc.setdefault(c.doc_id, []).append(c)
    return sum(not any(c.start <= s and c.end >= e for c in by_doc[d]) for d, s, e in spans)


cuts = {}   # (size, fraction) -> (windows, cut, recursive chunks, cut)
print(f"{'size':>4s} {'overlap':>12s} | {'windows':>7s} {'cut':>4s} | {'recursive':>9s} {'cut':>4s}")
for size in (64, 128):
    for frac in (0.0, 0.1, 0.2, 0.5):
        ov = round(size * frac)          # nearest whole token: the rule ChunkingExperiment uses
        windows = [c for d in hc.documents for c in sliding_window_chunks(d, size, ov)]
        recursive = chunk_documents(hc.documents, size=size, overlap=ov)
        cuts[size, frac] = (len(windows), cut_spans(windows), len(recursive), cut_spans(recursive))
        print(f"{size:4d} {frac:4.0%} = {ov:2d} tok | {len(windows):7d} {cut_spans(windows):4d} | "
              f"{len(recursive):9d} {cut_spans(recursive):4d}")

# %% [markdown]
# With fixed windows, the first step of overlap (10–20%) rescues most of the cut answers,
# and going on to 50% buys the last few at the price of a much larger index — overlap is
# insurance, priced in index size. With the structure-aware splitter no short answer span
# is cut at all on this corpus, even without overlap: it cuts between sentences, and our
# answers live inside sentences. What it *can* still cut is the connection between
# sentences, as the failed-payments example shows — that is what its overlap is for.

# %% [markdown]
# ## A splitter that respects structure
#
# Fixed windows cut wherever the count lands — mid-sentence, mid-word. A *recursive*
# splitter prefers natural boundaries: it ends a chunk before a heading or at a paragraph
# break if one falls in the second half of the window, else at a sentence end, else at a
# word boundary — never inside a word. The next chunk starts at a word boundary as far back
# as the overlap allows (but past the middle of the previous chunk, so every chunk brings
# new text). From scratch, measuring in characters:

# %%
HEADING = re.compile(r"\n[ \t]*\n\s*(?=#)")
PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
SENTENCE = re.compile(r"(?<=[.!?:;])(?<!\d[.])\s+|\n\s*")
WHITESPACE = re.compile(r"\s+")


def split_from_scratch(text, size, overlap):
    last = len(text.rstrip())
    word_ends = sorted({m.start() for m in WHITESPACE.finditer(text)} | {last})
    word_starts = [len(text) - len(text.lstrip())] + [m.end() for m in WHITESPACE.finditer(text)
                                                      if m.end() < len(text)]
    levels = [{m.start() for m in rx.finditer(text)} for rx in (HEADING, PARAGRAPH, SENTENCE)]
    chunks, start = [], word_starts[0]
    while start < last:
        fitting = [e for e in word_ends if start < e <= start + size]  # chars: length = e - start
        end = max(fitting)
        if end < last:
            half = start + (end - start) // 2
            for cuts in levels:                      # coarsest structure first
                good = [e for e in fitting if e in cuts and e > half]
                if good:
                    end = max(good)
                    break
        chunks.append((start, end))
        if end >= last:
            break
        tail = [s for s in word_starts if start + (end - start) // 2 < s < end and end - s <= overlap]
        start = min(tail) if tail else min(s for s in word_starts if s >= end)
    return chunks


page = hc.doc("billing-refund-policy")
ours = split_from_scratch(page.text, 300, 60)
package = RecursiveSplitter(size=300, overlap=60, length="chars").split(page)
assert ours == [(c.start, c.end) for c in package]
print(f"from scratch and ragbook agree: {len(ours)} identical chunks")
for c in package[:3]:
    print(f"[{c.start}:{c.end}] {c.text[:90]!r}...")

# %% [markdown]
# The package does the same with binary searches instead of list scans (so a long document
# is not quadratic), measures in the encoder's tokens by default, and returns `Chunk`
# records that carry the document id, the offsets and the document's metadata — so a filter
# on department or status (chapter 10) still works after splitting:

# %%
chunk = RecursiveSplitter(size=128, overlap=16).split(page)[1]
print(chunk.id, chunk.doc_id, (chunk.start, chunk.end), dict(chunk.metadata))
assert chunk.text == page.text[chunk.start:chunk.end]

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · Measure in tokens, not characters
#
# A character budget is easy to reason about, but the model reads tokens, and the ratio
# varies: code, error codes and numbers take more tokens per character than prose. Split
# the whole help centre by 1,000 characters and count tokens per chunk:

# %%
by_chars = chunk_documents(hc.documents, size=1000, overlap=0, length="chars")
token_counts = np.array([count_tokens(c.text) for c in by_chars])
over = int(np.sum(token_counts > encoder.max_length))
print(f"{len(by_chars)} chunks of <= 1000 characters: {token_counts.min()}-{token_counts.max()} tokens "
      f"(median {np.median(token_counts):.0f}); {over} exceed the encoder's {encoder.max_length}-token "
      f"window and would be silently truncated")
by_tokens = chunk_documents(hc.documents, size=256, overlap=0)
print(f"{len(by_tokens)} chunks of <= 256 tokens: max {max(count_tokens(c.text) for c in by_tokens)} tokens")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Deep dive · Compared with LangChain's `RecursiveCharacterTextSplitter`
#
# The most used splitter in practice. Same documents, same sizes in characters: are its
# chunks true substrings at the reported offsets, within size, with the overlap honoured,
# and where do they end?

# %%
from langchain_text_splitters import RecursiveCharacterTextSplitter


def describe(name, results):
    n = sum(len(r) for _, r in results)
    substr = sum(text[s:e] == t for text, r in results for s, e, t in r)
    max_len = max(len(t) for _, r in results for _, _, t in r)
    gaps = [max(0, a[1] - b[0]) for _, r in results for a, b in zip(r, r[1:])]
    sentence_end = sum(t.rstrip()[-1] in ".!?:" for _, r in results for _, _, t in r)
    midword = sum((s > 0 and not text[s - 1].isspace()) or (e < len(text) and not text[e].isspace())
                  for text, r in results for s, e, t in r)
    print(f"{name:10s} {n:6d} {substr / n:9.0%} {max_len:7d} {max(gaps):7d} {np.mean(gaps):8.1f} "
          f"{sentence_end / n:10.0%} {midword:8d}")


print(f"{'splitter':10s} {'chunks':>6s} {'substring':>9s} {'max len':>7s} {'max ovl':>7s} "
      f"{'mean ovl':>8s} {'ends at .':>10s} {'mid-word':>8s}")
for size, overlap in ((500, 100), (300, 50)):
    lc = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, add_start_index=True)
    theirs = [(d.text, [(x.metadata["start_index"], x.metadata["start_index"] + len(x.page_content),
                         x.page_content) for x in lc.create_documents([d.text])]) for d in hc.documents]
    mine = [(d.text, [(c.start, c.end, c.text) for c in
                      RecursiveSplitter(size=size, overlap=overlap, length="chars").split(d)])
            for d in hc.documents]
    print(f"-- size {size}, overlap {overlap}")
    describe("langchain", theirs)
    describe("ragbook", mine)

# %% [markdown]
# Both honour the size, the overlap ceiling and word boundaries on this corpus, and
# LangChain's `start_index` offsets are right here (it finds them by searching the text, so
# a chunk repeated verbatim in a document could be mislocated; ours are carried, never
# searched). The difference is the trade-off in the table: LangChain packs whole pieces as
# full as it can and overlaps only where whole pieces fit the overlap budget, so its mean
# overlap is far below the amount asked for; ragbook fills the overlap budget word by word
# and ends more chunks at a sentence end, at the price of more chunks. Count the chunks
# before you choose.

# %% [markdown]
# ## Try it: size, overlap and recall
#
# Does any of this move retrieval quality? `ChunkingExperiment` chunks the help centre at
# each grid point, embeds every chunk once (cached on disk), and scores the help centre's
# *dev* questions: recall@5 counts a question as found when one of the top 5 chunks comes
# from its gold article.

# %%
from ragbook.widgets import ChunkingExperiment, chunking_explorer

dev = [q for q in hc.split("dev") if q.gold]
experiment = ChunkingExperiment(hc.documents, dev, encoder, sizes=(128, 256),
                                overlaps=(0.0, 0.1, 0.25, 0.5)).build(progress=False)
print(f"{len(dev)} answerable dev questions")
print(f"{'size':>5s} {'overlap':>8s} {'chunks':>7s} {'premium':>8s} {'recall@5':>9s}")
for s in experiment.sizes:
    for o in experiment.overlaps:
        r = experiment.stats(s, o)
        print(f"{s:5d} {o:8.0%} {r['chunks']:7d} {r['premium']:+8.0%} {r['recall@5']:9.3f}")
shared = [(s, o) for s, o in cuts if s in experiment.sizes and o in experiment.overlaps]
assert all(experiment.stats(s, o)["chunks"] == cuts[s, o][2] for s, o in shared)
print(f"chunk counts agree with the cut-span table at {len(shared)} shared settings (one rounding rule)")
chunking_explorer(experiment)

# %% [markdown]
# Read the table with its sample size in mind: with this few dev questions one question is
# more than a point of recall, so differences of a few points are noise (chapter 4 puts
# confidence intervals on such numbers). What the table shows for certain is the price
# column. Move the sliders above; after the build each move is a dictionary look-up.

# %% [markdown]
# ## What you built, what you measured
#
# You built the exact and the rough window count (and checked them against a real sliding
# window), a recursive splitter that cuts at headings, paragraphs, sentences and words and
# agrees with `ragbook.RecursiveSplitter`, and you measured what size and overlap cost and
# buy on the help centre. The chapter's numbers, printed from the variables above:

# %%
recall_grid = {(s, o): experiment.stats(s, o)["recall@5"] for s in experiment.sizes for o in experiment.overlaps}
low, high = min(recall_grid, key=recall_grid.get), max(recall_grid, key=recall_grid.get)
summary = [
    ("question vs whole page / vs its section (mean cosine)", f"{whole.mean():.3f} / {section.mean():.3f}"),
    ("100,000 tokens, size 500, overlap 250: exact / rough windows",
     f"{window_count(100_000, 500, 250)} / {rough_window_count(100_000, 500, 250)}"),
    ("index premium of 100 overlap on 500-token windows",
     f"{window_count(100_000, 500, 100) / window_count(100_000, 500, 0) - 1:+.0%}"),
    ("failed-payments answer whole in a chunk, overlap 0 / 16", f"{kept[0]} / {kept[16]}"),
    ("answer spans cut, 128-token windows, 0% / 10% overlap",
     f"{cuts[128, 0.0][1]} / {cuts[128, 0.1][1]} of {len(spans)}"),
    ("answer spans cut, recursive splitter, 128 tokens, 0%", f"{cuts[128, 0.0][3]} of {len(spans)}"),
    ("recursive chunks, 128 tokens, 0% / 10% overlap", f"{cuts[128, 0.0][2]} / {cuts[128, 0.1][2]}"),
    ("1000-character chunks over the encoder's window", f"{over} of {len(by_chars)}"),
    (f"dev recall@5, lowest ({low[0]}, {low[1]:.0%}) / highest ({high[0]}, {high[1]:.0%})",
     f"{recall_grid[low]:.3f} / {recall_grid[high]:.3f} ({len(dev)} questions)"),
]
for what, value in summary:
    print(f"{what:62s} {value}")
