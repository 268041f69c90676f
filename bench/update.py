"""Updating 10 changed documents in a 10,000-section hybrid index vs rebuilding it.

Corpus: the first 10,000 Python-docs sections (``load_pydocs``), one item each, indexed by a
``HybridRetriever`` (dense: the offline encoder on the in-process flat store; BM25). The
change: 10 sections (seeded choice) get a sentence appended, so their new texts must be
embedded for real (an encoder with its cache off embeds them; the other 9,990 vectors come
from the embedding cache, as ``ragbook index`` finds them after a first build).

Timed, median of ``--repeat`` runs, each on a fresh index:

* update: ``HybridRetriever.update(upsert=the 10)`` — in all, and per channel
  (``BM25Index.update``; ``DenseIndex.update`` = embed 10 + store delete/add);
* rebuild: ``HybridRetriever.build`` on the final 10,000 — BM25 build, dense build, and the
  embedding a rebuild needs (9,990 from the cache + the 10 changed embedded);
* a rebuild without the cache: the embedding time per section measured on ``--sample``
  sections with the cache off, times 10,000 (an extrapolation, said so in the table);
* on disk, once: load + update + save vs rebuild + save (what ``ragbook index`` does).

It also checks that the update equals the rebuild (corpus fingerprint; hits and scores on
the Python FAQ questions).

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/update.py
"""
import argparse
import dataclasses
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from ragbook import Encoder
from ragbook.bm25 import BM25Index
from ragbook.datasets import load_pydocs
from ragbook.dense import DenseIndex
from ragbook.fusion import HybridRetriever


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10_000, help="sections indexed")
    ap.add_argument("--changed", type=int, default=10, help="sections changed")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sample", type=int, default=200,
                    help="sections embedded with the cache off to estimate a cold rebuild")
    args = ap.parse_args()

    pydocs = load_pydocs()
    docs = list(pydocs.documents)[:args.size]
    cached, cold = Encoder(), Encoder(cache=False)
    t_lookup, vectors = timed(lambda: cached.encode_passages([d.text for d in docs]))
    print(f"{len(docs)} sections; {cached.cache_hits} vectors from the cache in {t_lookup:.1f} s "
          f"({cached.cache_misses} embedded)")
    position = {d.id: n for n, d in enumerate(docs)}
    picked = random.Random(0).sample(range(len(docs)), args.changed)
    changed = [dataclasses.replace(docs[n], text=docs[n].text + f"\n\nChanged in update {n}: "
                                   f"this section now also covers release {3 + n % 9}.{n}.")
               for n in picked]
    gone = {d.id for d in changed}
    final = [d for d in docs if d.id not in gone] + changed
    kept_vectors = vectors[[position[d.id] for d in final[:-len(changed)]]]

    def fresh():
        return HybridRetriever(DenseIndex(cold), BM25Index()).build(docs, vectors=vectors)

    rows: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        hybrid = fresh()
        rows.setdefault("update: both channels (HybridRetriever.update)", []).append(
            timed(lambda h=hybrid: h.update(upsert=changed))[0])
        bm25 = BM25Index().build(docs)
        rows.setdefault("  BM25 channel (BM25Index.update)", []).append(
            timed(lambda b=bm25: b.update(upsert=changed))[0])
        dense = DenseIndex(cold).build(docs, vectors=vectors)
        rows.setdefault("  dense channel (DenseIndex.update: embed 10 + delete/add)",
                        []).append(timed(lambda d=dense: d.update(upsert=changed))[0])

        t_embed, new = timed(lambda: np.vstack([
            cached.encode_passages([d.text for d in final[:-len(changed)]]),
            cold.encode_passages([d.text for d in changed])]))
        t_bm25, rebuilt_bm25 = timed(lambda: BM25Index().build(final))
        t_dense, rebuilt_dense = timed(lambda v=new: DenseIndex(cold).build(final, vectors=v))
        rows.setdefault("rebuild: both channels, embeddings from the cache", []).append(
            t_embed + t_bm25 + t_dense)
        rows.setdefault("  BM25 channel (BM25Index.build)", []).append(t_bm25)
        rows.setdefault("  dense channel (DenseIndex.build, vectors given)", []).append(t_dense)
        rows.setdefault(f"  embedding ({len(final) - len(changed):,} from the cache + "
                        f"{len(changed)} embedded)", []).append(t_embed)
    np.testing.assert_allclose(kept_vectors, new[:-len(changed)])

    # equality with the rebuild
    rebuilt = HybridRetriever(rebuilt_dense, rebuilt_bm25)
    assert hybrid.corpus_fingerprint == rebuilt.corpus_fingerprint
    worst = {"bm25": 0.0, "dense": 0.0}
    questions = [q.text for q in pydocs.questions][:50]
    for q in questions:
        for name, (a, b) in zip(("dense", "bm25"), zip(hybrid.channels(q), rebuilt.channels(q),
                                                       strict=True), strict=True):
            assert [h.id for h in a] == [h.id for h in b], (q, name)
            worst[name] = max(worst[name], max((abs(x.score - y.score)
                                                for x, y in zip(a, b, strict=True)), default=0))
        assert [h.id for h in hybrid.search(q)] == [h.id for h in rebuilt.search(q)]

    t_sample, _ = timed(lambda: cold.encode_passages([d.text for d in docs[:args.sample]]))
    cold_rebuild = t_sample / args.sample * len(docs)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index"
        t_full, _ = timed(lambda: HybridRetriever(DenseIndex(cold), BM25Index()).build(
            final, vectors=np.vstack([
                cached.encode_passages([d.text for d in final[:-len(changed)]]),
                cold.encode_passages([d.text for d in changed])])).save(path))
        fresh().save(path)
        t_disk, _ = timed(lambda: HybridRetriever.load(path, encoder=cold).update(
            upsert=changed).save(path))

    print(f"\n{args.changed} changed sections in a {len(docs):,}-section index "
          f"(median of {args.repeat}; seconds)")
    print(f"{'':66s} {'s':>8s}")
    for name, times in rows.items():
        print(f"{name:66s} {statistics.median(times):8.3f}")
    cold_name = f"rebuild, every section embedded (extrapolated from {args.sample})"
    print(f"{cold_name:66s} "
          f"{cold_rebuild + statistics.median(rows['  BM25 channel (BM25Index.build)']):8.1f}")
    print(f"{'on disk: load + update + save':66s} {t_disk:8.3f}")
    print(f"{'on disk: rebuild (embeddings as above) + save':66s} {t_full:8.3f}")
    print(f"\nupdate == rebuild on {len(questions)} FAQ questions: same hits; largest score "
          f"difference BM25 {worst['bm25']:.1e}, dense {worst['dense']:.1e}; same corpus "
          f"fingerprint")


if __name__ == "__main__":
    main()
