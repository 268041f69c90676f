"""What CSS hides: the HTML converter's test of whether a reader of the rendered page sees
an element (``ragbook.convert``). Text a browser never shows is where planted instructions
hide, so it is not indexed: inline styles (``style_hides``), the "visually hidden" classes
of CSS frameworks (``HIDING_CLASSES``), and — for Markdown's raw HTML, which has no tree
(``markdown_text``) — the page's own style-sheet rules for classes, ids and tags combined
with them (``hiding_selectors``, ``hidden_by``; where BeautifulSoup is missing). An HTML
page's sheets are read in full, selectors and cascade, by ``css_cascade`` with
``box_hides``."""
from __future__ import annotations

import re

__all__ = ["css", "declarations", "style_hides", "text_hides", "box_hides",
           "hidden_by", "hiding_selectors", "selected", "HIDING_CLASSES", "CSS_COMMENT",
           "transparent", "evaluate_calc"]

CSS_COMMENT = re.compile(r"/\*.*?(?:\*/|$)", re.S)
_CSS_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{1,6})[ \t\n\r\f]?|(.))", re.S)
_CSS_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?([a-z]*|%)")


def css(style: str) -> dict[str, str]:
    """An inline ``style`` as a browser reads it: ``{property: value}``, comments removed,
    escapes such as ``n\\6f ne`` decoded, lowercased, spaces collapsed, a later declaration
    overriding an earlier one unless that one is ``!important`` — so ``/**/display:none``
    and ``DISPLAY : n\\6f ne`` hide what they hide in the browser."""
    return {name: value for name, (value, _) in declarations(style).items()}


def declarations(style: str) -> dict[str, tuple[str, bool]]:
    """``css`` with each value's ``!important`` flag: ``{property: (value, important)}``
    (the cascade, ``css_cascade``, weighs a style sheet's important rules against it)."""
    text = _CSS_ESCAPE.sub(_unescape, CSS_COMMENT.sub("", style))
    found: dict[str, tuple[str, bool]] = {}
    for declaration in text.split(";"):
        name, colon, value = declaration.partition(":")
        value = " ".join(value.lower().split())
        important = value.endswith("important") and "!" in value
        value = value.rsplit("!", 1)[0].strip() if important else value
        name = name.strip().lower()
        if colon and name and not (name in found and found[name][1] and not important):
            found[name] = (value, important)
    return found


def _unescape(match: re.Match) -> str:
    if match[2] is not None:
        return match[2]
    code = int(match[1], 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def style_hides(style: str) -> bool:
    """The inline style makes its element invisible: ``display:none``, ``visibility:hidden``
    (or ``collapse``), ``content-visibility:hidden``, an opacity under 0.05 (``0``, ``.001``,
    ``-1``, ``filter:opacity(0)``), a font size under 1 px (``0.4pt``, ``0.01em``, ``1%``:
    em, rem and % of 16 px, pt as 4/3 px) or of zero in any unit (``0vw``, ``calc(0px)``),
    text of a colour with alpha under 0.05 in any notation (``transparent``, ``#0000``,
    ``rgb(0 0 0/0)``, ``hsla(0,0%,0%,0)``; not gradient text: ``background-clip:text``), a
    clip or clip path to nothing, a scale under 0.01 (``scale(0.001)``, ``scale:0``, a
    ``matrix`` that flattens), a box of zero height, width or max-height with its overflow
    hidden, or text indented, positioned, translated or given a margin of 999 px or more off
    the page — the "visually hidden" recipes of CSS frameworks, and of planted text."""
    get = css(style).get
    return box_hides(get) or text_hides(get)


def text_hides(get) -> bool:
    """Declarations (``get``: a property's value, or the default) that hide an element's
    text through properties its children inherit, and so may set back for themselves:
    ``visibility:hidden``, a font size under 1 px, a transparent text colour."""
    shown_through = "text" in get("background-clip", "") + get("-webkit-background-clip", "")
    return (get("visibility") in ("hidden", "collapse")
            or _tiny_font(evaluate_calc(get("font-size", "")))
            or (transparent(get("color", "")) and not shown_through))


def box_hides(get) -> bool:
    """Declarations (``get``) that hide an element's whole box, children and all: what no
    child can undo (``display:none``, opacity, a clip, a scale, a move off the page)."""
    transform = get("transform", "")
    opacities = [get("opacity", "")] + _arguments(get("filter", ""), "opacity")
    return (get("display") == "none" or get("content-visibility") == "hidden"
            or any(v is not None and v < 0.05 for v in map(_fraction, opacities))
            or _NOTHING.search(get("clip", "") + " " + get("clip-path", "")) is not None
            or _flattened(transform, get("scale", ""))
            or _moved_off(transform, get("translate", ""))
            or (get("overflow") in ("hidden", "clip") and 0 in (
                _number(get("height", "")), _number(get("width", "")),
                _number(get("max-height", "")), _number(get("max-width", ""))))
            or any((_number(get(side, "")) or 0) <= -999 for side in (
                "text-indent", "left", "top", "margin-left", "margin-top", "right")))


_NOTHING = re.compile(r"rect\(\s*0\w*[\s,]+0\w*[\s,]+0\w*[\s,]+0\w*\s*\)|inset\(\s*(?:50|100)%|"
                      r"circle\(\s*0\w*\s*[)a]|polygon\(\s*0\w*\s+0\w*\s*\)")
_FUNCTION = re.compile(r"\b([a-z0-9-]+)\(([^()]*)\)")
_PX = {"px": 1.0, "em": 16.0, "rem": 16.0, "pt": 4 / 3, "%": 0.16}


def _fraction(value: str) -> float | None:
    """A CSS number or percentage as a fraction (``0.5``, ``50%``: 0.5), else None."""
    number = _number(value)
    return None if number is None else number / 100 if value.endswith("%") else number


def _arguments(value: str, function: str) -> list[str]:
    """The arguments of each ``function(...)`` (or ``functionX(...)``) in ``value``."""
    return [arg for name, args in _FUNCTION.findall(value) if name.startswith(function)
            for arg in args.replace(",", " ").split()]


def _tiny_font(value: str) -> bool:
    """A font size under 1 px: of zero in any unit, or under 1 px in px, pt, em, rem or %
    (em, rem and % of a 16 px parent: the browsers' default size)."""
    found = _CSS_NUMBER.fullmatch(value)
    size = None if found is None else _number(value)
    return size is not None and (size == 0 or found[1] in _PX and size * _PX[found[1]] < 1)


def transparent(color: str) -> bool:
    """A text colour whose alpha is under 0.05: ``transparent``, ``#RGBA`` or ``#RRGGBBAA``,
    or a colour function whose fourth argument or argument after ``/`` is (``rgba(255,255,
    255,0)``, ``rgb(0 0 0 / 0%)``, ``hsla(...)``, ``oklch(... / 0)``)."""
    if color == "transparent":
        return True
    if re.fullmatch(r"#[0-9a-f]{4}|#[0-9a-f]{8}", color):
        return int(color[-1] if len(color) == 5 else color[-2:], 16) / (
            15 if len(color) == 5 else 255) < 0.05
    found = _FUNCTION.fullmatch(color)
    if found is None:
        return False
    args = found[2].replace("/", " / ").replace(",", " ").split()
    alpha = args[args.index("/") + 1:] if "/" in args else args[3:] if "," in found[2] else []
    value = _fraction(alpha[0]) if alpha else None
    return value is not None and value < 0.05


def _flattened(transform: str, scale: str) -> bool:
    """A ``transform`` (``scale(0.001)``, ``scaleX(0)``, ``matrix(0,0,0,0,0,0)``) or ``scale``
    property (``scale: 0``) that shrinks its element under 1% in some direction."""
    factors = [_fraction(v) for v in _arguments(transform, "scale")]
    factors += [_fraction(v) for v in scale.split()] if scale != "none" else []
    for name, args in _FUNCTION.findall(transform):
        matrix = [_number(v) for v in args.replace(",", " ").split()]
        if name == "matrix" and len(matrix) == 6 and None not in matrix:
            factors.append(abs(matrix[0] * matrix[3] - matrix[1] * matrix[2]) ** 0.5)
    return any(f is not None and abs(f) < 0.01 for f in factors)


def _moved_off(transform: str, translate: str) -> bool:
    """``translate...()`` or the ``translate`` property moves 999 px or more left or up."""
    moves = _arguments(transform, "translate") + translate.split()
    return any((_number(v) or 0) <= -999 for v in moves if v.endswith("px"))


def evaluate_calc(value: str) -> str:
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
# a rule of the page's own style sheet, and a selector of it that is a tag, classes and an
# id combined (".name", "#id", "p.name", ".a.b", "P.Z#x"), which is read (lowercased)
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_COMPOUND = re.compile(r"(?P<tag>[a-z][a-z0-9-]*)?(?:[.#]-?[_a-z][\w-]*)+")
_PART = re.compile(r"([.#])(-?[_a-z][\w-]*)")
_COMPOUNDS = 100                   # compound selectors read per page (each tests each tag)
Selector = tuple[str, frozenset[str], str]        # tag ("": any), classes, id ("": any)


def hiding_selectors(sheet: str) -> tuple[set[str], set[str], set[Selector]]:
    """What the rules of style sheet ``sheet`` (CSS text) hide, for the rules whose
    declarations hide (``style_hides``): ``(classes, ids, compound)`` — selectors that are
    one class, one id, or (``compound``, at most ``_COMPOUNDS``) a tag, classes and an id
    combined (``p.z``, ``.a.b``). Names are lowercased. A bare tag (``nav``) is not read:
    rules inside ``@media`` blocks are read as if always in force, and responsive sheets
    hide whole tags on small screens; descendant, child, attribute and pseudo-class
    selectors (``.box p``, ``[data-x]``, ``.a:hover``) are not resolved either."""
    classes: set[str] = set()
    ids: set[str] = set()
    compound: set[Selector] = set()
    for selectors, body in _RULE.findall(CSS_COMMENT.sub("", sheet)[:200_000]):
        if not style_hides(body):
            continue
        for selector in selectors.lower().split(","):
            found = _COMPOUND.fullmatch(selector.strip())
            parts = _PART.findall(selector) if found else []
            names = frozenset(name for kind, name in parts if kind == ".")
            idents = {name for kind, name in parts if kind == "#"}
            if not found or len(idents) > 1:          # "#a#b" selects nothing
                continue
            if not found["tag"] and len(parts) == 1:
                (classes if names else ids).update(names | idents)
            elif len(compound) < _COMPOUNDS:
                compound.add((found["tag"] or "", names, next(iter(idents), "")))
    return classes, ids, compound


def selected(selectors: set[Selector], tag: str, classes: set[str], ident: str) -> bool:
    """Whether one of the compound ``selectors`` selects an element named ``tag``, with the
    ``classes`` and id ``ident`` (all lowercase)."""
    return any(name in ("", tag) and wanted <= classes and want_id in ("", ident)
               for name, wanted, want_id in selectors)


def hidden_by(sheet: tuple[set[str], set[str], set[Selector]], tag: str, classes: set[str],
              ident: str) -> bool:
    """Whether ``sheet`` (``hiding_selectors``) hides an element named ``tag`` with the
    ``classes`` and id ``ident`` (lowercase), or a "visually hidden" class does."""
    return bool((HIDING_CLASSES | sheet[0]) & classes) or ident in sheet[1] \
        or selected(sheet[2], tag, classes, ident)
