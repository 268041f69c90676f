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
# # 00 · Why retrieve at all? The cost arithmetic
#
# A support team has about 12,000 resolved tickets and a help centre. An agent types a
# question in plain English and wants the answer, with citations, from that history.
#
# The simplest design that could work: hand *every* ticket to a large language model with
# the question, and let it find the answer. This chapter prices that design, then prices the
# alternative the rest of the book builds — **retrieve a few candidates, then read only
# those** — and shows why the two stages are judged by different numbers.

# %%
# which models make this chapter's numbers, and where the chapter sits in the pipeline
from ragbook import models
from ragbook.figures import pipeline_map

print(models.banner())
stage_map = pipeline_map(chapter=0)

# %% [markdown]
# ## The corpus we are pricing
#
# `ragbook.datasets.generate_tickets` makes 12,000 synthetic resolved tickets grounded in the
# Brightdesk help centre. They are generated, so we use them only for their *size* — never
# for claims about quality. How long is a ticket, in the tokens an LLM bills for?

# %%
import math
import statistics

from ragbook.chunking import count_tokens
from ragbook.datasets import generate_tickets

tickets = generate_tickets(12_000, seed=0)
sample = tickets[:300]
mean_tokens = statistics.mean(count_tokens(t.text) for t in sample)
print(f"{len(tickets):,} tickets; mean length of the first 300: {mean_tokens:.0f} tokens "
      f"(all-MiniLM-L6-v2's tokenizer)")
print(tickets[0].text[:600], "...")

# %% [markdown]
# Close to 800 tokens a ticket (tokenizers differ by a few percent; an LLM's would count
# slightly differently). We use the round storyline figures from here on: 12,000 tickets ×
# 800 tokens, $3 per million input tokens, 600 ms per LLM call.
#
# ## Design 1: ask the LLM about every ticket
#
# From scratch, in plain Python:

# %%
docs, tokens_per_doc = 12_000, 800
price_per_million = 3.00           # $ per million input tokens
call_latency = 0.6                 # seconds per LLM call
parallel = 50                      # calls in flight at once

naive_tokens = docs * tokens_per_doc
naive_dollars = naive_tokens / 1e6 * price_per_million
naive_sequential = docs * call_latency
naive_parallel = math.ceil(docs / parallel) * call_latency

print(f"input tokens per question: {naive_tokens:,}")
print(f"cost per question:         ${naive_dollars:.2f}")
print(f"sequential latency:        {naive_sequential:,.0f} s = {naive_sequential / 3600:.1f} h")
print(f"{parallel} calls in parallel:     {naive_parallel:.0f} s = {naive_parallel / 60:.1f} min")

# %% [markdown]
# Nearly ten million tokens and almost thirty dollars *per question*, and even with 50
# calls in flight the agent waits minutes — while 50 concurrent requests is exactly the kind
# of load that trips an API's rate limit. The design does not survive its first day.
#
# ## Design 2: retrieve, then read
#
# A retriever (a vector search, chapters 2–4) picks a handful of candidates in tens of
# milliseconds for practically nothing. The LLM then reads only those, once.

# %%
k = 5
retrieval_latency = 0.03           # seconds: a vector search over 12,000 vectors
reader_latency = 1.3               # seconds: one LLM call reading k candidates

rr_tokens = k * tokens_per_doc
rr_dollars = rr_tokens / 1e6 * price_per_million
rr_latency = retrieval_latency + reader_latency
reduction = docs / k

print(f"input tokens per question: {rr_tokens:,}")
print(f"cost per question:         ${rr_dollars:.3f}")
print(f"latency:                   {rr_latency:.2f} s")
print(f"search space cut by:       {reduction:,.0f}x")

# %% [markdown]
# `ragbook.cost` is the same arithmetic as a reusable calculator. It must agree with the
# cells above:

# %%
from ragbook import cost

w = cost.Workload()   # the storyline defaults
naive, rr = cost.naive(w), cost.retriever_reader(w)
assert naive.input_tokens == naive_tokens and math.isclose(naive.dollars, naive_dollars)
assert naive.latency_sequential_s == naive_sequential and naive.latency_parallel_s == naive_parallel
assert rr.input_tokens == rr_tokens and math.isclose(rr.dollars, rr_dollars)
assert cost.reduction_factor(w) == reduction
print("ragbook.cost agrees with the from-scratch arithmetic")

# %% [markdown]
# How do the two designs scale with the corpus? The naive design grows linearly with every
# ticket you add; the retriever–reader design does not grow at all (the retrieval cost grows,
# but it is measured in milliseconds and fractions of a cent — chapter 3 times it).

# %%
import matplotlib.pyplot as plt

sizes = [1_000, 3_000, 12_000, 30_000, 100_000, 300_000]
naive_cost = [cost.naive(cost.Workload(corpus_docs=n)).dollars for n in sizes]
rr_cost = [cost.retriever_reader(cost.Workload(corpus_docs=n)).dollars for n in sizes]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.loglog(sizes, naive_cost, "o-", label="ask every document")
ax.loglog(sizes, rr_cost, "s-", label="retrieve 5, then read")
ax.set_xlabel("documents in the corpus"), ax.set_ylabel("$ per question")
ax.grid(True, which="both", alpha=0.3), ax.legend()
plt.show()
for n, a, b in zip(sizes, naive_cost, rr_cost):
    print(f"{n:>8,} docs: ${a:>9.2f} vs ${b:.3f}")

# %% [markdown]
# ## The cost of k
#
# The one knob that moves the retriever–reader bill is k, the number of candidates the
# reader gets. It is linear, and it is also a quality knob: chapter 3 measures how recall
# grows with k and why a bigger k is not a free fix.

# %%
for k_ in (1, 3, 5, 10, 20, 50):
    r = cost.retriever_reader(cost.Workload(k=k_))
    print(f"k = {k_:2d}: {r.input_tokens:6,} tokens, ${r.dollars:.3f} per question")

# %% [markdown]
# ## Try it
#
# Move the sliders: a corpus ten times larger, a cheaper model, more parallelism. The table
# is `ragbook.widgets.cost_table`, the same function the tests check.

# %%
from ragbook import widgets

print(widgets.cost_table())   # the default state, printed so the notebook's output is checkable
widgets.cost_explorer()

# %% [markdown]
# ## Two stages, two different jobs
#
# The two stages optimise different things:
#
# * the **retriever** is judged by **recall** — is the answer anywhere in the pile it hands
#   over? Returning 5 documents of which one is right is a retriever doing its job;
# * the **reader** is judged by **precision** — of what it says, how much is right and
#   supported?
#
# The asymmetry matters: if the answer is not among the candidates, nothing downstream can
# repair it. Here is one real question against the help centre, using the simplest possible
# retriever — one vector per article, compared by inner product (chapters 2–3 explain why
# this works).

# %%
import numpy as np

from ragbook import Encoder
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
encoder = Encoder()
doc_vectors = encoder.encode_passages([d.text for d in hc.documents])

question = "What is the refund window for enterprise contracts?"
scores = doc_vectors @ encoder.encode_queries([question])[0]
top5 = np.argsort(-scores)[:5]
for rank, i in enumerate(top5, 1):
    d = hc.documents[i]
    print(f"{rank}. {scores[i]:.3f}  {d.id:32s} ({d.metadata['status']})")
top_ids = [hc.documents[i].id for i in top5]
assert "billing-refund-policy" in top_ids and "billing-refund-policy-2024" in top_ids

# %% [markdown]
# The page that states the enterprise window, `billing-refund-policy`, is in that list:
# the retriever has done its job even though most of the five are not the answer. The
# reader's job is to pick the right one — and not to be fooled by the *superseded* 2024
# policy, also in the list, which gives a different window (chapter 10 filters it out).
#
# Now the failure the asymmetry warns about: five candidates that all look on-topic —
# refunds, cancellations, billing — none of which states the enterprise window.

# %%
answer = "Enterprise annual contracts carry a 14-day refund window"
on_topic_but_wrong = [d for d in (hc.documents[i] for i in np.argsort(-scores))
                      if answer not in d.text and d.metadata["status"] == "current"][:5]
for d in on_topic_but_wrong:
    print(f"  {d.id:32s} contains the answer: {answer in d.text}")
print("answer in the pile:", any(answer in d.text for d in on_topic_but_wrong))

# %% [markdown]
# A reader handed that pile has no way to answer correctly: it can only abstain or invent.
# That is why chapter 4 measures the retriever on its own, with recall as its headline
# number — recall is the ceiling of the whole system.

# %% [markdown]
# ## What you built, what you measured
#
# You priced both designs from scratch and checked `ragbook.cost` against your arithmetic,
# then ran the simplest possible retriever on the help centre and saw what it hands the
# reader. The chapter's numbers, printed from the variables above (storyline figures for
# the prices and latencies, measured for the tickets and the help centre):

# %%
summary = [
    ("mean ticket length (first 300, all-MiniLM-L6-v2 tokens)", f"{mean_tokens:.0f}"),
    ("ask every ticket: input tokens / $ per question", f"{naive_tokens:,} / ${naive_dollars:.2f}"),
    ("ask every ticket: sequential / parallel latency",
     f"{naive_sequential / 3600:.1f} h / {naive_parallel / 60:.1f} min ({parallel} in flight)"),
    (f"retrieve {k}, then read: input tokens / $ per question", f"{rr_tokens:,} / ${rr_dollars:.3f}"),
    ("retrieve, then read: latency", f"{rr_latency:.2f} s"),
    ("search space cut by", f"{reduction:,.0f}x"),
    ("rank of billing-refund-policy in the help-centre top 5", f"{top_ids.index('billing-refund-policy') + 1}"),
    ("answer in the on-topic-but-wrong pile", f"{any(answer in d.text for d in on_topic_but_wrong)}"),
]
for what, value in summary:
    print(f"{what:58s} {value}")
