"""Chapters 9-10: the threshold dashboard (a copy of the pipeline per setting) and the
sentence-window sweep.

Each widget is a thin ipywidgets view over a pure function the tests call directly."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import chunking, evaluate
from ..checks import check_k
from ..expansion import SentenceWindowRetriever
from ..result import count_outcomes
from ..types import Document
from .view import dashboard

__all__ = ["varied", "threshold_counts", "threshold_curve", "ThresholdExplorer",
           "threshold_explorer", "WindowSweep", "window_explorer"]


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

    p = varied(pipeline, min_confidence, min_span_score, min_rerank_score)
    counts = count_outcomes(p, prepared, questions)
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

    def settings(values):
        return {k: None if v == "off" else v for k, v in values.items()}

    def text(**values):
        s = explorer.stats(**settings(values))
        return (f"right {s['right']} / wrong {s['wrong']} / escalated {s['escalated']} "
                f"of {s['n']} questions")

    def draw(**values):
        values = settings(values)
        fig, ax = plt.subplots(figsize=(7, 3.2))
        explorer.plot(values["min_confidence"], values.get("min_span_score", "pipeline"),
                      values.get("min_rerank_score", "pipeline"), ax=ax)
        plt.show()
        plt.close(fig)

    return dashboard(controls, text, draw=draw)


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

    def text(n):
        s = sweep.stats(n)
        return (f"±{n}: recall@{sweep.k} = {s[f'recall@{sweep.k}']:.3f}   answer in context "
                f"= {s['answer_in_context']:.3f}   {s['tokens']:.0f} tokens per question")

    return dashboard({"n": n}, text, rows=[n])
