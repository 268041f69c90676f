"""Media queries judged as two screens would judge them — a desktop (1280×800) and a phone
(390×844) — for the HTML converter's cascade (``css_cascade``): a rule under ``@media
print`` hides nothing on screen, one under ``(max-width: 600px)`` only on the phone."""
from __future__ import annotations

import re

__all__ = ["READERS", "media_readers", "split_list"]

READERS = ((1280, 800), (390, 844))     # the screens a page is judged on: desktop, phone


def split_list(text: str) -> list[str]:
    """``text`` split at its top-level commas (not those inside ``:is(a, b)``)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char == "," and depth <= 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in [*parts, text[start:]] if p.strip()]


def media_readers(query: str) -> int:
    """The bit mask of ``READERS`` a media query list matches (``screen and (max-width:
    600px)``: the phone). A query on a feature not read matches neither."""
    mask = 0
    for part in split_list(query.lower()) or ["all"]:
        for bit in range(len(READERS)):
            if _query(part, bit) is True:
                mask |= 1 << bit
    return mask


_TYPES = {"all": True, "screen": True, "print": False, "speech": False, "tty": False,
          "tv": False, "projection": False, "handheld": False, "braille": False,
          "embossed": False, "aural": False}


def _query(query: str, bit: int) -> bool | None:
    """One media query (or condition) on screen ``bit``: True, False, or None (unknown)."""
    query = query.strip()
    if query.startswith("not ") or query.startswith("not("):
        inner = _query(query[3:], bit)
        return None if inner is None else not inner
    query = query.removeprefix("only ").strip()
    for joiner, combine in ((" or ", any), (" and ", all)):
        parts = _split_words(query, joiner)
        if len(parts) > 1:
            values = [_query(p, bit) for p in parts]
            if combine is all and False in values or combine is any and True in values:
                return combine is any
            return None if None in values else combine is all
    if query in _TYPES:
        return _TYPES[query]
    if query.startswith("(") and query.endswith(")"):
        inner = query[1:-1].strip()
        return _query(inner, bit) if "(" in inner or " and " in inner else _feature(inner, bit)
    return None


def _split_words(text: str, word: str) -> list[str]:
    """``text`` split at ``word`` outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0 and text.startswith(word, i):
            parts.append(text[start:i])
            i = start = i + len(word)
            continue
        i += 1
    return [*parts, text[start:]]


_FEATURES = {"hover": ("hover", "none"), "any-hover": ("hover", "none"),
             "pointer": ("fine", "coarse"), "any-pointer": ("fine", "coarse"),
             "scripting": ("enabled", "enabled")}
_RANGE = re.compile(r"(?:([\w.]+)\s*([<>]=?|=)\s*)?(width|height)(?:\s*([<>]=?|=)\s*([\w.]+))?")


def _feature(inner: str, bit: int) -> bool | None:
    """One media feature (``max-width: 600px``, ``width >= 40em``, ``orientation:
    portrait``, ``hover: none``) on screen ``bit``; None for a feature not read."""
    width, height = READERS[bit]
    name, colon, value = (x.strip() for x in inner.partition(":"))
    if colon:
        base = name.removeprefix("min-").removeprefix("max-").removeprefix("device-")
        if base in ("width", "height"):
            length = _media_px(value)
            size = width if base == "width" else height
            return None if length is None else (
                size >= length if name.startswith("min-") else size <= length
                if name.startswith("max-") else size == length)
        if name == "orientation":
            return value == ("landscape" if width > height else "portrait")
        return value == _FEATURES[name][bit] if name in _FEATURES else None
    found = _RANGE.fullmatch(inner)
    if found is None:
        return True if inner in ("color", "hover", "pointer") and bit == 0 else None
    size = width if found[3] == "width" else height
    result = True
    for left, op, right in ((_media_px(found[1]), found[2], size),
                            (size, found[4], _media_px(found[5]))):
        if op is None:
            continue
        if left is None or right is None:
            return None
        result &= {"<": left < right, "<=": left <= right, ">": left > right,
                   ">=": left >= right, "=": left == right}[op]
    return result


def _media_px(value: str | None) -> float | None:
    """A media query length in px (``600px``, ``40em``, ``0``); None for other units."""
    found = re.fullmatch(r"([+-]?[\d.]+)(px|em|rem)?", value or "")
    if found is None:
        return None
    return float(found[1]) * (16.0 if found[2] in ("em", "rem") else 1.0)
