from fractions import Fraction

import numpy as np
import pytest

from ragbook import Encoder
from ragbook.datasets import load_pydocs
from ragbook.dense import DenseIndex
from ragbook.evaluate import (
    bootstrap_ci,
    compare_runs,
    evaluate,
    format_table,
    ndcg_at_k,
    paired_bootstrap,
    paired_randomization_test,
    per_query,
    ranking,
    retrieve_run,
)

# chapter 4's worked example: first correct answer at ranks 1, 3, 2, not found, 1
QRELS = {f"q{i}": {"gold": 1} for i in range(1, 6)}
RUN = {"q1": {"gold": 5, "a": 4},
       "q2": {"a": 5, "b": 4, "gold": 3},
       "q3": {"a": 5, "gold": 4},
       "q4": {"a": 5, "b": 4, "c": 3},
       "q5": {"gold": 5}}


def test_worked_example_exactly():
    rr = per_query(QRELS, RUN, "mrr@10")
    assert [Fraction(v).limit_denominator(10) for v in rr.values()] == [
        1, Fraction(1, 3), Fraction(1, 2), 0, 1]
    # 2.833/5
    assert Fraction(evaluate(QRELS, RUN, "mrr@10")).limit_denominator(100) == Fraction(17, 30)
    assert Fraction(evaluate(QRELS, RUN, "recall@5")).limit_denominator(100) == Fraction(4, 5)


def test_recall_and_hit_differ_with_two_relevant_documents():
    qrels, run = {"q": {"a": 1, "b": 1}}, {"q": {"a": 3, "x": 2, "b": 1}}
    assert evaluate(qrels, run, ["recall@2", "hit@2"]) == {"recall@2": 0.5, "hit@2": 1.0}


def test_ndcg_by_hand():
    # relevant at ranks 2 and 3 of 3; ideal puts them at 1 and 2
    import math

    dcg = 1 / math.log2(3) + 1 / math.log2(4)       # ranks 2 and 3
    idcg = 1 / math.log2(2) + 1 / math.log2(3)      # ranks 1 and 2
    assert ndcg_at_k({"a": 1, "b": 1}, ["x", "a", "b"], 10) == pytest.approx(dcg / idcg)


def test_ties_break_by_doc_id():
    assert ranking({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]


def test_missing_query_scores_zero_and_unjudged_queries_are_ignored():
    assert evaluate({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 1}, "zz": {"a": 1}},
                    "hit@1") == 0.5


def test_bad_metric_names_say_the_format():
    with pytest.raises(ValueError, match="NAME@K"):
        evaluate(QRELS, RUN, "precision@5")
    with pytest.raises(ValueError, match="NAME@K"):
        evaluate(QRELS, RUN, "recall@0")


def test_bootstrap_interval_brackets_the_mean_and_is_deterministic():
    values = [1.0] * 30 + [0.0] * 20
    mean, lo, hi = bootstrap_ci(values, seed=1)
    assert mean == 0.6 and lo < mean < hi and (lo, hi) == bootstrap_ci(values, seed=1)[1:]
    assert 0.4 < lo and hi < 0.8


def test_paired_tests_see_a_real_difference_and_no_difference():
    a = {f"q{i}": 0.0 for i in range(40)}
    b = {f"q{i}": 1.0 if i < 30 else 0.0 for i in range(40)}
    diff, lo, hi = paired_bootstrap(a, b)
    assert diff == 0.75 and lo > 0
    assert paired_randomization_test(a, b) < 0.001
    assert paired_randomization_test(a, a) == 1.0


@pytest.fixture(scope="module")
def real_runs(hc, hc_chunks):
    """Dense runs on both labelled sets (pydocs: FAQ answers plus 1,500 other sections)."""
    index = DenseIndex(Encoder()).build(hc_chunks)
    qs = [(q.id, q.standalone) for q in hc.split("dev") if q.gold]
    runs = [(hc.qrels("dev"), retrieve_run(index, qs, k=20)),
            (hc.qrels("dev"), retrieve_run(index, qs, k=20, level="chunk"))]
    py = load_pydocs()
    faq = [d for d in py.documents if d.metadata["file"].startswith("faq/")]
    others = [d for d in py.documents if not d.metadata["file"].startswith("faq/")][::7][:1500]
    pindex = DenseIndex(Encoder()).build(faq + others)
    runs.append((py.qrels("test"),
                 retrieve_run(pindex, [(q.id, q.text) for q in py.split("test")], k=20)))
    return runs


@pytest.mark.slow
def test_metrics_agree_with_trec_eval(real_runs):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    measures = {"recall_5": "recall@5", "recall_10": "recall@10", "ndcg_cut_10": "ndcg@10",
                "success_5": "hit@5"}
    for qrels, run in real_runs:
        trec = pytrec_eval.RelevanceEvaluator(qrels, set(measures) | {"recip_rank"}).evaluate(run)
        for trec_name, ours in measures.items():
            mine = per_query(qrels, run, ours)
            for q, v in mine.items():
                assert v == pytest.approx(trec[q][trec_name], abs=1e-9), (q, ours)
        # trec_eval's recip_rank has no cutoff: compare on runs cut to their top 10
        top10 = {q: dict(sorted(d.items(), key=lambda kv: -kv[1])[:10]) for q, d in run.items()}
        trec10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
        for q, v in per_query(qrels, run, "mrr@10").items():
            assert v == pytest.approx(trec10[q]["recip_rank"], abs=1e-9)


def test_compare_runs_table():
    rows = compare_runs(QRELS, {"a": RUN, "b": {q: {"gold": 1} for q in QRELS}}, ["mrr@10"],
                        baseline="a")
    assert rows[1]["Δmrr@10"][0] == pytest.approx(1 - 17 / 30)
    text = format_table(rows)
    assert "Δmrr@10" in text and text.splitlines()[1].startswith("a")


def test_holm_matches_the_step_down_definition():
    """Holm (1979) by hand: sorted p (0.01, 0.03, 0.04) times (3, 2, 1), made monotone."""
    from ragbook.evaluate import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([]) == []
    assert holm([0.4, 0.6, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    rng = np.random.default_rng(0)
    for _ in range(50):
        p = list(rng.uniform(0, 0.2, size=6))
        adj = holm(p)
        assert all(a >= b for a, b in zip(adj, p, strict=True))             # never smaller
        assert all(a <= min(1, 6 * b) + 1e-12 for a, b in zip(adj, p, strict=True))  # ≤ Bonferroni
        order = sorted(range(6), key=p.__getitem__)
        assert all(adj[i] <= adj[j] for i, j in zip(order, order[1:], strict=False))     # monotone


def test_many_comparisons_widen_the_intervals_and_say_so():
    """Three systems against one baseline: each Δ interval is the Bonferroni one (wider
    than a lone comparison's), p are Holm-adjusted, and the table says so in a line."""
    rng = np.random.default_rng(1)
    qrels = {f"q{i}": {"gold": 1} for i in range(60)}

    def run(p_first):
        return {q: ({"gold": 2, "x": 1} if rng.random() < p_first else {"x": 2, "gold": 1})
                for q in qrels}

    runs = {"base": run(0.5), "b": run(0.6), "c": run(0.7), "d": run(0.8)}
    many = compare_runs(qrels, runs, ["mrr@10"], baseline="base")
    lone = compare_runs(qrels, {"base": runs["base"], "c": runs["c"]}, ["mrr@10"],
                        baseline="base")
    wide, narrow = many[2]["Δmrr@10"], lone[1]["Δmrr@10"]
    assert wide[0] == narrow[0] and wide[1] < narrow[1] and wide[2] > narrow[2]
    assert many[2]["p(mrr@10)"] >= lone[1]["p(mrr@10)"]
    assert lone.correction == "" and "Holm" not in format_table(lone)
    assert format_table(many).splitlines()[-1] == many.correction
    assert many.correction.startswith("3 comparisons with 'base'") and "Holm" in many.correction
    with pytest.raises(ValueError, match="baseline 'dense' is not one of the runs"):
        compare_runs(qrels, runs, ["mrr@10"], baseline="dense")


def test_a_wide_table_prints_long_in_three_columns():
    """Many metrics with intervals and differences would run past a notebook's width: the
    table turns into run / metric / value lines, each value with its difference and p."""
    metrics = ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10"]
    rows = compare_runs(QRELS, {"a": RUN, "b": {q: {"gold": 1} for q in QRELS}}, metrics,
                        baseline="a")
    wide = format_table(rows, width=None)
    assert max(map(len, wide.splitlines())) > 100
    long = format_table(rows)
    lines = long.splitlines()
    assert max(map(len, lines)) <= 100 and lines[0].split()[:2] == ["run", "metric"]
    assert len(lines) == 1 + 2 * len(metrics) + 1
    assert lines[-1].startswith("5 comparisons with 'a'")
    assert lines[1].startswith("a ") and "Δ" not in lines[1]
    assert lines[6].startswith("b ") and lines[6].split()[1] == "recall@1"
    b_mrr = lines[6 + metrics.index("mrr@10")]
    assert b_mrr.split()[0] == "mrr@10" and "Δ +0.433" in b_mrr and ", p " in b_mrr


def test_held_out_choice_scores_each_fold_with_the_choice_made_without_it():
    """Two settings, four questions in two folds: each fold gets the setting the *other*
    fold prefers, so a setting that only wins by luck on one fold earns nothing there."""
    from ragbook.evaluate import held_out_choice

    scores = {"a": {"q1": 1.0, "q2": 0.0, "q3": 0.5, "q4": 0.5},
              "b": {"q1": 0.0, "q2": 0.5, "q3": 1.0, "q4": 0.0}}
    # fold 1 (q1, q2): chosen on q3, q4 -> a 1.0 vs b 1.0, tie -> a -> 1.0 + 0.0
    # fold 2 (q3, q4): chosen on q1, q2 -> a 1.0 vs b 0.5 -> a -> 0.5 + 0.5
    assert held_out_choice(scores, [["q1", "q2"], ["q3", "q4"]]) == pytest.approx(2.0 / 4)
    best_in_hindsight = max(sum(v.values()) for v in scores.values()) / 4
    assert best_in_hindsight == pytest.approx(2.0 / 4)
    rng = np.random.default_rng(0)          # 30 settings of pure noise: the max is biased
    noise = {f"s{i}": {f"q{j}": float(rng.uniform()) for j in range(40)} for i in range(30)}
    folds = [[f"q{j}" for j in range(f, 40, 5)] for f in range(5)]
    assert max(np.mean(list(v.values())) for v in noise.values()) > 0.55
    assert abs(held_out_choice(noise, folds) - 0.5) < 0.08
    with pytest.raises(ValueError, match="each question in exactly one"):
        held_out_choice(scores, [["q1", "q2"], ["q2", "q3"]])
    with pytest.raises(ValueError, match="lacks some"):
        held_out_choice(scores, [["q1"], ["q5"]])
