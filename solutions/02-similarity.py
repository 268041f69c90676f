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
# # 02 · Similarity — exercises
#
# A dense retriever ranks chunks by how close their vectors are to the query's vector. There are
# three ways to measure "close": cosine, dot product and Euclidean distance. They look like three
# different choices, but once the vectors are normalised they give the same ranking. You write
# the pieces of that argument here and finish with the recipe every vector index uses:
# *normalise, then take inner products*.
#
# Use plain numpy (`np.dot`, `np.linalg.norm`, `np.argsort`). `check(name, function)` compares
# your function with `ragbook.similarity` on several inputs. If a case fails, it shows you the
# input, the expected value and what you returned.

# %%
import math

import numpy as np

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Cosine similarity
#
# **Task.** `cosine(a, b)` takes two 1-D numpy arrays of the same length and returns the cosine
# of the angle between them, a `float` in [-1, 1].
#
# **Examples.**
# `cosine(np.array([3.0, 4.0]), np.array([4.0, 3.0]))` → `0.96`,
# `cosine(np.array([1.0, 0.0]), np.array([0.0, 2.0]))` → `0.0`,
# `cosine(np.array([1.0, 2.0, 3.0]), np.array([-1.0, -2.0, -3.0]))` → `-1.0`
#
# Cosine depends only on direction. A vector ten times longer has the same cosine with everything
# as the original has.

# %%
def cosine(a, b):
    """Cosine of the angle between vectors a and b."""
    ### BEGIN SOLUTION hint: the dot product measures direction and length together; divide the lengths out
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    ### END SOLUTION


# %%
check("cosine", cosine)

# %% [markdown]
# ## 2. Normalising a vector
#
# **Task.** `normalise(x)` takes a 1-D numpy array and returns a new array that points the same
# way with length 1. The all-zero vector has no direction, so return it unchanged (all zeros)
# instead of dividing by zero.
#
# **Examples.**
# `normalise(np.array([3.0, 4.0]))` → `array([0.6, 0.8])`,
# `normalise(np.zeros(3))` → `array([0., 0., 0.])`
#
# When both vectors have length 1, the denominator of the cosine is 1. The dot product then
# *is* the cosine. That is why an index normalises every vector once, when it is stored.

# %%
def normalise(x):
    """x scaled to unit length; the zero vector stays zero."""
    ### BEGIN SOLUTION hint: compute the length once; what should happen when it is 0?
    x = np.asarray(x, dtype=float)
    length = np.linalg.norm(x)
    return x / length if length > 0 else x.copy()
    ### END SOLUTION


# %%
check("normalise", normalise)

# %% [markdown]
# ## 3. Euclidean distance from cosine
#
# For unit vectors, ‖a − b‖² = ‖a‖² + ‖b‖² − 2 a·b = 2 − 2 cos(a, b). The distance therefore
# depends only on the cosine, and it falls as the cosine rises. So "nearest by distance" and
# "most similar by cosine" pick the same vectors in the same order.
#
# **Task.** `distance_from_cosine(c)` takes the cosine `c` of two *unit* vectors (a `float` in
# [-1, 1]) and returns their Euclidean distance ‖a − b‖ (a `float`).
#
# **Examples.**
# `distance_from_cosine(0.9)` → `0.44721359549995787` (√0.2),
# `distance_from_cosine(0.5)` → `1.0`,
# `distance_from_cosine(-1.0)` → `2.0` (opposite points of the unit sphere)

# %%
def distance_from_cosine(c):
    """Euclidean distance between two unit vectors whose cosine is c."""
    ### BEGIN SOLUTION hint: expand |a - b|^2 as (a - b)·(a - b) and use |a| = |b| = 1
    # max(0, ...) guards against a tiny negative from rounding when c is 1
    return math.sqrt(max(0.0, 2 - 2 * c))
    ### END SOLUTION


# %%
check("distance_from_cosine", distance_from_cosine)

# %% [markdown]
# ## 4. Top-k by inner product: the recipe
#
# **Task.** `top_k_by_inner_product(query, docs, k)` takes a 1-D query vector, a 2-D array `docs`
# with one document vector per row, and `k`. Normalise the query and every row, score each
# document by its inner product with the query, and return the row indices of the `k`
# best-scoring documents, best first, as a list of ints.
#
# **Example.**
# `top_k_by_inner_product(np.array([1.0, 0.0]), np.array([[1.0, 0.2], [0.0, 5.0], [10.0, 8.0], [0.5, 0.0]]), 2)`
# → `[3, 0]`
#
# The *raw* dot product would rank row 2 first (score 10). It is the longest vector, not the best
# aimed. An unnormalised dot product rewards length, so a long vector can beat the vectors that
# point the right way. Normalising first makes the inner product exactly cosine, and it is also
# the cheapest score to compute: one matrix–vector product.

# %%
def top_k_by_inner_product(query, docs, k):
    """Indices of the k rows of docs most similar to query (cosine), best first."""
    ### BEGIN SOLUTION hint: normalise each row (mind the axis), one matrix-vector product, then sort the scores from high to low
    docs = np.asarray(docs, dtype=float)
    q = np.asarray(query, dtype=float)
    q = q / np.linalg.norm(q)
    lengths = np.linalg.norm(docs, axis=1, keepdims=True)
    unit = np.divide(docs, lengths, out=np.zeros_like(docs), where=lengths > 0)
    scores = unit @ q
    return [int(i) for i in np.argsort(-scores)[:k]]
    ### END SOLUTION


# %%
check("top_k_by_inner_product", top_k_by_inner_product)

# %% [markdown]
# ## 5. Cosine on real text, without a model
#
# A vector does not have to come from a neural encoder. Give each distinct word its own axis and
# count how often a text uses it: cosine then says how much two texts share their vocabulary (the
# idea behind BM25, chapter 5). Below, two help-centre articles as the BM25 tokenizer splits them
# (lower case, stopwords dropped).
#
# **Task.** `term_cosine(tokens_a, tokens_b)` builds the two count vectors over the words of
# both lists and returns their cosine (a `float`). The check uses pairs of real articles,
# including a page and the retired version it replaced.

# %%
from collections import Counter

from ragbook.bm25 import Tokenizer
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
words = {d.id: Tokenizer()(d.text) for d in hc.documents}
print(len(words["billing-refund-policy"]), "tokens, starting", words["billing-refund-policy"][:8])


# %%
def term_cosine(tokens_a, tokens_b):
    """Cosine between the word-count vectors of two token lists."""
    ### BEGIN SOLUTION hint: vocabulary = sorted set of both lists; count with collections.Counter; then your cosine
    from collections import Counter

    vocab = sorted(set(tokens_a) | set(tokens_b))
    ca, cb = Counter(tokens_a), Counter(tokens_b)
    a = np.array([ca[t] for t in vocab], dtype=float)
    b = np.array([cb[t] for t in vocab], dtype=float)
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    ### END SOLUTION


# %%
check("term_cosine", term_cosine)

# %% [markdown]
# ## 6. Predict, then run: a page and its retired version
#
# `billing-refund-policy-2024` is the retired refund policy; `billing-refund-policy` replaced it.
# **Before running the cell after next**, predict the word-count cosine of the two. For scale:
# two unrelated articles score low, a page with itself scores 1. A prediction within `0.15` of the
# real value passes.

# %%
def predict_term_cosine():
    """My prediction of the cosine, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a number between 0 and 1
    return 0.7
    ### END SOLUTION


# %%
from ragbook.similarity import cosine


def package_term_cosine(a, b):
    """The same cosine, computed with ragbook.similarity.cosine."""
    vocab = sorted(set(a) | set(b))
    ca, cb = Counter(a), Counter(b)
    return float(cosine(np.array([ca[t] for t in vocab], dtype=float),
                        np.array([cb[t] for t in vocab], dtype=float)))


same_topic = package_term_cosine(words["billing-refund-policy"],
                                 words["billing-refund-policy-2024"])
unrelated = package_term_cosine(words["api-rate-limits"], words["security-sso-setup"])
print(f"refund policy vs its retired version: {same_topic:.2f}; "
      f"rate limits vs SSO setup: {unrelated:.2f}")

# %%
check("predict_term_cosine", predict_term_cosine)

# %% [markdown]
# The two refund pages share most of their vocabulary, so their cosine is far above the unrelated
# pair's, but not near 1: the new page was rewritten, not just edited. This is why a retired page
# is a trap for retrieval (chapter 9): to a word-count vector, and to a dense encoder, it looks
# like the right answer.

# %% [markdown]
# ## Try it (ungraded)
#
# One document vector is stretched to 20× the length of the others. Under the raw dot product it
# ranks first for almost every query on its side of the space, which is about half of all random
# queries, whatever they ask. After normalising, it wins only the queries that actually point
# its way. Change `stretch` and see.

# %%
rng = np.random.default_rng(0)
docs = rng.normal(size=(10, 8))
stretch = 20.0
docs[4] *= stretch
queries = rng.normal(size=(200, 8))
raw_wins = int(np.sum(np.argmax(queries @ docs.T, axis=1) == 4))
print(f"document 4 ranks first for {raw_wins}/200 queries by raw dot product")
with trying("top_k_by_inner_product"):
    cos_wins = sum(top_k_by_inner_product(q, docs, 1) == [4] for q in queries)
    print(f"and for {cos_wins}/200 after normalising")
