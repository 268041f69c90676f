"""How the command line prints document and model text: control characters shown as escapes,
never obeyed; a quoted block that cannot forge a line of the tool's own; one line per source;
the confidence named by what it is.
"""
from __future__ import annotations

import json
import unicodedata

from .retrieval import CONFIDENCE_KINDS
from .text import DRAWN_BLANK

__all__ = ["shown", "one_line", "json_text", "quoted", "passage_line", "confidence_line"]



def _escaped(c: str) -> str:
    return c.encode("unicode_escape").decode("ascii")


def _visible(c: str) -> bool:
    return c.isprintable() and not DRAWN_BLANK.match(c)


def shown(text) -> str:
    """Document text as the terminal may show it: every character that is not printable —
    controls (escape sequences, carriage returns, NEL), line and paragraph separators, and
    format characters (bidi overrides and marks, zero-width spaces and joiners, soft
    hyphens, byte-order marks), surrogates, unassigned code points — or that is printable
    but drawn blank (``DRAWN_BLANK``: U+034F, Hangul fillers, variation selectors, U+2800) written
    as a visible escape, never obeyed; tab, newline and spaces stay. (By Unicode category,
    not a list, where one exists: a zero-width space, and a Hangul filler, let one
    document's id look exactly like another's.)"""
    text = str(text)
    if text.isprintable() and not DRAWN_BLANK.search(text):
        return text
    return "".join(c if _visible(c) or c in "\t\n" or unicodedata.category(c) == "Zs"
                   else _escaped(c) for c in text)


def json_text(obj) -> str:
    """``obj`` as indented JSON for a terminal: what ``json.dumps(ensure_ascii=False)``
    leaves raw (line separators, bidi overrides, zero-width and C1 control characters)
    written as ``\\uXXXX`` escapes, which every JSON reader decodes back to the same text."""
    text = json.dumps(obj, ensure_ascii=False, indent=2)
    if text.isprintable() and not DRAWN_BLANK.search(text):
        return text
    return "".join(c if _visible(c) or c == "\n" else json.dumps(c)[1:-1] for c in text)


def one_line(text) -> str:
    """``shown`` with line breaks written as ``\\n``: a field that stays on its line."""
    return shown(text).replace("\n", "\\n")


def quoted(text, first: bool = True) -> str:
    """Document or model text as a quoted block: every line it holds starts with ``> ``
    (``first``: the text starts a line), so nothing it says can make a line of the tool's
    own — no ``  [1] doc  chars ...`` source line, no ``sources:`` header."""
    return ("> " if first else "") + shown(text).replace("\n", "\n> ")


def passage_line(n: int, p: dict) -> str:
    """One source line: rank, document, offsets and the start of the text. No score: a
    candidate's fused (RRF) score is a rank sum (~0.03 at best) that reads like "very low
    confidence"; the quantity the pipeline decided on is printed once (``confidence_line``)."""
    snippet = " ".join(shown(p.get("text", "")).split())
    snippet = snippet if len(snippet) <= 72 else snippet[:69] + "..."
    return (f"  [{n}] {one_line(p['doc_id'])}  "
            f"chars {p['start']}-{p['end']}  \"{snippet}\"")


def confidence_line(out: dict, floor: float | None) -> str:
    """The number the escalation rule compared, named by ``CONFIDENCE_KINDS``: "confidence
    0.62 (cosine similarity of the best dense hit; escalates under --min-confidence 0.40)"."""
    value, kind = out.get("confidence"), out.get("confidence_kind")
    if value is None:
        return "confidence: none (nothing was retrieved)"
    rule = (f"escalates under --min-confidence {floor:.2f}" if floor is not None else
            "no --min-confidence set")
    words = CONFIDENCE_KINDS[kind][0] if kind in CONFIDENCE_KINDS else kind
    return f"confidence {value:.2f} ({words}; {rule})"
