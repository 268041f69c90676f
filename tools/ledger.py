"""The book's number ledger: every number a chapter or a worked solution prints, checked on
every test run against the numbers `make render` recorded.

Why: CI used to *execute* the notebooks (nbval in lax mode) without comparing anything, so a
change that moved chapter 5's MRR from 0.52 to 0.31 stayed green as long as no cell raised.
Now `make render` (tools/render.py) writes docs/ledger.json: for each notebook of notebooks/
and solutions/, the numbers each code cell printed, in order. tests/test_book.py executes
every notebook once and compares what it prints with that record, within the tolerances
below; a difference fails naming the notebook, the cell, the expected and the printed value.

What is compared: numbers in a code cell's standard output and in its results' text form
(tables included). Not compared: standard error (warnings, progress), widgets (they need a
live kernel), images (a figure's numbers are compared where the cell also prints them), and
the numbers that measure the machine rather than the method (see TIMING).

    python tools/ledger.py                  # compare docs/rendered/ with docs/ledger.json
    python tools/ledger.py --show 05        # the numbers recorded for chapter 05
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "docs" / "ledger.json"

# -- the tolerances, declared once ------------------------------------------------------------
# On the machine that recorded the ledger (same CPU model and torch build), a run is
# deterministic: seeds are fixed and the kernels run the same code. Integers must then be
# equal, and a decimal may differ by one unit of its last printed digit (a rounding flip of a
# float that lies on the edge). On another machine a model's floats differ in their last bits
# (other matrix kernels, bf16 or not), which can flip a near-tie in a ranking: there every
# number may differ by MACHINE_RELATIVE of its value or two units of its last digit,
# whichever is larger, and the report says that the looser rule was used.
SAME_MACHINE_UNITS = 1
MACHINE_RELATIVE = 0.03
MACHINE_UNITS = 2
# A decimal printed with more significant digits than float32 holds (a raw float's repr, e.g.
# a Hit's score 0.6630215048789978) ends in digits that a different batch of the same texts
# moves (0.663021445274353 from an empty cache): such a number may differ by this share of it.
FLOAT32_DIGITS = 7
FLOAT32_RELATIVE = 1e-6
# A number this close to zero is float32 rounding error, printed to show that an identity
# holds up to rounding (chapter 2: max |(|a-b|^2) - (2 - 2cos)| = 3.83e-07); its digits are
# the batch's, not the method's (run from an empty cache, chapter 2 failed the ledger on it),
# so any two such values match.
FLOAT32_NOISE = 1e-5

# The machine's numbers, not the method's (they change on every run), declared once:
# 1. a line that mentions a time or a speed (a unit of time after a number, "ms", "seconds",
#    "latency", "faster", ...): none of its numbers is compared;
# 2. a table (columns apart by two or more spaces) whose header names a time: the columns so
#    named are not compared (all of them when the header's first column names it);
# 3. a value whose key names a time ('ms_per_query': 1.6, seconds=0.2);
# 4. a line that reports a cache's state ("embedding cache ...: 87,708 vectors read back, 0
#    computed"): the counts depend on what earlier runs left in the cache, and a run from an
#    empty cache moved them to 78,523 and 9,185 (chapter 10), so they are treated like rule 1.
TIMING = re.compile(
    r"\bcache\b.*\b(?:read back|computed)\b|"
    r"\b(?:ms|µs|ns|msec|seconds?|secs?|latency|faster|slower|speed-?up|took|per second|time)\b"
    r"|\d\s*(?:s|min|mins|minutes?|h|hours?)\b|\bs/|/s\b|\d(?:\.\d+)?[×x]\b", re.I)
TIMED_KEY = re.compile(r"""(['"]?)([A-Za-z_]\w*)\1\s*[:=]\s*""")
KEY_TIME_PARTS = {"ms", "s", "seconds", "second", "latency", "time", "secs"}
NUMBER = re.compile(r"(?<![\w.@-])[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w.]\d)"
                    r"|(?<![\w.@-])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w]|\.\d)")
COLUMNS = re.compile(r"\S(?:.*?\S)??(?=\s{2,}|\s*$)")


def printed_text(cell) -> str:
    """What a code cell printed that the ledger reads: stdout and results' text/plain."""
    parts = []
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream" and out.get("name") == "stdout":
            parts.append(out.get("text", ""))
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue
            text = data.get("text/plain", "")
            if text.startswith("[an interactive widget") or text.startswith("<Figure size"):
                continue
            parts.append(text if isinstance(text, str) else "".join(text))
    return "\n".join(parts)


def _columns(line: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each column of a table line (columns apart by 2+ spaces)."""
    return [(m.start(), m.end(), m.group(0)) for m in COLUMNS.finditer(line)]


def numbers(text: str) -> list[str]:
    """The number tokens of ``text`` in order, the machine's own (see TIMING) left out."""
    found: list[str] = []
    timed_columns: set[int] | None = None     # inside a table whose header names a time
    width = 0
    for line in text.splitlines():
        cols = _columns(line)
        if not line.strip():
            continue
        if timed_columns is not None and len(cols) != width:
            timed_columns = None                   # the table ended
        if TIMING.search(line):
            if len(cols) >= 2 and not NUMBER.search(line):    # a table's header
                named = {n for n, (_, _, t) in enumerate(cols) if TIMING.search(t)}
                timed_columns = set(range(len(cols))) if 0 in named else named
                width = len(cols)
            continue                               # rule 1
        skip = {m.end() for m in TIMED_KEY.finditer(line)
                if set(m.group(2).lower().split("_")) & KEY_TIME_PARTS}
        for m in NUMBER.finditer(line):
            if m.start() in skip:
                continue                           # rule 3
            if timed_columns is not None and any(
                    start <= m.start() < end for n, (start, end, _) in enumerate(cols)
                    if n in timed_columns):
                continue                           # rule 2
            found.append(m.group(0))
    return found


def record(nb) -> list[dict]:
    """The ledger entry of an executed notebook: one item per code cell that printed a
    number (its index among all cells, its id, its numbers)."""
    entry = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        found = numbers(printed_text(cell))
        if found:
            entry.append({"cell": i, "id": cell.get("id", ""), "numbers": found})
    return entry


def machine() -> str:
    """The CPU model, its vector units and the torch build: what makes a model's floats
    bit-identical from one run to the next."""
    cpu = platform.processor() or platform.machine()
    try:
        info = open("/proc/cpuinfo").read()
        cpu = re.search(r"^model name\s*:\s*(.+)$", info, re.M).group(1).strip()
        flags = set(re.search(r"^flags\s*:\s*(.+)$", info, re.M).group(1).split())
        cpu += " (" + " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
                               if f in flags) + ")"
    except (OSError, AttributeError):
        pass
    try:
        import torch
        build = f"torch {torch.__version__}"
    except ImportError:
        build = "no torch"
    return f"{cpu}; {build}"


def _value(token: str) -> tuple[float, float]:
    """(value, one unit of the token's last printed digit)."""
    plain = token.replace(",", "")
    mantissa, _, exponent = plain.lower().partition("e")
    places = len(mantissa.split(".")[1]) if "." in mantissa else 0
    unit = 10.0 ** (-places + (int(exponent) if exponent else 0))
    return float(plain), unit


def close(expected: str, got: str, same_machine: bool) -> bool:
    """Whether ``got`` matches ``expected`` under the declared tolerance."""
    if expected == got:
        return True
    (want, unit), (have, _) = _value(expected), _value(got)
    digits = len(expected.lower().partition("e")[0].replace(",", "").replace(".", "")
                 .lstrip("+-0"))
    if digits > FLOAT32_DIGITS and abs(want - have) <= FLOAT32_RELATIVE * abs(want):
        return True
    if 0 < abs(want) < FLOAT32_NOISE and abs(have) < FLOAT32_NOISE:
        return True
    if same_machine:
        if "." not in expected and "e" not in expected.lower():
            return False
        return abs(want - have) <= SAME_MACHINE_UNITS * unit * (1 + 1e-9)
    return abs(want - have) <= max(MACHINE_UNITS * unit, MACHINE_RELATIVE * abs(want)) + 1e-12


def compare(name: str, expected: list[dict], got: list[dict], same_machine: bool) -> list[str]:
    """One line per difference between two entries of ``name`` (empty: they agree)."""
    problems = []
    want = {item["id"] or item["cell"]: item for item in expected}
    have = {item["id"] or item["cell"]: item for item in got}
    for key in [*want, *(k for k in have if k not in want)]:
        a, b = want.get(key), have.get(key)
        cell = (a or b)["cell"]
        if a is None:
            problems.append(f"{name} cell {cell}: printed numbers the ledger does not have: "
                            f"{' '.join(b['numbers'][:8])}")
            continue
        if b is None:
            problems.append(f"{name} cell {cell}: printed no numbers; expected "
                            f"{' '.join(a['numbers'][:8])}")
            continue
        if len(a["numbers"]) != len(b["numbers"]):
            problems.append(f"{name} cell {cell}: printed {len(b['numbers'])} numbers, the "
                            f"ledger has {len(a['numbers'])}: expected "
                            f"{' '.join(a['numbers'][:8])} ...; "
                            f"got {' '.join(b['numbers'][:8])} ...")
            continue
        for n, (x, y) in enumerate(zip(a["numbers"], b["numbers"], strict=True)):
            if not close(x, y, same_machine):
                problems.append(f"{name} cell {cell}, number {n + 1}: expected {x}, got {y}")
    return problems


def load() -> dict:
    """docs/ledger.json ({} when it does not exist yet)."""
    return json.loads(LEDGER.read_text(encoding="utf-8")) if LEDGER.exists() else {}


def store(name: str, digest: str, entry: list[dict]) -> None:
    """Write one notebook's entry (``name`` as 'notebooks/05-...ipynb'), keeping the others."""
    ledger = load()
    ledger.setdefault("notebooks", {})[name] = {"digest": digest, "cells": entry}
    ledger["machine"] = machine()
    ledger["tolerance"] = {"same_machine_units": SAME_MACHINE_UNITS,
                           "other_machine_relative": MACHINE_RELATIVE,
                           "other_machine_units": MACHINE_UNITS}
    ledger["notebooks"] = dict(sorted(ledger["notebooks"].items()))
    # one line per cell: a reviewable diff when `make render` moves a number
    books = ",\n".join(
        f"  {json.dumps(name)}: {{\"digest\": {json.dumps(item['digest'])}, \"cells\": [\n"
        + ",\n".join(f"   {json.dumps(c, ensure_ascii=False)}" for c in item["cells"]) + "]}"
        for name, item in ledger["notebooks"].items())
    head = ",\n".join(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                      for k, v in ledger.items() if k != "notebooks")
    text = f"{{\n{head},\n \"notebooks\": {{\n{books}\n }}\n}}"
    LEDGER.write_text(text + "\n", encoding="utf-8")


def main() -> int:
    import nbformat

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--show", metavar="NN", help="print the numbers recorded for a chapter")
    args = ap.parse_args()
    ledger = load()
    if args.show:
        for name, item in ledger.get("notebooks", {}).items():
            if Path(name).name.startswith(args.show):
                for c in item["cells"]:
                    print(f"{name} cell {c['cell']}: {' '.join(c['numbers'])}")
        return 0
    problems = []
    for path in sorted((ROOT / "docs" / "rendered").glob("[0-9][0-9]-*.ipynb")):
        name = f"notebooks/{path.name}"
        want = ledger.get("notebooks", {}).get(name, {}).get("cells", [])
        problems += compare(name, want, record(nbformat.read(path, as_version=4)), True)
    print("\n".join(problems) or "docs/rendered/ and docs/ledger.json agree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
