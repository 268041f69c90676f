"""The book's numbers, checked on every run: each chapter of notebooks/ and each worked
solution of solutions/ is executed once (the ``executed`` fixture; the graders' tests reuse the
same run) and every number it prints is compared with docs/ledger.json, which `make render`
wrote (tools/ledger.py declares what is compared and the tolerances). A difference fails with
the notebook, the cell, the expected and the printed value: a change that moves a lesson's
number must move the book (and its prose) with it — `make render`, read the diff, commit."""
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import ledger  # noqa: E402
import render  # noqa: E402

BOOK = [*sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb")),
        *sorted((ROOT / "solutions").glob("[0-9][0-9]-*.ipynb"))]
RECORDED = ledger.load()
# a chapter that prints BM25 results (and runs in ~10 s once chapter 3 has filled the cache)
PLANTED = next((ROOT / "notebooks").glob("04-*.ipynb"))


def name_of(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@pytest.mark.parametrize("path", BOOK, ids=name_of)
def test_the_notebook_prints_the_numbers_of_the_book(path, executed):
    name = name_of(path)
    entry = RECORDED.get("notebooks", {}).get(name)
    assert entry is not None, f"docs/ledger.json has no entry for {name}: run `make render`"
    same = RECORDED.get("machine") == ledger.machine()
    problems = ledger.compare(name, entry["cells"], ledger.record(executed(path)), same)
    rule = ("same machine as the ledger: integers exact, decimals to their last digit" if same
            else f"another machine than the ledger's ({RECORDED.get('machine')}): within "
                 f"{ledger.MACHINE_RELATIVE:.0%} or {ledger.MACHINE_UNITS} units of the last digit")
    assert not problems, (f"{len(problems)} number(s) differ from the book ({rule}); if the "
                          "change is meant, `make render`, check the prose, commit docs/:\n"
                          + "\n".join(problems[:40]))


def test_the_ledger_reads_numbers_and_leaves_out_the_machines():
    assert ledger.numbers("MRR@10 0.523 on 1,024 questions, 2 of 3") == ["0.523", "1,024", "2",
                                                                        "3"]
    assert ledger.numbers("all-MiniLM-L6-v2 recall@5 top-50") == []
    assert ledger.numbers("rerank 50: 3.0 ms cached, 3187 ms with nothing cached") == []
    table = ("candidates  ms/query  recall@5\n"
             "         5       0.6     0.919\n"
             "        50       3.5     0.907\n"
             "done: 2 settings")
    assert ledger.numbers(table) == ["5", "0.919", "50", "0.907", "2"]
    assert ledger.numbers("{'k': 20, 'ms_per_query': 1.605, 'mrr@10': 0.79}") == ["20", "0.79"]


def test_the_tolerance_catches_a_moved_number_and_allows_a_rounding_flip():
    assert ledger.close("0.523", "0.524", same_machine=True)        # one unit of the last digit
    assert not ledger.close("0.523", "0.525", same_machine=True)
    assert not ledger.close("832", "833", same_machine=True)        # counts are exact
    assert ledger.close("832", "840", same_machine=False)           # 3% on another machine
    assert not ledger.close("0.52", "0.31", same_machine=False)
    # a float's full repr: digits past float32's precision move with batching, not the method
    assert ledger.close("0.6630215048789978", "0.663021445274353", same_machine=True)
    assert not ledger.close("0.6630215048789978", "0.6630250000000000", same_machine=True)
    # rounding error shown to be tiny: tiny it must stay, its digits are the batch's
    assert ledger.close("3.83e-07", "4.21e-07", same_machine=True)
    assert not ledger.close("3.83e-07", "2.10e-04", same_machine=True)
    assert not ledger.close("0", "3.0e-07", same_machine=True)      # an exact zero stays exact
    # what an earlier run left in the cache is the machine's state, not the method's
    assert ledger.numbers("embedding cache, this notebook so far: 87,708 vectors read back, "
                          "0 computed") == []
    assert ledger.numbers("answer cache on for 63 questions") == ["63"]
    want = [{"cell": 4, "id": "a", "numbers": ["0.52", "832"]}]
    got = [{"cell": 4, "id": "a", "numbers": ["0.31", "832"]}]
    assert ledger.compare("notebooks/05.ipynb", want, got, True) == [
        "notebooks/05.ipynb cell 4, number 1: expected 0.52, got 0.31"]
    assert ledger.compare("n", want, [], True) == [
        "n cell 4: printed no numbers; expected 0.52 832"]


@pytest.mark.parametrize("path", [PLANTED], ids=name_of)
def test_a_planted_drift_in_bm25_fails_naming_the_chapter(path, executed, tmp_path):
    """BM25's k1 raised by 1% in a temporary copy of the package: chapter 4 (which prints BM25
    rankings and their metrics) no longer prints the book's numbers, and the ledger says
    where. The check must be able to fail, or it proves nothing.

    It asks for chapter 4's own run first, so the copy finds that run's vectors in the cache
    and recomputes only BM25 (from an empty cache, beside the book's kernel, it took 91-112 s
    instead of ~9 s), and it runs while the next chapter runs in the background."""
    executed(path)
    shutil.copytree(ROOT / "ragbook", tmp_path / "ragbook",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "data").symlink_to(ROOT / "data")
    source = (tmp_path / "ragbook" / "bm25.py").read_text(encoding="utf-8")
    planted, n = re.subn(r"def __init__\(self, k1: float = 1\.2,",
                         "def __init__(self, k1: float = 1.212,", source)
    assert n == 1, "BM25Index's default k1 moved: update this test's planted change"
    (tmp_path / "ragbook" / "bm25.py").write_text(planted, encoding="utf-8")
    (tmp_path / "notebooks").mkdir()
    shutil.copy(path, tmp_path / "notebooks" / path.name)
    nb = render.execute(tmp_path / "notebooks" / path.name, timeout=1800,
                        env={"PYTHONPATH": str(tmp_path)})[0]
    name = name_of(path)
    problems = ledger.compare(name, RECORDED["notebooks"][name]["cells"], ledger.record(nb),
                              same_machine=True)
    assert problems and all(p.startswith(name) for p in problems)


def test_a_background_run_starts_from_the_sessions_environment(tmp_path, monkeypatch):
    """A kernel that the background runner (tests/conftest.py) starts while a test has changed
    ``os.environ`` gets the environment the runner began with: a cold suite once ran chapter
    2 with the temporary RAGBOOK_CACHE of the test that was running when its kernel started."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("book_conftest", ROOT / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)      # by path: tests/browser has a conftest.py too
    NotebookRuns = conftest.NotebookRuns

    monkeypatch.delenv("RAGBOOK_PROBE", raising=False)
    runs = NotebookRuns([])
    monkeypatch.setenv("RAGBOOK_PROBE", "a test's temporary value")
    path = tmp_path / "probe.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nprint(os.environ.get('RAGBOOK_PROBE'))")]), path)
    try:
        printed = runs.get(path).cells[0].outputs[0]["text"]
    finally:
        runs.stop()
    assert printed.strip() == "None"


def test_a_reply_that_a_poll_missed_is_read_on_the_next_step():
    """nbclient waits for a cell's reply with one poll of the kernel's socket; when that poll
    misses the reply (nbclient issue #312, with a widget on the page) it waits forever. The
    book's runs poll in steps, so the next step reads it, and the overall timeout still ends
    a wait for a reply that never comes."""
    import asyncio
    from queue import Empty

    polls = []

    async def missed_once(timeout=None):
        polls.append(timeout)
        if len(polls) == 1:                       # this poll never wakes up
            await (asyncio.sleep(timeout) if timeout is not None else asyncio.Event().wait())
            raise Empty
        return {"msg_type": "execute_reply"}

    wait = render.in_steps(missed_once, step=0.05)(timeout=None)
    assert asyncio.run(asyncio.wait_for(wait, 10)) == {"msg_type": "execute_reply"}
    assert polls == [0.05, 0.05]

    async def never(timeout=None):
        await asyncio.sleep(timeout)
        raise Empty

    with pytest.raises(Empty):
        asyncio.run(render.in_steps(never, step=0.05)(timeout=0.2))
