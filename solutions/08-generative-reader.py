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
# # 08 · The generative reader — exercises
#
# A generative reader writes the answer with a chat model, from the passages retrieval found.
# It can synthesise and rephrase, which the extractive reader cannot, but it can also invent.
# So the code around the model does the checking, and you write it here, from scratch:
#
# * **citations.** Every claim ends with `[n]`; the code checks that each n names a passage.
# * **reading order.** Where each passage goes in the prompt, against "lost in the middle".
# * **abstention.** An exact string the model replies with, so code can detect it.
# * **the prompt.** Numbered passages with their sources, fenced as reference material.
#
# The model's replies are given to you as strings; no model is loaded. `check(name, function)`
# compares your function with `ragbook` on several inputs. If a case fails, it shows you the
# input, the expected value and what you returned.

# %%
import re

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. Parse and check the citations
#
# **Task.** `parse_citations(reply, n_passages)` returns `(numbers, valid)`: `numbers` lists the
# `n` of every `[n]` in the reply, in order and with repeats, as ints; `valid` is `True` when
# there is at least one citation and every number is between 1 and `n_passages`.
#
# **Examples.**
# `parse_citations("14 days [1]. 30 days [3][1].", 3)` → `([1, 3, 1], True)`,
# `parse_citations("14 days [4].", 3)` → `([4], False)`,
# `parse_citations("Fourteen days.", 3)` → `([], False)`
#
# **Why check.** A citation is only worth something if it points at a passage the model was
# shown. `[4]` with three passages is invented, and a reply with no citation at all cannot be
# traced to a source. Both should be flagged, not shown to a user as grounded. A valid `n` maps
# back to passage `n`'s source, which is what the user sees.

# %%
def parse_citations(reply, n_passages):
    """([n for every [n] in reply], whether there is one and each is in 1..n_passages)."""
    ### BEGIN SOLUTION hint: a regular expression with a group for the digits between the brackets; remember that no citation is not valid
    numbers = [int(n) for n in re.findall(r"\[(\d+)\]", reply)]
    valid = len(numbers) > 0 and all(1 <= n <= n_passages for n in numbers)
    return numbers, valid
    ### END SOLUTION


# %%
check("parse_citations", parse_citations)

# %% [markdown]
# ## 2. Reading order against "lost in the middle"
#
# Language models use what is at the start and at the end of a long prompt better than what is
# in the middle (Liu et al., 2023, "Lost in the Middle").
#
# **Task.** `reading_order(ids)` takes passage ids best first and returns them in the order to
# put them in the prompt: the strongest first, the second-strongest last, the weakest in the
# middle. That is ranks 1, 3, 5, ... followed by the even ranks in reverse.
#
# **Examples.**
# `reading_order(["p1", "p2", "p3", "p4", "p5"])` → `["p1", "p3", "p5", "p4", "p2"]`,
# `reading_order(["p1", "p2"])` → `["p1", "p2"]`,
# `reading_order(["p1"])` → `["p1"]`
#
# The passages are numbered `[1]`, `[2]`, ... in this new order, so a citation refers to a
# position in the prompt, not to a retrieval rank. `ragbook.readers.order_for_reading` does this.

# %%
def reading_order(ids):
    """Best-first ids -> prompt order: odd ranks forward, then even ranks backward."""
    ### BEGIN SOLUTION hint: two slices with a step of 2, the second one reversed
    return ids[0::2] + ids[1::2][::-1]
    ### END SOLUTION


# %%
check("reading_order", reading_order)

# %% [markdown]
# ## 3. Detect the abstention
#
# The prompt tells the model: if the passages do not contain the answer, reply with exactly
# `NOT_IN_CONTEXT` and nothing else.
#
# **Task.** `is_abstention(reply)` returns `True` when the whole reply is that string, allowing
# surrounding whitespace and a final full stop; `False` otherwise (case matters).
#
# **Examples.**
# `is_abstention(" NOT_IN_CONTEXT.\n")` → `True`,
# `is_abstention("not_in_context")` → `False`,
# `is_abstention("The answer is NOT_IN_CONTEXT")` → `False`,
# `is_abstention("NOT IN CONTEXT")` → `False`
#
# **Why an exact string.** "I'm not sure, but it may be 30 days" is a guess, not an
# abstention, and no code can tell it from an answer. One exact token can be detected, counted
# (the abstention rate on unanswerable questions) and turned into a proper "not found" message.
# A reply that merely *contains* it is a sentence, not an abstention.

# %%
def is_abstention(reply):
    """True when reply is exactly NOT_IN_CONTEXT, up to whitespace and a final full stop."""
    ### BEGIN SOLUTION hint: tidy the ends of the reply (whitespace, then a full stop), then compare the whole string
    return reply.strip().rstrip(".").strip() == "NOT_IN_CONTEXT"
    ### END SOLUTION


# %%
check("is_abstention", is_abstention)

# %% [markdown]
# ## 4. Number the passages, with their sources
#
# **Task.** `number_passages(texts, sources)` returns the passages block of the prompt as one
# string: for each passage, numbered from 1, a block
#
# ```
# <passage n="1" source="billing-faq">
# Refunds take 5 days.
# </passage>
# ```
#
# with the blocks joined by a newline (no newline after the last one).
#
# **Example.** `number_passages(["A.", "B."], ["s1", "s2"])` →
# `'<passage n="1" source="s1">\nA.\n</passage>\n<passage n="2" source="s2">\nB.\n</passage>'`
#
# **Why this shape.** The number is what the model cites, and the code maps `[n]` back to
# `sources[n - 1]`. The fence marks where each passage begins and ends, so the system prompt can
# declare everything inside it untrusted reference material: an instruction written inside a
# document is text to read, not an order to follow.

# %%
def number_passages(texts, sources):
    """The fenced, numbered passages block: one <passage n=".." source=".."> per text."""
    ### BEGIN SOLUTION hint: enumerate from 1 over the texts and sources together, format one block each, join with "\n"
    blocks = [f'<passage n="{n}" source="{source}">\n{text}\n</passage>'
              for n, (text, source) in enumerate(zip(texts, sources), 1)]
    return "\n".join(blocks)
    ### END SOLUTION


# %%
check("number_passages", number_passages)

# %% [markdown]
# ## 5. From citations to real sources
#
# A generated answer cites passages by number; the code maps the numbers back to documents so the
# user can click through. Below, the help centre's top 5 articles for a real question, as BM25
# ranks them (no model is loaded).
#
# **Task.** `cited_sources(reply, passage_ids)` returns the ids of the passages the reply cites,
# in order of first citation, each once: `[n]` cites `passage_ids[n - 1]`; a number outside 1 ..
# `len(passage_ids)` cites nothing. The check uses real rankings and replies made from their text.

# %%
from ragbook.bm25 import BM25Index
from ragbook.chunking import count_tokens
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
bm25 = BM25Index().build(hc.documents)
dev = [q for q in hc.split("dev") if q.gold]
passage_ids = [h.id for h in bm25.search(dev[0].text, k=5)]
print(f"question: {dev[0].text!r}\npassages: {passage_ids}")


# %%
def cited_sources(reply, passage_ids):
    """Ids of the passages a reply cites, first citation first, no repeats."""
    ### BEGIN SOLUTION hint: re.findall(r"\[(\d+)\]", reply); keep 1 <= n <= len(passage_ids); passage_ids[n - 1]; skip ids already taken
    out = []
    for n in (int(x) for x in re.findall(r"\[(\d+)\]", reply)):
        if 1 <= n <= len(passage_ids) and passage_ids[n - 1] not in out:
            out.append(passage_ids[n - 1])
    return out
    ### END SOLUTION


# %%
check("cited_sources", cited_sources)

# %% [markdown]
# ## 6. Predict, then run: what do three articles cost the prompt?
#
# For the next question, a generator would be handed the top 3 articles whole. **Before running
# the cell after next**, predict how many encoder tokens those 3 articles hold (the prompt's
# instructions and numbering come on top). Their word counts are printed below; a prediction
# within `30%` passes.

# %%
top3 = bm25.search(dev[1].text, k=3)
print(f"question: {dev[1].text!r}")
print("words of the top 3:", [len(h.text.split()) for h in top3])


# %%
def predict_context_tokens():
    """My prediction of the tokens of the top 3 articles, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a whole number; an English word is a bit more than one token
    return round((322 + 1458 + 316) * 1.3)
    ### END SOLUTION


# %%
print("tokens of the top 3:", [count_tokens(h.text) for h in top3],
      f"in all {sum(count_tokens(h.text) for h in top3)}")

# %%
check("predict_context_tokens", predict_context_tokens)

# %% [markdown]
# Tokens run above words: numbers, prices, code and Markdown split into several tokens each. One
# long page can take most of the context: the reason chapter 10 compares retrievers at equal
# token budgets, not at equal k.

# %% [markdown]
# ## Try it (ungraded)
#
# Five retrieved passages, best first. Put them in reading order, number them, then check three
# replies a model might give: a grounded one, one citing a passage that does not exist, and an
# abstention.

# %%
retrieved = [("refund-policy", "Enterprise annual contracts carry a 14-day refund window."),
             ("billing-faq", "Refunds are paid to the original card within 5 days."),
             ("plans", "Monthly plans carry a 30-day refund window."),
             ("office", "Our office is closed on Sundays."),
             ("careers", "We are hiring support agents.")]
replies = ["Enterprise annual contracts have a 14-day refund window [1], paid within 5 days [5].",
           "The refund window is 14 days [7].",
           "NOT_IN_CONTEXT"]
with trying("reading_order", "number_passages", "is_abstention", "parse_citations"):
    order = reading_order(list(range(len(retrieved))))
    sources = [retrieved[i][0] for i in order]
    print(number_passages([retrieved[i][1] for i in order], sources), "\n")
    for reply in replies:
        if is_abstention(reply):
            print(f"{reply!r} -> abstained")
            continue
        numbers, valid = parse_citations(reply, len(sources))
        cited = [sources[n - 1] for n in numbers if 1 <= n <= len(sources)]
        print(f"{reply!r} -> cites {numbers}, valid={valid}, sources {cited}")
