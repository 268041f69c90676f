"""Chapters 5-6: the fusion grid (RRF constant x channel depth), why a hybrid hit scored
what it did, and the rerank budget.

Each widget is a thin ipywidgets view over a pure function the tests call directly."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .. import evaluate
from ..checks import check_k
from ..explain import explain_bm25, explain_dense, explain_rrf
from ..fusion import reciprocal_rank_fusion
from .view import dashboard

__all__ = ["FusionGrid", "fusion_explorer", "why_hit", "why_explorer", "RerankBudget",
           "rerank_explorer"]


# -- chapter 5: fusion ---------------------------------------------------------------------

@dataclass
class FusionGrid:
    """RRF quality for any (k, channel depth) from one deep fetch per question.

    ``channels`` maps question id -> (dense hits, bm25 hits), each at least as deep as the
    largest depth asked about; the fused list is cut to ``fuse_to``.
    """

    channels: dict
    qrels: dict
    fuse_to: int = 50

    def stats(self, rrf_k: int = 60, depth: int = 100, weights=(1.0, 1.0)) -> dict:
        """recall@5 and MRR@10 of RRF with constant ``rrf_k`` over channels cut to ``depth``."""
        depth = check_k(depth, "depth")
        fused = {q: reciprocal_rank_fusion([d[:depth], b[:depth]], k=self.fuse_to, rrf_k=rrf_k,
                                           weights=weights)
                 for q, (d, b) in self.channels.items()}
        run = evaluate.run_from_hits(fused)
        return {"rrf_k": rrf_k, "depth": depth,
                **evaluate.evaluate(self.qrels, run, ["recall@5", "mrr@10"])}


def fusion_explorer(grid: FusionGrid):
    """Sliders for RRF's k and the per-channel depth over a ``FusionGrid``."""
    import ipywidgets as W

    k = W.SelectionSlider(options=[0, 1, 5, 10, 30, 60, 100, 300], value=60, description="RRF k")
    depth = W.SelectionSlider(options=[5, 10, 25, 50, 100], value=100, description="depth")

    def text(k, depth):
        s = grid.stats(k, depth)
        return f"recall@5 = {s['recall@5']:.3f}   MRR@10 = {s['mrr@10']:.3f}"

    return dashboard({"k": k, "depth": depth}, text)


def why_hit(hybrid, query: str, rank: int = 1, k: int = 5) -> str:
    """Why the hybrid's hit at ``rank`` (of its top ``k`` for ``query``) has its fused
    score: the RRF parts, one per channel that ranked it (``explain.explain_rrf``), then each
    channel's own reason — the dense cosine with the prefixes embedded, BM25's per-term
    contributions — or the channel's depth it missed. The parts printed add up to each
    score printed (``ragbook.explain``'s tests hold them to 1e-9)."""
    hits = hybrid.search(query, k=check_k(k))
    if not 1 <= rank <= len(hits):
        raise ValueError(f"rank={rank!r} but the search returned {len(hits)} hits; "
                         f"choose a rank from 1 to {len(hits)}")
    hit = hits[rank - 1]
    rrf = explain_rrf(hybrid, query, hit)
    ranked = {p.name: p.detail for p in rrf.parts}     # each channel's rank and own score
    lines = [rrf.text()]
    for name, index, why in (("dense", hybrid.dense, explain_dense),
                             ("bm25", hybrid.bm25, explain_bm25)):
        if name not in ranked:
            lines.append(f"{name}: not in its top {hybrid.depth}, so it adds nothing")
            continue
        rank_there, score_there = ranked[name]["rank"], ranked[name]["channel_score"]
        found = replace(hit, rank=rank_there, score=score_there)
        lines.append(f"{name} rank {rank_there}, because:\n" + why(index, query, found).text())
    return "\n".join(lines)


def why_explorer(hybrid, questions: dict, k: int = 5):
    """A question picker and a rank slider over ``why_hit``: ``questions`` maps id -> text."""
    import ipywidgets as W

    qid = W.Dropdown(options=[(f"{q}: {t[:60]}", q) for q, t in questions.items()],
                     description="question", layout=W.Layout(width="90%"))
    rank = W.IntSlider(value=1, min=1, max=k, description="hit rank")
    return dashboard({"qid": qid, "rank": rank},
                     lambda qid, rank: why_hit(hybrid, questions[qid], rank, k), rows=[qid, rank])


# -- chapter 6: reranking budget -----------------------------------------------------------

@dataclass
class RerankBudget:
    """MRR and latency of reranking the top ``n`` candidates, for any n up to the depth of
    the stored lists: ``candidates`` maps question id -> (query, first-stage hits)."""

    candidates: dict
    qrels: dict
    reranker: object
    keep: int = 5

    def stats(self, n: int) -> dict:
        """recall@5, MRR@10 and the mean rerank time per query when only the first ``n``
        candidates of each list are reranked (the dashboard's one slider)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        results, times = {}, []
        for qid, (query, hits) in self.candidates.items():
            results[qid] = self.reranker.rerank(query, hits[:n], k=self.keep)
            times.append(self.reranker.last_latency_s)
        run = evaluate.run_from_hits(results)
        return {"candidates": n, "ms_per_query": 1000 * float(np.mean(times)),
                **evaluate.evaluate(self.qrels, run, ["recall@5", "mrr@10"])}


def rerank_explorer(budget: RerankBudget, options=(5, 10, 20, 30, 50)):
    """A candidate-count slider over a ``RerankBudget`` (each move re-runs the reranker,
    from cached vectors)."""
    import ipywidgets as W

    n = W.SelectionSlider(options=list(options), value=options[len(options) // 2],
                          description="candidates")

    def text(n):
        s = budget.stats(n)
        return (f"{s['ms_per_query']:.0f} ms/query   recall@5 = {s['recall@5']:.3f}   "
                f"MRR@10 = {s['mrr@10']:.3f}")

    return dashboard({"n": n}, text, rows=[n])
