"""Exercises and solutions: exercises/ is generated from solutions/ and in sync; every blank
is reported NOT IMPLEMENTED, every worked solution PASSES, every registered exercise is used,
and the grader turns a learner's bug into feedback instead of a crash."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragbook import evaluate, grading
from ragbook.grading import check

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]-*.ipynb"))
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([A-Za-z0-9_]+)["']""")
REPORT = re.compile(r"^\[check\] ([A-Za-z0-9_]+): (PASSED|FAILED|NOT IMPLEMENTED|UNKNOWN)",
                    re.MULTILINE)

sys.path.insert(0, str(ROOT / "tools"))
import render  # noqa: E402
from make_exercises import exercise_of  # noqa: E402


def exercises_in(path: Path) -> set[str]:
    """Names passed to check("...") in a notebook's code cells: the chapter's exercises."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return set(CHECK_CALL.findall(src))


CHAPTERS = {p.name: exercises_in(p) for p in SOLUTIONS}


def run_notebook(path: Path) -> dict[str, list[str]]:
    """Execute a notebook in its own folder as the book's runs do (tools/render.py);
    return {exercise name: [report statuses]}."""
    return reports_of(render.execute(path, timeout=120)[0])


def reports_of(nb) -> dict[str, list[str]]:
    """{exercise name: [report statuses]} from an executed notebook's printed output."""
    text = "\n".join(out.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                     for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    reports: dict[str, list[str]] = {}
    for name, status in REPORT.findall(text):
        reports.setdefault(name, []).append(status)
    return reports


def test_there_are_solution_notebooks():
    assert SOLUTIONS, "no solutions/NN-*.ipynb found"
    for name, exercises in CHAPTERS.items():
        assert exercises, f"{name} calls check() on no exercise"
        unknown = exercises - set(grading.EXERCISES)
        assert not unknown, f"{name} checks exercises ragbook.grading does not register: {unknown}"


def test_exercises_regenerate_identically():
    for src in SOLUTIONS:
        target = ROOT / "exercises" / src.name
        assert target.exists(), f"{target.name} missing: run python tools/make_exercises.py"
        assert target.read_text(encoding="utf-8") == exercise_of(src), (
            f"exercises/{src.name} is out of date: run python tools/make_exercises.py")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_exercises.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_exercises_keep_no_solution():
    for src in SOLUTIONS:
        text = (ROOT / "exercises" / src.name).read_text(encoding="utf-8")
        assert "### BEGIN SOLUTION" not in text and "### END SOLUTION" not in text
        assert text.count("raise NotImplementedError") >= len(CHAPTERS[src.name])


@pytest.mark.parametrize("name", [p.name for p in SOLUTIONS])
def test_exercise_notebook_reports_not_implemented(name):
    reports = run_notebook(ROOT / "exercises" / name)
    assert set(reports) == CHAPTERS[name]
    wrong = {n: s for n, s in reports.items() if s != ["NOT IMPLEMENTED"] * len(s)}
    assert not wrong, f"blanks not reported as NOT IMPLEMENTED: {wrong}"


@pytest.mark.parametrize("name", [p.name for p in SOLUTIONS])
def test_solution_notebook_passes(name, executed):
    """The worked solutions pass, read from the same run the number ledger checks
    (tests/test_book.py): each solution notebook is executed once per session."""
    reports = reports_of(executed(ROOT / "solutions" / name))
    assert set(reports) == CHAPTERS[name]
    wrong = {n: s for n, s in reports.items() if s != ["PASSED"] * len(s)}
    assert not wrong, f"worked solutions that do not pass: {wrong}"


def test_every_registered_exercise_has_a_solution():
    used = set().union(*CHAPTERS.values())
    missing = set(grading.EXERCISES) - used
    assert not missing, (f"registered in ragbook.grading but in no solution notebook: "
                         f"{sorted(missing)}")


# -- the grader's feedback ---------------------------------------------------------------

def test_wrong_answer_shows_input_expected_and_got(capsys):
    from ragbook.chunking import rough_window_count

    assert not check("window_count", rough_window_count)
    out = capsys.readouterr().out
    # the rough count agrees until 50% overlap: the first failing case is (100000, 500, 250)
    assert re.match(r"\[check\] window_count: FAILED \(\d+ of \d+ cases\)\n", out), out
    assert "first failing case (3 of" in out
    assert "input:    100000, 500, 250" in out
    assert "expected: 399" in out and "got:      400" in out
    assert "your answer matches the rough count" in out
    assert "hint:" in out


def test_every_failing_case_is_listed_not_only_the_first(capsys):
    def floor_division(total, size, overlap):      # wrong on several cases, in two ways
        return (total - overlap) // (size - overlap)

    assert not check("window_count", floor_division)
    out = capsys.readouterr().out
    failed = int(re.search(r"FAILED \((\d+) of", out).group(1))
    assert failed > 2
    listed = re.findall(r"^    case (\d+): .* — (?:expected|got|raised|problem)", out, re.M)
    assert len(listed) == failed - 1, out             # the first in full, every other one line
    assert "got: -1" in out                          # the empty-text bug, behind the first


def test_a_wrong_answer_to_any_exercise_lists_every_failing_case(capsys):
    """A function that returns None fails every case of every exercise: the report shows the
    first in full and names each of the others, one line apiece (none hidden, none cut)."""
    for name in grading.EXERCISES:
        assert not check(name, lambda *args, **kwargs: None)
        out = capsys.readouterr().out
        failed = int(re.search(r"FAILED \((\d+) of", out).group(1))
        listed = [int(n) for n in re.findall(r"^    case (\d+): ", out, re.M)]
        assert len(listed) == failed - 1 == len(set(listed)), f"{name}:\n{out}"
        if failed > 1:
            assert f"other failing cases ({failed - 1}):" in out, out


def test_unrelated_exception_is_feedback_not_a_crash(capsys):
    def broken(total, size, overlap):
        return total / 0

    assert not check("window_count", broken)
    out = capsys.readouterr().out
    n = len(list(grading.EXERCISES["window_count"].cases()))
    assert f"[check] window_count: FAILED ({n} of {n} cases)" in out   # one raise stops nothing
    assert "first failing case (1 of" in out and "raised:   ZeroDivisionError" in out


@pytest.mark.parametrize("name,result", [("top_k_by_inner_product", None),  # forgot `return`
                                         ("window_count", [1, 2]),
                                         ("sliding_windows", None)])
def test_result_of_the_wrong_kind_is_feedback_not_a_crash(capsys, name, result):
    assert not check(name, lambda *args: result)
    out = capsys.readouterr().out
    assert f"[check] {name}: FAILED (" in out and "first failing case (1 of" in out
    assert "got:" in out


def test_not_implemented_and_pass_and_unknown(capsys):
    def blank(c):
        raise NotImplementedError("hint")

    assert not check("distance_from_cosine", blank)
    assert "[check] distance_from_cosine: NOT IMPLEMENTED" in capsys.readouterr().out
    assert check("distance_from_cosine", lambda c: (2 - 2 * c) ** 0.5)
    assert "[check] distance_from_cosine: PASSED" in capsys.readouterr().out
    assert not check("no_such_exercise", blank)
    assert "UNKNOWN" in capsys.readouterr().out


class _Hostile:
    """A result no check can read: comparing, printing, iterating or converting it raises."""

    def __eq__(self, other):
        raise RuntimeError("__eq__ exploded")

    __ne__ = __lt__ = __gt__ = __eq__
    __hash__ = None

    def __repr__(self):
        raise RuntimeError("__repr__ exploded")

    def __iter__(self):
        raise RuntimeError("__iter__ exploded")

    def __len__(self):
        raise RuntimeError("__len__ exploded")

    def __float__(self):
        raise RuntimeError("__float__ exploded")

    def __bool__(self):
        raise RuntimeError("__bool__ exploded")


def _raises_value_error(*args, **kwargs):
    raise ValueError("learner bug")


def _exits(*args, **kwargs):
    raise SystemExit(1)


BAD_LEARNERS = {
    "raises ValueError": _raises_value_error,
    "calls exit()": _exits,
    "returns None": lambda *a, **k: None,
    "returns a str": lambda *a, **k: "garbage",
    "returns a dict": lambda *a, **k: {"not": "it"},
    "returns NaN": lambda *a, **k: float("nan"),
    "returns an array": lambda *a, **k: np.array([[np.nan, 1.0], [2.0, 3.0]]),
    "returns a hostile object": lambda *a, **k: _Hostile(),
}


@pytest.mark.parametrize("learner", sorted(BAD_LEARNERS))
@pytest.mark.parametrize("name", sorted(grading.EXERCISES))
def test_check_never_raises_and_always_gives_feedback(capsys, name, learner):
    """Whatever the learner's function does, check prints a FAILED report with the count of
    failed cases and the first in detail (input, what went wrong, hint) and returns False; it
    never raises."""
    assert not check(name, BAD_LEARNERS[learner])
    out = capsys.readouterr().out
    assert re.match(rf"\[check\] {name}: FAILED \(\d+ of \d+ cases\)\n", out), out
    assert "first failing case (1 of" in out, out
    assert "input:" in out and "hint:" in out and ("got:" in out or "raised:" in out), out


def test_raised_exception_is_named_in_the_feedback(capsys):
    assert not check("minmax_normalise", _raises_value_error)
    out = capsys.readouterr().out
    assert "raised:   ValueError: learner bug" in out and "hint:" in out


def test_wrong_type_is_shown_as_got(capsys):
    assert not check("rescued_documents", lambda *a: {"k1"})   # a set, not a list
    assert "got:      {'k1'}" in capsys.readouterr().out


def test_not_a_function_and_bad_names_are_feedback(capsys):
    assert not check("cosine", 0.96)                      # called it instead of passing it
    assert "[check] cosine: FAILED" in capsys.readouterr().out
    assert not check(["cosine"], lambda a, b: 0.0)        # unhashable name
    assert "UNKNOWN" in capsys.readouterr().out


def test_a_broken_grader_is_reported_not_raised(capsys, monkeypatch):
    def cases():
        raise KeyError("grader bug")
        yield  # pragma: no cover

    monkeypatch.setitem(grading.EXERCISES, "broken_grader",
                        grading.Exercise("broken_grader", "n/a", cases))
    assert not check("broken_grader", lambda: None)
    out = capsys.readouterr().out
    assert out.startswith("[check] broken_grader: FAILED (the grader could not build its cases")


# -- expected values come from the package: the worked solutions pass, blanks do not -------

def solution_functions() -> dict[str, object]:
    """Every top-level function of solutions/NN-*.py, defined without running the chapter."""
    source = "\n".join(m.group(0) for path in sorted((ROOT / "solutions").glob("[0-9][0-9]-*.py"))
                       for m in re.finditer(r"^def \w+\(.*?(?=^\S)",
                                            path.read_text(encoding="utf-8"), re.S | re.M))
    namespace = {"math": math, "np": np, "re": re}
    exec(compile(source, "solutions", "exec"), namespace)
    return namespace


def test_every_worked_solution_passes_and_every_blank_is_not_implemented(capsys):
    """Fast, kernel-free twin of the notebook tests: each exercise's expected values (computed
    by calling ragbook) agree with the chapter's worked solution."""
    functions = solution_functions()
    missing = [n for n in grading.EXERCISES if n not in functions]
    assert not missing, f"no solution function named like these exercises: {missing}"

    def blank(*args, **kwargs):
        raise NotImplementedError("write me")

    for name in grading.EXERCISES:
        assert check(name, functions[name]), capsys.readouterr().out
        assert not check(name, blank)
        assert "NOT IMPLEMENTED" in capsys.readouterr().out


# -- feedback that teaches: how many cases failed, and which common mistake it looks like ----

MISTAKES = [(name, m) for name, ex in sorted(grading.EXERCISES.items()) for m in ex.mistakes]


def test_the_graders_know_common_mistakes():
    named = {n for n, _ in MISTAKES}
    for name in ("rrf", "recall_at_k", "hit_at_k", "reciprocal_rank", "mean_reciprocal_rank",
                 "ndcg_at_k", "window_count", "cosine", "best_span", "answer_f1", "maxsim"):
        assert name in named, f"{name} has no common mistakes registered"


@pytest.mark.parametrize("name,mistake", MISTAKES,
                         ids=[f"{n}: {m.name}" for n, m in MISTAKES])
def test_every_mistake_is_reported_by_name(capsys, name, mistake):
    """Each wrong key differs from the answer key on some case, and a learner who makes
    that mistake gets the count of failed cases and the named advice."""
    assert not check(name, mistake.wrong)
    out = capsys.readouterr().out
    total = len(list(grading.EXERCISES[name].cases()))
    assert re.match(rf"\[check\] {name}: FAILED \(\d+ of {total} cases\)\n", out), out
    assert f"mistake:  your answer matches {mistake.name} — check {mistake.advice}" in out, out


def _first_hit_rank(relevant, ranked, start=1):
    return next((r for r, d in enumerate(ranked, start) if relevant.get(d, 0) > 0), None)


def rr_k_short(relevant, ranked, k):            # `ranked[:k-1]`: the hole MRR used to let by
    rank = _first_hit_rank(relevant, ranked[:k - 1])
    return 1.0 / rank if rank else 0.0


def rr_from_0(relevant, ranked, k):
    rank = _first_hit_rank(relevant, ranked[:k], start=0)
    return 0.0 if rank is None else 1.0 / rank


def mrr_of(rr):
    def mrr(rels, rankeds, k):
        return sum(rr(r, d, k) for r, d in zip(rels, rankeds, strict=True)) / len(rels)
    return mrr


def recall_over_k(relevant, ranked, k):
    return sum(1 for d in set(ranked[:k]) if relevant.get(d, 0) > 0) / k


def recall_k_short(relevant, ranked, k):
    wanted = [d for d, r in relevant.items() if r > 0]
    return sum(d in ranked[:k - 1] for d in wanted) / len(wanted) if wanted else 0.0


def hit_k_short(relevant, ranked, k):
    return 1.0 if any(relevant.get(d, 0) > 0 for d in ranked[:k - 1]) else 0.0


def ndcg_log2_rank(relevant, ranked, k):        # i from 0 with log2(i + 1): log2(rank)
    def dcg(gains):
        return sum(g / math.log2(i + 1) for i, g in enumerate(gains))
    best = dcg(sorted((r for r in relevant.values() if r > 0), reverse=True)[:k])
    return dcg([relevant.get(d, 0) for d in ranked[:k]]) / best if best else 0.0


def rrf_from_0(rankings, k):
    totals = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            totals[doc] = totals.get(doc, 0.0) + 1.0 / (k + rank)
    return sorted(totals.items(), key=lambda item: (-item[1], item[0]))


def window_count_stride_size(total, size, overlap):
    return 0 if total <= 0 else 1 if total <= size else math.ceil((total - size) / size) + 1


def best_span_softmax_then_mask(start, end, allowed, cap):   # a loop, as a learner writes it
    ps, pe = np.exp(start) / np.exp(start).sum(), np.exp(end) / np.exp(end).sum()
    best = (-1, -1, -1.0)
    for i in np.flatnonzero(allowed):
        for j in range(i, min(i + cap, len(end))):
            if allowed[j] and ps[i] * pe[j] > best[2]:
                best = (int(i), int(j), float(ps[i] * pe[j]))
    return best


def f1_of_sets(prediction, gold):
    p = set(evaluate.normalize_answer(prediction).split())
    g = set(evaluate.normalize_answer(gold).split())
    if not p & g:
        return 0.0
    precision = len(p & g) / len(evaluate.normalize_answer(prediction).split())
    recall = len(p & g) / len(evaluate.normalize_answer(gold).split())
    return 2 * precision * recall / (precision + recall)


HAND_WRITTEN = [  # (exercise, a learner's own wrong function, the mistake it should be named)
    ("reciprocal_rank", rr_k_short, "a k off by one"),
    ("mean_reciprocal_rank", mrr_of(rr_k_short), "a k off by one"),
    ("reciprocal_rank", rr_from_0, "ranks counted from 0"),
    ("mean_reciprocal_rank", mrr_of(rr_from_0), "ranks counted from 0"),
    ("recall_at_k", recall_over_k, "precision@k handed in as recall"),
    ("recall_at_k", recall_k_short, "a k off by one"),
    ("hit_at_k", hit_k_short, "a k off by one"),
    ("ndcg_at_k", ndcg_log2_rank, "a discount of log2(rank)"),
    ("rrf", rrf_from_0, "ranks counted from 0"),
    ("window_count", window_count_stride_size, "a stride of size"),
    ("cosine", lambda a, b: float(a @ b), "the raw dot product"),
    ("best_span", best_span_softmax_then_mask, "masking after the softmax"),
    ("answer_f1", f1_of_sets, "set instead of multiset F1"),
]


@pytest.mark.parametrize("name,fn,mistake", HAND_WRITTEN,
                         ids=[f"{n}: {m}" for n, _, m in HAND_WRITTEN])
def test_a_learners_own_wrong_code_is_recognised(capsys, name, fn, mistake):
    assert not check(name, fn)
    out = capsys.readouterr().out
    assert re.match(rf"\[check\] {name}: FAILED \(\d+ of \d+ cases\)\n", out), out
    assert f"your answer matches {mistake}" in out, out


def test_an_unrelated_wrong_answer_names_no_mistake(capsys):
    assert not check("recall_at_k", lambda relevant, ranked, k: 0.5)
    out = capsys.readouterr().out
    assert "FAILED (" in out and "matches" not in out


def test_a_raise_in_one_case_does_not_stop_the_count(capsys):
    def fails_twice(relevant, ranked, k):   # right except for an empty ranking
        if not ranked:
            raise IndexError("list index out of range")
        return evaluate.recall_at_k(relevant, ranked, k)

    assert not check("recall_at_k", fails_twice)
    out = capsys.readouterr().out
    empty = sum(1 for c in grading.EXERCISES["recall_at_k"].cases() if not c.args[1])
    assert out.startswith(f"[check] recall_at_k: FAILED ({empty} of "), out
    assert "raised:   IndexError: list index out of range" in out


# -- "Try it" cells: a broken function is one line of advice, never a traceback -------------

def try_it_cells() -> dict[str, str]:
    """The code cell under each solutions/NN-*.py "Try it (ungraded)" heading."""
    cells = {}
    for path in sorted((ROOT / "solutions").glob("[0-9][0-9]-*.py")):
        text = path.read_text(encoding="utf-8")
        after = text.split("## Try it (ungraded)", 1)[1]
        cells[path.name] = after.split("# %%\n", 1)[1].split("\n# %%", 1)[0]
    return cells


def test_trying_turns_errors_into_one_line(capsys):
    def split_with_offsets(text, size):
        return text + size                      # a TypeError

    with grading.trying("split_with_offsets"):
        split_with_offsets("abc", 3)
    assert capsys.readouterr().out == (
        "split_with_offsets raised TypeError: can only concatenate str (not \"int\") to str; "
        "run its check cell above to see the failing case\n")
    with grading.trying("split_with_offsets"):
        raise NotImplementedError("hint")
    assert capsys.readouterr().out == "complete split_with_offsets first\n"


@pytest.mark.parametrize("chapter", sorted(try_it_cells()))
def test_try_it_cell_with_a_broken_function_prints_one_line(capsys, chapter):
    """Every Try it cell uses trying(); with every exercise function raising TypeError it
    prints the one-line message and does not raise."""
    source = try_it_cells()[chapter]
    assert "with trying(" in source and "except NotImplementedError" not in source, source

    def broken(name):
        """A learner's function called ``name`` (as its traceback shows) that raises."""
        def fn(*args, **kwargs):
            raise TypeError("unsupported operand")
        fn.__code__ = fn.__code__.replace(co_name=name)
        return fn

    namespace = {"np": np, "math": math, "re": re, "check": check, "trying": grading.trying}
    namespace.update({name: broken(name) for name in grading.EXERCISES})
    exec(compile(source, chapter, "exec"), namespace)   # must not raise
    out = capsys.readouterr().out
    assert "raised TypeError: unsupported operand; run its check cell above" in out, out
    assert "Traceback" not in out



def test_a_check_cell_echoes_nothing_but_the_verdict_is_usable():
    """The printed report is the feedback: the value check returns must not add a bare
    True/False under every check cell (IPython calls _ipython_display_ instead of its repr)."""
    from IPython.core.interactiveshell import InteractiveShell

    verdict = check("distance_from_cosine", lambda c: (2 - 2 * c) ** 0.5)
    assert verdict and not check("distance_from_cosine", lambda c: c)
    assert InteractiveShell.instance().display_formatter.format(verdict) == ({}, {})


def test_real_data_cases_name_the_input_and_the_first_question_that_differs(capsys):
    """precision@k handed in as recall, on the real dev questions: the report names the input
    in words (not a truncated list), the first question whose own recall differs, and the
    mistake."""
    def precision_as_recall(relevant, rankings, k):
        return sum(len({d for d, r in rel.items() if r > 0} & set(ranked[:k])) / k
                   for rel, ranked in zip(relevant, rankings, strict=True)) / len(relevant)

    assert not check("mean_recall", precision_as_recall)
    out = capsys.readouterr().out
    assert "input:    BM25's top 10 for the first" in out and "..." not in out.split("\n")[2]
    assert re.search(r"first item that differs: \S+ '.+'\n  its input: \[\{", out), out
    assert "your answer matches precision@k handed in as recall" in out


@pytest.mark.parametrize("name, wrong, mistake", [
    ("corpus_idf", lambda docs, term: math.log(
        1 + (len(docs) - sum(d.count(term) for d in docs) + 0.5)
        / (sum(d.count(term) for d in docs) + 0.5)), "document frequency counting occurrences"),
    ("rrf", lambda rankings, rrf_k: sorted(
        {d: sum(1 / (rrf_k + r.index(d)) for r in rankings if d in r)
         for rank in rankings for d in rank}.items(), key=lambda t: (-t[1], t[0])),
     "ranks counted from 0"),
])
def test_common_mistakes_are_named(capsys, name, wrong, mistake):
    assert not check(name, wrong)
    assert f"your answer matches {mistake}" in capsys.readouterr().out
