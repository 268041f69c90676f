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
# # 00 · Why retrieve at all — exercises
#
# A support team has about 12,000 resolved tickets of ~800 tokens each. The naive design sends
# every ticket to the LLM for every question. Here you write the four lines of arithmetic that
# show why that design cannot work. Then you price the alternative: retrieve a handful of
# candidates, and have the LLM read only those.
#
# Nothing here needs a model, only multiplication and one `ceil`. The point is to know these
# numbers well enough to redo them for your own corpus. Every design decision later in the book
# (how many candidates to read, how big a chunk is) goes back to this bill.
#
# Each exercise is a function for you to complete. The cell below it runs
# `check(name, function)`, which calls your function on several inputs and compares the results
# with `ragbook.cost`. If a case fails, it shows you the input, the expected value and what you
# returned.

# %%
import math

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Tokens per question, naive design
#
# **Task.** `naive_tokens(corpus_docs, tokens_per_doc)` returns how many input tokens a single
# question costs when every document in the corpus goes to the LLM (an `int`).
#
# **Example.** `naive_tokens(12_000, 800)` → `9600000`
#
# The count scales with the size of the corpus, not with the question. A corpus that doubles
# doubles the cost of *every* question, including the easy ones.

# %%
def naive_tokens(corpus_docs, tokens_per_doc):
    """Input tokens one question costs when the LLM reads every document."""
    ### BEGIN SOLUTION hint: how many documents does one question send, and how long is each?
    return corpus_docs * tokens_per_doc
    ### END SOLUTION


# %%
check("naive_tokens", naive_tokens)

# %% [markdown]
# ## 2. Dollars per question, naive design
#
# **Task.** `naive_dollars(corpus_docs, tokens_per_doc, price_per_million)` returns what one
# question costs in dollars (a `float`). Prices are quoted per million input tokens.
#
# **Example.** `naive_dollars(12_000, 800, 3.0)` → `28.8`
#
# That's \$28.80 to answer one agent's question once. A team asking a few hundred questions a
# day would spend more on this than on the agents' salaries.

# %%
def naive_dollars(corpus_docs, tokens_per_doc, price_per_million):
    """Dollars one question costs when the LLM reads every document."""
    ### BEGIN SOLUTION hint: first count the tokens, then mind the unit the price is quoted in
    tokens = corpus_docs * tokens_per_doc
    return tokens / 1_000_000 * price_per_million
    ### END SOLUTION


# %%
check("naive_dollars", naive_dollars)

# %% [markdown]
# ## 3. Latency with parallel calls
#
# One call per document, one after another: 12,000 × 0.6 s = 7,200 s, which is two hours. So you
# send the calls in parallel, `parallelism` at a time. They run in *waves*, and each wave lasts
# one call.
#
# **Task.** `parallel_latency(corpus_docs, parallelism, call_latency_s)` returns the seconds
# until the last answer comes back (a `float`).
#
# **Examples.** `parallel_latency(12_000, 50, 0.6)` → `144.0` (240 waves, about 2.4 minutes);
# `parallel_latency(101, 50, 1.0)` → `3.0`
#
# Why 3 and not 2.02? The 101st call has to wait until a slot frees up. It then takes a whole call
# to return, however few calls share its wave. So a partial last wave costs as much as a full
# one. Even 144 s assumes a provider that lets you keep 50 requests in flight, and rate limits
# usually won't.

# %%
def parallel_latency(corpus_docs, parallelism, call_latency_s):
    """Seconds until all `corpus_docs` calls return, `parallelism` of them at a time."""
    ### BEGIN SOLUTION hint: count the waves first; can a wave be a fraction of a call long?
    waves = math.ceil(corpus_docs / parallelism)
    return waves * call_latency_s
    ### END SOLUTION


# %%
check("parallel_latency", parallel_latency)

# %% [markdown]
# ## 4. The retriever–reader bill
#
# A retriever (a vector search: ~30 ms and close to \$0) picks `k` candidate documents. One reader
# call reads them. The bill now depends on `k`, not on the corpus.
#
# **Task.** `cost_of_k(k, tokens_per_doc, price_per_million)` returns the dollars the reader
# call costs for one question (a `float`). Count only the documents' tokens, as the naive
# design did.
#
# **Example.** `cost_of_k(5, 800, 3.0)` → `0.012`
#
# Reading 5 documents where the naive design read 12,000 cuts the pile by 12,000 / 5 = 2,400×,
# and cuts the bill by the same factor. The price is a new job: the retriever must get the right
# ticket into those 5. It is judged by *recall* (is the answer anywhere in the pile?), because
# nothing downstream can recover a document that was never retrieved.

# %%
def cost_of_k(k, tokens_per_doc, price_per_million):
    """Dollars one reader call costs when it reads the `k` retrieved documents."""
    ### BEGIN SOLUTION hint: the same arithmetic as the naive bill, over a much smaller pile
    return k * tokens_per_doc / 1_000_000 * price_per_million
    ### END SOLUTION


# %%
check("cost_of_k", cost_of_k)

# %% [markdown]
# ## 5. The retriever–reader bill on the real help centre
#
# The workloads above give every document the same length. Real articles differ, and the reader
# pays for the ones it is handed. Below, BM25 (chapter 5) ranks the help centre's articles for a
# real customer question, and `count_tokens` measures each article in encoder tokens. No model is
# loaded, only the encoder's tokenizer.
#
# **Task.** `reader_bill(ranked_token_counts, k, price_per_million)` returns the dollars of reader
# input when the reader reads the first `k` articles of a ranking (all of them if the ranking is
# shorter). `ranked_token_counts` lists the articles' token counts, best-ranked first. The check
# uses the rankings of three real questions.

# %%
from ragbook.bm25 import BM25Index
from ragbook.chunking import count_tokens
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
tokens = {d.id: count_tokens(d.text) for d in hc.documents}
question = [q for q in hc.split("dev") if q.gold][0]
ranked = [h.id for h in BM25Index().build(hc.documents).search(question.text, k=10)]
print(f"{len(tokens)} articles, {sum(tokens.values()):,} tokens in all")
print(f"question: {question.text!r}")
print("tokens of the top 10 articles, best first:", [tokens[d] for d in ranked])


# %%
def reader_bill(ranked_token_counts, k, price_per_million):
    """Dollars of reader input for the first k articles of a ranking."""
    ### BEGIN SOLUTION hint: add up the first k counts (a slice stops at the end of the list), then apply the price per million
    return sum(ranked_token_counts[:k]) * price_per_million / 1_000_000
    ### END SOLUTION


# %%
check("reader_bill", reader_bill)

# %% [markdown]
# ## 6. Predict, then run: how much does retrieval save here?
#
# The naive design sends every article with every question; the retriever–reader sends the 5
# articles BM25 ranks first for the question above. **Before running the cell after next**,
# predict the ratio: naive input tokens / retriever–reader input tokens, for this question. Use
# only what is printed above. A prediction within a factor of 2 of the real ratio passes.

# %%
def predict_naive_ratio():
    """My prediction of naive tokens / top-5 tokens, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a number; if every article had the same length, it would be (number of articles) / 5
    return 137 / 5   # as if every article were as long as the average one
    ### END SOLUTION


# %%
naive, top5 = sum(tokens.values()), sum(tokens[d] for d in ranked[:5])
print(f"naive: {naive:,} tokens; top 5: {top5:,} tokens; ratio {naive / top5:.1f}")
print(f"average article: {naive / len(tokens):.0f} tokens; average of the top 5: {top5 / 5:.0f}")

# %%
check("predict_naive_ratio", predict_naive_ratio)

# %% [markdown]
# With equal lengths the ratio would be the number of articles divided by 5. The real ratio
# printed above is smaller because the top 5 are longer than the average article (compare the
# two averages): a long page has more chances to contain the question's words. Still, an order of
# magnitude fewer tokens per question, and the gap grows with the corpus.

# %% [markdown]
# ## Try it (ungraded)
#
# Change the workload and see how the gap moves. Grow the corpus tenfold, or read 20 candidates
# instead of 5. The naive bill follows the corpus and the retriever–reader bill follows `k`.

# %%
corpus_docs, tokens_per_doc, price, k = 12_000, 800, 3.0, 5
with trying("naive_dollars", "cost_of_k", "parallel_latency"):
    naive = naive_dollars(corpus_docs, tokens_per_doc, price)
    read = cost_of_k(k, tokens_per_doc, price)
    print(f"naive ${naive:,.2f} per question, retrieve-then-read ${read:,.4f}: "
          f"{naive / read:,.0f}x cheaper")
    print(f"naive latency with 50 in flight: {parallel_latency(corpus_docs, 50, 0.6):,.0f} s")
