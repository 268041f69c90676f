"""Answer units: the pieces of a passage a sentence reader may answer with, whole.

``ragbook.text.sentence_spans`` splits at sentence ends and at line breaks it cannot read
as a wrapped line of prose. On real documentation that leaves fragments an answer must not
be (issue 35): a hard-wrapped line full of version numbers, a sentence stopped at a wrapped
URL or ``$out``, a sentence cut after "e.g.", a sentence ending in ":" without the command
it introduces. ``answer_units`` joins them back; ``is_reference`` recognises a sentence that
only points elsewhere ("See the full discussion.", "Section 6.10, “What's in the pool
directory?”."), which echoes a heading rather than answering.

>>> text = "releases: bo for 1.3, hamm for 2.0, slink for release 2.1, potato for\\n2.2 and etch."
>>> [text[a:z] for a, z in answer_units(text)] == [text]
True
>>> is_reference("Section 6.10, “What's in the pool directory?”.")
True
>>> is_reference("See the -d flag to print descriptions.")
False
"""
from __future__ import annotations

import re

from ..text import WRAP_WIDTH, sentence_spans

__all__ = ["answer_units", "fragment_paragraphs", "is_reference", "MAX_UNIT_CHARS",
           "FRAGMENT_WORDS"]

#: a joined unit never grows past this many characters (a paragraph, not a page)
MAX_UNIT_CHARS = 600
#: a paragraph's first unit this short or shorter may be a fragment ("Pre-Depends is a
#: special dependency."): its paragraph is a candidate answer too
FRAGMENT_WORDS = 8
# a line that opens a block of its own (heading, list item, quote, table row, code fence)
_BLOCK = re.compile(r"\s*(?:#|[-*+]\s|\d+[.)]\s|>|\||```|~~~)")
_FENCE = re.compile(r"^\s*(?:```|~~~)", re.M)
# abbreviations after which the splitter wrongly ends a sentence
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|cf|vs|etc|approx|incl|resp|viz)\.|\bNo\.)$", re.I)
_QUOTED = re.compile(r"“[^”]*”|\"[^\"]*\"|‘[^’]*’|'[^']{3,}'")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)*\b")
_WORDS = re.compile(r"[A-Za-z][A-Za-z'’-]*")
# words that only point at another place in the documents
_POINTERS = frozenset("""see section sections chapter chapters reference references discussion
details detail more full below above following next previous consult information info
documentation manual page pages also further described explained explanation refer referred
question questions faq entry entries part appendix for the a an on in of this that about how
works work to and or is are at with its their there here which""".split())
_POINTER_START = re.compile(r"\s*(?:\(?see\b|cf\.|refer to\b|consult\b|for (?:more|further|"
                            r"details|a full)\b|section\b|chapter\b|\d+(?:\.\d+)+\b)", re.I)


def _fences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each fenced code block, fences included."""
    marks = [m.start() for m in _FENCE.finditer(text)]
    return [(a, text.find("\n", z) if text.find("\n", z) >= 0 else len(text))
            for a, z in zip(marks[::2], marks[1::2], strict=False)]


def _inside(pos: int, blocks: list[tuple[int, int]]) -> tuple[int, int] | None:
    return next(((a, z) for a, z in blocks if a <= pos < z), None)


def _continues(text: str, a: int, z: int, nxt: int) -> bool:
    """The piece ``text[a:z]`` goes on in the piece starting at ``nxt``: a wrapped line the
    splitter refused (one line break, the line long and unfinished, the next no block), or a
    sentence ended by an abbreviation."""
    gap, piece = text[z:nxt], text[a:z]
    if gap.count("\n") > 1 or _BLOCK.match(text, nxt) or piece.lstrip().startswith(("#", "|")):
        return False
    if _ABBREV.search(piece):
        return True
    last = piece.rsplit("\n", 1)[-1].strip()
    return gap.count("\n") == 1 and len(last) >= WRAP_WIDTH and last[-1] not in ".!?:;"


def _block_end(text: str, start: int, fences: list[tuple[int, int]]) -> int:
    """End of the block starting at ``start``: its fenced code block, else the run of lines
    up to the next blank line."""
    fenced = _inside(start, fences)
    if fenced:
        return fenced[1]
    blank = text.find("\n\n", start)
    return len(text) if blank < 0 else blank


def answer_units(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each answer unit of ``text``, in order, ``text[start:end]`` exact.

    A unit is a sentence of ``sentence_spans``, joined with the next while it continues there
    (``_continues``: a wrapped version list, URL, command or ``$variable``; a cut after
    "e.g."), and a sentence ending in ":" followed on the next line by a code block, a list
    or a command also gets a unit that takes that block in — the command is what it
    introduces. Lines inside a fenced code block stay units of their own. No unit grows past
    ``MAX_UNIT_CHARS``.

    >>> t = "Use it like:\\n\\n```\\nninja -t graph all | dot -Tpng -o g.png\\n```\\nDone."
    >>> [t[a:z] for a, z in answer_units(t)][0]
    'Use it like:\\n\\n```\\nninja -t graph all | dot -Tpng -o g.png\\n```'
    """
    spans, fences = sentence_spans(text), _fences(text)
    units: list[tuple[int, int]] = []
    i = 0
    while i < len(spans):
        a, z = spans[i]
        if not _inside(a, fences):
            while (i + 1 < len(spans) and not _inside(spans[i + 1][0], fences)
                   and spans[i + 1][1] - a <= MAX_UNIT_CHARS
                   and _continues(text, a, z, spans[i + 1][0])):
                i += 1
                z = spans[i][1]
            if text[z - 1] == ":" and i + 1 < len(spans) and text.count("\n", z, spans[i + 1][0]):
                end = _block_end(text, spans[i + 1][0], fences)
                if end - a <= MAX_UNIT_CHARS:
                    units.append((a, len(text[:end].rstrip())))
                    i += 1
                    continue
        units.append((a, z))
        i += 1
    return units


def fragment_paragraphs(text: str, units: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``(start, end)`` of each paragraph (lines up to a blank line; not a heading, list or
    code) that holds two or more of ``units`` and opens with a *sentence* (it ends in . ! or
    ?; a bare title line such as "Expenses" from a converted heading does not) of
    ``FRAGMENT_WORDS`` words or fewer, at most ``MAX_UNIT_CHARS`` long: where the opening
    sentence alone only restates the term ("Pools are a special feature.") and the answer
    is the paragraph.

    >>> t = "Pre-Depends is a special dependency.\\nIt makes dpkg unpack and configure it first."
    >>> fragment_paragraphs(t, answer_units(t)) == [(0, len(t))]
    True
    """
    out = []
    for m in re.finditer(r"(?:[^\n]*\S[^\n]*(?:\n|$))+", text):
        a = m.start() + len(m.group()) - len(m.group().lstrip())
        z = m.start() + len(m.group().rstrip())
        inside = [(x, y) for x, y in units if a <= x and y <= z]
        opening = text[inside[0][0]:inside[0][1]].rstrip() if inside else ""
        if (len(inside) >= 2 and inside[0][0] == a and z - a <= MAX_UNIT_CHARS
                and not _BLOCK.match(text, a) and opening.endswith((".", "!", "?"))
                and len(opening.split()) <= FRAGMENT_WORDS):
            out.append((a, z))
    return out


def is_reference(sentence: str) -> bool:
    """The sentence only points at another place — a cross-reference ("See the full
    discussion.", "For more discussion of how scoping works, consult the reference.") or a
    quoted heading with a section number ("Section 6.10, “What's in the pool
    directory?”.") — and says nothing itself: it opens like a pointer (or is mostly a quoted
    title) and, quoted titles and section numbers aside, at most two of its words are not
    pointer words.

    >>> is_reference("For more discussion of how scoping works, consult the reference.")
    True
    >>> is_reference("The log file is kept in the build root in a file called .ninja_log.")
    False
    """
    quoted = sum(len(m) for m in _QUOTED.findall(sentence))
    rest = _NUMBER.sub(" ", _QUOTED.sub(" ", sentence))
    content = [w for w in _WORDS.findall(rest) if w.lower() not in _POINTERS]
    opens = bool(_POINTER_START.match(sentence)) or quoted >= 0.5 * len(sentence.strip())
    return opens and len(content) <= 2
