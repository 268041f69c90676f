import pytest

from ragbook.evaluate import exact_match, f1_score, normalize_answer


def test_squad_normalisation():
    assert normalize_answer("The 14-day refund window!") == "14day refund window"


def test_exact_match_and_f1():
    assert exact_match("a 14-day window", ["14-day window"]) == 1.0
    assert f1_score("14-day refund window", ["14-day window"]) == pytest.approx(0.8)
    assert f1_score("30 days", ["14-day window"]) == 0.0


def test_unanswerable_questions_reward_abstention_only():
    assert exact_match(None, []) == 1.0 and f1_score(None, []) == 1.0
    assert exact_match("14 days", []) == 0.0 and f1_score(None, ["14 days"]) == 0.0
