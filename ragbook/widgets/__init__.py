"""Interactive dashboards for the notebooks. Each widget is a thin ipywidgets view over a
pure function that the tests call directly, so what a slider shows is tested code.

* ``cost_explorer()``        -> ``cost_table(**settings)``            (chapter 0)
* ``chunking_explorer(exp)`` -> ``ChunkingExperiment.stats(size, overlap)`` (chapter 1)
* ``similarity_playground()``-> ``similarity_rankings(query, docs)``  (chapter 2)
* ``topk_explorer(topk)``    -> ``TopK.stats(k)`` / ``TopK.retrieved(qid, k)`` (chapter 3)
* ``fusion_explorer(grid)``  -> ``FusionGrid.stats(rrf_k, depth)``    (chapter 5)
* ``why_explorer(hybrid, qs)``-> ``why_hit(hybrid, query, rank)``     (chapter 5)
* ``rerank_explorer(budget)``-> ``RerankBudget.stats(candidates)``   (chapter 6)
* ``threshold_explorer(exp)``-> ``threshold_counts`` / ``threshold_curve`` (chapter 9)
* ``window_explorer(sweep)`` -> ``WindowSweep.stats(window)``        (chapter 10)

Every dashboard is wired by ``view.dashboard``: its numbers are a readout in widget state,
so the last slider setting's text always wins. ipywidgets and matplotlib are imported only
when a widget is built. One module per stretch of the book: ``basics`` (chapters 0-3),
``ranking`` (5-6), ``decisions`` (9-10).
"""
from .basics import (
    ChunkingExperiment,
    TopK,
    chunking_explorer,
    cost_explorer,
    cost_table,
    polar,
    similarity_playground,
    similarity_rankings,
    topk_explorer,
)
from .decisions import (
    ThresholdExplorer,
    WindowSweep,
    threshold_counts,
    threshold_curve,
    threshold_explorer,
    varied,
    window_explorer,
)
from .ranking import (
    FusionGrid,
    RerankBudget,
    fusion_explorer,
    rerank_explorer,
    why_explorer,
    why_hit,
)

__all__ = ["cost_table", "cost_explorer", "ChunkingExperiment", "chunking_explorer",
           "similarity_rankings", "similarity_playground", "polar", "TopK", "topk_explorer",
           "FusionGrid", "fusion_explorer", "RerankBudget", "rerank_explorer", "threshold_counts",
           "threshold_curve", "ThresholdExplorer", "threshold_explorer", "varied", "WindowSweep",
           "window_explorer", "why_hit", "why_explorer"]
