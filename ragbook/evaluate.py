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
import numbers
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .types import Hit

__all__ = ["Qrels", "Run", "ranking", "recall_at_k", "hit_at_k", "reciprocal_rank",
           "mean_reciprocal_rank", "ndcg_at_k", "evaluate", "per_query", "run_from_hits",
           "retrieve_run", "METRICS",
           "bootstrap_ci", "paired_bootstrap", "paired_randomization_test", "holm", "Comparison",
           "compare_runs", "held_out_choice",
           "format_table", "normalize_answer", "exact_match", "f1_score", "reading_outcome",
           "reading_report"]

Qrels = Mapping[str, Mapping[str, int]]
Run = Mapping[str, Mapping[str, float]]


def ranking(scores: Mapping[str, float]) -> list[str]:
    """Doc ids best first: by score descending, ties by doc id ascending. A NaN score would
    sort arbitrarily, so it is an error naming the document."""
    for d, s in scores.items():
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or s != s:
            shown = "NaN" if s != s else f"{s!r:.40}"
            raise ValueError(f"the run scores document {d!r} {shown}; every score must be a "
                             f"number (not NaN, not a string)")
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


def mean_reciprocal_rank(relevant_per_query: Sequence[Mapping[str, int]],
                         ranked_per_query: Sequence[Sequence[str]], k: int) -> float:
    """MRR@k over queries given as parallel lists (labels, ranking): the mean of
    ``reciprocal_rank``. ``evaluate(qrels, run, "mrr@k")`` is the same number for dicts.

    >>> mean_reciprocal_rank([{"g": 1}] * 2, [["g"], ["a", "g"]], 10)
    0.75
    """
    if len(relevant_per_query) != len(ranked_per_query):
        raise ValueError(f"{len(relevant_per_query)} label sets for {len(ranked_per_query)} "
                         f"rankings; give one of each per query, in the same order")
    if not ranked_per_query:
        raise ValueError("no queries: the mean reciprocal rank of nothing is undefined")
    return sum(reciprocal_rank(rel, ranked, k) for rel, ranked
               in zip(relevant_per_query, ranked_per_query, strict=True)) / len(ranked_per_query)


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


def _check_qrels(qrels: Qrels) -> None:
    """Relevance labels must be finite numbers: a "1" read from a file would not compare with
    0, and an infinite grade makes nDCG inf / inf = NaN."""
    if not isinstance(qrels, Mapping):
        raise TypeError(f"qrels must be {{query_id: {{doc_id: relevance}}}}, got "
                        f"{type(qrels).__name__}")
    for q, rel in qrels.items():
        if not isinstance(rel, Mapping):
            raise TypeError(f"qrels[{q!r}] must be {{doc_id: relevance}}, got {rel!r:.60}; give "
                            f"each query a dict, e.g. {{'doc-a': 1}}")
        for d, r in rel.items():
            if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r):
                fix = (f"convert it when reading the file, e.g. int({r!r:.20})"
                       if isinstance(r, str) else "e.g. 1 for relevant")
                raise ValueError(f"qrels[{q!r}][{d!r}] is {r!r:.40}: relevance must be a finite "
                                 f"number "
                                 f"(0 not relevant, 1 relevant, higher grades more relevant); "
                                 f"{fix}")


def per_query(qrels: Qrels, run: Run, metric: str) -> dict[str, float]:
    """One metric's value for every query that has a relevant document."""
    _check_qrels(qrels)
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


def run_from_hits(results: Mapping[str, Sequence[Hit]],
                  level: str = "doc") -> dict[str, dict[str, float]]:
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


def retrieve_run(retriever, questions, k: int = 10, level: str = "doc",
                 **search_kwargs) -> dict[str, dict[str, float]]:
    """Run ``retriever.search`` for each ``(query_id, text)`` pair and collect a run. Ids
    must be unique: a run holds one ranking per id, so a repeat would silently replace the
    first question's results."""
    questions = list(questions)
    first: dict[str, int] = {}
    for i, (qid, _) in enumerate(questions):
        if qid in first:
            raise ValueError(f"question id {qid!r} appears twice (items {first[qid]} and {i}); "
                             f"give every question its own id")
        first[qid] = i
    return run_from_hits({qid: retriever.search(text, k=k, **search_kwargs)
                          for qid, text in questions},
                         level=level)


# -- uncertainty ---------------------------------------------------------------------------

def _resample_means(values: Sequence[float], n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    m = len(values)
    return sorted(sum(values[rng.randrange(m)] for _ in range(m)) / m for _ in range(n))


def bootstrap_ci(values: Sequence[float], n: int = 2000, alpha: float = 0.05,
                 seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high): a percentile bootstrap interval for the mean of per-query values
    (Efron & Tibshirani, 1993). Resamples queries with replacement ``n`` times."""
    values = list(values)
    if not values:
        raise ValueError("no values to bootstrap")
    means = _resample_means(values, n, seed)
    lo, hi = means[int(alpha / 2 * n)], means[min(n - 1, int((1 - alpha / 2) * n))]
    return sum(values) / len(values), lo, hi


def _paired(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    if set(a) != set(b):
        raise ValueError("paired comparisons need the same queries in both runs' per-query values")
    return [b[q] - a[q] for q in sorted(a)]


def paired_bootstrap(a: Mapping[str, float], b: Mapping[str, float], n: int = 2000,
                     alpha: float = 0.05, seed: int = 0) -> tuple[float, float, float]:
    """(mean difference b − a, low, high) over the same queries, resampled together."""
    return bootstrap_ci(_paired(a, b), n=n, alpha=alpha, seed=seed)


def paired_randomization_test(a: Mapping[str, float], b: Mapping[str, float], n: int = 10_000,
                              seed: int = 0) -> float:
    """Two-sided p-value that systems a and b are exchangeable: flip the sign of each
    query's difference at random and count how often the mean is as extreme
    (Fisher's randomization test; recommended for IR by Smucker, Allan & Carterette, 2007)."""
    diffs = _paired(a, b)
    observed = abs(sum(diffs))
    rng = random.Random(seed)
    hits = sum(abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= observed - 1e-12
               for _ in range(n))
    return (hits + 1) / (n + 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (Holm, 1979): reject the
    hypotheses whose adjusted p is below α and the family-wise error rate stays ≤ α however
    many comparisons there are. Uniformly more powerful than Bonferroni, just as safe.

    >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    m = len(pvalues)
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda i: pvalues[i])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


class Comparison(list):
    """``compare_runs``'s rows (a plain list of dicts) plus ``correction``: one line saying
    how the differences were corrected for multiple comparisons ("" when there was one).
    ``format_table`` prints it under the table."""

    correction: str = ""


def compare_runs(qrels: Qrels, runs: Mapping[str, Run], metrics: Sequence[str],
                 baseline: str | None = None, n: int = 2000, seed: int = 0,
                 alpha: float = 0.05) -> Comparison:
    """One row per run: each metric's mean with a 95% bootstrap CI, and, when ``baseline``
    names a run, the paired difference to it with its CI and randomization p-value.

    With more than one comparison (runs other than the baseline × metrics), the chance
    that *some* difference looks real by luck grows with their number, so the table is
    corrected: the Δ intervals are simultaneous (each at level α/m, Bonferroni) and the
    p-values are Holm-adjusted; ``rows.correction`` says so and ``format_table`` prints it.
    """
    if baseline is not None and baseline not in runs:
        raise ValueError(f"baseline {baseline!r} is not one of the runs {sorted(runs)}: "
                         "pass the name of the run to compare against")
    others = [name for name in runs if baseline is not None and name != baseline]
    m = len(others) * len(metrics)
    level = alpha / max(1, m)
    rows = Comparison()
    pvalues, cells = [], []
    for name, run in runs.items():
        row: dict[str, Any] = {"run": name}
        for metric in metrics:
            vals = per_query(qrels, run, metric)
            row[metric] = bootstrap_ci(list(vals.values()), n=n, seed=seed)
            if name in others:
                base = per_query(qrels, runs[baseline], metric)
                row[f"Δ{metric}"] = paired_bootstrap(base, vals, n=n, alpha=level, seed=seed)
                pvalues.append(paired_randomization_test(base, vals, n=n * 2, seed=seed))
                cells.append((row, f"p({metric})"))
        rows.append(row)
    for (row, col), p in zip(cells, holm(pvalues) if m > 1 else pvalues, strict=True):
        row[col] = p
    if m > 1:
        rows.correction = (f"{m} comparisons with {baseline!r}: Δ CIs simultaneous "
                           f"{1 - alpha:.0%} (Bonferroni), p Holm-adjusted")
    return rows


def held_out_choice(scores: Mapping[Any, Mapping[str, float]],
                    folds: Sequence[Sequence[str]]) -> float:
    """What "pick the best setting" is worth on questions it did not pick with: for each
    fold, choose the setting with the best mean per-query score (``scores``: setting ->
    {question id -> value}) on the *other* folds' questions (ties: the first in
    ``scores``), score that choice on the fold's own questions; the mean over every
    question. Cross-validation of the choice itself, so the maximum over many settings
    does not pass luck off as a gain (the reported best on the questions chosen with is
    biased upwards). Every question must be in exactly one fold."""
    ids = [q for fold in folds for q in fold]
    if len(folds) < 2 or len(set(ids)) != len(ids):
        raise ValueError(f"need at least 2 folds, each question in exactly one; got "
                         f"{len(folds)} folds over {len(ids)} ids ({len(set(ids))} distinct)")
    missing = [name for name, vals in scores.items() if not set(ids) <= set(vals)]
    if not scores or missing:
        raise ValueError(f"every setting needs a score for every question in the folds; "
                         f"{missing[:1] or 'no setting'} lacks some")
    total = 0.0
    for n, fold in enumerate(folds):
        rest = [q for m, other in enumerate(folds) if m != n for q in other]
        best = max(scores, key=lambda name: sum(scores[name][q] for q in rest))
        total += sum(scores[best][q] for q in fold)
    return total / len(ids)


def format_table(rows: Sequence[Mapping[str, Any]], width: int | None = 100) -> str:
    """Render ``compare_runs`` rows as aligned text: ``0.812 [0.75, 0.87]``. A table wider
    than ``width`` characters (many metrics, each with its interval and difference) is
    printed long instead — three columns, run, metric and value (with the paired difference
    and its p after it) — so it reads in a notebook and a terminal without wrapping;
    ``width=None`` always gives the wide layout. A correction for multiple comparisons
    (``Comparison.correction``) is printed under the table."""
    cols: list[str] = []
    for r in rows:
        cols += [c for c in r if c != "run" and c not in cols]

    def cell(col, v):
        if isinstance(v, tuple):
            fmt = "{:+.3f}" if col.startswith("Δ") else "{:.3f}"
            return f"{fmt.format(v[0])} [{fmt.format(v[1])}, {fmt.format(v[2])}]"
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    def aligned(table):
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        return "\n".join("  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()
                         for row in table)

    wide = aligned([["run"] + cols] + [[str(r["run"])] + [cell(c, r[c]) if c in r else ""
                                                        for c in cols] for r in rows])
    note = f"\n{rows.correction}" if getattr(rows, "correction", "") else ""
    if width is None or max(map(len, wide.splitlines())) <= width:
        return wide + note
    metrics = [c for c in cols if not c.startswith(("Δ", "p("))]
    long = [["run", "metric", "mean [95% CI]   Δ vs baseline [95% CI], p"]]
    for r in rows:
        for n, m in enumerate(m for m in metrics if m in r):
            value = cell(m, r[m])
            if f"Δ{m}" in r:
                value += f"   Δ {cell(f'Δ{m}', r[f'Δ{m}'])}"
                if f"p({m})" in r:
                    value += f", p {r[f'p({m})']:.4f}"
            long.append([str(r["run"]) if n == 0 else "", m, value])
    return aligned(long) + note


# -- reader metrics (SQuAD 2.0) ------------------------------------------------------------

def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower-case, drop punctuation and the articles a/an/the, and
    collapse white space (Rajpurkar et al., 2016; the official evaluation script)."""
    import re
    import string

    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, golds: Sequence[str]) -> float:
    """1 if the normalised prediction equals a normalised gold answer. With no gold
    answers (unanswerable), 1 only for an abstention (``None``)."""
    if not golds:
        return float(prediction is None)
    if prediction is None:
        return 0.0
    return float(any(normalize_answer(prediction) == normalize_answer(g) for g in golds))


def f1_score(prediction: str | None, golds: Sequence[str]) -> float:
    """Token-overlap F1 with the best-matching gold answer (unanswerable: as exact_match)."""
    if not golds or prediction is None:
        return exact_match(prediction, golds)
    pred = normalize_answer(prediction).split()
    best = 0.0
    for g in golds:
        gold = normalize_answer(g).split()
        common = sum(min(pred.count(t), gold.count(t)) for t in set(pred) & set(gold))
        if common:
            p, r = common / len(pred), common / len(gold)
            best = max(best, 2 * p * r / (p + r))
    return best


# -- judging a reader on reading tasks -----------------------------------------------------

_CITE_MARK = re.compile(r"\s*\[\d+\]")


def reading_outcome(task, answer) -> dict[str, float]:
    """How a reader did on one ``ReadingTask`` (1.0 / 0.0 per outcome, F1 in [0, 1]).

    An answer is *delivered* when it has text and no flag (``reason`` is None): a flagged
    answer (uncited, invalid or unsupported citation) is one a pipeline must not show, so it
    counts as not answering. ``cited_ok``: the answer names at least one source and every
    source is one of the task's passages (asked only of answers with text).
    """
    ids = {h.id for h in task.passages}
    delivered = answer.text is not None and answer.reason is None
    text = _CITE_MARK.sub("", answer.text) if delivered else None
    out = {"answerable": float(task.gold is not None), "delivered": float(delivered),
           "abstained": float(answer.text is None),
           "f1": f1_score(text, task.answers), "em": exact_match(text, task.answers),
           "right_source": float(delivered and task.gold in answer.sources)}
    if answer.text is not None:
        out["cited_ok"] = float(bool(answer.sources) and set(answer.sources) <= ids
                                and answer.reason not in ("uncited", "invalid_citation"))
    return out


def reading_report(tasks, answers) -> dict[str, float]:
    """Rates over ``tasks``: on answerable tasks, the share answered (delivered), answered
    from the right passage, and F1; on unanswerable ones, the share correctly not answered;
    the share of explicit abstentions (no text) on each kind;
    citation validity over every answer with text; F1 over all tasks (SQuAD 2.0 style)."""
    rows = [reading_outcome(t, a) for t, a in zip(tasks, answers, strict=True)]
    pos = [r for r in rows if r["answerable"]]
    neg = [r for r in rows if not r["answerable"]]
    texts = [r["cited_ok"] for r in rows if "cited_ok" in r]

    def mean(xs):
        return sum(xs) / len(xs) if xs else float("nan")

    return {"answered": mean([r["delivered"] for r in pos]),
            "right source": mean([r["right_source"] for r in pos]),
            "HasAns F1": mean([r["f1"] for r in pos]),
            "NoAns acc": mean([1 - r["delivered"] for r in neg]),
            "abstained (answerable)": mean([r["abstained"] for r in pos]),
            "abstained (unanswerable)": mean([r["abstained"] for r in neg]),
            "citations valid": mean(texts),
            "F1": mean([r["f1"] for r in rows])}
