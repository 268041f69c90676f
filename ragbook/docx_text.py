"""The text of a Word body as its reader sees it, read from the XML, and ``read_docx``.

python-docx's ``paragraph.text`` reads only a paragraph's direct runs and hyperlinks, so
text inside tracked insertions (``<w:ins>``), inline content controls (``<w:sdt>``), simple
fields (``<w:fldSimple>``) and text boxes was silently dropped, body-level content controls
hid whole paragraphs and tables, and ``table.rows`` crashed on a table without
``<w:tblPr>``. Here every ``<w:t>`` of a paragraph counts, except:

* runs a reader cannot see (``docx_styles.StyleSheet``): hidden (``<w:vanish/>``,
  ``<w:specVanish/>``), in a font under 1 px, or the colour of their backdrop (white on the
  white page), each resolved as Word resolves it — through the run's character style, its
  paragraph's style, its table's style (each through its ``basedOn`` chain) and the
  document defaults — so text a style hides is left out too;
* drawings Word does not show (``wp:docPr hidden``, a VML ``visibility:hidden`` shape),
  with their text boxes;
* deleted text (``<w:del>``, ``<w:moveFrom>``): the reader sees the document after changes;
* the ``mc:Fallback`` copy of a text box (Word stores each text box twice);
* field instructions (``<w:instrText>``, not ``<w:t>``): the field's shown result is kept.

The walk is iterative, so a deeply nested body cannot exhaust Python's stack.

>>> import docx
>>> word = docx.Document(); _ = word.add_paragraph("Refunds take 14 days.")
>>> [(kind, text) for kind, _, text in body_items(word)]
[('p', 'Refunds take 14 days.')]
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from pathlib import Path

from . import conversion  # MAX_UNZIPPED read when called: a test may lower it
from .conversion import ConversionError, join_blocks, library, unreadable
from .docx_styles import StyleSheet, W
from .html_hiding import css
from .types import Document

__all__ = ["body_items", "read_docx", "StyleSheet", "W"]

_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_OUT = {f"{W}del", f"{W}moveFrom"}
# what Word reads of mc:AlternateContent: the first mc:Choice whose required namespaces it
# knows (its own and the Open XML ones), else the mc:Fallback
_MATH_TEXT = "{http://schemas.openxmlformats.org/officeDocument/2006/math}t"   # an equation
_KNOWN_NS = ("http://schemas.microsoft.com/office/", "http://schemas.openxmlformats.org/")
_WRAPPERS = {f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}smartTag", f"{W}ins",
             f"{W}moveTo"}
_WP = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}"
_ANCHORS = {f"{_WP}anchor", f"{_WP}inline"}
_VML = "{urn:schemas-microsoft-com:vml}"
_READ = {f"{W}t", f"{W}tab", f"{W}br", f"{W}cr", f"{W}fldChar", _MATH_TEXT}
MAX_ENTRIES = 10_000      # zip entries in a DOCX (Word writes dozens)


def _drawing_hidden(node) -> bool:
    """Whether ``node`` is a drawing Word does not show: a DrawingML object whose
    ``wp:docPr`` says ``hidden`` (Word's Selection Pane hides it so), or a VML shape whose
    ``style`` says ``visibility:hidden`` or ``display:none``. Its text boxes are unseen."""
    if node.tag in _ANCHORS:
        props = node.find(f"{_WP}docPr")
        return props is not None and props.get("hidden", "").strip().lower() in ("1", "true")
    style = node.get("style") if str(node.tag).startswith(_VML) else None
    if not style:
        return False
    found = css(style)
    return found.get("display") == "none" or found.get("visibility") in ("hidden", "collapse")


_NO_STYLES = StyleSheet()


def _chosen(alternate):
    """The child of an ``mc:AlternateContent`` that Word shows: its first ``mc:Choice``
    whose ``Requires`` prefixes all name namespaces Word knows (``_KNOWN_NS``), else its
    ``mc:Fallback`` (None when it has neither)."""
    for child in alternate:
        if child.tag == f"{_MC}Choice":
            needed = [child.nsmap.get(prefix) for prefix in child.get("Requires", "").split()]
            if all(ns and ns.startswith(_KNOWN_NS) for ns in needed):
                return child
    return next((c for c in alternate if c.tag == f"{_MC}Fallback"), None)


def _walk(p, styles: StyleSheet) -> Iterator[tuple[object, bool]]:
    """``(element, shown)`` for each element under paragraph ``p`` that ``paragraph_text``
    reads (``_READ``), in document order; ``shown``: not in a run a reader cannot see
    (``StyleSheet.hidden``), a deletion, a hidden drawing, or a copy of
    ``mc:AlternateContent`` that Word does not show. Worked out once per element from its
    parent's answer, and a paragraph's context once per paragraph: asking it of every text
    node's ancestors made 2,000 text nodes in 200 nested runs take 89 s."""
    stack = [(child, True, styles.context(p)) for child in reversed(p)]
    while stack:
        node, shown, context = stack.pop()
        shown = shown and node.tag not in _OUT and not (
            node.tag == f"{W}r" and styles.hidden(node, context)) and not _drawing_hidden(node)
        if node.tag in _READ:
            yield node, shown
        context = styles.context(node) if node.tag == f"{W}p" else context
        chosen = _chosen(node) if node.tag == f"{_MC}AlternateContent" else None
        stack.extend((child, shown and (chosen is None or child is chosen), context)
                     for child in reversed(node))


def paragraph_text(p, styles: StyleSheet = _NO_STYLES) -> str:
    """The words a reader sees in paragraph ``p`` (text boxes in it included), one space
    between words; ``styles`` says which runs the document's styles hide. Of a complex field
    (``w:fldChar`` begin … separate … end) only the result after *separate* is shown, so a
    ``w:t`` written among its instructions is left out, at any nesting of fields."""
    parts, fields = [], []          # fields: per open field, True once its result begins
    for node, shown in _walk(p, styles):
        if node.tag == f"{W}fldChar":
            kind = node.get(f"{W}fldCharType", "")
            if kind == "begin":
                fields.append(False)
            elif kind == "separate" and fields:
                fields[-1] = True
            elif kind == "end" and fields:
                fields.pop()
        elif all(fields) and shown:
            parts.append(node.text or "" if node.tag in (f"{W}t", _MATH_TEXT) else " ")
    return " ".join("".join(parts).split())


def _top_paragraphs(node) -> Iterator:
    """The paragraphs under ``node`` that are not inside another paragraph (a text box's
    paragraphs are read with the paragraph holding it)."""
    for p in node.iter(f"{W}p"):
        parent = p.getparent()
        while parent is not None and parent is not node and parent.tag != f"{W}p":
            parent = parent.getparent()
        if parent is node or parent is None:
            yield p


def _rows(tbl, styles: StyleSheet) -> list[str]:
    rows = []
    for tr in tbl.iter(f"{W}tr"):
        if _nearest(tr, f"{W}tbl") is not tbl or tr.find(f"{W}trPr/{W}del") is not None:
            continue                          # a nested table's row (read in its cell), or
        cells = [" ".join(t for t in (paragraph_text(p, styles) for p in _top_paragraphs(tc)) if t)
                 for tc in tr.iter(f"{W}tc")  # a deleted one, as deleted text is left out
                 if _nearest(tc, f"{W}tr") is tr and tc.find(f"{W}tcPr/{W}cellDel") is None]
        cells = list(dict.fromkeys(cells))    # merged cells once
        if any(cells):
            rows.append(" | ".join(cells))
    return rows


def _nearest(node, tag):
    node = node.getparent()
    while node is not None and node.tag != tag:
        node = node.getparent()
    return node


def body_items(word) -> Iterator[tuple[str, object, str]]:
    """``(kind, element, text)`` of a python-docx ``Document``'s body in reading order:
    ``("p", paragraph, its text)`` and ``("row", table, a row's cells joined by " | ")``,
    through content controls and tracked insertions, whatever their depth."""
    styles = _style_sheet(word)
    stack = list(reversed(list(word.element.body)))
    while stack:
        node = stack.pop()
        if node.tag == f"{W}p":
            yield "p", node, paragraph_text(node, styles)
        elif node.tag == f"{W}tbl":
            for row in _rows(node, styles):
                yield "row", node, row
        elif node.tag in _WRAPPERS:
            stack.extend(reversed(list(node)))
        elif node.tag == f"{_MC}AlternateContent" and (chosen := _chosen(node)) is not None:
            stack.extend(reversed(list(chosen)))     # the copy Word shows of a block


def _style_sheet(word) -> StyleSheet:
    """The document's ``StyleSheet`` (python-docx adds default styles to a file without),
    with its page colour (``w:background``, white when none)."""
    page = word.element.find(f"{W}background")
    page = None if page is None else (page.get(f"{W}color") or "").upper()
    try:
        return StyleSheet(word.styles.element, page if page and page != "AUTO" else None)
    except (AttributeError, KeyError, ValueError):
        return _NO_STYLES


# -- the reader (convert.read_docx) ---------------------------------------------------------
def read_docx(path: Path, doc_id: str) -> Document:
    """A Word file's body in order (python-docx): paragraphs, headings and tables.

    A paragraph in a ``Heading N`` style becomes an ``N``-level ``#`` heading, one level
    deeper when the file has a ``Title`` paragraph (which becomes the ``#`` heading above
    them), so ``section_path`` gives Title > Heading 1 > Heading 2. ``List ...`` styles become
    ``- `` items; a table row becomes its cells joined by `` | ``. Page headers, footers and
    comments are left out, and so are runs a reader cannot see (hidden, a font under 1 px,
    the colour of their backdrop: on the run or through its styles), hidden drawings,
    deleted text, rows and cells, field instructions and the ``mc:AlternateContent``
    copies Word does not show; tracked insertions, content controls, field results, text
    boxes and equations are read (``docx_text``); footnotes and endnotes, and content
    imported from another file (``w:altChunk``), are not, with a warning.
    The title is the file's Title property, else its Title paragraph,
    else its first heading, else the file name.
    """
    docx = library("docx", "python-docx", ".docx")
    _check_unzipped(path)
    try:
        word = docx.Document(str(path))
        items = [(kind, _style(el, word, docx) if kind == "p" else "", text)
                 for kind, el, text in body_items(word)]
        title = (word.core_properties.title or "").strip()
    except Exception as err:  # not a zip, a zip without Word parts, damaged XML
        raise unreadable(path, "DOCX", err) from err
    _refuse_dtd(path, word)
    _warn_unread(path, word.element.body)
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
    return Document(id=doc_id, text=join_blocks(blocks), title=title or named or path.stem,
                    metadata={"format": "docx"})


def _warn_unread(path: Path, body) -> None:
    """Warn of body content that is shown but not read: content imported from another file
    (``w:altChunk``), and footnotes and endnotes (their text lives in parts of their own)."""
    if body.find(f".//{W}altChunk") is not None:
        warnings.warn(f"{str(path)!r} imports content from another file (w:altChunk), which "
                      f"is not read: only the Word text around it is indexed; open it in Word "
                      f"and save it to merge that content in", stacklevel=4)
    notes = sum(1 for tag in ("footnoteReference", "endnoteReference")
                for _ in body.iter(f"{W}{tag}"))
    if notes:
        warnings.warn(f"{str(path)!r} has {notes} footnote(s) or endnote(s), whose text is "
                      f"not indexed (only the body is read); move text a reader must find "
                      f"into the body to index it", stacklevel=4)


def _style(p, word, docx) -> str:
    style = docx.text.paragraph.Paragraph(p, word).style
    return getattr(style, "name", "") or ""


def _refuse_dtd(path: Path, word) -> None:
    """Refuse a DOCX with a part whose XML declares a DTD (``<!DOCTYPE ...>``). Word never
    writes one, and python-docx does not expand entities (safely: no file is read, no
    entity multiplies), so the text after an entity reference in a ``w:t`` was lost
    silently; such a file was made by hand, to smuggle something."""
    for part in word.part.package.iter_parts():
        element = getattr(part, "_element", None)
        if element is not None and element.getroottree().docinfo.internalDTD is not None:
            raise ConversionError(
                f"{str(path)!r}: its part {str(part.partname)!r} declares a DTD "
                f"(<!DOCTYPE ...>), which Word never writes; its entities are not expanded, "
                f"so text would be lost silently. Open it in Word and save a copy, or remove it")


def _refuse_duplicates(path: Path, entries) -> None:
    """Refuse a DOCX holding two zip entries for one part: names equal but for ASCII case,
    as the Open Packaging Conventions compare part names (ECMA-376 Part 2, 6.2.2.3). Word
    rejects such a package; python-docx read the last copy, so one text could be shown by
    other tools and another indexed."""
    seen: dict[str, str] = {}
    for info in entries:
        key = info.filename.lstrip("/").translate(_ASCII_LOWER)
        if key in seen:
            raise ConversionError(
                f"{str(path)!r} holds two zip entries for one part ({seen[key]!r} and "
                f"{info.filename!r}), which Word rejects as damaged; which one is read is "
                f"up to the tool. Open it in Word and save a copy, or remove it")
        seen[key] = info.filename


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _check_unzipped(path: Path) -> None:
    """Refuse a DOCX whose parts unzip past ``MAX_UNZIPPED`` bytes (a zip bomb), that
    holds over ``MAX_ENTRIES`` zip entries (400,000 empty ones took python-docx 55 s), or
    two entries for one part (``_refuse_duplicates``), before parsing any of it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, OSError):
        return                        # python-docx names the damage
    _refuse_duplicates(path, entries)
    if len(entries) > MAX_ENTRIES:
        raise ConversionError(
            f"{str(path)!r} holds {len(entries):,} zip entries, over MAX_ENTRIES="
            f"{MAX_ENTRIES:,} (Word writes dozens); open it in Word and save a copy, or "
            f"remove it")
    size = sum(i.file_size for i in entries)
    if size > conversion.MAX_UNZIPPED:
        raise ConversionError(
            f"{str(path)!r} unzips to {size:,} bytes, over MAX_UNZIPPED="
            f"{conversion.MAX_UNZIPPED:,} (a compressed file that expands enormously); open it in "
            f"Word and save a smaller copy, or remove it")
