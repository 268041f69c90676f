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
# # 07 · The extractive reader — exercises
#
# An extractive reader does not write an answer: it points at one. A question-answering model
# reads the question and a passage together and gives every token two logits, how likely the
# answer *starts* there and how likely it *ends* there. Everything else is plain code around the
# model, and you write it here, from scratch:
#
# * **the best span.** Masking, the softmax, end >= start, a length cap, p(start)·p(end).
# * **back to characters.** Token offsets turn the span into a verbatim substring.
# * **long passages.** Overlapping windows, so an answer on a window's edge is seen whole.
# * **abstaining.** Saying nothing when the best span is weak.
#
# The logits are given to you as numpy arrays; no model is loaded. `check(name, function)`
# compares your function with `ragbook` on several inputs. If a case fails, it shows you the
# input, the expected value and what you returned.

# %%
import numpy as np

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. The best span
#
# **Task.** `best_span(start_logits, end_logits, allowed, max_answer_tokens)` takes two float
# arrays with one logit per token and a boolean array `allowed` (True for passage tokens). It
# returns `(start, end, score)`: the token indices of the best span (both inclusive) and its
# score p(start)·p(end), where p is the softmax over the allowed tokens only. A span must have
# `end >= start` and at most `max_answer_tokens` tokens (`end - start + 1`).
#
# **Example.** Tokens 0–1 are the question and token 5 the final `[SEP]`:
#
# ```python
# start = np.array([6.0, 0, 3, 1, 0, 0]); end = np.array([0.0, 0, 0, 1, 3, 6])
# allowed = np.array([False, False, True, True, True, False])
# best_span(start, end, allowed, 30)  # → (2, 4, 0.712...)
# best_span(start, end, allowed, 2)   # → (2, 3, 0.096...)
# ```
#
# **Why each rule.** Unmasked, the best "span" here would run from the question (token 0) to
# `[SEP]` (token 5): masking *before* the softmax keeps the answer inside the passage. A pair with
# end < start is not a span at all, and without a length cap a high start early and a high end
# late give a paragraph instead of an answer.

# %%
def best_span(start_logits, end_logits, allowed, max_answer_tokens):
    """(start, end, p(start)*p(end)) of the best allowed span, end >= start, length capped."""
    ### BEGIN SOLUTION hint: set disallowed logits to -inf, softmax each array (subtract the max first), then try every start i with ends i .. i + max_answer_tokens - 1
    def softmax(x):
        x = np.where(allowed, x, -np.inf)
        e = np.exp(x - x.max())
        return e / e.sum()

    p_start, p_end = softmax(start_logits), softmax(end_logits)
    best = (-1, -1, 0.0)
    for i in np.flatnonzero(allowed):
        for j in range(i, min(i + max_answer_tokens, len(allowed))):
            score = p_start[i] * p_end[j]
            if allowed[j] and score > best[2]:
                best = (int(i), int(j), float(score))
    return best
    ### END SOLUTION


# %%
check("best_span", best_span)

# %% [markdown]
# ## 2. From tokens back to characters
#
# **Task.** `span_to_characters(context, offsets, start, end)` takes the passage, the
# tokenizer's offsets (token `i` covers `context[offsets[i][0]:offsets[i][1]]`) and a token span
# (both ends inclusive). It returns `(text, char_start, char_end)` with
# `text == context[char_start:char_end]`.
#
# **Example.** With `context = "Enterprise annual contracts carry a 14-day refund window ..."`
# the tokenizer splits "14-day" into `"14"`, `"-"`, `"day"`, tokens 5–7 with offsets
# `(36, 38), (38, 39), (39, 42)`:
# `span_to_characters(context, offsets, 5, 7)` → `("14-day", 36, 42)`
#
# **Why offsets.** Decoding the tokens would give `"14 - day"` or lower-cased word pieces.
# Slicing the original text gives the answer verbatim, exactly as the source says it, so
# fabrication is impossible by construction and the answer can be highlighted in the document.

# %%
def span_to_characters(context, offsets, start, end):
    """(text, char_start, char_end) of tokens start..end (inclusive) in context."""
    ### BEGIN SOLUTION hint: the first token gives where the text begins, the last token where it ends; then slice the context
    a, z = offsets[start][0], offsets[end][1]
    return context[a:z], a, z
    ### END SOLUTION


# %%
check("span_to_characters", span_to_characters)

# %% [markdown]
# ## 3. Windows with a stride
#
# A QA model reads a few hundred tokens (384 is common) and a passage can be longer, so it is
# read in windows. Here `stride` follows the Hugging Face tokenizer: it is the number of tokens
# two neighbouring windows **share**, not the step (chapter 6's `word_windows` used the step).
#
# **Task.** `windows_with_stride(n_tokens, size, stride)` returns `(start, end)` token index pairs
# (`tokens[start:end]`): windows of `size` tokens, each starting `size - stride` tokens after the
# previous one, stopping after the first window that reaches the end (it may be shorter). A
# passage of at most `size` tokens is one window.
#
# **Examples.**
# `windows_with_stride(10, 4, 1)` → `[(0, 4), (3, 7), (6, 10)]`,
# `windows_with_stride(100, 30, 10)` → `[(0, 30), (20, 50), (40, 70), (60, 90), (80, 100)]`,
# `windows_with_stride(7, 10, 2)` → `[(0, 7)]`
#
# **Why the overlap.** Without it, an answer that straddles a window edge is cut in two and no
# window holds it whole. With `stride` shared tokens, any answer of up to `stride` tokens lies
# whole inside some window. The reader then takes the best span over all windows.

# %%
def windows_with_stride(n_tokens, size, stride):
    """(start, end) token windows of `size`, neighbours sharing `stride` tokens."""
    ### BEGIN SOLUTION hint: step by size - stride; clip each end at n_tokens, and stop once a window has reached it
    spans, start = [], 0
    while True:
        end = min(start + size, n_tokens)
        spans.append((start, end))
        if end == n_tokens:
            return spans
        start += size - stride
    ### END SOLUTION


# %%
check("windows_with_stride", windows_with_stride)

# %% [markdown]
# ## 4. Abstain below a threshold
#
# **Task.** `abstain_below(spans, threshold)` takes candidate spans as `(text, score)` pairs
# (for example the best span of each window or passage). It returns the text of the
# highest-scoring one if its score is at least `threshold`, otherwise `None`. No candidates:
# `None`. On a tie, the first one wins.
#
# **Examples.** With `spans = [("14-day", 0.62), ("30 days", 0.21), ("invoice date", 0.05)]`:
# `abstain_below(spans, 0.5)` → `"14-day"`, `abstain_below(spans, 0.7)` → `None`,
# `abstain_below([], 0.1)` → `None`
#
# **Why abstain.** The reader always finds *some* best span, even in a passage that does not
# answer the question. A verbatim span cannot be invented, but it can be the wrong span; a low
# p(start)·p(end) is the signal. "I don't know" beats a weak guess stated as fact. Tune the
# threshold on labelled questions, unanswerable ones included (ragbook's extractive readers
# call it `min_span_score`, and `calibrate_min_span_score` tunes it).

# %%
def abstain_below(spans, threshold):
    """Text of the best (text, score) span if its score >= threshold, else None."""
    ### BEGIN SOLUTION hint: find the best pair first (mind the empty list), then compare its score with the threshold
    if not spans:
        return None
    text, score = max(spans, key=lambda s: s[1])
    return text if score >= threshold else None
    ### END SOLUTION


# %%
check("abstain_below", abstain_below)

# %% [markdown]
# ## 5. Scoring answers on real questions: F1
#
# A reader is scored on its answer text against the gold answer: exact match, and the more
# forgiving token F1 (SQuAD's metric). Below, real questions over help-centre articles with their
# gold answers, and the whole sentence around each answer: what a sentence reader returns when it
# finds the right place.
#
# **Task.** `answer_f1(prediction, gold)` returns SQuAD's F1: normalise both strings (lower case,
# remove punctuation, remove the articles a/an/the, split on white space), count the tokens they
# share (a repeated token counts as often as both have it), precision = shared / prediction
# tokens, recall = shared / gold tokens, F1 = 2PR / (P + R); 0.0 when nothing is shared. The
# check compares with `ragbook.evaluate.f1_score`.

# %%
import re

from ragbook.datasets import load_reader_set
from ragbook.text import sentence_spans


def sentence_around(context, start, length):
    """The sentence(s) of `context` that contain characters start .. start + length
    (sentences as ragbook splits them everywhere: `ragbook.text.sentence_spans`)."""
    inside = [(a, z) for a, z in sentence_spans(context) if a < start + length and z > start]
    return context[inside[0][0]:inside[-1][1]]


examples = [ex for ex in load_reader_set("helpcentre", "train") if ex.answers][:20]
pairs = [(sentence_around(ex.context, ex.answers[0][1], len(ex.answers[0][0])), ex.answers[0][0])
         for ex in examples]
print(f"question: {examples[1].question!r}\n  gold:     {pairs[1][1]!r}\n  sentence: {pairs[1][0]!r}")


# %%
def answer_f1(prediction, gold):
    """SQuAD token F1 between a predicted and a gold answer."""
    ### BEGIN SOLUTION hint: normalise (lower, drop string.punctuation, re.sub(r"\b(a|an|the)\b", " ", ...), split); shared = sum of min counts
    import string

    def norm(s):
        s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
        return re.sub(r"\b(a|an|the)\b", " ", s).split()

    p, g = norm(prediction), norm(gold)
    shared = sum(min(p.count(t), g.count(t)) for t in set(p) & set(g))
    if shared == 0:
        return 0.0
    precision, recall = shared / len(p), shared / len(g)
    return 2 * precision * recall / (precision + recall)
    ### END SOLUTION


# %%
check("answer_f1", answer_f1)

# %% [markdown]
# ## 6. Predict, then run: what F1 does a right sentence get?
#
# Suppose a reader always finds the right sentence and returns it whole. **Before running the cell
# after next**, predict its mean F1 over the 20 examples above. A prediction within `0.15` passes.

# %%
def predict_sentence_f1():
    """My prediction of the mean F1, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a number between 0 and 1; recall is perfect, precision is the answer's share of the sentence
    return 0.7
    ### END SOLUTION


# %%
from ragbook.evaluate import exact_match, f1_score

print(f"mean F1 {sum(f1_score(s, [g]) for s, g in pairs) / len(pairs):.3f}, "
      f"mean exact match {sum(exact_match(s, [g]) for s, g in pairs) / len(pairs):.3f}")

# %%
check("predict_sentence_f1", predict_sentence_f1)

# %% [markdown]
# Every sentence contains its answer, so recall is perfect and the F1 lost is all precision: the
# sentence's extra words. Exact match, printed next to it, counts only the answers that are whole
# sentences already. This is why chapter 7 reports F1 for a sentence reader, and why a span
# reader that finds the right sentence still has to cut it.

# %% [markdown]
# ## Try it (ungraded)
#
# Made-up logits for the chapter's question, "What is the refund window for enterprise annual
# contracts?", over the words of its context. Does the reader answer "14-day", and what does a
# higher threshold do?

# %%
context = ("Enterprise annual contracts carry a 14-day refund window measured from the invoice date. "
           "Monthly plans carry 30 days.")
offsets, pos = [], 0
for word in context.split():  # one "token" per word, for the demo
    pos = context.index(word, pos)
    offsets.append((pos, pos + len(word)))
    pos += len(word)
rng = np.random.default_rng(7)
start_logits, end_logits = rng.normal(size=len(offsets)), rng.normal(size=len(offsets))
start_logits[5], end_logits[5] = 6.0, 6.0   # "14-day"
start_logits[16], end_logits[17] = 3.5, 3.5  # "30 days."
allowed = np.ones(len(offsets), dtype=bool)
with trying("best_span", "span_to_characters", "abstain_below"):
    i, j, score = best_span(start_logits, end_logits, allowed, 5)
    text, a, z = span_to_characters(context, offsets, i, j)
    print(f"{text!r} at characters {a}-{z}, score {score:.3f}")
    for threshold in (0.3, 0.9):
        print(f"threshold {threshold}: ->", abstain_below([(text, score)], threshold))
