"""Choosing ``min_confidence`` from labelled questions: by the cost of a wrong answer, or with
a stated guarantee on the error of the answers delivered.

Both work on a *risk curve*: for every threshold, how many questions would be answered
(delivered) and how many of those wrongly. Raising ``min_confidence`` only ever turns
answers into hand-overs, so one ``decide`` per question at no threshold gives the whole
curve.

**Cost** (``cost_threshold``): the threshold maximising right − ``wrong_cost`` × wrong. It
is the best choice *on these questions*, and promises nothing about the next ones.

**Guarantee** (``controlled_threshold``): the lowest threshold at which the error among the
delivered answers is at most ``target_error`` with probability at least ``probability``
over the draw of the labelled questions — Learn then Test (Angelopoulos, Bates, Candès,
Jordan & Lei, 2021). Among the answers delivered at a threshold, the wrong ones are a
binomial draw whose rate is the true delivered error, so ``P(Binomial(delivered,
target_error) ≤ wrong)`` is a valid p-value for "the delivered error exceeds the target".
The thresholds tested are a few (``grid``, default 5) fixed before any label is read: those
delivering 1/5, 2/5, … and all of the answers, less any delivering too few answers to pass
at all. Each is tested at (1 − ``probability``) / their number (Bonferroni), so however the
error varies with the confidence, the chance that any threshold passes wrongly stays below
1 − ``probability``; the most permissive one that passes is chosen. (Fixed-sequence testing
from the strictest threshold down, LTT's other option, needs no division but stops at its
first failure: on the help centre the most confident answers are wrong about as often as
the rest, and it certified nothing.) The guarantee holds for questions drawn like the
labelled ones (same corpus, same kind of users); it says nothing about others.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RiskPoint", "Guarantee", "risk_curve", "cost_threshold", "binomial_p_value",
           "first_testable", "controlled_threshold"]


@dataclass(frozen=True)
class RiskPoint:
    """One threshold of a risk curve: ``delivered`` answers, ``wrong`` of them; ``threshold``
    None is no threshold (every answer the other rules let through)."""

    threshold: float | None
    delivered: int
    wrong: int

    @property
    def error(self) -> float:
        """The delivered error; 0.0 when nothing is delivered (no answer, no wrong answer)."""
        return self.wrong / self.delivered if self.delivered else 0.0


def risk_curve(confidences: Sequence[float | None], outcomes: Sequence[str]) -> list[RiskPoint]:
    """The curve from each question's confidence and its outcome at no threshold (``right``,
    ``wrong`` or ``escalated``): one point per distinct confidence, strictest (highest)
    first, then None. A question is delivered at λ when it was delivered at no threshold
    and its confidence is at least λ — what ``Pipeline.decide`` does."""
    if len(confidences) != len(outcomes):
        raise ValueError(f"need one outcome per confidence, got {len(confidences)} and "
                         f"{len(outcomes)}")
    bad = sorted(set(outcomes) - {"right", "wrong", "escalated"})
    if bad:
        raise ValueError(f"outcomes must be 'right', 'wrong' or 'escalated', got {bad[0]!r}")
    delivered = [(c, o == "wrong") for c, o in zip(confidences, outcomes, strict=True)
                 if o != "escalated"]
    points = []
    for th in sorted({c for c in confidences if c is not None}, reverse=True):
        inside = [w for c, w in delivered if c is not None and c >= th]
        points.append(RiskPoint(th, len(inside), sum(inside)))
    points.append(RiskPoint(None, len(delivered), sum(w for _, w in delivered)))
    return points


def cost_threshold(curve: Sequence[RiskPoint], wrong_cost: float) -> float | None:
    """The threshold maximising right − ``wrong_cost`` × wrong (ties: no threshold first,
    then the lowest threshold)."""
    if not math.isfinite(wrong_cost) or wrong_cost < 0:
        raise ValueError(f"wrong_cost must be a finite number >= 0, got {wrong_cost!r}")
    best, best_value = None, -math.inf
    for p in [curve[-1], *reversed(curve[:-1])]:
        value = (p.delivered - p.wrong) - wrong_cost * p.wrong
        if value > best_value:
            best, best_value = p.threshold, value
    return best


def binomial_p_value(wrong: int, delivered: int, target_error: float) -> float:
    """P(Binomial(``delivered``, ``target_error``) ≤ ``wrong``): how surprising so few wrong
    answers would be if the true delivered error were ``target_error``. 1.0 when nothing
    is delivered (no evidence)."""
    from scipy.stats import binom  # here, not at import: ``import ragbook`` stays light

    return float(binom.cdf(wrong, delivered, target_error)) if delivered else 1.0


def first_testable(target_error: float, level: float) -> int:
    """The fewest delivered answers a threshold needs to pass a test at ``level`` at all:
    the smallest n at which n answers, none wrong, would be evidence enough."""
    return max(1, math.ceil(math.log(level) / math.log(1 - target_error) - 1e-9))


@dataclass(frozen=True)
class Guarantee:
    """What ``controlled_threshold`` chose and what it promises; ``str()`` says it in words."""

    target_error: float
    probability: float
    threshold: float | None
    escalate_all: bool
    questions: int
    delivered: int
    wrong: int
    p_value: float
    tested: int

    @property
    def coverage(self) -> float:
        """The share of the labelled questions answered at the chosen threshold."""
        return self.delivered / self.questions

    def __str__(self) -> str:
        promise = (f"with probability at least {self.probability:.0%} over the draw of these "
                   f"questions, at most {self.target_error:.0%} of delivered answers are wrong "
                   "(for questions drawn like them)")
        if self.escalate_all:
            return (f"no threshold passed ({self.tested} tested): every question escalates, "
                    f"which keeps the promise trivially — {promise}. Label more questions or "
                    "accept a higher target_error to deliver answers")
        th = "no threshold" if self.threshold is None else f"min_confidence {self.threshold:.4g}"
        return (f"{th}: {promise}. On the {self.questions} labelled questions it answers "
                f"{self.delivered} (coverage {self.coverage:.0%}, {self.wrong} wrong: "
                f"{self.wrong / max(1, self.delivered):.0%}); binomial p = {self.p_value:.3g} "
                f"against {(1 - self.probability) / self.tested:.3g} ({self.tested} thresholds "
                "tested)")


def controlled_threshold(curve: Sequence[RiskPoint], questions: int, target_error: float,
                         probability: float = 0.9, grid: int = 5) -> Guarantee:
    """The most permissive of ``grid`` thresholds of ``curve`` (as ``risk_curve`` gives it,
    over ``questions`` labelled questions) whose delivered error is at most ``target_error``
    with ``probability`` (module docstring). When none passes, ``escalate_all`` and
    ``threshold`` None: the caller sets the top of the confidence's range, so nothing is
    answered."""
    if not 0 < target_error < 1:
        raise ValueError(f"target_error must lie strictly between 0 and 1 (the share of "
                         f"delivered answers allowed to be wrong), got {target_error!r}")
    if not 0 < probability < 1:
        raise ValueError(f"probability must lie strictly between 0 and 1 (e.g. 0.9 for a "
                         f"promise that holds 9 times in 10), got {probability!r}")
    if not isinstance(grid, int) or grid < 1:
        raise ValueError(f"grid must be a whole number >= 1 (thresholds tested), got {grid!r}")
    if not curve or questions < curve[-1].delivered:
        raise ValueError(f"a risk curve over {questions} questions cannot deliver "
                         f"{curve[-1].delivered if curve else 0}: calibrate on at least one "
                         "labelled question and pass how many there were")
    everything = curve[-1].delivered
    wanted = sorted({math.ceil(j * everything / grid) for j in range(1, grid + 1)})
    # for each wanted count, the strictest threshold delivering at least that many
    points = list({next(p for p in curve if p.delivered >= n): None for n in wanted})
    level = 1 - probability
    points = [p for p in points if p.delivered >= first_testable(target_error, level / grid)]
    tested = len(points)
    passed = [(p, binomial_p_value(p.wrong, p.delivered, target_error)) for p in points]
    passed = [(p, v) for p, v in passed if v <= level / tested]
    if not passed:
        return Guarantee(target_error, probability, None, True, questions, 0, 0, 1.0,
                         max(tested, 1))
    point, p = max(passed, key=lambda pv: pv[0].delivered)
    return Guarantee(target_error, probability, point.threshold, False, questions,
                     point.delivered, point.wrong, p, tested)
