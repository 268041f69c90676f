"""How often a generated claim's conflict check (``guards.contradicted_claim``) would fire on
honest answers, by the share of the claim's content words another page's sentence must hold
(``MIN_CONFLICT_SHARE``, shipped 0.6).

No generator is run: the claims are the answers chapter 9's extractive pipeline delivers on
the help centre (hybrid, chunks 256/32, ``detect_conflicts=False``), each checked — as a
generated claim would be — against every sentence of the other documents among its
candidates. A flag on a question of the ``conflict`` category (two pages that state
different figures on purpose) is the check doing its job; any other flag is a false
conflict that would escalate an honest answer.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/claim_conflicts.py
"""
import time

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents
from ragbook.conflicts import contradicts
from ragbook.datasets import load_helpcentre
from ragbook.pipeline import Pipeline
from ragbook.text import sentences

SHARES = (0.4, 0.5, 0.6, 0.7)


def main():
    t = time.perf_counter()
    hc = load_helpcentre()
    index = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(
        chunk_documents(hc.documents, size=256, overlap=32))
    pipe = Pipeline(index, detect_conflicts=False)
    print("| split | delivered | " + " | ".join(f"flagged at {s} (conflict category)"
                                               for s in SHARES) + " |")
    print("|---" * (2 + len(SHARES)) + "|")
    for split in ("dev", "test"):
        delivered, flagged = 0, {s: [] for s in SHARES}
        for q in hc.split(split):
            r = pipe.ask(q.text)
            if r.escalated:
                continue
            delivered += 1
            home = r.sources[0].doc_id
            others = [s for h in r.candidates if h.doc_id != home for s in sentences(h.text)]
            for share in SHARES:
                hit = next((s for s in others if contradicts(r.answer.text, s,
                                                             min_share=share)), None)
                if hit is not None:
                    flagged[share].append((q.category, r.answer.text, hit))
        print(f"| {split} | {delivered} | " + " | ".join(
            f"{len(f)} ({sum(c == 'conflict' for c, *_ in f)})" for f in flagged.values())
            + " |")
        for category, answer, other in flagged[SHARES[0]]:
            print(f"<!-- {category}: {answer[:70]!r} vs {other[:70]!r} -->")
    print(f"<!-- {time.perf_counter() - t:.0f} s -->")


if __name__ == "__main__":
    main()
