"""The text a PDF page *shows*: text drawn invisible (render mode 3 or 7, neither filled nor
stroked; a font size or horizontal scale of 0; filled white where nothing but white was
painted under it) is how planted instructions hide in a PDF, and it is left out — unless it is a
scan's OCR layer, the page's only text, drawn over an image (ocrmypdf and tesseract write
their text that way), which is what the page shows in pixels.

The invisible text-showing operators (``Tj TJ ' "``) are cut from the page's content
streams — its own and those of the form XObjects it draws, nested ones too — before pypdf
extracts the text. (Filtering pypdf's extracted pieces instead saw the render mode in force
when a piece was flushed, not when it was drawn: "(Visible) Tj 3 Tr (SECRET) Tj" came out
as all hidden, "3 Tr (SECRET) Tj 0 Tr (Visible) Tj" as all visible.) The edit is to the
in-memory copy pypdf read; nothing is written back to the file.

``read_pdf`` (what ``convert`` calls for a ``.pdf``) turns those pages into a ``Document``.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path

from .conversion import ConversionError, join_blocks, library, unreadable
from .pdf_geometry import FILLS, SHOW, form_place, unseen
from .types import Document

__all__ = ["visible_text", "read_pdf"]

# text drawn invisible, however the number is written (3, 3.0, 03, +3): a render mode that
# neither fills nor strokes (3: invisible, 7: clip only), or a font size or horizontal
# scale of 0 (``/F1 0 Tf``, ``0 Tz``)
_INVISIBLE = re.compile(rb"(?<![\w.])\+?0*[37](?:\.0*)?\s+Tr\b"
                        rb"|(?<![\w.])[+-]?(?:0+\.?0*|\.0+)\s+T[fz]\b"
                        rb"|(?<![\w.])(?:1(?:\.0*)?\s+|0?\.9[89]\d*\s+){1,3}(?:g|rg|sc|scn)\b"
                        rb"|(?<![\w.])(?:0(?:\.0*)?\s+){4}k\b")       # a white fill
_FORMS = 64                     # form XObjects read per page, nested ones included
_START = (0, 1.0, 100.0, False)  # the state a page starts in: render mode, font size,
#                                 horizontal scale, and whether the fill colour is white


def visible_text(page) -> tuple[str, str]:
    """``(text, "visible")``: the page's text without what is drawn invisible. A page whose
    only text is invisible and that draws an image is a scan's OCR layer: ``(that text,
    "ocr")``; invisible text alone: ``("", "hidden")``. A page that sets no invisible mode
    anywhere is extracted as it is.

    A form XObject starts in the text state of the ``Do`` that draws it (PDF text state is
    part of the graphics state, inherited): "3 Tr /X1 Do" hides the form's text. A form
    drawn both visibly and invisibly starts visible (its text is shown once); a form drawn
    by forms is settled in up to three passes over the page's forms."""
    from pypdf.generic import ContentStream  # the documents extra

    owners = _owners(page)
    if page.get_contents() is None:
        return page.extract_text() or "", "visible"
    streams = [ContentStream(o.get_contents() if parent is None else o, page.pdf)
               for o, parent, _ in owners]
    away = _placed(page, owners, streams)
    if not any(away) and not any(_INVISIBLE.search(_data(o)) for o, _, _ in owners):
        return page.extract_text() or "", "visible"
    entry: dict[int, tuple] = {}
    for _ in range(3):                # a form's starting state hangs on its callers' states
        calls: dict[int, list[tuple]] = {}
        walked = [_walk(o, stream.operations, entry.get(id(o), _START), calls, gone)
                  for (o, _, _), stream, gone in zip(owners, streams, away, strict=True)]
        settled = {form: states[0] if all(map(_hides, states)) else _START
                   for form, states in calls.items()}
        if settled == entry:
            break
        entry = settled
    if all(len(kept) == len(stream.operations)
           for (kept, _), stream in zip(walked, streams, strict=True)):
        return page.extract_text() or "", "visible"
    whole = page.extract_text() or ""
    for (owner, parent, key), stream, (kept, _) in zip(owners, streams, walked, strict=True):
        _replace(owner, parent, key, stream, kept)
    images = any(drew for _, drew in walked)
    shown = page.extract_text() or ""
    if shown.strip() or not whole.strip():
        return shown, "visible"
    return (whole, "ocr") if images else ("", "hidden")


def _placed(page, owners: list, streams: list) -> list[set[int]]:
    """For each content stream (``_owners``), the text operations drawn where no reader sees
    them (``pdf_geometry.unseen``: off the page, clipped away, covered): the page's own,
    and those of each form it draws once."""
    box = tuple(float(v) for v in page.cropbox)
    box = (min(box[0], box[2]), min(box[1], box[3]), max(box[0], box[2]), max(box[1], box[3]))
    states = _gs_states(page)
    draws: dict = {}
    away = [unseen(streams[0].operations, box, transparent=lambda n: n not in states,
                   draws=draws)]
    page_xobjects = owners[1][1] if len(owners) > 1 and owners[1][1] is not None else None
    for (owner, parent, key), stream in zip(owners[1:], streams[1:], strict=True):
        place = form_place(owner, draws.get(key, []), box) if parent is page_xobjects else None
        away.append(set() if place is None else unseen(stream.operations, box, *place))
    return away


def _gs_states(page) -> set:
    """The names of the page's graphics-state parameter sets (``gs``) that leave fills
    opaque: no fill alpha under 1, no blend mode but Normal, no soft mask."""
    try:
        states = page["/Resources"]["/ExtGState"].get_object()
    except (KeyError, TypeError, AttributeError):
        return set()
    opaque = set()
    for name, ref in states.items():
        state = ref.get_object()
        if float(state.get("/ca", 1)) >= 1 and state.get("/BM", "/Normal") in (
                "/Normal", "/Compatible") and state.get("/SMask", "/None") == "/None":
            opaque.add(name)
    return opaque


def _data(owner) -> bytes:
    contents = owner.get_contents() if owner.get("/Type") == "/Page" else owner
    return contents.get_data() if contents is not None else b""


def _owners(page) -> list:
    """``(owner, parent, key)`` for the page (no parent) and each form XObject it reaches:
    every content stream its text can come from, each once, at most ``_FORMS``."""
    out, seen, todo = [(page, None, None)], set(), [page]
    while todo and len(out) <= _FORMS:
        owner = todo.pop()
        try:
            xobjects = owner["/Resources"]["/XObject"].get_object()
        except (KeyError, TypeError, AttributeError):
            continue
        for key, ref in list(xobjects.items()):
            form = ref.get_object()
            if id(form) in seen or form.get("/Subtype") != "/Form":
                continue
            seen.add(id(form))
            out.append((form, xobjects, key))
            todo.append(form)
    return out[:_FORMS + 1]


def _hides(state: tuple) -> bool:
    """Text drawn in ``state`` is invisible: a mode that neither fills nor strokes, a font
    size or horizontal scale of 0, or filled in white (``_walk`` sets that flag only while
    nothing but white has been filled under it: white on a dark banner stays)."""
    mode, size, scale, white = state
    return mode in (3, 7) or size == 0 or scale == 0 or (white and mode in (0, 4))


def _white(op: bytes, operands) -> bool | None:
    """Whether a fill-colour operator sets white (gray 1, RGB 1 1 1, CMYK 0 0 0 0, read
    within 2 %), or None for another operator; ``cs`` (a new colour space) sets black."""
    if op == b"cs":
        return False
    if op not in (b"g", b"rg", b"k", b"sc", b"scn"):
        return None
    try:
        values = [float(v) for v in operands]
    except (TypeError, ValueError):
        return False                    # a pattern name, or malformed: not white
    if op == b"k" or (op in (b"sc", b"scn") and len(values) == 4):
        return len(values) == 4 and all(v <= 0.02 for v in values)
    return len(values) in (1, 3) and all(v >= 0.98 for v in values)


def _walk(owner, operations, state: tuple, calls: dict, away: set[int]) -> tuple[list, bool]:
    """``(kept, images)``: ``owner``'s content ``operations`` (of the page or a form) less
    the text-showing ones drawn invisible, starting in text ``state``; and whether it draws
    an image. Adds to ``calls[id(form)]`` the state each form it draws is drawn in. The
    operations at the indices ``away`` (drawn where no reader sees them) are left out too."""
    states, kept, images, backdrop = [state], [], False, False
    for index, (operands, op) in enumerate(operations):
        state = states[-1]
        try:
            if op == b"Tr" and operands:
                states[-1] = (int(float(operands[0])), *state[1:])
            elif op == b"Tf" and len(operands) > 1:
                states[-1] = (state[0], float(operands[1]), *state[2:])
            elif op == b"Tz" and operands:
                states[-1] = (*state[:2], float(operands[0]), state[3])
            elif (white := _white(op, operands)) is not None:
                states[-1] = (*state[:3], white and not backdrop)
            elif op in FILLS and not state[3]:
                backdrop = True         # a coloured fill: white text may sit on it
                states = [(*s[:3], False) for s in states]
        except (TypeError, ValueError):
            pass                        # a malformed operand changes nothing
        if op == b"q":
            states.append(state)
        elif op == b"Q" and len(states) > 1:
            states.pop()
        elif op in (b"BI", b"INLINE IMAGE"):
            images = True
        elif op == b"Do" and operands:
            drawn = _xobject(owner, operands[0])
            images |= drawn is not None and drawn.get("/Subtype") == "/Image"
            if drawn is not None and drawn.get("/Subtype") == "/Form":
                calls.setdefault(id(drawn), []).append(states[-1])
        if not (op in SHOW and (_hides(states[-1]) or index in away)):
            kept.append((operands, op))
    return kept, images


def _replace(owner, parent, key, stream, kept: list) -> None:
    """Give ``owner`` (the page, or the form XObject ``parent[key]``) the operations
    ``kept``, in pypdf's in-memory copy."""
    from pypdf.generic import DecodedStreamObject, NameObject  # the documents extra

    stream.operations = kept
    if parent is None:
        owner[NameObject("/Contents")] = stream
    else:                         # the form again, decoded, with the same dictionary
        form = DecodedStreamObject()
        form.update({k: v for k, v in owner.items()
                     if k not in ("/Filter", "/DecodeParms", "/Length")})
        form.set_data(stream.get_data())
        parent[key] = form


def _xobject(owner, name):
    """The XObject ``name`` that a page or form draws (``Do``), else None."""
    try:
        return owner["/Resources"]["/XObject"][name].get_object()
    except (KeyError, TypeError, AttributeError):
        return None


# -- the reader (convert.read_pdf) ----------------------------------------------------------
def read_pdf(path: Path, doc_id: str) -> Document:
    """A PDF's text layer, page by page (pypdf), pages joined by a blank line.

    ``metadata``: ``format`` "pdf", ``pages`` (the page count) and ``page_starts``, the
    offset in ``text`` where each page's text begins (a page without text begins where the
    next one does); ``pages_of`` turns a hit's offsets into page numbers with it. The title is
    the PDF's own Title field, else the file name. An encrypted PDF that opens without a
    password is read; one that needs a password, or one with no text at all (a scan), is
    refused; pages without text in an otherwise textual PDF are named in a warning.
    """
    pypdf = library("pypdf", "pypdf", ".pdf")
    try:
        pdf = pypdf.PdfReader(path)
        if pdf.is_encrypted and not pdf.decrypt(""):
            raise ConversionError(f"{str(path)!r} is encrypted and needs a password to open; "
                                  f"decrypt it first (e.g. qpdf --decrypt --password=... in.pdf "
                                  f"out.pdf)")
        pages, kinds = [*zip(*map(visible_text, pdf.pages), strict=True)] or ((), ())
        title = _pdf_title(pdf)
    except ConversionError:
        raise
    except Exception as err:  # pypdf raises many kinds on a damaged file; all mean "unreadable"
        if type(err).__name__ == "DependencyError":  # AES needs the cryptography package
            raise ConversionError(f"{str(path)!r} is AES-encrypted and pypdf needs the "
                                  f"'cryptography' package to open it: pip install "
                                  f"cryptography, or decrypt the file first") from err
        raise unreadable(path, "PDF", err) from err
    if not pages:
        raise ConversionError(f"{str(path)!r} has no pages; remove it")
    texts = [p.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n").strip()
             for p in pages]
    empty = [n for n, t in enumerate(texts, 1) if not t]
    if len(empty) == len(texts) and "hidden" in kinds:
        raise ConversionError(f"{str(path)!r} has text only drawn invisible (render mode 3) "
                              f"and no page image under it (or drawn off the page, clipped "
                              f"away or covered over), so none of it is shown to a "
                              f"reader or indexed; export the document again with its text "
                              f"visible, or remove it")
    if len(empty) == len(texts):
        raise ConversionError(f"{str(path)!r} has no text layer on any of its {len(texts)} "
                              f"page(s) (a scan or images of text): run OCR first (e.g. "
                              f"ocrmypdf in.pdf out.pdf) and index the result")
    _ocr_warning(path, [n for n, k in enumerate(kinds, 1) if k == "ocr"], len(texts))
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
    text = join_blocks(blocks)
    starts = [min(s, len(text)) for s in starts]  # trailing empty pages begin at the end
    return Document(id=doc_id, text=text, title=title or path.stem,
                    metadata={"format": "pdf", "pages": len(texts), "page_starts": starts})


def _pdf_title(pdf) -> str:
    """The PDF's Title field as one line of text, else "". It is optional metadata: a Title
    of another type (a number, an array) or bytes in no known encoding is ignored, never a
    reason to refuse the file; control characters become spaces."""
    value = (pdf.metadata or {}).get("/Title")
    value = value.get_object() if hasattr(value, "get_object") else value
    if isinstance(value, bytes):
        codec = "utf-16" if value[:2] in (b"\xfe\xff", b"\xff\xfe") else "utf-8"
        try:
            value = value.decode(codec)
        except UnicodeDecodeError:
            return ""
    if not isinstance(value, str) or type(value).__name__ == "NameObject":
        return ""
    return " ".join("".join(c if c.isprintable() else " " for c in value).split())


def _ocr_warning(path: Path, pages: list[int], total: int) -> None:
    if pages:
        shown = ", ".join(map(str, pages[:5])) + (", ..." if len(pages) > 5 else "")
        warnings.warn(f"{str(path)!r}: {len(pages)} of {total} pages (pages {shown}) hold only "
                      f"invisible text over an image, an OCR layer over a scan; that text is "
                      f"indexed. Invisible text on pages with visible text is left out",
                      stacklevel=4)
