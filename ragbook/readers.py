"""Readers: turn a question and retrieved hits into an ``Answer``.

``ExtractiveReader`` points at a span of a passage. A question-answering model gives two
scores per token — how likely the answer *starts* there, and how likely it *ends* there.
The reader (recent transformers has no question-answering pipeline, so we call the model):

1. encodes (question, passage) pairs, splitting long passages into overlapping windows
   (``max_length`` tokens, ``stride`` tokens shared between windows);
2. masks every token that is not passage text (the question, [CLS], [SEP], padding), so
   the answer can only lie in the passage;
3. turns start and end logits into probabilities and scores every span with
   end >= start and at most ``max_answer_tokens`` tokens by p(start) · p(end);
4. maps the best span's token offsets back to characters, so the answer is a verbatim
   substring of the passage — fabrication is impossible by construction;
5. abstains (``reason="low_confidence"``) when the best score is under ``min_score``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .types import Answer, Hit

__all__ = ["Span", "ExtractiveReader", "best_span"]


@dataclass(frozen=True)
class Span:
    """A candidate answer: ``text == context[start:end]``, with its p(start)·p(end)."""

    text: str
    start: int
    end: int
    score: float
    source: str = ""


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


class ExtractiveReader:
    """Span extraction with a question-answering model (``span_reader`` role by default,
    or a ``(model, tokenizer)`` pair). ``read(question, hits)`` returns the best span over
    all hits as an ``Answer`` whose ``sources`` name the hit it came from."""

    def __init__(self, model=None, *, max_length: int = 384, stride: int = 128,
                 max_answer_tokens: int = 30, min_score: float | None = None,
                 batch_size: int = 8, profile: str | None = None):
        if not 0 <= stride < max_length:
            raise ValueError(f"stride must satisfy 0 <= stride < max_length, got {stride} and {max_length}")
        if max_answer_tokens < 1:
            raise ValueError(f"max_answer_tokens must be >= 1, got {max_answer_tokens}")
        self._pair, self.profile = model, profile
        self.max_length, self.stride, self.max_answer_tokens = max_length, stride, max_answer_tokens
        self.min_score, self.batch_size = min_score, batch_size
        self.latencies_: list[float] = []

    @property
    def pair(self):
        if self._pair is None:
            from . import models

            self._pair = models.load("span_reader", self.profile)
        return self._pair

    def spans(self, question: str, context: str, source: str = "") -> list[Span]:
        """The best span of each window of ``context`` (long contexts have several)."""
        import torch

        model, tok = self.pair
        enc = tok(question, context, truncation="only_second", max_length=self.max_length,
                  stride=self.stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                  padding=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping").numpy()
        enc.pop("overflow_to_sample_mapping", None)
        out = []
        with torch.no_grad():
            for b in range(0, len(offsets), self.batch_size):
                batch = {k: v[b:b + self.batch_size].to(model.device) for k, v in enc.items()}
                logits = model(**batch)
                starts, ends = logits.start_logits.float().cpu().numpy(), logits.end_logits.float().cpu().numpy()
                for w in range(len(starts)):
                    seq = enc.sequence_ids(b + w)
                    allowed = np.array([sid == 1 for sid in seq])      # passage tokens only
                    i, j, score = best_span(starts[w], ends[w], allowed, self.max_answer_tokens)
                    if i < 0:
                        continue
                    a, z = int(offsets[b + w][i][0]), int(offsets[b + w][j][1])
                    out.append(Span(context[a:z], a, z, score, source))
        return out

    def read(self, question: str, hits: Sequence[Hit]) -> Answer:
        """The best span over ``hits``; abstains with a reason when there is nothing to read
        or the best score is under ``min_score``."""
        t = time.perf_counter()
        if not hits:
            self.latencies_.append(time.perf_counter() - t)
            return Answer(None, reason="no_candidates")
        best = max((s for h in hits for s in self.spans(question, h.text, h.id)),
                   key=lambda s: s.score, default=None)
        self.latencies_.append(time.perf_counter() - t)
        if best is None or (self.min_score is not None and best.score < self.min_score):
            return Answer(None, sources=(best.source,) if best else (), scores=(best.score,) if best else (),
                          reason="low_confidence")
        return Answer(best.text, sources=(best.source,), scores=(best.score,))
