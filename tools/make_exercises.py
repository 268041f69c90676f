"""Generate exercises/NN-*.ipynb from solutions/NN-*.ipynb.

In a solution notebook, the worked answer sits between two marker lines (the nbgrader
convention); text after BEGIN SOLUTION becomes the hint of the generated stub:

    def window_count(total, size, overlap):
        ### BEGIN SOLUTION hint: one window if it fits, else ceil(...) + 1
        ...the answer...
        ### END SOLUTION

becomes, in the exercise, at the same indentation:

        raise NotImplementedError("one window if it fits, else ceil(...) + 1")

Outputs and execution counts are cleared. Output is byte-for-byte deterministic, so
`--check` can tell whether exercises/ is in sync with solutions/.

    python tools/make_exercises.py           # (re)write exercises/
    python tools/make_exercises.py --check   # exit 1 if exercises/ differs from what it would write
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\b(?:\s*hint:\s*(.*))?$")
END = re.compile(r"^\s*### END SOLUTION\s*$")


def blank(source: str, where: str) -> str:
    out, inside = [], False
    for line in source.split("\n"):
        m = BEGIN.match(line)
        if m:
            if inside:
                raise ValueError(f"{where}: nested BEGIN SOLUTION")
            inside = True
            hint = (m.group(2) or "write your solution here").strip()
            out.append(f"{m.group(1)}raise NotImplementedError("
                       f"{json.dumps(hint, ensure_ascii=False)})")
        elif END.match(line):
            if not inside:
                raise ValueError(f"{where}: END SOLUTION without BEGIN")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: BEGIN SOLUTION without END")
    return "\n".join(out)


def exercise_of(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code":
            src = blank(src, f"{path.name} cell {i}")
            cell["outputs"], cell["execution_count"] = [], None
        else:  # the "Open in Colab" badge (tools/colab.py) opens the exercise, not its solution
            src = src.replace("/blob/main/solutions/", "/blob/main/exercises/")
        lines = src.split("\n")
        cell["source"] = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        cell.get("metadata", {}).pop("execution", None)
    nb.setdefault("metadata", {}).pop("widgets", None)
    nb["metadata"].pop("jupytext", None)  # an exercise is not paired with a .py source
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description="generate exercises/ from solutions/")
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = ap.parse_args()
    stale = []
    for src in sorted((ROOT / "solutions").glob("[0-9][0-9]-*.ipynb")):
        target = ROOT / "exercises" / src.name
        text = exercise_of(src)
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(target.name)
        else:
            target.write_text(text, encoding="utf-8")
    if stale:
        print("exercises out of date (run python tools/make_exercises.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
