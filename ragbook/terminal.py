"""How the command line prints document and model text: control characters shown as escapes,
never obeyed; a quoted block that cannot forge a line of the tool's own; one line per source;
the confidence named by what it is. Lines that hold such text are folded to the terminal's
width by ragbook (``folding``), each later row after a mark, so the terminal's own wrapping
cannot start a row with text a document chose.
"""
from __future__ import annotations

import json
import unicodedata

from .folding import WIDTH, Folder, cells, fold
from .retrieval import CONFIDENCE_KINDS
from .text import DRAWN_BLANK

__all__ = ["shown", "one_line", "json_text", "quoted", "Quoted", "passage_line", "tool_line",
           "confidence_line", "CONTINUED"]

CONTINUED = "    > "  # starts every later row of a tool line folded to the width
SNIPPET = 20          # the fewest cells of a passage's text a folded source line shows
SNIPPET_CHARS = 72    # the most characters of it an unfolded one shows


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


class Quoted:
    """Document or model text as a quoted block, written piece by piece (a streamed
    answer): every row starts with ``> `` — after a line break of the text's own, and,
    with a ``width``, each row folded at that many cells — so nothing it says can make a
    row of the tool's own: no ``  [1] doc  chars ...`` source line, no ``sources:``
    header. ``write(piece)`` gives what to print now, ``end()`` the rest."""

    def __init__(self, width: int | None = WIDTH):
        self._folder = Folder(width, "> ") if width is not None else None
        self._first = True

    def write(self, piece: str) -> str:
        """``piece`` escaped (``shown``) and quoted, as much of it as can be printed now."""
        if self._folder is not None:
            return self._folder.write(shown(piece))
        first, self._first = self._first, False
        return ("> " if first else "") + shown(piece).replace("\n", "\n> ")

    def end(self) -> str:
        """The rest of the block: the word a folded block held back (the text ends here)."""
        return self._folder.end() if self._folder is not None else ""


def quoted(text, width: int | None = WIDTH) -> str:
    """``text`` as a whole quoted block (``Quoted``)."""
    block = Quoted(width)
    return block.write(str(text)) + block.end()


def tool_line(line: str, width: int | None = WIDTH) -> str:
    """One line of the tool's own that holds document text (already ``one_line``):
    folded at ``width`` cells (None: whole), each later row after ``CONTINUED``."""
    return fold(line, width, CONTINUED)


def _clip(text: str, budget: int) -> str:
    """``text`` cut to at most ``budget`` cells, ``...`` marking the cut."""
    if cells(text) <= budget:
        return text
    out, used = [], 3
    for c in text:
        used += cells(c)
        if used > budget:
            break
        out.append(c)
    return "".join(out) + "..."


def passage_line(n: int, p: dict, width: int | None = WIDTH) -> str:
    """One source line: rank, document, offsets and the start of the text — 72 characters
    of it, or as much as fits ``width`` (a long id then folds, ``tool_line``). No score: a
    candidate's fused (RRF) score is a rank sum (~0.03 at best) that reads like "very low
    confidence"; the quantity the pipeline decided on is printed once
    (``confidence_line``)."""
    head = f"  [{n}] {one_line(p['doc_id'])}  chars {p['start']}-{p['end']}  "
    snippet = " ".join(shown(p.get("text", "")).split())
    if width is None:
        snippet = snippet if len(snippet) <= SNIPPET_CHARS else snippet[:SNIPPET_CHARS - 3] + "..."
    else:
        snippet = _clip(snippet, max(SNIPPET, width - cells(head) - 2))
    return tool_line(f"{head}\"{snippet}\"", width)


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
