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
# # 05 · Keyword search, hybrid retrieval and RRF — exercises
#
# Dense retrieval misses exact tokens: an error code such as `ERR_CONN_4021`, a setting name,
# a SKU. Keyword search misses paraphrase: "my dashboard is stuck loading" shares no word with
# "the console fails to render". A hybrid retriever runs both and fuses the two rankings. Here
# you write the pieces from scratch:
#
# * **BM25.** The IDF of a term, and one term's contribution to a document's score.
# * **Reciprocal rank fusion (RRF).** Combining two rankings using only their ranks.
# * **What fusion rescued.** The documents the keyword channel added to what dense found.
# * **Min-max normalisation.** The score blend that RRF replaces, and why it is fragile.
#
# Use plain Python (`math`); no model is loaded. `check(name, function)` compares your function
# with `ragbook` on several inputs. If a case fails, it shows you the input, the expected value
# and what you returned.

# %%
import math

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. BM25's IDF
#
# A term found in few documents says more about a document than one found in most. The inverse
# document frequency (IDF) turns that into a weight. With `N` documents, of which `n` contain
# the term, Lucene (and so Elasticsearch, OpenSearch and bm25s) uses
#
#     IDF = ln(1 + (N - n + 0.5) / (n + 0.5))
#
# **Task.** `bm25_idf(n_docs, df)` returns that IDF (a `float`) for a term that occurs in `df`
# of `n_docs` documents.
#
# **Examples.**
# `bm25_idf(1000, 1)` → `6.503289671207057`,
# `bm25_idf(1000, 500)` → `0.6931471805599453`,
# `bm25_idf(1000, 1000)` → `0.0004996252914324798`
#
# **Why the `1 +`.** Robertson's original IDF is `ln((N - n + 0.5) / (n + 0.5))`, without it.
# For a term in more than half the documents the fraction drops below 1 and its log goes
# negative: at `n = 900` of 1000 it is -2.19, so a document *containing* a query word would
# score lower than one without it. Adding 1 inside the log keeps the fraction above 1, so the
# IDF stays positive, and a common word counts for little rather than against a document.

# %%
def bm25_idf(n_docs, df):
    """Lucene's BM25 IDF of a term found in df of n_docs documents."""
    ### BEGIN SOLUTION hint: math.log is the natural log; the 0.5s smooth the counts so that neither part of the fraction is ever zero
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    ### END SOLUTION


# %%
check("bm25_idf", bm25_idf)

# %% [markdown]
# ## 2. One term's BM25 score
#
# A document's BM25 score for a query is the sum, over the query's terms, of
#
#     IDF · tf / (tf + k1 · (1 - b + b · doc_len / avgdl))
#
# where `tf` is how often the term occurs in the document, `doc_len` the document's length in
# tokens and `avgdl` the average length over the corpus. The usual settings are `k1 = 1.2` and
# `b = 0.75`.
#
# **Task.** `bm25_term_score(tf, doc_len, avgdl, idf, k1, b)` returns that one term's
# contribution (a `float`; `0.0` when `tf` is 0).
#
# **Examples** (IDF 2.0, an average-length document, `k1 = 1.2`, `b = 0.75`):
# `bm25_term_score(1, 100, 100, 2.0, 1.2, 0.75)` → `0.9090909090909091`,
# `bm25_term_score(5, 100, 100, 2.0, 1.2, 0.75)` → `1.6129032258064515`,
# `bm25_term_score(50, 100, 100, 2.0, 1.2, 0.75)` → `1.953125`.
# A document four times the average length:
# `bm25_term_score(3, 400, 100, 1.5, 1.2, 0.75)` → `0.6521739130434783`, and with `b = 0.0`
# → `1.0714285714285714`, the same as an average-length document.
#
# **What k1 and b do.** `tf / (tf + K)` grows with `tf` but never reaches 1, so the score
# *saturates* towards the IDF: the fifth mention of a word adds far less than the first, and
# fifty mentions cannot beat a rarer term. `k1` sets how fast it saturates (`k1 = 0` counts
# only presence). `b` normalises length: a long document mentions everything more often by
# chance, so at `b = 1` its `tf` is judged relative to its length, and at `b = 0` length is
# ignored. (The original formula also multiplies by `k1 + 1`; Lucene drops that constant,
# which changes no ranking.)

# %%
def bm25_term_score(tf, doc_len, avgdl, idf, k1, b):
    """One query term's contribution to a document's BM25 score."""
    ### BEGIN SOLUTION hint: compute the length factor (1 - b + b * relative length) first; it scales k1, and the result is idf times a fraction of tf
    length_factor = 1 - b + b * doc_len / avgdl  # 1.0 for an average-length document
    return idf * tf / (tf + k1 * length_factor)
    ### END SOLUTION


# %%
check("bm25_term_score", bm25_term_score)

# %% [markdown]
# ## 3. Reciprocal rank fusion
#
# RRF (Cormack, Clarke & Büttcher, 2009) gives each document, from each ranked list that
# contains it,
#
#     1 / (rrf_k + rank)      ranks counting from 1, rrf_k = 60 by default
#
# and adds these up. A document both lists like rises; one that only one list likes survives,
# lower; one that neither ranks stays down.
#
# **Task.** `rrf(rankings, rrf_k)` takes a list of rankings (each a list of doc ids, best first)
# and returns a list of `(doc_id, score)` tuples for every document in any ranking, sorted by
# score, highest first; equal scores are ordered by id.
#
# **Examples.**
# `rrf([["a", "b", "c"], ["b", "a"]], 60)` →
# `[("a", 0.03252247488101534), ("b", 0.03252247488101534), ("c", 0.015873015873015872)]`
# (a and b both get 1/61 + 1/62),
# `rrf([["a", "b", "c"], ["c", "d"]], 60)` →
# `[("c", 0.032266458495966696), ("a", 0.01639344262295082), ("b", 0.016129032258064516), ("d", 0.016129032258064516)]`
#
# **Why ranks and not scores.** BM25 scores are unbounded and depend on the corpus (a score of
# 14 means nothing on its own), while cosine similarities sit between -1 and 1. Adding them
# would need a calibration between the two scales, and it would break whenever the corpus
# changed. A rank means the same in every list. `rrf_k` damps the top: with `rrf_k = 60`, rank 1 is
# worth 1/61 and rank 10 1/70, so one list's favourite cannot outvote broad agreement.

# %%
def rrf(rankings, rrf_k):
    """Fuse ranked lists of ids by reciprocal rank; [(id, score)], best first, ties by id."""
    ### BEGIN SOLUTION hint: accumulate a dict {id: total} with enumerate(ranking, 1); sort its items with a key that puts high scores first and breaks ties by id
    totals = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking, 1):
            totals[doc] = totals.get(doc, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    ### END SOLUTION


# %%
check("rrf", rrf)

# %% [markdown]
# ## 4. What fusion rescued
#
# Fusion earns its keep on the documents dense retrieval missed and keyword search found.
#
# **Task.** `rescued_documents(dense, keyword, fused, n)` takes three rankings of ids (the dense
# channel, the keyword channel and the fused list) and returns the ids in the fused top `n` that
# are *not* in the dense top `n` but *are* in the keyword ranking, in fused order.
#
# **Examples.** With `dense = ["d1", "d2", "d3"]`, `keyword = ["k1", "d3", "d1"]` and
# `fused = ["d3", "d1", "k1", "d2"]`:
# `rescued_documents(dense, keyword, fused, 3)` → `["k1"]`,
# `rescued_documents(dense, keyword, fused, 2)` → `[]`
#
# Counting rescues per question tells you where hybrid helps. Expect them on exact-token
# questions (codes, setting names, versions) and few on paraphrased ones. A rescued document
# is often deep in the keyword list, ranked 30th say, which is why each channel should be
# fetched about 100 deep before fusing down to about 50.

# %%
def rescued_documents(dense, keyword, fused, n):
    """Ids in the fused top n that the dense top n lacks and the keyword ranking has."""
    ### BEGIN SOLUTION hint: walk the fused top n in order; sets make the two membership tests quick
    dense_top, found_by_keyword = set(dense[:n]), set(keyword)
    return [d for d in fused[:n] if d not in dense_top and d in found_by_keyword]
    ### END SOLUTION


# %%
check("rescued_documents", rescued_documents)

# %% [markdown]
# ## 5. Min-max normalisation, and why a score blend is fragile
#
# The obvious alternative to RRF is to put both channels' scores on a 0–1 scale and add them,
# weighted. The usual scale is min-max: `(s - min) / (max - min)`.
#
# **Task.** `minmax_normalise(scores)` takes a list of floats and returns a list of the same
# length with the lowest score mapped to 0.0 and the highest to 1.0. If all scores are equal
# (including a single score), every one becomes 1.0.
#
# **Examples.**
# `minmax_normalise([3.0, 1.0, 2.0])` → `[1.0, 0.0, 0.5]`,
# `minmax_normalise([-1.0, 0.0, 1.0])` → `[0.0, 0.5, 1.0]`,
# `minmax_normalise([2.0, 2.0])` → `[1.0, 1.0]`, `minmax_normalise([])` → `[]`
#
# **Why the blend shifts when the corpus changes.** A normalised score is relative to the best
# and worst in the list. BM25 scores `[12.0, 6.0, 3.0]` become `[1.0, 0.33, 0.0]`. Add one new
# document that repeats the query's code and scores 24.0, and the same three become
# `[0.43, 0.14, 0.0]`. None of them changed, yet each lost weight against the dense channel, so
# the blend weight tuned last month is wrong today. Under RRF those documents just move down
# one rank each.

# %%
def minmax_normalise(scores):
    """Scale scores to [0, 1]: lowest -> 0.0, highest -> 1.0; all equal -> all 1.0."""
    ### BEGIN SOLUTION hint: return [] for no scores; find the lowest and highest once; guard the case where they are equal before you divide
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]
    ### END SOLUTION


# %%
check("minmax_normalise", minmax_normalise)

# %% [markdown]
# ## 6. IDF on the real help centre
#
# Section 1 took `n_docs` and `df` as given. On a real corpus you count them. Below, every
# help-centre article as the BM25 index tokenizes it.
#
# **Task.** `corpus_idf(doc_tokens, term)` returns the term's Lucene IDF over the corpus:
# `doc_tokens` is one token list per document; a document counts once however often it uses the
# term. The check compares with the IDF inside a `BM25Index` built on the same articles.

# %%
from ragbook.bm25 import BM25Index
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
index = BM25Index().build(hc.documents)
doc_tokens = [index.tokenizer(d.text) for d in hc.documents]
print(f"{len(doc_tokens)} documents; the first starts {doc_tokens[0][:6]}")


# %%
def corpus_idf(doc_tokens, term):
    """Lucene's IDF of `term`, counting its documents in `doc_tokens`."""
    ### BEGIN SOLUTION hint: df = how many token lists contain the term; then log(1 + (N - df + 0.5) / (df + 0.5))
    n_docs = len(doc_tokens)
    df = sum(1 for tokens in doc_tokens if term in tokens)
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    ### END SOLUTION


# %%
check("corpus_idf", corpus_idf)

# %% [markdown]
# ## 7. Predict, then run: how common is "plan"?
#
# **Before running the cell after next**, predict in how many of the help centre's articles the
# word `plan` occurs (its document frequency). The help centre is a SaaS product's, with Free,
# Starter, Pro and Enterprise plans. A prediction within `25%` passes.

# %%
def predict_plan_df():
    """My prediction of the number of articles containing "plan", written first."""
    ### BEGIN SOLUTION hint: return a whole number between 0 and the number of articles
    return 60
    ### END SOLUTION


# %%
for term in ("plan", "refund", "saml"):
    df = sum(term in set(tokens) for tokens in doc_tokens)
    idf = index.idf_[index.vocab_[term]]
    print(f"{term:7s} in {df:3d} of {len(doc_tokens)} articles, IDF {idf:.2f}")

# %%
check("predict_plan_df", predict_plan_df)

# %% [markdown]
# A word on a large share of the pages carries little evidence: `plan` gets the lowest IDF of the
# three, and a query's rare words (`saml`) decide the ranking. That is also why BM25 struggles
# with a paraphrase: the customer's words may all be common ones.

# %% [markdown]
# ## Try it (ungraded)
#
# Two made-up channels, each fetched 100 deep. The article that fixes `ERR_CONN_4021` is 30th
# for BM25 and absent from the dense list. See where RRF puts it, and what happens when the
# keyword channel is fetched only 20 deep.

# %%
import random

rand = random.Random(5)
dense = [f"d{i:02d}" for i in range(100)]  # the dense channel's top 100
target = "kb-err-conn-4021"
keyword = rand.sample(dense[:50], 29) + [target] + [f"k{i:02d}" for i in range(70)]
with trying("rrf", "rescued_documents"):
    for depth in (100, 20):
        fused = [doc for doc, _ in rrf([dense, keyword[:depth]], 60)]
        where = fused.index(target) + 1 if target in fused else "not fused"
        print(f"keyword depth {depth:>3}: BM25 rank 30, dense rank none, fused rank {where}; "
              f"rescued in the fused top 50: {rescued_documents(dense, keyword[:depth], fused, 50)}")
