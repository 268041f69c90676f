"""What ``ragbook eval``, ``tune`` and ``calibrate`` do once their arguments are parsed: load
the index, score it on labelled questions, save or gate a baseline, tune and write settings,
calibrate the escalation threshold; and the lines ``ragbook ask --explain`` prints.

The command line (``ragbook.cli``) only parses and prints errors; these functions take
plain values and a ``say`` callback for their output, so tests and notebooks can call them.
"""
from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from tqdm.auto import tqdm

from .evaluate import compare_runs, format_table, run_from_hits
from .explain import explain_result
from .fusion import HybridRetriever
from .gate import GATE_METRIC, gate, load_baseline, per_question, save_baseline
from .label_checks import (
    changed_labels,
    label_fingerprints,
    refuse_overwrite,
    unknown_gold,
    unknown_gold_text,
)
from .persist import CorruptIndexError, recover
from .pipeline import Pipeline
from .questions import labelled, read_questions, repeated_questions
from .result import Result, outcome
from .terminal import one_line
from .tuned import load_settings, save_calibration, save_settings
from .tuning import tune

__all__ = ["EVAL_DEPTH", "EVAL_METRICS", "GATE_FAILED", "load_index", "eval_runs",
           "eval_command", "tune_command", "calibrate_command", "quiet_libraries",
           "explain_lines"]

EVAL_DEPTH = 50  # chunks fetched per question before judging documents (as in chapter 4)
EVAL_METRICS = ("recall@5", "recall@10", "mrr@10", "ndcg@10")
GATE_FAILED = 3  # exit code: the regression gate failed
FEW = 10  # fewer scored questions: a bootstrap interval is rough (of one question: no width)


def quiet_libraries() -> None:
    """Library chatter off the terminal: pypdf's notes on a damaged file ("EOF marker not
    found", logged as bare warnings; a file it cannot read still becomes ragbook's own
    one-line warning) go to debug, and transformers' "Loading weights" bar is not drawn.
    ragbook's own progress bars (embedding, tuning) stay. Call before any model loads
    (``--debug`` skips it)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read by transformers' import
    logging.getLogger("pypdf").setLevel(logging.ERROR)


def load_index(path: str | Path) -> HybridRetriever:
    """A saved index, or an error that says which command builds one."""
    path = Path(path)
    recover(path)  # a save killed between its two renames: put the previous index back
    if not (path / "manifest.json").is_file():
        what = "does not exist" if not path.exists() else "is not a ragbook index"
        raise FileNotFoundError(f"{str(path)!r} {what}; build one with "
                                f"'ragbook index SRC --out {path}'")
    try:
        return HybridRetriever.load(path)
    except CorruptIndexError as err:   # the library's advice is for library users
        raise CorruptIndexError(re.split(r"[;:] rebuild", err.problem)[0],
                                f"rebuild it with 'ragbook index SRC --out {path}'") from None


def eval_runs(retriever: HybridRetriever, questions, settings: str | Path | None = None
              ) -> dict[str, dict]:
    """Document-level runs of dense, BM25 and the hybrid, each ``EVAL_DEPTH`` deep, and of
    the tuned settings file (``settings``: its first stage's candidates, reordered by its
    second stage) as ``"tuned"``."""
    hits: dict[str, dict] = {"dense": {}, "bm25": {}, "hybrid": {}}
    tuned = load_settings(settings, retriever) if settings is not None else None
    if tuned is not None:
        hits["tuned"] = {}
    for q, text, _ in questions:
        hits["dense"][q] = retriever.dense.search(text, k=EVAL_DEPTH)
        hits["bm25"][q] = retriever.bm25.search(text, k=EVAL_DEPTH)
        hits["hybrid"][q] = retriever.search(text, k=EVAL_DEPTH)
        if tuned is not None:
            pool = tuned["retriever"].search(text, k=tuned["candidates"])
            hits["tuned"][q] = (tuned["reranker"].order(text, pool, k=len(pool))
                                if tuned["reranker"] is not None and pool else pool)
    return {name: run_from_hits(h, level="doc") for name, h in hits.items()}


def eval_command(index, questions_path, *, settings=None, save=None, against=None,
                 margin: float = 0.01, run: str | None = None,
                 say: Callable[[str], None] = print,
                 warn: Callable[[str], None] = print) -> int:
    """``ragbook eval``: the table, then ``--save`` and ``--against`` (the regression gate on
    ``run``'s MRR@10: ``"tuned"`` with ``settings``, else ``"hybrid"``). Returns the exit
    code: 0, or ``GATE_FAILED`` when the gate fails."""
    questions = read_questions(questions_path)
    scored = labelled(questions, questions_path)
    if save is not None:
        refuse_overwrite(save, "--save", {"questions file": questions_path, "baseline "
                                          "--against reads": against, "settings file": settings},
                         index)
    retriever = load_index(index)
    unknown = unknown_gold(scored, (r["doc_id"] for r in retriever.items_))
    if unknown:
        warn(unknown_gold_text(unknown))
    for ids in repeated_questions(scored)[:3]:
        warn(f"the questions {', '.join(map(repr, ids))} are one question asked "
             f"{len(ids)} times: it counts {len(ids)} times in every mean; keep one, with "
             f"all their gold ids")
    qrels = {q: {g: 1 for g in gold} for q, _, gold in scored}
    runs = eval_runs(retriever, scored, settings)
    run = run or ("tuned" if settings is not None else "hybrid")
    if run not in runs:
        raise ValueError(f"--run {run!r} is not one of the runs {sorted(runs)}; name one of "
                         f"them (tuned needs --settings)")
    skipped = len(questions) - len(scored)
    say(f"{len(scored)} questions" + (f" ({skipped} without gold ids not scored)"
                                      if skipped else "")
        + "; documents judged by their best chunk; mean [95% bootstrap CI]"
        + (f" (rough from fewer than {FEW} questions: label more)" if len(scored) < FEW else ""))
    say(format_table(compare_runs(qrels, runs, list(EVAL_METRICS))))
    values = per_question(qrels, runs, list(dict.fromkeys([*EVAL_METRICS, GATE_METRIC])))
    if save is not None:
        save_baseline(save, values, index=str(index), questions=str(questions_path),
                      corpus_fingerprint=retriever.corpus_fingerprint,
                      settings=str(settings) if settings is not None else None,
                      labels=label_fingerprints(scored))
        again = f" --settings {settings}" if settings is not None else ""
        say(f"per-question values of {', '.join(runs)} saved to {save}; after a change, "
            f"'ragbook eval {index} {questions_path}{again} --against {save}' gates {run}")
    if against is None:
        return 0
    base = load_baseline(against)
    if run not in base["values"]:
        raise ValueError(f"the baseline {str(against)!r} has no run {run!r} (it has "
                         f"{', '.join(base['values'])}); choose one with --run")
    if base.get("corpus_fingerprint") not in (None, retriever.corpus_fingerprint):
        say(f"(the index changed since the baseline: corpus fingerprint "   # a file's text
            f"{one_line(base['corpus_fingerprint'])} then, {retriever.corpus_fingerprint} now)")
    changed = _changed(base, run, label_fingerprints(scored), against, say)
    verdict = gate(*({q: v for q, v in vals.items() if q not in changed} for vals in
                     (base["values"][run][GATE_METRIC], values[run][GATE_METRIC])), margin)
    say(f"regression gate on {run} vs {against}: " + verdict.summary())
    return GATE_FAILED if verdict.failed else 0


def _changed(base: dict, run: str, labels: dict, against, say) -> set[str]:
    """The questions the baseline has whose label (text and gold ids) is not the one it was
    measured with: a changed label changes the score without any change to retrieval, so
    they are named and not paired; ``ValueError`` when that leaves nothing to pair."""
    then = base["values"][run][GATE_METRIC]
    changed = [q for q in changed_labels(base.get("labels"), labels) if q in then]
    if changed and len(changed) == len(set(then) & set(labels)):
        raise ValueError(f"every question the baseline {str(against)!r} shares with this file "
                         f"has another question text or gold ids now, so no change to "
                         f"retrieval can be measured against it; save a new baseline with "
                         f"--save")
    if changed:
        say(f"({len(changed)} questions have another text or gold ids than in the baseline, "
            f"not compared: {', '.join(map(one_line, changed[:5]))}"
            f"{' ...' if len(changed) > 5 else ''})")
    return set(changed)


def _refuse_unknown_gold(scored, retriever) -> None:
    """``ValueError`` naming the gold ids ``retriever`` does not index (with the id each
    probably means): a setting or threshold chosen on labels that can never be found would
    be written as if they were right."""
    unknown = unknown_gold(scored, (r["doc_id"] for r in retriever.items_))
    if unknown:
        raise ValueError(unknown_gold_text(unknown) + "; nothing was written")


def tune_command(index, questions_path, out, *, folds: int = 5, seed: int = 0,
                 say: Callable[[str], None] = print, progress: bool = True) -> int:
    """``ragbook tune``: tune on the labelled questions, print the report, write ``out``.
    Refused before any work when ``out`` is the questions file or inside the index, or when
    a gold id is not a document of the index."""
    refuse_overwrite(out, "--out", {"questions file": questions_path}, index)
    questions = labelled(read_questions(questions_path), questions_path)
    retriever = load_index(index)
    _refuse_unknown_gold(questions, retriever)
    report = tune(retriever, questions, folds=folds, seed=seed, progress=progress)
    for ids in repeated_questions(questions)[:3]:
        say(f"({', '.join(map(one_line, ids))} are one question asked {len(ids)} times: kept "
            f"in one fold, so none is tuned on and then held out)")
    say(report.text())
    save_settings(out, report, retriever)
    say(f"settings written to {out}; use them with 'ragbook ask {index} QUESTION --settings "
        f"{out}' or Pipeline(**ragbook.load_settings({str(out)!r}, retriever))")
    return 0


def calibrate_command(index, questions_path, out, *, settings=None, target_error=None,
                      probability: float = 0.9, wrong_cost=None, keep: int = 5,
                      say: Callable[[str], None] = print, progress: bool = True) -> int:
    """``ragbook calibrate``: chapter 9's method on the user's labels. Every labelled question
    is asked once (the index's hybrid, or ``settings``; the default reader, ``keep``
    passages); ``Pipeline.calibrate`` chooses ``min_confidence`` — maximising right −
    ``wrong_cost`` × wrong (default 2), or, with ``target_error``, the lowest threshold that
    keeps at most that share of delivered answers wrong with ``probability`` — and ``out``
    gets the settings with it, for ``ragbook ask --settings``. An answer is right when it
    comes from a gold document; any answer to a question without gold is wrong. Refused as
    ``tune_command`` is (``out`` may be ``settings``: the calibration is added to it)."""
    refuse_overwrite(out, "--out", {"questions file": questions_path}, index)
    scored = read_questions(questions_path)        # unanswerable ones (no gold) count too
    labelled(scored, questions_path)                 # ... but some must have gold ids
    retriever = load_index(index)
    _refuse_unknown_gold(scored, retriever)
    tuned = load_settings(settings, retriever) if settings is not None else {
        "retriever": retriever}
    tuned.pop("min_confidence", None), tuned.pop("min_confidence_kind", None)
    pipeline = Pipeline(**tuned, keep=keep)
    prepared = [pipeline.prepare(text) for _, text, _ in
                tqdm(scored, desc="asking", unit="question", disable=not progress)]
    golds = [SimpleNamespace(gold=gold) for _, _, gold in scored]
    chosen = pipeline.calibrate(prepared, golds, wrong_cost=wrong_cost,
                                target_error=target_error, probability=probability,
                                verbose=False)
    counts = {"right": 0, "wrong": 0, "escalated": 0}
    for p, g in zip(prepared, golds, strict=True):
        counts[outcome(chosen.decide(p), g.gold)] += 1
    th, kind = chosen.min_confidence, chosen.confidence_kind
    rule = (f"target_error {target_error} with probability {probability}" if target_error
            is not None else f"maximise right - {2.0 if wrong_cost is None else wrong_cost:g}"
            " x wrong")
    say(f"{len(scored)} labelled questions ({sum(not g for *_, g in scored)} without gold); "
        f"rule: {rule}")
    say(f"min_confidence {'none (answer all)' if th is None else f'{th:.4f}'} on the {kind} "
        f"score: right {counts['right']}, wrong {counts['wrong']}, escalated "
        f"{counts['escalated']} of {len(scored)} (coverage "
        f"{(counts['right'] + counts['wrong']) / len(scored):.0%})")
    if chosen.guarantee_ is not None:
        say(str(chosen.guarantee_))
    save_calibration(out, settings, retriever, {
        "min_confidence": th, "min_confidence_kind": kind if th is not None else None,
        "rule": rule, "questions": str(questions_path), "keep": keep, "counts": counts,
        "guarantee": str(chosen.guarantee_) if chosen.guarantee_ is not None else None})
    say(f"settings written to {out}; 'ragbook ask {index} QUESTION --settings {out}' "
        f"escalates under that threshold (low_confidence)")
    return 0


def explain_lines(pipeline: Pipeline, result: Result) -> list[str]:
    """What ``ragbook ask --explain`` prints under the sources: for source ``[n]``, why it
    scored what it did (``explain.explain_result``: the parts that add up to its score, then
    the scope and filter conditions it met), each line kept on one line of the terminal
    (token and document names are document text: escapes shown, never obeyed)."""
    lines = ["why these sources:"] if result.sources else []
    for n, explanations in enumerate(explain_result(pipeline, result), 1):
        for e in explanations:
            text = e.text(show=one_line).split("\n")   # names escaped: no break of theirs
            lines.append(f"  [{n}] {text[0]}")
            lines += [f"      {line.strip()}" for line in text[1:]]
    return lines
