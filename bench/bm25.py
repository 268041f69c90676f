"""ragbook BM25Index vs bm25s vs rank_bm25: build time and query throughput.

Same machine, same run, same tokenization (ragbook's Tokenizer output is handed to all
three), same k1 = 1.2 and b = 0.75, top 10 per query; every query is tokenised inside the timed
loop for all three (a query arrives as text). bm25s uses its "lucene" method
(identical scores); rank_bm25's BM25Okapi has a different IDF, so only its speed compares.
Corpora: the Python docs (10,370 sections, FAQ questions as queries) and 12,000 generated
tickets (help-centre questions as queries). The second row times ragbook's ``scores`` with
bm25s's selection, i.e. the same output as bm25s's row: the difference between the first two
rows is what ranking and building ``Hit`` records costs. The peer of issue 24's goal is bm25s's
``get_scores`` + ``argpartition`` (ten unsorted positions); "bm25s retrieve, ranked" is bm25s's
own search API (ranked ids and scores), called once per query. Each corpus is measured ``--rounds``
times (5 by default); the table gives the median build time and queries/s, and ours-vs-each
ratios.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/bm25.py
"""
import argparse
import statistics
import time

import numpy as np

from ragbook.bm25 import BM25Index
from ragbook.datasets import generate_tickets, load_helpcentre, load_pydocs


def bench(docs, queries, rank_bm25_queries=30):
    """One round: [(implementation, build seconds, queries per second)], ours first."""
    import bm25s
    from rank_bm25 import BM25Okapi

    ours = BM25Index(k1=1.2, b=0.75)
    tok = ours.tokenizer
    t = time.perf_counter()
    corpus = [tok(d.text) for d in docs]
    t_tok = time.perf_counter() - t
    rows = []

    t = time.perf_counter()
    ours.build(docs)  # tokenises inside
    b_ours = time.perf_counter() - t
    t = time.perf_counter()
    for q in queries:
        ours.search(q, k=10)
    rows.append(("ragbook BM25Index", b_ours, len(queries) / (time.perf_counter() - t)))
    t = time.perf_counter()
    for q in queries:  # bm25s's output (unsorted top-10 positions), not ranked Hit records
        scores = ours.scores(q)
        np.argpartition(-scores, 10)[:10]
    rows.append(("  its scores+argpartition", b_ours, len(queries) / (time.perf_counter() - t)))

    ref = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    t = time.perf_counter()
    ref.index(corpus, show_progress=False)
    b_ref = time.perf_counter() - t + t_tok
    t = time.perf_counter()
    for q in queries:
        scores = ref.get_scores(tok(q))
        np.argpartition(-scores, 10)[:10]
    rows.append(("bm25s (lucene)", b_ref, len(queries) / (time.perf_counter() - t)))
    t = time.perf_counter()
    for q in queries:  # bm25s's own ranked search, one query a call (as a service asks)
        ref.retrieve([tok(q)], k=10, show_progress=False)
    rows.append(("  bm25s retrieve, ranked", b_ref, len(queries) / (time.perf_counter() - t)))

    t = time.perf_counter()
    okapi = BM25Okapi(corpus, k1=1.2, b=0.75)
    b_okapi = time.perf_counter() - t + t_tok
    t = time.perf_counter()
    for q in queries[:rank_bm25_queries]:
        scores = okapi.get_scores(tok(q))
        np.argpartition(-scores, 10)[:10]
    rows.append(("rank_bm25 (BM25Okapi)", b_okapi, rank_bm25_queries / (time.perf_counter() - t)))

    return rows


def report(name, docs, queries, rounds, rank_bm25_queries=30):
    """Run ``rounds`` rounds and print the medians, with ours ÷ each (>1 means ours is faster
    for queries/s, and slower for build time)."""
    runs = [bench(docs, queries, rank_bm25_queries) for _ in range(rounds)]
    med = [(label, statistics.median(r[i][1] for r in runs),
            statistics.median(r[i][2] for r in runs)) for i, (label, _, _) in enumerate(runs[0])]
    print(f"\n{name}: {len(docs):,} documents, {len(queries)} queries "
          f"(rank_bm25: first {rank_bm25_queries}); median of {rounds} rounds")
    print(f"{'implementation':24s} {'build s':>8s} {'ours/it':>8s} {'queries/s':>10s} "
          f"{'ours/it':>8s}")
    for label, b, qps in med:
        print(f"{label:24s} {b:8.2f} {med[0][1] / b:7.2f}x {qps:10.1f} {med[0][2] / qps:7.2f}x")
    like = med[1][2] / med[2][2]  # rows: ours, ours like-for-like, bm25s, bm25s retrieve
    print(f"like for like (ragbook scores + argpartition vs bm25s): {like:.2f}x queries/s")
    print("(build times include tokenising the corpus for all three; goal vs bm25s: "
          "build ours/it <= 1, queries/s ours/it >= 1)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    rounds = ap.parse_args().rounds
    py = load_pydocs()
    report("python docs", list(py.documents), [q.text for q in py.questions], rounds)
    report("12,000 generated tickets", generate_tickets(12_000, seed=0),
           [q.standalone for q in load_helpcentre().questions], rounds)
