"""Execute the chapters into docs/rendered/, so a learner can read every output and plot
before running anything (the sources in notebooks/ stay stripped).

Each rendered notebook records, in its metadata, a digest of everything its outputs depend
on: its own cells, the ragbook package, data/ and pyproject.toml. `--check` (run by
tests/test_rendered.py in `make test`) recomputes the digests without executing anything and
fails when a chapter's cells or the code behind them changed since it was rendered: run
`make render` and commit docs/rendered/.

    python tools/render.py                 # execute every chapter (warm cache: ~10 min)
    python tools/render.py 04 05           # only these chapters
    python tools/render.py --check         # exit 1 if docs/rendered/ is stale
    python tools/render.py --solutions     # only the worked solutions' ledger entries

Rendering also records the book's number ledger (docs/ledger.json, tools/ledger.py): the
numbers every chapter and every worked solution printed, which tests/test_book.py compares
with a fresh run on every `make test`. Solutions are executed for the ledger only (their
outputs are not kept: the chapters are the book).

Outputs are made reviewable: the repository's and the home folder's paths are replaced by
`.` and `~`, execution timestamps are dropped, and widget state is not stored (a dashboard
needs a live kernel; its rendered cell says so).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import ledger
import nbformat

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"
SOLUTIONS = ROOT / "solutions"
RENDERED = ROOT / "docs" / "rendered"
KEY = "ragbook_render"
MACHINE_PATH = re.compile(r"/(?:root|home|work|tmp)/\w")
WIDGET_NOTE = ("[an interactive widget: run this notebook in JupyterLab (`make lab`) to use it]")


def cells(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source.strip()) for c in nb.cells]


def code_digest() -> str:
    """One hash of the package, the data and the pinned dependencies."""
    h = hashlib.sha256()
    files = sorted([*ROOT.glob("ragbook/**/*.py"), *(p for p in (ROOT / "data").rglob("*")
                                                        if p.is_file()), ROOT / "pyproject.toml"])
    for path in files:
        h.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
        h.update(path.read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return h.hexdigest()


def digest(nb, code: str) -> str:
    h = hashlib.sha256(code.encode())
    for kind, source in cells(nb):
        h.update(f"{kind}\0{source}\0".encode())
    return h.hexdigest()[:16]


def clean(nb) -> None:
    """Machine paths out, timestamps out, widget views replaced by a line of text."""
    swaps = [(str(ROOT), "."), (str(Path.home()), "~"), (tempfile.gettempdir(), "$TMPDIR")]

    def scrub(text: str) -> str:
        for old, new in swaps:
            text = text.replace(old, new)
        return text

    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            if "text" in out:
                out["text"] = scrub(out["text"])
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                data.pop("application/vnd.jupyter.widget-view+json")
                data["text/plain"] = WIDGET_NOTE
            for mime, value in data.items():
                if mime.startswith("text/") and isinstance(value, str):
                    data[mime] = scrub(value)
            if out.get("output_type") == "error":
                out["traceback"] = [scrub(line) for line in out["traceback"]]
    nb.metadata.pop("widgets", None)


# A progress bar is a widget in Jupyter: in a static copy it would be an empty widget note,
# so the kernels run without them (ours honour tqdm's TQDM_DISABLE, transformers' and the
# hub's loading bars HF_HUB_DISABLE_PROGRESS_BARS).
QUIET = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


# Run after a chapter's last cell, then removed: the kernel's peak resident memory (Linux's
# VmHWM; elsewhere ru_maxrss, which is KiB on Linux and bytes on macOS).
PEAK_RSS = """import resource, sys
try:
    kib = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
except OSError:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kib //= 1024 if sys.platform == "darwin" else 1
print(kib // 1024)"""


def in_steps(get_msg, step: float = 1.0):
    """``get_msg`` (a kernel client channel's) waiting at most ``step`` seconds per socket
    poll, until its own timeout (None: no limit).

    Why: with a widget on the page, nbclient can wait forever for a reply that is already in
    the socket (nbclient issue #312; seen here once in a cold suite, chapter 2's playground
    cell: the kernel idle, the client still waiting). A new poll checks the socket afresh."""
    from queue import Empty

    async def get(timeout: float | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = step if deadline is None else min(step, deadline - time.monotonic())
            try:
                return await get_msg(timeout=max(left, 0.0))
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
    return get


def execute(path: Path, timeout: int, peak: bool = False, env: dict | None = None,
            environ: dict | None = None):
    """Run a notebook in its own folder as the book's readers and tests do (no progress-bar
    widgets); return it executed and cleaned, with (seconds, peak RSS in MiB or None).

    The kernel's environment is ``environ`` (default: this process's, as it is now) with
    ``env`` added. A caller that runs notebooks while other code changes ``os.environ``
    (pytest's ``monkeypatch.setenv`` in tests/conftest.py's background runs) passes the
    environment it started with, or a kernel inherits a test's temporary settings."""
    from nbclient import NotebookClient

    class Client(NotebookClient):
        async def async_start_new_kernel_client(self):
            kc = await super().async_start_new_kernel_client()
            for channel in (kc.shell_channel, kc.iopub_channel):
                channel.get_msg = in_steps(channel.get_msg)
            return kc

    nb = nbformat.read(path, as_version=4)
    if peak:
        nb.cells.append(nbformat.v4.new_code_cell(PEAK_RSS))
    started = time.perf_counter()
    Client(nb, timeout=timeout, kernel_name="python3",
           resources={"metadata": {"path": str(path.parent)}}).execute(
               env={**(os.environ if environ is None else environ), **QUIET, **(env or {})})
    seconds = time.perf_counter() - started
    peak_mib = int(nb.cells.pop().outputs[0]["text"]) if peak else None
    clean(nb)
    return nb, seconds, peak_mib


def render(path: Path, code: str, timeout: int) -> tuple[float, int]:
    """Execute one chapter into docs/rendered/ and record its ledger entry: (seconds, the
    kernel's peak RSS in MiB)."""
    nb, seconds, peak_mib = execute(path, timeout, peak=True)
    nb.metadata.pop("jupytext", None)
    nb.metadata[KEY] = {"digest": digest(nb, code), "source": f"notebooks/{path.name}"}
    RENDERED.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, RENDERED / path.name)
    ledger.store(f"notebooks/{path.name}", digest(nb, code), ledger.record(nb))
    return seconds, peak_mib


def record_solution(path: Path, code: str, timeout: int) -> float:
    """Execute one worked solution and record its ledger entry (outputs not kept)."""
    nb, seconds, _ = execute(path, timeout)
    ledger.store(f"solutions/{path.name}", digest(nb, code), ledger.record(nb))
    return seconds


def stale(code: str) -> list[str]:
    """What is out of date in docs/rendered/, one line each (empty when in sync)."""
    problems = []
    for path in sorted(SOURCES.glob("[0-9][0-9]-*.ipynb")):
        target = RENDERED / path.name
        if not target.exists():
            problems.append(f"{target.name}: missing")
            continue
        source, rendered = nbformat.read(path, as_version=4), nbformat.read(target, as_version=4)
        if cells(source) != cells(rendered):
            problems.append(f"{target.name}: its cells differ from notebooks/{path.name}")
        elif rendered.metadata.get(KEY, {}).get("digest") != digest(source, code):
            problems.append(f"{target.name}: rendered from older code or data than the current "
                            "ragbook/, data/ or pyproject.toml")
    recorded = ledger.load().get("notebooks", {})
    for path in [*sorted(SOURCES.glob("[0-9][0-9]-*.ipynb")),
                 *sorted(SOLUTIONS.glob("[0-9][0-9]-*.ipynb"))]:
        name = f"{path.parent.name}/{path.name}"
        if recorded.get(name, {}).get("digest") != digest(nbformat.read(path, as_version=4), code):
            problems.append(f"docs/ledger.json: the entry of {name} is missing or older than "
                            "its cells, ragbook/, data/ or pyproject.toml")
    extra = {p.name for p in RENDERED.glob("*.ipynb")} - {p.name for p in SOURCES.glob("*.ipynb")}
    problems += [f"{name}: no such chapter in notebooks/ any more; delete it"
                 for name in sorted(extra)]
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="chapter numbers (e.g. 04); default: all")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/rendered/ is stale")
    ap.add_argument("--solutions", action="store_true",
                    help="only record the worked solutions' ledger entries")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = ap.parse_args()
    code = code_digest()
    if args.check:
        problems = stale(code)
        for line in problems:
            print(f"stale: {line}")
        if problems:
            print("run `make render` and commit docs/rendered/ and docs/ledger.json")
        return 1 if problems else 0
    paths = [] if args.solutions else sorted(SOURCES.glob("[0-9][0-9]-*.ipynb"))
    if args.chapters:
        paths = [p for p in paths if p.name[:2] in args.chapters]
        if not paths:
            print(f"no chapter matches {args.chapters}; chapters are "
                  f"{sorted({p.name[:2] for p in SOURCES.glob('*.ipynb')})}")
            return 2
    for path in paths:
        print(f"rendering {path.name} ...", flush=True)
        seconds, peak_mib = render(path, code, args.timeout)
        print(f"  {seconds:.0f} s, kernel peak RSS {peak_mib:,} MiB -> docs/rendered/{path.name}",
              flush=True)
    if args.solutions or not args.chapters:
        for path in sorted(SOLUTIONS.glob("[0-9][0-9]-*.ipynb")):
            print(f"recording solutions/{path.name} ...", flush=True)
            print(f"  {record_solution(path, code, args.timeout):.0f} s -> docs/ledger.json",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
