"""Exercises and solutions: exercises/ is generated from solutions/ and in sync; every blank
is reported NOT IMPLEMENTED, every worked solution PASSES, every registered exercise is used,
and the grader turns a learner's bug into feedback instead of a crash."""
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from ragbook import grading
from ragbook.grading import check

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "solutions").glob("[0-9][0-9]-*.ipynb"))
CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([A-Za-z0-9_]+)["']""")
REPORT = re.compile(r"^\[check\] ([A-Za-z0-9_]+): (PASSED|FAILED|NOT IMPLEMENTED|UNKNOWN)",
                    re.MULTILINE)

sys.path.insert(0, str(ROOT / "tools"))
from make_exercises import exercise_of  # noqa: E402


def exercises_in(path: Path) -> set[str]:
    """Names passed to check("...") in a notebook's code cells: the chapter's exercises."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    src = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return set(CHECK_CALL.findall(src))


CHAPTERS = {p.name: exercises_in(p) for p in SOLUTIONS}


def run_notebook(path: Path) -> dict[str, list[str]]:
    """Execute a notebook in its own folder; return {exercise name: [report statuses]}."""
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
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
        assert not unknown, f"{name} checks exercises grading.py does not register: {unknown}"


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
def test_solution_notebook_passes(name):
    reports = run_notebook(ROOT / "solutions" / name)
    assert set(reports) == CHAPTERS[name]
    wrong = {n: s for n, s in reports.items() if s != ["PASSED"] * len(s)}
    assert not wrong, f"worked solutions that do not pass: {wrong}"


def test_every_registered_exercise_has_a_solution():
    used = set().union(*CHAPTERS.values())
    missing = set(grading.EXERCISES) - used
    assert not missing, f"registered in grading.py but in no solution notebook: {sorted(missing)}"


# -- the grader's feedback ---------------------------------------------------------------

def test_wrong_answer_shows_input_expected_and_got(capsys):
    from ragbook.chunking import rough_window_count

    assert check("window_count", rough_window_count) is False
    out = capsys.readouterr().out
    # the rough count agrees until 50% overlap: the first failing case is (100000, 500, 250)
    assert "[check] window_count: FAILED (case 3 of" in out
    assert "input:    100000, 500, 250" in out
    assert "expected: 399" in out and "got:      400" in out
    assert "hint:" in out


def test_unrelated_exception_is_feedback_not_a_crash(capsys):
    def broken(total, size, overlap):
        return total / 0

    assert check("window_count", broken) is False
    out = capsys.readouterr().out
    assert "[check] window_count: FAILED (case 1 of" in out
    assert "raised:   ZeroDivisionError" in out


@pytest.mark.parametrize("name,result", [("top_k_by_inner_product", None),  # forgot `return`
                                         ("window_count", [1, 2]),
                                         ("sliding_windows", None)])
def test_result_of_the_wrong_kind_is_feedback_not_a_crash(capsys, name, result):
    assert check(name, lambda *args: result) is False
    out = capsys.readouterr().out
    assert f"[check] {name}: FAILED (case 1 of" in out and "got:" in out


def test_not_implemented_and_pass_and_unknown(capsys):
    def blank(c):
        raise NotImplementedError("hint")

    assert check("distance_from_cosine", blank) is False
    assert "[check] distance_from_cosine: NOT IMPLEMENTED" in capsys.readouterr().out
    assert check("distance_from_cosine", lambda c: (2 - 2 * c) ** 0.5) is True
    assert "[check] distance_from_cosine: PASSED" in capsys.readouterr().out
    assert check("no_such_exercise", blank) is False
    assert "UNKNOWN" in capsys.readouterr().out
