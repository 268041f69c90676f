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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from . import models
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
    """The back-of-envelope count, ``ceil(total / stride)``: slightly high, since the last
    window need not start a full stride after the one before."""
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


def _encoder_tokenizer():
    global _tokenizer
    if _tokenizer is None:
        from transformers import AutoTokenizer

        spec = models.resolve("encoder")
        _tokenizer = AutoTokenizer.from_pretrained(spec.path or spec.name)  # standard: from the hub
    return _tokenizer


def count_tokens(text: str) -> int:
    """Tokens the encoder reads for ``text`` (special tokens excluded)."""
    return len(_encoder_tokenizer()(text, add_special_tokens=False)["input_ids"])


class _Measure:
    """Length of any ``text[s:e]`` of one document, computed fast.

    For tokens, the document is tokenised once with offsets; the length of a slice that
    starts and ends on word boundaries is then the number of tokens inside it (for the
    WordPiece/BPE tokenizers in use, words are tokenised independently of their neighbours).
    """

    def __init__(self, text: str, length: str | Callable[[str], int]):
        self.text, self.length = text, length
        if length == "tokens":
            enc = _encoder_tokenizer()(text, add_special_tokens=False, return_offsets_mapping=True)
            spans = [o for o in enc["offset_mapping"] if o[1] > o[0]]
            self.starts = [s for s, _ in spans]
            self.ends = [e for _, e in spans]
        elif length != "chars" and not callable(length):
            raise ValueError(f"length must be 'tokens', 'chars' or a callable str -> int, "
                             f"got {length!r}")

    def __call__(self, s: int, e: int) -> int:
        if self.length == "chars":
            return e - s
        if self.length == "tokens":
            return bisect.bisect_right(self.ends, e) - bisect.bisect_left(self.starts, s)
        return self.length(self.text[s:e])


# -- the recursive splitter ----------------------------------------------------------------

_HEADING = re.compile(r"\n[ \t]*\n\s*(?=#)")        # a blank line before a markdown heading
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE = re.compile(r"(?<=[.!?:;])(?<!\d[.])\s+|\n\s*")  # "4. Click" is a list item, not an end
_WORD = re.compile(r"\s+")


@dataclass(frozen=True)
class RecursiveSplitter:
    """Split documents into chunks of at most ``size`` (in ``length`` units), consecutive
    chunks sharing up to ``overlap`` units, cutting at paragraphs, then sentences, then words.

    Overlap is a ceiling, met as closely as word boundaries allow, with one more rule: the
    next chunk starts past the middle of the current one, so each chunk adds at least half
    new text. The one exception to "never mid-word": a single word longer than ``size`` on
    its own (a long URL with ``length="chars"``) is cut at the size, since size is a guarantee.

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
        measure = _Measure(text, self.length)
        # candidate cut points by level; a cut point is where a chunk may end and the next begin
        word_starts = [m.end() for m in _WORD.finditer(text)]
        first = len(text) - len(text.lstrip())
        word_starts = [first] + [w for w in word_starts if w < len(text)]
        word_ends = sorted({m.start() for m in _WORD.finditer(text)} | {len(text.rstrip())})
        levels = [{m.start() for m in rx.finditer(text)}
                  for rx in (_HEADING, _PARAGRAPH, _SENTENCE)]
        chunks: list[Chunk] = []
        start, end_of_text = first, len(text.rstrip())
        while start < end_of_text:
            end = self._choose_end(start, word_ends, levels, measure, end_of_text)
            chunks.append(Chunk(id=f"{doc.id}:{start}-{end}", doc_id=doc.id,
                                text=text[start:end], start=start, end=end,
                                metadata=dict(doc.metadata)))
            if end >= end_of_text:
                break
            if not text[end].isspace():  # an overlong word was cut: go on from the cut
                start = end
                continue
            start = self._next_start(start, end, word_starts, measure)
        return chunks

    def _choose_end(self, start, word_ends, levels, measure, end_of_text) -> int:
        # the farthest word end that still fits (binary search: length grows with end)
        i = bisect.bisect_right(word_ends, start)
        lo, hi, best = i, len(word_ends) - 1, None
        while lo <= hi:
            mid = (lo + hi) // 2
            if measure(start, word_ends[mid]) <= self.size:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best is None:  # a single word longer than size: cut it (the documented exception)
            end = start + 1
            while end < end_of_text and measure(start, end + 1) <= self.size:
                end += 1
            return end
        limit = word_ends[best]
        if limit >= end_of_text:
            return end_of_text
        # prefer the coarsest structure in the second half of the window
        half = start + (limit - start) // 2
        for cuts in levels:
            fits = [e for e in word_ends[i:best + 1] if e in cuts and e > half]
            if fits:
                return fits[-1]
        return limit

    def _next_start(self, start, end, word_starts, measure) -> int:
        after = bisect.bisect_left(word_starts, end)
        nxt = word_starts[after] if after < len(word_starts) else end
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
            if measure(candidates[mid], end) <= self.overlap:
                best, hi = candidates[mid], mid - 1
            else:
                lo = mid + 1
        return best if best is not None else nxt


def sliding_window_chunks(doc: Document, size: int, overlap: int = 0) -> list[Chunk]:
    """Fixed windows of ``size`` encoder tokens, each starting ``size - overlap`` tokens after
    the last, cut wherever the count lands (mid-sentence, even mid-word): the baseline the
    recursive splitter improves on. Offsets come from the tokenizer, so chunks stay exact
    substrings of the document."""
    _check_window(size, overlap)
    m = _Measure(doc.text, "tokens")
    out = []
    for a, b in sliding_windows(len(m.starts), size, overlap):
        s, e = m.starts[a], m.ends[b - 1]
        out.append(Chunk(id=f"{doc.id}:{s}-{e}", doc_id=doc.id, text=doc.text[s:e], start=s,
                         end=e, metadata=dict(doc.metadata)))
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
    covered = [False] * len(text)
    for s, e in spans:
        covered[s:e] = [True] * (e - s)
    gaps, s = [], None
    for i, ch in enumerate(text):
        if not covered[i] and not ch.isspace():
            s = i if s is None else s
        elif s is not None:
            gaps.append((s, i))
            s = None
    if s is not None:
        gaps.append((s, len(text)))
    return gaps


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
    some chunk; chunks in document order. Graders and tests use it to judge splitters
    whose cut points legitimately differ.

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
    return None
