"""Which sentence answers? Alternative answer scorers for the offline span reader, measured on
dev splits only (issue 35: what is left after the reader fixes is the choice of sentence
*within* the passages read, and a confidence that separates right from wrong).

For each answerable dev question, the README pipeline (chunks 256/32, hybrid, keep 5) gives
the passages read; every candidate answer unit of those passages (``SentenceReader``'s
shipped settings: answer units, references skipped, fragment paragraphs) is scored by each
scorer, and the best one is the answer. A unit is *right* when its passage is a gold document
and it holds the gold span's key fact (``unseen.key_fact``). Per scorer and set: *picked
right* (share of answerable questions whose best unit is right), *oracle* (some unit read is
right), and the largest coverage at which the delivered error (unanswerables included) is at
most 25% for some floor on the scorer — the issue's bar, here on dev, so an upper bound on
what a floor calibrated on dev could give on test.

Scorers: the shipped score (all-MiniLM-L6-v2 cosine + 0.05 / rank); multilingual-e5-small's
asymmetric query/passage cosine (the offline ``prefix_encoder`` role), alone and summed with
the shipped score; and late interaction at the unit level (``ragbook.late_interaction``'s
MaxSim over all-MiniLM-L6-v2's token vectors): the unit embedded alone, and the unit *read in
its passage* — the passage's own contextual token vectors, each question token matched only
against the tokens that fall inside the unit (``MaxSimScorer.span_scores``, what
``SentenceReader(scoring="late")`` scores with), so a unit is scored by words that were read
with their neighbours. Pickers (``PICKERS``, issue 35's "retrieval rank
as evidence" and "the paragraph when the sentence alone is not an answer"): the best unit of
all passages read (shipped), the best unit of the top-ranked passage only, and either one
widened to the paragraph (blank-line block) that holds it; each over the hybrid alone and
over the hybrid with the offline second stage (``CrossEncoderReranker()``: the MaxSim blend),
which puts the gold page first more often.

    RAGBOOK_PROFILE=offline .venv/bin/python bench/answer_scorers.py

``--test-once SCORER ...`` reports the named scorers on the test splits instead, each with the
floor that gives the largest coverage at delivered error <= 25% on dev (``dev_floor``): run
once, after the choice is made on dev, never to make it.
"""
import argparse
import time

import numpy as np
from unseen import SPLITS, corpus, key_fact

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, chunk_documents, models
from ragbook.evaluate import paired_bootstrap
from ragbook.late_interaction import MaxSimScorer, maxsim
from ragbook.pipeline import Pipeline
from ragbook.readers import default_extractive_reader
from ragbook.rerank import CrossEncoderReranker
from ragbook.result import with_history

BAR = 0.25


def paragraph(text: str, start: int, end: int) -> str:
    """The blank-line block of ``text`` that holds ``text[start:end]``."""
    a, z = text.rfind("\n\n", 0, start), text.find("\n\n", end)
    return text[0 if a < 0 else a + 2:len(text) if z < 0 else z].strip()


def candidates(name: str, reader, e5, reranker=None, late=None, split="dev",
               likelihood=None) -> list[dict]:
    """Per question of the ``split`` half: answerable or not, and its candidate units with
    their scores (with ``likelihood``, a ``QuestionLikelihood``, also ``"upr"`` for the
    ``UPR_TOP`` units read in their passage best; -inf for the others)."""
    ds, docs = corpus(name)
    retriever = HybridRetriever(DenseIndex(), BM25Index()).build(
        chunk_documents(docs, size=256, overlap=32))
    pipeline = Pipeline(retriever, reranker=reranker, reader=reader)
    rows = []
    for q in ds.split(SPLITS[name][split]):
        prep = pipeline.prepare(*with_history(q))
        hits = list(prep.candidates)
        spans = reader.hits_spans(prep.condensed, hits) if hits else []
        units = [(h, s) for h, found in zip(hits, spans, strict=True) for s in found]
        golds = [a["text"] for a in q.answers]
        e5_scores = ((e5.encode_passages([s.text for _, s in units])
                      @ e5.encode_queries([prep.condensed])[0]).tolist() if units else [])
        qtok = late.token_vectors([prep.condensed], "query")[0]
        alone = [maxsim(qtok, m) for m in late.token_vectors([s.text for _, s in units])]
        in_context = [x for h, found in zip(hits, spans, strict=True) for x in
                      late.span_scores(prep.condensed, h.text, [(s.start, s.end) for s in found])]
        upr = [float("-inf")] * len(units)
        if likelihood is not None and units:
            top = sorted(range(len(units)), key=lambda i: -in_context[i])[:UPR_TOP]
            for i, x in zip(top, likelihood(prep.condensed, [units[i][1].text for i in top]),
                            strict=True):
                upr[i] = x
        gold = [bool(q.gold) and h.doc_id in q.gold for h, _ in units]
        paras = [paragraph(h.text, s.start, s.end) for h, s in units]
        rows.append({"answerable": bool(q.gold), "units": [
            {"shipped": s.score, "e5": x, "rank": h.rank, "alone": a, "context": c, "upr": u,
             "right": g and any(key_fact(s.text, a) for a in golds),
             "paragraph right": g and any(key_fact(p, a) for a in golds)}
            for (h, s), x, g, p, a, c, u in zip(units, e5_scores, gold, paras, alone, in_context,
                                                upr, strict=True)]})
    return rows


UPR_TOP = 5


class QuestionLikelihood:
    """UPR (Sachan et al. 2022, "Improving Passage Retrieval with Zero-Shot Question
    Generation"): a unit's score is the offline generator's (SmolLM2-135M-Instruct) mean
    log-probability of the question's tokens after "Passage: <unit> ... Question:" — how
    well the unit *predicts* the question, a reading the encoders' cosines do not do. One
    batched forward pass per question over its ``UPR_TOP`` best units by the late score
    (``LocalLLM.score`` batches the other way: one prompt, several continuations, in the
    chat template, and caches each reply; here the continuation is fixed and the prompts
    vary)."""

    TEMPLATE = "Passage: {}\nPlease write a question based on this passage.\nQuestion:"

    def __init__(self):
        self.model, self.tok = models.load("generator")

    def __call__(self, question: str, texts: list[str]) -> list[float]:
        import torch

        q = self.tok(" " + question.strip(), add_special_tokens=False)["input_ids"]
        rows = [self.tok(self.TEMPLATE.format(t[:1200]), add_special_tokens=False)["input_ids"]
                for t in texts]
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        ids = torch.full((len(rows), max(map(len, rows)) + len(q)), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, :len(r) + len(q)], mask[i, :len(r) + len(q)] = torch.tensor(r + q), 1
        with torch.no_grad():
            logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask).logits, -1)
        return [float(sum(logp[i, len(r) + t - 1, x] for t, x in enumerate(q))) / len(q)
                for i, r in enumerate(rows)]


def measure(rows, scorer, top_only=False, judged="right") -> tuple[float, float, float]:
    """(picked right, oracle, max coverage at delivered error <= BAR) for one scorer; the
    pick among the top-ranked passage's units only with ``top_only``, judged by its own text
    (``"right"``) or by its paragraph's (``"paragraph right"``)."""
    picks = []
    for r in rows:
        units = [u for u in r["units"] if u["rank"] == 1] if top_only else r["units"]
        if units:
            best = max(units, key=scorer)
            picks.append((r["answerable"], best[judged], scorer(best)))
    n = sum(r["answerable"] for r in rows)
    oracle = sum(any(u["right"] for u in r["units"]) for r in rows if r["answerable"]) / n
    return sum(right for a, right, _ in picks if a) / n, oracle, max_coverage(picks, n)


def max_coverage(picks, n=None) -> float:
    """The largest share of the ``n`` answerable questions delivered, most confident first,
    with delivered error <= BAR (``picks``: (answerable, right, confidence))."""
    n = n or sum(a for a, _, _ in picks)
    order, coverage = sorted(picks, key=lambda p: -p[2]), 0.0
    for t in range(1, len(order) + 1):
        if np.mean([not right for _, right, _ in order[:t]]) <= BAR:
            coverage = max(coverage, sum(a for a, _, _ in order[:t]) / n)
    return coverage


def picked(rows, scorer, confidence=None) -> list[tuple[bool, bool, float]]:
    """(answerable, right, confidence) of each question's best unit by ``scorer``
    (``confidence``: the pick's value the delivery floor is on; by default its score; -inf
    when there is no unit)."""
    confidence = confidence or scorer
    out = []
    for r in rows:
        best = max(r["units"], key=scorer) if r["units"] else None
        out.append((r["answerable"], bool(best and best["right"]),
                    confidence(best) if best else float("-inf")))
    return out


def dev_floor(picks) -> float:
    """The floor giving the largest coverage at delivered error <= BAR on these picks."""
    n, best = sum(a for a, _, _ in picks), (0.0, float("inf"))
    for floor in sorted({s for *_, s in picks}):
        kept = [(a, right) for a, right, s in picks if s >= floor]
        if kept and np.mean([not right for _, right in kept]) <= BAR:
            best = max(best, (sum(a for a, _ in kept) / n, floor), key=lambda b: b[0])
    return best[1]


def at_floor(picks, floor) -> dict:
    """Coverage, delivered error and unanswerables escalated when answering at ``floor``."""
    kept = [(a, right) for a, right, s in picks if s >= floor]
    unans = [s for a, _, s in picks if not a]
    return {"coverage": sum(a for a, _ in kept) / sum(a for a, _, _ in picks),
            "delivered error": float(np.mean([not r for _, r in kept])) if kept else 0.0,
            "escalated (unans.)": (float(np.mean([s < floor for s in unans]))
                                   if unans else float("nan")),
            "picked right": sum(r for a, r in kept if a) / sum(a for a, _, _ in picks)}


def test_once(names, reader, e5, late):
    """The named scorers on the test splits at the floor chosen on dev (the README pipeline's
    hybrid, as the dev table above it); then each one's paired difference in *picked right*
    (no floor, answerable questions) against the first named, on dev and on test."""
    print("| set (test) | scorer | floor (dev) | coverage | delivered error | escalated (unans.) "
          "| right at the floor |\n|---|---|---|---|---|---|---|")
    deltas = []
    for name in SPLITS:
        rows = {split: candidates(name, reader, e5, None, late, split)
                for split in ("dev", "test")}
        right = {split: {label: {i: float(r) for i, (a, r, _) in
                                 enumerate(picked(found, SCORERS[label])) if a}
                         for label in names} for split, found in rows.items()}
        for label in names:
            floor = dev_floor(picked(rows["dev"], SCORERS[label]))
            m = at_floor(picked(rows["test"], SCORERS[label]), floor)
            print(f"| {name} ({SPLITS[name]['test']}) | {label} | {floor:.4f} | "
                  + " | ".join(f"{v:.3f}" for v in m.values()) + " |")
            if label != names[0]:
                deltas.append(f"| {name} | {label} | " + " | ".join(
                    "{:+.3f} [{:+.3f}, {:+.3f}]".format(*paired_bootstrap(
                        right[split][names[0]], right[split][label])) for split in ("dev", "test"))
                    + " |")
    print(f"\n| set | scorer | Δ picked right vs {names[0]}, dev | Δ, test |\n|---|---|---|---|")
    print("\n".join(deltas))


# (label, top_only, judged): which unit is the answer, and how much of its text is delivered
PICKERS = [("best unit read", False, "right"), ("its paragraph", False, "paragraph right"),
           ("top passage's best unit", True, "right"),
           ("top passage's best unit's paragraph", True, "paragraph right")]
SCORERS = {"shipped (MiniLM cosine + 0.05/rank)": lambda u: u["shipped"],
           "e5-small query/passage cosine": lambda u: u["e5"],
           "shipped + e5": lambda u: u["shipped"] + u["e5"],
           "MaxSim, unit alone": lambda u: u["alone"],
           "MaxSim, unit read in its passage": lambda u: u["context"],
           "MaxSim in its passage + 0.05/rank": lambda u: u["context"] + 0.05 / u["rank"]}


# pick by the first function, deliver by the second's value for the pick
UPR_SCORERS = {
    "MaxSim, unit read in its passage": (lambda u: u["context"], lambda u: u["context"]),
    "UPR (SmolLM2 log P(question given unit))": (lambda u: u["upr"], lambda u: u["upr"]),
    "MaxSim pick, UPR as the confidence": (lambda u: u["context"], lambda u: u["upr"]),
    **{f"MaxSim + {w} UPR": ((lambda u, w=w: u["context"] + w * u["upr"]),) * 2
       for w in (0.02, 0.05, 0.1, 0.2)}}


def upr_table(reader, e5, late):
    """Picked right and max coverage at delivered error <= BAR on dev for UPR_SCORERS."""
    likelihood = QuestionLikelihood()
    print(f"| set (dev) | scorer (top {UPR_TOP} units by MaxSim) | picked right | max coverage "
          f"at delivered error ≤ {BAR:.0%} |\n|---|---|---|---|")
    for name in SPLITS:
        t = time.perf_counter()
        rows = candidates(name, reader, e5, late=late, likelihood=likelihood)
        for label, (pick, confidence) in UPR_SCORERS.items():
            picks = picked(rows, pick, confidence)
            right = sum(rr for a, rr, _ in picks if a) / sum(a for a, _, _ in picks)
            print(f"| {name} ({SPLITS[name]['dev']}) | {label} | {right:.3f} | "
                  f"{max_coverage(picks):.3f} |")
        print(f"<!-- {name}: {time.perf_counter() - t:.0f} s -->")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test-once", nargs="+", choices=list(SCORERS), metavar="SCORER")
    parser.add_argument("--upr", action="store_true",
                        help="only the question-likelihood rows (UPR_SCORERS), dev splits")
    args = parser.parse_args()
    reader = default_extractive_reader(min_span_score=None)
    e5 = Encoder("prefix_encoder", show_progress=False)
    late = MaxSimScorer(dense_weight=0.0, token_cache_mb=1024)
    if args.test_once:
        return test_once(args.test_once, reader, e5, late)
    if args.upr:
        return upr_table(reader, e5, late)
    print(f"profile {models.active_profile()}, dev splits; reader {reader}")
    print(f"| set (dev) | scorer | picked right | oracle | max coverage at delivered error "
          f"≤ {BAR:.0%} |\n|---|---|---|---|---|")
    picked_rows, reranked_rows = [], []
    for name in SPLITS:
        t = time.perf_counter()
        rows = candidates(name, reader, e5, late=late)
        reranked = candidates(name, reader, e5, CrossEncoderReranker(), late)
        for label, scorer in SCORERS.items():
            lines = [f"| {name} ({SPLITS[name]['dev']}) | {label} | " + " | ".join(
                f"{v:.3f}" for v in measure(found, scorer)) + " |" for found in (rows, reranked)]
            print(lines[0])
            reranked_rows.append(lines[1])
        shipped = SCORERS["shipped (MiniLM cosine + 0.05/rank)"]
        for second, found in (("hybrid", rows), ("hybrid + MaxSim", reranked)):
            for label, top_only, judged in PICKERS:
                right, _, coverage = measure(found, shipped, top_only, judged)
                picked_rows.append(f"| {name} ({SPLITS[name]['dev']}) | {second} | {label} "
                                   f"| {right:.3f} | {coverage:.3f} |")
        print(f"<!-- {name}: {time.perf_counter() - t:.0f} s -->")
    print(f"\n| set (dev) | retrieval | answer (shipped score) | picked right | max coverage at "
          f"delivered error ≤ {BAR:.0%} |\n|---|---|---|---|---|")
    print("\n".join(picked_rows))
    print(f"\nThe scorers again over hybrid + MaxSim (the passages the second stage orders):\n"
          f"| set (dev) | scorer | picked right | oracle | max coverage at delivered error "
          f"≤ {BAR:.0%} |\n|---|---|---|---|---|")
    print("\n".join(reranked_rows))


if __name__ == "__main__":
    main()
