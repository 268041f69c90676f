"""ragbook BM25Index vs bm25s vs rank_bm25: build time and query throughput.

Same machine, same run, same tokenization (ragbook's Tokenizer output is handed to all
three), same k1 = 1.2 and b = 0.75, top 10 per query; every query is tokenised inside the timed
loop for all three (a query arrives as text). bm25s uses its "lucene" method
(identical scores); rank_bm25's BM25Okapi has a different IDF, so only its speed compares.
Corpora: the Python docs (10,370 sections, FAQ questions as queries) and 12,000 generated
tickets (help-centre questions as queries).

    .venv/bin/python bench/bm25.py
"""
import time

import numpy as np

from ragbook.bm25 import BM25Index
from ragbook.datasets import generate_tickets, load_helpcentre, load_pydocs


def bench(name, docs, queries, rank_bm25_queries=30):
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
    okapi = BM25Okapi(corpus, k1=1.2, b=0.75)
    b_okapi = time.perf_counter() - t + t_tok
    t = time.perf_counter()
    for q in queries[:rank_bm25_queries]:
        scores = okapi.get_scores(tok(q))
        np.argpartition(-scores, 10)[:10]
    rows.append(("rank_bm25 (BM25Okapi)", b_okapi, rank_bm25_queries / (time.perf_counter() - t)))

    print(f"\n{name}: {len(docs):,} documents, {len(queries)} queries "
          f"(rank_bm25: first {rank_bm25_queries})")
    print(f"{'implementation':24s} {'build s':>8s} {'queries/s':>10s} {'ours vs it (q/s)':>17s}")
    for label, b, qps in rows:
        print(f"{label:24s} {b:8.2f} {qps:10.1f} {rows[0][2] / qps:16.2f}x")
    print("(build times include tokenising the corpus for all three)")


if __name__ == "__main__":
    py = load_pydocs()
    bench("python docs", list(py.documents), [q.text for q in py.questions])
    bench("12,000 generated tickets", generate_tickets(12_000, seed=0),
          [q.standalone for q in load_helpcentre().questions])
