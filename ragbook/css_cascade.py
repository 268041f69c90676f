"""Which elements of an HTML page its own style sheets hide: the cascade the HTML converter
(``convert.read_html``) judges each element by, so text a browser never shows is not indexed
and text it shows is not dropped.

Every rule of the page's ``<style>`` elements is matched by a real selector engine
(soupsieve, which BeautifulSoup installs: tags, classes, ids, attributes, descendant, child
and sibling combinators, ``:not()``, ``:is()``, ``:where()``, ``:has()``, structural
pseudo-classes) and weighed as a browser weighs it: ``!important``, then the inline
``style``, then specificity, then order. The inherited properties (``visibility``,
``font-size``, ``color``) pass down, so ``.row{font-size:0} .row span{font-size:14px}``
shows the span, and ``visibility:visible`` in a hidden box shows the child.

What is read, and what is not (text whose hiding is not read stays indexed):

- ``@media`` rules are judged on two screens, a desktop (1280×800) and a phone (390×844);
  text hidden on one and shown on the other is shown (a reader sees it). A query on a
  feature not read here (``prefers-color-scheme``, ``resolution``) is taken as not
  matching; ``@supports`` as in force (``not ...`` as not); ``@layer`` as unlayered;
  ``@container`` and ``@scope`` are not read. Nested rules (``.a { .b {...} }``) are.
- Text coloured as its backdrop (white on the white page, black on a black ``bgcolor``)
  is hidden when the backdrop is known: the page links no style sheet, and no background
  image, positioned box or ``color-scheme`` lies between the text and that colour.
- Not read: external sheets (``<link rel=stylesheet>``, ``@import``), scripts that
  restyle, ``z-index`` stacking, and ``::before``/``::after`` ``content`` (shown, never
  indexed); pseudo-elements and states (``:hover``) select nothing.
"""
from __future__ import annotations

import re

from .css_media import READERS, media_readers, split_list
from .html_hiding import CSS_COMMENT, box_hides, declarations, evaluate_calc, transparent

__all__ = ["Cascade", "sheet_rules", "specificity"]

_ALL = (1 << len(READERS)) - 1
_MAX_SHEET = 200_000                     # characters of style sheet read per page
_MAX_SELECTORS = 500                     # selectors matched per page
_MATCH_BUDGET = 600_000                  # selector × element tests per page (about 2 s)
_RELEVANT = {"display", "visibility", "content-visibility", "opacity", "filter", "font-size",
             "color", "-webkit-text-fill-color", "background-color", "background-image",
             "background-clip", "-webkit-background-clip", "clip", "clip-path", "transform",
             "scale", "translate", "overflow", "height", "width", "max-height", "max-width",
             "text-indent", "left", "top", "right", "margin-left", "margin-top", "position",
             "text-shadow", "-webkit-text-stroke"}
_INHERIT = ("", "inherit", "unset", "currentcolor")
_ABSOLUTE = {"px": 1.0, "pt": 4 / 3, "pc": 16.0, "in": 96.0, "cm": 96 / 2.54,
             "mm": 9.6 / 2.54, "q": 2.4 / 2.54, "rem": 16.0}
_KEYWORDS = {"xx-small": 9.0, "x-small": 10.0, "small": 13.0, "medium": 16.0, "large": 18.0,
             "x-large": 24.0, "xx-large": 32.0, "xxx-large": 48.0}
_NAMED = {"white": (255, 255, 255), "black": (0, 0, 0), "snow": (255, 250, 250),
          "whitesmoke": (245, 245, 245), "ghostwhite": (248, 248, 255), "ivory": (255, 255, 240),
          "red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 128, 0), "gray": (128, 128, 128),
          "grey": (128, 128, 128), "silver": (192, 192, 192), "navy": (0, 0, 128),
          "yellow": (255, 255, 0)}
_NEAR = 12                  # colours this close in every channel (of 255) read as the same


# -- the rules: selectors, declarations, and the screens they are in force on -------------
def sheet_rules(sheet: str) -> list[tuple[str, dict[str, tuple[str, bool]], int]]:
    """``(selectors, declarations, readers)`` of each style rule of ``sheet`` (CSS text),
    in order: the rule's selector list, its declarations that bear on visibility (shorthands
    ``font``, ``background`` and ``margin`` read for their parts), and a bit mask of the
    ``READERS`` it is in force for (``@media``)."""
    out: list = []
    _read_block(CSS_COMMENT.sub("", sheet[:_MAX_SHEET]), _ALL, "", out, 0)
    return [rule for rule in out if rule is not None and rule[1]]


_NEXT = re.compile(r"""[{};]|"(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?""")


def _read_block(text: str, readers: int, parent: str, out: list, depth: int) -> None:
    """Append the rules of a block of CSS (a sheet, a rule's body, an ``@media`` body) to
    ``out``; ``parent``: the selector a nested rule's body belongs to ("" at the top)."""
    slot = len(out)
    out.append(None)                     # the parent's own declarations come first
    at = start = 0
    own: list[str] = []
    while (m := _NEXT.search(text, at)) is not None:
        at = m.end()
        if m.group() == ";":
            own.append(text[start:m.start()])
            start = at
        elif m.group() == "}":
            start = at
        elif m.group() == "{":
            end = _close(text, at)
            if depth < 8:
                _nested(text[start:m.start()].strip(), text[at:end], readers, parent, out,
                        depth + 1)
            at = start = end + 1
    own.append(text[start:])
    if parent and readers:
        out[slot] = (parent, _relevant(declarations(";".join(own))), readers)


def _close(text: str, at: int) -> int:
    """The index of the ``}`` that closes the block opened just before ``at`` (strings
    skipped), or the end of ``text`` when it is never closed (as a browser reads it)."""
    depth = 1
    while (m := _NEXT.search(text, at)) is not None:
        at = m.end()
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
        if depth == 0:
            return m.start()
    return len(text)


def _nested(prelude: str, body: str, readers: int, parent: str, out: list, depth: int) -> None:
    """Read one block: an at-rule's (``@media``, ``@supports``, ``@layer``) or a style
    rule's, whose selector is nested in ``parent``'s when there is one (``&`` is it)."""
    if prelude.startswith("@"):
        name = (re.match(r"@([-\w]+)", prelude) or [None, ""])[1].lower()
        condition = prelude[len(name) + 1:].strip().lower()
        if name == "media":
            readers &= media_readers(condition)
        elif not (name == "layer" or name == "supports" and not condition.startswith("not")):
            return
        if readers:
            _read_block(body, readers, parent, out, depth)
        return
    if parent:
        prelude = ", ".join(part.replace("&", f":is({parent})") if "&" in part
                            else f":is({parent}) {part}" for part in split_list(prelude))
    _read_block(body, readers, prelude, out, depth)


def _relevant(found: dict[str, tuple[str, bool]]) -> dict[str, tuple[str, bool]]:
    """The declarations that bear on visibility, shorthands read for their parts."""
    out = {k: v for k, v in found.items() if k in _RELEVANT}
    if "font" in found:
        value, important = found["font"]
        size = next((t.split("/")[0] for t in value.split() if re.fullmatch(
            r"(?:0|[+-]?[\d.]+(?:[a-z]+|%))(?:/\S*)?", t)), None)
        if size is not None:
            out.setdefault("font-size", (size, important))
    if "background" in found:
        value, important = found["background"]
        image = "url(" in value or "gradient(" in value or "image(" in value
        out.setdefault("background-image", (value if image else "none", important))
        out.setdefault("background-color", (value, important))
    if "margin" in found:
        value, important = found["margin"]
        sides = value.split()
        if 1 <= len(sides) <= 4:
            out.setdefault("margin-top", (sides[0], important))
            out.setdefault("margin-left", (sides[[0, 1, 1, 3][len(sides) - 1]], important))
    return out


def specificity(selector: str) -> tuple[int, int, int]:
    """A selector's specificity ``(ids, classes, types)``: classes count attributes and
    pseudo-classes; ``:where()`` counts nothing, ``:not()``/``:is()``/``:has()`` their
    arguments (summed: close to the browser's largest-argument rule for common cases)."""
    s = re.sub(r"\"[^\"]*\"|'[^']*'|\[[^\]]*\]", "[]", selector)
    s = re.sub(r":where\((?:[^()]|\([^()]*\))*\)", "", s)
    s = re.sub(r":(?:not|is|has|matches|-\w+-any)\(", "(", s)
    return (len(re.findall(r"#[-\w]", s)),
            len(re.findall(r"\.[-\w]|\[\]|(?<!:):[-\w]", s)),
            len(re.findall(r"(?:^|[\s>+~(,|])[a-z_][-\w]*|::[-\w]", s, re.I)))


# -- each element's computed style, on each screen -----------------------------------------
class Cascade:
    """The page's style, element by element: ``judge(tag)`` tells whether a reader sees the
    element (``""``), sees none of its box (``"box"``: ``display:none``, opacity 0, ...: drop
    it whole) or none of its own text (``"text"``: hidden by an inherited property a child
    may set back). Judge parents before their children (document order), as the state an
    element inherits is its parent's. ``skipped``: selectors not matched (over the limits)."""

    def __init__(self, soup) -> None:
        sheets = [s.get_text() for s in soup.find_all("style")]
        tags = soup.find_all(True)
        quirks = not any(type(n).__name__ == "Doctype" for n in soup.contents)
        if quirks:                  # no <!DOCTYPE>: classes and ids match in any case
            for tag in tags:
                for name in ("class", "id"):
                    if tag.get(name):
                        tag[name] = [c.lower() for c in tag.get_attribute_list(name)] \
                            if name == "class" else str(tag[name]).lower()
        names = {f".{c}" for t in tags for c in t.get_attribute_list("class") if c} | {
            f"#{t['id']}" for t in tags if t.get("id")}
        selectors = [(sel, decls, readers) for sheet in sheets
                     for group, decls, readers in sheet_rules(sheet)
                     for sel in map(_quirks if quirks else str, split_list(group))
                     if _may_match(sel, names)]
        allowed = min(len(selectors), _MAX_SELECTORS,
                      max(10, _MATCH_BUDGET // max(len(tags), 1)))
        self.skipped = len(selectors) - allowed
        self.found: dict[int, list] = {}
        for order, (selector, decls, readers) in enumerate(selectors[:allowed]):
            try:
                matched = soup.select(selector)
            except Exception:       # noqa: BLE001 a pseudo-element, or a selector soupsieve lacks
                continue
            weight = specificity(selector)
            for tag in matched:
                self.found.setdefault(id(tag), []).append((readers, weight, order, decls))
        linked = any("stylesheet" in str(link.get("rel")).lower()
                     for link in soup.find_all("link")) or any(
            "@import" in s or "color-scheme" in s for s in sheets) or bool(
            soup.find("meta", attrs={"name": re.compile("^color-scheme$", re.I)}))
        self.root = tuple((16.0, "visible", "", "", None if linked else (255, 255, 255),
                           False, False) for _ in READERS)
        self.states: dict[int, tuple] = {}

    def judge(self, tag) -> str:
        """``"box"``, ``"text"`` or ``""``: what of ``tag`` no screen shows (see the class)."""
        parent = self.states.get(id(tag.parent), self.root)
        entries = self.found.get(id(tag), ())
        inline = _relevant(declarations(tag.get("style") or "")) if tag.get("style") else {}
        hints = _hints(tag)
        if not entries and not inline and not hints:
            self.states[id(tag)] = parent
            return "text" if all(map(_text_hidden, parent)) else ""
        boxes, states = [], []
        for bit, inherited in enumerate(parent):
            get = {**hints, **_winners(entries, inline, 1 << bit)}
            boxes.append(box_hides(get.get))
            states.append(_inherit(get, inherited, READERS[bit]))
        self.states[id(tag)] = tuple(states)
        if all(boxes):
            return "box"
        return "text" if all(b or _text_hidden(s) for b, s in zip(boxes, states, strict=True)) \
            else ""


def _may_match(selector: str, names: set[str]) -> bool:
    """Whether ``selector`` may select an element of the page: the classes and ids its last
    compound names (``.a .b#c``: ``.b``, ``#c``) are all on some element (``names``). A
    framework's sheet names thousands of classes a page never uses; matching each would
    spend the page's budget."""
    last = re.split(r"[\s>+~]+", re.sub(r"\([^()]*\)|\[[^\]]*\]", "", selector).strip())[-1]
    return all(name in names for name in re.findall(r"[.#]-?[_a-zA-Z][-\w]*", last))


def _quirks(selector: str) -> str:
    """``selector`` with its class and id names lowercased (outside ``[...]`` and strings),
    as a page in quirks mode (no ``<!DOCTYPE>``) matches them: ``P.Z`` selects ``class=z``."""
    return re.sub(r"(\[[^\]]*\]|\"[^\"]*\"|'[^']*')|([.#]-?[_a-zA-Z\\][-\w\\]*)",
                  lambda m: m[1] or m[2].lower(), selector)


def _hints(tag) -> dict[str, str]:
    """What HTML attributes say of colour (``<font color>``, ``<body text>``, ``bgcolor``):
    presentational hints, which any CSS declaration overrides."""
    hints = {}
    if tag.get("bgcolor"):
        hints["background-color"] = str(tag["bgcolor"]).strip().lower()
    colour = tag.get("color") if tag.name == "font" else tag.get("text") \
        if tag.name == "body" else None
    if colour:
        hints["color"] = str(colour).strip().lower()
    return hints


def _winners(entries, inline: dict, bit: int) -> dict[str, str]:
    """Each property's value that wins the cascade on screen ``bit``: important first, then
    the inline style, then specificity, then the later rule."""
    best: dict[str, tuple] = {}
    for readers, weight, order, decls in entries:
        if readers & bit:
            for prop, (value, important) in decls.items():
                key = (important, 0, weight, order)
                if prop not in best or key > best[prop][0]:
                    best[prop] = (key, value)
    for prop, (value, important) in inline.items():
        key = (important, 1, (0, 0, 0), 0)
        if prop not in best or key > best[prop][0]:
            best[prop] = (key, value)
    return {prop: value for prop, (_, value) in best.items()}


def _inherit(get: dict, parent: tuple, screen: tuple[int, int]) -> tuple:
    """An element's inherited state on one screen, from its winning declarations ``get``
    and its parent's state: ``(font px or None, visibility, colour, text fill colour,
    backdrop rgb or None, outlined, gradient text)``."""
    font, visibility, colour, fill, backdrop, outlined, gradient = parent
    if get.get("font-size", "") not in _INHERIT:
        font = _font_px(get["font-size"], font, screen)
    if get.get("visibility", "") not in _INHERIT:
        visibility = "visible" if get["visibility"] == "initial" else get["visibility"]
    colour = colour if get.get("color", "") in _INHERIT else get["color"]
    fill = fill if get.get("-webkit-text-fill-color", "") in _INHERIT \
        else get["-webkit-text-fill-color"]
    image = get.get("background-image", "none") not in ("none", "initial")
    if image or get.get("position", "static") not in ("static", "initial", "inherit"):
        backdrop = None
    elif get.get("background-color", "") not in _INHERIT:
        rgba = _rgba(get["background-color"])
        backdrop = None if rgba is None or 0.05 <= rgba[3] < 0.95 else \
            backdrop if rgba[3] < 0.05 else rgba[:3]
    for prop in ("text-shadow", "-webkit-text-stroke"):
        if get.get(prop, "") not in _INHERIT:
            outlined = get[prop] not in ("none", "initial", "0")
    gradient = gradient or "text" in get.get("background-clip", "") + get.get(
        "-webkit-background-clip", "")
    return font, visibility, colour, fill, backdrop, outlined, gradient


def _text_hidden(state: tuple) -> bool:
    """Text drawn in ``state`` (``_inherit``) is invisible: hidden, under 1 px, of a
    transparent colour, or of the colour of a known backdrop (not outlined)."""
    font, visibility, colour, fill, backdrop, outlined, gradient = state
    shown = fill if fill and fill not in _INHERIT else colour
    if visibility in ("hidden", "collapse") or (font is not None and font < 1):
        return True
    if gradient:
        return False
    if transparent(shown):
        return True
    rgba = _rgba(shown or "black")
    return backdrop is not None and not outlined and rgba is not None and rgba[3] >= 0.95 \
        and max(abs(a - b) for a, b in zip(rgba[:3], backdrop, strict=True)) <= _NEAR


def _font_px(value: str, parent: float | None, screen: tuple[int, int]) -> float | None:
    """A ``font-size`` in px given the parent's (``None``: not known); a value of zero in
    any unit is 0; a value not read (``calc`` of several terms, ``var()``) is unknown."""
    value = evaluate_calc(value)
    if value in _KEYWORDS:
        return _KEYWORDS[value]
    if value in ("smaller", "larger"):
        return None if parent is None else parent * (1.2 if value == "larger" else 1 / 1.2)
    found = re.fullmatch(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)([a-z]*|%)", value)
    if found is None:
        return None
    number, unit = float(found[1]), found[2]
    if number == 0:
        return 0.0
    relative = {"em": 1.0, "%": 0.01, "ex": 0.5, "ch": 0.5, "cap": 0.7, "ic": 1.0}
    viewport = {"vw": screen[0] / 100, "vh": screen[1] / 100,
                "vmin": min(screen) / 100, "vmax": max(screen) / 100}
    if unit in relative:
        return None if parent is None else parent * number * relative[unit]
    scale = _ABSOLUTE.get(unit, viewport.get(unit))
    return None if scale is None else number * scale


def _rgba(value: str) -> tuple[int, int, int, float] | None:
    """The colour in a CSS value (its first colour token: ``#fff``, ``rgb(0 0 0 / 50%)``,
    ``white``), else None (``hsl()``, ``var()``, a name not in ``_NAMED``)."""
    for token in re.findall(r"#[0-9a-f]+|rgba?\([^)]*\)|[a-z]+", value):
        if token == "transparent":
            return (0, 0, 0, 0.0)
        if token in _NAMED:
            return (*_NAMED[token], 1.0)
        if token.startswith("#") and len(token) in (4, 5, 7, 9):
            digits = token[1:] if len(token) > 5 else "".join(c * 2 for c in token[1:])
            channels = [int(digits[i:i + 2], 16) for i in range(0, len(digits), 2)]
            return (*channels[:3], channels[3] / 255 if len(channels) == 4 else 1.0)
        if token.startswith("rgb"):
            args = token[token.index("(") + 1:-1].replace("/", " ").replace(",", " ").split()
            try:
                numbers = [float(a.rstrip("%")) * (2.55 if a.endswith("%") else 1)
                           for a in args[:3]]
                alpha = float(args[3].rstrip("%")) / (100 if args[3].endswith("%") else 1) \
                    if len(args) > 3 else 1.0
            except ValueError:
                return None
            return (*(round(n) for n in numbers), alpha) if len(numbers) == 3 else None
    return None
