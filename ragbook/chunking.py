"""Chunking: how many pieces, where to cut, and how much each piece repeats of the last.

Two sizes of the same idea:

* arithmetic — ``window_count`` (exact sliding-window count) vs ``rough_window_count``
  (``ceil(total / stride)``), and ``sliding_windows`` which really cuts a token sequence
  that way, so the formula can be checked against a splitter;
* ``RecursiveSplitter`` — cuts real documents at the coarsest structure that fits:
  before a heading or at a paragraph break if one falls in the second half of the window,
  else at a sentence end, else at a word boundary (never mid-word). Every chunk is a true
  substring with its offsets:
  ``chunk.text == doc.text[chunk.start:chunk.end]``.

Sizes are measured by a *length function*: ``"tokens"`` (the encoder's tokenizer, what
the model actually reads), ``"chars"``, or any callable ``str -> int``.

>>> window_count(100_000, 500, 250), rough_window_count(100_000, 500, 250)
(399, 400)
"""
from __future__ import annotations

import bisect
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from . import models
from .planted_pages import page_metadata
from .types import Chunk, Document

__all__ = ["window_count", "rough_window_count", "sliding_windows", "count_tokens",
           "RecursiveSplitter", "sliding_window_chunks", "chunk_documents", "index_premium",
           "coverage_gaps", "split_problem"]


def _check_window(size: int, overlap: int) -> None:
    for name, v in (("size", size), ("overlap", overlap)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name} must be a whole number, got {v!r}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    if not 0 <= overlap < size:
        raise ValueError(f"overlap must satisfy 0 <= overlap < size, got overlap={overlap} "
                         f"with size={size}; the stride (size - overlap) must stay positive")


def window_count(total: int, size: int, overlap: int = 0) -> int:
    """Exact number of windows a sliding window of ``size`` with ``overlap`` needs to cover
    ``total`` units: ``ceil((total - size) / stride) + 1`` (one window if it all fits)."""
    _check_window(size, overlap)
    if total <= 0:
        return 0
    if total <= size:
        return 1
    return math.ceil((total - size) / (size - overlap)) + 1


def rough_window_count(total: int, size: int, overlap: int = 0) -> int:
    """The back-of-envelope count, ``ceil(total / stride)``. It is high because it prices the
    first window at one stride when it covers ``size``: for ``total > size`` it exceeds
    :func:`window_count` by ``floor(overlap / stride)`` or ``ceil(overlap / stride)`` windows
    (at most one below half overlap; 9 for size 500, overlap 450)."""
    _check_window(size, overlap)
    return math.ceil(total / (size - overlap)) if total > 0 else 0


def sliding_windows(n_tokens: int, size: int, overlap: int = 0) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of a plain sliding window; the last one ends at
    ``n_tokens``. ``len(sliding_windows(n, s, o)) == window_count(n, s, o)`` always."""
    _check_window(size, overlap)
    if n_tokens <= 0:
        return []
    stride = size - overlap
    windows, start = [], 0
    while True:
        end = min(start + size, n_tokens)
        windows.append((start, end))
        if end >= n_tokens:
            return windows
        start += stride


# -- length functions ----------------------------------------------------------------------

_tokenizer = None


def encoder_tokenizer():
    """The profile encoder's tokenizer (loaded once), for counting tokens and mapping token
    offsets back to characters — what token-sized chunks and windows are measured in."""
    global _tokenizer
    if _tokenizer is None:
        from transformers import AutoTokenizer

        spec = models.resolve("encoder")
        _tokenizer = AutoTokenizer.from_pretrained(spec.path or spec.name)  # standard: from the hub
        # This copy only counts tokens and maps offsets; it never feeds the model, so a long
        # text is not an error here and transformers' "will result in indexing errors"
        # warning would be false. The encoder's own limit is Encoder.max_length, which warns
        # when it cuts a text.
        _tokenizer.model_max_length = sys.maxsize
    return _tokenizer


def count_tokens(text: str) -> int:
    """Tokens the encoder reads for ``text`` (special tokens excluded)."""
    return len(encoder_tokenizer()(text, add_special_tokens=False)["input_ids"])


_PIECE = 1 << 16     # characters the tokenizer reads at a time: memory stays bounded
_LONG_TOKEN = 100    # WordPiece reads a word longer than this as one unknown token


def _token_spans(text: str, a: int, b: int) -> tuple[list[int], list[int]]:
    """Document offsets (starts, ends) of the tokens of ``text[a:b]``. A token longer than
    ``_LONG_TOKEN`` characters (the unknown token WordPiece makes of an over-long word,
    e.g. a hex dump) counts one per character, so such a word is cut at the size instead
    of riding along as a single token."""
    enc = encoder_tokenizer()(text[a:b], add_special_tokens=False, return_offsets_mapping=True)
    starts, ends = [], []
    for s, e in enc["offset_mapping"]:
        if e - s > _LONG_TOKEN:
            starts += range(a + s, a + e)
            ends += range(a + s + 1, a + e + 1)
        elif e > s:
            starts.append(a + s)
            ends.append(a + e)
    return starts, ends


# -- the recursive splitter ----------------------------------------------------------------

# a whitespace run before a markdown heading, tried once per run (the look-behind fails
# mid-run, the possessive run never backtracks): linear however long the run
_HEADING = re.compile(r"(?<!\s)\s+(?=#)")
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")         # a blank line; in a _HEADING run: the cut
_SENTENCE = re.compile(r"(?<=[.!?:;])(?<!\d[.])\s+|\n\s*")  # "4. Click" is a list item, not an end
_WORD = re.compile(r"\s+")
_NONSPACE = re.compile(r"\S")


class _Scan:
    """What the splitter knows about the text ahead of it: word starts and ends, the cut
    points of each level and (for ``length="tokens"``) token spans, read piece by piece
    (``_PIECE`` characters, ending where a word starts) as the splitter moves forward and
    forgotten behind it, so a 20 MB document never has to be tokenised at once.

    Reading a piece alone gives the same answers as reading the whole text: a piece ends
    where a word starts, so every whitespace run (where all cut points are) lies inside
    one piece, the patterns' look-behinds see the text before it and look-aheads one
    character past it, and the tokenizer splits at whitespace anyway (words are tokenised
    independently of their neighbours). The one exception is a word longer than a piece,
    cut where the piece ends: its tokens near the cut may count differently.
    """

    def __init__(self, text: str, length, first: int, end_of_text: int):
        if length not in ("tokens", "chars") and not callable(length):
            raise ValueError(f"length must be 'tokens', 'chars' or a callable str -> int, "
                             f"got {length!r}")
        self.text, self.length, self.end_of_text = text, length, end_of_text
        self.hi = first                     # read up to here
        self.word_starts, self.word_ends = [first], []
        self.levels = (set(), set(), set())
        self.tok_starts, self.tok_ends = [], []

    def __call__(self, s: int, e: int) -> int:
        """Length of ``text[s:e]`` (``s`` and ``e`` inside what has been read)."""
        if self.length == "chars":
            return e - s
        if self.length == "tokens":
            return (bisect.bisect_right(self.tok_ends, e)
                    - bisect.bisect_left(self.tok_starts, s))
        return self.length(self.text[s:e])

    def read_past(self, start: int, size: int) -> None:
        """Read pieces until the text read after ``start`` is longer than ``size`` (so the
        farthest cut that fits is known) or the text ends."""
        while self.hi < len(self.text) and self(start, self.hi) <= size:
            self._read_piece()

    def _piece_end(self, a: int) -> int:
        text, n = self.text, len(self.text)
        if n - a <= _PIECE:
            return n
        limit = a + _PIECE
        for lo in (a + _PIECE // 2, a + 1):  # a word start: one step per whitespace run
            m = _WORD.search(text, lo, limit + 1)
            if m and m.end() <= limit:
                return m.end()
        if not text[limit].isspace():
            return limit                    # inside a word longer than a piece
        m = _NONSPACE.search(text, limit)
        return m.start() if m else n

    def _read_piece(self) -> None:
        text, a = self.text, self.hi
        b = self._piece_end(a)
        for m in _WORD.finditer(text, a, b):
            self.word_ends.append(m.start())
            if m.end() < len(text):
                self.word_starts.append(m.end())
        if b == len(text) and (not self.word_ends or self.word_ends[-1] != self.end_of_text):
            self.word_ends.append(self.end_of_text)
        see = min(b + 1, len(text))         # a heading's look-ahead sees past the piece
        for m in _HEADING.finditer(text, a, see):   # the cut: the run's first blank line
            blank = _PARAGRAPH.search(text, m.start(), m.end())
            if blank and blank.start() < b:
                self.levels[0].add(blank.start())
        for cuts, rx in zip(self.levels[1:], (_PARAGRAPH, _SENTENCE), strict=True):
            cuts.update(m.start() for m in rx.finditer(text, a, see) if m.start() < b)
        if self.length == "tokens":
            starts, ends = _token_spans(text, a, b)
            self.tok_starts += starts
            self.tok_ends += ends
        self.hi = b

    def forget_before(self, start: int) -> None:
        """Drop what lies before ``start`` (the splitter never looks back past it), once it
        is most of what is held, so the copying stays linear overall."""
        i = bisect.bisect_left(self.word_starts, start)
        j = bisect.bisect_left(self.tok_starts, start)
        if max(i - len(self.word_starts) // 2, j - len(self.tok_starts) // 2) < 4096:
            return
        self.word_starts = self.word_starts[i:]
        self.word_ends = self.word_ends[bisect.bisect_left(self.word_ends, start):]
        self.tok_starts, self.tok_ends = self.tok_starts[j:], self.tok_ends[j:]
        self.levels = tuple({c for c in cuts if c >= start} for cuts in self.levels)


@dataclass(frozen=True)
class RecursiveSplitter:
    """Split documents into chunks of at most ``size`` (in ``length`` units), consecutive
    chunks sharing up to ``overlap`` units, cutting at paragraphs, then sentences, then words.

    Overlap is a ceiling, met as closely as word boundaries allow, with one more rule: the
    next chunk starts past the middle of the current one, so each chunk adds at least half
    new text. The one exception to "never mid-word": a single word longer than ``size`` on
    its own (a long URL with ``length="chars"``, a hex dump with ``"tokens"``) is cut at the
    size, since size is a guarantee. Documents are read piece by piece (``_Scan``), so memory
    stays bounded however long a document is, with the same cuts as reading it whole.

    >>> doc = Document(id="d", text="One two three. Four five six.\\n\\nSeven eight nine.")
    >>> [c.text for c in RecursiveSplitter(size=20, overlap=0, length="chars").split(doc)]
    ['One two three.', 'Four five six.', 'Seven eight nine.']
    """

    size: int = 256
    overlap: int = 32
    length: str | Callable[[str], int] = "tokens"

    def __post_init__(self) -> None:
        _check_window(self.size, self.overlap)

    def split(self, doc: Document) -> list[Chunk]:
        """The document's chunks, in order; ``chunk.text == doc.text[chunk.start:chunk.end]``."""
        if not isinstance(doc, Document):
            raise TypeError(f"split takes a Document, got {type(doc).__name__}; wrap text as "
                            f"Document(id=..., text=...)")
        text = doc.text
        m = _NONSPACE.search(text)
        start, end_of_text = (m.start() if m else len(text)), len(text.rstrip())
        scan = _Scan(text, self.length, start, end_of_text)
        chunks: list[Chunk] = []
        meta = page_metadata(doc)       # once per document: a planted page marks every chunk
        end = -1
        while start < end_of_text:
            scan.read_past(start, self.size)
            floor, end = end, self._choose_end(start, scan, end)
            if end is None:  # from the overlap, nothing past the last end fits: no overlap
                start, end = _next_word(floor, scan), floor
                continue
            chunks.append(Chunk(id=f"{doc.id}:{start}-{end}", doc_id=doc.id,
                                text=text[start:end], start=start, end=end,
                                metadata=dict(meta)))
            if end >= end_of_text:
                break
            if text[end].isspace():
                start = self._next_start(start, end, scan)
            else:                       # an overlong word was cut: go on from the cut
                start = end
            scan.forget_before(start)
        return chunks

    def _choose_end(self, start: int, scan: _Scan, floor: int) -> int | None:
        # past ``floor`` (the previous end), so every chunk adds new text; None if none fits
        # the farthest word end that still fits (binary search: length grows with end)
        word_ends = scan.word_ends
        i = bisect.bisect_right(word_ends, start)
        lo, hi, best = i, len(word_ends) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if scan(start, word_ends[mid]) <= self.size:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is None:  # a single word longer than size: cut it (the documented exception)
            return self._cut_word(start, word_ends[i] if i < len(word_ends) else scan.hi, scan)
        limit = word_ends[best]
        if limit <= floor:
            return None
        if limit >= scan.end_of_text:
            return scan.end_of_text
        # prefer the coarsest structure in the second half of the window
        half = max(start + (limit - start) // 2, floor)
        for cuts in scan.levels:
            fits = [e for e in word_ends[i:best + 1] if e in cuts and e > half]
            if fits:
                return fits[-1]
        return limit

    def _cut_word(self, start: int, too_far: int, scan: _Scan) -> int:
        """The farthest cut inside the word at ``start`` that fits (at least one character);
        ``text[start:too_far]`` is known not to fit."""
        lo, hi, end = start + 2, too_far - 1, start + 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if scan(start, mid) <= self.size:
                end, lo = mid, mid + 1
            else:
                hi = mid - 1
        return end

    def _next_start(self, start: int, end: int, scan: _Scan) -> int:
        word_starts, nxt = scan.word_starts, _next_word(end, scan)
        if self.overlap == 0:
            return nxt
        # the earliest word start inside the chunk whose tail fits in the overlap budget,
        # but past the chunk's middle: every chunk brings at least half new text, so a big
        # overlap on short, structure-cut chunks cannot multiply the index without bound
        j = bisect.bisect_right(word_starts, start + (end - start) // 2)
        k = bisect.bisect_left(word_starts, end)
        candidates = word_starts[j:k]
        lo, hi, best = 0, len(candidates) - 1, None
        while lo <= hi:  # tail length shrinks as the start moves right
            mid = (lo + hi) // 2
            if scan(candidates[mid], end) <= self.overlap:
                best, hi = candidates[mid], mid - 1
            else:
                lo = mid + 1
        return best if best is not None else nxt


def _next_word(end: int, scan: _Scan) -> int:
    """The first word start at or after ``end`` (``end`` if none has been read)."""
    after = bisect.bisect_left(scan.word_starts, end)
    return scan.word_starts[after] if after < len(scan.word_starts) else end


def sliding_window_chunks(doc: Document, size: int, overlap: int = 0) -> list[Chunk]:
    """Fixed windows of ``size`` encoder tokens, each starting ``size - overlap`` tokens after
    the last, cut wherever the count lands (mid-sentence, even mid-word): the baseline the
    recursive splitter improves on. Offsets come from the tokenizer, so chunks stay exact
    substrings of the document."""
    _check_window(size, overlap)
    starts, ends = _token_spans(doc.text, 0, len(doc.text))
    out, meta = [], page_metadata(doc)
    for a, b in sliding_windows(len(starts), size, overlap):
        s, e = starts[a], ends[b - 1]
        out.append(Chunk(id=f"{doc.id}:{s}-{e}", doc_id=doc.id, text=doc.text[s:e], start=s,
                         end=e, metadata=dict(meta)))
    return out


def chunk_documents(docs: Iterable[Document], size: int = 256, overlap: int = 32,
                    length: str | Callable[[str], int] = "tokens") -> list[Chunk]:
    """Split every document with one :class:`RecursiveSplitter`; chunks keep doc order."""
    if isinstance(docs, (str, Document)) or not hasattr(docs, "__iter__"):
        raise TypeError(f"docs must be a list of Document objects, got {type(docs).__name__}")
    splitter = RecursiveSplitter(size=size, overlap=overlap, length=length)
    return [c for d in docs for c in splitter.split(d)]


def index_premium(n_chunks: int, n_chunks_without_overlap: int) -> float:
    """Extra vectors overlap costs, as a fraction: 250 vs 200 chunks -> 0.25 (+25%)."""
    if n_chunks_without_overlap < 1:
        raise ValueError("n_chunks_without_overlap must be >= 1")
    return n_chunks / n_chunks_without_overlap - 1


def _gaps(text: str, spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    chars = list(text)
    for s, e in spans:  # blank out what the spans cover: what is left is in no chunk
        chars[s:e] = " " * (e - s)
    return [m.span() for m in re.finditer(r"\S+", "".join(chars))]


def coverage_gaps(doc: Document, chunks: Sequence[Chunk]) -> list[tuple[int, int]]:
    """Spans of non-whitespace text that no chunk covers (empty for a correct split)."""
    return _gaps(doc.text, [(c.start, c.end) for c in chunks])


def split_problem(text: str, spans, size: int,
                  length: Callable[[str], int] = len) -> str | None:
    """The first way ``spans`` (``(start, end)`` offsets into ``text``) breaks the contract
    every split in this module keeps, as one sentence, or None when it keeps it.

    The contract: at least one chunk for a non-empty text; each chunk at most ``size``
    (measured by ``length``), non-empty, without surrounding whitespace, not cutting a word
    in two (unless the word alone is longer than ``size``); every non-space character in
    some chunk; chunks in document order, each ending past the one before. Graders and
    tests use it to judge splitters whose cut points legitimately differ.

    >>> text = "One two. Three four."
    >>> split_problem(text, [(0, 8), (9, 20)], 12) is None
    True
    >>> split_problem(text, [(0, 6), (6, 20)], 14)
    "chunk (0, 6) = 'One tw' cuts a word in two"
    """
    try:
        spans = [(int(s), int(e)) for s, e in spans]
    except (TypeError, ValueError):
        return f"expected a list of (start, end) pairs, got {spans!r:.300}"
    if not spans:
        return "got no chunks for a non-empty text" if text.strip() else None

    def word_at(i: int) -> str:  # the whitespace-delimited word around a cut at offset i
        a, z = i, i
        while a > 0 and not text[a - 1].isspace():
            a -= 1
        while z < len(text) and not text[z].isspace():
            z += 1
        return text[a:z]

    for s, e in spans:
        if not 0 <= s <= e <= len(text):
            return (f"chunk {(s, e)} is not inside the text: offsets must satisfy "
                    f"0 <= start <= end <= {len(text)}")
        piece = text[s:e]
        if length(piece) > size:
            unit = "characters" if length is len else "long"
            return f"chunk {(s, e)} is {length(piece)} {unit}, more than size={size}: {piece!r}"
        if not piece or piece != piece.strip():
            return f"chunk {(s, e)} = {piece!r} starts or ends with whitespace (or is empty)"
        for cut, inside in ((s, s > 0 and not text[s - 1].isspace()),
                            (e, e < len(text) and not text[e].isspace())):
            if inside and length(word_at(cut)) <= size:
                return f"chunk {(s, e)} = {piece!r} cuts a word in two"
    missing = _gaps(text, spans)
    if missing:
        a = missing[0][0]
        return f"characters from offset {a} are in no chunk: {text[a:a + 30]!r}"
    if [s for s, _ in spans] != sorted(s for s, _ in spans):
        return "chunks are not in document order"
    for before, (s, e) in zip(spans, spans[1:], strict=False):
        if e <= before[1]:
            return (f"chunk {(s, e)} ends where the chunk before it, {before}, ended (or "
                    f"earlier): it adds no new text; start it where it can reach past that end")
    return None
