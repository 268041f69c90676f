"""Pictures the chapters draw: where a chapter sits in the pipeline, and the mechanics that a
table cannot show (two encoders side by side, chunk boundaries on real text, RRF on two
lists). Each function returns a matplotlib ``Figure`` drawn the same way every time (no
randomness, fixed sizes), so rendered chapters stay reviewable.

>>> fig = pipeline_map(chapter=6)               # doctest: +SKIP
"""
from __future__ import annotations

from collections.abc import Sequence

__all__ = ["STAGES", "CHAPTER_STAGES", "pipeline_map", "encoder_kinds", "chunk_boundaries",
           "rrf_arithmetic", "vectors_2d"]

#: The boxes of the pipeline map, left to right: (name, label).
STAGES = (("documents", "documents"), ("chunk", "chunk"), ("embed", "embed +\nsimilarity"),
          ("index", "index +\nsearch"), ("rerank", "rerank"), ("read", "read"),
          ("decide", "decide:\nanswer or\nescalate"))
#: Which boxes each chapter builds (chapter 4 measures retrieval: drawn under it).
CHAPTER_STAGES = {0: ("documents", "chunk", "embed", "index", "rerank", "read", "decide"),
                  1: ("chunk",), 2: ("embed",), 3: ("embed", "index"), 4: ("evaluate",),
                  5: ("index",), 6: ("rerank",), 7: ("read",), 8: ("read",),
                  9: ("index", "rerank", "read", "decide"), 10: ("chunk", "index"),
                  11: ("index",), 12: ("documents", "chunk", "embed", "index", "rerank",
                                       "read", "decide")}
_ON, _OFF, _EDGE = "#f4a261", "#eef1f4", "#44505c"


def _plt():
    import matplotlib.pyplot as plt

    return plt


def pipeline_map(chapter: int | None = None, stages: Sequence[str] = ()):
    """The retriever-reader pipeline as a row of boxes, with the boxes a chapter builds
    highlighted (``chapter`` 0-12, or ``stages`` by name: see ``STAGES``; ``"evaluate"`` is
    the measuring bar under the retrieval boxes). Drawn at the top of every chapter so a
    reader always knows which part of the whole they are looking at."""
    names = {n for n, _ in STAGES} | {"evaluate"}
    if chapter is not None:
        if chapter not in CHAPTER_STAGES:
            raise ValueError(f"chapter must be one of {sorted(CHAPTER_STAGES)}, got {chapter!r}")
        stages = (*CHAPTER_STAGES[chapter], *stages)
    unknown = sorted(set(stages) - names)
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; choose from {sorted(names)}")
    plt = _plt()
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, ax = plt.subplots(figsize=(10, 1.9))
    width, gap = 1.15, 0.35
    for i, (name, label) in enumerate(STAGES):
        x = i * (width + gap)
        ax.add_patch(FancyBboxPatch((x, 0.55), width, 0.9, boxstyle="round,pad=0.02",
                                    facecolor=_ON if name in stages else _OFF,
                                    edgecolor=_EDGE, linewidth=1.2, gid=f"stage-{name}"))
        ax.text(x + width / 2, 1.0, label, ha="center", va="center", fontsize=9,
                fontweight="bold" if name in stages else "normal")
        if i:
            ax.add_patch(FancyArrowPatch((x - gap, 1.0), (x, 1.0), arrowstyle="-|>",
                                         mutation_scale=10, color=_EDGE))
    # evaluation measures what retrieval hands on: drawn under chunk .. rerank
    left, right = 1 * (width + gap), 4 * (width + gap) + width
    ax.add_patch(FancyBboxPatch((left, 0.05), right - left, 0.32, boxstyle="round,pad=0.02",
                                facecolor=_ON if "evaluate" in stages else _OFF,
                                edgecolor=_EDGE, linewidth=1.0, gid="stage-evaluate"))
    ax.text((left + right) / 2, 0.21, "evaluate: Recall@k, MRR, nDCG on labelled questions",
            ha="center", va="center", fontsize=8)
    ax.set_xlim(-0.1, len(STAGES) * (width + gap))
    ax.set_ylim(0, 1.55)
    ax.axis("off")
    if chapter is not None:
        ax.set_title(f"chapter {chapter} builds the highlighted part", fontsize=9, loc="left")
    fig.tight_layout()
    return fig


def encoder_kinds():
    """A bi-encoder next to a cross-encoder. Left: question and passage are encoded apart into
    two vectors and compared by one cosine — passages can be embedded once, ahead of time.
    Right: question and passage enter the model together as one input
    (``[CLS] question [SEP] passage [SEP]``) and come out as one relevance score — every
    token of the question can attend to every token of the passage, but nothing can be
    computed before the question arrives."""
    plt = _plt()
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2))

    def box(ax, x, y, w, h, text, color=_OFF, size=9):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02", facecolor=color,
                                    edgecolor=_EDGE))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)

    def arrow(ax, a, b):
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=10, color=_EDGE))

    ax = axes[0]
    for x, what in ((0.3, "question"), (2.7, "passage")):
        box(ax, x, 0.2, 2.0, 0.6, what)
        box(ax, x, 1.3, 2.0, 0.8, "encoder\n(same weights)", _ON)
        box(ax, x, 2.6, 2.0, 0.6, "vector (384)")
        arrow(ax, (x + 1.0, 0.8), (x + 1.0, 1.3))
        arrow(ax, (x + 1.0, 2.1), (x + 1.0, 2.6))
    box(ax, 1.5, 3.7, 2.4, 0.6, "cosine = one number")
    arrow(ax, (1.3, 3.2), (2.2, 3.7))
    arrow(ax, (3.7, 3.2), (3.2, 3.7))
    ax.set_title("bi-encoder: two vectors, compared", fontsize=10)

    ax = axes[1]
    box(ax, 0.3, 0.2, 4.4, 0.6, "[CLS] question [SEP] passage [SEP]", size=8)
    box(ax, 0.3, 1.3, 4.4, 0.8, "cross-encoder: every question token\nattends to every "
        "passage token", _ON)
    box(ax, 1.3, 2.6, 2.4, 0.6, "[CLS] vector")
    box(ax, 1.3, 3.7, 2.4, 0.6, "one relevance logit")
    for a, b in (((2.5, 0.8), (2.5, 1.3)), ((2.5, 2.1), (2.5, 2.6)), ((2.5, 3.2), (2.5, 3.7))):
        arrow(ax, a, b)
    ax.set_title("cross-encoder: one pair in, one score out", fontsize=10)
    for ax in axes:
        ax.set_xlim(0, 5)
        ax.set_ylim(0, 4.5)
        ax.axis("off")
    fig.tight_layout()
    return fig


def chunk_boundaries(text: str, spans: Sequence[tuple[int, int]], width: int = 90,
                     max_lines: int = 14):
    """``text`` laid out in lines of ``width`` characters with each chunk's character span
    ``(start, end)`` drawn as a coloured bar under it; where two chunks overlap, the bars
    stack, so the overlap is visible as text that belongs to both."""
    if not spans:
        raise ValueError("spans is empty; pass the (start, end) of each chunk, e.g. "
                         "[(c.start, c.end) for c in chunks]")
    for s, e in spans:
        if not 0 <= s < e <= len(text):
            raise ValueError(f"span ({s}, {e}) is not inside the text of {len(text)} "
                             f"characters; spans must satisfy 0 <= start < end <= len(text)")
    plt = _plt()
    shown = text[:width * max_lines]
    lines = [shown[i:i + width] for i in range(0, len(shown), width)]
    colors = ("#2a9d8f", "#e76f51", "#457b9d", "#e9c46a")
    size, lanes = 8.0, 2                       # monospace: one character is 0.6 em wide
    char_pt = 0.6 * size
    fig_w = (width + 2) * char_pt / 72
    fig_h = 0.22 * (len(lines) + 2)
    fig = plt.figure(figsize=(fig_w, fig_h))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-1, width + 1)
    ax.set_ylim(-len(lines) - 0.3, 1.6)
    for n, line in enumerate(lines):
        y = -n
        ax.text(0, y, line.replace("\n", "↵"), family="monospace", fontsize=size,
                va="bottom")
        for c, (s, e) in enumerate(spans):
            a, b = max(s, n * width), min(e, (n + 1) * width)
            if a < b:
                yy = y - 0.08 - 0.2 * (c % lanes)
                ax.plot([a - n * width, b - n * width], [yy, yy], color=colors[c % len(colors)],
                        linewidth=2.5, solid_capstyle="butt")
    ax.text(0, 0.9, f"{len(spans)} chunks over the first {len(shown)} characters (one colour "
            f"per chunk; two bars under a line = overlap)", fontsize=size, va="bottom")
    ax.axis("off")
    return fig


def rrf_arithmetic(first: Sequence[str], second: Sequence[str], rrf_k: int = 60,
                   names: tuple[str, str] = ("dense", "BM25")):
    """Reciprocal rank fusion of two short ranked lists, drawn: each item's ``1 / (rrf_k +
    rank)`` from each list as stacked bars, sorted by the fused sum — the RRF score. An item
    found by both lists beats one ranked first by only one of them when ``rrf_k`` is large."""
    if not first and not second:
        raise ValueError("both lists are empty; pass two ranked lists of ids")
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0 (the constant added to every rank), got {rrf_k}")
    plt = _plt()
    parts = {}
    for lane, ranked in enumerate((first, second)):
        for rank, item in enumerate(ranked, 1):
            parts.setdefault(item, [0.0, 0.0])[lane] = 1 / (rrf_k + rank)
    order = sorted(parts, key=lambda i: (-sum(parts[i]), i))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(order) + 1.2))
    ys = range(len(order))[::-1]
    a = [parts[i][0] for i in order]
    b = [parts[i][1] for i in order]
    ax.barh(list(ys), a, color="#457b9d", label=f"{names[0]}: 1/(rrf_k + rank)")
    ax.barh(list(ys), b, left=a, color="#e76f51", label=f"{names[1]}: 1/(rrf_k + rank)")
    for y, x, z in zip(ys, a, b, strict=True):
        ax.text(x + z, y, f"  {x + z:.4f}", va="center", fontsize=8)
    ax.set_yticks(list(ys), order)
    ax.set_xlabel(f"RRF score (rrf_k = {rrf_k})")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlim(0, max(x + z for x, z in zip(a, b, strict=True)) * 1.3)
    fig.tight_layout()
    return fig


def vectors_2d(query, docs: Sequence, labels: str = "ABC", ax=None):
    """A query (black) and documents as arrows from the origin in 2-D — chapter 2's toy
    embeddings, where the angle is the topic and the length is what cosine ignores. Draws
    on ``ax`` when given (the chapter 2 widget redraws it on every slider move), else on a
    new figure, which it returns."""
    plt = _plt()
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(4, 4))
    arrows = [(query, "query", "black")] + list(zip(docs, labels, ["C0", "C1", "C2", "C3"],
                                                    strict=False))
    for vec, label, color in arrows:
        ax.annotate("", tuple(vec), (0, 0), arrowprops=dict(arrowstyle="->", color=color, lw=2))
        ax.text(*vec, f" {label}", color=color)
    ax.set_xlim(-4, 4)
    ax.set_ylim(-0.5, 4.5)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    return fig if fig is not None else ax.figure
