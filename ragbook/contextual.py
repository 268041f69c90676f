"""Contextual retrieval: index each chunk with a short note that situates it in its document.

A chunk cut from the middle of a page ("It is 14 days for annual contracts.") has lost the
words that say *what* it is about. Prepending a note before embedding and before BM25
indexing puts them back; the reader is still handed the chunk's own text. Two notes:

* ``title_context`` — the cheap baseline: the document title and the Markdown section path
  above the chunk ("Refund policy > Enterprise contracts");
* ``LLMContext`` — the published method: a chat model reads the document and the chunk and
  writes one or two sentences of context. Replies are greedy, so they are cached on disk
  (``Cache``, keyed by model weights, prompt and texts) and a re-run costs nothing.

Build with ``HybridRetriever(...).build(chunks, contexts=contexts_for(chunks, docs))``.

>>> d = Document("p", "# Plans\\n\\n## Pro\\n\\nPro has SSO.", title="Plans")
>>> title_context(Chunk("p:17-29", "p", "Pro has SSO.", 17, 29), d)
'Plans > Pro'
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from . import models
from .cache import Cache
from .llm import get_llm
from .types import Chunk, Document

__all__ = ["section_path", "title_context", "LLMContext", "contexts_for", "CONTEXT_PROMPT"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def section_path(doc: Document, offset: int) -> list[str]:
    """The Markdown headings in force at ``offset`` of ``doc``, outermost first."""
    stack: list[tuple[int, str]] = []
    for m in _HEADING.finditer(doc.text):
        if m.start() > offset:
            break
        level = len(m.group(1))
        stack = [(lv, t) for lv, t in stack if lv < level] + [(level, m.group(2))]
    return [t for _, t in stack]


def title_context(chunk: Chunk, doc: Document) -> str:
    """The document's title (else id) and the section path of the chunk, joined by ' > ';
    a heading equal to the title is not repeated."""
    title = doc.title or doc.id
    path = [h for h in section_path(doc, chunk.start) if h != title]
    return " > ".join([title, *path])


CONTEXT_PROMPT = (
    "You help a search engine. Given a document and one passage from it, write one or two "
    "short sentences that say what the passage is about and where it sits in the document "
    "(product, plan, feature, topic). Do not repeat the passage. Reply with the sentences "
    "only.")


class LLMContext:
    """A chat model's note for each chunk (the published contextual-retrieval method).

    ``max_doc_chars`` of the document are shown (small local models have small context
    windows); ``max_new_tokens`` bounds the note. Notes are cached by the generator's
    identity, the prompt and both texts, so only new chunks cost a generation."""

    def __init__(self, llm=None, max_doc_chars: int = 1500, max_new_tokens: int = 60):
        self._llm, self.max_doc_chars, self.max_new_tokens = llm, max_doc_chars, max_new_tokens
        self._cache: Cache | None = None

    @property
    def llm(self):
        """The chat model that writes the notes: the one given, else ``get_llm()`` loaded on first
        use (raises ``LLMUnavailableError`` when no generator can be loaded)."""
        if self._llm is None:
            self._llm = get_llm()
        return self._llm

    def _identity(self) -> str:
        name = getattr(self.llm, "name", type(self.llm).__name__)
        try:
            weights = models.weights_digest(models.resolve("generator"))
        except models.ModelUnavailableError:
            weights = "?"
        return f"{name}|{weights}|{Cache.key(CONTEXT_PROMPT, self.max_doc_chars)}"

    def messages(self, chunk: Chunk, doc: Document) -> list[dict]:
        """The chat messages asking for ``chunk``'s note: the prompt, the document (title and its
        first ``max_doc_chars`` characters) and the passage."""
        return [{"role": "system", "content": CONTEXT_PROMPT},
                {"role": "user", "content": f"Document: {doc.title}\n"
                 f"{doc.text[:self.max_doc_chars]}\n\nPassage:\n{chunk.text}\n\nContext:"}]

    def _key(self, chunk: Chunk, doc: Document) -> str:
        return Cache.key(chunk.text, doc.title, doc.text[:self.max_doc_chars],
                         self.max_new_tokens)

    def __call__(self, chunk: Chunk, doc: Document) -> str:
        return self.cache.get_or_make(self._key(chunk, doc), lambda: self.llm.generate(
            self.messages(chunk, doc), max_new_tokens=self.max_new_tokens,
            stop=("\n\n",)).strip())

    @property
    def cache(self) -> Cache:
        """The on-disk cache of notes, keyed by the model and prompt (opened on first use), so a
        note is generated once per chunk."""
        if self._cache is None:
            self._cache = Cache("contextual", self._identity())
        return self._cache

    def save_notes(self, path: str | Path, chunks: Sequence[Chunk],
                   docs: Sequence[Document]) -> Path:
        """Write the notes of ``chunks`` (made now if missing) to a JSONL file that can ship
        with a corpus, stamped with the generator's identity, so others skip generating."""
        by_id = {d.id: d for d in docs}
        lines = [json.dumps({"identity": self._identity(), "key": self._key(c, by_id[c.doc_id]),
                             "chunk": c.id, "note": self(c, by_id[c.doc_id])},
                            ensure_ascii=False) for c in chunks]
        Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return Path(path)

    def load_notes(self, path: str | Path) -> int:
        """Seed the note cache from a file written by ``save_notes``; only notes made by this
        same generator (name, weights, prompt) are taken. Returns how many were taken."""
        taken = 0
        for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                identity, key, note = row["identity"], row["key"], row["note"]
            except (ValueError, KeyError) as err:
                raise ValueError(f"{str(path)!r} line {n} is not a saved note ({err}); write "
                                 f"the file with LLMContext.save_notes") from None
            if identity == self._identity():
                self.cache.put(key, note)
                taken += 1
        return taken


def contexts_for(chunks: Sequence[Chunk], docs: Sequence[Document],
                 note: Callable[[Chunk, Document], str] = title_context,
                 show_progress: bool | None = None) -> list[str]:
    """One note per chunk (``note(chunk, its document)``), in chunk order; a progress bar
    when there are many (an LLM note takes about a second each on 2 CPU cores)."""
    by_id = {d.id: d for d in docs}
    missing = {c.doc_id for c in chunks} - set(by_id)
    if missing:
        raise KeyError(f"chunks come from documents not given: {sorted(missing)[:3]}; pass the "
                       f"documents the chunks were cut from")
    show = show_progress if show_progress is not None else (
        isinstance(note, LLMContext) and len(chunks) > 20)
    items = chunks
    if show:
        from tqdm.auto import tqdm

        items = tqdm(chunks, desc="contextual notes", unit="chunk")
    return [note(c, by_id[c.doc_id]) for c in items]
