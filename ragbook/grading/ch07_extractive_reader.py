"""Chapter 7 (solutions/07-extractive-reader.py): the best answer span from start and end
logits, back to characters, overlapping windows, abstaining; then token F1 of whole
sentences against the help centre's gold answers."""
from __future__ import annotations

import math
import re

import numpy as np

from .. import chunking, datasets, evaluate, readers
from .core import Case, Chapter, Mistake, predicted

CHAPTER = Chapter("07-extractive-reader")


def _masked_after_softmax(start, end, allowed, cap):
    """The mistake: softmax over every token, masking only afterwards, so the disallowed
    tokens keep part of the probability and every span's score comes out too small."""
    def softmax(x):
        e = np.exp(x - np.max(x))
        return e / e.sum()
    ps, pe = softmax(start) * allowed, softmax(end) * allowed
    scores = np.tril(np.triu(np.outer(ps, pe)), k=cap - 1)
    i, j = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(i), int(j), float(scores[i, j])


def _set_f1(prediction, gold):
    """The mistake: shared tokens counted as a set, so a repeated word counts once."""
    pred = evaluate.normalize_answer(prediction).split()
    want = evaluate.normalize_answer(gold).split()
    common = len(set(pred) & set(want))
    if not common:
        return 0.0
    p, r = common / len(pred), common / len(want)
    return 2 * p * r / (p + r)


def _logit_cases():
    r = np.random.default_rng(11)
    for n, cap in ((6, 30), (12, 3), (20, 5), (8, 1)):
        start, end = r.normal(size=n), r.normal(size=n)
        allowed = np.ones(n, dtype=bool)
        allowed[:3] = False                       # the question and [CLS]
        allowed[-1] = False                       # the final [SEP]
        yield start, end, allowed, cap


@CHAPTER.exercise("best_span",
                  "mask the disallowed tokens before the softmax, then score every (start, end) "
                  "pair with end >= start and at most max_answer_tokens tokens by p(start) * "
                  "p(end); return the best (start, end, score)",
                  mistakes=(Mistake("masking after the softmax", "mask before the softmax: "
                                    "set the disallowed logits to -inf first, so the allowed "
                                    "tokens' probabilities sum to 1", _masked_after_softmax),))
def best_span_cases():
    """Random start and end logits with the question and separators masked, at four caps."""
    for start, end, allowed, cap in _logit_cases():
        i, j, s = readers.best_span(start, end, allowed, cap)
        yield Case((start, end, allowed, cap), (i, j, s))


@CHAPTER.exercise(
    "span_to_characters",
    "token i covers characters offsets[i][0] to offsets[i][1] of the context; the span runs "
    "from the first token's start to the last token's end",
    mistakes=(Mistake("the span cut at the last token's start", "the span ends where "
                      "its last token ends: offsets[end][1]", lambda ctx, offsets, i, j:
                      (ctx[offsets[i][0]:offsets[j][0]], offsets[i][0], offsets[j][0])),))
def span_to_characters_cases():
    """One tokenized sentence, spans of one and several tokens."""
    context = ("Enterprise annual contracts carry a 14-day refund window measured from the "
               "invoice date.")
    offsets = [(0, 10), (11, 17), (18, 27), (28, 33), (34, 35), (36, 38), (38, 39), (39, 42),
               (43, 49), (50, 56)]
    for i, j in ((5, 7), (0, 0), (5, 9), (8, 9)):
        yield Case((context, offsets, i, j), readers.span_to_characters(context, offsets, i, j))


@CHAPTER.exercise(
    "windows_with_stride",
    "windows of at most `size` tokens; each starts `size - stride` tokens after the previous "
    "(so neighbours share `stride` tokens); stop once a window reaches the end",
    mistakes=(Mistake("stride taken as the step", "the tokenizer's stride is how many "
                      "tokens neighbours share; the step is size - stride",
                      lambda n, size, stride:
                      chunking.sliding_windows(n, size, overlap=size - stride)),))
def windows_with_stride_cases():
    """Token counts shorter than, equal to and longer than one window."""
    for n, size, stride in ((10, 4, 1), (100, 30, 10), (30, 30, 5), (7, 10, 2), (50, 16, 8)):
        # the tokenizer's `stride` is the tokens neighbours share: a sliding window's overlap
        yield Case((n, size, stride), chunking.sliding_windows(n, size, overlap=stride))


@CHAPTER.exercise("abstain_below",
                  "answer only when the best span's score clears the threshold; otherwise "
                  "return None",
                  mistakes=(Mistake("a strict threshold (>)", "a score equal to the threshold "
                                    "answers: >=", lambda spans, th: readers.answer_or_abstain(
                                        spans, math.nextafter(th, math.inf))),))
def abstain_below_cases():
    """Scored spans at thresholds below, at and above the best; no spans; tied spans."""
    spans = [("14-day", 0.62), ("30 days", 0.21), ("invoice date", 0.05)]
    for th in (0.5, 0.7, 0.0, 0.62):
        yield Case((spans, th), readers.answer_or_abstain(spans, th))
    yield Case(([], 0.1), readers.answer_or_abstain([], 0.1))
    tied = [("30 days", 0.4), ("14-day", 0.7), ("14 days", 0.7)]   # the first of equals wins
    yield Case((tied, 0.5), readers.answer_or_abstain(tied, 0.5))


# -- on the real corpus

def _sentence_answers(n: int):
    """(whole sentence around the gold answer, gold answer) for the first ``n`` answerable
    help-centre reader examples: what a sentence reader returns when it is right."""
    out = []
    for ex in datasets.load_reader_set("helpcentre", "train"):
        if ex.is_impossible or not ex.answers:
            continue
        text, start = ex.answers[0]
        cuts = [0] + [m.end() for m in re.finditer(r"(?<=[.!?])\s+|\n+", ex.context)]
        a = max(c for c in cuts if c <= start)
        z = min([c for c in cuts if c > start + len(text) - 1] + [len(ex.context)])
        out.append((ex.context[a:z].strip(), text))
        if len(out) == n:
            break
    return out


@CHAPTER.exercise("answer_f1",
                  "normalise both (lower case, drop punctuation and a/an/the, split on spaces); "
                  "count the shared tokens (with repeats); F1 = 2PR/(P+R), 0.0 when nothing is "
                  "shared",
                  mistakes=(Mistake("set instead of multiset F1", "count shared tokens with "
                                    "repeats: a word twice in both counts twice (a Counter's "
                                    "&, or min of the two counts)", _set_f1),))
def answer_f1_cases():
    """Six whole sentences against their gold answers, an exact answer, an empty one, and
    words repeated in both."""
    for sentence, gold in _sentence_answers(6):
        yield Case((sentence, gold), evaluate.f1_score(sentence, [gold]))
    sentence, gold = _sentence_answers(1)[0]
    yield Case((gold, gold), evaluate.f1_score(gold, [gold]))
    yield Case(("", gold), evaluate.f1_score("", [gold]))
    repeats = "refunds within 14 days or within 30 days"      # "within" and "days" twice
    yield Case((repeats, "within 30 days or within 14 days"),
               evaluate.f1_score(repeats, ["within 30 days or within 14 days"]))


@CHAPTER.exercise("predict_sentence_f1",
                  "a whole sentence that contains the answer has perfect recall, but its "
                  "precision is the answer's share of the sentence's words")
def predict_sentence_f1_cases():
    """The learner's guess of 20 whole sentences' mean F1 against their answers, within 0.15."""
    pairs = _sentence_answers(20)
    actual = sum(evaluate.f1_score(s, [g]) for s, g in pairs) / len(pairs)
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.15,
                                    "a prediction within 0.15 passes"))
