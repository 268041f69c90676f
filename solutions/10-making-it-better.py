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
# # 10 · Making it better — exercises
#
# Chapter 10's techniques are small pieces of plain code around a retriever. You write the
# pieces here, from scratch, with no model loaded:
#
# * **parent-document retrieval.** Map ranked children to the parents they lie in, once each.
# * **sentence windows.** Widen a sentence hit to *n* sentences on both sides.
# * **contextual notes.** The section path above a chunk: the cheap note to index with it.
# * **equal budgets.** What fits when the reader may read only so many tokens.
# * **metadata filters.** The filter language that keeps a superseded page out.
#
# `check(name, function)` compares your function with `ragbook` on several inputs. If a case
# fails, it shows you the input, the expected value and what you returned.

# %%
from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Children to parents
#
# **Task.** `parents_for_children(children, parents, k)` takes the search results over small
# children, best first, as `(doc_id, start)` pairs (the child's character offset in its
# document), and the parent sections as `(parent_id, doc_id, start, end)` tuples (`end`
# exclusive). Return the ids of the parents the children lie in, in the order of each
# parent's best child, each parent once, at most `k` of them.
#
# **Example.**
#
# ```python
# parents = [("a#0", "a", 0, 900), ("a#1", "a", 900, 1700), ("b#0", "b", 0, 400)]
# parents_for_children([("a", 10), ("a", 300), ("b", 40), ("a", 950)], parents, 3)
# # → ["a#0", "b#0", "a#1"]
# ```
#
# **Why deduplicate.** Two children of one section are often the two best hits — they say the
# same thing twice. Returned as parents, that section would take two of the reader's `k`
# places with the same text.

# %%
def parents_for_children(children, parents, k):
    """Ids of the parents containing the ranked children, first-seen order, at most k."""
    ### BEGIN SOLUTION hint: for each child, find the parent with the same doc_id and start <= child start < end; append its id unless it is already in the list; stop at k
    out = []
    for doc_id, start in children:
        for pid, pdoc, a, z in parents:
            if pdoc == doc_id and a <= start < z:
                if pid not in out:
                    out.append(pid)
                break
        if len(out) == k:
            break
    return out
    ### END SOLUTION


# %%
check("parents_for_children", parents_for_children)

# %% [markdown]
# ## 2. A symmetric sentence window
#
# **Task.** `sentence_window(spans, i, n)` takes the `(start, end)` character spans of a
# document's sentences, the index `i` of the sentence that was hit, and `n`. Return the
# `(start, end)` of the window from sentence `i - n` to sentence `i + n`, both included,
# clipped at the first and the last sentence.
#
# **Example.** With five sentences `[(0, 40), (41, 66), (67, 93), (94, 128), (129, 159)]`:
# `sentence_window(spans, 2, 1)` → `(41, 128)`, `sentence_window(spans, 0, 1)` → `(0, 66)`.
#
# **The gotcha.** Python slices exclude their end: `spans[i - n : i + n]` is `n` sentences
# before the hit and only `n - 1` after. llama-index's `SentenceWindowNodeParser` slices
# exactly like that, so its `window_size=3` is 3 before and 2 after. Symmetric means
# `spans[i - n : i + n + 1]`.

# %%
def sentence_window(spans, i, n):
    """(start, end) of sentences i - n .. i + n (both included), clipped to the document."""
    ### BEGIN SOLUTION hint: clip the first index at 0 and the last at len(spans) - 1; the window starts where its first sentence starts and ends where its last ends
    lo, hi = max(i - n, 0), min(i + n, len(spans) - 1)
    return spans[lo][0], spans[hi][1]
    ### END SOLUTION


# %%
check("sentence_window", sentence_window)

# %% [markdown]
# ## 3. The section path above a chunk
#
# **Task.** `section_path(markdown, offset)` returns the titles of the Markdown headings in
# force at character `offset`, outermost first: every heading line (`#` to `######`, a
# space, a title) that starts at or before `offset`, where a heading of level L closes every
# open heading of level L or deeper.
#
# **Example.**
#
# ```python
# text = "# Plans\n\nIntro.\n\n## Pro\n\nPro has SSO.\n\n### Limits\n\nTen seats.\n\n## Team\n\nTeam has more."
# section_path(text, text.index("Ten seats"))  # → ["Plans", "Pro", "Limits"]
# section_path(text, text.index("Team has"))   # → ["Plans", "Team"]
# ```
#
# **Why.** "It is 14 days for annual contracts." — cut out of its page, a chunk loses the
# words that say *what* it is about. Its title and section path are the cheapest note to
# index in front of it (contextual retrieval); the reader is still handed only the chunk.

# %%
import re


def section_path(markdown, offset):
    """Titles of the headings open at `offset`, outermost first."""
    ### BEGIN SOLUTION hint: re.finditer(r"^(#{1,6})\s+(.+?)\s*$", markdown, re.M) finds the headings; keep a stack of (level, title), dropping entries of level >= the new heading's before pushing it
    stack = []
    for m in re.finditer(r"^(#{1,6})\s+(.+?)\s*$", markdown, re.M):
        if m.start() > offset:
            break
        level = len(m.group(1))
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, m.group(2))]
    return [t for _, t in stack]
    ### END SOLUTION


# %%
check("section_path", section_path)

# %% [markdown]
# ## 4. Within a budget
#
# **Task.** `fit_budget(lengths, budget)` takes the token counts of ranked hits and the
# number of tokens the reader may read. Return how many tokens of each hit are handed over:
# each hit whole while it fits in what is left; the first hit that does not fit gets only
# what is left (nothing, if nothing is); no hit after it.
#
# **Examples.** `fit_budget([200, 200, 200], 512)` → `[200, 200, 112]`;
# `fit_budget([1000, 50], 256)` → `[256]`; `fit_budget([300, 10], 300)` → `[300]`.
#
# **Why budgets.** At equal *k*, a retriever that returns 1,000-token sections beats one
# that returns 200-token chunks simply by handing over five times the text. The reader pays
# for tokens, so compare methods at equal tokens.

# %%
def fit_budget(lengths, budget):
    """Tokens handed from each ranked hit within `budget`."""
    ### BEGIN SOLUTION hint: keep `left = budget`; take min(length, left) of each hit while left > 0, and stop after the first hit you had to cut
    out, left = [], budget
    for n in lengths:
        if left <= 0:
            break
        out.append(min(n, left))
        if n > left:
            break
        left -= n
    return out
    ### END SOLUTION


# %%
check("fit_budget", fit_budget)

# %% [markdown]
# ## 5. The filter language
#
# **Task.** `where_matches(metadata, where)` says whether an item's metadata passes a filter.
# Every key of `where` must hold. A bare value means *equal*; a list means *one of*; a dict
# maps operators to values: `$eq`, `$ne`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte`
# (dates are ISO strings, so they compare as strings). A key missing from the metadata fails
# every condition except `$ne` and `$nin`.
#
# **Examples.**
#
# ```python
# page = {"status": "superseded", "updated": "2024-02-10", "department": "billing"}
# where_matches(page, {"status": {"$ne": "superseded"}})                  # → False
# where_matches(page, {"department": ["billing", "account"]})             # → True
# where_matches(page, {"updated": {"$gte": "2025-01-01", "$lt": "2026-01-01"}})  # → False
# ```
#
# **Why.** A retired policy matches a question as well as the current one does, so no score
# keeps it out: only a filter does, and it must be applied *inside* the search.

# %%
def where_matches(metadata, where):
    """Does `metadata` pass every condition of `where`?"""
    ### BEGIN SOLUTION hint: turn each condition into (operator, value) pairs (bare value -> $eq, list -> $in); a missing key passes only $ne and $nin
    ops = {"$eq": lambda v, a: v == a, "$ne": lambda v, a: v != a,
           "$in": lambda v, a: v in a, "$nin": lambda v, a: v not in a,
           "$gt": lambda v, a: v > a, "$gte": lambda v, a: v >= a,
           "$lt": lambda v, a: v < a, "$lte": lambda v, a: v <= a}
    for key, cond in where.items():
        value = metadata.get(key)
        if isinstance(cond, dict):
            pairs = cond.items()
        elif isinstance(cond, list):
            pairs = [("$in", cond)]
        else:
            pairs = [("$eq", cond)]
        for op, arg in pairs:
            if value is None and op not in ("$ne", "$nin"):
                return False
            if not ops[op](value, arg):
                return False
    return True
    ### END SOLUTION


# %%
check("where_matches", where_matches)

# %% [markdown]
# ## 6. Section paths of real chunks
#
# Contextual retrieval puts each chunk's heading path in front of it. Below, real help-centre
# articles cut into chunks of at most 300 characters (character lengths, so no tokenizer is
# needed), with each chunk's start offset.
#
# **Task.** `heading_paths(text, offsets)` returns the section path (your `section_path`) at each
# offset, one list per offset. The check uses real articles and their chunk offsets.

# %%
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre
from ragbook.expansion import fit_budget

hc = load_helpcentre()
doc = hc.doc("billing-refund-policy")
offsets = [c.start for c in chunk_documents([doc], size=300, overlap=0, length="chars")]
print(f"{doc.id}: {len(offsets)} chunks starting at {offsets}")


# %%
def heading_paths(text, offsets):
    """The section path at every offset."""
    ### BEGIN SOLUTION hint: [section_path(text, offset) for offset in offsets]
    return [section_path(text, offset) for offset in offsets]
    ### END SOLUTION


# %%
check("heading_paths", heading_paths)

# %% [markdown]
# ## 7. Predict, then run: whole articles in a 512-word budget
#
# BM25 ranks the help centre's articles for the question below; `fit_budget` hands the reader
# whole hits while they fit in 512 words and cuts the first that does not. **Before running the
# cell after next**, predict how many *whole* articles the reader gets. The average article length
# is printed; a prediction within 1 passes.

# %%
question = [q for q in hc.split("dev") if q.gold][0]
print(f"question: {question.text!r}")
print(f"average article: {sum(len(d.text.split()) for d in hc.documents) / len(hc.documents):.0f} "
      f"words")


# %%
def predict_whole_in_budget():
    """My prediction, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a whole number; 512 words divided by the length of a typical article
    return 1
    ### END SOLUTION


# %%
hits = BM25Index().build(hc.documents).search(question.text, k=10)
handed = fit_budget(hits, 512, length="words")
whole = sum(len(h.text) == len(o.text) for h, o in zip(handed, hits))
print(f"words of the top 3: {[len(h.text.split()) for h in hits[:3]]}; handed {len(handed)} "
      f"hits, {whole} whole")

# %%
check("predict_whole_in_budget", predict_whole_in_budget)

# %% [markdown]
# Whole articles are big units for a reader: at this budget the reader gets one article whole and
# the start of the next (the printed lengths say why). Chunks, or parent documents cut to the
# budget, are how sections 1 and 4 hand over more sources for the same tokens.

# %% [markdown]
# ## 8. Choose on some questions, score on others
#
# **Task.** `held_out_choice(scores, folds)` takes per-question scores of several settings
# (`{setting: {question id: MRR@10}}`) and a split of the question ids into folds. For each
# fold, choose the setting with the best total score over the questions of the *other* folds
# (the first one on a tie), and add up that setting's scores on the fold's own questions.
# Return the total divided by the number of questions.
#
# **Example.** With `{"a": {"q1": 1, "q2": 0, "q3": 0.5, "q4": 0.5}, "b": {"q1": 0, "q2": 0.5,
# "q3": 1, "q4": 0}}` and folds `[["q1", "q2"], ["q3", "q4"]]`: fold 1 is scored with the
# choice made on q3 and q4 (a tie: `a`), fold 2 with the choice made on q1 and q2 (`a`) → `0.5`.
#
# **Why.** The best of many settings, scored on the questions it was chosen with, is the
# maximum of many noisy numbers: it looks better than it is. Choosing without the fold you score
# gives an estimate of what choosing is worth on questions it never saw (chapter 10, "Your
# labels decide").

# %%
def held_out_choice(scores, folds):
    """Mean score on every question of the setting chosen without its fold."""
    ### BEGIN SOLUTION hint: for each fold, rest = the ids of the other folds; best = max(scores, key=lambda s: sum(scores[s][q] for q in rest)); add sum(scores[best][q] for q in fold)
    ids = [q for fold in folds for q in fold]
    total = 0.0
    for n, fold in enumerate(folds):
        rest = [q for m, other in enumerate(folds) if m != n for q in other]
        best = max(scores, key=lambda s: sum(scores[s][q] for q in rest))
        total += sum(scores[best][q] for q in fold)
    return total / len(ids)
    ### END SOLUTION


# %%
check("held_out_choice", held_out_choice)

# %% [markdown]
# ## Try it (ungraded)
#
# The superseded-page trap in miniature: three pages, the retired one first by score. What
# does a reader handed the top two of 600 tokens see, with and without the filter?

# %%
pages = [("billing-refund-policy-2024", 0.83, 380, {"status": "superseded", "updated": "2024-02-10"}),
         ("billing-refund-policy", 0.81, 420, {"status": "current", "updated": "2025-06-11"}),
         ("billing-seat-add-ons", 0.55, 300, {"status": "current", "updated": "2025-03-02"})]
with trying("where_matches", "fit_budget"):
    for where in ({}, {"status": {"$ne": "superseded"}}):
        kept = [p for p in pages if where_matches(p[3], where)][:2]
        handed = fit_budget([p[2] for p in kept], 600)
        print(f"filter {where}: " + ", ".join(f"{p[0]} ({n} tokens)" for p, n in
                                                zip(kept, handed)))
