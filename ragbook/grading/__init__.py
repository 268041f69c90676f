"""Graded exercises: ``check("name", your_function)`` runs every case of a named exercise
against your function and prints how many failed; for the first that failed, the input,
what was expected, what you returned (or raised), and a hint; then one line for every other
failing case, so a second bug does not hide behind the first. When your answers match a
common mistake (a wrong variant the exercise knows), it names the mistake and what to
check. It never raises, so a notebook keeps running.

Expected values come from the ``ragbook`` implementation of the same idea: the package is
the answer key. Each exercise is a small function that yields cases; its ``mistakes`` are
the wrong keys, small functions that compute what a common mistake gives.

The first line of every report has a fixed shape that tools read::

    [check] window_count: PASSED (8/8 cases)
    [check] window_count: FAILED (2 of 8 cases)
    [check] window_count: NOT IMPLEMENTED (replace `raise NotImplementedError` ...)
    [check] windw_count: UNKNOWN exercise; known ones: ...

``trying("name")`` is for the ungraded "Try it" cells: it turns a learner's unfinished or
broken function into one line of advice instead of a traceback.

Layout: ``core`` (Case, Mistake, Exercise, Chapter and the helpers the graders share),
``corpus`` (the help-centre material several chapters grade on), one module per chapter,
``chNN_<solution name>`` for ``solutions/NN-<solution name>.py``, ``registry`` (every
chapter's exercises, collected in chapter order into ``EXERCISES``) and ``checking``
(``check`` and ``trying``).
"""
from .checking import check, trying
from .core import Case, Mistake
from .core import Exercise as Exercise  # public (tests build one) though not in __all__
from .registry import EXERCISES

__all__ = ["check", "trying", "Case", "Mistake", "EXERCISES"]
