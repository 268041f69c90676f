"""The text a PDF page *shows*: text drawn invisible (render mode 3 or 7, neither filled nor
stroked) is how planted instructions hide in a PDF, and it is left out — unless it is a
scan's OCR layer, the page's only text, drawn over an image (ocrmypdf and tesseract write
their text that way), which is what the page shows in pixels.

The invisible text-showing operators (``Tj TJ ' "``) are cut from the page's content
streams — its own and those of the form XObjects it draws, nested ones too — before pypdf
extracts the text. (Filtering pypdf's extracted pieces instead saw the render mode in force
when a piece was flushed, not when it was drawn: "(Visible) Tj 3 Tr (SECRET) Tj" came out
as all hidden, "3 Tr (SECRET) Tj 0 Tr (Visible) Tj" as all visible.) The edit is to the
in-memory copy pypdf read; nothing is written back to the file.
"""
from __future__ import annotations

import re

__all__ = ["visible_text"]

# a text render mode that neither fills nor strokes (3: invisible, 7: clip only), however
# the number is written (3, 3.0, 03, +3)
_INVISIBLE = re.compile(rb"(?<![\w.])\+?0*[37](?:\.0*)?\s+Tr\b")
_SHOW = (b"Tj", b"TJ", b"'", b'"')
_FORMS = 64                     # form XObjects read per page, nested ones included


def visible_text(page) -> tuple[str, str]:
    """``(text, "visible")``: the page's text without what is drawn invisible. A page whose
    only text is invisible and that draws an image is a scan's OCR layer: ``(that text,
    "ocr")``; invisible text alone: ``("", "hidden")``. A page that sets no invisible mode
    anywhere is extracted as it is."""
    owners = _owners(page)
    if not any(_INVISIBLE.search(_data(o)) for o, _, _ in owners):
        return page.extract_text() or "", "visible"
    whole = page.extract_text() or ""
    images = False
    for owner, parent, key in reversed(owners):      # nested forms before the forms using them
        images |= _cut_invisible(page.pdf, owner, parent, key)
    shown = page.extract_text() or ""
    if shown.strip() or not whole.strip():
        return shown, "visible"
    return (whole, "ocr") if images else ("", "hidden")


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


def _cut_invisible(pdf, owner, parent, key) -> bool:
    """Drop the text-showing operators drawn in render mode 3 or 7 from ``owner``'s content
    (the page, or the form XObject ``parent[key]``), in pypdf's in-memory copy; True when it
    draws an image."""
    from pypdf.generic import ContentStream, DecodedStreamObject, NameObject  # the documents extra

    stream = ContentStream(owner.get_contents() if parent is None else owner, pdf)
    modes, kept, images = [0], [], False
    for operands, op in stream.operations:
        if op == b"Tr" and operands:
            modes[-1] = int(float(operands[0]))
        elif op == b"q":
            modes.append(modes[-1])
        elif op == b"Q" and len(modes) > 1:
            modes.pop()
        elif op in (b"BI", b"INLINE IMAGE") or (op == b"Do" and operands
                                                  and _is_image(owner, operands[0])):
            images = True
        if not (op in _SHOW and modes[-1] in (3, 7)):
            kept.append((operands, op))
    stream.operations = kept
    if parent is None:
        owner[NameObject("/Contents")] = stream
    else:                         # the form again, decoded, with the same dictionary
        form = DecodedStreamObject()
        form.update({k: v for k, v in owner.items()
                     if k not in ("/Filter", "/DecodeParms", "/Length")})
        form.set_data(stream.get_data())
        parent[key] = form
    return images


def _is_image(owner, name) -> bool:
    """Whether the XObject ``name`` that a page or form draws (``Do``) is an image."""
    try:
        return owner["/Resources"]["/XObject"][name].get_object().get("/Subtype") == "/Image"
    except (KeyError, TypeError, AttributeError):
        return False
