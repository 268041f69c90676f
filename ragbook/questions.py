"""Labelled questions from a JSONL file: what ``ragbook eval``, ``ragbook tune`` and the
regression gate read.

One object per line, ``{"id": "q1", "question": "...", "gold": ["doc-id", ...]}``; other keys
are ignored, so ``data/helpcentre/questions/*.jsonl`` read as they are.
"""
from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

from .text import decode_text

__all__ = ["read_questions", "labelled", "question_key", "repeated_questions"]


def read_questions(path: str | Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(id, question, gold)`` per line of a JSONL file of ``{"id", "question", "gold"}``
    objects (``gold``: a list of document ids; missing = unlabelled). Other keys are ignored,
    so ``data/helpcentre/questions/*.jsonl`` read as is. Errors name the line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; give a JSONL file of "
                                f'{{"id", "question", "gold"}} objects')
    out, seen = [], {}
    for n, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        where = f"{str(path)!r} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} is not valid JSON ({err.msg} at column {err.colno}); "
                             f"write one JSON object per line{_array_hint(line)}") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where} is a JSON {type(row).__name__}, not an object; write "
                             f'{{"id": ..., "question": ..., "gold": [...]}} per line'
                             f"{_array_hint(line)}")
        for field in ("id", "question"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                got = "missing" if field not in row else f"{row[field]!r:.40}"
                raise ValueError(f"{where}: field {field!r} must be a non-empty str, got {got}")
        gold = row.get("gold", [])
        if not isinstance(gold, list) or not all(isinstance(g, str) and g.strip() for g in gold):
            raise ValueError(f"{where}: field 'gold' must be a list of document ids (non-empty "
                             f'str), got {gold!r:.40}; write e.g. "gold": ["billing/refunds"], '
                             f'or "gold": [] for a question the corpus does not answer')
        if row["id"] in seen:
            raise ValueError(f"{where} repeats the id {row['id']!r} of line {seen[row['id']]}; "
                             f"question ids must be unique")
        seen[row["id"]] = n
        out.append((row["id"], row["question"], tuple(gold)))
    return out


def _lines(path: Path) -> list[str]:
    """The file's lines as JSONL defines them: split at "\\n" only (a CR before it dropped),
    never at the Unicode line breaks (U+0085, U+2028, ...) JSON allows raw inside a string;
    a leading UTF-8 byte-order mark (Notepad, Excel) is skipped."""
    return decode_text(path.read_bytes(), repr(str(path))).split("\n")


def _array_hint(line: str) -> str:
    """A hint when the file is one JSON array (what ``json.dump(list)`` writes), not JSONL."""
    if not line.lstrip().startswith("["):
        return ""
    return (" (this looks like one JSON array of questions: write one object per line, "
            "e.g. jq -c '.[]' FILE.json > FILE.jsonl)")


def question_key(text: str) -> str:
    """``text`` as two askings of one question share it: Unicode-normalised (NFKC),
    case-folded, punctuation and spacing dropped ("Refund window?" and "refund  window")."""
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()))


def repeated_questions(questions) -> list[list[str]]:
    """Groups of ids (two or more, in file order) whose questions have one ``question_key``:
    the same question asked twice counts twice in every mean, and split across folds it is
    tuned on and then "held out"."""
    groups: dict[str, list[str]] = {}
    for q, text, _ in questions:
        groups.setdefault(question_key(text), []).append(q)
    return [ids for ids in groups.values() if len(ids) > 1]


def labelled(questions, path: str | Path = "QUESTIONS") -> list[tuple[str, str, tuple[str, ...]]]:
    """The questions that have gold ids (the ones a metric can score); ``ValueError`` naming
    ``path`` when there are none."""
    out = [(q, text, gold) for q, text, gold in questions if gold]
    if not out:
        raise ValueError(f"no question in {str(path)!r} has gold document ids; add "
                         f'"gold": ["doc-id", ...] to the lines to score')
    return out
