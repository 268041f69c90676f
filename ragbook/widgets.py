"""Interactive dashboards for the notebooks. Each widget is a thin ipywidgets view over a
pure function that the tests call directly, so what a slider shows is tested code.

* ``cost_explorer()``        -> ``cost_table(**settings)``            (chapter 0)
* ``chunking_explorer(exp)`` -> ``ChunkingExperiment.stats(size, overlap)`` (chapter 1)
* ``similarity_playground()``-> ``similarity_rankings(query, docs)``  (chapter 2)
* ``topk_explorer(topk)``    -> ``TopK.stats(k)`` / ``TopK.retrieved(qid, k)`` (chapter 3)
* ``fusion_explorer(grid)``  -> ``FusionGrid.stats(rrf_k, depth)``    (chapter 5)
* ``rerank_explorer(budget)``-> ``RerankBudget.stats(candidates)``   (chapter 6)
* ``threshold_explorer(exp)``-> ``threshold_counts`` / ``threshold_curve`` (chapter 9)
* ``window_explorer(sweep)`` -> ``WindowSweep.stats(window)``        (chapter 10)

ipywidgets and matplotlib are imported only when a widget is built.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import chunking, cost, evaluate, similarity
from .expansion import SentenceWindowRetriever
from .fusion import reciprocal_rank_fusion
from .pipeline import outcome
from .retrieval import check_k
from .types import Document

__all__ = ["cost_table", "cost_explorer", "ChunkingExperiment", "chunking_explorer",
           "similarity_rankings", "similarity_playground", "polar", "TopK", "topk_explorer",
           "FusionGrid", "fusion_explorer", "RerankBudget", "rerank_explorer",
           "threshold_counts", "threshold_curve", "ThresholdExplorer", "threshold_explorer",
           "varied",
           "WindowSweep", "window_explorer"]


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
    out = W.Output()

    def show(**values):
        out.clear_output(wait=True)
        with out:
            print(cost_table(**values))

    W.interactive_output(show, sliders)
    show(**{k: s.value for k, s in sliders.items()})
    return W.VBox([W.HBox(list(sliders.values())[:3]), W.HBox(list(sliders.values())[3:]), out])


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
    out = W.Output()

    def show(size, overlap):
        out.clear_output(wait=True)
        s = experiment.stats(size, overlap)
        with out:
            print(f"{s['chunks']:,} chunks  (+{s['premium']:.0%} vs no overlap)   "
                  f"recall@{experiment.k} = {s[f'recall@{experiment.k}']:.3f}")

    W.interactive_output(show, {"size": size, "overlap": overlap})
    show(size.value, overlap.value)
    return W.VBox([W.HBox([size, overlap]), out])


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
    out = W.Output()

    def show(**v):
        q = polar(v["query_angle"], v["query_length"])
        docs = [polar(v[f"{n}_angle"], v[f"{n}_length"]) for n in "ABC"]
        ranks = similarity_rankings(q, docs)
        out.clear_output(wait=True)
        with out:
            fig, ax = plt.subplots(figsize=(4, 4))
            arrows = [(q, "query", "black")] + list(zip(docs, "ABC", ["C0", "C1", "C2"],
                                                        strict=True))
            for vec, label, color in arrows:
                ax.annotate("", vec, (0, 0), arrowprops=dict(arrowstyle="->", color=color, lw=2))
                ax.text(*vec, f" {label}", color=color)
            ax.set_xlim(-4, 4), ax.set_ylim(-0.5, 4.5), ax.set_aspect("equal"), ax.grid(alpha=.3)
            plt.show()
            for metric, order in ranks.items():
                print(f"{metric:10s} " + " > ".join("ABC"[i] for i in order))

    W.interactive_output(show, controls)
    show(**{k: c.value for k, c in controls.items()})
    rows = [W.HBox([controls[f"{n}_angle"], controls[f"{n}_length"]]) for n in spec]
    return W.VBox(rows + [out])


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
    out = W.Output()

    def show(k, qid):
        out.clear_output(wait=True)
        s = topk.stats(k)
        with out:
            print(f"recall@{k} = {s[f'recall@{k}']:.3f}, "
                  f"context = {s['context_tokens']:.0f} tokens on average")
            for rank, score, doc, is_gold, words in topk.retrieved(qid, k):
                print(f"{'*' if is_gold else ' '} {rank:2d}. {score:.3f} {doc:36s} {words}")

    W.interactive_output(show, {"k": k, "qid": qid})
    show(k.value, qid.value)
    return W.VBox([k, qid, out])


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
    out = W.Output()

    def show(k, depth):
        out.clear_output(wait=True)
        s = grid.stats(k, depth)
        with out:
            print(f"recall@5 = {s['recall@5']:.3f}   MRR@10 = {s['mrr@10']:.3f}")

    W.interactive_output(show, {"k": k, "depth": depth})
    show(k.value, depth.value)
    return W.VBox([W.HBox([k, depth]), out])


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
    out = W.Output()

    def show(n):
        out.clear_output(wait=True)
        s = budget.stats(n)
        with out:
            print(f"{s['ms_per_query']:.0f} ms/query   recall@5 = {s['recall@5']:.3f}   "
                  f"MRR@10 = {s['mrr@10']:.3f}")

    W.interactive_output(show, {"n": n})
    show(n.value)
    return W.VBox([n, out])


# -- chapter 9: thresholds -----------------------------------------------------------------

def varied(pipeline, min_confidence="pipeline", min_span_score="pipeline",
           min_rerank_score="pipeline"):
    """A copy of ``pipeline`` with other thresholds — each one where it lives: the pipeline's
    ``min_confidence``, its reader's ``min_span_score``, its reranker's ``min_rerank_score``
    (the reader and reranker are copied with ``with_settings``; nothing is changed in place).
    ``"pipeline"`` keeps a setting as it is, None turns it off."""
    changes: dict = {}
    if not (isinstance(min_confidence, str) and min_confidence == "pipeline"):
        changes.update(min_confidence=min_confidence, min_confidence_kind=None)
    if not (isinstance(min_span_score, str) and min_span_score == "pipeline"):
        changes["reader"] = pipeline.reader.with_settings(min_span_score=min_span_score)
    if not (isinstance(min_rerank_score, str) and min_rerank_score == "pipeline"):
        if pipeline.reranker is None:
            raise ValueError("this pipeline has no reranker, so there is no min_rerank_score "
                             "to vary; leave min_rerank_score='pipeline'")
        changes["reranker"] = pipeline.reranker.with_settings(min_rerank_score=min_rerank_score)
    return pipeline.with_settings(**changes) if changes else pipeline


def threshold_counts(pipeline, prepared: Sequence, questions: Sequence, min_confidence=None,
                     min_span_score="pipeline", min_rerank_score="pipeline") -> dict:
    """Right / wrong / escalated counts of ``decide`` over cached ``prepare`` outputs (one
    per labelled question, ``gold`` = the documents that answer it) at one setting of the
    thresholds (``varied``): exactly what ``Pipeline.ask`` of that copy would do, without
    retrieving again."""

    if len(prepared) != len(questions):
        raise ValueError(f"need one Prepared per question, got {len(prepared)} and "
                         f"{len(questions)}")
    p = varied(pipeline, min_confidence, min_span_score, min_rerank_score)
    counts = {"right": 0, "wrong": 0, "escalated": 0}
    for prep, q in zip(prepared, questions, strict=True):
        counts[outcome(p.decide(prep), q.gold)] += 1
    return {"min_confidence": min_confidence, "n": len(questions), **counts}


def threshold_curve(pipeline, prepared: Sequence, questions: Sequence, thresholds: Sequence,
                    min_span_score="pipeline", min_rerank_score="pipeline") -> list[dict]:
    """``threshold_counts`` for each ``min_confidence`` in ``thresholds``: the rows of a
    right/wrong/escalated trade-off curve (rates are counts / ``n``).

    >>> threshold_curve(p, prepared, dev, [None, 0.4, 0.6])   # doctest: +SKIP
    [{'min_confidence': None, 'n': 73, 'right': 41, 'wrong': 31, 'escalated': 1}, ...]
    """
    return [threshold_counts(pipeline, prepared, questions, th, min_span_score,
                             min_rerank_score) for th in thresholds]


@dataclass
class ThresholdExplorer:
    """The chapter 9 threshold dashboard's data: ``pipeline`` + one cached ``Prepared`` per
    labelled question. ``thresholds`` is the ``min_confidence`` grid of the curve (default:
    41 steps over the observed confidences)."""

    pipeline: object
    prepared: Sequence
    questions: Sequence
    thresholds: Sequence | None = None

    def __post_init__(self) -> None:
        if self.thresholds is None:
            seen = [p.confidence for p in self.prepared if p.confidence is not None]
            lo, hi = (min(seen), max(seen)) if seen else (0.0, 1.0)
            self.thresholds = [float(x) for x in np.linspace(lo, hi, 41)]
        self._curves: dict = {}

    def stats(self, min_confidence=None, min_span_score="pipeline",
              min_rerank_score="pipeline") -> dict:
        """Answered right / wrong / escalated counts at one setting of the three thresholds
        ("pipeline" keeps the pipeline's own value), without re-running any model."""
        return threshold_counts(self.pipeline, self.prepared, self.questions, min_confidence,
                                min_span_score, min_rerank_score)

    def curve(self, min_span_score="pipeline", min_rerank_score="pipeline") -> list[dict]:
        """``stats`` at every ``min_confidence`` of ``thresholds`` (cached per setting of
        the other two), for the trade-off plot."""
        key = (min_span_score, min_rerank_score)
        if key not in self._curves:
            self._curves[key] = threshold_curve(self.pipeline, self.prepared, self.questions,
                                                self.thresholds, min_span_score,
                                                min_rerank_score)
        return self._curves[key]

    def plot(self, min_confidence=None, min_span_score="pipeline", min_rerank_score="pipeline",
             ax=None):
        """Right and wrong rate (and escalated) against ``min_confidence``, the setting marked."""
        import matplotlib.pyplot as plt

        rows = self.curve(min_span_score, min_rerank_score)
        if ax is None:
            _, ax = plt.subplots(figsize=(7, 3.2))
        x = [r["min_confidence"] for r in rows]
        for key, style in (("right", "C2-"), ("wrong", "C3-"), ("escalated", "C7--")):
            ax.plot(x, [r[key] / r["n"] for r in rows], style, label=key)
        if min_confidence is not None:
            ax.axvline(min_confidence, color="black", lw=1)
        ax.set_xlabel(f"min_confidence ({self.pipeline.confidence_kind} of the best hit)")
        ax.set_ylabel("share of questions")
        ax.set_ylim(0, 1), ax.grid(alpha=0.3), ax.legend(fontsize=8)
        return ax


def threshold_explorer(explorer: ThresholdExplorer):
    """Sliders for the pipeline's ``min_confidence``, the reader's ``min_span_score``
    (extractive readers) and — only when the pipeline has a reranker — the reranker's
    ``min_rerank_score`` (the one rerank cut); shows the counts and the curve. The sliders
    start at the pipeline's settings."""
    import ipywidgets as W
    import matplotlib.pyplot as plt

    def slider(grid, now, fmt, label):
        # a slider cannot hold None: "off" is its first position, turned into None in show()
        grid = sorted(set(grid) | ({now} if now is not None else set()))
        return W.SelectionSlider(options=[("off", "off")] + [(format(t, fmt), t) for t in grid],
                                 value="off" if now is None else now, description=label)

    p = explorer.pipeline
    controls = {"min_confidence": slider(explorer.thresholds,
                                         p.min_confidence, ".3f", "confidence ≥")}
    reader_floor = p.reader.settings(deep=False).get("min_span_score", "absent")
    if reader_floor != "absent":
        controls["min_span_score"] = slider(
            {round(float(t), 2) for t in np.arange(0.3, 0.81, 0.05)},
            reader_floor, ".3g", "span ≥")
    if p.reranker is not None:
        seen = [h.score for prep in explorer.prepared for h in prep.candidates]
        lo, hi = (min(seen), max(seen)) if seen else (0.0, 1.0)
        controls["min_rerank_score"] = slider(
            [float(x) for x in np.linspace(lo, hi, 21)],
            p.reranker.min_rerank_score, ".3f", "rerank ≥")
    out = W.Output()

    def show(**values):
        values = {k: None if v == "off" else v for k, v in values.items()}
        s = explorer.stats(**values)
        out.clear_output(wait=True)
        with out:
            print(f"right {s['right']} / wrong {s['wrong']} / escalated {s['escalated']} "
                  f"of {s['n']} questions")
            fig, ax = plt.subplots(figsize=(7, 3.2))
            explorer.plot(values["min_confidence"], values.get("min_span_score", "pipeline"),
                          values.get("min_rerank_score", "pipeline"), ax=ax)
            plt.show()
            plt.close(fig)

    W.interactive_output(show, controls)
    show(**{k: c.value for k, c in controls.items()})
    return W.VBox([W.HBox(list(controls.values())), out])


# -- chapter 10: the sentence window -------------------------------------------------------

@dataclass
class WindowSweep:
    """Sentence-window retrieval at any window size. ``retriever`` searches single sentences
    (e.g. a ``DenseIndex`` over ``expansion.sentence_chunks``; wrap it in
    ``cache.CachedRetriever`` and moving the window costs look-ups only), ``documents`` are
    the texts the windows are cut from, ``questions`` (id, text) pairs, ``qrels`` their gold
    documents and ``answers`` ``{id: [{"doc", "text"}, ...]}`` their gold answer spans."""

    retriever: object
    documents: Sequence[Document]
    questions: Sequence
    qrels: dict
    answers: dict
    k: int = 5

    def stats(self, window: int) -> dict:
        """Top-``k`` windows of ``window`` sentences each side: document recall@k, the share
        of questions whose answer span lies whole in the windows, and tokens handed per
        question (the encoder's tokens)."""

        k = check_k(self.k)
        swr = SentenceWindowRetriever(self.retriever, self.documents, window=window)
        results = {qid: swr.search(text, k=k) for qid, text in self.questions}
        found = [any(h.doc_id == a["doc"] and a["text"] in h.text for h in results[q]
                     for a in spans) for q, spans in self.answers.items() if q in results]
        tokens = [sum(chunking.count_tokens(h.text) for h in hs) for hs in results.values()]
        return {"window": window,
                f"recall@{k}": evaluate.evaluate(self.qrels, evaluate.run_from_hits(results),
                                                 f"recall@{k}"),
                "answer_in_context": float(np.mean(found)) if found else 0.0,
                "tokens": float(np.mean(tokens)) if tokens else 0.0}


def window_explorer(sweep: WindowSweep, largest: int = 6):
    """A window slider (sentences each side) over a ``WindowSweep``."""
    import ipywidgets as W

    n = W.IntSlider(value=3, min=0, max=largest, description="± sentences")
    out = W.Output()

    def show(n):
        s = sweep.stats(n)
        out.clear_output(wait=True)
        with out:
            print(f"±{n}: recall@{sweep.k} = {s[f'recall@{sweep.k}']:.3f}   answer in context "
                  f"= {s['answer_in_context']:.3f}   {s['tokens']:.0f} tokens per question")

    W.interactive_output(show, {"n": n})
    show(n.value)
    return W.VBox([n, out])
