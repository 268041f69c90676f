"""A regression gate on your own labelled questions: fail a change only when the labels say
it made retrieval worse, beyond what chance explains.

Save every question's values once (``ragbook eval INDEX QUESTIONS --save BASELINE.json``),
then after each change compare (``--against BASELINE.json --margin 0.01``). The gate pairs
the two runs question by question, bootstraps the mean difference ΔMRR@10 (now − then;
Efron & Tibshirani, 1993) and **fails only when the whole 95% interval lies below −margin**:

* a rerun of the same system (an A/A run) differs by chance alone, so its interval
  straddles zero and it passes — the gate does not cry wolf;
* a real loss larger than the margin, on enough questions, puts the interval below −margin
  and it fails, printing the questions that got worse;
* a loss the labels cannot separate from noise passes, with its interval printed: more
  labelled questions narrow it.

>>> before = {f"q{i}": 1.0 for i in range(40)}
>>> after = {**before, **{f"q{i}": 0.0 for i in range(10)}}           # 10 of 40 lost
>>> check = gate(before, after, margin=0.01)
>>> check.failed, round(check.delta[0], 3)
(True, -0.25)
>>> gate(before, dict(before)).failed                                 # A/A: identical runs
False
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .evaluate import paired_bootstrap, paired_randomization_test, per_query
from .terminal import one_line

__all__ = ["GATE_METRIC", "per_question", "save_baseline", "load_baseline", "gate",
           "GateResult"]

GATE_METRIC = "mrr@10"
KIND = "ragbook.eval.baseline"


def per_question(qrels, runs: Mapping[str, Any], metrics: Sequence[str]
                 ) -> dict[str, dict[str, dict[str, float]]]:
    """``{run: {metric: {question id: value}}}``: what a baseline file keeps."""
    return {name: {m: per_query(qrels, run, m) for m in metrics} for name, run in runs.items()}


def save_baseline(path: str | os.PathLike, values: Mapping[str, Mapping[str, Mapping]],
                  **about: Any) -> Path:
    """Write ``per_question`` values and what they were measured on (``about``: the index,
    the questions file, fingerprints) as JSON, atomically (a temporary file renamed)."""
    path = Path(path)
    doc = {"kind": KIND, "version": 1,
           "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           **about, "values": values}
    fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                               prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
    os.replace(tmp, path)
    return path


def load_baseline(path: str | os.PathLike) -> dict[str, Any]:
    """A file ``save_baseline`` wrote; ``ValueError`` naming the file when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; write a baseline first with "
                                f"'ragbook eval INDEX QUESTIONS --save {path}'")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        doc = None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or not isinstance(
            doc.get("values"), dict):
        raise ValueError(f"{str(path)!r} is not a baseline written by 'ragbook eval --save'; "
                         f"write one with 'ragbook eval INDEX QUESTIONS --save {path}'")
    return doc


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict. ``delta``: (mean, low, high) of now − then over the paired
    questions; ``failed``: the whole interval lies below −``margin``; ``regressions``:
    ``(question id, then, now)`` for every question that got worse, worst first;
    ``dropped``/``added``: question ids only the baseline / only this run has (not paired);
    ``changed``: how many paired questions changed at all."""

    metric: str
    delta: tuple[float, float, float]
    margin: float
    failed: bool
    paired: int
    regressions: tuple[tuple[str, float, float], ...]
    dropped: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    changed: int = 0

    def summary(self, show: int = 10) -> str:
        """The verdict in one line, then the questions that got worse (at most ``show``)."""
        mean, lo, hi = self.delta
        verdict = (f"FAIL: Δ{self.metric} {mean:+.3f} [95% CI {lo:+.3f}, {hi:+.3f}] lies "
                   f"below −{self.margin:g} over {self.paired} questions"
                   if self.failed else
                   f"pass: Δ{self.metric} {mean:+.3f} [95% CI {lo:+.3f}, {hi:+.3f}] over "
                   f"{self.paired} questions; fails only when the whole interval is below "
                   f"−{self.margin:g}")
        lines = [verdict]
        if not self.failed and hi < -self.margin:
            lines.append(f"(only {self.changed} questions changed: too few to tell a loss "
                         f"from chance, whatever the interval; label more questions)")
        if self.dropped or self.added:
            lines.append(f"({len(self.dropped)} baseline questions missing now, "
                         f"{len(self.added)} new questions: compared on the "
                         f"{self.paired} in both)")
        if self.regressions:
            lines.append(f"{len(self.regressions)} questions got worse"
                         + (f" (the {show} worst)" if len(self.regressions) > show else "")
                         + f": id  {self.metric} then -> now")
            lines += [f"  {one_line(q)}  {a:.3f} -> {b:.3f}"   # ids from a file: escaped
                      for q, a, b in self.regressions[:show]]
        return "\n".join(lines)


def gate(then: Mapping[str, float], now: Mapping[str, float], margin: float = 0.01, *,
         metric: str = GATE_METRIC, n: int = 2000, seed: int = 0,
         alpha: float = 0.05) -> GateResult:
    """Compare per-question values ``now`` with ``then`` (a baseline) on the questions both
    have: a paired bootstrap interval (``n`` resamples, level 1 − ``alpha``) of the mean
    difference; ``failed`` when its upper end is below −``margin``. ``ValueError`` when
    no question is in both or ``margin`` is negative. A handful of questions cannot fail
    it: their interval has no width, so the paired randomization test must also reject at
    ``alpha`` (it cannot with fewer than 6 changed questions)."""
    if not margin >= 0:
        raise ValueError(f"margin must be >= 0 (the loss you tolerate, in {metric}), got "
                         f"{margin!r}")
    common = sorted(set(then) & set(now))
    if not common:
        raise ValueError("the baseline and this run share no question id; gate the same "
                         "questions file the baseline was saved from")
    a, b = {q: then[q] for q in common}, {q: now[q] for q in common}
    delta = paired_bootstrap(a, b, n=n, alpha=alpha, seed=seed)
    worse = sorted(((q, a[q], b[q]) for q in common if b[q] < a[q]),
                   key=lambda r: (r[2] - r[1], r[0]))
    changed = sum(b[q] != a[q] for q in common)
    # the bootstrap interval of a handful of questions has no width (one question that lost
    # gives [-1, -1]); the randomization test cannot reach alpha then (2 / 2**changed at
    # best), so the gate fails only when both say so
    below = bool(delta[2] < -margin)
    failed = below and paired_randomization_test(a, b, seed=seed) <= alpha
    return GateResult(metric, delta, float(margin), failed,
                      len(common), tuple(worse), tuple(sorted(set(then) - set(now))),
                      tuple(sorted(set(now) - set(then))), changed)
