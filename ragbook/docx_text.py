"""The text of a Word body as its reader sees it, read from the XML, and ``read_docx``.

python-docx's ``paragraph.text`` reads only a paragraph's direct runs and hyperlinks, so
text inside tracked insertions (``<w:ins>``), inline content controls (``<w:sdt>``), simple
fields (``<w:fldSimple>``) and text boxes was silently dropped, body-level content controls
hid whole paragraphs and tables, and ``table.rows`` crashed on a table without
``<w:tblPr>``. Here every ``<w:t>`` of a paragraph counts, except:

* hidden runs: Word does not show them. Hidden is resolved as Word renders it
  (``StyleSheet``): the run's own ``<w:vanish/>`` or ``<w:specVanish/>``, else its
  character style's, else its paragraph style's (each through its ``basedOn`` chain), else
  the document defaults — so text hidden by a style is left out too;
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
from .types import Document

__all__ = ["body_items", "read_docx", "StyleSheet", "W"]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_OUT = {f"{W}del", f"{W}moveFrom"}
# what Word reads of mc:AlternateContent: the first mc:Choice whose required namespaces it
# knows (its own and the Open XML ones), else the mc:Fallback
_MATH_TEXT = "{http://schemas.openxmlformats.org/officeDocument/2006/math}t"   # an equation
_KNOWN_NS = ("http://schemas.microsoft.com/office/", "http://schemas.openxmlformats.org/")
_WRAPPERS = {f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}smartTag", f"{W}ins",
             f"{W}moveTo"}
_FALSE = {"0", "false", "off"}
_READ = {f"{W}t", f"{W}tab", f"{W}br", f"{W}cr", f"{W}fldChar", _MATH_TEXT}
MAX_ENTRIES = 10_000      # zip entries in a DOCX (Word writes dozens)


def _vanish(rpr) -> bool | None:
    """Whether run properties ``rpr`` hide the run (``w:specVanish`` or ``w:vanish``, either
    with no ``w:val`` or a true one); None when they say nothing, so a style decides."""
    if rpr is None:
        return None
    said = [el.get(f"{W}val", "true").strip().lower() not in _FALSE
            for el in (rpr.find(f"{W}specVanish"), rpr.find(f"{W}vanish")) if el is not None]
    return any(said) if said else None


class StyleSheet:
    """Which runs a document's styles hide. Word shows a run hidden when its own properties
    say so; when they say nothing, its character style decides, then its paragraph's style
    (the paragraph's ``w:pStyle``, else the default paragraph style), each style inheriting
    through ``w:basedOn``, then the document defaults (``w:docDefaults``). A style chain
    that loops or runs past 64 styles is cut there."""

    def __init__(self, styles=None):
        found = [] if styles is None else styles.iter(f"{W}style")
        self.by_id = {s.get(f"{W}styleId"): s for s in found}
        self.default_paragraph = next(
            (i for i, s in self.by_id.items() if s.get(f"{W}type") == "paragraph"
             and s.get(f"{W}default", "").lower() in ("1", "true", "on")), None)
        defaults = None if styles is None else styles.find(
            f"{W}docDefaults/{W}rPrDefault/{W}rPr")
        self.default = bool(_vanish(defaults))
        self.cache: dict[str | None, bool | None] = {}

    def style_hides(self, style_id: str | None) -> bool | None:
        """Whether the style ``style_id`` (or one it is based on) hides its text; None when
        none of the chain says."""
        if style_id not in self.cache:
            seen, found, current = set(), None, style_id
            while current in self.by_id and current not in seen and len(seen) < 64:
                seen.add(current)
                style = self.by_id[current]
                found = _vanish(style.find(f"{W}rPr"))
                if found is not None:
                    break
                based = style.find(f"{W}basedOn")
                current = None if based is None else based.get(f"{W}val")
            self.cache[style_id] = found
        return self.cache[style_id]

    def hidden(self, run, p=None) -> bool:
        """Whether Word hides ``run`` (a ``w:r``), as the class docstring resolves it;
        ``p``: its paragraph, when the caller knows it (else it is looked up)."""
        rpr = run.find(f"{W}rPr")
        said = _vanish(rpr)
        if said is None and rpr is not None:
            said = self.style_hides(_val(rpr.find(f"{W}rStyle")))
        if said is None:
            p = _nearest(run, f"{W}p") if p is None else p
            pstyle = None if p is None else _val(p.find(f"{W}pPr/{W}pStyle"))
            said = self.style_hides(pstyle or self.default_paragraph)
        return self.default if said is None else said


def _val(el) -> str | None:
    return None if el is None else el.get(f"{W}val")


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
    reads (``_READ``), in document order; ``shown``: not in a hidden run, a deletion, or a
    copy of ``mc:AlternateContent`` that Word does not show. Worked out once per element
    from its parent's answer: asking it of every text node's ancestors made 2,000 text
    nodes in 200 nested runs take 89 s."""
    stack = [(child, True, p) for child in reversed(p)]
    while stack:
        node, shown, para = stack.pop()
        shown = shown and node.tag not in _OUT and not (
            node.tag == f"{W}r" and styles.hidden(node, para))
        if node.tag in _READ:
            yield node, shown
        para = node if node.tag == f"{W}p" else para
        chosen = _chosen(node) if node.tag == f"{_MC}AlternateContent" else None
        stack.extend((child, shown and (chosen is None or child is chosen), para)
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


def _style_sheet(word) -> StyleSheet:
    """The document's ``StyleSheet`` (python-docx adds default styles to a file without)."""
    try:
        return StyleSheet(word.styles.element)
    except (AttributeError, KeyError, ValueError):
        return _NO_STYLES


# -- the reader (convert.read_docx) ---------------------------------------------------------
def read_docx(path: Path, doc_id: str) -> Document:
    """A Word file's body in order (python-docx): paragraphs, headings and tables.

    A paragraph in a ``Heading N`` style becomes an ``N``-level ``#`` heading, one level
    deeper when the file has a ``Title`` paragraph (which becomes the ``#`` heading above
    them), so ``section_path`` gives Title > Heading 1 > Heading 2. ``List ...`` styles become
    ``- `` items; a table row becomes its cells joined by `` | ``. Page headers, footers and
    comments are left out, and so are hidden runs (``<w:vanish/>``, on the run or through its
    styles), deleted text, rows and cells, field instructions and the ``mc:AlternateContent``
    copies Word does not show; tracked insertions, content controls, field results, text
    boxes and equations are read (``docx_text``); content imported from another file
    (``w:altChunk``) is not, with a warning.
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
    if word.element.body.find(f".//{W}altChunk") is not None:
        warnings.warn(f"{str(path)!r} imports content from another file (w:altChunk), which "
                      f"is not read: only the Word text around it is indexed; open it in Word "
                      f"and save it to merge that content in", stacklevel=3)
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


def _check_unzipped(path: Path) -> None:
    """Refuse a DOCX whose parts unzip past ``MAX_UNZIPPED`` bytes (a zip bomb), or that
    holds over ``MAX_ENTRIES`` zip entries (400,000 empty ones took python-docx 55 s),
    before parsing any of it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, OSError):
        return                        # python-docx names the damage
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
