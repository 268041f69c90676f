"""fp32 vs bf16 (vs torch's dynamic int8) for the encoder: throughput, and what it costs in recall.

Same process, same model object, same texts, torch's default threads, cache off for the
throughput rows. Throughput: 1,000 Python-docs chunks (256 tokens, 32 overlap), the Encoder's
batch size (32 when docs/benchmarks.md recorded it, 16 since), the variants interleaved
(fp32, bf16, int8, int8, bf16, fp32), best of 2 each:

* ``fp32``: ``Encoder()`` — the reference;
* ``bf16``: ``Encoder(precision="bf16")`` — torch autocast, bfloat16 matrix products (fast
  only on a CPU with AMX or AVX512-BF16, or a GPU: ``models.bf16_supported()``);
* ``int8``: torch's dynamic int8 quantisation of every ``nn.Linear`` (``quantize_dynamic``,
  deprecated in torch 2.10+) on a copy of the model — measured as the alternative, not offered.

Quality: dense retrieval (flat, exact) on both test splits — help-centre chunks (256/32) and
Python-docs sections — with fp32 and bf16 vectors (the bf16 ones cached in their own file):
recall@10 and MRR@10 (document level) with 95% bootstrap intervals, the paired difference
bf16 − fp32 with its interval, and the mean overlap of the two top-10 document lists. Also the
cosine between each chunk's fp32 and reduced-precision vector.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/precision.py
"""
from __future__ import annotations

import copy
import time
import warnings

import numpy as np
import torch
from encoder import pydocs_chunks  # bench/ is on sys.path when a bench script runs

from ragbook import Encoder, models
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import bootstrap_ci, paired_bootstrap, per_query, retrieve_run


def throughput(n_chunks: int = 1000) -> None:
    texts = pydocs_chunks(n_chunks)
    fp32, bf16 = Encoder(cache=False), Encoder(cache=False, precision="bf16")
    int8 = copy.deepcopy(fp32.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.ao.quantization.quantize_dynamic(int8, {torch.nn.Linear}, dtype=torch.qint8,
                                               inplace=True)
    ways = {"fp32": fp32.encode_passages, "bf16": bf16.encode_passages,
            "int8": lambda ts: np.asarray(int8.encode(ts, batch_size=fp32.batch_size,
                                                       normalize_embeddings=True))}
    for f in ways.values():  # warm-up
        f(texts[:32])
    best: dict[str, float] = {}
    vecs: dict[str, np.ndarray] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # truncation of the few over-long chunks
        for name in ("fp32", "bf16", "int8", "int8", "bf16", "fp32"):
            t = time.perf_counter()
            vecs[name] = ways[name](texts)
            best[name] = min(best.get(name, np.inf), time.perf_counter() - t)
    print(f"## Throughput: {len(texts)} Python-docs chunks, batch {fp32.batch_size}, torch threads "
          f"{torch.get_num_threads()}, bf16 units: {models.bf16_supported()}, best of 2\n")
    print("| precision | chunks/s | ÷ fp32 | cosine to fp32: min | mean |")
    print("|---|---|---|---|---|")
    for name in ("fp32", "bf16", "int8"):
        cos = (vecs[name] * vecs["fp32"]).sum(1)
        print(f"| {name} | {len(texts) / best[name]:.1f} | {best['fp32'] / best[name]:.2f}x | "
              f"{cos.min():.5f} | {cos.mean():.5f} |")


def quality() -> None:
    hc, py = load_helpcentre(), load_pydocs()
    sets = [("help centre (chunks 256/32)", hc, chunk_documents(hc.documents, size=256,
                                                                 overlap=32)),
            ("Python docs (sections)", py, py.documents)]
    print("\n## Quality: dense retrieval, test splits, document level, 95% bootstrap CIs\n")
    print("| test set | questions | precision | recall@10 | MRR@10 | Δ recall@10 vs fp32 | "
          "Δ MRR@10 vs fp32 | top-10 overlap |")
    print("|---|---|---|---|---|---|---|---|")
    for name, ds, items in sets:
        qrels = ds.qrels("test")
        questions = [(q.id, q.text) for q in ds.split("test") if q.id in qrels]
        runs = {}
        for precision in ("fp32", "bf16"):
            index = DenseIndex(Encoder(precision=precision)).build(items)
            runs[precision] = retrieve_run(index, questions, k=10)
        base = {m: per_query(qrels, runs["fp32"], m) for m in ("recall@10", "mrr@10")}
        overlap = np.mean([len(set(runs["fp32"][q]) & set(runs["bf16"][q]))
                           / max(1, len(runs["fp32"][q])) for q, _ in questions])
        for precision, run in runs.items():
            vals = {m: per_query(qrels, run, m) for m in base}
            cells = [f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"
                     for mean, lo, hi in (bootstrap_ci(list(v.values())) for v in vals.values())]
            deltas = (["—", "—", "—"] if precision == "fp32" else
                      [f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"
                       for d, lo, hi in (paired_bootstrap(base[m], vals[m]) for m in base)]
                      + [f"{overlap:.3f}"])
            print(f"| {name} | {len(questions)} | {precision} | {' | '.join(cells)} | "
                  f"{' | '.join(deltas)} |")


if __name__ == "__main__":
    print(models.banner())
    warnings.filterwarnings("ignore", message=".*longer than this encoder's max_length")
    throughput()
    quality()
