"""Hostile probe, session 14 (issue 36): Word, Markdown and folder ingest. Each test is one
defect class the probe found: Word text a reader cannot see (white on the white page, a
half-point font, hidden by a table style, in a hidden drawing) was indexed; two zip entries
for one part were read silently; a block Word shows through ``mc:AlternateContent`` and
footnotes were dropped silently; a Markdown page's style sheets were read without
combinators, cascade or ``@media``; a folder nested 1,900 deep raised RecursionError; a form
feed made a Markdown title. Every input is built here, tiny."""
import os
import warnings
import zipfile

import pytest

docx = pytest.importorskip("docx", reason='needs pip install "ragbook[documents]"')
from docx.oxml import parse_xml  # noqa: E402
from docx.oxml.ns import nsdecls  # noqa: E402

from ragbook.convert import ConversionError, convert  # noqa: E402
from ragbook.ingest import read_documents  # noqa: E402
from ragbook.markdown_text import visible  # noqa: E402

_WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def word_with(body_xml: str, tmp_path, styles_xml: str = "", name="w.docx", page=None):
    """A DOCX holding one ordinary paragraph, then ``body_xml``; ``styles_xml`` adds styles,
    ``page`` sets the page colour."""
    word = docx.Document()
    word.add_paragraph("Refunds take 14 days.")
    wrapper = parse_xml(f"<w:body {nsdecls('w')} xmlns:v='urn:schemas-microsoft-com:vml' "
                        f"xmlns:wp='{_WP}' xmlns:a='{_A}' xmlns:wps='{_WPS}' "
                        f"xmlns:mc='{_MC}'>{body_xml}</w:body>")
    body = word.element.body
    for el in list(wrapper):
        body.insert(len(body) - 1, el)           # before the section properties
    for el in parse_xml(f"<w:styles {nsdecls('w')}>{styles_xml}</w:styles>"):
        word.styles.element.append(el)
    if page:
        word.element.insert(0, parse_xml(f"<w:background {nsdecls('w')} w:color='{page}'/>"))
    path = tmp_path / name
    word.save(path)
    return path


def run(text: str, rpr: str = "") -> str:
    return f"<w:r><w:rPr>{rpr}</w:rPr><w:t xml:space='preserve'>{text}</w:t></w:r>"


WHITE = "<w:color w:val='FFFFFF'/>"
THEME_WHITE = "<w:color w:val='FFFFFF' w:themeColor='background1'/>"
BLACK = "<w:color w:val='000000'/>"
SIZE = "<w:sz w:val='{}'/>"
ON_BLACK = "<w:shd w:val='clear' w:fill='000000'/>"
HIGHLIGHT = "<w:highlight w:val='black'/>"
AUTO = "<w:color w:val='auto'/>"
STYLE = ("<w:style w:type='{kind}' w:styleId='{id}'><w:name w:val='{id}'/>{body}</w:style>")


@pytest.mark.parametrize("body, styles", [
    (f"<w:p>{run('SECRET-WHITE', WHITE)}</w:p>", ""),
    (f"<w:p>{run('SECRET-THEME', THEME_WHITE)}</w:p>", ""),
    (f"<w:p>{run('SECRET-HALF-POINT', SIZE.format(1))}</w:p>", ""),
    (f"<w:p>{run('SECRET-ZERO-SIZE', SIZE.format(0))}</w:p>", ""),
    (f"<w:p><w:pPr><w:pStyle w:val='Pale'/></w:pPr>{run('SECRET-STYLE-WHITE')}</w:p>",
     STYLE.format(kind="paragraph", id="Pale", body=f"<w:rPr>{WHITE}</w:rPr>")),
    ("<w:tbl><w:tblPr><w:tblStyle w:val='Gone'/></w:tblPr><w:tblGrid><w:gridCol/></w:tblGrid>"
     f"<w:tr><w:tc><w:p>{run('SECRET-TABLE-STYLE')}</w:p></w:tc></w:tr></w:tbl>",
     STYLE.format(kind="table", id="Gone", body="<w:rPr><w:vanish/></w:rPr>")),
    (f"<w:p>{run('SECRET-BLACK-ON-BLACK', BLACK)}</w:p>", "PAGE"),
])
def test_docx_text_too_small_or_the_colour_of_its_backdrop_is_not_indexed(tmp_path, body,
                                                                          styles):
    page = "000000" if styles == "PAGE" else None
    text = convert(word_with(body, tmp_path, "" if page else styles, page=page)).text
    assert "SECRET" not in text, text
    assert "Refunds take 14 days." in text


def test_docx_white_text_on_a_backdrop_it_shows_against_is_kept(tmp_path):
    shaded_table = STYLE.format(kind="table", id="Dark", body=(
        "<w:tblStylePr w:type='firstRow'><w:tcPr><w:shd w:val='clear' w:fill='1F3864'/>"
        "</w:tcPr></w:tblStylePr>"))
    body = (
        f"<w:p>{run('on-a-black-run.', WHITE + ON_BLACK)}"
        f"{run(' highlighted.', WHITE + HIGHLIGHT)}"
        f"{run(' outlined.', WHITE + '<w:outline/>')}"
        f"{run(' one-point.', SIZE.format(2))}"
        f"{run(' automatic.', AUTO)}"
        "</w:p>"
        "<w:p><w:pPr><w:shd w:val='clear' w:fill='003366'/></w:pPr>"
        f"{run('on-a-dark-paragraph.', WHITE)}"
        "</w:p><w:tbl><w:tblGrid><w:gridCol/></w:tblGrid><w:tr><w:tc><w:tcPr>"
        f"<w:shd w:val='clear' w:fill='222222'/></w:tcPr><w:p>{run('in-a-dark-cell.', WHITE)}"
        "</w:p></w:tc></w:tr></w:tbl><w:tbl><w:tblPr><w:tblStyle w:val='Dark'/></w:tblPr>"
        f"<w:tblGrid><w:gridCol/></w:tblGrid><w:tr><w:tc><w:p>{run('in-a-styled-header.', WHITE)}"
        "</w:p></w:tc></w:tr></w:tbl>"
        f"<w:p><w:r><w:pict><v:shape><v:textbox><w:txbxContent><w:p>{run('in-a-text-box.', WHITE)}"
        "</w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r></w:p>")
    text = convert(word_with(body, tmp_path, shaded_table)).text
    for words in ("on-a-black-run. highlighted. outlined. one-point. automatic.",
                  "on-a-dark-paragraph.", "in-a-dark-cell.", "in-a-styled-header.",
                  "in-a-text-box."):
        assert words in text, (words, text)
    dark_page = word_with(f"<w:p>{run('white-on-a-dark-page.', WHITE)}</w:p>", tmp_path,
                          name="dark.docx", page="1A1A1A")
    assert "white-on-a-dark-page." in convert(dark_page).text


def drawing(hidden: str, words: str) -> str:
    return (f"<w:p><w:r><w:drawing><wp:anchor><wp:docPr id='5' name='Box'{hidden}/><a:graphic>"
            f"<a:graphicData uri='{_WPS}'><wps:wsp><wps:txbx><w:txbxContent><w:p>{run(words)}"
            f"</w:p></w:txbxContent></wps:txbx></wps:wsp></a:graphicData></a:graphic>"
            f"</wp:anchor></w:drawing></w:r></w:p>")


def test_docx_text_boxes_of_hidden_drawings_are_not_indexed(tmp_path):
    body = (drawing(" hidden='1'", "SECRET-HIDDEN-SHAPE") + drawing("", "shown-shape-words")
            + "<w:p><w:r><w:pict><v:shape style='position:absolute;visibility:hidden'>"
              f"<v:textbox><w:txbxContent><w:p>{run('SECRET-VML')}</w:p></w:txbxContent>"
              "</v:textbox></v:shape></w:pict></w:r></w:p>")
    text = convert(word_with(body, tmp_path)).text
    assert "SECRET" not in text, text
    assert "shown-shape-words" in text


def test_docx_block_in_alternate_content_is_read_and_footnotes_are_named(tmp_path):
    body = (f"<mc:AlternateContent><mc:Choice Requires='w'><w:p>{run('chosen-block-words')}"
            f"</w:p></mc:Choice><mc:Fallback><w:p>{run('SECRET-FALLBACK')}</w:p></mc:Fallback>"
            f"</mc:AlternateContent><w:p>{run('See note')}<w:r><w:footnoteReference w:id='1'/>"
            "</w:r></w:p>")
    with pytest.warns(UserWarning, match=r"w\.docx.* 1 footnote\(s\) or endnote\(s\)"):
        text = convert(word_with(body, tmp_path)).text
    assert "chosen-block-words" in text and "SECRET" not in text, text


@pytest.mark.parametrize("second", ["word/document.xml", "WORD/Document.xml"])
def test_a_docx_with_two_entries_for_one_part_is_refused_by_name(tmp_path, second):
    plain = word_with("", tmp_path, name="plain.docx")
    path = tmp_path / "twice.docx"
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, "w") as out:
        for item in src.infolist():
            out.writestr(item, src.read(item.filename))
        planted = src.read("word/document.xml").replace(b"Refunds take", b"SECRET take")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # zipfile: "Duplicate name"
            out.writestr(second, planted)
    with pytest.raises(ConversionError, match=r"twice\.docx.*two zip entries for one part"):
        convert(path)


@pytest.mark.parametrize("markdown", [
    "<style>div > p.x {display:none}</style>\n<div><p class='x'>SECRET</p></div>\n",
    "<style>section .y {visibility:hidden}</style>\n<section><p class='y'>SECRET</p></section>\n",
    "<style>[data-x] {display:none}</style>\n<div data-x>SECRET</div>\n",
    "<style>p:not(.keep) {display:none}</style>\n<p>SECRET</p>\n",
    "<style>.w {color:#fff}</style>\n<div class='w'>SECRET</div>\n",
    "<span style='color:white'>SECRET</span>\n",
])
def test_markdown_style_sheets_hide_through_the_html_cascade(markdown):
    assert "SECRET" not in visible("Refunds take 14 days.\n\n" + markdown)


@pytest.mark.parametrize("markdown", [
    "<style>.x {display:none} .x {display:block}</style>\n<div class='x'>kept</div>\n",
    "<style>@media print { .x {display:none} }</style>\n<div class='x'>kept</div>\n",
    "<style>.x {display:none}</style>\n`<div class='x'>kept</div>`\n",
])
def test_markdown_style_sheets_keep_what_a_browser_shows(markdown):
    assert "kept" in visible("Refunds take 14 days.\n\n" + markdown)


def test_a_folder_nested_deeper_than_the_python_stack_is_read(tmp_path):
    (tmp_path / "top.md").write_text("Refunds take 14 days.\n")
    here = os.open(tmp_path, os.O_RDONLY)
    try:                             # 1,900 levels: past the 1,000-frame recursion limit
        for _ in range(1900):
            os.mkdir("d", dir_fd=here)
            inner = os.open("d", os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = inner
        with open(os.open("deep.md", os.O_WRONLY | os.O_CREAT, dir_fd=here), "w") as f:
            f.write("Deep words.\n")
    finally:
        os.close(here)
    try:
        docs = read_documents(tmp_path)
        assert [d.id.count("/") for d in docs] == [1900, 0]
    finally:
        _unnest(tmp_path / "d")


def _unnest(top):
    """Remove a chain of nested ``d`` folders one level at a time (pytest's own clean-up
    recurses, and 1,900 levels overflow the stack): lift the child up, drop the parent."""
    while top.is_dir():
        child, lifted = top / "d", top.with_name("lifted")
        if child.is_dir():
            child.rename(lifted)
        for f in top.iterdir():
            f.unlink()
        top.rmdir()
        if lifted.is_dir():
            lifted.rename(top)


@pytest.mark.parametrize("breaker", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"])
def test_a_markdown_title_is_a_heading_on_a_line_of_its_own(tmp_path, breaker):
    (tmp_path / "refunds.md").write_text(f"Refunds take 14 days.{breaker}# Spoofed Title\n")
    assert read_documents(tmp_path)[0].title == "refunds"
