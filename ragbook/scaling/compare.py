"""Do two retrievers agree? Top-k overlap and rank correlation between two rankings.

Moving retrieval to another engine should change *where* the work happens, not *what* comes
back. Two numbers say how far that holds for a query:

* ``overlap_at_k``: the share of one top k that the other top k also holds (1.0 = the same
  set, in any order) — the measure for two exact dense searches.
* ``rank_correlation``: Spearman's ρ between the two rankings over the union of their top
  ``n`` — the measure for two BM25 implementations whose scores live on different scales
  (an item missing from a list shares that list's last rank).

>>> overlap_at_k(["a", "b", "c"], ["c", "a", "d"], 3)
0.6666666666666666
>>> round(rank_correlation(["a", "b", "c", "d"], ["a", "b", "d", "c"], n=4), 3)
0.8
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..checks import check_k

__all__ = ["overlap_at_k", "rank_correlation"]


def overlap_at_k(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """|top k of a ∩ top k of b| / k: 1.0 when both return the same k ids. A list shorter
    than k counts what it has (two empty lists agree: 1.0)."""
    k = check_k(k)
    top_a, top_b = set(a[:k]), set(b[:k])
    if not top_a and not top_b:
        return 1.0
    return len(top_a & top_b) / min(k, max(len(top_a), len(top_b)))


def _ranks(ids: Sequence[str], union: Sequence[str]) -> np.ndarray:
    pos = {d: r for r, d in enumerate(ids, 1)}
    return np.array([pos.get(d, len(ids) + 1) for d in union], dtype=np.float64)


def rank_correlation(a: Sequence[str], b: Sequence[str], n: int = 20) -> float:
    """Spearman's ρ of two rankings over the union of their top ``n`` ids: each id's rank in
    each full list (a missing id ranks just after the list's end), ties averaged, then the
    Pearson correlation of the two rank vectors. 1.0 = same order; 0 = unrelated; NaN-free:
    a union of fewer than two ids, or a constant side, gives 1.0 if the lists agree, else 0.0."""
    from scipy.stats import rankdata

    n = check_k(n, "n")
    union = list(dict.fromkeys([*a[:n], *b[:n]]))
    if len(union) < 2:
        return 1.0 if list(a[:1]) == list(b[:1]) else 0.0
    ra, rb = rankdata(_ranks(a, union)), rankdata(_ranks(b, union))
    if ra.std() == 0 or rb.std() == 0:
        return 1.0 if np.array_equal(ra, rb) else 0.0
    return float(np.corrcoef(ra, rb)[0, 1])
