"""Cost and latency of two designs: ask the LLM about every document, or retrieve k and read those.

The arithmetic is simple, which is the point: it is the first reason retrieval exists.

>>> w = Workload()
>>> naive(w).input_tokens, round(naive(w).dollars, 2), naive(w).latency_sequential_s
(9600000, 28.8, 7200.0)
>>> round(retriever_reader(w).dollars, 3), reduction_factor(w)
(0.012, 2400.0)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Workload", "DesignCost", "naive", "retriever_reader", "reduction_factor", "compare",
           "context_tokens"]


@dataclass(frozen=True)
class Workload:
    """The numbers both designs depend on. Defaults are chapter 0's storyline: 12,000
    resolved tickets of ~800 tokens, $3 per million input tokens, 600 ms per LLM call,
    50 calls in flight at once, 5 retrieved candidates, ~30 ms retrieval, ~1.3 s to read
    the candidates in one call."""

    corpus_docs: int = 12_000
    tokens_per_doc: int = 800
    price_per_million: float = 3.0
    call_latency_s: float = 0.6
    parallelism: int = 50
    k: int = 5
    retrieval_latency_s: float = 0.03
    reader_latency_s: float = 1.3

    def __post_init__(self) -> None:
        for name in ("corpus_docs", "tokens_per_doc", "parallelism", "k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("price_per_million", "call_latency_s", "retrieval_latency_s",
                     "reader_latency_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.k > self.corpus_docs:
            raise ValueError(f"k={self.k} is larger than the corpus ({self.corpus_docs} docs); "
                             f"retrieve at most corpus_docs")


@dataclass(frozen=True)
class DesignCost:
    """What one question costs under one design."""

    design: str
    calls: int
    input_tokens: int
    dollars: float
    latency_sequential_s: float
    latency_parallel_s: float


def naive(w: Workload) -> DesignCost:
    """One LLM call per document for every question. In parallel, the calls run in
    ``ceil(docs / parallelism)`` waves of ``call_latency_s`` each."""
    tokens = w.corpus_docs * w.tokens_per_doc
    waves = math.ceil(w.corpus_docs / w.parallelism)
    return DesignCost("ask every document", w.corpus_docs, tokens,
                      tokens * w.price_per_million / 1e6,
                      w.corpus_docs * w.call_latency_s, waves * w.call_latency_s)


def retriever_reader(w: Workload) -> DesignCost:
    """Retrieve ``k`` documents (about free: a vector search), then one call reads them."""
    tokens = w.k * w.tokens_per_doc
    latency = w.retrieval_latency_s + w.reader_latency_s
    return DesignCost("retrieve, then read", 1, tokens, tokens * w.price_per_million / 1e6,
                      latency, latency)


def context_tokens(token_counts, k: int) -> int:
    """Tokens the reader is handed: the sum of the first ``k`` token counts of a ranking
    (all of them when the ranking is shorter). What a reader call costs grows with it.

    >>> context_tokens([120, 80, 200, 40], 2), context_tokens([120, 80], 10)
    (200, 200)
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    return int(sum(token_counts[:k]))


def reduction_factor(w: Workload) -> float:
    """How much smaller the pile the LLM reads is: corpus size / k."""
    return w.corpus_docs / w.k


def compare(w: Workload | None = None) -> list[dict]:
    """Both designs side by side, one dict per design (a table for notebooks and widgets)."""
    w = w or Workload()
    return [vars(naive(w)) | {"reduction": 1.0},
            vars(retriever_reader(w)) | {"reduction": reduction_factor(w)}]
