"""Choosing min_confidence: the risk curve, the binomial bound, and the guarantee it states —
checked by simulation against a known population and on the help centre's test split."""
import math
import random
from fractions import Fraction

import numpy as np
import pytest

from ragbook.calibration import (
    RiskPoint,
    binomial_p_value,
    controlled_threshold,
    cost_threshold,
    first_testable,
    risk_curve,
)
from ragbook.pipeline import Pipeline
from ragbook.result import answer_outcome, count_outcomes, outcome, with_history


def exact_tail(wrong, n, rate):
    """P(Binomial(n, rate) <= wrong), summed in exact fractions."""
    r = Fraction(rate).limit_denominator(10**6)
    return float(sum(math.comb(n, i) * r**i * (1 - r) ** (n - i) for i in range(wrong + 1)))


@pytest.mark.parametrize("wrong, n, rate", [(0, 10, 0.2), (3, 10, 0.3), (15, 51, 0.4),
                                            (26, 95, 0.35), (7, 7, 0.5), (0, 1, 0.1)])
def test_binomial_p_value_is_the_exact_lower_tail(wrong, n, rate):
    assert binomial_p_value(wrong, n, rate) == pytest.approx(exact_tail(wrong, n, rate),
                                                             rel=1e-9)
    assert binomial_p_value(0, 0, rate) == 1.0          # nothing delivered: no evidence


def test_first_testable_is_the_fewest_answers_that_could_pass():
    for rate in (0.05, 0.1, 0.25, 0.4):
        for level in (0.1, 0.02, 0.001):
            n = first_testable(rate, level)
            assert binomial_p_value(0, n, rate) <= level
            assert n == 1 or binomial_p_value(0, n - 1, rate) > level


def test_risk_curve_is_what_decide_does_at_each_threshold(hc_hybrid, hc):
    """Every point of the curve — built from one decide per question at no threshold —
    equals what the pipeline does with that threshold set."""
    pipeline = Pipeline(hc_hybrid)
    dev = hc.split("dev")
    prepared = [pipeline.prepare(*with_history(q)) for q in dev]
    curve = risk_curve([p.confidence for p in prepared],
                       [outcome(pipeline.decide(p), q.gold) for p, q in zip(prepared, dev,
                                                                           strict=True)])
    assert curve[-1].threshold is None and len(curve) > 20
    for point in curve[::5] + curve[-2:]:
        counts = count_outcomes(pipeline.with_settings(min_confidence=point.threshold),
                                prepared, dev)
        assert (counts["right"] + counts["wrong"], counts["wrong"]) == (point.delivered,
                                                                        point.wrong)


def test_cost_threshold_prefers_no_threshold_then_the_lowest_on_ties():
    curve = [RiskPoint(0.9, 2, 0), RiskPoint(0.8, 4, 0), RiskPoint(0.7, 6, 3),
             RiskPoint(None, 8, 3)]
    assert cost_threshold(curve, 2.0) == 0.8            # 4 right, 0 wrong beats the rest
    assert cost_threshold(curve, 0.0) is None           # wrong answers free: answer all
    assert cost_threshold([RiskPoint(0.5, 2, 1), RiskPoint(None, 2, 1)], 1.0) is None
    with pytest.raises(ValueError, match="wrong_cost must be a finite number >= 0"):
        cost_threshold(curve, -1)


def population(seed=0, n=20_000):
    """(confidence, wrong) pairs whose error is *not* monotone in the confidence: the
    most confident tenth is wrong 30% of the time, the middle 10%, the bottom 60% — the
    shape the help centre has, where the top answers are not the safest."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(0, 1, n)
    rate = np.where(conf > 0.9, 0.30, np.where(conf > 0.4, 0.10, 0.60))
    return conf, rng.uniform(0, 1, n) < rate


def realised(conf, wrong, threshold):
    inside = conf >= (-math.inf if threshold is None else threshold)
    return wrong[inside].mean() if inside.any() else 0.0


def test_the_guarantee_holds_on_a_known_population():
    """Calibration sets of 150 drawn from a population whose delivered error is known:
    the chosen threshold's true error is at most α in at least 90% of 300 draws (it
    promises 90%), and it is not bought by answering nothing: most draws deliver. The
    naive rule (the most permissive threshold whose *observed* error is ≤ α) breaks the
    promise on the same draws, so this test can tell a bound from an estimate."""
    conf, wrong = population()
    rng = np.random.default_rng(1)
    alpha, kept, naive_kept, delivered = 0.3, 0, 0, 0
    for _ in range(300):
        idx = rng.choice(len(conf), 150)
        curve = risk_curve(list(conf[idx]), ["wrong" if w else "right" for w in wrong[idx]])
        g = controlled_threshold(curve, 150, alpha, probability=0.9)
        kept += realised(conf, wrong, g.threshold) <= alpha or g.escalate_all
        delivered += not g.escalate_all
        naive = max((p for p in curve if p.delivered and p.error <= alpha),
                    key=lambda p: p.delivered, default=None)
        naive_kept += naive is None or realised(conf, wrong, naive.threshold) <= alpha
    assert kept / 300 >= 0.9
    assert delivered / 300 >= 0.5
    assert naive_kept / 300 < 0.75


def test_calibrated_abstention_on_the_help_centre_test_split(hc_hybrid, hc):
    """The issue's check: calibration sets resampled (fixed seed) from the help-centre test
    split, each calibrated for α = 0.4 with probability 0.9, the chosen threshold judged
    on the whole split: delivered error ≤ α in ≥ 90% of 200 resamples; answers delivered
    in most of them; the guarantee printed in words."""
    pipeline = Pipeline(hc_hybrid)
    test = hc.split("test")
    prepared = [pipeline.prepare(*with_history(q)) for q in test]
    outs = [outcome(pipeline.decide(p), q.gold) for p, q in zip(prepared, test, strict=True)]
    conf = np.array([-math.inf if p.confidence is None else p.confidence for p in prepared])
    wrong = np.array([o == "wrong" for o in outs])
    on = np.array([o != "escalated" for o in outs])
    rng = random.Random(0)
    kept = answered = 0
    for _ in range(200):
        idx = [rng.randrange(len(test)) for _ in test]
        g = controlled_threshold(risk_curve([prepared[i].confidence for i in idx],
                                            [outs[i] for i in idx]), len(idx), 0.4)
        if g.escalate_all:
            kept += 1
            continue
        answered += 1
        kept += realised(conf[on], wrong[on], g.threshold) <= 0.4
    assert kept / 200 >= 0.9 and answered / 200 >= 0.5


def test_pipeline_calibrate_with_a_target_error(hc_hybrid, hc, capsys):
    pipeline = Pipeline(hc_hybrid)
    test = hc.split("test")
    prepared = [pipeline.prepare(*with_history(q)) for q in test]
    calibrated = pipeline.calibrate(prepared, test, target_error=0.4)
    g = calibrated.guarantee_
    printed = capsys.readouterr().out
    assert "with probability at least 90%" in printed and "at most 40% of delivered" in printed
    assert not g.escalate_all and calibrated.min_confidence == g.threshold
    assert calibrated.min_confidence_kind == "cosine" and pipeline.min_confidence is None
    counts = count_outcomes(calibrated, prepared, test)
    assert (counts["right"] + counts["wrong"], counts["wrong"]) == (g.delivered, g.wrong)

    strict = pipeline.calibrate(prepared, test, target_error=0.05, verbose=False)
    assert capsys.readouterr().out == ""
    assert strict.guarantee_.escalate_all and "every question escalates" in str(strict.guarantee_)
    assert all(strict.decide(p).escalated for p in prepared)
    assert pipeline.calibrate(prepared, test).guarantee_ is None      # the cost rule

    with pytest.raises(ValueError, match="not both"):
        pipeline.calibrate(prepared, test, wrong_cost=2.0, target_error=0.2)
    for bad in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match="target_error must lie strictly between 0 and 1"):
            pipeline.calibrate(prepared, test, target_error=bad)
    with pytest.raises(ValueError, match="probability must lie strictly between 0 and 1"):
        pipeline.calibrate(prepared, test, target_error=0.2, probability=1.0)


def test_answer_outcome_judges_the_answer_not_the_page():
    """The right page with a neighbouring sentence is right by page, wrong by answer; the
    gold span inside a longer answer, or most of its words, is right."""
    from ragbook.result import Result
    from ragbook.types import Answer, Hit

    page = Hit("refund:0", 0.9, 1, "billing-refund-policy", "…")
    gold = [{"doc": "billing-refund-policy", "text": "Enterprise contracts carry a 30-day "
                                                     "refund window"}]

    def said(text):
        return Result("q", "q", Answer(text, ("refund:0",)), sources=(page,))

    neighbour = said("Refunds are issued to the original card.")
    assert outcome(neighbour, ["billing-refund-policy"]) == "right"
    assert answer_outcome(neighbour, gold) == "wrong"
    assert answer_outcome(said("Note: enterprise contracts carry a 30-day refund window [1], "
                               "unlike monthly plans."), gold) == "right"
    assert answer_outcome(said("Enterprise contracts carry a 30-day window."), gold) == "right"
    assert answer_outcome(said("Anything at all."), []) == "wrong"          # unanswerable
    escalated = Result("q", "q", Answer(None, reason="low_confidence"), reason="low_confidence")
    assert answer_outcome(escalated, gold) == "escalated"
