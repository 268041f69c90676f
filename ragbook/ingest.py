"""Reading your own documents: a folder of Markdown/text files, or a JSONL file, as Documents.

Everything in the book runs on ``load_helpcentre()``; ``read_documents`` is the door for a
corpus of your own, and what ``ragbook index SRC`` calls. It is strict where silence would
cost you later (two files with one id) and lenient where a real docs folder is messy (empty
files, and files it cannot read, are skipped with a warning naming them, not an error).

    folder/ or file.jsonl --read_documents--> [Document] --chunk_documents--> [Chunk]

``sync_index(docs, out)`` keeps an index saved at ``out`` up to date with such documents:
only those added or changed since (by ``content_hash``) are chunked and embedded again, the
chunks of changed and deleted ones dropped, and the index saved — what ``ragbook index``
does on a folder that already holds an index, callable from Python or a server.

>>> import tempfile, pathlib
>>> root = pathlib.Path(tempfile.mkdtemp())
>>> _ = (root / "billing").mkdir(), (root / "billing" / "refunds.md").write_text(
...     "---\\nstatus: current\\n---\\n# Refund policy\\n\\n14 days.\\n")
>>> doc, = read_documents(root)
>>> doc.id, doc.title, dict(doc.metadata), doc.text
('billing/refunds', 'Refund policy', {'status': 'current'}, '# Refund policy\\n\\n14 days.\\n')
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .bm25 import BM25Index
from .chunking import chunk_documents
from .convert import CONVERTERS, MAX_BYTES, MAX_CHARS, convert, valid_unicode
from .datasets import split_front_matter
from .dense import DenseIndex, EncoderMismatchError
from .embeddings import Encoder
from .filters import check_metadata
from .folder_files import document_files
from .fusion import HybridRetriever
from .markdown_text import visible
from .persist import read_manifest, recover
from .text import decode_text
from .types import Document

__all__ = ["read_documents", "SUFFIXES", "content_hash", "sync_index", "IndexSync"]

SUFFIXES = (".md", ".markdown", ".txt", *CONVERTERS)  # PDF/HTML/DOCX: ragbook.convert
_MARKDOWN = (".md", ".markdown")
#: Metadata keys only the converters set (``read_pdf``'s page map): front matter may not.
OWNED_KEYS = frozenset({"format", "pages", "page_starts"})


def read_documents(path: str | os.PathLike, follow_links_out: bool = False,
                   max_bytes: int = MAX_BYTES, max_chars: int = MAX_CHARS) -> list[Document]:
    """The documents under ``path``: a folder, a ``.jsonl`` file, or one file it can read.

    **A folder**: every ``*.md``, ``*.markdown`` and ``*.txt`` below it (recursively, sorted;
    hidden files and folders such as ``.git``, and links to them, are skipped). A document's id
    is its path relative to the folder without the suffix (``billing/refunds``): stable across
    machines and re-runs. A front-matter block at the top (``split_front_matter``:
    ``key: value`` lines between ``---`` lines) becomes ``metadata`` and is removed from the
    text; keys only the converters set (``OWNED_KEYS``, such as a PDF's ``page_starts``) are
    ignored, with a warning. A Markdown file's HTML comments and hidden HTML elements (never
    shown on its rendered page) are left out, from a front-matter title too
    (``markdown_text.visible``). The title is the first ``# `` heading of a Markdown file
    (outside code fences), else the front matter's ``title``, else the file name.

    **A .jsonl file**: one JSON object per line with ``id`` and ``text`` (required, str),
    ``title`` (str) and ``metadata`` (an object) optional; other keys are ignored. Errors
    name the line number and the field.

    Documents with blank text are skipped with one warning that counts them and names the first
    few: an empty file (or one holding only front matter) is common in a docs folder and should
    not stop an index build. Duplicate ids, a missing path and a folder without matching files
    are errors that name the file and the fix. In a folder, a file that cannot be read (not
    UTF-8, over ``max_bytes``, front matter not ``key: value``, no access) is skipped with a
    warning that names it, why and the fix, like an unconvertible PDF below; the returned list's
    ``skipped`` maps such ids to the reason (``sync_index`` keeps their previous chunks). Given
    on its own, such a file is an error. Lone surrogates (not valid Unicode) in any text or file
    name become U+FFFD, and invisible characters (tag characters, zero-width spaces, bidi
    controls) are removed, with a warning. Text past ``max_chars`` is cut, with a warning.

    A file that is a link to somewhere outside the folder is skipped with a warning (its
    target was not meant to be served); ``follow_links_out=True`` reads it, and says so.
    A path that is not a regular file (a named pipe, which would block the read forever; a
    socket, a device, a dangling link) is skipped with a warning naming it in a folder, and
    is an error given on its own.

    **PDF, HTML and DOCX** (``.pdf``, ``.html``/``.htm``, ``.docx``; needs
    ``pip install "ragbook[documents]"``) are converted by ``ragbook.convert``: PDF pages
    with a page map in ``metadata["page_starts"]`` (``convert.pages_of(hit)``), HTML's main
    content and Word's paragraphs with ``#`` headings. In a folder, a file that cannot be
    converted (encrypted, no text layer, corrupt, empty, larger than ``max_bytes``) is
    skipped with a warning that says why, and one more that counts the skipped files.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{str(path)!r} does not exist; give a folder of "
                                f"{'/'.join(SUFFIXES)} files or a .jsonl file")
    if path.is_dir():
        docs = _read_folder(path, follow_links_out, (max_bytes, max_chars))
    elif not path.is_file():  # opening a named pipe waits for a writer: forever
        raise ValueError(f"{str(path)!r} is not a regular file (a named pipe, socket or "
                         f"device); give a folder, a .jsonl file or a document file")
    elif path.suffix.lower() == ".jsonl":
        docs = _read_jsonl(path)
    elif path.suffix.lower() in SUFFIXES:
        docs = [_read_one(path, path.stem, (max_bytes, max_chars))]
    else:
        raise ValueError(f"cannot read {str(path)!r} (suffix {path.suffix!r}); give a folder "
                         f"of {'/'.join(SUFFIXES)} files, one such file, or a .jsonl file")
    return _drop_blank(docs, path)


def _read_folder(root: Path, follow_links_out: bool, caps: tuple[int, int]) -> list[Document]:
    files = document_files(root, SUFFIXES, follow_links_out)
    if not files:
        raise ValueError(f"{str(root)!r} holds no {', '.join(SUFFIXES)} files (searched "
                         f"recursively); point at the folder that holds your documents")
    docs, source, skipped = Documents(), {}, {}
    for f in files:
        doc_id = _SURROGATE.sub("\ufffd", f.relative_to(root).with_suffix("").as_posix())
        if doc_id in source:
            raise ValueError(f"{str(source[doc_id])!r} and {str(f)!r} both give the document id "
                             f"{doc_id!r} (ids are paths without the suffix); rename or remove "
                             f"one of them")
        source[doc_id] = f
        try:  # one bad file, of any format, must not stop the index of the rest
            docs.append(_read_one(f, f.relative_to(root).with_suffix("").as_posix(), caps))
        except (ValueError, OSError) as err:
            skipped[doc_id] = str(err)
            warnings.warn(f"skipped: {err}", stacklevel=3)
    if skipped:
        _skipped(list(skipped), len(files), root)
    docs.skipped = skipped
    return docs


class Documents(list):
    """The documents ``read_documents`` read (a list), with ``skipped``: the id of each file
    it could not read, and why. ``sync_index`` keeps such a document's chunks from the
    previous index instead of deleting it: a file unreadable today is not a file removed."""

    skipped: dict[str, str]

    def __init__(self, docs=(), skipped: dict[str, str] | None = None):
        super().__init__(docs)
        self.skipped = dict(skipped or {})


def _read_one(path: Path, doc_id: str, caps: tuple[int, int]) -> Document:
    """One file as a Document within ``caps`` (max_bytes, max_chars), its text valid Unicode
    (``valid_unicode``); an unreadable file raises ``ValueError`` naming it and the fix."""
    try:
        if path.suffix.lower() in CONVERTERS:
            return convert(path, doc_id, *caps)   # checks its own Unicode
        return valid_unicode(_read_file(path, doc_id, *caps), path)
    except PermissionError as err:
        raise ValueError(f"{str(path)!r} could not be read ({err.strerror}); give yourself "
                         f"read access (chmod +r), or remove it") from None


def _skipped(skipped: list[str], total: int, root: Path) -> None:
    shown = ", ".join(repr(s) for s in skipped[:3]) + (", ..." if len(skipped) > 3 else "")
    if len(skipped) == total:
        raise ValueError(f"none of the {total} file(s) under {str(root)!r} could be read "
                         f"({shown}; each warning says why); fix or convert them")
    warnings.warn(f"skipped {len(skipped)} of {total} files under {str(root)!r} that could "
                  f"not be read ({shown}); indexed the other {total - len(skipped)}",
                  stacklevel=4)


def _read_file(path: Path, doc_id: str, max_bytes: int, max_chars: int) -> Document:
    where = repr(str(path))     # a file name may hold escape sequences: shown, never obeyed
    if (size := path.stat().st_size) > max_bytes:  # refused unread, as convert() does
        raise ValueError(f"{where} is {size:,} bytes, over the limit max_bytes={max_bytes:,}; "
                         f"split the file, or pass a larger max_bytes")
    meta, body = split_front_matter(decode_text(path.read_bytes(), where), where)
    owned = sorted(OWNED_KEYS & meta.keys())
    if owned:  # a page map read from text would crash pages_of, or point at the wrong pages
        warnings.warn(f"{where}: front matter sets {', '.join(map(repr, owned))}, which only "
                      f"the PDF/HTML/DOCX converters set; ignored them — rename them (e.g. "
                      f"'source_{owned[0]}') to keep them as metadata", stacklevel=4)
        meta = {k: v for k, v in meta.items() if k not in OWNED_KEYS}
    markdown = path.suffix.lower() in _MARKDOWN
    body = visible(body) if markdown else body  # no comments, no hidden HTML (markdown_text)
    if markdown and "title" in meta:  # a title hides nothing the body may not
        meta["title"] = visible(meta["title"]).strip()
    # the loaders' convention (datasets.load_helpcentre): no blank lines at either end, one
    # final newline, so the same article read either way chunks to the same ids and offsets
    text = body.strip("\n") + "\n" if body.strip() else ""
    if len(text) > max_chars:  # cut at a word boundary, as convert() does
        cut = text.rfind(" ", 0, max_chars)
        cut = cut if cut > max_chars // 2 else max_chars
        warnings.warn(f"{where} holds {len(text):,} characters, over max_chars={max_chars:,}; "
                      f"only the first {cut:,} are indexed. Split the file, or pass a larger "
                      f"max_chars", stacklevel=4)
        text = text[:cut].rstrip() + "\n"
    heading = _first_heading(text) if markdown else None
    return Document(id=doc_id, text=text, title=heading or meta.get("title") or path.stem,
                    metadata=meta)


def _first_heading(text: str) -> str | None:
    """The first level-1 ATX heading (``# Title``), ignoring lines inside code fences."""
    fence = None
    for line in text.split("\n"):     # not splitlines: a form feed breaks no Markdown line
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            fence = None if fence and stripped.startswith(fence) else (fence or stripped[:3])
        elif fence is None and line.startswith("# "):
            title = line[2:].strip().rstrip("#").strip()
            if title:
                return title
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _read_jsonl(path: Path) -> list[Document]:
    docs, line_of = [], {}
    for n, line in enumerate(path.read_bytes().split(b"\n"), 1):
        where = f"{str(path)!r} line {n}"
        text = decode_text(line, where)
        if not text.strip():
            continue
        try:
            row = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{where} is not valid JSON ({err.msg} at column {err.colno}); "
                             f"write one JSON object per line") from None
        if not isinstance(row, dict):
            raise ValueError(f"{where} is a JSON {type(row).__name__}, not an object; write "
                             f'one object per line like {{"id": "a", "text": "..."}}')
        for field, required in (("id", True), ("text", True), ("title", False)):
            if field not in row:
                if required:
                    raise ValueError(f"{where} has no {field!r} field; every line needs "
                                     f'"id" and "text" (str)')
            elif not isinstance(row[field], str) or (field == "id" and not row[field]):
                raise ValueError(f"{where}: field {field!r} must be a non-empty str, got "
                                 f"{row[field]!r:.40}; quote it, e.g. \"{field}\": \"...\"")
        for field in ("id", "text", "title", "metadata"):  # "\ud800": an escape, not text
            if _SURROGATE.search(json.dumps(row.get(field, ""), ensure_ascii=False)):
                raise ValueError(f"{where}: field {field!r} holds a lone surrogate escape (like "
                                 f"\"\\ud800\", half of a character's UTF-16 pair); write the "
                                 f"character itself or its full pair, or remove the escape")
        if row["id"] in line_of:
            raise ValueError(f"{where} repeats the id {row['id']!r} of line "
                             f"{line_of[row['id']]}; ids must be unique")
        line_of[row["id"]] = n
        try:
            meta = check_metadata(row.get("metadata", {}), row["id"])
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: field 'metadata' is invalid: {err}") from None
        docs.append(valid_unicode(Document(id=row["id"], text=row["text"],
                                           title=row.get("title", ""), metadata=meta), path))
    if not docs:
        raise ValueError(f"{str(path)!r} holds no JSON lines; write one object per line like "
                         f'{{"id": "a", "text": "..."}}')
    return docs


def _drop_blank(docs: list[Document], path: Path) -> list[Document]:
    blank = [d.id for d in docs if not d.text.strip()]
    if not blank:
        return docs
    if len(blank) == len(docs):
        raise ValueError(f"every document in {str(path)!r} is blank ({len(blank)}); give "
                         f"files with some text")
    shown = ", ".join(repr(b) for b in blank[:3]) + (", ..." if len(blank) > 3 else "")
    warnings.warn(f"skipped {len(blank)} blank document{'s' * (len(blank) > 1)} in "
                  f"{str(path)!r} ({shown}); fill or remove them to silence this",
                  stacklevel=3)
    return Documents((d for d in docs if d.text.strip()), getattr(docs, "skipped", None))


# -- keeping a saved index up to date ---------------------------------------------------------
def content_hash(doc: Document) -> str:
    """What a document's chunks are made of (id, title, text, metadata), hashed: a document
    whose hash differs from the one saved with the index has changed."""
    content = json.dumps([doc.id, doc.title, doc.text, doc.metadata], sort_keys=True,
                         ensure_ascii=False, default=str)
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class IndexSync:
    """What ``sync_index`` did. ``rebuilt``: the index was built in full (then every document
    counts as added), with ``reason`` saying why when ``out`` held an index it could not
    update; else the ids of the documents ``added``, ``changed`` and ``deleted`` since the
    save, how many are ``unchanged``, the chunks written and removed. ``retriever``: the
    index now saved at ``out``."""

    retriever: HybridRetriever
    rebuilt: bool
    reason: str | None
    added: tuple[str, ...]
    changed: tuple[str, ...]
    deleted: tuple[str, ...]
    unchanged: int
    chunks_written: int
    chunks_removed: int

    @property
    def saved(self) -> bool:
        """Whether ``out`` was written (an update that found no change leaves it as it was)."""
        return self.rebuilt or bool(self.added or self.changed or self.deleted)


def sync_index(docs: Sequence[Document], out: str | os.PathLike, encoder: Encoder | None = None,
               *, size: int = 256, overlap: int = 32, rebuild: bool = False,
               on_full_build: Callable[[str], None] | None = None) -> IndexSync:
    """Make the ``HybridRetriever`` saved at ``out`` an index of ``docs`` (chunked with
    ``size`` and ``overlap`` tokens, embedded by ``encoder``) and save it atomically; returns
    an ``IndexSync`` saying what changed.

    When ``out`` holds an index saved by this function with the same ``size`` and
    ``overlap`` and embedded by the same encoder, only the documents added or changed since
    (their ``content_hash`` differs from the one saved with the index) are chunked and
    embedded, and the chunks of changed and deleted documents are dropped; nothing is written
    when nothing changed. Otherwise (or with ``rebuild=True``) the index is built in full,
    after calling ``on_full_build(reason)`` when ``out`` held an index it could not update.
    ``CorruptIndexError`` when the index at ``out`` is damaged (``rebuild=True`` replaces
    it). A document ``docs.skipped`` names (a file ``read_documents`` could not read now)
    keeps its chunks from the previous index, with a warning: only a file that is gone is
    deleted."""
    out, encoder = Path(out), encoder if encoder is not None else Encoder()
    sources = {"size": size, "overlap": overlap,
               "documents": {d.id: content_hash(d) for d in docs}}
    previous, reason = (None, None) if rebuild else _previous(out, sources, encoder)
    if previous is not None:
        return _update(*previous, docs, sources, out, getattr(docs, "skipped", {}))
    if reason is not None and on_full_build is not None:
        on_full_build(reason)
    if getattr(docs, "skipped", None) and (out / "manifest.json").is_file():
        warnings.warn(f"building {str(out)!r} in full without {sorted(docs.skipped)}, whose "
                      f"files could not be read now (the warnings above say why), so their "
                      f"previous chunks are not kept; fix the files and index again",
                      stacklevel=2)
    chunks = chunk_documents(docs, size=size, overlap=overlap)
    retriever = HybridRetriever(DenseIndex(encoder), BM25Index()).build(chunks)
    retriever.save(out, sources=sources)
    return IndexSync(retriever, True, reason, tuple(d.id for d in docs), (), (), 0,
                     len(chunks), 0)


def _previous(out: Path, sources: dict, encoder: Encoder):
    """``((retriever, saved sources), None)`` when ``out`` holds an index this sync can
    update in place; ``(None, why not)`` when it holds one that must be built again in full;
    ``(None, None)`` when it holds none."""
    recover(out)  # a save killed between its two renames: update the previous index
    if not (out / "manifest.json").is_file():
        return None, None
    saved = read_manifest(out, "HybridRetriever").get("sources")
    if not isinstance(saved, dict) or not isinstance(saved.get("documents"), dict):
        return None, "it keeps no hash per document (saved by an older ragbook, or from Python)"
    if (saved.get("size"), saved.get("overlap")) != (sources["size"], sources["overlap"]):
        return None, (f"it was chunked with --size {saved.get('size')} --overlap "
                      f"{saved.get('overlap')}, not --size {sources['size']} --overlap "
                      f"{sources['overlap']}")
    try:
        return (HybridRetriever.load(out, encoder=encoder), saved), None
    except EncoderMismatchError:
        return None, f"it was embedded by another encoder than {encoder.fingerprint}"


def _update(retriever: HybridRetriever, saved: dict, docs: Sequence[Document], sources: dict,
            out: Path, skipped: dict[str, str]) -> IndexSync:
    """Re-chunk and re-embed only the documents added or changed since ``out`` was saved,
    drop the chunks of changed and deleted ones, and save (atomically) when any changed.
    A ``skipped`` document (its file unreadable now) keeps its saved chunks and hash."""
    old, new = saved["documents"], sources["documents"]
    for doc_id, why in skipped.items():
        if doc_id in old and doc_id not in new:
            new[doc_id] = old[doc_id]
            warnings.warn(f"kept {doc_id!r} from the previous index at {str(out)!r}: its file "
                          f"could not be read now ({why}); fix the file and index again to "
                          f"update it, or delete the file to drop it", stacklevel=3)
    added = [d for d in docs if d.id not in old]
    changed = [d for d in docs if d.id in old and old[d.id] != new[d.id]]
    deleted = [i for i in old if i not in new]
    chunks = chunk_documents(added + changed, size=sources["size"], overlap=sources["overlap"])
    redo, fresh = {d.id for d in changed} | set(deleted), {c.id for c in chunks}
    stale = [r["id"] for r in retriever.items_ if r["doc_id"] in redo and r["id"] not in fresh]
    if added or changed or deleted:
        retriever.update(upsert=chunks, delete=stale)
        retriever.save(out, sources=sources)
    return IndexSync(retriever, False, None, tuple(d.id for d in added),
                     tuple(d.id for d in changed), tuple(deleted),
                     len(docs) - len(added) - len(changed), len(chunks), len(stale))
