"""Cosine, dot product and Euclidean distance, vectorised over matrices.

Each function takes two vectors (returns a float) or two matrices of row vectors (returns
the ``(n, m)`` matrix of every pair). For unit vectors the three agree on ranking, because
``||a - b||^2 = 2 - 2 cos(a, b)``; hence the recipe: normalise once, then use the inner
product, which is exactly cosine and the cheapest to compute.

>>> import numpy as np
>>> a, b = np.array([3.0, 4.0]), np.array([4.0, 3.0])
>>> round(cosine(a, b), 2), dot(a, b), round(euclidean(a, b), 4)
(0.96, 24.0, 1.4142)
"""
from __future__ import annotations

import numpy as np

__all__ = ["normalise", "cosine", "dot", "euclidean", "distance_from_cosine", "top_k"]


def _pair(a, b) -> tuple[np.ndarray, np.ndarray, bool]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    single = a.ndim == 1 and b.ndim == 1
    a2, b2 = np.atleast_2d(a), np.atleast_2d(b)
    if a2.ndim != 2 or b2.ndim != 2:
        raise ValueError(f"expected vectors or matrices of row vectors, got shapes {a.shape} "
                         f"and {b.shape}")
    if a2.shape[1] != b2.shape[1]:
        raise ValueError(f"dimensions differ: {a2.shape[1]} vs {b2.shape[1]}; both sides must "
                         f"come from the same embedding model")
    if not (np.isfinite(a2).all() and np.isfinite(b2).all()):
        raise ValueError("a vector holds NaN or infinity; check what produced it")
    return a2, b2, single


def _out(m: np.ndarray, single: bool):
    return float(m[0, 0]) if single else m


def normalise(x) -> np.ndarray:
    """Scale each vector (or each row) to unit length; zero vectors stay zero."""
    x = np.asarray(x, dtype=np.float64)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def dot(a, b):
    """Inner product: rewards direction *and* length."""
    a2, b2, single = _pair(a, b)
    return _out(a2 @ b2.T, single)


def cosine(a, b):
    """cos(angle) = a·b / (|a||b|): direction only, in [-1, 1]."""
    a2, b2, single = _pair(a, b)
    return _out(normalise(a2) @ normalise(b2).T, single)


def euclidean(a, b):
    """Straight-line distance |a - b| (smaller is closer), via |a|² + |b|² - 2a·b."""
    a2, b2, single = _pair(a, b)
    sq = (a2 ** 2).sum(1)[:, None] + (b2 ** 2).sum(1)[None, :] - 2 * a2 @ b2.T
    return _out(np.sqrt(np.maximum(sq, 0.0)), single)


def distance_from_cosine(c: float) -> float:
    """Euclidean distance between two *unit* vectors whose cosine is ``c``:
    ``sqrt(2 - 2c)``, since ``|a - b|^2 = |a|^2 + |b|^2 - 2 a.b``. It is why cosine,
    inner product and distance rank unit vectors identically (clipped at 0 against rounding).

    >>> distance_from_cosine(1.0), distance_from_cosine(0.0), distance_from_cosine(-1.0)
    (0.0, 1.4142135623730951, 2.0)
    """
    return float(np.sqrt(max(0.0, 2.0 - 2.0 * float(c))))


def top_k(scores, k: int) -> list[int]:
    """Positions of the ``k`` highest ``scores``, best first; ties keep the lower position
    first (a stable sort), so a ranking never depends on how the sort breaks ties.

    >>> top_k([0.2, 0.9, 0.5, 0.9], 3)
    [1, 3, 2]
    """
    if not isinstance(k, (int, np.integer)) or k < 0:
        raise ValueError(f"k must be a whole number >= 0, got {k!r}")
    scores = np.asarray(scores).ravel()
    if scores.dtype.kind != "f":  # floats are ranked as they are (no float64 copy)
        scores = scores.astype(np.float64)
    if k == 0:
        return []
    if k >= len(scores):
        top = np.arange(len(scores))
    else:  # the k best in linear time (no full sort), then only those k are sorted
        part = np.argpartition(-scores, k)  # part[:k] the k best, part[k] the next one
        top = part[:k]
        kth = scores[top].min()
        if scores[part[k]] == kth:
            # a tie across the cut: the partition chose arbitrarily among the tied, so take
            # everything above the cut and the tied in position order
            above = np.flatnonzero(scores > kth)
            top = np.concatenate([above, np.flatnonzero(scores == kth)[:k - len(above)]])
    return top[np.lexsort((top, -scores[top]))].tolist()
