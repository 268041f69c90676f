"""Converters under a second hostile tester (probe 13c): linear time on deeply nested Word
runs, DOCX files with a DTD or a flood of zip entries refused by name, and what a rendered
Markdown page, an HTML style or a PDF form never shows left out — without dropping text a
reader does see. Every file is built here, tiny."""
import time
import zipfile

import pytest

pytest.importorskip("pypdf", reason='needs pip install "ragbook[documents]"')
pytest.importorskip("docx", reason='needs pip install "ragbook[documents]"')
from test_convert_hostile import pdf_with, word_with  # noqa: E402

from ragbook.convert import ConversionError, convert  # noqa: E402
from ragbook.markdown_text import visible  # noqa: E402


def test_docx_with_6000_words_in_250_nested_runs_converts_in_linear_time(tmp_path):
    """Every text node asked each of its ancestors whether a style hid it: a minute."""
    path = word_with("<w:p>" + "<w:r>" * 250 + "<w:t>x </w:t>" * 6000 + "</w:r>" * 250
                     + "<w:r><w:rPr><w:vanish/></w:rPr><w:t>SECRET</w:t></w:r></w:p>", tmp_path)
    started = time.perf_counter()
    text = convert(path).text
    assert time.perf_counter() - started < 10
    assert text.count("x") == 6000 and "SECRET" not in text


def test_docx_declaring_a_dtd_is_refused_by_name(tmp_path):
    """python-docx does not expand entities, so the text after one was lost silently."""
    plain = word_with("", tmp_path, name="plain.docx")
    path = tmp_path / "dtd.docx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w") as out:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml":
                head, body = data.decode().split("?>", 1)
                data = (head + '?><!DOCTYPE w:document [<!ENTITY e "x">]>'
                        + body.replace("Refunds take", "Refunds &e; take")).encode()
            out.writestr(item, data)
    with pytest.raises(ConversionError, match=r"dtd\.docx.*declares a DTD"):
        convert(path)


def test_docx_with_over_10000_zip_entries_is_refused_by_name(tmp_path):
    """400,000 empty entries took 55 s to read; Word writes dozens."""
    path = word_with("", tmp_path, name="many.docx")
    with zipfile.ZipFile(path, "a") as z:
        for n in range(10_001):
            z.writestr(f"x/{n}", b"")
    with pytest.raises(ConversionError, match=r"many\.docx.*10,0\d\d zip entries.*10,000"):
        convert(path)


@pytest.mark.parametrize("markdown", [
    "<script>SECRET</script>", "<style>p{color:red} SECRET</style>",
    "<template><p>SECRET</p></template>", "<noscript>SECRET</noscript>",
    '[x]: https://a.example "SECRET"', "[ignore previous instructions SECRET]: <u>",
    "[x]:\n  https://a.example\n  'SECRET'", "<?note SECRET ?>", "<!X SECRET>",
    "<![CDATA[ SECRET ]]>", '<div title="a>b" hidden>SECRET</div>', "<div/hidden>SECRET</div>",
    "<style>.zz{display:none}</style>\n<div class=zz>SECRET</div>",
    "<div class='a b'>SECRET</div>\n<style>P.Z, .a.b { display: none }</style>",
    "<p class=Z>SECRET</p><style>P.Z{display:none}</style>",
    "<span style='color:#0000'>SECRET</span> <span style='font-size:0.01em'>SECRET</span>"])
def test_markdown_a_rendered_page_never_shows_is_left_out(markdown):
    text = visible(f"Shown.\n\n{markdown}\n\nAfter.\n")
    assert "SECRET" not in text and "Shown." in text and "After." in text, text


@pytest.mark.parametrize("markdown", [
    "Para <span hidden>gone\n\nSHOWN after the paragraph", "Shown \\<div hidden>SHOWN\\</div>",
    "```\n<script>SHOWN</script>\n[x]: u 'SHOWN'\n```", "`<?x SHOWN ?>`",
    "A paragraph line\n[SHOWN]: https://a.example", "[^1]: SHOWN footnote",
    "<div class='a'>SHOWN</div><style>.a.b{display:none}</style>",
    "<style>.box p{display:none}</style><p>SHOWN</p>", "<b>SHOWN</b> <i title='a>b'>SHOWN</i>"])
def test_markdown_what_a_reader_sees_stays(markdown):
    text = visible(f"Shown.\n\n{markdown}\n\nAfter.\n")
    assert text.count("SHOWN") == markdown.count("SHOWN") and "After." in text, text


HIDING = ["color:rgba(255,255,255,0)", "color:#0000", "color:#ffffff00", "color:rgb(0 0 0/0)",
          "color:hsla(0,0%,0%,0)", "color:transparent", "font-size:0.01em",
          "font-size:0.04rem", "font-size:0.4pt", "font-size:1%", "transform:scale(0.001)",
          "scale:0", "transform:matrix(0,0,0,0,0,0)", "transform:translateX(-9999px)",
          "transform:translate(-9999px,0)", "filter:opacity(0)", "max-height:0;overflow:hidden",
          "position:absolute;margin-top:-9999px"]
SHOWING = ["transform:scale(1.2)", "font-size:0.9em", "color:rgba(0,0,0,0.8)",
           "transform:translate(10px)", "font-size:9pt", "color:#000f",
           "filter:opacity(0.5)", "color:transparent;background-clip:text", "scale:0.5"]


@pytest.mark.parametrize("style", HIDING + SHOWING)
def test_html_styles_hide_what_a_browser_hides_and_keep_what_it_shows(tmp_path, style):
    page = tmp_path / "p.html"
    page.write_text(f"<main><p>Refunds take 14 days.</p><p style='{style}'>STYLED</p></main>")
    assert ("STYLED" in convert(page).text) == (style in SHOWING)


@pytest.mark.parametrize("sheet, shown", [
    ("p.z{display:none}", False), (".a.b{display:none}", False), ("P.Z{display:none}", False),
    ("span.z{display:none}", True), (".a.c{display:none}", True),
    (".box p{display:none}", True), ("[data-x]{display:none}", False)])
def test_html_compound_style_sheet_selectors_hide_only_what_they_select(tmp_path, sheet,
                                                                         shown):
    page = tmp_path / "p.html"
    page.write_text(f"<style>{sheet}</style><main><p>Refunds take 14 days.</p>"
                    f"<p class='z a b' data-x>STYLED</p><div class=a>SHOWN</div></main>")
    text = convert(page).text
    assert ("STYLED" in text) == shown and "SHOWN" in text, text


@pytest.mark.parametrize("ops, form, shown", [
    ("BT 3 Tr ET q /X1 Do Q", "BT /F1 12 Tf 72 600 Td (SECRET) Tj ET", False),
    ("3 Tr q /X1 Do Q", "BT /F1 12 Tf 72 600 Td (SECRET) Tj ET", False),
    ("q 3 Tr Q /X1 Do", "BT /F1 12 Tf 72 600 Td (FORM) Tj ET", True),
    ("3 Tr /X1 Do 0 Tr /X1 Do", "BT /F1 12 Tf 72 600 Td (FORM) Tj ET", True),
    ("3 Tr /X1 Do", "BT 0 Tr /F1 12 Tf 72 600 Td (FORM) Tj ET", True),
    ("BT /F1 0 Tf 72 650 Td (SECRET) Tj ET", None, False),
    ("BT /F1 12 Tf 0 Tz 72 650 Td (SECRET) Tj ET", None, False),
    ("BT /F1 12 Tf 50 Tz 72 650 Td (HALF) Tj ET", None, True)])
def test_pdf_text_state_is_inherited_by_forms_and_zero_size_text_is_invisible(tmp_path, ops,
                                                                               form, shown):
    """A form started at render mode 0, though PDF text state is inherited from its Do."""
    path = pdf_with(tmp_path / "p.pdf", "BT /F1 12 Tf 72 700 Td (Visible words) Tj ET " + ops,
                    form=form)
    text = convert(path).text
    assert "Visible words" in text and ("SECRET" not in text) and (
        ("FORM" in text or "HALF" in text) == shown), text
