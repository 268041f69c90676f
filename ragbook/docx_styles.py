"""Whether a reader of a Word document sees a run: ``StyleSheet``, the formatting Word
resolves for a run through its styles, and what of it hides the run's text.

A run is unseen when it is hidden (``w:vanish``, ``w:specVanish``), set in a font under
1 px (``w:sz`` of 1 half-point or 0: the HTML converter's bound, ``html_hiding``), or drawn
in the colour of what lies behind it — white on the white page is the Word form of
``color:#fff``. Each property is resolved as Word resolves it: the run's own properties,
else its character style, else its paragraph's style (``w:pStyle``, else the default
paragraph style), else its table's style, each through its ``w:basedOn`` chain, else the
document defaults (``w:docDefaults``). The backdrop is the run's highlight or shading, else
its paragraph's shading, else its table cell's, else the page colour (``w:background``),
else white; where it cannot be known (a text box, a table whose style shades cells, a
shading pattern) colour hides nothing. Toggle properties are not XORed across style levels
(Word's rule for a style hiding text its paragraph's style already hides): such text is
left out, never shown wrongly.
"""
from __future__ import annotations

__all__ = ["StyleSheet", "W"]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FALSE = {"0", "false", "off"}
_NEAR = 12                  # colours this close in every channel (of 255) read as the same
_THEME = {"background1": "FFFFFF", "light1": "FFFFFF", "text1": "000000", "dark1": "000000"}
_HIGHLIGHT = {"white": "FFFFFF", "black": "000000", "yellow": "FFFF00", "green": "00FF00",
              "cyan": "00FFFF", "magenta": "FF00FF", "blue": "0000FF", "red": "FF0000",
              "darkBlue": "000080", "darkCyan": "008080", "darkGreen": "008000",
              "darkMagenta": "800080", "darkRed": "800000", "darkYellow": "808000",
              "darkGray": "808080", "lightGray": "C0C0C0"}
_UNKNOWN = "?"              # a backdrop that cannot be known: colour hides nothing
_OUTLINED = ("outline", "shadow", "emboss", "imprint")


def _on(el) -> bool | None:
    """A toggle element's value: None when absent, else whether its ``w:val`` is true."""
    return None if el is None else el.get(f"{W}val", "true").strip().lower() not in _FALSE


def _vanish(rpr) -> bool | None:
    """Whether run properties ``rpr`` hide the run (``w:specVanish`` or ``w:vanish``, either
    with no ``w:val`` or a true one); None when they say nothing, so a style decides."""
    if rpr is None:
        return None
    said = [_on(rpr.find(f"{W}{name}")) for name in ("specVanish", "vanish")]
    said = [s for s in said if s is not None]
    return any(said) if said else None


def _size(rpr) -> int | None:
    """The font size ``rpr`` sets, in half-points (None: not set, or not a number)."""
    el = None if rpr is None else rpr.find(f"{W}sz")
    try:
        return None if el is None else int(float(el.get(f"{W}val", "")))
    except ValueError:
        return None


def _colour(rpr) -> str | None:
    """The text colour ``rpr`` sets as ``RRGGBB``, ``"auto"`` (Word picks a contrasting
    one), or None when it sets none; a theme colour is read as its usual value."""
    el = None if rpr is None else rpr.find(f"{W}color")
    if el is None:
        return None
    theme = el.get(f"{W}themeColor")
    if theme is not None and el.get(f"{W}themeTint") is None \
            and el.get(f"{W}themeShade") is None:
        return _THEME.get(theme, _UNKNOWN)
    return _hex(el.get(f"{W}val", "auto")) or "auto"


def _outlined(rpr) -> bool | None:
    """Whether ``rpr`` draws an outline, shadow or relief around the glyphs (white text so
    drawn is seen on white), None when it says nothing."""
    said = [] if rpr is None else [_on(rpr.find(f"{W}{n}")) for n in _OUTLINED]
    said = [s for s in said if s is not None]
    return any(said) if said else None


def _hex(value: str | None) -> str | None:
    value = (value or "").strip().upper()
    return value if len(value) == 6 and all(c in "0123456789ABCDEF" for c in value) else None


def shading(props) -> str | None:
    """The colour a ``w:shd`` in ``props`` (run, paragraph or cell properties) paints
    behind the text: its fill for a clear pattern, its colour for a solid one; None for no
    shading (or an ``auto`` fill); ``_UNKNOWN`` for a mixed pattern."""
    shd = None if props is None else props.find(f"{W}shd")
    if shd is None:
        return None
    pattern = shd.get(f"{W}val", "clear")
    if pattern in ("clear", "nil"):
        return None if pattern == "nil" else _hex(shd.get(f"{W}fill"))
    if pattern == "solid":
        return _hex(shd.get(f"{W}color")) or "000000"
    return _UNKNOWN


def _highlight(rpr) -> str | None:
    el = None if rpr is None else rpr.find(f"{W}highlight")
    value = None if el is None else el.get(f"{W}val", "none")
    return None if value in (None, "none") else _HIGHLIGHT.get(value, _UNKNOWN)


def _run_backdrop(rpr) -> str | None:
    return _highlight(rpr) or shading(rpr)


class StyleSheet:
    """Which runs a document's styles leave unseen (see the module docstring). ``hidden(run,
    context)`` answers for a run; ``context(p)`` is worked out once per paragraph. A style
    chain that loops or runs past 64 styles is cut there."""

    def __init__(self, styles=None, page: str | None = None):
        found = [] if styles is None else styles.iter(f"{W}style")
        self.by_id = {s.get(f"{W}styleId"): s for s in found}
        self.default_paragraph = next(
            (i for i, s in self.by_id.items() if s.get(f"{W}type") == "paragraph"
             and s.get(f"{W}default", "").lower() in ("1", "true", "on")), None)
        self.defaults = None if styles is None else styles.find(
            f"{W}docDefaults/{W}rPrDefault/{W}rPr")
        self.page = page or "FFFFFF"
        self.cache: dict[tuple, object] = {}

    def style_says(self, style_id: str | None, read, part: str = "rPr"):
        """What the style ``style_id`` (or one it is based on) sets by ``read`` (of its
        ``part``: run or paragraph properties); None when none of the chain says."""
        key = (style_id, read, part)
        if key not in self.cache:
            seen, found, current = set(), None, style_id
            while current in self.by_id and current not in seen and len(seen) < 64:
                seen.add(current)
                style = self.by_id[current]
                found = read(style.find(f"{W}{part}"))
                if found is not None:
                    break
                based = style.find(f"{W}basedOn")
                current = None if based is None else based.get(f"{W}val")
            self.cache[key] = found
        return self.cache[key]

    def context(self, p) -> tuple:
        """What a paragraph ``p`` gives its runs: ``(its style, its table's style, the
        backdrop behind it)``, worked out once per paragraph."""
        if p is None:
            return (self.default_paragraph, None, self.page)
        pstyle = _val(p.find(f"{W}pPr/{W}pStyle")) or self.default_paragraph
        cell, box, node = None, False, p.getparent()
        while node is not None and not box and node.tag != f"{W}tbl":
            cell = node if node.tag == f"{W}tc" and cell is None else cell
            box = node.tag == f"{W}txbxContent"
            node = node.getparent()
        table = None if node is None or box else _val(node.find(f"{W}tblPr/{W}tblStyle"))
        backdrop = _UNKNOWN if box else (
            shading(p.find(f"{W}pPr")) or self.style_says(pstyle, shading, "pPr")
            or shading(None if cell is None else cell.find(f"{W}tcPr"))
            or (_UNKNOWN if table and self._shades(table) else self.page))
        return (pstyle, table, backdrop)

    def _shades(self, table_style: str) -> bool:
        """Whether a table style (or one it is based on) shades any cell or row."""
        key = ("shades", table_style)
        if key not in self.cache:
            seen, current, found = set(), table_style, False
            while current in self.by_id and current not in seen and len(seen) < 64:
                seen.add(current)
                found = found or self.by_id[current].find(f".//{W}shd") is not None
                based = self.by_id[current].find(f"{W}basedOn")
                current = None if based is None else based.get(f"{W}val")
            self.cache[key] = found
        return self.cache[key]

    def resolve(self, rpr, context: tuple, read):
        """A run property as Word resolves it (run, character style, paragraph style,
        table style, document defaults); None when nothing sets it."""
        said = read(rpr)
        if said is None and rpr is not None:
            said = self.style_says(_val(rpr.find(f"{W}rStyle")), read)
        pstyle, table, _ = context
        for style in (pstyle, table):
            said = self.style_says(style, read) if said is None else said
        return read(self.defaults) if said is None else said

    def hidden(self, run, context: tuple | None = None) -> bool:
        """Whether a reader cannot see ``run`` (a ``w:r``): hidden, a font under 1 px, or
        text the colour of its backdrop; ``context``: its paragraph's (``context(p)``)."""
        context = self.context(_nearest(run, f"{W}p")) if context is None else context
        rpr = run.find(f"{W}rPr")
        if self.resolve(rpr, context, _vanish):
            return True
        size = self.resolve(rpr, context, _size)
        if size is not None and size <= 1:
            return True
        colour = self.resolve(rpr, context, _colour)
        if colour in (None, "auto", _UNKNOWN) or self.resolve(rpr, context, _outlined):
            return False
        backdrop = self.resolve(rpr, context, _run_backdrop) or context[2]
        return backdrop != _UNKNOWN and _near(colour, backdrop)


def _near(a: str, b: str) -> bool:
    return all(abs(int(a[i:i + 2], 16) - int(b[i:i + 2], 16)) <= _NEAR for i in (0, 2, 4))


def _val(el) -> str | None:
    return None if el is None else el.get(f"{W}val")


def _nearest(node, tag):
    node = node.getparent()
    while node is not None and node.tag != tag:
        node = node.getparent()
    return node
