"""The package's one sentence splitter.

A sentence ends at ``.``, ``!`` or ``?`` followed by white space, and at every line break
(a heading, a list item and a table row are each a line of their own). Sentences come back
as character spans, white space trimmed, so a sentence is always ``text[start:end]`` —
what a reader cites, a window widens and a highlight marks.

Every part of ragbook that needs sentences calls this: the sentence reader's candidate
answers (``readers.SentenceReader``), the claims of a generated reply (``split_claims``)
and the instruction tripwire over passages, sentence-window retrieval
(``expansion.sentence_spans`` is this function) and the generated tickets. The recursive
chunker's cut points are *not* sentences in this sense: it also cuts after ``:`` and ``;``
and never after a numbered list marker (``chunking.RecursiveSplitter``).

>>> sentence_spans("One. Two two! Three?")
[(0, 4), (5, 13), (14, 20)]
>>> sentences("Refunds take 5 days.  Annual plans: 14 days\\n\\n# Billing\\nv2.1 is out")
['Refunds take 5 days.', 'Annual plans: 14 days', '# Billing', 'v2.1 is out']
"""
from __future__ import annotations

import re

__all__ = ["sentence_spans", "sentences"]

# white space after a sentence end, or a run of line breaks: where one sentence stops
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence (or line) of ``text``, in order: white space trimmed,
    blank pieces dropped, so ``text[start:end]`` is the sentence exactly as written."""
    spans, start = [], 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m else len(text)
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            spans.append((start + lead, start + lead + len(stripped)))
        start = m.end() if m else len(text)
    return spans


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` as strings (``sentence_spans``, sliced)."""
    return [text[a:z] for a, z in sentence_spans(text)]
