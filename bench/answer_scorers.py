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
the shipped score. Pickers (``PICKERS``, issue 35's "retrieval rank as evidence" and "the
paragraph when the sentence alone is not an answer"): the best unit of all passages read
(shipped), the best unit of the top-ranked passage only, and either one widened to the
paragraph (blank-line block) that holds it; each over the hybrid alone and over the hybrid
with the offline second stage (``CrossEncoderReranker()``: the MaxSim blend), which puts the
gold page first more often.

    RAGBOOK_PROFILE=offline .venv/bin/python bench/answer_scorers.py
"""
import time

import numpy as np
from unseen import SPLITS, corpus, key_fact

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents, models
from ragbook.pipeline import Pipeline
from ragbook.readers import default_extractive_reader
from ragbook.rerank import CrossEncoderReranker
from ragbook.result import with_history

BAR = 0.25


def paragraph(text: str, start: int, end: int) -> str:
    """The blank-line block of ``text`` that holds ``text[start:end]``."""
    a, z = text.rfind("\n\n", 0, start), text.find("\n\n", end)
    return text[0 if a < 0 else a + 2:len(text) if z < 0 else z].strip()


def candidates(name: str, reader, e5, reranker=None) -> list[dict]:
    """Per dev question: answerable or not, and its candidate units with their scores."""
    ds, docs = corpus(name)
    retriever = HybridRetriever(DenseIndex(), BM25Index()).build(
        chunk_documents(docs, size=256, overlap=32))
    pipeline = Pipeline(retriever, reranker=reranker, reader=reader)
    rows = []
    for q in ds.split(SPLITS[name]["dev"]):
        prep = pipeline.prepare(*with_history(q))
        hits = list(prep.candidates)
        spans = reader.hits_spans(prep.condensed, hits) if hits else []
        units = [(h, s) for h, found in zip(hits, spans, strict=True) for s in found]
        golds = [a["text"] for a in q.answers]
        e5_scores = ((e5.encode_passages([s.text for _, s in units])
                      @ e5.encode_queries([prep.condensed])[0]).tolist() if units else [])
        gold = [bool(q.gold) and h.doc_id in q.gold for h, _ in units]
        paras = [paragraph(h.text, s.start, s.end) for h, s in units]
        rows.append({"answerable": bool(q.gold), "units": [
            {"shipped": s.score, "e5": x, "rank": h.rank,
             "right": g and any(key_fact(s.text, a) for a in golds),
             "paragraph right": g and any(key_fact(p, a) for a in golds)}
            for (h, s), x, g, p in zip(units, e5_scores, gold, paras, strict=True)]})
    return rows


def measure(rows, scorer, top_only=False, judged="right") -> tuple[float, float, float]:
    """(picked right, oracle, max coverage at delivered error <= BAR) for one scorer; the
    pick among the top-ranked passage's units only with ``top_only``, judged by its own text
    (``"right"``) or by its paragraph's (``"paragraph right"``)."""
    picks = []
    for r in rows:
        units = [u for u in r["units"] if u["rank"] == 1] if top_only else r["units"]
        if units:
            best = max(units, key=scorer)
            picks.append((r["answerable"], best[judged], scorer(best)))
    n = sum(r["answerable"] for r in rows)
    order = sorted(picks, key=lambda p: -p[2])
    coverage = 0.0
    for t in range(1, len(order) + 1):
        if np.mean([not right for _, right, _ in order[:t]]) <= BAR:
            coverage = max(coverage, sum(a for a, _, _ in order[:t]) / n)
    oracle = sum(any(u["right"] for u in r["units"]) for r in rows if r["answerable"]) / n
    return sum(right for a, right, _ in picks if a) / n, oracle, coverage


# (label, top_only, judged): which unit is the answer, and how much of its text is delivered
PICKERS = [("best unit read", False, "right"), ("its paragraph", False, "paragraph right"),
           ("top passage's best unit", True, "right"),
           ("top passage's best unit's paragraph", True, "paragraph right")]
SCORERS = {"shipped (MiniLM cosine + 0.05/rank)": lambda u: u["shipped"],
           "e5-small query/passage cosine": lambda u: u["e5"],
           "shipped + e5": lambda u: u["shipped"] + u["e5"]}


def main():
    reader = default_extractive_reader(min_span_score=None)
    e5 = Encoder("prefix_encoder", show_progress=False)
    print(f"profile {models.active_profile()}, dev splits; reader {reader}")
    print(f"| set (dev) | scorer | picked right | oracle | max coverage at delivered error "
          f"≤ {BAR:.0%} |\n|---|---|---|---|---|")
    picked_rows = []
    for name in SPLITS:
        t = time.perf_counter()
        rows = candidates(name, reader, e5)
        for label, scorer in SCORERS.items():
            picked, oracle, coverage = measure(rows, scorer)
            print(f"| {name} ({SPLITS[name]['dev']}) | {label} | {picked:.3f} | {oracle:.3f} "
                  f"| {coverage:.3f} |")
        shipped = SCORERS["shipped (MiniLM cosine + 0.05/rank)"]
        for second, found in (("hybrid", rows),
                              ("hybrid + MaxSim", candidates(name, reader, e5,
                                                             CrossEncoderReranker()))):
            for label, top_only, judged in PICKERS:
                picked, _, coverage = measure(found, shipped, top_only, judged)
                picked_rows.append(f"| {name} ({SPLITS[name]['dev']}) | {second} | {label} "
                                   f"| {picked:.3f} | {coverage:.3f} |")
        print(f"<!-- {name}: {time.perf_counter() - t:.0f} s -->")
    print(f"\n| set (dev) | retrieval | answer (shipped score) | picked right | max coverage at "
          f"delivered error ≤ {BAR:.0%} |\n|---|---|---|---|---|")
    print("\n".join(picked_rows))


if __name__ == "__main__":
    main()
