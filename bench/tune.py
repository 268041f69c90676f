"""Does the tuner's held-out estimate hold on a test split it never saw? (issue 32 item 1)

For each corpus, ``ragbook.tune`` runs on one split's labels (help centre: dev; Python docs:
train, it has no dev split; the Ninja manual, a corpus no chapter uses: dev), exactly as a
user would, and prints its report. Then every setting of the space is measured on the test
split — a learned second stage fitted on the whole tuning split, as the settings file
holds it — and the chosen setting is run through the settings file (``save_settings`` ->
``load_settings`` -> first stage + reranker), as ``ragbook ask --settings`` would.

Agreement: the tuner's nested-CV estimate (MRR@10 and Δ vs dense, with 95% intervals) against
the chosen setting's test-split MRR@10 and Δ vs dense.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/tune.py [hc] [py] [ninja]
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents
from ragbook.datasets import load_helpcentre, load_ninja, load_pydocs
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, run_from_hits
from ragbook.tuned import load_settings, save_settings
from ragbook.tuning import (
    collect,
    fit_learned,
    reorder,
    runs_on,
    search_space,
    tune,
)


def corpora(names):
    encoder = Encoder(show_progress=False)
    if "hc" in names:
        hc = load_helpcentre()
        yield ("help centre", chunk_documents(hc.documents, size=256, overlap=32), encoder,
               [(q.id, q.standalone, q.gold) for q in hc.split("dev") if q.gold],
               [(q.id, q.standalone, q.gold) for q in hc.split("test") if q.gold], "dev")
    if "py" in names:
        py = load_pydocs()
        yield ("python docs", list(py.documents), encoder,
               [(q.id, q.text, q.gold) for q in py.split("train")],
               [(q.id, q.text, q.gold) for q in py.split("test")], "train")
    if "ninja" in names:
        nj = load_ninja()
        yield ("ninja manual", chunk_documents(nj.documents, size=256, overlap=32), encoder,
               [(q.id, q.standalone, q.gold) for q in nj.split("dev") if q.gold],
               [(q.id, q.standalone, q.gold) for q in nj.split("test") if q.gold], "dev")


def ci(t, sign=False):
    f = "{:+.3f}" if sign else "{:.3f}"
    return f"{f.format(t[0])} [{f.format(t[1])}, {f.format(t[2])}]"


def test_runs(dev_pools, test_pools, space, dev_ids, test_ids):
    """Every setting on the test questions; learned second stages fitted on all of dev."""
    fixed = [s for s in space if s.second != "learned"]
    runs = runs_on(test_pools, fixed, test_ids, [test_ids])
    for s in space:
        if s.second == "learned":
            model = fit_learned(dev_pools, s.first, dev_ids)
            runs[s.name] = run_from_hits({q: (
                reorder(test_pools.first[s.first][q],
                         model.decision(test_pools.features[s.first][q]))
                if model is not None else test_pools.first[s.first][q]) for q in test_ids})
    return runs


def main(names) -> None:
    for name, items, encoder, dev, test, split in corpora(names):
        t0 = time.perf_counter()
        hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(items)
        built = time.perf_counter() - t0
        space = search_space(hybrid)
        dev_pools = collect(hybrid, dev, space, progress=False)
        report = tune(hybrid, dev, pools=dev_pools, space=space, progress=False)
        print(f"\n===== {name}: tuned on {split} ({len(dev)} questions), tested on test "
              f"({len(test)}); index {len(items)} items built in {built:.0f} s; candidates "
              f"and features {dev_pools.seconds:.0f} s, cross-validation "
              f"{report.seconds['cross-validation']:.0f} s")
        print(report.text())

        t = time.perf_counter()
        test_pools = collect(hybrid, test, space, progress=False)
        test_ids = [q for q, _, _ in test]
        runs = test_runs(dev_pools, test_pools, space, [q for q, _, _ in dev], test_ids)
        qrels = test_pools.qrels
        with tempfile.TemporaryDirectory() as tmp:     # the chosen one, through the file
            path = save_settings(Path(tmp) / "tuned.json", report, hybrid)
            parts = load_settings(path, hybrid)
        hits = {}
        for q, text, _ in test:
            pool = parts["retriever"].search(text, k=parts["candidates"])
            hits[q] = (parts["reranker"].order(text, pool, k=len(pool))
                       if parts["reranker"] is not None and pool else pool)
        runs["chosen, via settings file"] = run_from_hits(hits)
        mrr = {n: per_query(qrels, r, "mrr@10") for n, r in runs.items()}
        dev_rows = {r["run"]: r for r in report.vs_dense}
        print(f"\n-- test split, {len(test)} questions ({time.perf_counter() - t:.0f} s): "
              f"MRR@10 [95% CI], Δ vs dense paired (unadjusted); dev = held-out on {split}")
        print(f"{'setting':28s} {'dev held-out':>8s} {'test MRR@10':>22s} {'test Δ vs dense':>25s}")
        for n, values in mrr.items():
            delta = "" if n == "dense" else ci(paired_bootstrap(mrr["dense"], values), True)
            dev_m = dev_rows.get(n, dev_rows.get(report.chosen.name) if n.startswith("chosen")
                                 else None)
            print(f"{n:28s} {dev_m['mrr@10'][0] if dev_m else float('nan'):8.3f} "
                  f"{ci(bootstrap_ci(list(values.values()))):>22s} "
                  f"{delta:>25s}")
        nested = report.nested
        chosen = mrr["chosen, via settings file"]
        test_m = bootstrap_ci(list(chosen.values()))
        test_d = paired_bootstrap(mrr["dense"], chosen)
        inside = nested["mrr@10"][1] <= test_m[0] <= nested["mrr@10"][2]
        inside_d = nested["Δmrr@10"][1] <= test_d[0] <= nested["Δmrr@10"][2]
        print(f"\nagreement: tuner's nested-CV estimate on {split}: MRR@10 "
              f"{ci(nested['mrr@10'])}, Δ vs dense {ci(nested['Δmrr@10'], True)}; "
              f"chosen ({report.chosen.name}) on test: MRR@10 {ci(test_m)}, Δ vs dense "
              f"{ci(test_d, True)}; test MRR within the estimate's CI: {inside}; test Δ "
              f"within it: {inside_d}")
        print(f"{name}: total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:] or ["hc", "py", "ninja"])
