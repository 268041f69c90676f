"""Retrieve small, return big: search precise little pieces, hand the reader their context.

A small chunk embeds one idea, so it matches a question sharply — but it may lack what the
reader needs around it. Two ways to have both (chapter 10):

* ``ParentDocumentRetriever``: index ~200-token *children*, return the ~1,000-token *parent*
  section each child lies in; several children of one parent count once.
* ``SentenceWindowRetriever``: index single *sentences*, return each hit widened to
  ``window`` sentences on *both* sides (symmetric). llama-index's
  ``SentenceWindowNodeParser`` slices ``nodes[i - window_size : i + window_size]``: the end
  of a slice is exclusive, so its window is ``window_size`` sentences before the hit and
  one fewer after; check any library's window before you compare numbers.

Both wrap any ``Retriever`` over the small pieces and satisfy the contract themselves: hits
carry the *returned* text and its offsets in the document.

>>> sentence_spans("One. Two two! Three?")
[(0, 4), (5, 13), (14, 20)]
"""
from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .checks import check_k, check_query
from .chunking import chunk_documents, encoder_tokenizer
from .filters import matches, scoped
from .planted_pages import page_metadata
from .retrieval import Retriever, WrapperRetriever, check_role, corpus_fingerprint
from .text import sentence_spans  # the package's one sentence splitter, re-exported
from .types import Chunk, Document, Hit

__all__ = ["sentence_spans", "sentence_chunks", "parent_child_chunks",
           "ParentDocumentRetriever", "SentenceWindowRetriever", "fit_budget"]

def sentence_chunks(docs: Sequence[Document], min_words: int = 3) -> list[Chunk]:
    """Every sentence of every document as a ``Chunk`` (id ``doc:start-end``), skipping
    fragments of fewer than ``min_words`` words (headings, list stubs)."""
    out = []
    for d in docs:
        meta = page_metadata(d)         # a sentence apart from its planted lead-in is flagged
        for a, z in sentence_spans(d.text):
            if len(d.text[a:z].split()) >= min_words:
                out.append(Chunk(f"{d.id}:{a}-{z}", d.id, d.text[a:z], a, z, meta))
    return out


def parent_child_chunks(docs: Sequence[Document], parent_size: int = 1000,
                        child_size: int = 200, overlap: int = 0
                        ) -> tuple[list[Chunk], list[Chunk]]:
    """(parents, children): each document split into ~``parent_size``-token sections, and
    each section into ~``child_size``-token children, so every child lies inside exactly
    one parent (children never cross a parent's edge)."""
    if child_size >= parent_size:
        raise ValueError(f"child_size ({child_size}) must be smaller than parent_size "
                         f"({parent_size}); children are pieces of a parent")
    parents = chunk_documents(docs, size=parent_size, overlap=0)
    children = []
    for p in parents:
        piece = Document(p.id, p.text, metadata=p.metadata)
        for c in chunk_documents([piece], size=child_size, overlap=overlap):
            children.append(Chunk(f"{p.doc_id}:{p.start + c.start}-{p.start + c.end}",
                                  p.doc_id, c.text, p.start + c.start, p.start + c.end,
                                  p.metadata))
    return parents, children


class ParentDocumentRetriever(WrapperRetriever):
    """Search ``retriever`` (over children), return the parents they lie in.

    ``parents``: the sections (Chunks with offsets; e.g. from ``parent_child_chunks``).
    A child maps to the parent of the same document whose span contains its start. The
    parent's score is its best child's; a parent is returned once. ``fetch`` children are
    read per result wanted (``k * fetch``), since several may share a parent.
    """

    def __init__(self, retriever, parents: Sequence[Chunk], fetch: int = 4):
        check_role(retriever, Retriever, "retriever")
        self.retriever, self.fetch = retriever, check_k(fetch, "fetch")
        self.parents = list(parents)
        self._by_doc: dict[str, list[Chunk]] = {}
        for p in sorted(self.parents, key=lambda p: (p.doc_id, p.start)):
            self._by_doc.setdefault(p.doc_id, []).append(p)
        self._starts = {d: [p.start for p in ps] for d, ps in self._by_doc.items()}

    def parent_of(self, hit: Hit) -> Chunk:
        """The parent section containing ``hit`` (a KeyError naming it if there is none)."""
        ps = self._by_doc.get(hit.doc_id, [])
        i = bisect.bisect_right(self._starts.get(hit.doc_id, []), hit.start or 0) - 1
        if i < 0 or not ps[i].start <= (hit.start or 0) < max(ps[i].end, ps[i].start + 1):
            raise KeyError(f"no parent of {hit.id!r} among the {len(ps)} parents of document "
                           f"{hit.doc_id!r}; build parents and children from the same "
                           f"documents (parent_child_chunks)")
        return ps[i]

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The best ``k`` parents (the number of results), best child first; a parent is
        returned only when its own metadata, too, passes ``where`` and ``scope``."""
        k, query, where = check_k(k), check_query(query), scoped(where, scope)
        out: dict[str, Hit] = {}
        for h in self.retriever.search(query, k=k * self.fetch, where=where):
            p = self.parent_of(h)
            if p.id not in out and matches(p.metadata, where):
                out[p.id] = Hit(p.id, h.score, len(out) + 1, p.doc_id, p.text, p.metadata,
                                p.start, p.end)
                if len(out) == k:
                    break
        return list(out.values())

    def __len__(self) -> int:
        return len(self.parents)

    @property
    def corpus_fingerprint(self) -> str:
        """The child index's fingerprint plus a hash of the parents: a change to either makes
        caches and hybrid checks see a different corpus."""
        return (f"{self.retriever.corpus_fingerprint}/parents:" +
                corpus_fingerprint([{"id": p.id, "text": p.text} for p in self.parents]))


class SentenceWindowRetriever(WrapperRetriever):
    """Search ``retriever`` (over sentences, e.g. ``sentence_chunks``), return each hit
    widened to ``window`` sentences before and after it in its document. Windows of two hits
    that overlap are merged into one (scored by the better hit), so text is never repeated.
    """

    def __init__(self, retriever, documents: Sequence[Document], window: int = 3,
                 fetch: int = 3):
        check_role(retriever, Retriever, "retriever")
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ValueError(f"window must be a whole number >= 0 (sentences on each side), "
                             f"got {window!r}")
        self.retriever, self.window, self.fetch = retriever, window, check_k(fetch, "fetch")
        self.documents = list(documents)
        self._by_id = {d.id: d for d in self.documents}
        self._meta = {d.id: page_metadata(d) for d in self.documents}   # as its chunks'
        self._spans = {d.id: sentence_spans(d.text) for d in self.documents}
        self._starts = {d: [a for a, _ in s] for d, s in self._spans.items()}

    def widen(self, hit: Hit) -> tuple[int, int]:
        """(start, end) of ``hit``'s window in its document."""
        if hit.doc_id not in self._by_id:
            raise KeyError(f"hit {hit.id!r} comes from document {hit.doc_id!r}, which this "
                           f"SentenceWindowRetriever was not given")
        spans = self._spans[hit.doc_id]
        i = max(bisect.bisect_right(self._starts[hit.doc_id], hit.start or 0) - 1, 0)
        lo, hi = max(i - self.window, 0), min(i + self.window, len(spans) - 1)
        return spans[lo][0], spans[hi][1]

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The best ``k`` windows (the number of results); a window carries its document's
        metadata (as its chunks do: ``page_metadata``), and is returned only when that, too,
        passes ``where`` and ``scope``."""
        k, query, where = check_k(k), check_query(query), scoped(where, scope)
        windows: list[Hit] = []
        for h in self.retriever.search(query, k=k * self.fetch, where=where):
            a, z = self.widen(h)
            meta = self._meta[h.doc_id]      # the window is the document's text
            if not matches(meta, where):
                continue
            for n, w in enumerate(windows):
                if w.doc_id == h.doc_id and a < w.end and w.start < z:   # overlap: merge
                    a, z = min(a, w.start), max(z, w.end)
                    text = self._by_id[h.doc_id].text[a:z]
                    windows[n] = replace(w, id=f"{h.doc_id}:{a}-{z}", text=text, start=a,
                                         end=z)
                    break
            else:
                if len(windows) < k:
                    text = self._by_id[h.doc_id].text[a:z]
                    windows.append(Hit(f"{h.doc_id}:{a}-{z}", h.score, len(windows) + 1,
                                       h.doc_id, text, meta, a, z))
        return windows

    @property
    def corpus_fingerprint(self) -> str:
        """The wrapped index's fingerprint plus the window size, which changes what is returned."""
        return f"{self.retriever.corpus_fingerprint}/window:{self.window}"


_WORD = re.compile(r"\S+")


@functools.lru_cache(maxsize=65536)
def _ends(text: str, length: str) -> tuple[int, ...]:
    """Character offset where each token (or word) of ``text`` ends (memoised: budget
    sweeps fit the same hits to several budgets)."""
    if length == "words":
        return tuple(m.end() for m in _WORD.finditer(text))
    enc = encoder_tokenizer()(text, add_special_tokens=False, return_offsets_mapping=True)
    return tuple(e for s, e in enc["offset_mapping"] if e > s)


def fit_budget(hits: Sequence[Hit], budget: int, length: str = "tokens") -> list[Hit]:
    """What a reader can be handed within ``budget`` tokens (the encoder's tokens, as in
    ``count_tokens``; ``length="words"``: whitespace-separated words): the hits in rank
    order, whole while they fit; the first that does not fit is cut to what is left (its
    ``text`` and ``end`` shortened, on a token boundary), and nothing after it is handed.
    Comparing retrievers at equal budgets, not equal k, is fair to small and big pieces.

    >>> hs = [Hit("a", 1.0, 1, "d", "one two three"), Hit("b", 0.5, 2, "d", "four five six")]
    >>> [h.text for h in fit_budget(hs, 5, length="words")]
    ['one two three', 'four five']
    """
    budget = check_k(budget, "budget")
    if length not in ("tokens", "words"):
        raise ValueError(f"length must be 'tokens' or 'words', got {length!r}")
    out, left = [], budget
    for h in hits:
        ends = _ends(h.text, length)
        if len(ends) <= left:
            out.append(replace(h, rank=len(out) + 1))
            left -= len(ends)
            if left == 0:
                break
            continue
        cut = ends[left - 1]
        out.append(replace(h, rank=len(out) + 1, text=h.text[:cut],
                           end=None if h.start is None else h.start + cut))
        break
    return out
