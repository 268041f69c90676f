"""Retrieval metrics in the shape of ranx: ``evaluate(qrels, run, ["recall@5", "mrr@10"])``.

* ``qrels``: ``{query_id: {doc_id: relevance}}`` (relevance > 0 means relevant);
* ``run``: ``{query_id: {doc_id: score}}`` — what a retriever returned, higher is better.

A run is ranked by score, descending. **Ties** are broken by doc id, ascending, so a
result never depends on dict order; give distinct scores if order matters to you.
Queries in ``qrels`` missing from the run score 0 (the retriever found nothing); queries in
the run without relevant documents in ``qrels`` are ignored, as in trec_eval and ranx.

>>> qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 1}, "q5": {"e": 1}}
>>> run = {"q1": {"a": 3}, "q2": {"x": 3, "y": 2, "b": 1}, "q3": {"x": 2, "c": 1},
...        "q4": {"x": 1}, "q5": {"e": 1}}
>>> evaluate(qrels, run, ["mrr@10", "recall@5"])
{'mrr@10': 0.5666666666666667, 'recall@5': 0.8}
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Mapping, Sequence

from .types import Hit

__all__ = ["Qrels", "Run", "ranking", "recall_at_k", "hit_at_k", "reciprocal_rank",
           "ndcg_at_k", "evaluate", "per_query", "run_from_hits", "METRICS"]

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


def ranking(scores: Mapping[str, float]) -> list[str]:
    """Doc ids best first: by score descending, ties by doc id ascending."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]


def recall_at_k(relevant: Mapping[str, int], ranked: Sequence[str], k: int) -> float:
    """|relevant ∩ top k| / |relevant|: the share of what should be found that was found."""
    rel = {d for d, r in relevant.items() if r > 0}
    return len(rel.intersection(ranked[:k])) / len(rel) if rel else 0.0


def hit_at_k(relevant: Mapping[str, int], ranked: Sequence[str], k: int) -> float:
    """1 if any relevant document is in the top k, else 0 (a.k.a. success@k, hit rate).
    Equals recall@k when each query has exactly one relevant document."""
    return float(any(relevant.get(d, 0) > 0 for d in ranked[:k]))


def reciprocal_rank(relevant: Mapping[str, int], ranked: Sequence[str], k: int) -> float:
    """1 / rank of the first relevant document within the top k, else 0. Its mean over
    queries is MRR@k (Voorhees, TREC-8 QA track, 1999)."""
    for i, d in enumerate(ranked[:k], 1):
        if relevant.get(d, 0) > 0:
            return 1.0 / i
    return 0.0


def ndcg_at_k(relevant: Mapping[str, int], ranked: Sequence[str], k: int) -> float:
    """DCG@k / ideal DCG@k with gain = relevance and discount 1/log2(rank + 1)
    (Järvelin & Kekäläinen, 2002; the trec_eval / BEIR form)."""
    dcg = sum(relevant.get(d, 0) / math.log2(i + 1) for i, d in enumerate(ranked[:k], 1)
              if relevant.get(d, 0) > 0)
    ideal = sorted((r for r in relevant.values() if r > 0), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 1) for i, r in enumerate(ideal, 1))
    return dcg / idcg if idcg else 0.0


METRICS: dict[str, Callable[[Mapping[str, int], Sequence[str], int], float]] = {
    "recall": recall_at_k, "hit": hit_at_k, "mrr": reciprocal_rank, "ndcg": ndcg_at_k,
}


def _parse(metric: str) -> tuple[str, int]:
    name, _, k = metric.partition("@")
    if name not in METRICS or not k.isdigit() or int(k) < 1:
        raise ValueError(f"unknown metric {metric!r}; use NAME@K with NAME one of "
                         f"{', '.join(METRICS)} and K >= 1, e.g. 'recall@5'")
    return name, int(k)


def per_query(qrels: Qrels, run: Run, metric: str) -> dict[str, float]:
    """One metric's value for every query that has a relevant document."""
    name, k = _parse(metric)
    fn = METRICS[name]
    return {q: fn(rel, ranking(run.get(q, {})), k) for q, rel in qrels.items()
            if any(r > 0 for r in rel.values())}


def evaluate(qrels: Qrels, run: Run, metrics: str | Iterable[str]) -> dict[str, float] | float:
    """Mean of each metric over the queries with relevant documents. A single metric name
    returns a float, a list returns ``{metric: mean}`` (like ranx)."""
    single = isinstance(metrics, str)
    names = [metrics] if single else list(metrics)
    out = {}
    for m in names:
        values = per_query(qrels, run, m)
        if not values:
            raise ValueError("qrels has no query with a relevant document; nothing to evaluate")
        out[m] = sum(values.values()) / len(values)
    return out[names[0]] if single else out


def run_from_hits(results: Mapping[str, Sequence[Hit]], level: str = "doc") -> dict[str, dict[str, float]]:
    """Turn ``{query_id: [Hit, ...]}`` into a run. ``level="doc"`` scores each document by
    its best chunk (the first time it appears), so chunk retrieval is judged on documents."""
    if level not in ("doc", "chunk"):
        raise ValueError(f"level must be 'doc' or 'chunk', got {level!r}")
    run: dict[str, dict[str, float]] = {}
    for q, hits in results.items():
        scores: dict[str, float] = {}
        for h in hits:
            key = (h.doc_id or h.id) if level == "doc" else h.id
            if key not in scores:
                # rank-preserving score: later hits never outrank earlier ones, even on ties
                scores[key] = float(len(hits) - h.rank + 1)
        run[q] = scores
    return run
