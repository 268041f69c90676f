"""Text utilities the package shares: its one sentence splitter, and its stopword list.

A sentence ends at ``.``, ``!`` or ``?`` followed by white space, and at a line break (a
heading, a list item, a table row and a line of code are each a line of their own) — except
a *soft* line break: hard-wrapped prose (READMEs, docstrings, most Markdown) breaks a
sentence over lines only because the line was full, so a break after a long line of prose
that ends mid-sentence, followed by more prose at the same indent, is read as a space
(``soft_breaks``). Without that the sentence reader answered with fragments such as
"JSON (JavaScript Object Notation) <https://json.org> is a subset of". Sentences come back
as character spans, white space trimmed, so a sentence is always ``text[start:end]`` —
what a reader cites, a window widens and a highlight marks.

Every part of ragbook that needs sentences calls this: the sentence reader's candidate
answers (``readers.SentenceReader``), the claims of a generated reply (``split_claims``)
and the instruction tripwire over passages, sentence-window retrieval
(``expansion.sentence_spans`` is this function) and the generated tickets. The recursive
chunker's cut points are *not* sentences in this sense: it also cuts after ``:`` and ``;``
and never after a numbered list marker (``chunking.RecursiveSplitter``).

``STOPWORDS`` are the function words keyword search drops (``bm25.Tokenizer``, and the
``stop`` filter of the Milvus BM25 analyzer, ``stores.milvus.DEFAULT_ANALYZER``).

>>> sentence_spans("One. Two two! Three?")
[(0, 4), (5, 13), (14, 20)]
>>> sentences("Refunds take 5 days.  Annual plans: 14 days\\n\\n# Billing\\nv2.1 is out")
['Refunds take 5 days.', 'Annual plans: 14 days', '# Billing', 'v2.1 is out']
>>> len(sentences("Click is a package for creating beautiful command line interfaces\\n"
...               "in a composable way. It is fun.\\n- lists stay\\n- apart"))
4
"""
from __future__ import annotations

import re
from itertools import pairwise

__all__ = ["sentence_spans", "sentences", "soft_breaks", "STOPWORDS", "DRAWN_BLANK",
           "decode_text"]

#: Characters Unicode files outside the format category (Cf) that are printable yet drawn as
#: nothing: the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian
#: and other variation selectors, the blank braille pattern. One set for every place that
#: must see through them: the terminal escapes them, the injection patterns drop them.
DRAWN_BLANK = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164"
                         "\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]")

# A short English stopword list (function words only): enough that "how do i" does not
# outweigh the one content word of a question, small enough to keep "not", "free", "plan".
STOPWORDS = frozenset("""a an and are as at be but by can do does for from had has have how i
if in into is it its me my of on or our so than that the their them then there these they
this to was we were what when where which who why will with you your""".split())

# white space after a sentence end, or a run of line breaks: where one sentence stops
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# a line that starts a block of its own: heading, list item, quote, table row, code fence
_BLOCK_START = re.compile(r"\s*(?:#|[-*+]\s|\d+[.)]\s|>|\||```|~~~)")
_FENCE = re.compile(r"\s*(?:```|~~~)")
#: a wrapped line is at least this long: shorter lines ending without punctuation are
#: labels, code or table cells, not prose that ran out of room
WRAP_WIDTH = 40
# a plain word, maybe with a trailing comma or closing mark; and a "key: value" line
_WORD = re.compile(r"[\"'“‘(]?[A-Za-z][A-Za-z'’-]*[.,;:!?)\"'”’]{0,2}")
_KEY_VALUE = re.compile(r"\s*[A-Za-z_][\w-]*:\s")
_CODE = re.compile(r"\w\(|=|\s#|::|^\s*[\[<]|^\s*(?:from\s+\S+\s+import|import|def|class)\s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _prose(line: str, min_words: int = 1) -> bool:
    """Most of the line's words are plain words, and nothing marks it as code (a call, an
    assignment, a comment) or as a ``key: value`` line."""
    words = line.split()
    plain = sum(bool(_WORD.fullmatch(w)) for w in words)
    return (len(words) >= min_words and plain >= 0.75 * len(words)
            and not _KEY_VALUE.match(line) and not _CODE.search(line))


def soft_breaks(text: str) -> set[int]:
    """Offsets of the line breaks in ``text`` that only wrap a sentence: the line before is
    prose (mostly plain words, ``WRAP_WIDTH`` characters or more) ending mid-sentence,
    outside a fenced code block, not a heading, table row or interpreter prompt; the line
    after continues it (prose starting with a letter, digit, quote or parenthesis, not a block
    marker, not indented deeper unless it continues a list item)."""
    soft, offset, fenced = set(), 0, False
    lines = text.split("\n")
    for line, following in pairwise(lines):
        here, offset = offset + len(line), offset + len(line) + 1
        if _FENCE.match(line):
            fenced = not fenced
            continue
        body, nxt = line.strip(), following.strip()
        if (fenced or len(body) < WRAP_WIDTH or body[-1] in ".!?:;{}[(<>=\\`|*"
                or body.startswith(("#", "|", ">>>", "..."))
                or not nxt or _BLOCK_START.match(following)
                or not (nxt[0].isalnum() or nxt[0] in "\"'“‘(")
                or not _prose(body, min_words=5) or not _prose(nxt)):
            continue
        item = bool(_BLOCK_START.match(line)) and not body.startswith(("#", ">", "|"))
        if _indent(following) > _indent(line) and not item:
            continue
        soft.add(here)
    return soft


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence (or line) of ``text``, in order: white space trimmed,
    blank pieces dropped, so ``text[start:end]`` is the sentence exactly as written."""
    spans, start = [], 0
    soft = soft_breaks(text) if "\n" in text else set()
    for m in [*_SENTENCE_END.finditer(text), None]:
        if m and m.group() == "\n" and m.start() in soft:
            continue  # a wrapped line: the sentence goes on
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


# byte-order marks of the wide encodings: UTF-32's first, as its LE mark starts like UTF-16's
_WIDE_BOMS = {b"\xff\xfe\x00\x00": "utf-32le", b"\x00\x00\xfe\xff": "utf-32be",
              b"\xff\xfe": "utf-16le", b"\xfe\xff": "utf-16be"}


def decode_text(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text with its line ends as ``\\n`` (a byte-order mark skipped, as
    editors write one), or a ``ValueError`` naming ``where`` and the fix: UTF-16/32 (by its
    byte-order mark, or NUL bytes without one), bytes that are not UTF-8."""
    for bom, encoding in _WIDE_BOMS.items():
        if raw.startswith(bom):
            raise ValueError(f"{where} is {encoding.upper()} text (it starts with that byte-order "
                             f"mark), not UTF-8; convert it: iconv -f {encoding} -t utf-8")
    try:
        text = raw.decode("utf-8-sig")  # tolerate a byte-order mark, as editors write one
    except UnicodeDecodeError as err:
        raise ValueError(f"{where} is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset "
                         f"{err.start}); convert it, e.g. iconv -f latin1 -t utf-8, or remove "
                         f"it") from None
    if "\x00" in text:
        raise ValueError(f"{where} holds NUL bytes (at offset {text.index(chr(0))}): binary "
                         f"data, or UTF-16 without a byte-order mark; convert text with e.g. "
                         f"iconv -f utf-16le -t utf-8, or remove the file")
    return text.replace("\r\n", "\n").replace("\r", "\n")
