"""Milvus (Lite, embedded) vs ragbook's own retrievers: equivalence, then scale, then sizing.

1. Equivalence on the help centre (430 chunks, 299 questions; hybrid recall on the 73 test
   questions with gold) and the Python docs (10,370 sections, 175 FAQ questions; recall on
   the 90 test questions): dense top-10 overlap with the exact DenseIndex, BM25 rank
   correlation (Spearman's rho over the union of both top 10s) and top-10 overlap with
   BM25Index under two analyzers, hybrid recall@10 with 95% bootstrap CIs and the paired
   difference.
2. Scale: 10,370 and 100,000 vectors (the Python-docs embeddings; 100k = each repeated with
   Gaussian noise, renormalised, texts repeated), DenseIndex flat / HNSW vs Milvus Lite FLAT /
   HNSW (the same DenseIndex on FaissStore or MilvusStore): build seconds (default threads),
   single-query latency over the 175 FAQ query vectors on one thread (k = 10, Hits with
   their records: DenseIndex.search_vector, on Milvus a search then a get), ratios to
   DenseIndex flat, peak RSS.
   Each configuration runs in a fresh process, so its peak RSS is its own.
3. Sizing on paper for 10M and 100M chunks (ragbook.scaling.sizing).

    .venv/bin/python bench/milvus.py              # all three (about 10 minutes on 2 cores)
    .venv/bin/python bench/milvus.py --skip-scale # 1 and 3 only
"""
import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, retrieve_run
from ragbook.fusion import HybridRetriever
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.scaling.compare import overlap_at_k, rank_correlation
from ragbook.scaling.sizing import bytes_per_vector, hnsw_graph_bytes, shards_needed
from ragbook.stores import DEFAULT_ANALYZER, MILVUS_STANDARD, FaissStore, MilvusStore
from ragbook.types import Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


def ci(values):
    m, lo, hi = bootstrap_ci(list(values))
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def ids(hits):
    return [h.id for h in hits]


# -- 1. equivalence ----------------------------------------------------------------------------
def equivalence(name, items, questions, test_qs, qrels, encoder):
    t = time.perf_counter()
    ours = HybridRetriever(DenseIndex(encoder), BM25Index()).build(items)
    ours_s = time.perf_counter() - t
    t = time.perf_counter()
    milvus = MilvusRetriever(encoder).build(items)
    milvus_s = time.perf_counter() - t
    print(f"\n## {name}: {len(items):,} items, {len(questions)} questions "
          f"(build: ours {ours_s:.1f} s, Milvus Lite {milvus_s:.1f} s, vectors from the cache)")
    assert milvus.corpus_fingerprint == ours.corpus_fingerprint
    dense = milvus.with_mode("dense")
    ov = [overlap_at_k(ids(ours.dense.search(q, 10)), ids(dense.search(q, 10)), 10)
          for q in questions]
    print(f"dense overlap@10, Milvus FLAT vs DenseIndex flat: {ci(ov)} "
          f"(min {min(ov):.1f}; {sum(o < 1 for o in ov)} of {len(ov)} queries below 1)")
    ours_bm25 = [ids(ours.bm25.search(q, 50)) for q in questions]
    for label, analyzer in (("standard + lowercase", MILVUS_STANDARD),
                            ("+ ragbook's stopwords (default)", DEFAULT_ANALYZER)):
        bm = (MilvusRetriever(encoder, MilvusStore(analyzer=analyzer), mode="bm25")
              .build(items, vectors=np.asarray([[1.0] + [0.0] * (encoder.dim - 1)] * len(items),
                                               dtype=np.float32)))
        theirs = [ids(bm.search(q, 50)) for q in questions]
        bm.close()
        rho = [rank_correlation(a, b, 10) for a, b in zip(ours_bm25, theirs, strict=True)]
        ovb = [overlap_at_k(a, b, 10) for a, b in zip(ours_bm25, theirs, strict=True)]
        print(f"BM25 vs BM25Index, analyzer {label}: Spearman rho {ci(rho)}, "
              f"overlap@10 {ci(ovb)}")
    a = per_query(qrels, retrieve_run(ours, test_qs, k=10), "recall@10")
    b = per_query(qrels, retrieve_run(milvus, test_qs, k=10), "recall@10")
    d, lo, hi = paired_bootstrap(a, b)
    print(f"hybrid recall@10 on {len(a)} test questions: HybridRetriever {ci(a.values())}, "
          f"Milvus hybrid_search + RRFRanker(60) {ci(b.values())}; "
          f"Milvus - ours {d:+.3f} [{lo:+.3f}, {hi:+.3f}]")
    milvus.close()


# -- 2. scale (each configuration in its own process) ------------------------------------------
def peak_rss_mib():
    """This process's peak resident memory. ru_maxrss is inherited from the parent across
    fork + exec on Linux, so read the kernel's per-address-space high-water mark instead."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale_one(kind, n, data):
    vectors = np.load(os.path.join(data, "vectors.npy"), mmap_mode="r")[:n].copy()
    queries = np.load(os.path.join(data, "queries.npy"))
    docs = load_pydocs().documents
    items = [Document(id=f"{docs[i % len(docs)].id}~{i}", text=docs[i % len(docs)].text)
             for i in range(n)]
    rss0 = peak_rss_mib()
    encoder = Encoder()
    t = time.perf_counter()
    hnsw = "HNSW" in kind
    if kind.startswith("DenseIndex"):
        store = FaissStore(kind="hnsw" if hnsw else "flat", ef_search=64)
    else:
        store = MilvusStore(index="HNSW" if hnsw else "FLAT", ef_search=64, hnsw_m=32,
                            ef_construction=80)
    index = DenseIndex(encoder, store).build(items, vectors=vectors)

    def search(q):
        return index.search_vector(q, 10)
    build = time.perf_counter() - t
    times = []
    with threadpool_limits(limits=1):  # one core per query: robust to other load
        for _ in range(3):
            for q in queries:
                t = time.perf_counter()
                search(q)
                times.append(time.perf_counter() - t)
    tops = [[h.id for h in search(q)] for q in queries]
    rss = peak_rss_mib()
    print(json.dumps({"kind": kind, "n": n, "build": build, "p50": np.percentile(times, 50) * 1e3,
                      "p95": np.percentile(times, 95) * 1e3, "rss": rss, "rss_data": rss0,
                      "tops": tops}))


def scale(encoder):
    py = load_pydocs()
    vectors = encoder.encode_passages([d.text for d in py.documents])
    queries = encoder.encode_queries([q.text for q in py.questions])
    rng = np.random.default_rng(0)
    reps = -(-100_000 // len(vectors))
    big = np.concatenate([vectors] + [vectors + rng.normal(scale=0.02, size=vectors.shape)
                                      .astype(np.float32) for _ in range(reps - 1)])[:100_000]
    big /= np.linalg.norm(big, axis=1, keepdims=True)
    kinds = ["DenseIndex flat", "DenseIndex HNSW", "Milvus Lite FLAT", "Milvus Lite HNSW"]
    with tempfile.TemporaryDirectory() as data:
        np.save(os.path.join(data, "vectors.npy"), big.astype(np.float32))
        np.save(os.path.join(data, "queries.npy"), queries)
        for n in (len(vectors), 100_000):
            rows = []
            for kind in kinds:
                out = subprocess.run([sys.executable, __file__, "--scale-one", kind, str(n), data],
                                     capture_output=True, text=True, check=True).stdout
                rows.append(json.loads(out.strip().splitlines()[-1]))
            base, exact = rows[0], rows[0]["tops"]
            print(f"\n{n:,} vectors x 384, {len(queries)} queries x 3, k = 10, one at a time")
            print(f"{'index':18s} {'build s':>8s} {'p50 ms':>7s} {'p95 ms':>7s} {'p50 ratio':>9s} "
                  f"{'overlap@10':>10s} {'peak RSS MiB':>12s} {'(data loaded)':>13s}")
            for r in rows:
                ov = np.mean([overlap_at_k(a, b, 10) for a, b in zip(exact, r["tops"],
                                                                     strict=True)])
                print(f"{r['kind']:18s} {r['build']:8.2f} {r['p50']:7.2f} {r['p95']:7.2f} "
                      f"{r['p50'] / base['p50']:8.1f}x {ov:10.3f} {r['rss']:12.0f} "
                      f"{r['rss_data']:13.0f}")


# -- 3. sizing on paper ----------------------------------------------------------------------------
def sizing(dim=384, m=16, node_gib=64, replicas=2):
    print(f"\n## Sizing, {dim}-d vectors only (text, metadata and BM25 memory-mapped or on "
          f"disk; notebook 11 adds them), HNSW M={m}, {node_gib} GiB query nodes filled to 70%, "
          f"{replicas} replicas")
    node = node_gib * 2**30
    graph = hnsw_graph_bytes(m)
    rows = [("HNSW, float32", bytes_per_vector(dim) + graph),
            ("HNSW_SQ8 (int8)", bytes_per_vector(dim, "int8") + graph),
            ("IVF_PQ (m=48, + 8 B id)", bytes_per_vector(dim, "pq", 48) + 8),
            ("DiskANN (PQ codes in RAM)", bytes_per_vector(dim) / 8)]
    print(f"{'index':28s} {'B/vector':>9s} " + " ".join(
        f"{f'{n // 10**6}M GiB':>9s} {'nodes':>5s}" for n in (10**7, 10**8)))
    for label, per in rows:
        cells = []
        for n in (10**7, 10**8):
            total = n * per
            cells.append(f"{total / 2**30:9.1f} {shards_needed(total, node) * replicas:5d}")
        print(f"{label:28s} {per:9.1f} " + " ".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--scale-one", nargs=3, metavar=("KIND", "N", "DATA"))
    args = ap.parse_args()
    if args.scale_one:
        kind, n, data = args.scale_one
        return scale_one(kind, int(n), data)
    encoder = Encoder()
    print(f"encoder: {encoder.fingerprint}")
    hc = load_helpcentre()
    equivalence("help centre", chunk_documents(hc.documents, size=256, overlap=32),
                [q.standalone for q in hc.questions],
                [(q.id, q.standalone) for q in hc.split("test") if q.gold], hc.qrels("test"),
                encoder)
    py = load_pydocs()
    equivalence("Python docs", py.documents, [q.text for q in py.questions],
                [(q.id, q.text) for q in py.split("test")], py.qrels("test"), encoder)
    if not args.skip_scale:
        scale(encoder)
    sizing()


if __name__ == "__main__":
    main()
