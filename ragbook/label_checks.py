"""Checks of a labelled-questions file against the index it labels and the files a command
writes: gold ids the index does not have (with the id probably meant), an output path that
would overwrite an input, and the fingerprint of each question's label a baseline keeps.

``ragbook eval``, ``tune`` and ``calibrate`` (``ragbook.commands``) run them before any
number is computed, so a typo in a label or a swapped argument never becomes a silently
wrong table, settings file or lost labels file.
"""
from __future__ import annotations

import hashlib
import json
import os
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

from .ingest import SUFFIXES

__all__ = ["unknown_gold", "unknown_gold_text", "refuse_overwrite",
           "label_fingerprints", "changed_labels"]



def _plain(doc_id: str) -> str:
    """``doc_id`` as a person might have typed it: NFC, no surrounding spaces, ``/`` for
    ``\\``, no leading ``./``, no file suffix, case-folded."""
    s = unicodedata.normalize("NFC", doc_id).strip().replace("\\", "/").removeprefix("./")
    low = s.casefold()
    for suffix in SUFFIXES:
        if low.endswith(suffix):
            low = low[: -len(suffix)]
            break
    return low


def _suggest(gold: str, by_plain: Mapping[str, list[str]]) -> str | None:
    """The one index id ``gold`` probably means: the same id up to case, spacing, Unicode
    form and suffix, else the one id whose path ends with it or that it ends with (a label
    without the folder, or with a folder above the indexed one). None when unclear."""
    plain = _plain(gold)
    same = by_plain.get(plain, [])
    if len(same) == 1:
        return same[0]
    if same:
        return None
    tails = [d for p, ids in by_plain.items() for d in ids
             if p.endswith("/" + plain) or plain.endswith("/" + p)]
    return tails[0] if len(tails) == 1 else None


def unknown_gold(questions, known: Iterable[str]) -> list[tuple[str, str, str | None]]:
    """``(question id, gold id, suggestion or None)`` for every gold id not in ``known``
    (the index's document ids), in file order."""
    known = set(known)
    by_plain: dict[str, list[str]] = {}
    for d in sorted(known):
        by_plain.setdefault(_plain(d), []).append(d)
    return [(q, g, _suggest(g, by_plain)) for q, _, gold in questions
            for g in dict.fromkeys(gold) if g not in known]


def unknown_gold_text(unknown, show: int = 5) -> str:
    """One sentence naming the unknown gold ids (the first ``show``) and what each probably
    meant, and how document ids are formed."""
    parts = [f"{q!r}: {g!r}" + (f" (did you mean {s!r}{_looks_same(g, s)}?)" if s else "")
             for q, g, s in unknown[:show]]
    more = f" and {len(unknown) - show} more" if len(unknown) > show else ""
    return (f"{len(unknown)} gold id{'s' if len(unknown) != 1 else ''} of the questions "
            f"{'are' if len(unknown) != 1 else 'is'} not a document of the index, so "
            f"{'they' if len(unknown) != 1 else 'it'} can never be found: "
            f"{'; '.join(parts)}{more}. A document id is the file's path inside the indexed "
            f"folder without its suffix (e.g. 'billing/refunds' for billing/refunds.md); fix "
            f"the labels, or check that they label this corpus")


def _looks_same(gold: str, suggestion: str) -> str:
    """For a suggestion that prints like the label: how they differ (the Unicode form)."""
    if unicodedata.normalize("NFC", gold) != unicodedata.normalize("NFC", suggestion):
        return ""
    return f", the same letters in another Unicode form: {ascii(suggestion)} not {ascii(gold)}"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False


def refuse_overwrite(out, flag: str, inputs: Mapping[str, object], index=None) -> None:
    """``ValueError`` when the file ``out`` (given as ``flag``) is one of ``inputs``
    (``{what: path}``, None entries skipped) or lies inside the ``index`` folder: writing it
    would destroy what the command reads (a labels file, a baseline, the index)."""
    out = Path(out)
    for what, path in inputs.items():
        if path is not None and _same(out, Path(path)):
            raise ValueError(f"{flag} {str(out)!r} is the {what}; writing it would replace "
                             f"that file: give {flag} another path")
    if index is not None and out.resolve().is_relative_to(Path(index).resolve()):
        raise ValueError(f"{flag} {str(out)!r} lies inside the index {str(index)!r}; writing "
                         f"it there could damage the index: give {flag} a path outside it")


def label_fingerprints(questions) -> dict[str, str]:
    """``{question id: hash of its question text and gold ids}``: a baseline keeps them, so a
    later gate can tell a changed label from a changed retriever."""
    return {q: hashlib.sha256(json.dumps([text, sorted(set(gold))]).encode()).hexdigest()[:16]
            for q, text, gold in questions}


def changed_labels(then: Mapping[str, str] | None, now: Mapping[str, str]) -> list[str]:
    """Ids in both ``then`` and ``now`` whose label fingerprint differs (none when the
    baseline kept no fingerprints: one written before they were kept)."""
    if not isinstance(then, Mapping):
        return []
    return sorted(q for q in set(then) & set(now) if then[q] != now[q])
