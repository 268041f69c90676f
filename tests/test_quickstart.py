"""README's "Use it on your own documents" block runs as written: extracted from README.md,
run in a fresh interpreter in a folder holding ``my-docs/`` (five help-centre articles), it
prints an answer and its source. Loads the encoder: a heavy test."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Use it on your own documents"
ARTICLES = ("billing-refund-policy", "billing-invoices", "billing-payment-methods",
            "account-export-csv", "api-pagination")


def quickstart_code() -> str:
    """The first ```python block under the quickstart heading of README.md."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert HEADING in readme, f"README.md has no {HEADING!r} section"
    section = readme.split(HEADING, 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert block, f"no ```python block under {HEADING!r}"
    return block.group(1)


def test_the_quickstart_is_at_most_15_lines():
    lines = quickstart_code().rstrip("\n").split("\n")
    assert len(lines) <= 15, f"the quickstart block has {len(lines)} lines; keep it to 15"


def test_the_quickstart_answers_with_a_source(tmp_path):
    docs = tmp_path / "my-docs"
    docs.mkdir()
    for name in ARTICLES:
        shutil.copy(ROOT / "data" / "helpcentre" / "articles" / f"{name}.md", docs)
    run = subprocess.run([sys.executable, "-c", quickstart_code()], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    assert lines and not lines[0].startswith("escalated"), run.stdout
    assert "14-day" in lines[0], run.stdout                      # the enterprise window
    assert any(x.startswith("source: billing-refund-policy, characters ") for x in lines[1:]), \
        run.stdout
    assert (tmp_path / "my-index" / "manifest.json").is_file()
