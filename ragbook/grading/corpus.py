"""The help-centre material several chapters' "on the real corpus" exercises share: its BM25
index, its articles' token counts, its first answerable dev questions and their rankings.

Loaded once per process: a check rebuilds its cases on every call, and a help-centre BM25
index takes a moment to build."""
from __future__ import annotations

from functools import lru_cache

from .. import bm25, chunking, datasets

__all__ = ["helpcentre_bm25", "helpcentre_tokens", "answerable_dev_questions", "bm25_ranking"]


@lru_cache(maxsize=1)
def helpcentre_bm25():
    """A BM25 index of every help-centre article (built once)."""
    return bm25.BM25Index().build(datasets.load_helpcentre().documents)


@lru_cache(maxsize=1)
def helpcentre_tokens() -> dict:
    """Encoder tokens of every help-centre article, by id."""
    return {d.id: chunking.count_tokens(d.text) for d in datasets.load_helpcentre().documents}


def answerable_dev_questions(n: int | None = 3) -> list:
    """The first ``n`` answerable questions of the help centre's dev split (all with None)."""
    return [q for q in datasets.load_helpcentre().split("dev") if q.gold][:n]


def bm25_ranking(text: str, k: int = 10) -> list[str]:
    """Help-centre article ids, best first, as BM25 ranks them for ``text``."""
    return [h.id for h in helpcentre_bm25().search(text, k=k)]
