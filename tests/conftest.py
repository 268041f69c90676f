"""Test-wide settings: the offline profile (nothing may touch the network), fixed seeds.

And the furniture many test files share, built once per session:

* ``hc``: the help centre (``load_helpcentre()``: articles, questions, splits);
* ``hc_chunks``: its articles chunked as most tests need them (256 tokens, overlap 32);
* ``hc_hybrid``: ``HybridRetriever(DenseIndex(Encoder()), BM25Index())`` built on ``hc_chunks``;
* ``article_index(names)``: a saved index (``ragbook index``) of help-centre articles by
  name, built once per list — by default ``SIX_ARTICLES``;
* ``six_questions``: one labelled question per ``SIX_ARTICLES`` article, as ``(id, text,
  gold)`` triples and as the JSONL file ``ragbook eval`` and ``ragbook tune`` read;
* ``executed(path)``: a chapter or solution notebook executed once per session (as
  tools/render.py runs it), shared by the number ledger (test_book.py) and the graders'
  checks (test_exercises.py), so no notebook runs twice;
* ``@pytest.mark.needs_milvus``: skips a test unless pymilvus and Milvus Lite are installed.

Shared means read-only: search them, wrap them, slice them. A test that changes what it is
given (build/add/update/delete/close, settings set in place, list edits) builds its own.
ragbook is imported inside the fixtures, after the environment below is set."""
import os
from importlib.util import find_spec

import pytest

os.environ.setdefault("RAGBOOK_PROFILE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The notebooks run in a kernel beside the tests (NotebookRuns): two processes on two cores.
# OpenMP threads that spin while they wait for a sibling the scheduler has put off burn the
# core the other process needs: an encode beside a busy core took 11.2 s and 13.1 CPU-s with
# torch's default waiting, 8.3 s and 8.4 CPU-s with passive waiting, and ~4.8 s alone either
# way (bench/omp_wait.py). Set before torch loads; kernels and subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HAVE_MILVUS = find_spec("pymilvus") is not None and find_spec("milvus_lite") is not None

SIX_ARTICLES = ("billing-refund-policy", "billing-cancel-subscription", "billing-invoices",
                "account-enterprise-plan", "account-export-csv", "account-free-plan-overview")
SIX_QUESTIONS = (("q1", "how long is the refund window for enterprise contracts?",
                  "billing-refund-policy"),
                 ("q2", "how do I cancel my subscription", "billing-cancel-subscription"),
                 ("q3", "export tickets to a CSV file", "account-export-csv"),
                 ("q4", "where do I find my invoices", "billing-invoices"),
                 ("q5", "what does the free plan include", "account-free-plan-overview"),
                 ("q6", "what comes with the enterprise plan", "account-enterprise-plan"))


@pytest.fixture
def at_once():
    """``at_once(call, n=64)``: ``call()`` from ``n`` threads started together."""
    return _at_once


def _at_once(call, n: int = 64, join: float = 60):
    """``(results, seconds)``: each result what ``call`` returned or the name of the
    ``OSError`` it raised (a refused or reset connection), in the order they finished."""
    import threading
    import time

    got, lock = [], threading.Lock()

    def one():
        try:
            result = call()
        except OSError as err:
            result = type(err).__name__
        with lock:
            got.append(result)

    threads = [threading.Thread(target=one) for _ in range(n)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(join)
    return got, time.monotonic() - started


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_milvus: skipped unless pymilvus and Milvus Lite "
                                       'are installed (pip install "ragbook[milvus]")')


def pytest_collection_modifyitems(config, items):
    """Whatever the command line, in this order: the package tests; the browser tests
    (tests/browser), which open chapters 0-5, by then run in the background and so read
    their vectors from the cache; last the tests that ask for an executed notebook (their
    notebooks run in the background meanwhile, see ``NotebookRuns``), grouped by notebook.
    needs_milvus tests skip without Milvus."""
    def group(item):
        return ("executed" in getattr(item, "fixturenames", ()),
                item.get_closest_marker("browser") is not None)

    # The last group by notebook, in the order the notebooks are first asked for (the order
    # they run in), so a test that needs chapter 4 runs while chapter 5 runs, not at the end.
    order: dict = {}
    for item in items:
        order.setdefault(notebook_of(item), len(order))
    items.sort(key=lambda item: (*group(item), order[notebook_of(item)]))
    if HAVE_MILVUS:
        return
    skip = pytest.mark.skip(reason='needs pip install "ragbook[milvus]"')
    for item in items:
        if item.get_closest_marker("needs_milvus") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def hc():
    """The help centre: ``load_helpcentre()``."""
    from ragbook.datasets import load_helpcentre

    return load_helpcentre()


@pytest.fixture(scope="session")
def hc_chunks(hc):
    """The help centre's articles in chunks of 256 tokens with 32 of overlap (a list: do not
    edit it in place)."""
    from ragbook.chunking import chunk_documents

    return chunk_documents(hc.documents, size=256, overlap=32)


@pytest.fixture(scope="session")
def hc_hybrid(hc_chunks):
    """A hybrid with default settings on ``hc_chunks``, shared by every test that asks for it:
    never rebuild, update or close it, nor change its settings in place."""
    from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever

    return HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(hc_chunks)


@pytest.fixture(scope="session")
def article_index(tmp_path_factory):
    """``build(names=SIX_ARTICLES, without=())`` -> the path of a saved index of those
    help-centre articles (less ``without``), made by ``ragbook index`` once per list of
    names (read-only: ask, eval, tune and load it; a test that updates an index builds its
    own)."""
    import shutil

    from ragbook.cli import main
    from ragbook.datasets import data_dir

    built = {}

    def build(names=SIX_ARTICLES, without=()):
        names = tuple(n for n in names if n not in without)
        if names not in built:
            root = tmp_path_factory.mktemp("docs")
            for name in names:
                shutil.copy(data_dir() / "helpcentre" / "articles" / f"{name}.md",
                            root / f"{name}.md")
            out = tmp_path_factory.mktemp("idx") / "index"
            assert main(["index", str(root), "--out", str(out)]) == 0
            built[names] = out
        return built[names]

    return build


@pytest.fixture
def six_questions(tmp_path):
    """``(SIX_QUESTIONS, path)``: the triples, and the JSONL file of them."""
    import json

    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"id": q, "question": t, "gold": [g]}) + "\n"
                            for q, t, g in SIX_QUESTIONS))
    return SIX_QUESTIONS, path


@pytest.fixture(scope="session")
def executed(request):
    """``executed(path)``: the notebook at ``path`` run top to bottom in its own folder and
    cleaned as tools/render.py cleans a rendered chapter; each path runs once per session
    (a notebook that raised raises the same error to every test that asks for it). The
    session's notebooks were started in the background when collection ended (see
    ``NotebookRuns``); a path not among them is queued behind them when first asked for."""
    return request.config.stash[RUNS].get


class NotebookRuns:
    """The session's notebook runs, one kernel at a time, in a background thread, in the
    order the tests will ask for them.

    Why: the package tests keep the two cores only a third busy (they mostly wait on
    servers, sockets and subprocesses), while a notebook runs in its own kernel process.
    Started when collection ends, the book's runs share the cores with the package tests and
    then the browser tests instead of waiting for them (the tests that ask for a notebook
    come last, see ``pytest_collection_modifyitems``); this process runs torch with one
    thread, so a kernel embedding a corpus keeps the other core. (A second kernel for the
    notebooks left once the tests wait made the cold suite no faster: 17 min 38 s against
    17 min 5 s, docs/benchmarks.md.)"""

    def __init__(self, paths):
        import sys
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
        import render

        from ragbook import models

        self._execute = render.execute
        # The kernels start from the environment the session began with: a test's
        # monkeypatch.setenv (a temporary RAGBOOK_CACHE, a profile) must not reach a chapter
        # whose kernel happens to start while that test runs.
        self._environ = dict(os.environ)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notebook-runs")
        self._runs = {}
        self.seconds: dict = {}             # path -> seconds its run took
        if paths:
            models.use_threads(1)           # RAGBOOK_THREADS, when set, still wins
        for path in paths:
            self._submit(path)

    def _submit(self, path):
        from pathlib import Path

        key = Path(path).resolve()
        if key not in self._runs:
            self._runs[key] = self._pool.submit(self._run, key)
        return self._runs[key]

    def _run(self, path):
        nb, self.seconds[path], _ = self._execute(path, timeout=1800, environ=self._environ)
        return nb

    def get(self, path):
        """The executed notebook at ``path``; raises what its run raised."""
        return self._submit(path).result()

    def stop(self):
        """Start nothing more. The notebook now running finishes first, so a session stopped
        early (``-x``, Ctrl-C) exits after at most one chapter's run."""
        self._pool.shutdown(wait=False, cancel_futures=True)


RUNS = pytest.StashKey[NotebookRuns]()


def notebook_of(item):
    """The notebook a test item asks ``executed`` for, from its parameters (test_book's
    ``path``, test_exercises' solution ``name``), or None."""
    from pathlib import Path

    if "executed" not in getattr(item, "fixturenames", ()):
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    if isinstance(params.get("path"), Path):
        return params["path"]
    if isinstance(params.get("name"), str):
        return Path(__file__).resolve().parent.parent / "solutions" / params["name"]
    return None


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    paths = [p for p in map(notebook_of, session.items) if p is not None]
    session.config.stash[RUNS] = NotebookRuns(paths)


def pytest_sessionfinish(session):
    runs = session.config.stash.get(RUNS, None)
    if runs is not None:
        runs.stop()


def pytest_terminal_summary(terminalreporter, config):
    """Each notebook's run time (a test's own duration is only its wait for the background
    run; the runs that overlapped the package and browser tests shared the cores)."""
    runs = config.stash.get(RUNS, None)
    if runs is None or not runs.seconds:
        return
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    terminalreporter.section("notebook runs (in the background)")
    for path, seconds in runs.seconds.items():
        name = path.relative_to(root) if path.is_relative_to(root) else path
        terminalreporter.write_line(f"{seconds:7.1f} s  {name}")
