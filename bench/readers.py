"""Which offline span reader earns its place? EM / F1 / no-answer accuracy on the reader
sets' test split, each reader's abstention threshold calibrated on dev; CPU time per answer
with nothing cached, median over 60 test questions.

Readers: the MiniLM QA head fine-tuned by ragbook.train on the train split; a simple honest
baseline (the context sentence most similar to the question under the bi-encoder); and
"always abstain" (what the unanswerable share alone is worth).

    .venv/bin/python bench/readers.py
"""
import time

import numpy as np

from ragbook import Encoder
from ragbook.datasets import load_reader_set
from ragbook.evaluate import bootstrap_ci, exact_match, f1_score
from ragbook.readers import ExtractiveReader, SentenceReader
from ragbook.train import train_span_reader


def best_candidate(reader, ex):
    """The reader's best span for one example, with its score (thresholds come later)."""
    spans = reader.spans(ex.question, ex.context)
    best = max(spans, key=lambda s: s.score)
    return best.text, best.score


def scored(examples, predict):
    out, times = [], []
    for ex in examples:
        t = time.perf_counter()
        out.append(predict(ex))
        times.append(time.perf_counter() - t)
    return out, float(np.median(times))


def calibrate(examples, preds):
    """The score threshold that maximises mean F1 (abstain below it) on these examples."""
    candidates = sorted({s for _, s in preds}) + [float("inf")]
    golds = [[a for a, _ in ex.answers] for ex in examples]

    def f1_at(th):
        return np.mean([f1_score(t if s >= th else None, g)
                        for (t, s), g in zip(preds, golds, strict=True)])

    return max(candidates, key=f1_at)


def report(name, examples, preds, threshold, latency):
    golds = [[a for a, _ in ex.answers] for ex in examples]
    final = [t if s >= threshold else None for t, s in preds]
    em = [exact_match(p, g) for p, g in zip(final, golds, strict=True)]
    f1 = [f1_score(p, g) for p, g in zip(final, golds, strict=True)]
    has = [f for f, g in zip(f1, golds, strict=True) if g]
    noans = [float(p is None) for p, g in zip(final, golds, strict=True) if not g]
    m_em, lo_em, hi_em = bootstrap_ci(em)
    m_f1, lo_f1, hi_f1 = bootstrap_ci(f1)
    print(f"{name:26s} {m_em:.3f} [{lo_em:.3f}, {hi_em:.3f}]  "
          f"{m_f1:.3f} [{lo_f1:.3f}, {hi_f1:.3f}]  "
          f"{np.mean(has):7.3f} {np.mean(noans):9.3f} {threshold:9.3f} {latency * 1e3:8.1f}")


if __name__ == "__main__":
    dev, test = load_reader_set("all", "dev"), load_reader_set("all", "test")
    print(f"dev {len(dev)} ({sum(e.is_impossible for e in dev)} unanswerable), "
          f"test {len(test)} ({sum(e.is_impossible for e in test)} unanswerable)")
    t = time.perf_counter()
    path = train_span_reader()
    print(f"span reader: {path.name} (built or loaded in {time.perf_counter() - t:.0f} s)")
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    qa = ExtractiveReader((AutoModelForQuestionAnswering.from_pretrained(path).eval(),
                           AutoTokenizer.from_pretrained(path)), max_length=256, overlap=64)
    sentences = SentenceReader(Encoder())
    print(f"\n{'reader':26s} {'EM [95% CI]':>20s}  {'F1 [95% CI]':>20s}  "
          f"{'HasAns F1':>7s} {'NoAns acc':>9s} "
          f"{'threshold':>9s} {'ms/answer':>8s}")
    # Latency is timed separately with nothing cached: SentenceReader's embeddings would
    # otherwise come back from ragbook's on-disk cache.
    uncached = {"fine-tuned MiniLM QA head": qa,
                "best sentence (SentenceReader)": SentenceReader(Encoder(cache=False,
                                                                          show_progress=False))}
    for name, reader in (("fine-tuned MiniLM QA head", qa),
                         ("best sentence (SentenceReader)", sentences)):
        fn = lambda ex, r=reader: best_candidate(r, ex)  # noqa: E731
        dev_preds, _ = scored(dev, fn)
        test_preds, _ = scored(test, fn)
        _, latency = scored(test[:60], lambda ex, r=uncached[name]: best_candidate(r, ex))
        report(name, test, test_preds, calibrate(dev, dev_preds), latency)
    report("always abstain", test, [("", 0.0)] * len(test), float("inf"), 0.0)
