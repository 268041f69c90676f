"""Chapters 0-3: the cost explorer, chunking, similarity and top-k dashboards.

Each widget is a thin ipywidgets view over a pure function the tests call directly."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import chunking, cost, evaluate, similarity
from ..figures import vectors_2d
from ..types import Document
from .view import dashboard

__all__ = ["cost_table", "cost_explorer", "ChunkingExperiment", "chunking_explorer",
           "similarity_rankings", "polar", "similarity_playground", "TopK", "topk_explorer"]


# -- chapter 0: cost -----------------------------------------------------------------------

def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def cost_table(**settings) -> str:
    """Both designs for one workload (``Workload`` fields as keywords), as a text table."""
    w = cost.Workload(**settings)
    rows = [cost.naive(w), cost.retriever_reader(w)]
    lines = [f"{'design':22s} {'calls':>7s} {'input tokens':>13s} {'$ / question':>13s} "
             f"{'sequential':>11s} {'parallel':>9s}"]
    for r in rows:
        lines.append(f"{r.design:22s} {r.calls:7,d} {r.input_tokens:13,d} {r.dollars:13,.3f} "
                     f"{_duration(r.latency_sequential_s):>11s} "
                     f"{_duration(r.latency_parallel_s):>9s}")
    lines.append(f"search space cut by {cost.reduction_factor(w):,.0f}x "
                 f"({w.corpus_docs:,} documents -> {w.k} read)")
    return "\n".join(lines)


def cost_explorer():
    """Sliders for corpus size, tokens per document, price, latency, parallelism and k."""
    import ipywidgets as W

    d = cost.Workload()
    sliders = dict(
        corpus_docs=W.IntSlider(value=d.corpus_docs, min=1_000, max=200_000, step=1_000,
                                description="documents"),
        tokens_per_doc=W.IntSlider(value=d.tokens_per_doc, min=100, max=4_000, step=100,
                                   description="tokens/doc"),
        price_per_million=W.FloatSlider(value=d.price_per_million, min=0.1, max=15, step=0.1,
                                        description="$ / M tok"),
        call_latency_s=W.FloatSlider(value=d.call_latency_s, min=0.1, max=5, step=0.1,
                                     description="s / call"),
        parallelism=W.IntSlider(value=d.parallelism, min=1, max=500, step=1,
                                description="parallel"),
        k=W.IntSlider(value=d.k, min=1, max=50, step=1, description="k"),
    )
    row = list(sliders.values())
    return dashboard(sliders, cost_table, rows=[W.HBox(row[:3]), W.HBox(row[3:])])


# -- chapter 1: chunking -------------------------------------------------------------------

@dataclass
class ChunkingExperiment:
    """Chunk a corpus at every (size, overlap) of a grid, embed every chunk once, and answer
    "how many chunks, what premium, what recall@k" for any grid point instantly.

    Overlaps are fractions of the size. ``questions`` are ``datasets.Question`` objects
    with gold document ids; recall@k is judged on the documents of the top-k chunks.
    """

    documents: Sequence[Document]
    questions: Sequence
    encoder: object
    sizes: tuple[int, ...] = (128, 256)
    overlaps: tuple[float, ...] = (0.0, 0.1, 0.25, 0.5)
    k: int = 5

    def build(self, progress: bool = True):
        """Split and embed every grid point (the disk cache makes re-builds fast)."""
        qrels = {q.id: {d: 1 for d in q.gold} for q in self.questions if q.gold}
        qvec = self.encoder.encode_queries([q.standalone for q in self.questions if q.gold])
        qids = list(qrels)
        self.results_ = {}
        grid = [(s, o) for s in self.sizes for o in self.overlaps]
        if progress:
            from tqdm.auto import tqdm
            grid = tqdm(grid, desc="chunk + embed grid")
        for size, frac in grid:
            overlap = int(round(size * frac))
            chunks = chunking.chunk_documents(self.documents, size=size, overlap=overlap)
            vecs = self.encoder.encode_passages([c.text for c in chunks])
            scores = qvec @ vecs.T
            top = np.argsort(-scores, axis=1)[:, :self.k]
            run = {}
            for row, (qi, best) in enumerate(zip(qids, top, strict=True)):
                docs: dict[str, float] = {}
                for j in best:
                    docs.setdefault(chunks[j].doc_id, float(scores[row, j]))
                run[qi] = docs
            self.results_[(size, frac)] = {
                "chunks": len(chunks),
                f"recall@{self.k}": evaluate.evaluate(qrels, run, f"recall@{self.k}")}
        return self

    def stats(self, size: int, overlap: float) -> dict:
        """Chunk count, index premium over no overlap, and recall@k at one grid point."""
        if not hasattr(self, "results_"):
            raise RuntimeError("call .build() first: it chunks and embeds the grid once")
        if (size, overlap) not in self.results_:
            raise ValueError(f"(size={size}, overlap={overlap}) is not on the grid; sizes "
                             f"{self.sizes}, overlaps {self.overlaps}")
        r = dict(self.results_[(size, overlap)])
        r["premium"] = chunking.index_premium(r["chunks"], self.results_[(size, 0.0)]["chunks"])
        return {"size": size, "overlap": overlap, **r}


def chunking_explorer(experiment: ChunkingExperiment):
    """Size and overlap sliders over a built ``ChunkingExperiment``."""
    import ipywidgets as W

    size = W.SelectionSlider(options=list(experiment.sizes),
                             value=experiment.sizes[len(experiment.sizes) // 2],
                             description="size (tok)")
    overlap = W.SelectionSlider(options=[(f"{o:.0%}", o) for o in experiment.overlaps],
                                value=experiment.overlaps[1], description="overlap")

    def text(size, overlap):
        s = experiment.stats(size, overlap)
        return (f"{s['chunks']:,} chunks  (+{s['premium']:.0%} vs no overlap)   "
                f"recall@{experiment.k} = {s[f'recall@{experiment.k}']:.3f}")

    return dashboard({"size": size, "overlap": overlap}, text)


# -- chapter 2: similarity -----------------------------------------------------------------

def similarity_rankings(query, docs) -> dict[str, list[int]]:
    """Indices of ``docs`` best first under each measure (Euclidean: smallest distance)."""
    q, D = np.asarray(query, float)[None], np.asarray(docs, float)
    return {"cosine": [int(i) for i in np.argsort(-similarity.cosine(q, D)[0], kind="stable")],
            "dot": [int(i) for i in np.argsort(-similarity.dot(q, D)[0], kind="stable")],
            "euclidean": [int(i) for i in np.argsort(similarity.euclidean(q, D)[0], kind="stable")]}


def polar(angle_deg: float, length: float) -> np.ndarray:
    """The 2-d vector of ``length`` at ``angle_deg`` degrees from the x axis (chapter 2's
    toy embeddings: the angle is the topic, the length what cosine ignores).

    >>> polar(90, 2.0).round(6).tolist()
    [0.0, 2.0]
    """
    a = math.radians(angle_deg)
    return np.array([length * math.cos(a), length * math.sin(a)])


def similarity_playground():
    """A query and three documents in 2-D: rotate and stretch them, watch three rankings."""
    import ipywidgets as W
    import matplotlib.pyplot as plt

    spec = {"query": (30, 1.0), "A": (40, 0.6), "B": (80, 3.0), "C": (10, 1.5)}
    controls = {}
    for name, (ang, ln) in spec.items():
        controls[f"{name}_angle"] = W.IntSlider(value=ang, min=0, max=180, step=5,
                                                description=f"{name} angle")
        controls[f"{name}_length"] = W.FloatSlider(value=ln, min=0.1, max=4, step=0.1,
                                                   description=f"{name} length")

    def vectors(v):
        return (polar(v["query_angle"], v["query_length"]),
                [polar(v[f"{n}_angle"], v[f"{n}_length"]) for n in "ABC"])

    def text(**v):
        ranks = similarity_rankings(*vectors(v))
        return "\n".join(f"{metric:10s} " + " > ".join("ABC"[i] for i in order)
                         for metric, order in ranks.items())

    def draw(**v):
        vectors_2d(*vectors(v))
        plt.show()

    rows = [W.HBox([controls[f"{n}_angle"], controls[f"{n}_length"]]) for n in spec]
    return dashboard(controls, text, rows=rows, draw=draw)


# -- chapter 3: top-k ----------------------------------------------------------------------

@dataclass
class TopK:
    """Recall@k and context size for any k, from one deep retrieval per question.

    ``hits`` maps question id -> hits (at least as deep as the largest k asked about);
    recall is judged on documents; context tokens are what a reader would be handed.
    """

    hits: dict
    qrels: dict
    questions: dict

    def __post_init__(self) -> None:
        self._tokens: dict[str, int] = {}

    def _count(self, hit) -> int:
        if hit.id not in self._tokens:
            self._tokens[hit.id] = chunking.count_tokens(hit.text)
        return self._tokens[hit.id]

    def stats(self, k: int) -> dict:
        """Mean recall@k over the questions with gold documents, and mean context tokens."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        run = evaluate.run_from_hits({q: h[:k] for q, h in self.hits.items()})
        tokens = [sum(self._count(h) for h in hits[:k]) for hits in self.hits.values()]
        return {"k": k, f"recall@{k}": evaluate.evaluate(self.qrels, run, f"recall@{k}"),
                "context_tokens": float(np.mean(tokens))}

    def retrieved(self, qid: str, k: int) -> list[tuple]:
        """(rank, score, doc id, is gold, first words) for one question's top k."""
        gold = self.qrels.get(qid, {})
        return [(h.rank, h.score, h.doc_id, h.doc_id in gold, " ".join(h.text.split()[:12]))
                for h in self.hits[qid][:k]]


def topk_explorer(topk: TopK):
    """A k slider and a question picker over a ``TopK``."""
    import ipywidgets as W

    k = W.SelectionSlider(options=[1, 3, 5, 10, 20, 50], value=5, description="k")
    qid = W.Dropdown(options=[(f"{q}: {t[:60]}", q) for q, t in topk.questions.items()],
                     description="question", layout=W.Layout(width="90%"))

    def text(k, qid):
        s = topk.stats(k)
        lines = [f"recall@{k} = {s[f'recall@{k}']:.3f}, "
                 f"context = {s['context_tokens']:.0f} tokens on average"]
        lines += [f"{'*' if is_gold else ' '} {rank:2d}. {score:.3f} {doc:36s} {words}"
                  for rank, score, doc, is_gold, words in topk.retrieved(qid, k)]
        return "\n".join(lines)

    return dashboard({"k": k, "qid": qid}, text, rows=[k, qid])
