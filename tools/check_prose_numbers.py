"""Find numbers in a notebook's prose that no cell printed.

The workbook's rule: every number a markdown cell states is printed by a code cell above it,
or is a setting written in the notebook's code, or is an outside figure labelled with its
source in the same paragraph ("(source: ...)" or a markdown link). This reads EXECUTED
notebooks (docs/rendered/ by default, written by `make render`) and lists each number that
breaks the rule, with its cell and context.

    python tools/check_prose_numbers.py                      # docs/rendered/*.ipynb
    python tools/check_prose_numbers.py path/to/run.ipynb    # any executed notebook

One chapter while writing it (render executes it into docs/rendered/; on the shared
development machine, take the heavy-job lock):

    flock /tmp/ragbook-heavy.lock python tools/render.py 04
    python tools/check_prose_numbers.py docs/rendered/04-evaluating-retrieval.ipynb

What counts as a number: decimals (0.915), percentages (91.5%), and integers above 20
(832, 10,370). Not checked: integers up to 20 (counts, chapter numbers, small k), numbers
inside `code`, headings' section numbers, and numbers glued to a word (recall@5, top-50,
all-MiniLM-L6-v2, log2). A prose number matches a printed one when equal, or equal after
rounding the printed one to the prose's decimals (0.92 for a printed 0.9154), or as a
percentage of a printed fraction (91.5% for 0.915).

Roles too: a paragraph that names a model role (`cross_encoder`, "the reranking role", ...)
and says what it is offline must name what the offline profile resolves it to (MaxSim for
`cross_encoder`, ...), so prose cannot keep describing a role the code no longer has.
`OFFLINE_ROLES` declares how prose names each resolution; tests/test_rendered.py holds it
equal to `ragbook.models`.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
# A number not glued to a word, '@', '.', '/', '-' or '_' on its left.
NUMBER = re.compile(r"(?<![\w@./\-\\^])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?(?![\w@]|\.\d)")
CODE_SPANS = re.compile(r"```.*?```|`[^`\n]*`|\$[^$\n]*\$", re.S)
LINK_TARGET = re.compile(r"\]\([^)]*\)")
HTML_TAG = re.compile(r"<[^>]+>")
HEADING_NUMBER = re.compile(r"^(#+\s*)[\d.]+\s", re.M)
LABELLED = re.compile(r"\(source:|\]\(https?://", re.I)
YEAR = re.compile(r"^(19|20)\d\d$")
# role -> (the offline profile's model for it, how prose names that model, how prose names
# the role); a paragraph naming the role and "offline" must name the model
OFFLINE_ROLES = {
    "encoder": ("sentence-transformers/all-MiniLM-L6-v2", r"MiniLM", r"`encoder` role"),
    "prefix_encoder": ("intfloat/multilingual-e5-small", r"\bE5\b|e5-small",
                       r"`prefix_encoder`"),
    "cross_encoder": ("ragbook/maxsim-reranker", r"MaxSim",
                      r"`cross_encoder`|\breranking role|second-stage role"),
    "span_reader": ("ragbook/offline-span-reader", r"unavailable|no extractive QA",
                    r"`span_reader`|span[- ]reader role"),
    "generator": ("HuggingFaceTB/SmolLM2-135M-Instruct", r"SmolLM2", r"`generator` role"),
}


def prose_numbers(markdown: str) -> list[tuple[str, str]]:
    """(number as written, its paragraph) for each number the rule applies to."""
    found = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        if LABELLED.search(paragraph):
            continue
        text = HEADING_NUMBER.sub(r"\1", paragraph)
        text = HTML_TAG.sub(" ", LINK_TARGET.sub("]", CODE_SPANS.sub(" ", text)))
        for m in NUMBER.finditer(text):
            whole, decimals, percent = m.group(1), m.group(2), m.group(3)
            if not decimals and not percent:
                value = int(whole.replace(",", ""))
                if value <= 20 or YEAR.match(whole):
                    continue
            found.append((m.group(0).replace(" ", ""), " ".join(paragraph.split())[:160]))
    return found


def numbers_in(text: str) -> set[str]:
    """Every number token in printed text or code, commas dropped."""
    return {m.group(0).replace(",", "") for m in
            re.finditer(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?", text)}


def matches(written: str, printed: set[str]) -> bool:
    percent = written.endswith("%")
    value = written.rstrip("%").replace(",", "")
    places = len(value.split(".")[1]) if "." in value else 0
    target = float(value)
    for p in printed:
        x = float(p)
        candidates = [x, x * 100] if percent else [x]
        if any(round(c, places) == round(target, places) and
               (places > 0 or c == target or "." in p) for c in candidates):
            return True
    return False


def outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/"):
                parts.append(value if isinstance(value, str) else "".join(value))
    return "\n".join(parts)


def unprinted(path: Path) -> list[str]:
    """One line per number in the notebook's prose that breaks the rule."""
    nb = nbformat.read(path, as_version=4)
    code = numbers_in("\n".join(c.source for c in nb.cells if c.cell_type == "code"))
    printed: set[str] = set()
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            printed |= numbers_in(outputs_text(cell))
        elif cell.cell_type == "markdown":
            for written, context in prose_numbers(cell.source):
                if not matches(written, printed | code):
                    problems.append(f"{path.name} cell {i}: {written} is in the prose but no "
                                    f"cell above printed it: \"{context}\"")
            problems += [f"{path.name} cell {i}: {why}" for why in role_contradictions(cell.source)]
    return problems


def role_contradictions(markdown: str) -> list[str]:
    """For each paragraph that names a role and says "offline" but not the name of the
    role's offline model: the role, the name expected, and the paragraph."""
    found = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        if not re.search(r"\boffline\b", paragraph, re.I):
            continue
        for role, (_, model, named) in OFFLINE_ROLES.items():
            if re.search(named, paragraph, re.I) and not re.search(model, paragraph):
                context = " ".join(paragraph.split())[:160]
                found.append(f"the {role} role is named offline without /{model}/ (what the "
                             f"offline profile resolves it to): \"{context}\"")
    return found


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or sorted((ROOT / "docs" / "rendered").glob("*.ipynb"))
    if not paths:
        print("nothing to check: no executed notebooks (run `make render` first)")
        return 2
    problems = [line for path in paths for line in unprinted(path)]
    for line in problems:
        print(line)
    print(f"{len(problems)} number(s) in prose not printed above or role(s) named wrong, in "
          f"{len(paths)} notebook(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
