"""Which sentence answers? Alternative answer scorers for the offline span reader, measured on
dev splits only (issue 35: what is left after the reader fixes is the choice of sentence
*within* the passages read, and a confidence that separates right from wrong).

For each answerable dev question, the README pipeline (chunks 256/32, hybrid, keep 5) gives
the passages read; every candidate answer unit of those passages (``SentenceReader``'s
shipped settings: answer units, references skipped, fragment paragraphs) is scored by each
scorer, and the best one is the answer. A unit is *right* when its passage is a gold document
and it holds the gold span's key fact (``unseen.key_fact``). Per scorer and set: *picked
right* (share of answerable questions whose best unit is right), *oracle* (some unit read is
right), and the largest coverage at which the delivered error (unanswerables included) is at
most 25% for some floor on the scorer — the issue's bar, here on dev, so an upper bound on
what a floor calibrated on dev could give on test.

Scorers: the shipped score (all-MiniLM-L6-v2 cosine + 0.05 / rank); multilingual-e5-small's
asymmetric query/passage cosine (the offline ``prefix_encoder`` role), alone and summed with
the shipped score.

    RAGBOOK_PROFILE=offline .venv/bin/python bench/answer_scorers.py
"""
import time

import numpy as np
from unseen import SPLITS, corpus, key_fact

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents, models
from ragbook.pipeline import Pipeline
from ragbook.readers import default_extractive_reader
from ragbook.result import with_history

BAR = 0.25


def candidates(name: str, reader, e5) -> list[dict]:
    """Per dev question: answerable or not, and its candidate units with their scores."""
    ds, docs = corpus(name)
    retriever = HybridRetriever(DenseIndex(), BM25Index()).build(
        chunk_documents(docs, size=256, overlap=32))
    pipeline = Pipeline(retriever, reader=reader)
    rows = []
    for q in ds.split(SPLITS[name]["dev"]):
        prep = pipeline.prepare(*with_history(q))
        hits = list(prep.candidates)
        spans = reader.hits_spans(prep.condensed, hits) if hits else []
        units = [(h, s) for h, found in zip(hits, spans, strict=True) for s in found]
        golds = [a["text"] for a in q.answers]
        e5_scores = ((e5.encode_passages([s.text for _, s in units])
                      @ e5.encode_queries([prep.condensed])[0]).tolist() if units else [])
        rows.append({"answerable": bool(q.gold), "units": [
            {"shipped": s.score, "e5": x, "right": bool(q.gold) and h.doc_id in q.gold
             and any(key_fact(s.text, g) for g in golds)}
            for (h, s), x in zip(units, e5_scores, strict=True)]})
    return rows


def measure(rows, scorer) -> tuple[float, float, float]:
    """(picked right, oracle, max coverage at delivered error <= BAR) for one scorer."""
    picks = []
    for r in rows:
        if r["units"]:
            best = max(r["units"], key=scorer)
            picks.append((r["answerable"], best["right"], scorer(best)))
    n = sum(r["answerable"] for r in rows)
    order = sorted(picks, key=lambda p: -p[2])
    coverage = 0.0
    for t in range(1, len(order) + 1):
        if np.mean([not right for _, right, _ in order[:t]]) <= BAR:
            coverage = max(coverage, sum(a for a, _, _ in order[:t]) / n)
    oracle = sum(any(u["right"] for u in r["units"]) for r in rows if r["answerable"]) / n
    return sum(right for a, right, _ in picks if a) / n, oracle, coverage


SCORERS = {"shipped (MiniLM cosine + 0.05/rank)": lambda u: u["shipped"],
           "e5-small query/passage cosine": lambda u: u["e5"],
           "shipped + e5": lambda u: u["shipped"] + u["e5"]}


def main():
    reader = default_extractive_reader(min_span_score=None)
    e5 = Encoder("prefix_encoder", show_progress=False)
    print(f"profile {models.active_profile()}, dev splits; reader {reader}")
    print(f"| set (dev) | scorer | picked right | oracle | max coverage at delivered error "
          f"≤ {BAR:.0%} |\n|---|---|---|---|---|")
    for name in SPLITS:
        t = time.perf_counter()
        rows = candidates(name, reader, e5)
        for label, scorer in SCORERS.items():
            picked, oracle, coverage = measure(rows, scorer)
            print(f"| {name} ({SPLITS[name]['dev']}) | {label} | {picked:.3f} | {oracle:.3f} "
                  f"| {coverage:.3f} |")
        print(f"<!-- {name}: {time.perf_counter() - t:.0f} s -->")


if __name__ == "__main__":
    main()
