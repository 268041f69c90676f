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
``opacity:0``, ``font-size:0`` (however the style is spelled: comments, escapes, case, any
unit) or a hiding class, or by the page's own style sheets (``css_cascade``: selectors,
cascade, ``@media``, text the colour of its backdrop), ``<canvas>``/``<object>`` fallback,
CDATA, Word's hidden runs, and PDF text drawn invisible (render mode 3), off the page,
clipped away or covered (``pdf_geometry``), except a scan's OCR layer (its only text, over
an image).

>>> import tempfile, pathlib
>>> page = pathlib.Path(tempfile.mkdtemp()) / "refunds.html"
>>> _ = page.write_text("<title>Refunds</title><nav>Home | Pricing</nav><main>"
...                     "<h1>Refund policy</h1><p>Refunds take <b>14</b> days.</p></main>")
>>> doc = convert(page)
>>> doc.id, doc.title, doc.text
('refunds', 'Refunds', '# Refund policy\\n\\nRefunds take 14 days.\\n')
"""
from __future__ import annotations

import bisect
import os
import re
import stat
import warnings
from collections.abc import Callable
from pathlib import Path

from .conversion import (
    MAX_BYTES,
    MAX_CHARS,
    MAX_UNZIPPED,
    ConversionError,
    html_text,
    join_blocks,
    library,
    unreadable,
)
from .css_cascade import Cascade
from .docx_text import read_docx
from .html_hiding import HIDING_CLASSES
from .pdf_text import read_pdf
from .types import Document

__all__ = ["convert", "valid_unicode", "read_pdf", "read_html", "read_docx", "pages_of",
           "CONVERTERS", "MAX_BYTES", "MAX_CHARS", "MAX_UNZIPPED", "ConversionError"]

_MAX_DEPTH = 200        # HTML elements nested deeper are read as plain text


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
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):  # opening a named pipe waits for a writer: forever
        raise ConversionError(f"{str(path)!r} is not a regular file (a named pipe, socket or "
                              f"device); give the document file itself")
    size = info.st_size
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
        raise unreadable(path, path.suffix.lstrip(".").upper(), err) from err
    doc = valid_unicode(doc, path)
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


_SURROGATE = re.compile("[\ud800-\udfff]")
# What no reader sees but a model reads, or a search splits words at: Unicode tag characters,
# zero-width space, word joiner, bidi embeddings/overrides/isolates. Not ZWJ and ZWNJ
# (U+200D, U+200C): scripts and emoji need them.
_INVISIBLE = re.compile("[\U000e0000-\U000e007f\u200b\u2060\u202a-\u202e\u2066-\u2069]")


def valid_unicode(doc: Document, path: str | os.PathLike) -> Document:
    """``doc`` with each lone surrogate in its id, title or text (half of a UTF-16 pair: from a
    PDF font map, or a file name that is not UTF-8) replaced by U+FFFD, with a warning naming
    the file: no tokenizer or index file can store one, and it must not fail a later stage.
    Invisible characters (``_INVISIBLE``) are removed from its title and text, with a warning
    counting them: they can hide an instruction a reader never sees (tag characters spell
    text), reverse what is shown, or split a word so search misses it. Every format passes
    through here (``convert`` and ``ingest.read_documents``); a page map follows the text."""
    fields = {"id": doc.id, "title": doc.title, "text": doc.text}
    bad = [name for name, value in fields.items() if _SURROGATE.search(value)]
    gone = [m.start() for m in _INVISIBLE.finditer(doc.text)]
    hidden = len(gone) + len(_INVISIBLE.findall(doc.title))
    if not bad and not hidden:
        return doc
    if bad:
        warnings.warn(f"{str(path)!r}: its {' and '.join(bad)} held lone surrogates (characters "
                      f"that are not valid Unicode: a broken font map, or a file name that is "
                      f"not UTF-8); replaced them with U+FFFD. Rename the file in UTF-8 or save "
                      f"it again to keep those characters", stacklevel=3)
    fields = {name: _SURROGATE.sub("\ufffd", value) for name, value in fields.items()}
    meta = dict(doc.metadata)
    if hidden:
        warnings.warn(f"{str(path)!r}: removed {hidden} invisible character(s) (Unicode tag "
                      f"characters, zero-width spaces, word joiners or bidirectional controls) "
                      f"that could hide text from a reader or split words for search; check "
                      f"the file for hidden instructions, and delete them from it to silence this",
                      stacklevel=3)
        fields["title"], fields["text"] = (_INVISIBLE.sub("", fields[k]) for k in ("title", "text"))
        starts = meta.get("page_starts")
        if isinstance(starts, list) and all(isinstance(s, int) for s in starts):
            meta["page_starts"] = [s - bisect.bisect_left(gone, s) for s in starts]
    return Document(**fields, metadata=meta)


# -- PDF: the pages a hit comes from ------------------------------------------------------------
def pages_of(item) -> tuple[int, ...]:
    """The 1-based page numbers a chunk's or hit's ``[start, end)`` covers in its PDF: one
    page, or each page of a span that crosses a boundary (pages without text are never
    covered). ``()`` for an item without a page map (not from a PDF) or without offsets,
    and, with a warning, for one whose ``page_starts`` is no list of increasing offsets
    (set by hand, or by an older front matter: only ``read_pdf`` writes it).

    >>> from ragbook.types import Hit
    >>> meta = {"page_starts": [0, 40, 40, 95]}   # page 2 holds no text
    >>> pages_of(Hit("a:30-60", 1.0, 1, "a", "", meta, 30, 60)), pages_of(Hit("b", 1.0, 1))
    ((1, 3), ())
    """
    starts = (item.metadata or {}).get("page_starts")
    if not starts or item.start is None or item.end is None:
        return ()
    if not isinstance(starts, (list, tuple)) or not all(
            isinstance(s, int) and not isinstance(s, bool) for s in starts) or any(
            a > b for a, b in zip(starts, starts[1:], strict=False)) or starts[0] < 0:
        warnings.warn(f"metadata['page_starts'] of {getattr(item, 'id', '?')!r} is "
                      f"{starts!r:.40}, not a list of increasing character offsets; gave no "
                      f"pages. Only convert() sets it (for a PDF): remove it from your "
                      f"metadata", stacklevel=2)
        return ()
    ends = [*starts[1:], float("inf")]
    return tuple(n for n, (s, e) in enumerate(zip(starts, ends, strict=True), 1)
                 if s < e and s < max(item.end, item.start + 1) and item.start < e)


# -- HTML ------------------------------------------------------------------------------------
_DROP = ("script", "style", "noscript", "template", "nav", "aside", "form", "svg", "iframe",
         "button", "select", "dialog", "head", "title", "canvas", "object", "audio",
         "video", "noembed", "noframes", "datalist", "annotation", "annotation-xml")
# title: never shown in the page; canvas/object/media: their fallback; noembed/noframes,
# datalist options and MathML annotations: never rendered by a browser
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "dialog"}
_SECTIONING = ("main", "article", "section")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCK = {"p", "div", "section", "article", "main", "body", "ul", "ol", "dl", "dt", "dd",
          "blockquote", "figure", "figcaption", "table", "thead", "tbody", "tfoot", "header",
          "footer", "address", "details", "summary", "hr", "center"}


def read_html(path: Path, doc_id: str) -> Document:
    """An HTML page's main content as Markdown-like text (BeautifulSoup with lxml's parser).

    Boilerplate goes first: scripts, styles, ``nav``, ``aside``, forms and closed dialogs
    (a form wrapping the main content, and an open dialog, stay), hidden elements,
    ARIA navigation/banner/footer roles, and the page's own ``header``/``footer`` (a header
    inside an article or section, or one holding a heading, stays). Of what is left,
    ``<main>`` (else the one ``<article>``, else ``<body>``) becomes blocks: ``h1``–``h6`` as
    ``#`` headings (so ``section_path`` finds the heading path), paragraphs, ``- `` list
    items, fenced ``pre`` code, table rows with cells joined by `` | ``. The title is
    ``<title>``, else the first heading, else the file name. The encoding is sniffed as a
    browser does (``html_text``).
    """
    bs4 = library("bs4", "beautifulsoup4", ".html")
    markup = html_text(path.read_bytes())
    if "\x00" in markup[:8192]:
        raise ConversionError(f"{str(path)!r} holds NUL bytes: it is binary data, not an HTML "
                              f"page (or UTF-16 without a byte-order mark: save it as "
                              f"UTF-8); rename or remove it")
    try:
        soup = _soup(bs4, markup)
    except Exception as err:
        raise unreadable(path, "HTML", err) from err
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    drop, skipped = _boilerplate(soup, bs4)
    for element in drop:
        element.extract()
    if skipped:
        warnings.warn(f"{str(path)!r}: {skipped} selector(s) of its style sheets were not "
                      f"read (over the limit a page is given); text they hide may be "
                      f"indexed. Check the page, or save it without its style sheets",
                      stacklevel=3)
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
    return Document(id=doc_id, text=join_blocks(blocks),
                    title=title or first_heading or path.stem, metadata={"format": "html"})


def _soup(bs4, raw: str):
    """The page's tree as a browser builds it (lxml, installed with python-docx): a ``<body>``
    before ``</head>`` closes the head, and a repeated attribute keeps its first value (the
    stdlib parser nested the body in the head, and let ``style=a style=b`` read as ``b``)."""
    try:
        return bs4.BeautifulSoup(raw, "lxml")
    except bs4.FeatureNotFound:       # no lxml: the stdlib parser, with its first values
        return bs4.BeautifulSoup(raw, "html.parser", on_duplicate_attribute="ignore")


def _attr(tag, name: str) -> str:
    """An attribute's value as the browser compares it: trimmed and lowercased."""
    value = tag.get(name)
    return " ".join(value).lower() if isinstance(value, list) else (value or "").strip().lower()


_HAS_HEADING, _HAS_CONTENT = 1, 2     # what an element holds below it (_boilerplate)


def _boilerplate(soup, bs4) -> tuple[list, int]:
    """``(drop, skipped)``: the outermost elements to drop (``_is_boilerplate``, or hidden by
    the page's style: ``css_cascade``), with the text of elements whose own text is hidden,
    and how many style-sheet selectors were not read. Found in two walks that visit
    each element once: what every element holds below it (a heading, the page's content) is
    gathered bottom-up first, and whether it sits in a sectioning element top-down, so no
    element searches its subtree or its ancestors (thousands of nested ``<header>``s made
    that quadratic: 13 s for 32 KB)."""
    tags = [t for t in soup.descendants if isinstance(t, bs4.Tag)]
    cascade = Cascade(soup)
    held: dict[int, int] = {}
    for tag in reversed(tags):            # children before their parents
        kind = (_HAS_HEADING if tag.name in _HEADINGS else 0) | (
            _HAS_CONTENT if tag.name in ("main", "article", "body", "h1")
            or _attr(tag, "role") == "main" else 0)
        parent = id(tag.parent)
        held[parent] = held.get(parent, 0) | held.get(id(tag), 0) | kind
    drop, dropped, sectioned = [], set(), set()
    for tag in tags:                      # parents before their children
        parent = id(tag.parent)
        if parent in dropped:
            dropped.add(id(tag))
            continue
        if parent in sectioned or tag.name in _SECTIONING:
            sectioned.add(id(tag))
        seen = "box" if _is_boilerplate(tag, held.get(id(tag), 0), parent in sectioned) \
            else cascade.judge(tag)
        if seen == "box":
            drop.append(tag)
            dropped.add(id(tag))
        elif seen == "text":              # hidden by a property a child may set back
            drop.extend(c for c in tag.children if isinstance(c, bs4.NavigableString))
    return drop, cascade.skipped


def _is_boilerplate(tag, held: int, in_section: bool) -> bool:
    """``tag`` is dropped: boilerplate, or hidden by its attributes or a "visually hidden"
    class (its style is judged by ``css_cascade``). ``held``: what it holds below it
    (``_HAS_HEADING``, ``_HAS_CONTENT``); ``in_section``: inside a main/article/section."""
    if tag.name in _DROP or (_attr(tag, "role").split() or [""])[0] in _DROP_ROLES:
        return not _holds_content(tag, held)
    classes = {c.lower() for c in tag.get_attribute_list("class") if c}
    if tag.has_attr("hidden") or _attr(tag, "aria-hidden") == "true" \
            or HIDING_CLASSES & classes:
        return True
    # the page's header and footer are boilerplate; an article's own header, or any header
    # with a heading in it, holds the title
    if tag.name not in ("header", "footer") or in_section:
        return False
    return tag.name == "footer" or not held & _HAS_HEADING


def _holds_content(tag, held: int) -> bool:
    """A form or head that wraps the page's content (a whole page in one ``<form>``, as
    ASP.NET writes it), or a ``<dialog open>`` a reader sees: kept, though such elements
    are otherwise boilerplate."""
    if tag.name == "dialog":
        return tag.has_attr("open")
    return tag.name in ("form", "head") and bool(held & _HAS_CONTENT)


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
            out.extend(_row(child, bs4, depth + 1, deep))
        elif name == "br":
            inline.append(" ")
        elif name in _BLOCK:
            _flush(inline, out)
            _html_blocks(child, out, [], bs4, depth + 1, deep)
        else:  # inline markup (a, b, em, code, span, ...): its text joins the paragraph
            _html_blocks(child, out, inline, bs4, depth + 1, deep)
    if node.name in _BLOCK:
        _flush(inline, out)


def _row(tr, bs4, depth: int, deep: list[int] | None) -> list[str]:
    """A table row's blocks: its own cells (``recursive=False``: a nested table's cells are
    read once, in their own rows) joined by `` | ``; a layout row, whose cells hold headings,
    lists, code or several blocks (a nested table), gives those blocks in order instead."""
    cells = []
    for cell in tr.find_all(("td", "th"), recursive=False):
        blocks: list[str] = []
        pending: list[str] = []
        _html_blocks(cell, blocks, pending, bs4, depth, deep)
        _flush(pending, blocks)
        cells.append(blocks)
    if any(len(b) > 1 or (b and b[0].startswith(("#", "```", "- "))) for b in cells):
        return [block for blocks in cells for block in blocks]
    texts = [b[0] if b else "" for b in cells]
    return [" | ".join(texts)] if any(texts) else []


def _flush(inline: list[str], out: list[str]) -> None:
    text = _words("".join(inline))
    inline.clear()
    if text:
        out.append(text)


def _words(text: str) -> str:
    return " ".join(text.split())


CONVERTERS: dict[str, Callable[[Path, str], Document]] = {
    ".pdf": read_pdf, ".html": read_html, ".htm": read_html, ".docx": read_docx}
