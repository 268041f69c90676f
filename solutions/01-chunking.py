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
# # 01 · Chunking — exercises
#
# Before anything is embedded, documents are cut into chunks. This involves two skills, and you
# practise both here:
#
# * **the arithmetic of overlap.** How many chunks a corpus becomes, so you know the size of the
#   index before you build it. Also, why the rough rule of thumb and the exact count disagree.
#   The exact count also has to match what a real splitter produces.
# * **cutting real text.** A splitter that respects structure (paragraphs, then sentences, then
#   words) and reports *offsets*. Each chunk is then a true slice of its document, and a
#   citation can point back to the exact passage.
#
# `check(name, function)` compares your function with `ragbook.chunking` on several inputs. If a
# case fails, it shows you that input, the expected value and what you returned.

# %%
import math

from ragbook.grading import check, trying

# %% [markdown]
# ## 1. The exact number of windows
#
# A sliding window of `size` tokens, where consecutive windows share `overlap` tokens, moves
# forward by a *stride* of `size - overlap` each time.
#
# **Task.** `window_count(total, size, overlap)` returns how many windows cover `total` tokens
# (an `int`). The last window may be shorter than `size`. An empty text (`total <= 0`) needs no
# window, and a text that fits in one window needs one. You may assume `0 <= overlap < size`.
#
# **Examples.**
# `window_count(100_000, 500, 0)` → `200`,
# `window_count(100_000, 500, 100)` → `250`,
# `window_count(100_000, 500, 250)` → `399`,
# `window_count(120, 500, 0)` → `1`,
# `window_count(0, 10, 2)` → `0`
#
# 100 tokens of overlap turns 200 chunks into 250. That is 25% more vectors to embed, store and
# search. At 50% overlap the index almost doubles.

# %%
def window_count(total, size, overlap):
    """Exact number of sliding windows needed to cover `total` tokens."""
    ### BEGIN SOLUTION hint: the first window covers `size` tokens; how many tokens does each later window add?
    if total <= 0:
        return 0
    if total <= size:
        return 1
    stride = size - overlap
    # after the first window, (total - size) tokens remain, and each further window adds a stride
    return math.ceil((total - size) / stride) + 1
    ### END SOLUTION


# %%
check("window_count", window_count)

# %% [markdown]
# ## 2. The back-of-envelope count
#
# People usually estimate the count as "total divided by the stride".
#
# **Task.** `rough_window_count(total, size, overlap)` returns `ceil(total / stride)` with
# `stride = size - overlap` (an `int`; `0` for an empty text).
#
# **Examples.**
# `rough_window_count(100_000, 500, 250)` → `400` (the exact count is `399`),
# `rough_window_count(500, 500, 50)` → `2` (exact: `1`),
# `rough_window_count(1_000, 100, 99)` → `1000` (exact: `901`)
#
# **Why it overestimates.** It pretends every window, the first included, adds only a stride of
# new text. In fact the first window adds a full `size`. Each window after it adds a stride, and
# the last one stops at the end of the text. The estimate is off by up to about
# `overlap / stride` windows. With no overlap that is nothing, and at 10–20% overlap on a long
# document it is noise. When the overlap comes close to the size, the error is large.

# %%
def rough_window_count(total, size, overlap):
    """The rule-of-thumb count: total divided by the stride, rounded up."""
    ### BEGIN SOLUTION hint: one division and one rounding; which way must a count of windows round?
    stride = size - overlap
    return math.ceil(total / stride) if total > 0 else 0
    ### END SOLUTION


# %%
check("rough_window_count", rough_window_count)

# %% [markdown]
# ## 3. Cutting a token sequence
#
# A formula is only worth trusting if a real splitter agrees with it.
#
# **Task.** `sliding_windows(n_tokens, size, overlap)` returns the list of `(start, end)` token
# ranges (end exclusive) a plain sliding window produces. The first starts at 0, each next one
# starts a stride later, and the last one ends exactly at `n_tokens`. No window starts after the
# text is fully covered. An empty sequence gives `[]`.
#
# **Examples.**
# `sliding_windows(10, 4, 1)` → `[(0, 4), (3, 7), (6, 10)]`,
# `sliding_windows(501, 500, 50)` → `[(0, 500), (450, 501)]`,
# `sliding_windows(0, 10, 2)` → `[]`
#
# `len(sliding_windows(n, size, overlap))` must always equal `window_count(n, size, overlap)`.
# The cell after the grader tests this.

# %%
def sliding_windows(n_tokens, size, overlap):
    """(start, end) ranges of a sliding window over `n_tokens` tokens."""
    ### BEGIN SOLUTION hint: loop from start 0 by the stride; clip each end to n_tokens and stop once an end reaches it
    stride = size - overlap
    windows, start = [], 0
    while start < n_tokens:
        end = min(start + size, n_tokens)
        windows.append((start, end))
        if end == n_tokens:  # covered: another window would only repeat the tail
            break
        start += stride
    return windows
    ### END SOLUTION


# %%
check("sliding_windows", sliding_windows)

# %%
# Ungraded: the formula and the splitter agree on every combination tried here.
try:
    disagreements = [(n, s, o) for n in range(60) for s in range(1, 12) for o in range(s)
                     if len(sliding_windows(n, s, o)) != window_count(n, s, o)]
    print(f"{len(disagreements)} disagreements", disagreements[:5])
except NotImplementedError:
    print("complete window_count and sliding_windows first")

# %% [markdown]
# ## 4. Splitting text at its structure, with offsets
#
# Fixed windows cut wherever the count runs out, often mid-sentence and sometimes mid-word. A
# structure-aware splitter cuts where the text already has seams.
#
# **Task.** `split_with_offsets(text, size)` returns a list of `(start, end)` character offsets,
# in document order, such that every chunk `text[start:end]`
#
# * is at most `size` characters long,
# * neither starts nor ends with whitespace, and is not empty,
# * never cuts a word: the character just before `start` and the one at `end` are whitespace (or
#   the text's edge),
#
# and every non-whitespace character of `text` is in some chunk. Where a chunk must end, end it at
# the last paragraph break (`"\n\n"`) that fits. If there is none, use the last sentence end
# (`.`, `!` or `?` followed by whitespace), and failing that the last space. No overlap here.
#
# **Example.**
# `split_with_offsets("One two three. Four five six.\n\nSeven eight nine.", 20)` →
# `[(0, 14), (15, 29), (31, 48)]`, i.e. `'One two three.'`, `'Four five six.'`,
# `'Seven eight nine.'`
#
# **Why offsets and not just strings.** A chunk that knows where it came from can be cited,
# highlighted in its document, expanded to its neighbours, and checked with
# `text[start:end] == chunk`. A bare string can't do any of that.

# %%
def split_with_offsets(text, size):
    """(start, end) offsets of chunks of at most `size` characters, cut at paragraphs,
    then sentences, then spaces."""
    ### BEGIN SOLUTION hint: from the current start, collect the whitespace positions within `size`; prefer paragraph breaks, then sentence ends, then any; trim, then skip whitespace to the next start
    spans = []
    start, stop = len(text) - len(text.lstrip()), len(text.rstrip())
    while start < stop:
        if stop - start <= size:
            end = stop
        else:
            # ending a chunk at i means text[i] (the first character left out) is whitespace
            cuts = [i for i in range(start + 1, start + size + 1) if text[i].isspace()]
            paragraphs = [i for i in cuts if text[i:i + 2] == "\n\n"]
            sentences = [i for i in cuts if text[i - 1] in ".!?"]
            best = paragraphs or sentences or cuts
            end = best[-1] if best else start + size  # a single word longer than size: cut it
            end = start + len(text[start:end].rstrip())
        spans.append((start, end))
        start = end
        while start < stop and text[start].isspace():
            start += 1
    return spans
    ### END SOLUTION


# %%
check("split_with_offsets", split_with_offsets)

# %% [markdown]
# ## 5. How many chunks will the help centre become?
#
# Count before you index. Below are the encoder token counts of the help centre's articles
# (`count_tokens` loads only the encoder's tokenizer).
#
# **Task.** `corpus_chunk_count(token_counts, size, overlap)` returns the total number of
# sliding windows over a corpus whose documents have these token counts: the exact count of
# section 1, added up over the documents. The check uses the help centre's real counts with
# several window settings.

# %%
from ragbook.chunking import count_tokens, sliding_window_chunks
from ragbook.datasets import load_helpcentre

hc = load_helpcentre()
token_counts = [count_tokens(d.text) for d in hc.documents]
print(f"{len(token_counts)} articles: shortest {min(token_counts)} tokens, longest "
      f"{max(token_counts)}, {sum(token_counts):,} in all")


# %%
def corpus_chunk_count(token_counts, size, overlap):
    """Sliding windows needed for every document of a corpus, added up."""
    ### BEGIN SOLUTION hint: the exact window count of section 1 for each document, then sum
    total = 0
    for t in token_counts:
        if t > 0:
            total += 1 if t <= size else math.ceil((t - size) / (size - overlap)) + 1
    return total
    ### END SOLUTION


# %%
check("corpus_chunk_count", corpus_chunk_count)

# %% [markdown]
# ## 6. Predict, then run: one long article in 128-token windows
#
# The longest article is printed below with its token count. **Before running the cell after
# next**, predict how many windows of `size=128` tokens with 10% overlap (`overlap=13`) it
# becomes. A prediction within 1 of the real count passes.

# %%
longest = max(hc.documents, key=lambda d: (count_tokens(d.text), d.id))
print(f"{longest.id}: {count_tokens(longest.text)} tokens")


# %%
def predict_article_chunks():
    """My prediction of the number of windows, written before running the next cell."""
    ### BEGIN SOLUTION hint: return a whole number; the stride is 128 - 13 tokens
    return math.ceil((1932 - 128) / 115) + 1
    ### END SOLUTION


# %%
windows = sliding_window_chunks(longest, 128, 13)
print(f"{len(windows)} windows; the last holds {count_tokens(windows[-1].text)} tokens; "
      f"the rough count gives {count_tokens(longest.text) / 115:.1f}")

# %%
check("predict_article_chunks", predict_article_chunks)

# %% [markdown]
# After the first window each further window adds one stride of new tokens, so the count is the
# exact formula of section 1. The rough `total / stride`, printed above, is close but not the
# same: the first window covers a full `size`, and the last one is short.

# %% [markdown]
# ## Try it (ungraded)
#
# Change `size` and watch where the cuts move. Small sizes push the splitter down from
# paragraphs to sentences to single spaces.

# %%
text = ("Refunds take 5 to 10 business days. They go back to the original card.\n\n"
        "Enterprise annual contracts carry a 14-day refund window measured from the invoice "
        "date. Monthly plans carry 30 days.")
with trying("split_with_offsets"):
    for start, end in split_with_offsets(text, size=60):
        print(f"{start:4d}-{end:<4d} {text[start:end]!r}")
