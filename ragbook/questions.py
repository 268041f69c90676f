"""Labelled questions from a JSONL file: what ``ragbook eval``, ``ragbook tune`` and the
regression gate read.

One object per line, ``{"id": "q1", "question": "...", "gold": ["doc-id", ...]}``; other keys
are ignored, so ``data/helpcentre/questions/*.jsonl`` read as they are.
"""
from __future__ import annotations

import json
from pathlib import Path

__all__ = ["read_questions", "labelled"]


def read_questions(path: str | Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(id, question, gold)`` per line of a JSONL file of ``{"id", "question", "gold"}``
    objects (``gold``: a list of document ids; missing = unlabelled). Other keys are ignored,
    so ``data/helpcentre/questions/*.jsonl`` read as is. Errors name the line and field."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; give a JSONL file of "
                                f'{{"id", "question", "gold"}} objects')
    out, seen = [], {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"{str(path)!r} is not UTF-8 text (byte offset {err.start}); convert "
                         f"it, e.g. iconv -f latin1 -t utf-8") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{str(path)!r} line {n}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} is not valid JSON ({err.msg} at column {err.colno}); "
                             f"write one JSON object per line") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where} is a JSON {type(row).__name__}, not an object; write "
                             f'{{"id": ..., "question": ..., "gold": [...]}} per line')
        for field in ("id", "question"):
            if not isinstance(row.get(field), str) or not row[field].strip():
                got = "missing" if field not in row else f"{row[field]!r:.40}"
                raise ValueError(f"{where}: field {field!r} must be a non-empty str, got {got}")
        gold = row.get("gold", [])
        if not isinstance(gold, list) or not all(isinstance(g, str) for g in gold):
            raise ValueError(f"{where}: field 'gold' must be a list of document ids (str), got "
                             f"{gold!r:.40}")
        if row["id"] in seen:
            raise ValueError(f"{where} repeats the id {row['id']!r} of line {seen[row['id']]}; "
                             f"question ids must be unique")
        seen[row["id"]] = n
        out.append((row["id"], row["question"], tuple(gold)))
    return out


def labelled(questions, path: str | Path = "QUESTIONS") -> list[tuple[str, str, tuple[str, ...]]]:
    """The questions that have gold ids (the ones a metric can score); ``ValueError`` naming
    ``path`` when there are none."""
    out = [(q, text, gold) for q, text, gold in questions if gold]
    if not out:
        raise ValueError(f"no question in {str(path)!r} has gold document ids; add "
                         f'"gold": ["doc-id", ...] to the lines to score')
    return out
