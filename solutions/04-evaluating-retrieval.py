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
# # 04 · Measuring retrieval on its own — exercises
#
# A retriever is judged before any reader sees its output. What it needs is a labelled set:
# for each question, the ids of the documents that answer it. Recall is the ceiling of the whole
# system, because an answer the retriever missed cannot be read. Here you write the standard
# metrics from scratch, one small function each.
#
# Every metric takes the same three inputs:
#
# * `relevant`: a dict `{doc_id: relevance}` for one question. A relevance above 0 means
#   relevant (usually 1; graded labels use 2 or 3 for "more relevant"), and a
#   document that is missing counts as 0.
# * `ranked`: the retriever's doc ids, best first (a list).
# * `k`: only the first `k` of the ranking count.
#
# `check(name, function)` compares your function with `ragbook.evaluate` on several inputs. If a
# case fails, it shows you the input, the expected value and what you returned.

# %%
import math

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Recall@k
#
# **Task.** `recall_at_k(relevant, ranked, k)` returns the share of the relevant documents that
# appear in the first `k` of `ranked` (a `float`; `0.0` if nothing is relevant).
#
# **Examples.**
# `recall_at_k({"a": 1, "b": 1}, ["x", "y", "a", "b"], 3)` → `0.5`,
# `recall_at_k({"a": 1, "b": 1}, ["x", "y", "a", "b"], 4)` → `1.0`,
# `recall_at_k({"q": 1}, ["x", "y", "z"], 5)` → `0.0`
#
# Recall ignores order inside the top k. That fits the retriever's job, which is to get the
# answer *into* the pile the reader sees. Ordering is the next stage's job.

# %%
def recall_at_k(relevant, ranked, k):
    """Share of the relevant documents found in the first k results."""
    ### BEGIN SOLUTION hint: make a set of the relevant ids (relevance above 0) and count how many of them the top k contains
    wanted = {d for d, r in relevant.items() if r > 0}
    if not wanted:
        return 0.0
    return len(wanted & set(ranked[:k])) / len(wanted)
    ### END SOLUTION


# %%
check("recall_at_k", recall_at_k)

# %% [markdown]
# ## 2. Hit rate (hit@k)
#
# **Task.** `hit_at_k(relevant, ranked, k)` returns `1.0` if at least one relevant document is
# among the first `k` results, else `0.0`.
#
# **Examples.**
# `hit_at_k({"a": 1, "b": 1}, ["x", "y", "a", "b"], 3)` → `1.0` (recall@3 is only 0.5),
# `hit_at_k({"a": 1, "b": 1}, ["x", "y", "a", "b"], 2)` → `0.0`
#
# When each question has exactly one relevant document, hit@k and recall@k are the same number.
# When it has several, recall asks for all of them and hit for any one. For a reader that needs
# only one good passage, hit rate is often the number that matters.

# %%
def hit_at_k(relevant, ranked, k):
    """1.0 if any relevant document is in the first k results, else 0.0."""
    ### BEGIN SOLUTION hint: Python's any() over the first k ids; a missing id has relevance 0
    return 1.0 if any(relevant.get(d, 0) > 0 for d in ranked[:k]) else 0.0
    ### END SOLUTION


# %%
check("hit_at_k", hit_at_k)

# %% [markdown]
# ## 3. Reciprocal rank
#
# **Task.** `reciprocal_rank(relevant, ranked, k)` returns `1 / rank` of the first relevant
# document within the first `k` results, counting ranks from 1, or `0.0` if there is none.
#
# **Examples.**
# `reciprocal_rank({"a": 1, "b": 1}, ["x", "y", "a", "b"], 10)` → `0.3333333333333333`,
# `reciprocal_rank({"a": 1, "b": 1}, ["x", "y", "a", "b"], 2)` → `0.0`,
# `reciprocal_rank({"a": 1}, ["a", "b"], 10)` → `1.0`
#
# **Why only the first hit counts.** A question answered by one passage needs one passage near
# the top. The relevant document at rank 4 adds nothing here once rank 3 has been found. The
# score also falls steeply: moving the first hit from rank 1 to 2 halves it, while moving it
# from rank 9 to 10 barely matters. So the metric is about whether the right document leads.

# %%
def reciprocal_rank(relevant, ranked, k):
    """1 / rank of the first relevant document in the top k, else 0.0."""
    ### BEGIN SOLUTION hint: enumerate(..., 1) counts ranks from 1; return as soon as you meet a relevant id
    for rank, d in enumerate(ranked[:k], 1):
        if relevant.get(d, 0) > 0:
            return 1.0 / rank
    return 0.0
    ### END SOLUTION


# %%
check("reciprocal_rank", reciprocal_rank)

# %% [markdown]
# ## 4. Mean reciprocal rank (MRR)
#
# **Task.** `mean_reciprocal_rank(relevant_per_query, ranked_per_query, k)` takes two lists of
# the same length, one `relevant` dict and one ranking per question, and returns the mean of
# the reciprocal ranks (a `float`). You may call your `reciprocal_rank`.
#
# **Example, the chapter's worked one.** Five questions whose first correct result sits at ranks
# 1, 3, 2, not found, 1:
# `mean_reciprocal_rank([{"g": 1}] * 5, [["g", "a"], ["a", "b", "g"], ["a", "g"], ["a", "b", "c"], ["g"]], 10)`
# → `0.5666666666666667`. The reciprocal ranks are 1.000, 0.333, 0.500, 0 and 1.000, which
# sum to 2.833, and 2.833 / 5 = 0.567. On the same questions recall@5 is 4/5 = 0.80.
#
# Together the two give a diagnosis. High recall with low MRR means the candidates are there but
# in the wrong order: add a reranker. Low recall with low MRR means the right chunk is never
# found: look at the embeddings or the chunking.

# %%
def mean_reciprocal_rank(relevant_per_query, ranked_per_query, k):
    """Mean over questions of the reciprocal rank of the first relevant result in the top k."""
    ### BEGIN SOLUTION hint: pair each question's labels with its ranking (zip), then average
    rrs = [reciprocal_rank(rel, ranked, k)
           for rel, ranked in zip(relevant_per_query, ranked_per_query)]
    return sum(rrs) / len(rrs)
    ### END SOLUTION


# %%
check("mean_reciprocal_rank", mean_reciprocal_rank)

# %% [markdown]
# ## 5. nDCG@k
#
# nDCG (normalised discounted cumulative gain) is BEIR's headline metric. It uses graded
# relevance and every relevant document, not only the first.
#
# * DCG@k = Σ over ranks r = 1..k of relevance(doc at r) / log2(r + 1).
# * The ideal DCG@k is the DCG of the best possible ranking: the relevance grades sorted from
#   high to low, cut to k.
# * nDCG@k = DCG@k / ideal DCG@k, or `0.0` if nothing is relevant.
#
# **Task.** `ndcg_at_k(relevant, ranked, k)` returns nDCG@k (a `float` in [0, 1]).
#
# **Examples.**
# `ndcg_at_k({"a": 3, "b": 1}, ["b", "x", "a"], 3)` → `0.6885288809404666`,
# `ndcg_at_k({"a": 3, "b": 1}, ["a", "x", "b"], 3)` → `0.9639404333166532`,
# `ndcg_at_k({"a": 1}, ["a"], 10)` → `1.0`
#
# In the first, DCG = 1/log2(2) + 3/log2(4) = 2.5 and the ideal is 3/log2(2) + 1/log2(3) ≈ 3.631.
#
# **Why log2(rank + 1).** At rank 1 the discount is 1/log2(2) = 1, so the top result counts in
# full. It then falls gently: 1/2 at rank 3, 1/3 at rank 7. Lower ranks still count, less than
# higher ones, unlike reciprocal rank, which stops at the first hit. Dividing by the ideal puts
# every question on the same 0–1 scale, however many relevant documents it has.

# %%
def ndcg_at_k(relevant, ranked, k):
    """Normalised discounted cumulative gain of the first k results."""
    ### BEGIN SOLUTION hint: write one helper that turns a list of gains into a DCG; use it on your top k's relevances, and on the grades in their best order
    def dcg(gains):
        return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, 1))

    got = dcg([relevant.get(d, 0) for d in ranked[:k]])
    best = dcg(sorted((r for r in relevant.values() if r > 0), reverse=True)[:k])
    return got / best if best > 0 else 0.0
    ### END SOLUTION


# %%
check("ndcg_at_k", ndcg_at_k)

# %% [markdown]
# ## 6. Recall over the help centre's real questions
#
# One question says little; a metric is a mean over a labelled set. Below, BM25's top 10 for
# every answerable question of the help centre's dev split, with each question's gold articles.
#
# **Task.** `mean_recall(relevant, rankings, k)` returns the mean over questions of recall@k:
# `relevant[i]` is question i's `{doc id: relevance}` and `rankings[i]` its ranked ids. The
# check compares your value with `ragbook.evaluate.evaluate(qrels, run, "recall@k")`.

# %%
from ragbook.bm25 import BM25Index
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
bm25 = BM25Index().build(hc.documents)
dev = [q for q in hc.split("dev") if q.gold]
relevant = [{d: 1 for d in q.gold} for q in dev]
rankings = [[h.id for h in bm25.search(q.text, k=10)] for q in dev]
print(f"{len(dev)} answerable dev questions; the first: {dev[0].text!r} -> {relevant[0]}")


# %%
def mean_recall(relevant, rankings, k):
    """Mean recall@k over questions."""
    ### BEGIN SOLUTION hint: recall@k of each question (as in section 1), then the mean
    total = 0.0
    for rel, ranked in zip(relevant, rankings):
        wanted = {d for d, r in rel.items() if r > 0}
        total += len(wanted & set(ranked[:k])) / len(wanted)
    return total / len(relevant)
    ### END SOLUTION


# %%
check("mean_recall", mean_recall)

# %% [markdown]
# ## 7. Predict, then run: how good is BM25 here?
#
# **Before running the cell after next**, predict BM25's recall@5 over these questions (a number
# between 0 and 1). The dev split mixes categories: exact tokens (error codes, plan names),
# paraphrases in customers' words, pages that look alike, follow-ups. A prediction within `0.15`
# passes.

# %%
def predict_bm25_recall():
    """My prediction of BM25's recall@5, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a number between 0 and 1
    return 0.75
    ### END SOLUTION


# %%
from ragbook.evaluate import evaluate, per_query

qrels = {q.id: rel for q, rel in zip(dev, relevant)}
run = {q.id: {d: float(len(r) - n) for n, d in enumerate(r)} for q, r in zip(dev, rankings)}
print(f"BM25 recall@5 on the dev split: {evaluate(qrels, run, 'recall@5'):.3f}")
by_question = per_query(qrels, run, "recall@5")
for category in sorted({q.category for q in dev}):
    values = [by_question[q.id] for q in dev if q.category == category]
    print(f"  {category:20s} {len(values):3d} questions  recall@5 {sum(values) / len(values):.2f}")

# %%
check("predict_bm25_recall", predict_bm25_recall)

# %% [markdown]
# The mean hides the spread: the per-category lines above show where BM25 is strong (questions
# that share rare words with their page) and where it loses the page. Categories with a handful
# of questions move a lot with one question, which is why chapter 4 reports intervals.

# %% [markdown]
# ## Try it (ungraded)
#
# Three made-up retrievers answer the same five questions; the answer to each is document `"g"`.
# *Ordered* puts it near the top, *buried* finds it but ranks it low, and *blind* misses it for
# three questions. Read the table with the diagnosis from exercise 4, then move the `"g"`s.

# %%
def ranking(g_at):
    """Ten results with the answer "g" at rank g_at (None: not retrieved)."""
    results = list("abcdefhijk")
    if g_at:
        results[g_at - 1] = "g"
    return results


first_g = {"ordered": [1, 2, 1, 3, 1], "buried": [8, 9, 7, 10, 8],
           "blind": [None, 5, None, 1, None]}
labels = [{"g": 1}] * 5
with trying("recall_at_k", "reciprocal_rank", "mean_reciprocal_rank", "ndcg_at_k"):
    print(f"{'run':8} {'recall@10':>9} {'MRR@10':>7} {'nDCG@10':>8}")
    for name, ranks in first_g.items():
        ranked = [ranking(r) for r in ranks]
        recall = sum(recall_at_k(gold, r, 10) for gold, r in zip(labels, ranked)) / len(labels)
        ndcg = sum(ndcg_at_k(gold, r, 10) for gold, r in zip(labels, ranked)) / len(labels)
        print(f"{name:8} {recall:9.2f} {mean_reciprocal_rank(labels, ranked, 10):7.3f} {ndcg:8.3f}")
