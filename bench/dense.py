"""DenseIndex vs raw FAISS vs numpy brute force: build time and single-query latency.

Same vectors, same queries, same run. Corpora: the Python docs (10,370 sections embedded
with the offline encoder, from the embedding cache) and 100,000 vectors made by repeating
those embeddings with small Gaussian noise (renormalised) — a size, not a quality, test.
Queries: the 175 Python FAQ questions, one at a time (how a service sees them).

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/dense.py
"""
import time

import numpy as np

from ragbook import Encoder
from ragbook.datasets import load_pydocs
from ragbook.dense import DenseIndex
from ragbook.stores import FaissStore
from ragbook.types import Document


def timed(fn, repeat=1):
    t = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    return (time.perf_counter() - t) / repeat, out


def latencies(search, queries, rounds=3):
    times = []
    for _ in range(rounds):
        for q in queries:
            t = time.perf_counter()
            search(q)
            times.append(time.perf_counter() - t)
    return np.percentile(times, 50) * 1e3, np.percentile(times, 95) * 1e3


def run(name, vectors, items, queries, encoder, k=10):
    import faiss

    rows = []
    # numpy: the matrix is the index
    build, matrix = timed(lambda: np.ascontiguousarray(vectors, dtype=np.float32))

    def np_search(q):
        s = matrix @ q
        top = np.argpartition(-s, k)[:k]
        return top[np.argsort(-s[top])]

    rows.append(("numpy brute force", build, *latencies(np_search, queries)))

    def faiss_build():
        idx = faiss.IndexFlatIP(vectors.shape[1])
        idx.add(matrix)
        return idx

    build, flat = timed(faiss_build)
    rows.append(("raw FAISS IndexFlatIP", build,
                 *latencies(lambda q: flat.search(q[None], k), queries)))
    build, ours = timed(lambda: DenseIndex(encoder).build(items, vectors=matrix))
    rows.append(("ragbook DenseIndex", build,
                 *latencies(lambda q: ours.search_vector(q, k), queries)))
    build, hnsw = timed(lambda: DenseIndex(encoder, FaissStore(kind="hnsw", ef_search=64))
                        .build(items, vectors=matrix))
    rows.append(("ragbook DenseIndex hnsw", build,
                 *latencies(lambda q: hnsw.search_vector(q, k), queries)))
    exact = [set(ours.search_vector(q, k)[i].id for i in range(k)) for q in queries]
    approx = [set(h.id for h in hnsw.search_vector(q, k)) for q in queries]
    overlap = np.mean([len(a & b) / k for a, b in zip(exact, approx, strict=True)])

    best = min(rows[0][2], rows[1][2])  # the faster raw exact search: the peer
    print(f"\n{name}: {len(items):,} vectors x {vectors.shape[1]} dims, "
          f"{len(queries)} queries x 3, k={k}")
    print(f"{'index':26s} {'build s':>9s} {'p50 ms':>8s} {'p95 ms':>8s} {'p50 / faster raw':>17s}")
    for label, b, p50, p95 in rows:
        print(f"{label:26s} {b:9.3f} {p50:8.3f} {p95:8.3f} {p50 / best:16.2f}x")
    print(f"hnsw (ef_search=64) overlap@10 with exact: {overlap:.3f}; goal: DenseIndex flat "
          f"<= 1.1x the faster of numpy and raw FAISS: "
          f"{'met' if rows[2][2] <= 1.1 * best else 'NOT met'}")


if __name__ == "__main__":
    py = load_pydocs()
    encoder = Encoder(show_progress=True)
    vectors = encoder.encode_passages([d.text for d in py.documents])
    queries = encoder.encode_queries([q.text for q in py.questions])
    print(f"encoder: {encoder.fingerprint}; faiss threads: default")
    run("python docs", vectors, list(py.documents), queries, encoder)

    rng = np.random.default_rng(0)
    reps = -(-100_000 // len(vectors))
    big = np.concatenate([vectors + rng.normal(scale=0.02, size=vectors.shape).astype(np.float32)
                          for _ in range(reps)])[:100_000]
    big /= np.linalg.norm(big, axis=1, keepdims=True)
    items = [Document(id=f"v{i}", text=f"vector {i}") for i in range(len(big))]
    run("100k vectors (python-docs embeddings + noise)", big, items, queries, encoder)
