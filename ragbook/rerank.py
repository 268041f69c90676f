"""Second-stage reranking: read each (question, candidate) pair closely, keep the best few.

A bi-encoder embeds question and passage separately and compares frozen vectors: fast,
precomputable, imprecise. A cross-encoder reads the pair *together*: accurate, too slow for
a whole corpus, affordable over ~50 candidates. Retrieve wide and cheap, rerank narrow.

``CrossEncoderReranker`` runs any model with sentence-transformers' ``CrossEncoder.predict``
shape — the standard MS MARCO cross-encoder, or the offline stand-in the ``cross_encoder``
role resolves to: ``WindowScorer``, which re-reads each candidate in overlapping ~100-word
windows with the bi-encoder and scores it by its best window (chosen by measurement,
chapter 6; no cross-encoder ships in a pip package).
"""
from __future__ import annotations

import re
import time
from typing import Sequence

import numpy as np

from .types import Hit

__all__ = ["CrossEncoderReranker", "WindowScorer", "windows"]

_WORD = re.compile(r"\S+")


def windows(text: str, size: int = 100, stride: int = 50) -> list[str]:
    """Overlapping windows of ``size`` words, starting every ``stride`` words; the last
    window reaches the end of the text. A text of at most ``size`` words is one window."""
    if size < 1 or not 0 < stride <= size:
        raise ValueError(f"need size >= 1 and 0 < stride <= size, got size={size}, stride={stride}")
    spans = [m.span() for m in _WORD.finditer(text)]
    if len(spans) <= size:
        return [text.strip()]
    out, start = [], 0
    while True:
        end = min(start + size, len(spans))
        out.append(text[spans[start][0]:spans[end - 1][1]])
        if end == len(spans):
            return out
        start += stride


class WindowScorer:
    """Offline stand-in for a cross-encoder: score(q, p) = max over p's windows of the
    cosine between q and the window, both embedded by the bi-encoder. Window vectors go
    through the Encoder's disk cache, so a candidate is only ever embedded once."""

    def __init__(self, encoder=None, size: int = 100, stride: int = 50):
        from .embeddings import Encoder

        self.encoder = encoder if encoder is not None else Encoder()
        self.size, self.stride = size, stride

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, **_) -> np.ndarray:
        pairs = list(pairs)
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        questions = list(dict.fromkeys(q for q, _ in pairs))
        qvecs = dict(zip(questions, self.encoder.encode_queries(questions)))
        per_pair = [windows(p, self.size, self.stride) for _, p in pairs]
        flat = [w for ws in per_pair for w in ws]
        wvecs = self.encoder.encode_passages(flat)
        out, i = np.empty(len(pairs), dtype=np.float32), 0
        for n, ((q, _), ws) in enumerate(zip(pairs, per_pair)):
            out[n] = float((wvecs[i:i + len(ws)] @ qvecs[q]).max())
            i += len(ws)
        return out


class CrossEncoderReranker:
    """Rerank hits with a pair-scoring model; ``threshold`` drops candidates scoring below
    it, so a query can get nothing back (better than a confident wrong answer).

    ``model`` is anything with ``predict(pairs, batch_size=...)``; by default the
    ``cross_encoder`` role of the active profile, loaded once per process. Each call's
    wall time is kept in ``latencies_`` (seconds), the last in ``last_latency_s``.
    """

    def __init__(self, model=None, *, batch_size: int = 32, threshold: float | None = None,
                 profile: str | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self._model, self.batch_size, self.threshold, self.profile = model, batch_size, threshold, profile
        self.latencies_: list[float] = []

    @property
    def model(self):
        if self._model is None:
            from . import models

            self._model = models.load("cross_encoder", self.profile)
        return self._model

    def score(self, query: str, hits: Sequence[Hit]) -> np.ndarray:
        """The model's score for each (query, hit text) pair, in input order."""
        if not hits:
            return np.zeros(0, dtype=np.float32)
        pairs = [(query, h.text) for h in hits]
        return np.asarray(self.model.predict(pairs, batch_size=self.batch_size,
                                             show_progress_bar=False), dtype=np.float32).ravel()

    def rerank(self, query: str, hits: Sequence[Hit], k: int = 5,
               threshold: float | None = None) -> list[Hit]:
        """The ``k`` best hits by the model's score (ranks renumbered from 1), dropping any
        below ``threshold`` (or the reranker's)."""
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a whole number >= 1, got {k!r}")
        t = time.perf_counter()
        scores = self.score(query, hits)
        self.last_latency_s = time.perf_counter() - t
        self.latencies_.append(self.last_latency_s)
        floor = self.threshold if threshold is None else threshold
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], hits[i].rank))
        kept = [i for i in order if floor is None or scores[i] >= floor][:k]
        return [Hit(id=hits[i].id, score=float(scores[i]), rank=r, doc_id=hits[i].doc_id,
                    text=hits[i].text, metadata=hits[i].metadata) for r, i in enumerate(kept, 1)]
