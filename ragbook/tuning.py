"""Choose retrieval settings on your own labelled questions — and adopt only what questions
the choice never saw support.

What works depends on the corpus: on the two corpora the book ships, hybrid + a second stage
wins; on another FAQ the default hybrid lost to dense alone. ``tune`` measures a small
declared space (``search_space``) on *your* labels:

* first stage: dense, BM25, or the hybrid (the index's own settings — the default — and
  one change each of ``depth``, ``rrf_k`` and the channel ``weights``);
* second stage over the first stage's top ``CANDIDATES``: none, the MaxSim blend
  (``MaxSimReranker``), or the learned reranker fitted on the training part only.

Each question's candidates and features are computed once, so every setting is a cheap
re-fusion or re-ordering. Every question is held out once (k-fold, fixed seed): a learned
reranker is always scored on questions it was not fitted on. The rule (``choose``) that
picks a setting is itself judged by **nested cross-validation** — run on the other folds,
scored on the held-out fold — which is the honest estimate of what tuning gives you.

The rule is conservative on purpose. Dense alone is the reference: a setting is adopted
only when its held-out gain in MRR@10 over dense is supported with the family-wise error
held at ``alpha`` over every setting tested — so picking the best of ten does not pass off
luck as a gain. The test (``supported``): a one-sided paired bootstrap p-value per setting;
the pipeline the book teaches — the default hybrid and every second stage — forms the first
family, the first-stage variants (BM25 alone, another depth, ``rrf_k`` or weights) the
second, an order declared before any label is read; Holm's step-down within a family, and
the next family is tested only when every hypothesis of this one was rejected (serial
gatekeeping: the family-wise error stays ≤ ``alpha``). Among the supported settings the
simplest is kept unless a more complex one beats *it* with
a corrected interval above zero. Nothing supported: dense, and one line saying why.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .evaluate import Comparison, compare_runs, format_table, holm, per_query, run_from_hits
from .fusion import HybridRetriever, reciprocal_rank_fusion
from .late_interaction import MaxSimScorer
from .learned_rerank import FEATURES, LearnedReranker
from .questions import labelled, question_key, read_questions
from .terminal import one_line
from .types import Hit

__all__ = ["Setting", "search_space", "Pools", "collect", "choose", "tune", "TuneReport",
           "fit_learned", "runs_on", "make_folds", "reorder", "supported", "CANDIDATES",
           "METRICS", "MAXSIM_WEIGHT"]

CANDIDATES = 50      # hits a first stage hands on (Pipeline's default ``candidates``)
MAX_DEPTH = 100      # deepest channel list any setting fuses
MAXSIM_WEIGHT = 0.2  # MaxSimReranker's default dense_weight (chosen on help-centre dev)
METRICS = ("mrr@10", "recall@10")
NESTED = "tuner (nested CV)"
_F = {name: i for i, name in enumerate(FEATURES)}


@dataclass(frozen=True)
class Setting:
    """One point of the search space. ``channel``: dense, bm25 or hybrid (with ``depth``,
    ``rrf_k``, ``weights``); ``second``: none, maxsim or learned, over ``first`` (the name
    of the first-stage setting it reorders); ``rank``: simplicity, lower is simpler."""

    name: str
    channel: str
    depth: int = MAX_DEPTH
    rrf_k: float = 60.0
    weights: tuple[float, float] = (1.0, 1.0)
    second: str = "none"
    first: str = ""
    rank: int = 0

    def describe(self) -> dict:
        """The settings a settings file stores (``ragbook.tuned``)."""
        first = {"channel": self.channel}
        if self.channel == "hybrid":
            first.update(depth=self.depth, rrf_k=self.rrf_k, weights=list(self.weights))
        return {"name": self.name, "retriever": first, "second_stage": self.second,
                "candidates": CANDIDATES}


def search_space(retriever: HybridRetriever) -> tuple[Setting, ...]:
    """The declared space around ``retriever``'s own settings (its hybrid is "the default").
    Ten settings: small enough to correct for, each one a choice a user would consider."""
    d, k, w = min(retriever.depth, MAX_DEPTH), float(retriever.rrf_k), tuple(retriever.weights)
    hybrid = Setting("hybrid (default)", "hybrid", d, k, w, rank=2)
    alt = [Setting(f"hybrid depth {30 if d != 30 else 60}", "hybrid", 30 if d != 30 else 60,
                   k, w, rank=3),
           Setting(f"hybrid rrf_k {10 if k != 10 else 60:g}", "hybrid", d,
                   10.0 if k != 10 else 60.0, w, rank=3),
           Setting("hybrid dense x2", "hybrid", d, k, (2.0 * w[0], w[1]), rank=3)]
    dense, bm25 = Setting("dense", "dense", rank=0), Setting("bm25", "bm25", rank=1)
    seconds = [replace(s, name=f"{s.name.split(' (')[0]} + {label}", second=kind,
                       first=s.name, rank=r + s.rank)
               for kind, label, r in (("maxsim", "MaxSim", 4), ("learned", "learned", 6))
               for s in (dense, hybrid)]
    return (dense, bm25, hybrid, *alt, *seconds)


@dataclass
class Pools:
    """Each question's first-stage lists (``first[setting name][qid]``, ``CANDIDATES`` hits),
    the second-stage features of the lists a second stage reorders (``features[first
    name][qid]``, rows as ``LearnedReranker.features``) and the labels (``qrels``)."""

    first: dict[str, dict[str, list[Hit]]]
    features: dict[str, dict[str, np.ndarray]]
    qrels: dict[str, dict[str, int]]
    seconds: float = 0.0
    learner: LearnedReranker | None = None

    def labels(self, first: str, qid: str) -> np.ndarray:
        """1 for each hit of ``first``'s list for ``qid`` whose document is gold, else 0."""
        return np.array([int((h.doc_id or h.id) in self.qrels[qid])
                         for h in self.first[first][qid]], int)


def collect(retriever: HybridRetriever, questions, space: Sequence[Setting],
            learner: LearnedReranker | None = None, progress: bool = True) -> Pools:
    """Search each channel once per question (``MAX_DEPTH`` deep), fuse every hybrid
    setting from those lists, and compute the features of the lists a second stage reads."""
    t = time.perf_counter()
    learner = learner or LearnedReranker(MaxSimScorer(retriever.dense.encoder))
    needs = {s.first for s in space if s.second != "none"}
    first: dict[str, dict[str, list[Hit]]] = {s.name: {} for s in space if s.second == "none"}
    feats: dict[str, dict[str, np.ndarray]] = {n: {} for n in needs}
    rows = questions
    if progress:
        from tqdm.auto import tqdm
        rows = tqdm(questions, desc="tuning: candidates and features", unit="question")
    for qid, text, _ in rows:
        dense = retriever.dense.search(text, k=MAX_DEPTH)
        bm25 = retriever.bm25.search(text, k=MAX_DEPTH)
        for s in space:
            if s.second != "none":
                continue
            first[s.name][qid] = (dense[:CANDIDATES] if s.channel == "dense" else
                                  bm25[:CANDIDATES] if s.channel == "bm25" else
                                  reciprocal_rank_fusion([dense[:s.depth], bm25[:s.depth]],
                                                         k=CANDIDATES, rrf_k=s.rrf_k,
                                                         weights=s.weights))
        for name in needs:
            feats[name][qid] = learner.features(text, first[name][qid])
    qrels = {q: {g: 1 for g in gold} for q, _, gold in questions}
    return Pools(first, feats, qrels, time.perf_counter() - t, learner)


def reorder(hits: Sequence[Hit], scores) -> list[Hit]:
    """``hits`` best first by ``scores`` (ties keep the first stage's order)."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    return [replace(hits[i], rank=r, score=float(scores[i])) for r, i in enumerate(order, 1)]


def fit_learned(pools: Pools, first: str, train: Sequence[str]) -> LearnedReranker | None:
    """A ``LearnedReranker`` fitted on the ``train`` questions' features (None when they
    hold no relevant candidate, or only relevant ones: nothing to learn)."""
    X = [pools.features[first][q] for q in train]
    y = [pools.labels(first, q) for q in train]
    if pools.learner is None:
        pools.learner = LearnedReranker()   # lazy: loads no model until it scores text
    model = pools.learner.with_settings()   # shares the scorer; features are cached
    try:
        return model.fit_features(np.vstack(X), np.concatenate(y))
    except ValueError:
        return None


def runs_on(pools: Pools, space: Sequence[Setting], ids: Sequence[str],
            folds: Sequence[Sequence[str]]) -> dict[str, dict]:
    """Each setting's document-level run on ``ids``; a learned second stage is cross-fitted
    (for each fold of ``folds``, fitted on the other ids and applied to the fold)."""
    runs = {}
    for s in space:
        if s.second == "none":
            hits = {q: pools.first[s.name][q] for q in ids}
        elif s.second == "maxsim":
            hits = {q: reorder(pools.first[s.first][q],
                                MAXSIM_WEIGHT * pools.features[s.first][q][:, _F["dense"]]
                                + (1 - MAXSIM_WEIGHT) * pools.features[s.first][q][:, _F["maxsim"]])
                    for q in ids}
        else:
            hits = {}
            for fold in folds:
                model = fit_learned(pools, s.first, [q for q in ids if q not in set(fold)])
                for q in fold:
                    base = pools.first[s.first][q]
                    hits[q] = (reorder(base, model.decision(pools.features[s.first][q]))
                               if model is not None else base)
        runs[s.name] = run_from_hits(hits)
    return runs


def supported(qrels, runs: Mapping[str, Mapping], families: Sequence[Sequence[str]], *,
              n: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict[str, float]:
    """The settings whose MRR@10 gain over ``runs["dense"]`` is supported, each with its
    one-sided p-value (the share of ``n`` paired bootstrap resamples whose mean gain is not
    above zero). ``families`` in their declared order: Holm within each at ``alpha``; the
    next family is tested only when all of this one are rejected (serial gatekeeping)."""
    base = per_query(qrels, runs["dense"], "mrr@10")
    qids = list(base)
    picks = np.random.default_rng(seed).integers(0, len(qids), (n, len(qids)))
    found: dict[str, float] = {}
    for family in families:
        names = [name for name in family if name in runs and name != "dense"]
        p = []
        for name in names:
            mine = per_query(qrels, runs[name], "mrr@10")
            gains = np.array([mine[q] - base[q] for q in qids])[picks].mean(axis=1)
            p.append((1 + int((gains <= 0).sum())) / (n + 1))
        passed = {name: q for name, q, adj in zip(names, p, holm(p), strict=True)
                  if adj <= alpha}
        found.update(passed)
        if len(passed) < len(names):
            break
    return found


def choose(qrels, runs: Mapping[str, Mapping], space: Sequence[Setting], *, n: int = 2000,
           seed: int = 0, alpha: float = 0.05) -> tuple[str, str]:
    """The rule: ``(setting name, one line saying why)``. A setting other than dense must
    beat dense as ``supported`` says (the default hybrid and the second stages first, then
    the first-stage variants); of those the simplest is kept unless a more complex one beats
    it with a corrected interval above zero; none: dense."""
    rank = {s.name: s.rank for s in space}
    qrels = {q: qrels[q] for q in next(iter(runs.values()))}
    vs_dense = compare_runs(qrels, runs, ["mrr@10"], baseline="dense", n=n, seed=seed,
                            alpha=alpha)
    delta = {r["run"]: r["Δmrr@10"] for r in vs_dense if r["run"] != "dense"}
    mean = {r["run"]: r["mrr@10"][0] for r in vs_dense}
    first = [s.name for s in space if s.second != "none" or "default" in s.name]
    families = (first, [s.name for s in space if s.name not in first])
    passed = supported(qrels, runs, families, n=n, seed=seed, alpha=alpha)
    ok = list(passed)
    if not ok:
        best = max(delta, key=lambda name: delta[name][0])
        default = next((s.name for s in space if "default" in s.name), None)
        why = (f"keeps dense: no setting beat dense with a supported gain (Holm; best "
               f"{best} Δ {_ci(delta[best])})")
        if default in delta and default != best:
            why += f"; the default {default} Δ {_ci(delta[default])}"
        return "dense", why
    pick = min(ok, key=lambda name: (rank[name], -mean[name]))
    why = (f"adopts {pick}: ΔMRR@10 vs dense {_ci(delta[pick])} (simultaneous), one-sided p "
           f"{passed[pick]:.4f}, supported by Holm's test, the default and the second stages "
           f"tested first ({len(delta)} settings, family-wise error ≤ {alpha:g})")
    richer = [name for name in ok if rank[name] > rank[pick] and mean[name] > mean[pick]]
    if richer:
        vs_pick = compare_runs(qrels, {pick: runs[pick], **{c: runs[c] for c in richer}},
                               ["mrr@10"], baseline=pick, n=n, seed=seed, alpha=alpha)
        beat = {r["run"]: r["Δmrr@10"] for r in vs_pick if r["run"] != pick
                and r["Δmrr@10"][1] > 0}
        if beat:
            top = max(beat, key=lambda name: mean[name])
            return top, (f"adopts {top}: ΔMRR@10 vs dense {_ci(delta[top])} and vs the "
                         f"simpler {pick} {_ci(beat[top])}, both corrected")
        best = max(richer, key=lambda name: mean[name])
        why += f"; kept over {best} (its gain over it not supported)"
    return pick, why


def _ci(t) -> str:
    return f"{t[0]:+.3f} [{t[1]:+.3f}, {t[2]:+.3f}]"


def make_folds(ids: Sequence[str], k: int, seed: int,
               groups: Mapping[str, str] | None = None) -> list[list[str]]:
    """``ids`` shuffled with ``seed`` and dealt into ``k`` folds, each fold sorted.
    ``groups`` (id -> key): ids sharing a key are dealt as one, into the fold of the first
    of them, so a question asked twice is never tuned on and then "held out" (fold sizes
    then differ by more than 1); without a shared key, sizes differ by at most 1."""
    ids = sorted(ids)
    random.Random(seed).shuffle(ids)
    folds: list[list[str]] = [[] for _ in range(k)]
    home: dict[str, int] = {}
    for q in ids:
        key = (groups or {}).get(q, q)
        if key not in home:
            home[key] = len(home) % k
        folds[home[key]].append(q)
    return [sorted(f) for f in folds]


@dataclass
class TuneReport:
    """What ``tune`` found. ``chosen``: the setting to use; ``adopted``: whether it differs
    from the default; ``reason``: one line; ``vs_dense``/``vs_default``: every setting's
    held-out MRR@10 and recall@10 with paired intervals (``compare_runs`` rows, corrected
    for the number of comparisons), the nested-CV row last; ``folds`` and ``fold_choices``:
    the split and what the rule chose on each training part; ``model``: the learned
    reranker fitted on all questions when it is chosen."""

    chosen: Setting
    default: Setting
    reason: str
    folds: list[list[str]]
    fold_choices: list[str]
    vs_dense: Comparison
    vs_default: Comparison
    seed: int
    seconds: dict[str, float] = field(default_factory=dict)
    model: LearnedReranker | None = None

    @property
    def adopted(self) -> bool:
        """True when the chosen setting is not the default (dense counts as a change)."""
        return self.chosen.name != self.default.name

    @property
    def nested(self) -> dict:
        """The nested-CV estimate of the tuner's choice: its row of ``vs_dense``."""
        return next(r for r in self.vs_dense if r["run"] == NESTED)

    def text(self) -> str:
        """The split, each setting's held-out numbers, the choice and its reason."""
        n = sum(map(len, self.folds))
        lines = [f"{n} labelled questions in {len(self.folds)} folds (seed {self.seed}); "
                 f"each held out once:"]
        lines += [f"  fold {i}: {len(f)} questions: {' '.join(map(one_line, f))}"
                  for i, f in enumerate(self.folds, 1)]
        lines += ["rule on the other folds chose: " + ", ".join(
            f"fold {i}: {c}" for i, c in enumerate(self.fold_choices, 1))]
        lines += ["", "held-out MRR@10 and recall@10, Δ vs dense:",
                  format_table(self.vs_dense), "", "Δ vs the default:",
                  format_table(self.vs_default), ""]
        lines += [self.reason, f"settings: {self.chosen.describe()}"]
        return "\n".join(lines)

    def plot(self, metric: str = "mrr@10", ax=None):
        """Each setting's held-out Δ ``metric`` vs dense with its corrected interval; the
        chosen one in colour. Returns the matplotlib Axes."""
        import matplotlib.pyplot as plt
        rows = [r for r in self.vs_dense if f"Δ{metric}" in r]
        if ax is None:
            _, ax = plt.subplots(figsize=(6, 0.35 * len(rows) + 1))
        for y, r in enumerate(rows):
            m, lo, hi = r[f"Δ{metric}"]
            color = "C3" if r["run"] == self.chosen.name else "C0"
            ax.errorbar(m, y, xerr=[[m - lo], [hi - m]], fmt="o", color=color, capsize=3)
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(range(len(rows)), [r["run"] for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel(f"held-out Δ{metric} vs dense (simultaneous 95% CI)")
        return ax


def tune(retriever: HybridRetriever, questions, *, folds: int = 5, seed: int = 0,
         n: int = 2000, alpha: float = 0.05, progress: bool = True,
         space: Sequence[Setting] | None = None, pools: Pools | None = None,
         log: Callable[[str], None] | None = None) -> TuneReport:
    """Tune ``retriever`` (a ``HybridRetriever``) on ``questions`` (a JSONL path or
    ``(id, question, gold)`` triples; unlabelled ones are skipped): see the module
    docstring. ``folds`` outer folds (fixed ``seed``), ``n`` bootstrap resamples, ``alpha``
    the family-wise level. ``pools`` and ``space``: precomputed ``collect`` output and the
    space it covers (then ``retriever`` may be None: tests, notebooks)."""
    if not (isinstance(retriever, HybridRetriever) or (pools and space)):
        raise TypeError(f"tune needs a HybridRetriever (dense + BM25 over one corpus), got "
                        f"{type(retriever).__name__}; load one with HybridRetriever.load(path)")
    if isinstance(questions, (str, Path)):
        questions = read_questions(questions)
    questions = labelled(questions)
    groups = {q: question_key(text) for q, text, _ in questions}
    distinct = len(set(groups.values()))
    if not 2 <= folds <= distinct // 2:
        repeats = f" ({distinct} distinct: some are asked twice)" if distinct < len(groups) else ""
        raise ValueError(f"folds must be >= 2 and leave at least 2 questions per fold; got "
                         f"folds={folds} for {len(questions)} labelled questions{repeats}; "
                         + (f"use folds={distinct // 2}" if distinct >= 4 else
                            "label at least 4 distinct questions"))
    space = tuple(space or search_space(retriever))
    say = log or (lambda _: None)
    pools = pools or collect(retriever, questions, space, progress=progress)
    ids = [q for q, _, _ in questions]
    split = make_folds(ids, folds, seed, groups)
    t = time.perf_counter()
    choices, nested_hits = [], {}
    for i, held in enumerate(split):
        train = [q for q in ids if q not in set(held)]
        inner = make_folds(train, folds, seed + 1 + i, groups)
        pick, _ = choose(pools.qrels, runs_on(pools, space, train, inner), space,
                         n=max(500, n // 2), seed=seed, alpha=alpha)
        choices.append(pick)
        setting = next(s for s in space if s.name == pick)
        nested_hits.update(runs_on(pools, [setting], held, [held])[pick]
                           if setting.second != "learned" else
                           _held_out(pools, setting, train, held))
        say(f"fold {i + 1}/{folds}: chose {pick}")
    runs = runs_on(pools, space, ids, split)
    pick, why = choose(pools.qrels, runs, space, n=n, seed=seed, alpha=alpha)
    chosen = next(s for s in space if s.name == pick)
    table_runs = {**runs, NESTED: nested_hits}
    vs_dense = compare_runs(pools.qrels, table_runs, list(METRICS), baseline="dense", n=n,
                            seed=seed, alpha=alpha)
    default = next(s for s in space if "default" in s.name)
    vs_default = compare_runs(pools.qrels, table_runs, list(METRICS), baseline=default.name,
                              n=n, seed=seed, alpha=alpha)
    nested = next(r for r in vs_dense if r["run"] == NESTED)
    if chosen.name != "dense" and nested["Δmrr@10"][0] < 0:   # the rule itself loses: stop
        why = (f"keeps dense: {pick} looked supported, but the tuning rule judged on held-out "
               f"folds loses to dense (Δ {_ci(nested['Δmrr@10'])})")
        chosen = space[0]
    if chosen.name == default.name:
        why = f"adopts nothing (keeps the default {default.name}): " + why.split(": ", 1)[1]
    model = fit_learned(pools, chosen.first, ids) if chosen.second == "learned" else None
    return TuneReport(chosen, default, why, split, choices, vs_dense, vs_default, seed,
                      {"candidates and features": pools.seconds,
                       "cross-validation": time.perf_counter() - t}, model)


def _held_out(pools: Pools, setting: Setting, train, held) -> dict:
    """A learned setting's run on ``held``, fitted on ``train``."""
    model = fit_learned(pools, setting.first, train)
    return run_from_hits({q: (reorder(pools.first[setting.first][q],
                                       model.decision(pools.features[setting.first][q]))
                              if model is not None else pools.first[setting.first][q])
                          for q in held})

