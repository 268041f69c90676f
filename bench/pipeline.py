"""The whole pipeline's cost: index build throughput (cold and warm embedding cache) and
``Pipeline.ask`` latency per stage over the help centre's test questions, offline profile.

Goal (issue 12): p50 of ``ask`` < 300 ms on 2 cores with the extractive reader, caches warm.
The uncached ``ask`` (encoders without a cache: what a first-time question costs) is compared
with its peer, the raw model calls. Issue 24's goal: that uncached ``ask`` within 1.2x of the
sum of its raw model calls (the SentenceTransformer's ``encode`` of the query and of the
sentences the reader scores, timed on the same questions) — everything else the pipeline
does (BM25, fusion, spans, thresholds, the trace) must be cheap next to the models. The
generative reader is timed separately on a sample.

    .venv/bin/python bench/pipeline.py [--generative-sample 20]
"""
import argparse
import os
import resource
import statistics
import tempfile
import time

import numpy as np


def build(chunks, cache_dir):
    """Seconds to build dense + BM25 over ``chunks`` with the embedding cache in ``cache_dir``."""
    os.environ["RAGBOOK_CACHE"] = cache_dir
    from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever

    t = time.perf_counter()
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks)
    return time.perf_counter() - t, hybrid


def percentiles(values):
    return (float(np.percentile(values, 50)) * 1e3, float(np.percentile(values, 95)) * 1e3)


def time_questions(pipeline, questions):
    from ragbook.result import with_history

    totals, per_stage = [], {}
    for q in questions:
        t = time.perf_counter()
        r = pipeline.ask(*with_history(q))
        totals.append(time.perf_counter() - t)
        for s in r.trace:
            per_stage.setdefault(s.name, []).append(s.seconds)
    return totals, per_stage


def print_latencies(title, rows, width=24):
    """One table of p50/p95 milliseconds: ``rows`` are (label, seconds list, note)."""
    print(f"\n{title}:")
    print(f"{'':{width}s} {'p50 ms':>8s} {'p95 ms':>8s}")
    for label, values, note in rows:
        p50, p95 = percentiles(values)
        print(f"{label:{width}s} {p50:8.1f} {p95:8.1f}{note}")


def overhead(hybrid, questions):
    """Uncached ask vs the raw model calls it makes, question by question, same process."""
    from ragbook import Encoder
    from ragbook.pipeline import Pipeline
    from ragbook.result import with_history
    from ragbook.text import sentences

    cold = Encoder(cache=False, show_progress=False)
    base = Pipeline(hybrid)
    pipe = Pipeline(hybrid.with_settings(dense=hybrid.dense.with_settings(encoder=cold)),
                    reader=base.reader.with_settings(encoder=cold))
    model = cold.model                                            # the raw SentenceTransformer
    pipe.ask("warm up: load the model")
    asked, raw = [], []
    for q in questions:
        t = time.perf_counter()
        r = pipe.ask(*with_history(q))
        asked.append(time.perf_counter() - t)
        read = [s for h in r.candidates for s in sentences(h.text)
                if len(s.split()) >= pipe.reader.min_words and not s.startswith("#")]
        t = time.perf_counter()
        model.encode([cold.format_query(r.condensed)], show_progress_bar=False)
        if read:
            model.encode([cold.format_passage(s) for s in read], batch_size=cold.batch_size,
                         show_progress_bar=False)
        raw.append(time.perf_counter() - t)
    ratio = percentiles(asked)[0] / percentiles(raw)[0]
    print_latencies(f"overhead, nothing cached, {len(questions)} questions (same process)",
                    [("raw model calls (peer)", raw, ""),
                     ("Pipeline.ask (ours)", asked, f"   ratio p50 {ratio:.2f}x (goal <= 1.2x: "
                                                    f"{'met' if ratio <= 1.2 else 'NOT met'})")],
                    width=34)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generative-sample", type=int, default=20)
    args = ap.parse_args()
    os.environ.setdefault("RAGBOOK_PROFILE", "offline")
    from ragbook import load_helpcentre
    from ragbook.chunking import chunk_documents

    hc = load_helpcentre()
    chunks = chunk_documents(hc.documents, size=256, overlap=32)
    user_cache = os.environ.get("RAGBOOK_CACHE")
    with tempfile.TemporaryDirectory() as cold:
        cold_s, _ = build(chunks, cold)
        warm_s, hybrid = build(chunks, cold)
        # the models' own caches (SmolLM2's dequantised copy) stay where the user keeps them
        if user_cache is None:
            os.environ.pop("RAGBOOK_CACHE")
        else:
            os.environ["RAGBOOK_CACHE"] = user_cache
        print(f"index build, {len(chunks)} chunks of {len(hc.documents)} articles:")
        print(f"  cold cache: {cold_s:6.1f} s  ({len(chunks) / cold_s:7.1f} chunks/s)")
        print(f"  warm cache: {warm_s:6.2f} s  ({len(chunks) / warm_s:7.1f} chunks/s)  "
              f"ratio {cold_s / warm_s:.0f}x")

        from ragbook.pipeline import Pipeline

        test = hc.split("test")
        time_questions(Pipeline(hybrid), test)                     # fill the caches
        totals, stages = time_questions(Pipeline(hybrid), test)    # warm: the steady state
        p50 = percentiles(totals)[0]
        print_latencies(f"Pipeline.ask, extractive reader (SentenceReader), {len(test)} test "
                        f"questions", [("warm caches", totals,
                                        f"   goal p50 < 300 ms: "
                                        f"{'met' if p50 < 300 else 'NOT met'}")])
        print("per stage, warm:")
        for name, values in stages.items():
            s50, s95 = percentiles(values)
            print(f"  {name:22s} {s50:8.1f} {s95:8.1f}")

        overhead(hybrid, test)

        if args.generative_sample:
            from ragbook.readers import GenerativeReader

            sample = test[:args.generative_sample]
            gen = Pipeline(hybrid, reader=GenerativeReader())
            gen.reader.llm.generate([{"role": "user", "content": "hi"}], max_new_tokens=1)
            totals, _ = time_questions(gen, sample)     # model loaded: time answers only
            g50, g95 = percentiles(totals)
            print(f"\nPipeline.ask, generative reader (SmolLM2-135M, greedy replies cached on "
                  f"disk after the first run), {len(sample)} test questions: p50 {g50:.0f} ms, "
                  f"p95 {g95:.0f} ms; median {statistics.median(totals):.2f} s")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of this process: {rss:.0f} MB")


if __name__ == "__main__":
    main()
