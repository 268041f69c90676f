"""Reading PDF, HTML and Word files as Documents: text a chunk's offsets can point into.

Your documents rarely arrive as Markdown. Each converter here turns one format into a
``Document`` whose ``text`` is what gets chunked, so every offset a ``Chunk`` or ``Hit``
carries is exact against the *extracted* text, and every hit can be traced back:

    file.pdf  --read_pdf-->  text of each page, pages joined by a blank line;
                             metadata["page_starts"]: the offset where each page begins
    page.html --read_html--> the main content (navigation, header, footer, scripts dropped)
                             as Markdown-like text: "# " headings, "- " list items, code fences
    file.docx --read_docx--> paragraphs; Heading styles as "# " headings; tables as rows

A hit is traced to its pages with ``pages_of(hit)`` (a chunk crossing a page boundary gives
both) and to its headings with ``contextual.section_path(doc, hit.start)``, exactly as for a
Markdown file. The libraries are an optional extra (``pip install "ragbook[documents]"``:
pypdf, beautifulsoup4, python-docx), imported only when a file of that kind is read.

A file that cannot be converted (encrypted, no text layer, corrupt, empty, over
``max_bytes``, nested too deeply, a DOCX whose XML unzips past ``MAX_UNZIPPED``) raises
``ConversionError`` naming the file, the problem and the fix — never another error —
and ``ingest.read_documents`` skips such a file in a folder with a warning and reads the
rest. Text past ``max_chars`` (a small file can expand to megabytes: a PDF's compressed
page streams, a zipped DOCX) is cut with a warning. Content a reader does not see is left
out: HTML hidden by ``hidden``, ``aria-hidden``, ``display:none``, ``visibility:hidden``,
``opacity:0``, ``font-size:0`` or a hiding class, CDATA, Word's hidden runs, and PDF text
drawn invisible (render mode 3).

>>> import tempfile, pathlib
>>> page = pathlib.Path(tempfile.mkdtemp()) / "refunds.html"
>>> _ = page.write_text("<title>Refunds</title><nav>Home | Pricing</nav><main>"
...                     "<h1>Refund policy</h1><p>Refunds take <b>14</b> days.</p></main>")
>>> doc = convert(page)
>>> doc.id, doc.title, doc.text
('refunds', 'Refunds', '# Refund policy\\n\\nRefunds take 14 days.\\n')
"""
from __future__ import annotations

import importlib
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .docx_text import body_items
from .types import Document

__all__ = ["convert", "read_pdf", "read_html", "read_docx", "pages_of", "CONVERTERS",
           "MAX_BYTES", "MAX_CHARS", "MAX_UNZIPPED", "ConversionError"]

MAX_BYTES = 50_000_000  # the largest file converted by default (50 MB); read_documents(max_bytes=)
MAX_CHARS = 10_000_000  # the most text kept from one file (about 3,000 pages); convert(max_chars=)
MAX_UNZIPPED = 200_000_000  # a DOCX whose parts unzip past this is refused before parsing
_MAX_DEPTH = 200        # HTML elements nested deeper are read as plain text
_EXTRA = 'pip install "ragbook[documents]"'


class ConversionError(ValueError):
    """A file that cannot be read as a document (encrypted, no text, corrupt, too large); the
    message names the file, the problem and the fix. ``read_documents`` skips such a file in a
    folder, with a warning, and reads the others."""


def convert(path: str | os.PathLike, doc_id: str | None = None,
            max_bytes: int = MAX_BYTES, max_chars: int = MAX_CHARS) -> Document:
    """The ``Document`` in one PDF, HTML or DOCX file, by its suffix (see ``CONVERTERS``).

    ``doc_id`` defaults to the file name without the suffix (``read_documents`` passes the
    path relative to its folder). Files larger than ``max_bytes`` are refused before they are
    opened: a 2 GB scan would otherwise hold the whole index build.
    Text past ``max_chars`` is cut at a word boundary, with a warning naming the file.
    """
    path = Path(path)
    reader = CONVERTERS.get(path.suffix.lower())
    if reader is None:
        raise ValueError(f"cannot convert {str(path)!r} (suffix {path.suffix!r}); the converted "
                         f"formats are {', '.join(CONVERTERS)}")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise ValueError(f"max_bytes must be a whole number of bytes >= 1, got {max_bytes!r}")
    size = path.stat().st_size
    if size > max_bytes:
        raise ConversionError(f"{str(path)!r} is {size:,} bytes, over the limit max_bytes="
                              f"{max_bytes:,}; split the file, or pass a larger max_bytes")
    try:
        doc = reader(path, doc_id or path.stem)
    except (ConversionError, ImportError):
        raise
    except RecursionError:
        raise ConversionError(f"{str(path)!r} is nested too deeply to convert; save it "
                              f"flatter (or as plain text), or remove it") from None
    except Exception as err:  # a converter's unforeseen failure: one bad file, not a crash
        raise _unreadable(path, path.suffix.lstrip(".").upper(), err) from err
    if len(doc.text) <= max_chars:
        return doc
    cut = doc.text.rfind(" ", 0, max_chars)
    text = doc.text[:cut if cut > max_chars // 2 else max_chars].rstrip() + "\n"
    warnings.warn(f"{str(path)!r} converts to {len(doc.text):,} characters, over max_chars="
                  f"{max_chars:,}; only the first {len(text):,} are indexed. Split the file, "
                  f"or pass a larger max_chars", stacklevel=2)
    meta = dict(doc.metadata)
    if "page_starts" in meta:
        meta["page_starts"] = [min(s, len(text)) for s in meta["page_starts"]]
    return Document(id=doc.id, text=text, title=doc.title, metadata=meta)


def _library(module: str, package: str, suffix: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"reading {suffix} files needs the package {package!r}, which is not "
                          f"installed; install the documents extra: {_EXTRA}") from None


def _unreadable(path: Path, kind: str, err: Exception) -> ConversionError:
    detail = " ".join(str(err).split())[:160] or type(err).__name__
    return ConversionError(f"{str(path)!r} is not a readable {kind} file ({detail}); open it "
                           f"in its application and save it again, or remove it")


def _finish(blocks: list[str]) -> str:
    """Blocks joined by blank lines, one final newline: the convention of ``read_documents``
    (no blank lines at either end), so a converted file chunks like a Markdown one."""
    return "\n\n".join(blocks) + "\n" if blocks else ""


# -- PDF -------------------------------------------------------------------------------------
def read_pdf(path: Path, doc_id: str) -> Document:
    """A PDF's text layer, page by page (pypdf), pages joined by a blank line.

    ``metadata``: ``format`` "pdf", ``pages`` (the page count) and ``page_starts``, the
    offset in ``text`` where each page's text begins (a page without text begins where the
    next one does); ``pages_of`` turns a hit's offsets into page numbers with it. The title is
    the PDF's own Title field, else the file name. An encrypted PDF that opens without a
    password is read; one that needs a password, or one with no text at all (a scan), is
    refused; pages without text in an otherwise textual PDF are named in a warning.
    """
    pypdf = _library("pypdf", "pypdf", ".pdf")
    try:
        pdf = pypdf.PdfReader(path)
        if pdf.is_encrypted and not pdf.decrypt(""):
            raise ConversionError(f"{str(path)!r} is encrypted and needs a password to open; "
                                  f"decrypt it first (e.g. qpdf --decrypt --password=... in.pdf "
                                  f"out.pdf)")
        pages = [_visible_text(page) for page in pdf.pages]
        title = ((pdf.metadata or {}).get("/Title") or "").strip()
    except ConversionError:
        raise
    except Exception as err:  # pypdf raises many kinds on a damaged file; all mean "unreadable"
        if type(err).__name__ == "DependencyError":  # AES needs the cryptography package
            raise ConversionError(f"{str(path)!r} is AES-encrypted and pypdf needs the "
                                  f"'cryptography' package to open it: pip install "
                                  f"cryptography, or decrypt the file first") from err
        raise _unreadable(path, "PDF", err) from err
    if not pages:
        raise ConversionError(f"{str(path)!r} has no pages; remove it")
    texts = [p.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n").strip()
             for p in pages]
    empty = [n for n, t in enumerate(texts, 1) if not t]
    if len(empty) == len(texts):
        raise ConversionError(f"{str(path)!r} has no text layer on any of its {len(texts)} "
                              f"page(s) (a scan or images of text): run OCR first (e.g. "
                              f"ocrmypdf in.pdf out.pdf) and index the result")
    if empty:
        shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
        warnings.warn(f"{str(path)!r}: {len(empty)} of {len(texts)} pages have no text layer "
                      f"(pages {shown}) and are not indexed; run OCR first (e.g. ocrmypdf) to "
                      f"include them", stacklevel=3)
    starts, offset, blocks = [], 0, []
    for t in texts:
        starts.append(offset)
        if t:
            blocks.append(t)
            offset += len(t) + 2  # the blank line that follows a page
    text = _finish(blocks)
    starts = [min(s, len(text)) for s in starts]  # trailing empty pages begin at the end
    return Document(id=doc_id, text=text, title=title or path.stem,
                    metadata={"format": "pdf", "pages": len(texts), "page_starts": starts})


def _visible_text(page) -> str:
    """A page's text, without text drawn invisible (render mode 3 or 7: neither filled nor
    stroked, the way OCR layers and planted instructions hide text). Only a page that sets
    such a mode pays for the slower walk."""
    contents = page.get_contents()
    data = contents.get_data() if contents is not None else b""
    if not re.search(rb"(?<![\w.])[37]\s+Tr\b", data):
        return page.extract_text() or ""
    modes, parts = [0], []

    def operator(op, args, cm, tm):
        if op == b"Tr" and args:
            modes[-1] = int(args[0])
        elif op == b"q":
            modes.append(modes[-1])
        elif op == b"Q" and len(modes) > 1:
            modes.pop()

    def text(t, cm, tm, font, size):
        if modes[-1] not in (3, 7):
            parts.append(t)

    page.extract_text(visitor_operand_before=operator, visitor_text=text)
    return "".join(parts)


def pages_of(item) -> tuple[int, ...]:
    """The 1-based page numbers a chunk's or hit's ``[start, end)`` covers in its PDF: one
    page, or each page of a span that crosses a boundary (pages without text are never
    covered). ``()`` for an item without a page map (not from a PDF) or without offsets.

    >>> from ragbook.types import Hit
    >>> meta = {"page_starts": [0, 40, 40, 95]}   # page 2 holds no text
    >>> pages_of(Hit("a:30-60", 1.0, 1, "a", "", meta, 30, 60)), pages_of(Hit("b", 1.0, 1))
    ((1, 3), ())
    """
    starts = (item.metadata or {}).get("page_starts")
    if not starts or item.start is None or item.end is None:
        return ()
    ends = [*starts[1:], float("inf")]
    return tuple(n for n, (s, e) in enumerate(zip(starts, ends, strict=True), 1)
                 if s < e and s < max(item.end, item.start + 1) and item.start < e)


# -- HTML ------------------------------------------------------------------------------------
_DROP = ("script", "style", "noscript", "template", "nav", "aside", "form", "svg", "iframe",
         "button", "select", "dialog", "head")
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "dialog"}
_SECTIONING = ("main", "article", "section")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCK = {"p", "div", "section", "article", "main", "body", "ul", "ol", "dl", "dt", "dd",
          "blockquote", "figure", "figcaption", "table", "thead", "tbody", "tfoot", "header",
          "footer", "address", "details", "summary", "hr", "center"}


def read_html(path: Path, doc_id: str) -> Document:
    """An HTML page's main content as Markdown-like text (BeautifulSoup, stdlib parser).

    Boilerplate goes first: scripts, styles, ``nav``, ``aside``, forms, hidden elements,
    ARIA navigation/banner/footer roles, and the page's own ``header``/``footer`` (a header
    inside an article or section, or one holding a heading, stays). Of what is left,
    ``<main>`` (else the one ``<article>``, else ``<body>``) becomes blocks: ``h1``–``h6`` as
    ``#`` headings (so ``section_path`` finds the heading path), paragraphs, ``- `` list
    items, fenced ``pre`` code, table rows with cells joined by `` | ``. The title is
    ``<title>``, else the first heading, else the file name. The encoding is what the page
    declares, else detected.
    """
    bs4 = _library("bs4", "beautifulsoup4", ".html")
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise ConversionError(f"{str(path)!r} holds NUL bytes: it is binary data, not an HTML "
                              f"page; rename or remove it")
    try:
        soup = bs4.BeautifulSoup(raw, "html.parser")
    except Exception as err:
        raise _unreadable(path, "HTML", err) from err
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    for tag in soup.find_all(_is_boilerplate):
        if not tag.decomposed:
            tag.decompose()
    articles = soup.find_all("article")
    root = (soup.find("main") or soup.find(attrs={"role": "main"})
            or (articles[0] if len(articles) == 1 else None) or soup.body or soup)
    blocks: list[str] = []
    pending: list[str] = []
    deep: list[int] = []
    _html_blocks(root, blocks, pending, bs4, 0, deep)
    _flush(pending, blocks)
    if deep:
        warnings.warn(f"{str(path)!r} nests elements over {_MAX_DEPTH} deep; what is deeper "
                      f"is indexed as plain text (no headings or lists there)", stacklevel=3)
    blocks = [b for b in blocks if b.strip("#-|` \n")]
    if not blocks:
        raise ConversionError(f"{str(path)!r} holds no text once navigation, scripts and page "
                              f"boilerplate are removed (a script-rendered page or an empty "
                              f"one); save the rendered page, or remove it")
    first_heading = next((b.lstrip("#").strip() for b in blocks if b.startswith("#")), "")
    return Document(id=doc_id, text=_finish(blocks),
                    title=title or first_heading or path.stem, metadata={"format": "html"})


_HIDING_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)"
                           r"|opacity\s*:\s*0*(?:\.0*)?\s*(?:;|$|!)|font-size\s*:\s*0+(?:\.0*)?"
                           r"(?:px|pt|em|rem|%)?\s*(?:;|$|!))", re.I)
_HIDING_CLASSES = {"hidden", "d-none", "hide", "is-hidden", "invisible", "display-none",
                   "u-hidden", "hidden-xs-up"}


def _is_boilerplate(tag) -> bool:
    if tag.name in _DROP or tag.get("role") in _DROP_ROLES:
        return True
    if tag.has_attr("hidden") or tag.get("aria-hidden") == "true" \
            or _HIDING_STYLE.search(tag.get("style") or "") \
            or _HIDING_CLASSES & {c.lower() for c in tag.get_attribute_list("class") if c}:
        return True
    # the page's header and footer are boilerplate; an article's own header, or any header
    # with a heading in it, holds the title
    if tag.name not in ("header", "footer") or tag.find_parent(_SECTIONING) is not None:
        return False
    return tag.name == "footer" or tag.find(list(_HEADINGS)) is None


def _html_blocks(node, out: list[str], inline: list[str], bs4, depth: int = 0,
                 deep: list[int] | None = None) -> None:
    """Append the Markdown-like blocks under ``node`` to ``out``; ``inline`` collects the text
    of the paragraph being read until a block element ends it. Below ``_MAX_DEPTH`` levels
    an element's text is read flat (``get_text`` does not recurse), noted in ``deep``."""
    for child in node.children:
        if isinstance(child, bs4.NavigableString):
            if type(child) is bs4.NavigableString:  # not comments, doctypes or CDATA
                inline.append(str(child))
            continue
        if depth >= _MAX_DEPTH:
            inline.append(" " + child.get_text(" ") + " ")
            if deep is not None:
                deep.append(depth)
            continue
        name = child.name
        if name in _HEADINGS:
            _flush(inline, out)
            text = _words(child.get_text(" "))
            if text:
                out.append("#" * _HEADINGS[name] + " " + text)
        elif name == "pre":
            _flush(inline, out)
            code = child.get_text().strip("\n")
            if code.strip():
                out.append(f"```\n{code}\n```")
        elif name == "li":
            _flush(inline, out)
            inner: list[str] = []
            pending: list[str] = []
            _html_blocks(child, inner, pending, bs4, depth + 1, deep)
            _flush(pending, inner)  # text directly in the item, after any nested list
            out.extend(["- " + inner[0], *inner[1:]] if inner else [])
        elif name == "tr":
            _flush(inline, out)
            cells = [_words(c.get_text(" ")) for c in child.find_all(("td", "th"))]
            if any(cells):
                out.append(" | ".join(cells))
        elif name == "br":
            inline.append(" ")
        elif name in _BLOCK:
            _flush(inline, out)
            _html_blocks(child, out, [], bs4, depth + 1, deep)
        else:  # inline markup (a, b, em, code, span, ...): its text joins the paragraph
            _html_blocks(child, out, inline, bs4, depth + 1, deep)
    if node.name in _BLOCK:
        _flush(inline, out)


def _flush(inline: list[str], out: list[str]) -> None:
    text = _words("".join(inline))
    inline.clear()
    if text:
        out.append(text)


def _words(text: str) -> str:
    return " ".join(text.split())


# -- DOCX ------------------------------------------------------------------------------------
def read_docx(path: Path, doc_id: str) -> Document:
    """A Word file's body in order (python-docx): paragraphs, headings and tables.

    A paragraph in a ``Heading N`` style becomes an ``N``-level ``#`` heading, one level
    deeper when the file has a ``Title`` paragraph (which becomes the ``#`` heading above
    them), so ``section_path`` gives Title > Heading 1 > Heading 2. ``List ...`` styles become
    ``- `` items; a table row becomes its cells joined by `` | ``. Page headers, footers and
    comments are left out, and so are hidden runs (``<w:vanish/>``) and deleted text;
    tracked insertions, content controls, fields and text boxes are read (``docx_text``).
    The title is the file's Title property, else its Title paragraph,
    else its first heading, else the file name.
    """
    docx = _library("docx", "python-docx", ".docx")
    _check_unzipped(path)
    try:
        word = docx.Document(str(path))
        items = [(kind, _style(el, word, docx) if kind == "p" else "", text)
                 for kind, el, text in body_items(word)]
        title = (word.core_properties.title or "").strip()
    except Exception as err:  # not a zip, a zip without Word parts, damaged XML
        raise _unreadable(path, "DOCX", err) from err
    shift = int(any(style == "Title" for _, style, _ in items))
    blocks, headings = [], []
    for kind, style, text in items:
        if kind == "p":
            if not text:
                continue
            heading = re.fullmatch(r"Heading ([1-9])", style)
            level = 1 if style == "Title" else int(heading[1]) + shift if heading else None
            if level is not None:
                blocks.append("#" * min(level, 6) + " " + text)
                headings.append((style, text))
            else:
                blocks.append(("- " if style.startswith("List") else "") + text)
            continue
        blocks.append(text)           # a table row: its cells joined by " | "
    if not blocks:
        raise ConversionError(f"{str(path)!r} holds no text (no paragraph or table with "
                              f"words); remove it, or fill it")
    named = next((t for s, t in headings if s == "Title"), "") or next(
        (t for _, t in headings), "")
    return Document(id=doc_id, text=_finish(blocks), title=title or named or path.stem,
                    metadata={"format": "docx"})


def _style(p, word, docx) -> str:
    style = docx.text.paragraph.Paragraph(p, word).style
    return getattr(style, "name", "") or ""


def _check_unzipped(path: Path) -> None:
    """Refuse a DOCX whose parts unzip past ``MAX_UNZIPPED`` bytes (a zip bomb), before
    parsing any of it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            size = sum(i.file_size for i in z.infolist())
    except (zipfile.BadZipFile, OSError):
        return                        # python-docx names the damage
    if size > MAX_UNZIPPED:
        raise ConversionError(f"{str(path)!r} unzips to {size:,} bytes, over MAX_UNZIPPED="
                              f"{MAX_UNZIPPED:,} (a compressed file that expands enormously); "
                              f"open it in Word and save a smaller copy, or remove it")


CONVERTERS: dict[str, Callable[[Path, str], Document]] = {
    ".pdf": read_pdf, ".html": read_html, ".htm": read_html, ".docx": read_docx}
