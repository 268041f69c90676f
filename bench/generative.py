"""What does each robustness measure buy a small generative reader?

SmolLM2-135M-Instruct (offline profile) reads two-passage tasks from the help-centre reader
set (``load_reading_tasks``: the answering passage + a misleading neighbour, or two
misleading passages for unanswerable questions). Each row adds one change to the one above;
every row is measured on the *dev* tasks; the abstention threshold is calibrated on *train*.
The final reader and the baseline are then measured on the *test* tasks, next to the
extractive ``SentenceReader`` (threshold calibrated on train) on the same tasks.

    .venv/bin/python bench/generative.py [--test-sample N]

Replies are cached on disk (greedy decoding is deterministic), so a re-run is fast.
"""
import argparse
import random
import statistics
import time

import numpy as np

from ragbook import Encoder
from ragbook.datasets import load_reading_tasks
from ragbook.evaluate import bootstrap_ci, reading_outcome, reading_report
from ragbook.llm import LocalLLM
from ragbook.readers import (
    NOT_IN_CONTEXT,
    GenerativeReader,
    SentenceReader,
    build_messages,
    calibrate_min_span_score,
)


def run(reader, tasks, label):
    answers, t0 = [], time.perf_counter()
    reader.latencies_.clear()
    for i, task in enumerate(tasks, 1):
        answers.append(reader.read(task.question, list(task.passages)))
        if i % 20 == 0:
            print(f"  {label}: {i}/{len(tasks)} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return answers, statistics.median(reader.latencies_)


def abstention_threshold(llm, tasks):
    """The log p(NOT_IN_CONTEXT) threshold with the best balanced accuracy on ``tasks``,
    and the signal's AUC (how often an unanswerable task outscores an answerable one)."""
    lp = np.array([llm.score(build_messages(t.question, list(t.passages)), [NOT_IN_CONTEXT])[0]
                   for t in tasks])
    neg = np.array([t.gold is None for t in tasks])
    auc = np.mean([a > b for a in lp[neg] for b in lp[~neg]])

    def balanced(th):
        return ((lp[neg] > th).mean() + (lp[~neg] <= th).mean()) / 2

    th = max(sorted(lp), key=balanced)
    return float(th), float(auc), float(balanced(th))


def row(name, tasks, answers, latency):
    r = reading_report(tasks, answers)
    f1 = bootstrap_ci([reading_outcome(t, a)["f1"] for t, a in zip(tasks, answers, strict=True)])
    print(f"| {name} | {r['citations valid']:.2f} | {r['abstained (answerable)']:.2f} / "
          f"{r['abstained (unanswerable)']:.2f} | {r['answered']:.2f} | {r['right source']:.2f} | "
          f"{r['HasAns F1']:.3f} | {r['NoAns acc']:.2f} | {f1[0]:.3f} [{f1[1]:.3f}, {f1[2]:.3f}] | "
          f"{latency:.3f} |",
          flush=True)


HEADER = ("| reader | citations valid | abstained: answerable / unanswerable "
          "| delivered (answerable) | right source | HasAns F1 | NoAns acc | F1 [95% CI] "
          "| s/answer (median) |\n"
          "|---|---|---|---|---|---|---|---|---|")

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--test-sample", type=int, default=0,
                    help="measure on a seeded sample of this many test tasks")
    args = ap.parse_args()
    train, dev, test = (load_reading_tasks("helpcentre", s) for s in ("train", "dev", "test"))
    if args.test_sample:
        test = random.Random(0).sample(test, args.test_sample)
    llm = LocalLLM()
    print(f"generator: {llm.name}; tasks train {len(train)}, dev {len(dev)} "
          f"({sum(t.gold is None for t in dev)} unanswerable), test {len(test)} "
          f"({sum(t.gold is None for t in test)} unanswerable)", flush=True)
    th, auc, bal = abstention_threshold(llm, train)
    print(f"abstention threshold from train: log p(NOT_IN_CONTEXT) > {th:.2f} (AUC {auc:.3f}, "
          f"balanced accuracy {bal:.3f})", flush=True)
    gate = SentenceReader(Encoder())
    calibrate_min_span_score(gate, train)
    print(f"extractive gate (SentenceReader) threshold from train: "
          f"cosine >= {gate.min_span_score:.3f}")
    steps = [
        ("zero-shot, free-running (as asked)", dict(few_shot=False, stop=(), max_new_tokens=64,
                                                    scored_citations=False, min_support=None)),
        ("+ stop at the first blank line", dict(few_shot=False, scored_citations=False,
                                                min_support=None)),
        ("+ worked examples (few-shot)", dict(scored_citations=False, min_support=None)),
        ("+ scored citation choice", dict(scored_citations=True, min_support=None)),
        ("+ scored abstention", dict(scored_citations=True, min_support=None, abstain_logprob=th)),
        ("+ post-hoc verification (support >= 0.5)", dict(scored_citations=True,
                                                          abstain_logprob=th)),
        ("few-shot + verification, citations by support", dict()),
        ("... + extractive gate for abstention", dict(gate=gate)),
    ]
    fresh = LocalLLM(cache=False)

    def uncached(kw):
        """The same settings with nothing read from a cache (the gate re-embeds too)."""
        if kw.get("gate") is None:
            return kw
        return dict(kw, gate=SentenceReader(Encoder(cache=False, show_progress=False),
                                            min_span_score=kw["gate"].min_span_score))

    print(f"\nDev ({len(dev)} tasks; s/answer: median over the first 12 with nothing cached)"
          f"\n\n{HEADER}")
    for name, kw in steps:
        answers, _ = run(GenerativeReader(llm, keep=2, **kw), dev, name)
        _, lat = run(GenerativeReader(fresh, keep=2, **uncached(kw)), dev[:12], name + " (timing)")
        row(name, dev, answers, lat)
    final = steps[-1]

    sentences = SentenceReader(Encoder())
    calibrate_min_span_score(sentences, train)
    print(f"\nSentenceReader threshold from train: cosine >= {sentences.min_span_score:.3f}")
    print(f"\nTest ({len(test)} tasks; s/answer: median over the first 12 with nothing cached)"
          f"\n\n{HEADER}")
    timed_sentences = SentenceReader(Encoder(cache=False, show_progress=False),
                                     min_span_score=sentences.min_span_score)
    for name, reader, timed in [
            (steps[0][0], GenerativeReader(llm, keep=2, **steps[0][1]),
             GenerativeReader(fresh, keep=2, **steps[0][1])),
            (final[0], GenerativeReader(llm, keep=2, **final[1]),
             GenerativeReader(fresh, keep=2, **uncached(final[1]))),
            ("extractive SentenceReader", sentences, timed_sentences)]:
        answers, _ = run(reader, test, name)
        _, lat = run(timed, test[:12], name + " (timing)")
        row(name, test, answers, lat)
