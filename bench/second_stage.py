"""Two offline second stages over the hybrid top 50: MaxSim blend and a learned reranker.

For every question of a split the hybrid retriever of chapter 6 (dense + BM25, each 100
deep, RRF, top 50) gives the candidates; each candidate's features are computed once
(``LearnedReranker.features``, which include the dense cosine and MaxSim), and every
second stage is scored from them:

* MaxSim alone, and blended with the dense cosine — the blend weight chosen on help-centre
  *dev* (MRR@10), never on a test split;
* the window reranker (chapter 6's offline stand-in), the baseline to beat;
* the learned reranker, fitted on a train split: help-centre train -> help-centre test,
  Python-docs train -> Python-docs test, and each tested on the *other* corpus.

MRR@10 and recall@10 (document level) with 95% bootstrap intervals, Δ paired against the
dense top 50 and the hybrid order. Also: ms per query for the MaxSim blend on one thread,
with token vectors cached and cold.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/second_stage.py
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import data_dir, load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, run_from_hits
from ragbook.fusion import HybridRetriever, reciprocal_rank_fusion
from ragbook.late_interaction import MaxSimReranker, MaxSimScorer
from ragbook.learned_rerank import FEATURES, LearnedReranker

DEPTH = 50
METRICS = ("mrr@10", "recall@10")
F = {name: i for i, name in enumerate(FEATURES)}


def candidates(hybrid, questions):
    """{qid: (dense top 50, hybrid top 50)}."""
    out = {}
    for qid, text in questions:
        d, k = hybrid.channels(text)
        out[qid] = (d[:DEPTH], reciprocal_rank_fusion([d, k], k=DEPTH))
    return out


def run_by(score, feats, pools):
    """A document-level run: each question's hybrid pool reordered by ``score(features)``."""
    return run_from_hits({qid: [replace(pool[i], rank=r) for r, i in
                                enumerate(np.argsort(-score(feats[qid]), kind="stable"), 1)]
                          for qid, (_, pool) in pools.items()})


def rows(qrels, runs):
    """Per run: each metric's mean [CI], Δ vs dense and vs hybrid (paired bootstrap)."""
    per = {n: {m: per_query(qrels, r, m) for m in METRICS} for n, r in runs.items()}
    out = {}
    for n in runs:
        out[n] = {m: bootstrap_ci(list(per[n][m].values())) for m in METRICS}
        for base in ("dense", "hybrid"):
            if n != base and not (base == "hybrid" and n == "dense"):
                out[n].update({f"Δ{m} vs {base}": paired_bootstrap(per[base][m], per[n][m])
                               for m in METRICS})
    return out


def table(qrels, runs):
    """Rows: mean [CI] per metric, Δ vs dense and vs hybrid (paired bootstrap)."""
    per = {n: {m: per_query(qrels, r, m) for m in METRICS} for n, r in runs.items()}
    lines = [f"{'run':26s} {'MRR@10':>22s} {'ΔMRR vs dense':>25s} {'ΔMRR vs hybrid':>25s} "
             f"{'recall@10':>22s} {'Δrecall vs dense':>25s}"]

    def ci(t, sign=False):
        f = "{:+.3f}" if sign else "{:.3f}"
        return f"{f.format(t[0])} [{f.format(t[1])}, {f.format(t[2])}]"

    for n in runs:
        m, r = per[n]["mrr@10"], per[n]["recall@10"]
        row = [ci(bootstrap_ci(list(m.values()))),
               "" if n == "dense" else ci(paired_bootstrap(per["dense"]["mrr@10"], m), True),
               "" if n in ("dense", "hybrid")
               else ci(paired_bootstrap(per["hybrid"]["mrr@10"], m), True),
               ci(bootstrap_ci(list(r.values()))),
               "" if n == "dense" else ci(paired_bootstrap(per["dense"]["recall@10"], r), True)]
        lines.append(f"{n:26s} " + " ".join(f"{c:>{w}s}" for c, w in zip(row, (22, 25, 25, 22, 25),
                                                                           strict=True)))
    return "\n".join(lines)


def main(sample: int | None = None) -> None:
    """``sample``: only the first questions of each split (a smoke run, not a measurement)."""
    t0 = time.time()
    hc, py = load_helpcentre(), load_pydocs()
    encoder = Encoder(show_progress=False)
    scorer = MaxSimScorer(encoder, token_cache_mb=3072)
    learner = LearnedReranker(scorer)
    hc_hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(
        chunk_documents(hc.documents, size=256, overlap=32))
    py_hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(py.documents)
    splits = {("hc", s): (hc_hybrid, [(q.id, q.standalone) for q in hc.split(s) if q.gold],
                          hc.qrels(s)) for s in ("train", "dev", "test")}
    splits.update({("py", s): (py_hybrid, [(q.id, q.text) for q in py.split(s)], py.qrels(s))
                   for s in ("train", "test")})
    data = {}
    for key, (hybrid, qs, qrels) in splits.items():
        qs = qs[:sample]
        qrels = {q: qrels[q] for q, _ in qs}
        t = time.time()
        pools = candidates(hybrid, qs)
        texts = dict(qs)
        feats = {qid: learner.features(texts[qid], pool) for qid, (_, pool) in pools.items()}
        labels = {qid: np.array([h.doc_id in qrels[qid] for h in pool], int)
                  for qid, (_, pool) in pools.items()}
        data[key] = (pools, feats, labels, qrels)
        print(f"{key}: {len(qs)} questions, features in {time.time() - t:.0f} s", flush=True)

    def blend(w):
        return lambda f: w * f[:, F["dense"]] + (1 - w) * f[:, F["maxsim"]]

    pools, feats, _, qrels = data[("hc", "dev")]
    grid = [round(w, 1) for w in np.arange(0, 1.01, 0.1)]
    dev = {w: np.mean(list(per_query(qrels, run_by(blend(w), feats, pools), "mrr@10").values()))
           for w in grid}
    best_w = max(grid, key=lambda w: (dev[w], -abs(w - 0.5)))
    print("help-centre dev MRR@10 by dense_weight: "
          + ", ".join(f"{w:.1f}: {v:.3f}" for w, v in dev.items()) + f"  -> chosen {best_w}")

    record = {"command": "flock /tmp/ragbook-heavy.lock .venv/bin/python bench/second_stage.py",
              "candidates": DEPTH, "dev_mrr_by_dense_weight": dev, "dense_weight": best_w,
              "tests": {}, "latency_ms": {}}
    learned = {}
    for c in ("hc", "py"):
        _, f, lab, _ = data[(c, "train")]
        learned[c] = LearnedReranker(scorer).fit_features(np.vstack(list(f.values())),
                                                          np.concatenate(list(lab.values())))
        w = learned[c].weights_["coef"]
        print(f"learned on {c} train: " + ", ".join(f"{n} {x:+.2f}" for n, x in
                                                      zip(FEATURES, w, strict=True)))

    for c, name in (("hc", "help centre"), ("py", "python docs")):
        pools, feats, _, qrels = data[(c, "test")]
        other = "py" if c == "hc" else "hc"
        runs = {"dense": run_from_hits({q: d for q, (d, _) in pools.items()}),
                "hybrid": run_from_hits({q: h for q, (_, h) in pools.items()}),
                "window rerank": run_by(lambda f: f[:, F["window"]], feats, pools),
                "MaxSim alone": run_by(lambda f: f[:, F["maxsim"]], feats, pools),
                f"MaxSim blend (w={best_w})": run_by(blend(best_w), feats, pools),
                f"learned ({c} train)": run_by(learned[c].decision, feats, pools),
                f"learned ({other} train)": run_by(learned[other].decision, feats, pools)}
        print(f"\n-- {name} test ({len(qrels)} questions), {DEPTH} hybrid candidates; "
              f"mean [95% bootstrap CI], Δ paired")
        print(table(qrels, runs))
        record["tests"][name] = {"questions": len(qrels), "runs": rows(qrels, runs)}

    # latency of the MaxSim blend on one thread, 50 candidates of the help-centre test
    torch.set_num_threads(1)
    pools, *_ = data[("hc", "test")]
    texts = dict(splits[("hc", "test")][1])
    warm = MaxSimReranker(encoder, best_w)
    cold_scorer = MaxSimReranker(Encoder(cache=False, show_progress=False), best_w,
                                 token_cache_mb=1)
    for label, rr, n in (("nothing cached", cold_scorer, 5),
                         ("dense vectors cached, token vectors computed", warm, 20),
                         ("dense and token vectors cached", warm, 20)):
        times = []
        for qid in list(pools)[:n]:
            rr.rerank(texts[qid], pools[qid][1], k=10)
            times.append(rr.last_latency_s)
        record["latency_ms"][label] = 1e3 * float(np.median(times))
        print(f"MaxSim blend, 50 candidates, one thread, {label}: "
              f"{1e3 * np.median(times):.0f} ms median of {n} questions")
    print(f"total {time.time() - t0:.0f} s")
    if sample is None:  # a smoke run records nothing
        record["learned_weights"] = {c: dict(zip(FEATURES, m.weights_["coef"], strict=True))
                                     for c, m in learned.items()}
        path = data_dir() / "results" / "second_stage.json"
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"recorded in {path}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else None)
