"""Real-browser fixtures: JupyterLab from this project's venv, serving a temporary copy of
notebooks/ and exercises/ on a free loopback port with a random token, driven by Playwright
on Chromium.

Chromium: Playwright's own download when installed (`playwright install chromium`), else the
system's (Debian's `chromium` package, which `make setup` installs when it can). The tests
skip with a one-line reason only when no Chromium is found, or Playwright is not installed.
`RAGBOOK_CHROMIUM=/path/to/chrome` picks one explicitly.

Every test saves screenshots under a temporary folder; a failing test lists their paths.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Part of `make test` (after the package tests: tests/conftest.py orders them).
# RAGBOOK_BROWSER_TESTS=0 leaves them out, e.g. on a machine where a test run must not start
# a browser.
if os.environ.get("RAGBOOK_BROWSER_TESTS") == "0":
    collect_ignore_glob = ["test_*.py"]
# A closed network refuses Chromium's background connections; these flags stop it trying.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SYSTEM_CHROMIUMS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# What a cell that raised shows: ipykernel's traceback header, or a bare "SyntaxError: ...".
ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception): ", re.M)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    lab = item.funcargs.get("lab") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and isinstance(lab, LabPage):
        try:
            lab.screenshot("failure")
        except Exception as err:  # a dead page must not hide the test's own failure
            lab.shots.append(f"(no failure screenshot: {err})")
        report.sections.append(("screenshots", "\n".join(str(p) for p in lab.shots)))


def find_chromium() -> tuple[str | None, str]:
    """(path, "") of a Chromium to drive, or (None, why not) for a one-line skip reason."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None, "playwright is not installed (pip install -e '.[dev]')"
    if os.environ.get("RAGBOOK_CHROMIUM"):
        return os.environ["RAGBOOK_CHROMIUM"], ""
    with sync_playwright() as p:
        bundled = p.chromium.executable_path
    if bundled and Path(bundled).exists():
        return bundled, ""
    for name in SYSTEM_CHROMIUMS:
        if path := shutil.which(name):
            return path, ""
    return None, ("no Chromium found: `apt-get install chromium` (as root) or "
                  "`playwright install chromium`")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab process serving ``root``; ``url(path)`` opens a file in it."""

    def __init__(self, root: Path):
        self.root, self.port, self.token = root, free_port(), secrets.token_urlsafe(24)
        settings = root / ".lab" / "settings"
        # every cell in the DOM (no virtual scrolling), and no news pop-up over the widgets
        for plugin, values in {
                "notebook-extension/tracker": {"windowingMode": "none"},
                "apputils-extension/notification": {"fetchNews": "false",
                                                    "checkForUpdates": False}}.items():
            path = settings / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        venv_bin = str(Path(sys.executable).parent)
        env = dict(os.environ, PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""),
                   JUPYTER_CONFIG_DIR=str(root / ".lab" / "config"),
                   JUPYTER_RUNTIME_DIR=str(root / ".lab" / "runtime"))
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.token={self.token}",
               f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0",
               f"--LabApp.user_settings_dir={settings}",
               f"--LabApp.workspaces_dir={root / '.lab' / 'workspaces'}"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = root / ".lab" / "server.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                self.api("status")
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"JupyterLab did not start; see {self.log}:\n"
                                       + self.log.read_text()[-2000:]) from None
                time.sleep(0.3)

    def api(self, path: str, method: str = "GET"):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def url(self, path: str) -> str:
        # reset: a fresh workspace, not the tabs a previous test left open
        return f"http://127.0.0.1:{self.port}/lab/tree/{path}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        for kernel in self.api("kernels"):
            self.api(f"kernels/{kernel['id']}", method="DELETE")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()       # the server shuts its kernels down on SIGTERM
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class LabPage:
    """One browser tab on the lab, with the few gestures a learner makes."""

    def __init__(self, page, server: LabServer, shots_dir: Path):
        self.page, self.server, self.shots_dir = page, server, shots_dir
        self.shots: list[Path | str] = []

    def screenshot(self, name: str, show=None) -> Path:
        """Save the tab as ``name``.png, scrolled to the locator ``show`` when given."""
        if show is not None:
            show.scroll_into_view_if_needed()
        path = self.shots_dir / f"{name}.png"
        self.page.screenshot(path=path)
        self.shots.append(path)
        return path

    def open(self, path: str) -> None:
        """Open a notebook and wait for its kernel to be idle."""
        self.page.goto(self.server.url(path))
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        self.page.wait_for_function(
            """() => {
                 const s = document.querySelector('.jp-Notebook-ExecutionIndicator');
                 return s && s.dataset.status === 'idle';
               }""", timeout=120_000, polling=500)
        self.page.wait_for_timeout(1000)
        self.accept_dialog()

    def run_all(self, timeout_s: float) -> None:
        """Run > Run All Cells, then wait until the kernel is idle with no cell queued.

        Right after a page load the kernel can report idle before the notebook is attached
        to it, and Run All then does nothing: if no cell is queued within 15 s, ask again."""
        for attempt in range(3):
            self.accept_dialog()
            self.page.get_by_role("menuitem", name="Run", exact=True).click()
            self.page.locator('li[data-command="runmenu:run-all"]').click()
            try:
                self.page.wait_for_function(
                    """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                         .some(e => /^\\[(\\*|\\d+)\\]:$/.test(e.textContent.trim()))""",
                    timeout=15_000, polling=250)
                break
            except Exception:
                self.screenshot(f"run-all-not-started-{attempt}")
        self.wait_idle(timeout_s)

    def accept_dialog(self) -> None:
        """A "Select Kernel" dialog: take the notebook's own kernel (the default choice)."""
        accept = self.page.locator(".jp-Dialog .jp-mod-accept")
        if accept.count():
            accept.first.click()

    def wait_idle(self, timeout_s: float) -> None:
        # idle for half a second on end: a queued cell can start between two polls
        js = """() => {
              const s = document.querySelector('.jp-Notebook-ExecutionIndicator');
              const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
                  .map(e => e.textContent.trim());
              const quiet = s && s.dataset.status === 'idle' && !prompts.includes('[*]:')
                  && prompts.some(p => /^\\[\\d+\\]:$/.test(p));
              const now = Date.now();
              if (!quiet) { window.__idleSince = null; return false; }
              window.__idleSince = window.__idleSince || now;
              return now - window.__idleSince >= 500;
            }"""
        self.page.evaluate("() => { window.__idleSince = null; }")
        self.page.wait_for_function(js, timeout=timeout_s * 1000, polling=250)

    def prompts(self) -> list[str]:
        return [p.strip() for p in
                self.page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]

    def errors(self) -> list[str]:
        """Text of every output that shows a raised exception."""
        texts = self.page.locator('.jp-OutputArea-output[data-mime-type='
                                  '"application/vnd.jupyter.stderr"]').all_inner_texts()
        return [t for t in texts if ERROR_TEXT.search(t)]

    def assert_ran_clean(self) -> None:
        unrun = [i for i, p in enumerate(self.prompts()) if not re.fullmatch(r"\[\d+\]:", p)]
        errors = self.errors()
        assert not errors, f"a cell shows an error:\n{errors[0][-1500:]}"
        assert not unrun, f"code cells {unrun} did not run: {self.prompts()}"

    def code_cell(self, starts_with: str):
        """The code cell whose source starts with ``starts_with``."""
        cells = self.page.locator(".jp-CodeCell")
        for i in range(cells.count()):
            if cells.nth(i).locator(".cm-content").inner_text().startswith(starts_with):
                return cells.nth(i)
        raise AssertionError(f"no code cell starts with {starts_with!r}")

    def slider(self, widget, label: str):
        """The handle of the slider labelled ``label`` inside ``widget``."""
        return widget.locator(f'.widget-slider:has(> label.widget-label:text-is("{label}")) '
                              f'.noUi-handle')

    def press(self, handle, key: str, times: int = 1) -> None:
        """Move a slider the way a keyboard user does: focus its handle, press keys."""
        handle.focus()
        for _ in range(times):
            handle.press(key)


@pytest.fixture(scope="session")
def chromium_path():
    path, why = find_chromium()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory, chromium_path):
    root = tmp_path_factory.mktemp("lab")
    for folder in ("notebooks", "exercises"):
        (root / folder).mkdir()
        for nb in (ROOT / folder).glob("*.ipynb"):
            shutil.copy(nb, root / folder / nb.name)
    server = LabServer(root)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser(chromium_path):
    """The one Chromium of the session: Playwright's sync API runs an event loop for as long
    as it is open, and a second ``sync_playwright()`` in the same process refuses to start —
    so every browser test (the lab's and ``ragbook serve``'s page) opens contexts on this."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # launch() gives every run a fresh, temporary user-data-dir
        b = p.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def lab(request, browser, lab_server, tmp_path_factory):
    shots = tmp_path_factory.mktemp(f"shots-{request.node.name}")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    origin = f"http://127.0.0.1:{lab_server.port}"
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=origin)
    context.set_default_timeout(60_000)
    page = LabPage(context.new_page(), lab_server, shots)
    console = open(shots / "console.log", "w")
    page.page.on("console", lambda msg: console.write(f"{msg.type}: {msg.text}\n"))
    yield page
    console.close()
    context.close()
    lab_server.shutdown_kernels()    # each chapter's kernel holds its models: free them
