"""Which raw-HTML elements of a Markdown page its own ``<style>`` sheets hide, judged by the
cascade the HTML converter uses (``css_cascade``): selectors with combinators, attributes
and ``:not()``, ``!important``, specificity and order, ``@media`` on a desktop and a phone,
text the colour of its backdrop. ``markdown_text.visible`` asks it for a page that holds a
style sheet; without BeautifulSoup (the documents extra) it reads class, id and tag rules
only (``html_hiding.hiding_selectors``).

The page's HTML is parsed with Markdown's code, comments and escapes blanked out (so a
``<div>`` shown as code is no element), and each element is known by the offset of its
opening tag. Elements the Markdown renderer makes (the ``<p>`` around a paragraph) are not
in that tree, so a rule that selects only them (``p + p``) is not judged.
"""
from __future__ import annotations

import re

from .css_cascade import Cascade

__all__ = ["hidden_openings"]


def hidden_openings(text: str, unshown: list[tuple[int, int]]) -> set[int] | None:
    """The offsets in ``text`` of the opening tags whose elements the page's style sheets
    hide whole (``Cascade.judge``: no box, or none of its text nor any descendant's);
    ``unshown``: the ``(start, end)`` spans that are code, comments or escapes, blanked
    before parsing. None without BeautifulSoup."""
    try:
        import bs4
    except ImportError:
        return None

    chars = list(text)
    for start, end in unshown:
        chars[start:end] = [c if c == "\n" else " " for c in text[start:end]]
    soup = bs4.BeautifulSoup("".join(chars), "html.parser")
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    cascade, verdicts, tags = Cascade(soup), {}, soup.find_all(True)
    for tag in tags:                              # parents before children, as judge needs
        parent = verdicts.get(id(tag.parent))
        verdicts[id(tag)] = "box" if parent == "box" else cascade.judge(tag)
    unseen_below: dict[int, bool] = {}
    for tag in reversed(tags):                    # children before parents
        unseen_below[id(tag)] = bool(verdicts[id(tag)]) and unseen_below.get(id(tag), True)
        parent = id(tag.parent)
        unseen_below[parent] = unseen_below.get(parent, True) and unseen_below[id(tag)]
    return {starts[tag.sourceline - 1] + tag.sourcepos for tag in tags
            if tag.sourceline is not None and (
                verdicts[id(tag)] == "box"
                or (verdicts[id(tag)] == "text" and unseen_below[id(tag)]))}
