"""Session 14's hostile probe of the converters: each test failed on the code before it.

HTML: a page's own style sheets are read with their selectors and cascade (bare tags,
descendant, child and attribute selectors, ``:not()``; later and more specific rules,
``!important`` and inline styles that show again; ``@media`` judged on two screens;
inherited properties a child sets back; text the colour of its backdrop). PDF: text
drawn off the page, clipped away, or under an opaque fill drawn after it.
"""
import warnings

import pytest

from ragbook.convert import convert

pytest.importorskip("bs4")

PAGE_HIDES = [
    "<style>p{display:none}</style><main><div>SHOWN</div><p>SECRET</p></main>",
    "<style>.a .b{display:none}</style><main><div class=a><i class=b>SECRET</i>SHOWN</div>"
    "<i class=b>SHOWN</i></main>",
    "<style>div > span{visibility:hidden}</style><main><div><span>SECRET</span> SHOWN</div>"
    "</main>",
    "<style>[data-x]{display:none}</style><main><p data-x>SECRET</p><p>SHOWN</p></main>",
    "<style>p:not(.keep){display:none}</style><main><p>SECRET</p><p class=keep>SHOWN</p>"
    "</main>",
    "<style>:is(p,q){font-size:0}</style><main><p>SECRET</p><div>SHOWN</div></main>",
    "<style>.x{display:none!important}</style><main><p class=x style='display:block'>SECRET"
    "</p><p>SHOWN</p></main>",
    "<style>@media screen{p.s{display:none}}</style><main><p class=s>SECRET</p><p>SHOWN</p>"
    "</main>",
    "<style>@media (min-width:1px){p.s{display:none}}</style><main><p class=s>SECRET</p>"
    "<p>SHOWN</p></main>",
    "<style>.a{ .b{display:none} }</style><main><div class=a><p class=b>SECRET</p>SHOWN</div>"
    "</main>",
    "<main><div style='font-size:0'>SECRET<p style='font-size:1em'>SECRET</p></div><p>SHOWN"
    "</p></main>",
    "<main><p style='font:0/0 a'>SECRET</p><p>SHOWN</p></main>",
    "<main><p style='-webkit-text-fill-color:transparent'>SECRET</p><p>SHOWN</p></main>",
    "<main><p style='margin:0 0 0 -9999px;position:absolute'>SECRET</p><p>SHOWN</p></main>",
]
PAGE_SHOWS = [
    "<style>.x{display:none} .x{display:block}</style><main><p class=x>SHOWN</p></main>",
    "<style>#i{display:block} .x{display:none}</style><main><p id=i class=x>SHOWN</p></main>",
    "<style>.x{display:none}</style><main><p class=x style='display:block'>SHOWN</p></main>",
    "<style>@media print{.s{display:none}}</style><main><p class=s>SHOWN</p></main>",
    "<style>@media (max-width:600px){.s{display:none}}</style><main><p class=s>SHOWN</p></main>",
    "<style>.row{font-size:0} .row span{font-size:14px}</style><main><div class=row>"
    "<span>SHOWN</span></div></main>",
    "<main><div style='visibility:hidden'><p style='visibility:visible'>SHOWN</p></div></main>",
    "<!DOCTYPE html><style>.Z{display:none}</style><main><p class=z>SHOWN</p></main>",
]


def _text(tmp_path, markup: str) -> str:
    page = tmp_path / "page.html"
    page.write_text(markup)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return convert(page).text


@pytest.mark.parametrize("markup", PAGE_HIDES)
def test_html_style_sheet_selectors_and_cascade_hide_what_a_browser_hides(tmp_path, markup):
    text = _text(tmp_path, markup)
    assert "SECRET" not in text and "SHOWN" in text, text


@pytest.mark.parametrize("markup", PAGE_SHOWS)
def test_html_cascade_keeps_what_a_later_rule_a_screen_or_a_child_shows(tmp_path, markup):
    assert "SHOWN" in _text(tmp_path, markup)


@pytest.mark.parametrize("markup", [
    "<main><p style='color:#fff'>SECRET</p><p>SHOWN</p></main>",
    "<body bgcolor=black><main><p>SECRET</p><p style='color:white'>SHOWN</p></main>",
    "<main><p><font color=white>SECRET</font> SHOWN</p></main>",
    # a backdrop that is not the page's white: a dark box, an unread sheet, a shadow, an image
    "<main><div style='background:#000'><p style='color:#fff'>SHOWN</p></div></main>",
    "<link rel=stylesheet href=x.css><main><p style='color:#fff'>SHOWN</p></main>",
    "<main><p style='color:white;text-shadow:0 0 2px #000'>SHOWN</p></main>",
    "<main><div style='position:relative'><img src=x.jpg><h1 style='color:#fff'>SHOWN</h1>"
    "</div></main>"])
def test_html_text_the_colour_of_its_known_backdrop_is_hidden(tmp_path, markup):
    text = _text(tmp_path, markup)
    assert "SECRET" not in text and "SHOWN" in text, text


def test_a_style_sheet_too_large_to_match_is_bounded_and_named(tmp_path):
    """A generous bound for a blow-up (selectors × elements), not a timing benchmark."""
    import time
    sheet = "".join(f".c{i} .d{i} > p:not(.e{i}) {{display:none}}\n" for i in range(2000))
    page = tmp_path / "big.html"
    page.write_text(f"<style>{sheet}</style><main>{'<div><p>word</p></div>' * 20000}</main>")
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="selector.s. of its style sheets were not read"):
        convert(page)
    assert time.perf_counter() - start < 30


VISIBLE = "BT /F1 12 Tf 72 700 Td (Visible words) Tj ET "


@pytest.mark.parametrize("ops, shown", [
    ("BT /F1 12 Tf -5000 700 Td (SECRET) Tj ET", False),                 # left of the page
    ("BT /F1 12 Tf 72 -400 Td (SECRET) Tj ET", False),                   # below it
    ("q 1 0 0 1 0 3000 cm BT /F1 12 Tf 72 500 Td (SECRET) Tj ET Q", False),  # moved above it
    ("BT /F1 12 Tf 14 TL 72 30 Td T* T* T* T* (SECRET) Tj ET", False),   # run off its foot
    ("q 0 0 10 10 re W n BT /F1 12 Tf 72 500 Td (SECRET) Tj ET Q", False),   # clipped away
    ("BT /F1 12 Tf 72 500 Td (SECRET) Tj ET 0 0 1 rg 60 480 300 50 re f", False),  # covered
    ("BT /F1 12 Tf 72 500 Td (SECRET) Tj ET 1 g 60 490 300 30 re f", False),  # white on it
    ("BT /F1 12 Tf 2 0 0 2 -100 500 Tm (SHOWN runs onto the page) Tj ET", True),
    ("q 0 0 612 792 re W n BT /F1 12 Tf 72 500 Td (SHOWN) Tj ET Q", True),
    ("0 0 1 rg 60 480 300 50 re f BT /F1 12 Tf 72 500 Td (SHOWN) Tj ET", True),  # under text
    ("BT /F1 12 Tf 72 500 Td (SHOWN) Tj ET 0 0 1 rg 60 480 30 50 re f", True),  # part covered
    ("BT /F1 12 Tf 72 500 Td (SHOWN) Tj ET /G0 gs 0 g 60 480 300 50 re f", True),  # see-through
    ("q 0 0 10 10 re W n Q BT /F1 12 Tf 72 500 Td (SHOWN) Tj ET", True),  # clip restored
])
def test_pdf_text_off_the_page_clipped_away_or_covered_is_not_indexed(tmp_path, ops, shown):
    pytest.importorskip("pypdf")
    from test_convert_hostile import pdf_with
    path = pdf_with(tmp_path / "p.pdf", VISIBLE + ops)
    text = convert(path).text
    assert "Visible words" in text and "SECRET" not in text and ("SHOWN" in text) == shown, text


def test_pdf_form_drawn_off_the_page_is_not_indexed(tmp_path):
    pytest.importorskip("pypdf")
    from test_convert_hostile import pdf_with
    path = pdf_with(tmp_path / "p.pdf", VISIBLE + "q 1 0 0 1 0 -2000 cm /X1 Do Q",
                    form="BT /F1 12 Tf 72 600 Td (SECRET) Tj ET")
    text = convert(path).text
    assert "Visible words" in text and "SECRET" not in text, text
