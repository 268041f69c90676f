"""How the command line prints document and model text: control characters shown as escapes,
never obeyed; a quoted block that cannot forge a line of the tool's own; one line per source;
the confidence named by what it is.
"""
from __future__ import annotations

import re

from .retrieval import CONFIDENCE_KINDS

__all__ = ["shown", "one_line", "quoted", "passage_line", "confidence_line"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def shown(text) -> str:
    """Document text as the terminal may show it: control characters (escape sequences, bidi
    overrides, stray line breaks in names) written as visible escapes, never obeyed."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"),
                        str(text))


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
