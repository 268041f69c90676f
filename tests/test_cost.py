from fractions import Fraction

import pytest

from ragbook.cost import Workload, compare, naive, reduction_factor, retriever_reader


def test_chapter0_seed_figures():
    w = Workload()
    n, r = naive(w), retriever_reader(w)
    assert n.input_tokens == 9_600_000
    assert n.dollars == pytest.approx(28.80)
    assert n.latency_sequential_s == pytest.approx(7200.0)          # 2 hours
    assert n.latency_parallel_s == pytest.approx(144.0)              # ~2.4 minutes
    assert r.input_tokens == 4_000 and r.dollars == pytest.approx(0.012)
    assert r.latency_sequential_s == pytest.approx(1.33)
    assert reduction_factor(w) == 2400


def test_parallel_waves_round_up():
    w = Workload(corpus_docs=101, parallelism=50, call_latency_s=1.0)
    assert naive(w).latency_parallel_s == 3.0                        # 50 + 50 + 1


def test_cost_of_k_is_linear():
    a, b = (retriever_reader(Workload(k=k)).dollars for k in (5, 10))
    assert Fraction(b).limit_denominator() == 2 * Fraction(a).limit_denominator()


@pytest.mark.parametrize("field,value", [("k", 0), ("parallelism", 0), ("price_per_million", -1)])
def test_bad_workloads_name_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Workload(**{field: value})


def test_k_cannot_exceed_corpus():
    with pytest.raises(ValueError, match="larger than the corpus"):
        Workload(corpus_docs=3, k=5)


def test_compare_rows():
    rows = compare()
    assert [r["design"] for r in rows] == ["ask every document", "retrieve, then read"]
    assert rows[1]["reduction"] == 2400
