"""The grader's building blocks: a ``Case`` (one call of the learner's function and what it
must give), a ``Mistake`` (a common wrong answer, as a function), an ``Exercise`` (a name, a
hint, its cases and mistakes) and a ``Chapter`` (the exercises one chapter module defines).
Also the helpers every chapter shares: comparing and showing values, and ``predicted`` for
the "write down your prediction" exercises.

A chapter module makes one ``Chapter`` and decorates each case generator with
``CHAPTER.exercise(...)``; ``ragbook.grading.registry`` collects the chapters into
``EXERCISES``. Nothing here registers anything globally.
"""
from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Case", "Mistake", "Exercise", "Chapter", "same", "describe", "show", "predicted",
           "divide_quietly"]


@dataclass
class Case:
    """One call of the learner's function: ``args`` in, ``expected`` out (compared with
    ``same``), or a ``verify(result) -> error message | None`` for property checks.

    Real-data cases have inputs too large to print: ``about`` names the input in words
    instead, and ``items()`` — for a result computed over many questions or articles —
    yields ``(label, args, expected)`` for each one alone, so a failure report can show the
    first question whose own result differs rather than a truncated list."""

    args: tuple
    expected: Any = None
    verify: Callable[[Any], str | None] | None = None
    kwargs: dict = field(default_factory=dict)
    about: str | None = None
    items: Callable[[], Iterable[tuple[str, tuple, Any]]] | None = None


@dataclass
class Mistake:
    """A common wrong answer: ``wrong`` takes the learner's arguments and returns (or raises)
    what that mistake gives; ``advice`` says what to check. Reported when the learner's
    results equal ``wrong``'s on every case where ``wrong`` is wrong (at least one)."""

    name: str
    advice: str
    wrong: Callable


@dataclass
class Exercise:
    """A graded exercise: ``cases()`` yields its ``Case`` s (rebuilt on every check),
    ``hint`` ends every failure report, ``tolerance`` is how close a number must be, and
    ``mistakes`` are the common wrong answers a report can name."""

    name: str
    hint: str
    cases: Callable[[], Iterator[Case]]
    tolerance: float = 1e-6
    mistakes: tuple[Mistake, ...] = ()


class Chapter:
    """The exercises of one chapter, in the order they are defined: ``solution`` names the
    ``solutions/NN-*.py`` file whose functions they grade."""

    def __init__(self, solution: str):
        self.solution = solution
        self.exercises: dict[str, Exercise] = {}

    def exercise(self, name: str, hint: str, tolerance: float = 1e-6,
                 mistakes: tuple[Mistake, ...] = ()):
        """Decorator: the decorated function, which yields ``Case`` s, becomes exercise
        ``name`` of this chapter. Raises ValueError when the chapter already has ``name``."""
        def register(fn: Callable[[], Iterator[Case]]):
            if name in self.exercises:
                raise ValueError(f"exercise {name!r} is defined twice in {self.solution}")
            self.exercises[name] = Exercise(name, hint, fn, tolerance, tuple(mistakes))
            return fn
        return register

    def __repr__(self) -> str:
        return f"Chapter({self.solution!r}, {len(self.exercises)} exercises)"


def same(got, expected, tol: float) -> bool:
    """Whether the learner's ``got`` equals ``expected``: numbers within ``tol`` (NaN equals
    NaN), arrays by shape and values, lists and tuples item by item (a numpy array counts as
    a list), anything else with ``==``."""
    if isinstance(expected, (float, np.floating)) or isinstance(got, (float, np.floating)):
        try:
            a, b = float(got), float(expected)
        except (TypeError, ValueError):
            return False
        return math.isclose(a, b, rel_tol=tol, abs_tol=tol) or (math.isnan(a) and math.isnan(b))
    if isinstance(expected, np.ndarray):
        got = np.asarray(got)
        return got.shape == expected.shape and np.allclose(got, expected, atol=tol, equal_nan=True)
    if isinstance(expected, (list, tuple)):
        if isinstance(got, np.ndarray):  # np.argsort(...)[:k] is as good as a list of ints
            got = got.tolist()
        return (isinstance(got, (list, tuple)) and len(got) == len(expected)
                and all(same(g, e, tol) for g, e in zip(got, expected, strict=True)))
    return got == expected


def describe(err: BaseException) -> str:
    """``TypeError: message``, safe even when the exception's own ``str`` fails."""
    return traceback.format_exception_only(type(err), err)[-1].strip()


def show(value, limit: int = 300) -> str:
    """``repr(value)`` cut to ``limit`` characters, safe even when the ``repr`` fails."""
    try:
        text = repr(value)
    except Exception as err:  # a learner's object with a broken __repr__ is still feedback
        text = f"<{type(value).__name__} object; repr() raised {type(err).__name__}>"
    return text if len(text) <= limit else text[:limit] + " ..."


def predicted(actual, ok: Callable[[float], bool], tolerance: str):
    """A verify for a number the learner predicted: it must be a number for which
    ``ok(number)`` holds; the report names the actual value and the tolerance."""
    def verify(got):
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(got)):
            return "expected a number: your prediction, written before you run the next cell"
        if ok(float(got)):
            return None
        return f"expected: {actual:g} ({tolerance})\n  got:      {show(got)}"
    return verify


def divide_quietly(a, by):
    """``a / by`` as numpy does it, nan for 0 / 0, without the warning."""
    with np.errstate(all="ignore"):
        return np.asarray(a, dtype=np.float64) / by
