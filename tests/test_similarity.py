import numpy as np
import pytest

from ragbook.similarity import cosine, dot, euclidean, normalise


def test_small_example_by_hand():
    a, b = np.array([3.0, 4.0]), np.array([4.0, 3.0])
    assert cosine(a, b) == pytest.approx(24 / 25)
    assert dot(a, b) == 24.0
    assert euclidean(a, b) == pytest.approx(np.sqrt(2))


@pytest.mark.parametrize("cos,dist2", [(0.9, 0.2), (0.5, 1.0)])
def test_unit_vector_identity(cos, dist2):
    """|a-b|^2 = 2 - 2cos for unit vectors: the chapter 2 figures."""
    theta = np.arccos(cos)
    a, b = np.array([1.0, 0.0]), np.array([np.cos(theta), np.sin(theta)])
    assert euclidean(a, b) ** 2 == pytest.approx(dist2)


def test_matrices_give_all_pairs_and_match_loops():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 8)), rng.normal(size=(3, 8))
    for fn in (cosine, dot, euclidean):
        m = fn(A, B)
        assert m.shape == (4, 3)
        assert m[2, 1] == pytest.approx(fn(A[2], B[1]))


def test_rankings_agree_once_normalised():
    rng = np.random.default_rng(1)
    q, docs = normalise(rng.normal(size=16)), normalise(rng.normal(size=(50, 16)))
    by_cos = np.argsort(-cosine(q[None], docs)[0])
    assert (np.argsort(-dot(q[None], docs)[0]) == by_cos).all()
    assert (np.argsort(euclidean(q[None], docs)[0]) == by_cos).all()


def test_long_vector_wins_unnormalised_dot():
    q = np.array([1.0, 0.0])
    close, long_far = np.array([0.9, 0.1]), np.array([3.0, 3.0])
    assert cosine(q, close) > cosine(q, long_far)
    assert dot(q, long_far) > dot(q, close)


def test_normalise_keeps_zero_vectors():
    out = normalise(np.array([[0.0, 0.0], [3.0, 4.0]]))
    np.testing.assert_allclose(out, [[0, 0], [0.6, 0.8]])


def test_dimension_mismatch_is_explained():
    with pytest.raises(ValueError, match="same embedding model"):
        cosine(np.ones(3), np.ones(4))


def test_top_k_equals_a_stable_full_sort_with_ties_across_the_cut():
    from ragbook.similarity import top_k

    assert top_k([0.5, 0.5, 0.5, 0.5, 0.5, 0.9], 3) == [5, 0, 1]
    rng = np.random.default_rng(0)
    for _ in range(300):
        scores = rng.integers(0, 4, size=int(rng.integers(1, 60))).astype(float)  # many ties
        k = int(rng.integers(0, len(scores) + 2))
        assert top_k(scores, k) == np.argsort(-scores, kind="stable")[:k].tolist()
