"""Chapter 1 (solutions/01-chunking.py): counting and placing sliding windows, splitting at
paragraph, sentence and word breaks, and what that gives on the help centre."""
from __future__ import annotations

from .. import chunking, datasets
from .core import Case, Chapter, Mistake, predicted
from .corpus import helpcentre_tokens

CHAPTER = Chapter("01-chunking")

_WINDOWS = [(100_000, 500, 0), (100_000, 500, 100), (100_000, 500, 250), (500, 500, 50),
            (501, 500, 50), (120, 500, 0), (0, 10, 2), (1_000, 100, 99)]


@CHAPTER.exercise(
    "window_count",
    "no text, no window; one window if it all fits; otherwise count how many strides "
    "(size - overlap) the remaining total - size needs, rounding up, plus the first window",
    mistakes=(Mistake("a stride of size", "neighbours share `overlap` tokens, so each "
                      "window starts size - overlap after the one before",
                      lambda total, size, overlap: chunking.window_count(total, size)),
              Mistake("the rough count ceil(total / stride)", "the first window covers "
                      "size tokens; only the remaining total - size need strides",
                      chunking.rough_window_count),
              Mistake("strides rounded down", "a last, partial stride still needs a "
                      "window: math.ceil, not //", lambda total, size, overlap:
                      0 if total <= 0 else 1 if total <= size
                      else (total - size) // (size - overlap) + 1)))
def window_count_cases():
    """(total, size, overlap) with no text, one window, many, and half-overlapping ones."""
    for args in _WINDOWS:
        yield Case(args, chunking.window_count(*args))


@CHAPTER.exercise("rough_window_count", "ceil(total / stride), with stride = size - overlap",
                  mistakes=(Mistake("a stride of size", "the stride is size - overlap",
                                    lambda total, size, overlap:
                                    chunking.rough_window_count(total, size)),))
def rough_window_count_cases():
    """The same (total, size, overlap) as window_count, counted roughly."""
    for args in _WINDOWS:
        yield Case(args, chunking.rough_window_count(*args))


@CHAPTER.exercise("sliding_windows",
                  "start at 0, step by the stride, stop after the window that reaches "
                  "n_tokens; the last window ends exactly at n_tokens",
                  mistakes=(Mistake("a stride of size", "each window starts size - overlap "
                                    "after the one before", lambda n, size, overlap:
                                    [tuple(w) for w in chunking.sliding_windows(n, size)]),))
def sliding_windows_cases():
    """Small token counts, so the (start, end) of every window can be compared."""
    for n, size, overlap in _WINDOWS[3:] + [(10, 4, 1), (9, 3, 0)]:
        yield Case((n, size, overlap),
                   [tuple(w) for w in chunking.sliding_windows(n, size, overlap)])


_SPLIT_TEXTS = [
    "Refunds take 5 to 10 business days. They go back to the original card.\n\n"
    "Enterprise annual contracts carry a 14-day refund window measured from the invoice "
    "date. Monthly plans carry 30 days.",
    "Short.",
    "One two three four five six seven eight nine ten eleven twelve thirteen fourteen.",
    "# Title\n\nA first paragraph that is long enough to need splitting into more than one "
    "piece of text.\n\nA second paragraph.\n\nA third one, with a sentence. And another.",
]


def _verify_split(text: str, size: int):
    return lambda result: chunking.split_problem(text, result, size)


@CHAPTER.exercise("split_with_offsets",
                  "cut at the last paragraph break that fits, else the last sentence end, else "
                  "the last space; return (start, end) offsets so text[start:end] is the "
                  "chunk, whitespace trimmed")
def split_with_offsets_cases():
    """Four texts at three sizes, each result checked for the properties of a good split."""
    for text in _SPLIT_TEXTS:
        for size in (40, 80, 200):
            yield Case((text, size), verify=_verify_split(text, size))


# -- on the real corpus

@CHAPTER.exercise("corpus_chunk_count",
                  "window_count for each article's token count, added up over the corpus")
def corpus_chunk_count_cases():
    """Every help-centre article's token count, at four (size, overlap)."""
    tokens = helpcentre_tokens()
    counts = list(tokens.values())
    for size, overlap in ((256, 32), (128, 13), (512, 0), (1000, 100)):
        yield Case((counts, size, overlap),
                   sum(chunking.window_count(t, size, overlap) for t in counts),
                   about=f"the token counts of the {len(counts)} help-centre articles, "
                         f"size={size}, overlap={overlap}",
                   items=lambda size=size, overlap=overlap: (
                       (f"article {doc!r} ({t} tokens)", ([t], size, overlap),
                        chunking.window_count(t, size, overlap)) for doc, t in tokens.items()))


def _longest_article():
    tokens = helpcentre_tokens()
    longest = max(tokens, key=lambda d: (tokens[d], d))
    return datasets.load_helpcentre().doc(longest)


@CHAPTER.exercise("predict_article_chunks",
                  "the stride is 128 - 13 = 115 tokens: one window for the first 128 tokens, "
                  "then one per further 115 (rounded up)")
def predict_article_chunks_cases():
    """The learner's guess of the longest article's 128/13 windows, within 1."""
    actual = len(chunking.sliding_window_chunks(_longest_article(), 128, 13))
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 1,
                                    "a prediction within 1 passes"))
