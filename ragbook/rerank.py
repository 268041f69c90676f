"""Second-stage reranking: read each (question, candidate) pair closely, keep the best few.

A bi-encoder embeds question and passage separately and compares frozen vectors: fast,
precomputable, imprecise. A cross-encoder reads the pair *together*: accurate, too slow for
a whole corpus, affordable over ~50 candidates. Retrieve wide and cheap, rerank narrow.

``CrossEncoderReranker`` runs any model with sentence-transformers' ``CrossEncoder.predict``
shape — the standard MS MARCO cross-encoder, or the offline stand-in the ``cross_encoder``
role resolves to: ``late_interaction.MaxSimScorer``, ColBERT-style MaxSim over the
bi-encoder's token vectors blended with the cosine (chosen by measurement, chapter 6; no
cross-encoder ships in a pip package). ``WindowScorer`` — each candidate re-read in
overlapping ~100-word windows, scored by its best — is the baseline it beat.
"""
from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from . import models
from .checks import check_k, check_query, check_threshold
from .chunking import sliding_windows
from .component import Component
from .embeddings import Encoder
from .filters import validate_where
from .retrieval import Reranker, WrapperRetriever, check_role, trace_stage
from .types import Hit, Retrieved

__all__ = ["BaseReranker", "CrossEncoderReranker", "RerankedRetriever", "WindowScorer", "windows",
           "word_window_spans", "max_window_scores", "rerank_positions", "candidates_within_budget"]

_WORD = re.compile(r"\S+")


def word_window_spans(n_words: int, size: int = 100, overlap: int = 50) -> list[tuple[int, int]]:
    """``(first word, end word)`` index pairs of windows of ``size`` words, each sharing
    ``overlap`` words with the one before (so starting every ``size - overlap`` words); the
    last window reaches word ``n_words``, and a text of at most ``size`` words is one window.
    ``windows`` cuts text along these spans.

    >>> word_window_spans(11, 4, 1)
    [(0, 4), (3, 7), (6, 10), (9, 11)]
    >>> word_window_spans(30, 100, 50)
    [(0, 30)]
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(f"need size >= 1 and 0 <= overlap < size, got size={size}, "
                         f"overlap={overlap}")
    if n_words <= size:
        return [(0, max(n_words, 0))]
    return sliding_windows(n_words, size, overlap=overlap)  # the same windows, in words


def windows(text: str, size: int = 100, overlap: int = 50) -> list[str]:
    """Windows of ``size`` words, each sharing ``overlap`` words with the one before; the
    last window reaches the end of the text. A text of at most ``size`` words is one window."""
    spans = [m.span() for m in _WORD.finditer(text)]
    cuts = word_window_spans(len(spans), size, overlap)
    if len(spans) <= size:
        return [text.strip()]
    return [text[spans[a][0]:spans[z - 1][1]] for a, z in cuts]


def max_window_scores(window_scores: Sequence[Sequence[float]]) -> list[float]:
    """One score per passage from its windows' scores: the best one, since a passage is as
    relevant as its most relevant part (a long page that answers in one paragraph).

    >>> max_window_scores([[0.2], [0.5, 0.4]])
    [0.2, 0.5]
    """
    return [float(max(scores)) for scores in window_scores]


def rerank_positions(scores: Sequence[float], k: int,
                     min_rerank_score: float | None = None) -> list[int]:
    """Positions of the candidates a reranker keeps: by score, best first (ties keep the
    earlier position, i.e. retrieval order), only those scoring at least
    ``min_rerank_score``, at most ``k``. An empty list is a valid outcome: nothing good
    enough to show.

    >>> rerank_positions([0.20, 0.91, 0.35, 0.91], 3, min_rerank_score=0.3)
    [1, 3, 2]
    """
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep position
    floor = min_rerank_score
    return [i for i in order if floor is None or scores[i] >= floor][:k]


def candidates_within_budget(ms_per_pair: float, budget_ms: float, available: int) -> int:
    """How many candidates a reranker can score in ``budget_ms`` at ``ms_per_pair`` each:
    whole pairs only (rounded down), never more than are ``available``.

    >>> candidates_within_budget(3.0, 100.0, 80), candidates_within_budget(2.0, 100.0, 30)
    (33, 30)
    """
    if ms_per_pair <= 0:
        raise ValueError(f"ms_per_pair must be > 0, got {ms_per_pair}; measure the reranker's "
                         f"time per (query, passage) pair first")
    return min(int(available), int(budget_ms // ms_per_pair))


class WindowScorer(Component):
    """Offline stand-in for a cross-encoder: score(q, p) = max over p's windows of the
    cosine between q and the window, both embedded by the bi-encoder. Window vectors go
    through the Encoder's disk cache, so a candidate is only ever embedded once."""

    def __init__(self, encoder=None, size: int = 100, overlap: int = 50):
        word_window_spans(size + 1, size, overlap)  # checks size >= 1, 0 <= overlap < size
        self.encoder = encoder if encoder is not None else Encoder()
        self.size, self.overlap = size, overlap

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, **_) -> np.ndarray:
        """A score per (question, passage) pair: the best cosine between the question and a
        window of the passage — the cross-encoder's ``predict`` contract, so either can rerank."""
        pairs = list(pairs)
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        questions = list(dict.fromkeys(q for q, _ in pairs))
        qvecs = dict(zip(questions, self.encoder.encode_queries(questions), strict=True))
        per_pair = [windows(p, self.size, self.overlap) for _, p in pairs]
        flat = [w for ws in per_pair for w in ws]
        wvecs = self.encoder.encode_passages(flat)
        per_window, i = [], 0
        for (q, _), ws in zip(pairs, per_pair, strict=True):
            per_window.append(wvecs[i:i + len(ws)] @ qvecs[q])
            i += len(ws)
        return np.asarray(max_window_scores(per_window), dtype=np.float32)


class BaseReranker(Component):
    """What every second stage shares (the ``retrieval.Reranker`` contract, written once): a
    subclass defines ``score(query, hits)`` — one number per hit, in input order — and
    stores a ``min_rerank_score`` setting; this gives it ``order`` (sort by score, ties in
    retrieval order, ranks renumbered; each call's wall time appended to ``latencies_``, a
    list the subclass starts empty in ``__init__``), ``cut``
    (the only rerank threshold), ``rerank`` and ``confidence_bounds``. Scores are of
    ``confidence_kind = "rerank"``: the model's own scale, unbounded unless a subclass says
    otherwise."""

    confidence_kind = "rerank"
    min_rerank_score: float | None = None

    def score(self, query: str, hits: Sequence[Hit]) -> np.ndarray:
        """This stage's score of each hit for ``query``, in input order."""
        raise NotImplementedError

    def confidence_bounds(self) -> tuple[float, float]:
        """The range of this stage's scores (unbounded: a model's logits or log-odds)."""
        return -math.inf, math.inf

    def order(self, query: str, hits: Sequence[Hit], k: int = 5) -> list[Hit]:
        """The ``k`` best hits by ``score``, ranks renumbered from 1 — no cut yet (``cut``
        applies ``min_rerank_score``; ``rerank`` does both)."""
        k, query = check_k(k), check_query(query)
        t = time.perf_counter()
        scores = self.score(query, hits)
        self.last_latency_s = time.perf_counter() - t
        self.latencies_.append(self.last_latency_s)
        by_rank = sorted(range(len(hits)), key=lambda i: hits[i].rank)  # ties: retrieval order
        kept = [by_rank[j] for j in rerank_positions([scores[i] for i in by_rank], k)]
        return [replace(hits[i], score=float(scores[i]), rank=r) for r, i in enumerate(kept, 1)]

    def cut(self, hits: Sequence[Hit]) -> list[Hit]:
        """The reranked ``hits`` scoring at least ``min_rerank_score`` (all of them when it
        is None). ``hits`` come from ``order``, best first, so ranks stay 1, 2, ..."""
        floor = self.min_rerank_score
        return [h for h in hits if floor is None or h.score >= floor]

    def rerank(self, query: str, hits: Sequence[Hit], k: int = 5) -> list[Hit]:
        """The ``k`` best hits by score (ranks renumbered from 1), dropping any below
        ``min_rerank_score``: ``cut(order(query, hits, k))``."""
        return self.cut(self.order(query, hits, k))


class CrossEncoderReranker(BaseReranker):
    """Rerank hits with a pair-scoring model; ``min_rerank_score`` drops candidates scoring
    below it, so a query can get nothing back (better than a confident wrong answer). It is
    the only rerank cut in the package: a pipeline applies it through ``cut``.

    ``model`` is anything with ``predict(pairs, batch_size=...)``; by default the
    ``cross_encoder`` role of the active profile (or ``profile``), loaded on first use. Each
    call's wall time is kept in ``latencies_`` (seconds), the last in ``last_latency_s``.
    Its scores are of ``confidence_kind = "rerank"``: the model's own scale.
    """

    neutral_settings = frozenset({"batch_size"})   # how many pairs a model call takes

    def __init__(self, model=None, *, batch_size: int = 32,
                 min_rerank_score: float | None = None, profile: str | None = None):
        self._model, self.profile = model, profile
        self.batch_size = check_k(batch_size, "batch_size")
        self.min_rerank_score = check_threshold(min_rerank_score, "min_rerank_score")
        self.latencies_: list[float] = []

    def _fingerprint_extra(self) -> dict:
        if self._model is not None:  # given (or loaded): its own settings say what it is
            return {}
        return {"model": models.identity("cross_encoder", self.profile)}

    @property
    def model(self):
        """The cross-encoder, loaded on first use (``ModelUnavailableError`` in a profile without
        one, with what to install)."""
        if self._model is not None:
            return self._model
        if getattr(self, "_loaded", None) is None:  # not a setting: the profile's model
            self._loaded = models.load("cross_encoder", self.profile)
        return self._loaded

    def score(self, query: str, hits: Sequence[Hit]) -> np.ndarray:
        """The model's score for each (query, hit text) pair, in input order."""
        if not hits:
            return np.zeros(0, dtype=np.float32)
        pairs = [(query, h.text) for h in hits]
        return np.asarray(self.model.predict(pairs, batch_size=self.batch_size,
                                             show_progress_bar=False), dtype=np.float32).ravel()


class RerankedRetriever(WrapperRetriever):
    """A first-stage retriever followed by a reranker, as one ``Retriever``: fetch
    ``candidates`` hits (filtered by ``where`` inside the first stage), rerank them, return
    the best ``k``. Its corpus is the first stage's, so it shares its corpus fingerprint;
    its confidence is the reranker's best score (``confidence_kind = "rerank"``)."""

    confidence_kind = "rerank"

    def __init__(self, retriever, reranker: Reranker | None = None, candidates: int = 50):
        self.retriever = retriever
        self.reranker = check_role(reranker if reranker is not None else CrossEncoderReranker(),
                                   Reranker, "reranker")
        self.candidates = check_k(candidates, "candidates")

    def search(self, query: str, k: int = 10, where=None, *, scope=None) -> list[Hit]:
        """The best ``k`` (the number of results) of the first stage's ``candidates``."""
        return list(self.retrieve(query, k, where, scope=scope).hits)

    def retrieve(self, query: str, k: int = 10, where=None, *, scope=None) -> Retrieved:
        """The first stage's ``retrieve`` (its stages kept; ``where`` and ``scope`` applied
        inside it) followed by a ``rerank`` stage; the confidence is the best reranked
        score."""
        k, query, where = check_k(k), check_query(query), validate_where(where)
        first = self.retriever.retrieve(query, k=max(k, self.candidates), where=where,
                                        scope=scope)
        t = time.perf_counter()
        hits = self.reranker.rerank(query, list(first.hits), k=k)
        stage = trace_stage("rerank", t, hits, {"min_rerank_score":
                                                self.reranker.min_rerank_score})
        return Retrieved(tuple(hits), first.stages + (stage,),
                         hits[0].score if hits else None, self.confidence_kind)

    def confidence_bounds(self) -> tuple[float, float]:
        """The reranker's score range."""
        return self.reranker.confidence_bounds()
