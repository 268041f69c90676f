"""Does a retrieval-rank prior help the offline extractive reader? ``SentenceReader`` scores a
sentence by its cosine with the question; with ``rank_weight=w`` a sentence of the hit ranked
r scores ``cosine + w / r``. Measured on what chapter 9's ``Pipeline`` hands the reader (the
help-centre questions, hybrid retrieval, top 5 after fusion, superseded pages filtered,
no abstention), so the ranks are real retrieval ranks.

Per answerable question: the answer comes from a gold document ("right source") and its
token F1 against the labelled answer span. ``w`` is chosen on **dev** (best right-source
rate, then F1, then the smaller w); **test** is reported for w = 0 and the chosen w, with a
paired bootstrap of the difference. Same run, same retrieval, same encoder.

    RAGBOOK_PROFILE=offline .venv/bin/python bench/reader_rank_prior.py
"""
from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents, models
from ragbook.datasets import load_helpcentre
from ragbook.evaluate import bootstrap_ci, f1_score, paired_bootstrap
from ragbook.pipeline import Pipeline
from ragbook.readers import SentenceReader
from ragbook.result import with_history

WEIGHTS = (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def choose(prepared, w):
    """(hit, span) the reader with rank weight ``w`` answers with: every candidate's best
    sentence (``Prepared.spans``, cosine only) plus ``w / rank``, best overall."""
    pairs = [(h, s) for h, s in zip(prepared.candidates, prepared.spans, strict=True)
             if s is not None]
    return max(pairs, key=lambda p: p[1].score + w / p[0].rank)


def scores(prepared, questions, w):
    """{question id: right source (0/1)} and {question id: answer F1} over answerable ones."""
    right, f1 = {}, {}
    for p, q in zip(prepared, questions, strict=True):
        if q.gold and p.spans:
            hit, span = choose(p, w)
            right[q.id] = float(hit.doc_id in q.gold)
            f1[q.id] = f1_score(span.text, [a["text"] for a in q.answers])
    return right, f1


def mean(d):
    return sum(d.values()) / len(d)


if __name__ == "__main__":
    hc = load_helpcentre()
    encoder = Encoder(show_progress=False)
    print(f"profile {models.active_profile()}, encoder {encoder.model_id}")
    chunks = chunk_documents(hc.documents, size=256, overlap=32)
    hybrid = HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)
    base = Pipeline(hybrid, reader=SentenceReader(encoder, min_span_score=None))
    splits = {s: hc.split(s) for s in ("dev", "test")}
    prepared = {s: [base.prepare(*with_history(q)) for q in qs] for s, qs in splits.items()}
    print(f"{'w':>6s} {'dev right':>9s} {'dev F1':>7s} {'test right':>10s} {'test F1':>8s}")
    table = {}
    for w in WEIGHTS:
        table[w] = {s: scores(prepared[s], splits[s], w) for s in splits}
        (dr, df), (tr, tf) = table[w]["dev"], table[w]["test"]
        print(f"{w:6.3f} {mean(dr):9.3f} {mean(df):7.3f} {mean(tr):10.3f} {mean(tf):8.3f}")
    best = max(WEIGHTS, key=lambda w: (mean(table[w]["dev"][0]), mean(table[w]["dev"][1]), -w))
    print(f"\nchosen on dev: rank_weight = {best} "
          f"({len(table[best]['dev'][0])} answerable dev questions)")
    (r0, f0), (r1, f1) = table[0.0]["test"], table[best]["test"]
    for name, a, b in (("right source", r0, r1), ("answer F1", f0, f1)):
        m0, lo0, hi0 = bootstrap_ci(list(a.values()))
        m1, lo1, hi1 = bootstrap_ci(list(b.values()))
        d, lo, hi = paired_bootstrap(a, b)
        print(f"test {name:12s} w=0: {m0:.3f} [{lo0:.3f}, {hi0:.3f}]  w={best}: {m1:.3f} "
              f"[{lo1:.3f}, {hi1:.3f}]  difference {d:+.3f} [{lo:+.3f}, {hi:+.3f}] "
              f"({len(a)} answerable test questions)")
    # the shipped code path gives what the recombination above computed
    check = Pipeline(hybrid, reader=SentenceReader(encoder, min_span_score=None, rank_weight=best))
    for q, p in list(zip(splits["test"], prepared["test"], strict=True))[:20]:
        if q.gold and p.spans:
            spans = [s for s in check.prepare(*with_history(q)).spans if s is not None]
            assert max(spans, key=lambda s: s.score).text == choose(p, best)[1].text, q.id
    print("check: Pipeline with SentenceReader(rank_weight=...) picks the sentences computed")
