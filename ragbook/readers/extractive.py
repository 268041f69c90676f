"""The extractive span reader: a question-answering model points at a span of a passage.

A question-answering model gives two scores per token — how likely the answer *starts*
there, and how likely it *ends* there. ``ExtractiveReader`` (recent transformers has no
question-answering pipeline, so it calls the model):

1. encodes (question, passage) pairs, splitting long passages into overlapping windows
   (``max_length`` tokens, ``overlap`` tokens shared between windows — what Hugging Face
   tokenizers call ``stride``);
2. masks every token that is not passage text (the question, [CLS], [SEP], padding), so
   the answer can only lie in the passage. [CLS] included: a model trained on SQuAD 2.0
   (the standard profile's ``deepset/roberta-base-squad2``) puts "no answer" there, and the
   standard recipe abstains when that null score beats the best span's. This reader does
   not use it: no head with a trained null score ships offline (chapter 7's head has
   none), so abstaining is left to ``min_span_score``, a floor calibrated on labelled
   questions;
3. turns start and end logits into probabilities and scores every span with
   end >= start and at most ``max_answer_tokens`` tokens by p(start) · p(end);
4. maps the best span's token offsets back to characters, so the answer is a verbatim
   substring of the passage — fabrication is impossible by construction;
5. abstains (``reason="low_confidence"``) when the best score is under ``min_span_score``.

``BaseSpanReader`` is what every extractive reader shares (this one and
``readers.SentenceReader``): ``hit_spans``, ``accepts`` and ``read``.
"""
from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from .. import models
from ..checks import check_query, check_threshold
from ..component import Component
from ..types import Answer, Hit, Span

__all__ = ["Span", "BaseSpanReader", "ExtractiveReader", "best_span", "span_to_characters",
           "answer_or_abstain"]


class BaseSpanReader(Component):
    """What every extractive reader shares. A subclass defines ``spans(question, context,
    source)`` and stores a ``min_span_score`` setting (None: never abstain); this gives it
    ``hit_spans`` (how a retrieved hit's spans are scored), ``accepts`` (the span floor)
    and ``read``, which appends each call's wall time to ``latencies_`` (a list the subclass
    starts empty). ``read``, ``calibrate_min_span_score`` and ``Pipeline`` all go through
    ``hits_spans`` (``hit_spans`` per hit unless a reader batches) and ``accepts``, so the
    three score and judge a span the same way."""

    min_span_score: float | None = None

    def spans(self, question: str, context: str, source: str = "") -> list[Span]:
        """The candidate answer spans of ``context``, each tagged with ``source``."""
        raise NotImplementedError

    def hit_spans(self, question: str, hit: Hit) -> list[Span]:
        """The candidate spans of one retrieved ``hit``, as this reader scores them: its
        ``spans`` of the hit's text, tagged with the hit's id (a reader with a retrieval
        prior adds it here)."""
        return self.spans(question, hit.text, hit.id)

    def hits_spans(self, question: str, hits: Sequence[Hit]) -> list[list[Span]]:
        """``hit_spans`` of each of ``hits``, in order. ``read``, ``calibrate_min_span_score``
        and ``Pipeline`` read a candidate list through this, so a reader that can score every
        hit in one model call (``SentenceReader``) does so."""
        return [self.hit_spans(question, h) for h in hits]

    def accepts(self, span: Span) -> bool:
        """The span's score clears ``min_span_score`` (always, when there is no floor): the
        reader would answer with it rather than abstain."""
        return self.min_span_score is None or span.score >= self.min_span_score

    def read(self, question: str, hits: Sequence[Hit]) -> Answer:
        """The best span over ``hits`` (see ``hit_spans``) as an ``Answer`` naming its hit;
        abstains with ``no_candidates`` without hits and ``low_confidence`` when no span is
        found or the best is not ``accepts``-ed. Raises ``TypeError`` when ``hits`` is not a
        list of ``Hit`` and ``ValueError`` for a blank question. The call's wall time is
        appended to ``latencies_`` (seconds)."""
        t = time.perf_counter()
        check_query(question)
        if isinstance(hits, (str, Hit)) or not hasattr(hits, "__iter__"):
            raise TypeError(f"hits must be a list of Hit objects (a retriever's search "
                            f"result), got {type(hits).__name__}")
        if not hits:
            return Answer(None, reason="no_candidates")
        best = max((s for spans in self.hits_spans(question, hits) for s in spans),
                   key=lambda s: s.score, default=None)
        self.latencies_.append(time.perf_counter() - t)
        if best is None:
            return Answer(None, reason="low_confidence")
        if not self.accepts(best):
            return Answer(None, sources=(best.source,), scores=(best.score,),
                          reason="low_confidence")
        return Answer(best.text, sources=(best.source,), scores=(best.score,))


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max()
    e = np.exp(x)
    return e / e.sum()


def best_span(start_logits: np.ndarray, end_logits: np.ndarray, allowed: np.ndarray,
              max_answer_tokens: int) -> tuple[int, int, float]:
    """(start token, end token, p(start)·p(end)) of the best span within ``allowed``
    tokens, with end >= start and at most ``max_answer_tokens`` tokens."""
    if not allowed.any():
        return -1, -1, 0.0
    s = np.where(allowed, start_logits, -np.inf)
    e = np.where(allowed, end_logits, -np.inf)
    ps, pe = _softmax(s), _softmax(e)
    scores = np.triu(np.outer(ps, pe))                               # end >= start
    scores = np.tril(scores, k=max_answer_tokens - 1)                # length cap
    i, j = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(i), int(j), float(scores[i, j])


class ExtractiveReader(BaseSpanReader):
    """Span extraction with a question-answering model: ``model`` is a ``(model, tokenizer)``
    pair, or None for the ``span_reader`` role of ``profile`` (the active one by default),
    loaded on first use. ``read(question, hits)`` returns the best span over all hits as an
    ``Answer`` whose ``sources`` name the hit it came from; ``min_span_score`` is the floor
    on p(start)·p(end) under which it abstains (None: never)."""

    neutral_settings = frozenset({"batch_size"})   # windows per model call

    def __init__(self, model=None, *, max_length: int = 384, overlap: int = 128,
                 max_answer_tokens: int = 30, min_span_score: float | None = None,
                 batch_size: int = 8, profile: str | None = None):
        if not 0 <= overlap < max_length:
            raise ValueError(f"overlap must satisfy 0 <= overlap < max_length, got {overlap} "
                             f"and {max_length}")
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be >= 1, got {max_answer_tokens}")
        self._model, self.profile = model, profile
        self.max_length, self.overlap = max_length, overlap
        self.max_answer_tokens = max_answer_tokens
        self.min_span_score = check_threshold(min_span_score, "min_span_score")
        self.batch_size = batch_size
        self.latencies_: list[float] = []

    def _fingerprint_extra(self) -> dict:
        if self._model is not None:  # given: the setting says what it is
            return {}
        return {"model": models.identity("span_reader", self.profile)}

    @property
    def pair(self):
        """(model, tokenizer): the ones given, else the profile's ``span_reader`` loaded on
        first use (``ModelUnavailableError`` offline, where no QA model ships)."""
        if self._model is not None:
            return self._model
        if getattr(self, "_loaded", None) is None:  # not a setting: the profile's model
            self._loaded = models.load("span_reader", self.profile)
        return self._loaded

    def spans(self, question: str, context: str, source: str = "") -> list[Span]:
        """The best span of each window of ``context`` (long contexts have several)."""
        import torch

        model, tok = self.pair
        enc = tok(question, context, truncation="only_second", max_length=self.max_length,
                  stride=self.overlap, return_overflowing_tokens=True,
                  return_offsets_mapping=True, padding=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping").numpy()
        enc.pop("overflow_to_sample_mapping", None)
        out = []
        with torch.no_grad():
            for b in range(0, len(offsets), self.batch_size):
                batch = {k: v[b:b + self.batch_size].to(model.device) for k, v in enc.items()}
                logits = model(**batch)
                starts = logits.start_logits.float().cpu().numpy()
                ends = logits.end_logits.float().cpu().numpy()
                for w in range(len(starts)):
                    seq = enc.sequence_ids(b + w)
                    allowed = np.array([sid == 1 for sid in seq])      # passage tokens only
                    i, j, score = best_span(starts[w], ends[w], allowed, self.max_answer_tokens)
                    if i < 0:
                        continue
                    text, a, z = span_to_characters(context, offsets[b + w], i, j)
                    out.append(Span(text, a, z, score, source))
        return out


# -- small pieces of the reader, public so chapter 7 and its graders reuse them ------------

def span_to_characters(context: str, offsets: Sequence[tuple[int, int]], start: int,
                       end: int) -> tuple[str, int, int]:
    """``(text, char_start, char_end)`` of tokens ``start..end`` (inclusive): token ``i``
    covers ``context[offsets[i][0]:offsets[i][1]]``, so the answer is a verbatim slice of
    the context (never decoded word pieces such as ``14 - day``).

    >>> span_to_characters("a 14-day window", [(0, 1), (2, 4), (4, 5), (5, 8)], 1, 3)
    ('14-day', 2, 8)
    """
    a, z = int(offsets[start][0]), int(offsets[end][1])
    return context[a:z], a, z


def answer_or_abstain(candidates: Sequence[tuple[str, float]],
                      min_span_score: float) -> str | None:
    """The text of the best-scoring ``(text, score)`` candidate if its score reaches
    ``min_span_score``, else None (abstain): an extractive reader's last step. The first of
    equal scores wins; no candidates is an abstention.

    >>> answer_or_abstain([("14-day", 0.62), ("30 days", 0.21)], 0.5)
    '14-day'
    >>> answer_or_abstain([("14-day", 0.62)], 0.7) is None
    True
    """
    if not candidates:
        return None
    text, score = max(candidates, key=lambda c: c[1])
    return text if score >= min_span_score else None
