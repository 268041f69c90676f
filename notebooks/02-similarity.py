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
# # 02 · Similarity: cosine, dot product, Euclidean
#
# A retriever ranks chunks by how close their vectors are to the question's vector. There
# are three common ways to say "close". This chapter defines them, proves on real
# embeddings that they agree once vectors are normalised, shows how the one that is not
# length-blind goes wrong, and ends with the recipe every vector index uses.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=2)

# %%
import time

import numpy as np

from ragbook import Encoder, models, similarity
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
encoder = Encoder()
print(f"profile: {models.active_profile()}, encoder: {encoder.model_id}")

# %% [markdown]
# ## Three definitions
#
# For vectors $a$ and $b$:
#
# * **dot product** $a \cdot b = \sum_i a_i b_i$ — grows with the angle's cosine *and* with
#   both lengths;
# * **cosine** $\cos(a, b) = \dfrac{a \cdot b}{\lVert a\rVert \lVert b\rVert}$ — direction
#   only, between −1 and 1;
# * **Euclidean distance** $\lVert a - b\rVert = \sqrt{\sum_i (a_i - b_i)^2}$ — smaller is
#   closer.
#
# From scratch, and checked against `ragbook.similarity` on a small example and on random
# matrices:

# %%
def dot(a, b):
    return float(sum(x * y for x, y in zip(a, b)))


def norm(a):
    return dot(a, a) ** 0.5


def cosine(a, b):
    return dot(a, b) / (norm(a) * norm(b))


def euclidean(a, b):
    return sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5


a, b = [3.0, 4.0], [4.0, 3.0]
print(f"dot {dot(a, b)}, cosine {cosine(a, b):.4f}, euclidean {euclidean(a, b):.4f}")

rng = np.random.default_rng(0)
A, B = rng.normal(size=(5, 16)), rng.normal(size=(4, 16))
for name, mine, theirs in [("dot", dot, similarity.dot), ("cosine", cosine, similarity.cosine),
                           ("euclidean", euclidean, similarity.euclidean)]:
    ours = np.array([[mine(x, y) for y in B] for x in A])
    assert np.allclose(ours, theirs(A, B)), name
print("from-scratch definitions agree with ragbook.similarity (all 5 x 4 pairs)")

# %% [markdown]
# ## For unit vectors the three are one
#
# Expand the squared distance: $\lVert a-b\rVert^2 = \lVert a\rVert^2 + \lVert b\rVert^2
# - 2\,a\cdot b$. When both vectors have length 1 this is $2 - 2\cos(a, b)$, and the dot
# product *is* the cosine. So a cosine fixes the distance exactly; two examples, measured on
# unit vectors in 2-D:

# %%
for c in (0.9, 0.5):
    theta = np.arccos(c)
    u, v = np.array([1.0, 0.0]), np.array([np.cos(theta), np.sin(theta)])
    print(f"cos = {c}: |a-b|^2 = {similarity.euclidean(u, v) ** 2:.3f} (2 - 2cos = {2 - 2 * c:.3f})")

# %% [markdown]
# That is algebra; now check it on real embeddings — every pair among the help centre's
# chunks, as the encoder returns them (it normalises):

# %%
chunks = chunk_documents(hc.documents, size=128, overlap=16)
X = encoder.encode_passages([c.text for c in chunks])
print(f"{len(chunks)} chunks, vectors of length {np.linalg.norm(X, axis=1).min():.4f}"
      f"-{np.linalg.norm(X, axis=1).max():.4f}")
cos = similarity.cosine(X, X)
dist2 = similarity.euclidean(X, X) ** 2
print(f"max |(|a-b|^2) - (2 - 2cos)| over {len(chunks) ** 2:,} pairs: {np.abs(dist2 - (2 - 2 * cos)).max():.2e}")
print(f"max |dot - cos|: {np.abs(similarity.dot(X, X) - cos).max():.2e}")

# %% [markdown]
# Same ranking, then, whichever measure you pick — verified for every answerable dev
# question over every chunk (ties aside, which is why we compare the top 10 rather than
# every position):

# %%
dev = [q for q in hc.split("dev") if q.gold]
Q = encoder.encode_queries([q.standalone for q in dev])
orders = {"cosine": np.argsort(-similarity.cosine(Q, X), axis=1)[:, :10],
          "dot": np.argsort(-similarity.dot(Q, X), axis=1)[:, :10],
          "euclidean": np.argsort(similarity.euclidean(Q, X), axis=1)[:, :10]}
same = np.all(orders["cosine"] == orders["dot"], axis=1) & np.all(orders["cosine"] == orders["euclidean"], axis=1)
print(f"identical top-10 under all three measures: {same.sum()} of {len(dev)} questions")

# %% [markdown]
# ## When vectors are not normalised, the dot product rewards length
#
# Vectors are not always unit length. Pool a chunk's token vectors by *summing* instead of
# averaging — an easy mistake, and what some models do — and longer chunks get longer
# vectors. The direction is unchanged, but the dot product now favours whatever is long.
# Build sum-pooled vectors from the encoder's real token embeddings:

# %%
model = encoder.model
token_vectors = model.encode([c.text for c in chunks], output_value="token_embeddings",
                             batch_size=32, show_progress_bar=False)
S = np.stack([t.sum(0).numpy() for t in token_vectors])
lengths = np.array([len(t) for t in token_vectors])
print(f"sum-pooled vector lengths: {np.linalg.norm(S, axis=1).min():.0f}-{np.linalg.norm(S, axis=1).max():.0f}; "
      f"correlation with token count: {np.corrcoef(np.linalg.norm(S, axis=1), lengths)[0, 1]:.2f}")

long_cut = np.quantile(lengths, 0.9)
unnormalised = {}   # measure -> (share of top-1 among the longest chunks, share from the gold article)
for name, scores in [("dot (unnormalised)", similarity.dot(Q, S)), ("cosine", similarity.cosine(Q, S))]:
    top1 = np.argmax(scores, axis=1)
    share_long = np.mean(lengths[top1] >= long_cut)
    gold_hit = np.mean([chunks[j].doc_id in q.gold for j, q in zip(top1, dev)])
    unnormalised[name] = (share_long, gold_hit)
    print(f"{name:20s}: top-1 is among the 10% longest chunks for {share_long:.0%} of questions; "
          f"top-1 from the gold article: {gold_hit:.0%}")

# %% [markdown]
# With the unnormalised dot product the longest chunks take the top spot more often and
# fewer questions find their article; cosine on the *same* vectors ignores length and
# recovers. (Real sum-pooling models are trained with that pooling, so they suffer less
# than this; the point is what the dot product does to vectors whose length carries no
# meaning.)
#
# ## The recipe: normalise once, then take inner products
#
# Cosine needs two norms per comparison; an inner product of pre-normalised vectors needs
# none and gives exactly the cosine. Normalise the corpus once at indexing time and every
# query becomes one matrix–vector product — which is also what FAISS's inner-product index
# (chapter 3) computes.

# %%
q = Q[0]
Xn = similarity.normalise(X)
t = time.perf_counter()
for _ in range(50):
    slow = (X @ q) / (np.linalg.norm(X, axis=1) * np.linalg.norm(q))
t_cos = (time.perf_counter() - t) / 50
t = time.perf_counter()
for _ in range(50):
    fast = Xn @ q
t_ip = (time.perf_counter() - t) / 50
assert np.allclose(slow, fast, atol=1e-5)
print(f"cosine with norms each time: {t_cos * 1e3:.3f} ms; inner product on normalised vectors: "
      f"{t_ip * 1e3:.3f} ms (same scores)")

# %% [markdown]
# ## Try it: rotate and stretch vectors in 2-D
#
# A query and three documents. Stretch document B: its dot product grows, its cosine
# does not. Rotate A towards the query: all three measures agree it got closer. The
# rankings are `ragbook.widgets.similarity_rankings`, called on the vectors you set.

# %%
from ragbook.figures import vectors_2d
from ragbook.widgets import polar, similarity_playground, similarity_rankings

query = polar(30, 1.0)
docs = [polar(40, 0.6), polar(80, 3.0), polar(10, 1.5)]
for metric, order in similarity_rankings(query, docs).items():   # the default state
    print(f"{metric:10s} " + " > ".join("ABC"[i] for i in order))
_ = vectors_2d(query, docs)   # the default state as a picture; the sliders below redraw it
similarity_playground()

# %% [markdown]
# ## What you built, what you measured
#
# You wrote the three measures from scratch and checked them against `ragbook.similarity`,
# verified on real embeddings that normalised vectors make them rank alike, watched an
# unnormalised dot product favour long vectors, and timed the normalise-once recipe. The
# chapter's numbers, printed from the variables above (timings vary by machine):

# %%
summary = [
    ("help-centre chunks (128 tokens, 16 overlap) compared pairwise", f"{len(chunks)}"),
    ("max |(|a-b|^2) - (2 - 2cos)| on real embeddings", f"{np.abs(dist2 - (2 - 2 * cos)).max():.2e}"),
    ("dev questions with identical top-10 under all three", f"{same.sum()} of {len(dev)}"),
    ("sum-pooled: top-1 among the longest 10%, dot / cosine",
     f"{unnormalised['dot (unnormalised)'][0]:.0%} / {unnormalised['cosine'][0]:.0%}"),
    ("sum-pooled: top-1 from the gold article, dot / cosine",
     f"{unnormalised['dot (unnormalised)'][1]:.0%} / {unnormalised['cosine'][1]:.0%}"),
    ("cosine with norms vs inner product on normalised (ms)", f"{t_cos * 1e3:.3f} vs {t_ip * 1e3:.3f}"),
]
for what, value in summary:
    print(f"{what:62s} {value}")
