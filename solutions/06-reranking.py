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
# # 06 · Reranking — exercises
#
# A bi-encoder embeds the question and each passage separately and compares frozen vectors:
# fast and precomputable, but imprecise. A cross-encoder reads the question and one passage
# *together* and scores the pair: more accurate, but far too slow to run over a whole corpus.
# So retrieval runs in two stages: fetch about 50 candidates cheaply (hybrid search, chapter 5),
# then rerank them with the cross-encoder and keep the best 3–5. Here you write the logic around
# the model, from scratch:
#
# * **keeping the best, above a bar.** A threshold that may rightly leave nothing.
# * **long passages.** Splitting into overlapping windows and scoring a passage by its best one.
# * **the latency budget.** How many candidates you can afford to rerank.
# * **late interaction.** MaxSim, the chapter's winning second stage, over token vectors.
#
# The reranker's scores are given to you as plain numbers; no model is loaded. `check(name,
# function)` compares your function with `ragbook` on several inputs. If a case fails, it shows
# you the input, the expected value and what you returned.

# %%
from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Rerank with a threshold
#
# **Task.** `thresholded_rerank(ids, scores, k, min_rerank_score)` takes the candidates' ids in their
# retrieval order and the reranker's score for each (two lists of the same length). It returns
# the ids ordered by score, highest first (equal scores keep their retrieval order), keeping
# only those whose score is at least `min_rerank_score`, and at most `k` of them.
#
# **Examples.** With `ids = ["c1", "c2", "c3", "c4", "c5"]` and
# `scores = [0.20, 0.91, 0.35, 0.91, 0.05]`:
# `thresholded_rerank(ids, scores, 3, 0.3)` → `["c2", "c4", "c3"]`,
# `thresholded_rerank(ids, scores, 3, 0.0)` → `["c2", "c4", "c3"]`,
# `thresholded_rerank(ids, scores, 5, 0.95)` → `[]`
#
# **Why an empty answer can be right.** A fixed top-k always hands the reader k passages, even
# for a question the corpus cannot answer, and a reader given text tends to answer from it. A
# threshold (`min_rerank_score`) lets the system say "I found nothing", which is better than a confident wrong
# answer. The bar depends on the model's score scale (a reference setup uses 0.3 for its
# cross-encoder), so calibrate it on labelled questions, including unanswerable ones.

# %%
def thresholded_rerank(ids, scores, k, min_rerank_score):
    """Ids by score, best first (ties: retrieval order), those >= min_rerank_score, at most k."""
    ### BEGIN SOLUTION hint: sort the positions 0..n-1 rather than the ids, with a key that puts high scores first and then the lower position; filter, then cut
    order = sorted(range(len(ids)), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order if scores[i] >= min_rerank_score][:k]
    ### END SOLUTION


# %%
check("thresholded_rerank", thresholded_rerank)

# %% [markdown]
# ## 2. Windows over a long passage
#
# A cross-encoder reads at most a few hundred tokens (512 for BERT-style models) and silently
# drops the rest, so an answer at the end of a long passage is never seen. The fix is to split
# the passage into overlapping windows and score each one.
#
# **Task.** `word_windows(n_words, size, step)` returns the windows over a text of `n_words`
# words as `(start, end)` word-index pairs (`words[start:end]` is the window). Windows hold
# `size` words and start every `step` words. Stop after the first window that reaches the
# last word; that window may be shorter. A text of at most `size` words is one window
# `(0, n_words)`.
#
# **Examples.**
# `word_windows(250, 100, 50)` → `[(0, 100), (50, 150), (100, 200), (150, 250)]`,
# `word_windows(11, 4, 3)` → `[(0, 4), (3, 7), (6, 10), (9, 11)]`,
# `word_windows(30, 100, 50)` → `[(0, 30)]`
#
# The overlap (`size - step` words) means a sentence cut by one window boundary sits whole in
# the next window. `ragbook.rerank.windows(text, size, overlap)` returns the same windows as
# text; it takes the overlap, not the step (chapter 7's tokenizer calls the overlap `stride`).

# %%
def word_windows(n_words, size, step):
    """(start, end) word spans of size-word windows every step words, covering n_words."""
    ### BEGIN SOLUTION hint: handle the short text first; then loop, clipping each end at n_words, and stop once a window has reached it
    if n_words <= size:
        return [(0, n_words)]
    spans, start = [], 0
    while True:
        end = min(start + size, n_words)
        spans.append((start, end))
        if end == n_words:
            return spans
        start += step
    ### END SOLUTION


# %%
check("word_windows", word_windows)

# %% [markdown]
# ## 3. A passage's score is its best window's
#
# **Task.** `max_window_score(window_scores)` takes, for each passage, the list of its windows'
# scores, and returns one score per passage: the highest of its windows.
#
# **Examples.**
# `max_window_score([[0.1, 0.7, 0.3]])` → `[0.7]`,
# `max_window_score([[0.2], [0.5, 0.4], [0.9, 0.1, 0.1, 0.2]])` → `[0.2, 0.5, 0.9]`
#
# **Why the maximum.** The answer usually sits in one place. A mean would dilute that window
# with the rest of the passage and so punish long passages for being long. This is "MaxP"
# (Dai & Callan, 2019); ragbook's offline reranker, `WindowScorer`, scores this way too.

# %%
def max_window_score(window_scores):
    """One score per passage: the best of its windows' scores."""
    ### BEGIN SOLUTION hint: one number per inner list
    return [max(scores) for scores in window_scores]
    ### END SOLUTION


# %%
check("max_window_score", max_window_score)

# %% [markdown]
# ## 4. How many candidates the latency budget allows
#
# **Task.** `candidates_for_budget(ms_per_pair, budget_ms, available)` returns how many
# candidates you can rerank (an `int`): as many whole (question, passage) pairs as fit in
# `budget_ms` at `ms_per_pair` each, but never more than the `available` candidates.
#
# **Examples.**
# `candidates_for_budget(2.0, 100.0, 80)` → `50`,
# `candidates_for_budget(2.0, 100.0, 30)` → `30`,
# `candidates_for_budget(3.0, 100.0, 80)` → `33`,
# `candidates_for_budget(7.5, 5.0, 50)` → `0`
#
# **Why latency is the knob.** Nothing about a pair can be precomputed: each one is a full
# forward pass of the model over question and passage together. So the cost grows in step with
# the number of candidates (halving them roughly halves it), while recall grows with the
# candidate count only up to a point. Pick the
# count from the budget, measure recall at that count, and load the model once, not per query.

# %%
def candidates_for_budget(ms_per_pair, budget_ms, available):
    """Whole pairs that fit in budget_ms at ms_per_pair each, capped at `available`."""
    ### BEGIN SOLUTION hint: floor division gives whole pairs; an int is wanted, and min() applies the cap
    return min(available, int(budget_ms // ms_per_pair))
    ### END SOLUTION


# %%
check("candidates_for_budget", candidates_for_budget)

# %% [markdown]
# ## 5. Windows over a real article
#
# A cross-encoder reads a bounded number of tokens, so a long passage is scored window by window
# (section 3). Below, the help centre's longest article.
#
# **Task.** `passage_windows(text, size, step)` returns the windows' *texts*: windows of `size`
# words starting every `step` words, the last reaching the last word (your `word_windows`
# spans), each running from the first character of its first word to the last character of its
# last word; a text of at most `size` words is one window, `text.strip()`. Words are runs of
# non-space characters. The check compares with `ragbook.rerank.windows` on real articles.

# %%
import math
import re

from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
longest = sorted(hc.documents, key=lambda d: (-len(d.text.split()), d.id))[0]
print(f"{longest.id}: {len(longest.text.split())} words")


# %%
def passage_windows(text, size, step):
    """The texts of word windows over `text`, cut at character offsets."""
    ### BEGIN SOLUTION hint: spans = [m.span() for m in re.finditer(r"\S+", text)]; window (a, z) is text[spans[a][0]:spans[z - 1][1]]
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    if len(spans) <= size:
        return [text.strip()]
    out, a = [], 0
    while True:
        z = min(a + size, len(spans))
        out.append(text[spans[a][0]:spans[z - 1][1]])
        if z == len(spans):
            return out
        a += step
    ### END SOLUTION


# %%
check("passage_windows", passage_windows)

# %% [markdown]
# ## 6. Predict, then run: how many windows does the reranker score?
#
# **Before running the cell after next**, predict how many windows of 100 words, starting every
# 50 words, the longest article (printed above) becomes. Each is one cross-encoder call. A
# prediction within 1 passes.

# %%
def predict_window_count():
    """My prediction of the number of windows, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a whole number; one window for the first 100 words, then one per further 50
    return math.ceil((1458 - 100) / 50) + 1
    ### END SOLUTION


# %%
from ragbook.rerank import windows as word_windows_of

windows = word_windows_of(longest.text, 100, 50)
print(f"{len(windows)} windows; the last has {len(windows[-1].split())} words")

# %%
check("predict_window_count", predict_window_count)

# %% [markdown]
# With half-overlapping windows every word is read about twice, so a long page costs the
# reranker roughly twice its length in words. Multiply by the candidates per question and the
# latency budget of section 4 is spent quickly: a reason to rerank chunks, not whole pages.

# %% [markdown]
# ## 7. MaxSim: every question token finds its best passage token
#
# The chapter's second stage that wins keeps one vector per *token* instead of one per text.
# Each question token looks for its best match among the passage's tokens, and the passage
# scores the mean of those best matches (late interaction, after ColBERT):
#
# $$\text{MaxSim}(q, p) = \frac{1}{|q|}\sum_{i \in q} \max_{j \in p} \cos(q_i, p_j).$$
#
# **Task.** `maxsim(query_tokens, passage_tokens)` takes two numpy arrays whose rows are unit
# token vectors (one row per token: `(n_query, dim)` and `(n_passage, dim)`) and returns the
# MaxSim score as a `float`.
#
# **Examples.** With `q = np.array([[1.0, 0.0], [0.0, 1.0]])`:
# `maxsim(q, np.array([[1.0, 0.0]]))` → `0.5` (the first token matches perfectly, the second
# not at all), `maxsim(q, q)` → `1.0`.
#
# **Why the mean over the question.** Every question word must be matched somewhere, but a
# passage's extra words cost nothing, so a long passage is not punished for its length.
# ColBERT sums instead of averaging; the mean keeps the score on the cosine's scale, so
# `ragbook.late_interaction.MaxSimScorer` can blend it with the bi-encoder's cosine.

# %%
def maxsim(query_tokens, passage_tokens):
    """Mean over the question's tokens of each one's best cosine with a passage token."""
    ### BEGIN SOLUTION hint: rows are unit vectors, so query_tokens @ passage_tokens.T holds the cosines; the best per question token (a row), then the mean
    return float((query_tokens @ passage_tokens.T).max(axis=1).mean())
    ### END SOLUTION


# %%
check("maxsim", maxsim)

# %% [markdown]
# ## Try it (ungraded)
#
# Fifty hybrid candidates for one question, with made-up reranker scores. The only passage that
# answers it sits at retrieval rank 38. At 2 ms per pair, which budgets find it? A second
# question has no answer in the corpus: with the 0.3 threshold it gets nothing back.

# %%
import random

rand = random.Random(0)
ids = [f"c{i:02d}" for i in range(1, 51)]  # retrieval order
answerable = [round(rand.uniform(0.0, 0.25), 3) for _ in ids]
answerable[37] = 0.82  # c38, the passage with the answer
unanswerable = [round(rand.uniform(0.0, 0.25), 3) for _ in ids]
with trying("candidates_for_budget", "thresholded_rerank"):
    for budget in (20, 50, 100, 200):
        n = candidates_for_budget(2.0, budget, len(ids))
        top = thresholded_rerank(ids[:n], answerable[:n], 3, 0.3)
        print(f"budget {budget:>3} ms: rerank {n:>2} candidates -> {top}")
    print("no answer in the corpus ->", thresholded_rerank(ids, unanswerable, 3, 0.3))
