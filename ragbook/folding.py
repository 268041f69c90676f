"""Lines folded to the terminal's width by ragbook itself, every row after the first
starting with a mark of the block it belongs to — so a long line of document text cannot be
wrapped by the terminal into a row that starts where the tool's own lines start.

A terminal wraps a line wider than itself at its last column, and the rest starts the next
row at column 0: a page holding 78 characters and then ``  [1] legal/policy  chars 0-99``
printed, inside a quoted answer, a row exactly like a source line. ``Folder`` cuts first,
at ``width`` cells (wide East Asian characters count two, ambiguous ones two as well —
some terminals draw them so —, combining marks none), between words where it can, and
starts each new row with ``lead`` (``"> "`` for a quoted block), so no row of document
text starts anywhere but after its mark. It folds text that arrives in pieces too (a
streamed answer): it holds back only the word being written.
"""
from __future__ import annotations

import os
import shutil
import sys
import unicodedata

__all__ = ["WIDTH", "Folder", "fold", "cells", "terminal_width"]

WIDTH = 80          # the row width folded to when none is given
NARROWEST = 40      # a terminal reported narrower than this is treated as this wide


def terminal_width() -> int | None:
    """The width of the terminal the output is shown on — ``COLUMNS`` when set, else the
    terminal's own when standard output is one (never under ``NARROWEST``) — or None when
    there is none to fold to (a pipe or a file, read by a script: lines stay whole)."""
    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return None
    return max(NARROWEST, shutil.get_terminal_size((WIDTH, 24)).columns)


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes, erring wide (see the module notes)."""
    return sum(_cell(c) for c in text)


def _cell(c: str) -> int:
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F", "A") else 1


class Folder:
    """Text folded into rows of at most ``width`` cells (a word wider than a row is cut);
    ``first`` starts the first row, ``lead`` every later one, a line break of the text's
    own included. White space at the end of a row is dropped. ``write(piece)`` returns what
    can be printed now, ``end()`` the rest."""

    def __init__(self, width: int, lead: str, first: str | None = None):
        self.width, self.lead, self._lead = max(width, cells(lead) + 8), lead, cells(lead)
        self._first = lead if first is None else first
        self._col, self._started = 0, False
        self._word, self._wcells = [], 0       # the word being written, and its width
        self._gap, self._gcol = "", 0          # white space before it, and the column after

    def write(self, piece: str) -> str:
        """What of ``piece`` can be printed now: whole words, folded; the word still being
        written is held back until its end is seen (the next space, line break or ``end``)."""
        out: list[str] = []
        if not self._started:
            self._started, self._col = True, cells(self._first)
            self._gcol = self._col
            out.append(self._first)
        for c in piece:
            if c == "\n":
                out += [self._flush(), self._new_row()]
            elif c in " \t":
                out.append(self._flush())
                self._gap += c
                self._gcol = self._gcol + 1 if c == " " else (self._gcol // 8 + 1) * 8
            else:
                self._word.append(c)
                self._wcells += _cell(c)
                if self._wcells >= self.width - self._lead:    # a row's worth: no row holds more
                    out.append(self._flush())
        return "".join(out)

    def end(self) -> str:
        """The word held back, and the folding over (the text ends here)."""
        return self.write("") + self._flush()

    def _new_row(self) -> str:
        self._col = self._gcol = self._lead
        self._gap = ""
        return "\n" + self.lead

    def _flush(self) -> str:
        """The held word after its white space, on a new row when it does not fit this one
        (cut where no row holds it)."""
        if not self._word:
            return ""
        word, self._word, self._wcells, wide = self._word, [], 0, self._wcells
        out = []
        if self._gcol + wide > self.width and self._col > self._lead:
            out.append(self._new_row())
        else:
            out.append(self._gap)
            self._col, self._gap = self._gcol, ""
        for c in word:
            if self._col + _cell(c) > self.width:
                out.append(self._new_row())
            out.append(c)
            self._col += _cell(c)
        self._gcol = self._col
        return "".join(out)


def fold(line: str, width: int | None, lead: str) -> str:
    """``line`` (one line) folded to ``width`` (None: left whole): its first row as it
    starts, each later row after ``lead``."""
    if width is None:
        return line
    folder = Folder(width, lead, first="")
    return folder.write(line) + folder.end()
