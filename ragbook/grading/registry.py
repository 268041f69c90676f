"""Every graded exercise, by name: the chapters' exercises collected in chapter order. The
chapter modules only define their exercises; this is the one place that gathers them, so
what ``check`` knows does not depend on which modules someone happened to import."""
from __future__ import annotations

from collections.abc import Iterable

from . import (
    ch00_why_retrieve,
    ch01_chunking,
    ch02_similarity,
    ch03_dense_retrieval,
    ch04_evaluating_retrieval,
    ch05_keyword_and_hybrid,
    ch06_reranking,
    ch07_extractive_reader,
    ch08_generative_reader,
    ch09_the_whole_pipeline,
    ch10_making_it_better,
    ch11_beyond_one_machine,
    ch12_capstone,
)
from .core import Chapter, Exercise

__all__ = ["CHAPTERS", "EXERCISES", "collect"]

CHAPTERS: tuple[Chapter, ...] = tuple(module.CHAPTER for module in (
    ch00_why_retrieve, ch01_chunking, ch02_similarity, ch03_dense_retrieval,
    ch04_evaluating_retrieval, ch05_keyword_and_hybrid, ch06_reranking, ch07_extractive_reader,
    ch08_generative_reader, ch09_the_whole_pipeline, ch10_making_it_better,
    ch11_beyond_one_machine, ch12_capstone))


def collect(chapters: Iterable[Chapter]) -> dict[str, Exercise]:
    """The exercises of ``chapters`` by name, chapter by chapter. Raises ValueError when two
    chapters define the same name: a learner's ``check`` must find one exercise only."""
    exercises: dict[str, Exercise] = {}
    for chapter in chapters:
        for name, ex in chapter.exercises.items():
            if name in exercises:
                raise ValueError(f"exercise {name!r} is defined in two chapters "
                                 f"(the second: {chapter.solution})")
            exercises[name] = ex
    return exercises


EXERCISES: dict[str, Exercise] = collect(CHAPTERS)
