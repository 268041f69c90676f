"""What CSS hides: the HTML converter's test of whether a reader of the rendered page sees
an element (``ragbook.convert``). Text a browser never shows is where planted instructions
hide, so it is not indexed: inline styles (``style_hides``), the "visually hidden" classes
of CSS frameworks (``HIDING_CLASSES``), and the page's own style-sheet rules for single
classes and ids (``sheet_hides``)."""
from __future__ import annotations

import re

__all__ = ["css", "style_hides", "sheet_hides", "HIDING_CLASSES"]

_CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|$)", re.S)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.S)
_CSS_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?([a-z]*|%)")


def css(style: str) -> dict[str, str]:
    """An inline ``style`` as a browser reads it: ``{property: value}``, comments removed,
    escapes such as ``n\\6f ne`` decoded, lowercased, spaces collapsed, a later declaration
    overriding an earlier one unless that one is ``!important`` — so ``/**/display:none``
    and ``DISPLAY : n\\6f ne`` hide what they hide in the browser."""
    text = _CSS_ESCAPE.sub(_unescape, _CSS_COMMENT.sub("", style))
    found: dict[str, tuple[str, bool]] = {}
    for declaration in text.split(";"):
        name, colon, value = declaration.partition(":")
        value = " ".join(value.lower().split())
        important = value.endswith("important") and "!" in value
        value = value.rsplit("!", 1)[0].strip() if important else value
        name = name.strip().lower()
        if colon and name and not (name in found and found[name][1] and not important):
            found[name] = (value, important)
    return {name: value for name, (value, _) in found.items()}


def _unescape(match: re.Match) -> str:
    if match[2] is not None:
        return match[2]
    code = int(match[1], 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def style_hides(style: str) -> bool:
    """The inline style makes its element invisible: ``display:none``, ``visibility:hidden``
    (or ``collapse``), ``content-visibility:hidden``, an opacity under 0.05 (``0``, ``.001``,
    ``-1``), a font size under 1 px or of zero in any unit (``0``, ``0vw``, ``calc(0px)``),
    transparent text, a clip or clip path to nothing, a scale of 0, a box of zero height or
    width with its overflow hidden, or text indented or positioned 999 px or more off the
    page — the "visually hidden" recipes of CSS frameworks, and of planted text."""
    get = css(style).get
    opacity = _number(get("opacity", ""))
    font_size = _number(_calc(get("font-size", "")))
    font_unit = get("font-size", "").rstrip(")").strip()[-2:]
    return (get("display") == "none" or get("visibility") in ("hidden", "collapse")
            or get("content-visibility") == "hidden"
            or (opacity is not None and opacity < 0.05) or font_size == 0
            or (font_size is not None and font_size < 1 and font_unit == "px")
            or get("color") in ("transparent", "rgba(0,0,0,0)", "rgba(0, 0, 0, 0)")
            or _NOTHING.search(get("clip", "") + " " + get("clip-path", "")) is not None
            or _ZERO_SCALE.search(get("transform", "")) is not None
            or (get("overflow") in ("hidden", "clip")
                and 0 in (_number(get("height", "")), _number(get("width", ""))))
            or any((_number(get(side, "")) or 0) <= -999
                   for side in ("text-indent", "left", "top", "margin-left", "right")))


_NOTHING = re.compile(r"rect\(\s*0\w*[\s,]+0\w*[\s,]+0\w*[\s,]+0\w*\s*\)|inset\(\s*(?:50|100)%|"
                      r"circle\(\s*0\w*\s*[)a]|polygon\(\s*0\w*\s+0\w*\s*\)")
_ZERO_SCALE = re.compile(r"\bscale[xy]?\(\s*0(?:\.0*)?\s*[,)]")


def _calc(value: str) -> str:
    """``calc(0px)`` read as ``0px`` (a calc of one term; anything richer stays unread)."""
    return value[5:-1].strip() if value.startswith("calc(") and value.endswith(")") else value


def _number(value: str) -> float | None:
    """The number a CSS value such as ``0``, ``0%``, ``.0rem`` or ``1e-9px`` holds, else None."""
    if not _CSS_NUMBER.fullmatch(value):
        return None
    return float(value.rstrip("abcdefghijklmnopqrstuvwxyz%"))


HIDING_CLASSES = {"hidden", "d-none", "hide", "is-hidden", "invisible", "display-none",
                   "u-hidden", "hidden-xs-up", "sr-only", "visually-hidden", "visuallyhidden",
                   "screen-reader-text", "screen-reader-only", "screenreader-only",
                   "element-invisible", "offscreen", "u-visually-hidden", "a11y-hidden",
                   "hidden-visually", "assistive-text"}
# a rule of the page's own style sheet with one simple selector: ".name", "#id", "p.name"
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_SIMPLE = re.compile(r"^[a-z0-9]*([.#])(-?[_a-zA-Z][\w-]*)$")


def sheet_hides(soup) -> tuple[set[str], set[str]]:
    """The classes and ids the page's ``<style>`` sheets hide (``style_hides`` on a rule's
    declarations), for rules whose selectors are single classes or ids: ``.zz{display:none}``
    hides ``class="zz"`` as surely as an inline style. Richer selectors are not resolved."""
    classes: set[str] = set()
    ids: set[str] = set()
    for style in soup.find_all("style"):
        for selectors, body in _RULE.findall(_CSS_COMMENT.sub("", style.get_text())[:200_000]):
            if not style_hides(body):
                continue
            for selector in selectors.split(","):
                found = _SIMPLE.match(selector.strip())
                if found:
                    (classes if found[1] == "." else ids).add(found[2].lower())
    return classes, ids
