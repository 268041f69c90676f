"""What a notebook calls: ``check("name", fn)`` runs a registered exercise against the
learner's function and prints a report; ``trying(...)`` turns a broken function in an
ungraded "Try it" cell into one line of advice."""
from __future__ import annotations

import contextlib
import copy
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .core import Case, Exercise, Mistake, describe, same, show
from .registry import EXERCISES

__all__ = ["check", "trying", "Verdict"]


@dataclass
class _Outcome:
    """What one call gave: a result, or the exception it raised."""

    result: Any = None
    error: BaseException | None = None


def _call(fn: Callable, case: Case) -> _Outcome:
    # copies: a function that edits its input in place must not change later cases
    try:
        return _Outcome(fn(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs)))
    except NotImplementedError:
        raise
    except (Exception, SystemExit) as err:  # the learner's bug: feedback, not a crash
        return _Outcome(error=err)


def _problem(out: _Outcome, case: Case, tol: float) -> str | None:
    """None when ``out`` is right for ``case``, else the lines that say what was wrong."""
    if out.error is not None:
        return f"raised:   {describe(out.error)}"
    got = out.result
    try:
        if case.verify:
            problem = case.verify(got)
            if problem and "got:" not in problem:  # a property check: show the result too
                problem = f"got:      {show(got)}\n  problem:  {problem}"
            return problem or None
        if bool(same(got, case.expected, tol)):
            return None
        return f"expected: {show(case.expected)}\n  got:      {show(got)}"
    except Exception as err:  # a result of the wrong kind (None, an array, ...): feedback too
        return f"got:      {show(got)}, which could not be checked ({describe(err)})"


def _alike(a: _Outcome, b: _Outcome, tol: float) -> bool:
    """Both raised the same kind of exception, or both returned equal results."""
    if a.error is not None or b.error is not None:
        return a.error is not None and b.error is not None and type(a.error) is type(b.error)
    try:
        return bool(same(a.result, b.result, tol))
    except Exception:
        return False


def _matching_mistakes(ex: Exercise, cases: list[Case], outcomes: list[_Outcome]) -> list[Mistake]:
    """The mistakes whose wrong answers the learner gave on every case they make wrong."""
    found = []
    for mistake in ex.mistakes:
        try:
            wrong = [_call(mistake.wrong, c) for c in cases]
        except NotImplementedError:
            continue
        differs = [i for i, (w, c) in enumerate(zip(wrong, cases, strict=True))
                   if _problem(w, c, ex.tolerance)]
        if differs and all(_alike(outcomes[i], wrong[i], ex.tolerance) for i in differs):
            found.append(mistake)
    return found


def check(name: str, fn: Callable) -> Verdict:
    """Run exercise ``name`` against ``fn``; print feedback; return a ``Verdict``, true when
    all cases pass.

    Never raises: whatever ``fn`` does (raises, returns None, a wrong type, NaN), the
    outcome is a printed report and False. Only a keyboard interrupt gets through."""
    if not isinstance(name, str) or name not in EXERCISES:
        print(f"[check] {show(name, 80)}: UNKNOWN exercise; known ones: "
              f"{', '.join(sorted(EXERCISES))}")
        return Verdict(False)
    ex = EXERCISES[name]
    try:
        cases = list(ex.cases())
    except Exception as err:  # a bug in the grader or the package, not the learner's
        print(f"[check] {name}: FAILED (the grader could not build its cases: "
              f"{describe(err)}); this is not your code's fault, please report it")
        return Verdict(False)
    total = len(cases)
    if not callable(fn):
        print(f"[check] {name}: FAILED ({total} of {total} cases)\n  got:      {show(fn, 80)}, "
              f"which is not a function; pass the function itself, without calling it\n"
              f"  hint:     {ex.hint}")
        return Verdict(False)
    try:
        outcomes = [_call(fn, case) for case in cases]
    except NotImplementedError:
        print(f"[check] {name}: NOT IMPLEMENTED (replace `raise NotImplementedError` "
              f"with your code; its message is a first hint)")
        return Verdict(False)
    problems = [_problem(out, c, ex.tolerance) for out, c in zip(outcomes, cases, strict=True)]
    failed = [n for n, p in enumerate(problems) if p]
    if not failed:
        print(f"[check] {name}: PASSED ({total}/{total} cases)")
        return Verdict(True)
    first = failed[0]
    case = cases[first]
    lines = [f"[check] {name}: FAILED ({len(failed)} of {total} cases)",
             f"  first failing case ({first + 1} of {total}):",
             f"  input:    {case.about or _call_text(case)}", f"  {problems[first]}"]
    lines += _first_differing_item(fn, case, ex.tolerance)
    lines += _other_failures(cases, problems, failed[1:])
    named = dict.fromkeys(f"  mistake:  your answer matches {m.name} — check {m.advice}"
                          for m in _matching_mistakes(ex, cases, outcomes))
    lines += list(named)
    lines.append(f"  hint:     {ex.hint}")
    print("\n".join(lines))
    return Verdict(False)


def _other_failures(cases: list[Case], problems: list, others: list[int]) -> list[str]:
    """One line per further failing case, every one of them, so a second bug does not hide
    behind the first: its number, input and what was wrong."""
    if not others:
        return []
    lines = [f"  other failing cases ({len(others)}):"]
    for n in others:
        what = "; ".join(" ".join(part.split()) for part in problems[n].split("\n"))
        about = " ".join(str(cases[n].about or _call_text(cases[n])).split())
        lines.append(f"    case {n + 1}: {_cut(about, 60)} — {_cut(what, 120)}")
    return lines


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _call_text(case: Case) -> str:
    return ", ".join([show(a, 80) for a in case.args] +
                     [f"{k}={show(v, 80)}" for k, v in case.kwargs.items()])


def _first_differing_item(fn: Callable, case: Case, tol: float) -> list[str]:
    """For a result over many questions (``Case.items``): the first question whose own
    result differs, with its input, the expected and the learner's value."""
    if case.items is None:
        return []
    try:
        items = list(case.items())
    except Exception:  # the grader's bug: the main report still stands
        return []
    for label, args, expected in items:
        sub = Case(args, expected)
        try:
            problem = _problem(_call(fn, sub), sub, tol)
        except NotImplementedError:
            return []
        if problem:
            return [f"  first item that differs: {label}", f"  its input: {_call_text(sub)}",
                    f"  {problem}"]
    return []


class Verdict:
    """What ``check`` returns: true when every case passed. It displays nothing in a
    notebook — the printed report is the feedback, and a bare ``True``/``False`` under every
    check cell would only repeat it."""

    __slots__ = ("passed",)

    def __init__(self, passed: bool):
        self.passed = passed

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"Verdict(passed={self.passed})"

    def _ipython_display_(self) -> None:
        """Show nothing (IPython calls this instead of echoing the repr)."""


def _listing(names: tuple[str, ...], last: str) -> str:
    """``a``, ``a and b``, ``a, b and c`` (with ``last`` for "and"/"or")."""
    return f" {last} ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _culprit(err: BaseException, names: tuple[str, ...]) -> str | None:
    """The innermost of ``names`` that the exception passed through, if any."""
    inside = [f.name for f in traceback.extract_tb(err.__traceback__) if f.name in names]
    return inside[-1] if inside else None


@contextlib.contextmanager
def trying(*names: str):
    """For an ungraded "Try it" cell that uses your functions ``names``: run the cell's
    body; when one of them is not written yet or fails, print one line that says which and
    what went wrong, instead of a traceback.

    >>> with trying("recall_at_k"):
    ...     raise NotImplementedError
    complete recall_at_k first
    """
    names = names or ("the exercises above",)
    try:
        yield
    except NotImplementedError as err:
        print(f"complete {_culprit(err, names) or _listing(names, 'and')} first")
    except Exception as err:  # the learner's bug: one line of advice, no traceback
        fn = _culprit(err, names)
        if fn:
            print(f"{fn} raised {describe(err)}; run its check cell above to see the failing "
                  f"case")
        else:  # raised in the cell itself, on what the functions returned
            print(f"{describe(err)}, using what {_listing(names, 'or')} returned; run "
                  f"{'its check cell' if len(names) == 1 else 'their check cells'} above to see "
                  f"the failing case")
