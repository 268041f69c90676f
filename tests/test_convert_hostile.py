"""Converters bounded and honest (issue 36, item 7): deep nesting, expansion and output size
are capped with a warning or a ``ConversionError`` naming the file (never a traceback from
``ragbook index``); hidden content is left out; Word's tracked insertions, content controls,
fields and text boxes are read. Every file is built here, tiny."""
import io

import pytest

pypdf = pytest.importorskip("pypdf", reason='needs pip install "ragbook[documents]"')
docx = pytest.importorskip("docx", reason='needs pip install "ragbook[documents]"')
from docx.oxml import parse_xml  # noqa: E402
from docx.oxml.ns import nsdecls  # noqa: E402
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject  # noqa: E402

from ragbook import convert as conv  # noqa: E402
from ragbook.convert import ConversionError, convert  # noqa: E402
from ragbook.ingest import read_documents  # noqa: E402


def test_html_nested_2000_deep_converts_with_a_warning(tmp_path):
    page = tmp_path / "deep.html"
    page.write_text("<html><body><p>Refunds take 14 days.</p>" + "<div><span>" * 1000
                    + "deep refund note" + "</span></div>" * 1000 + "</body></html>")
    with pytest.warns(UserWarning, match=r"deep.html.*nests elements over 200 deep"):
        doc = convert(page)
        docs = read_documents(tmp_path)            # what `ragbook index` reads: no traceback
    assert "Refunds take 14 days." in doc.text and "deep refund note" in doc.text
    assert [d.id for d in docs] == ["deep"]


def test_hidden_html_content_is_not_indexed(tmp_path):
    page = tmp_path / "hidden.html"
    page.write_text(
        "<main><p>Refunds take 14 days.</p>"
        "<p style='visibility:hidden'>SECRET-VISIBILITY</p>"
        "<p style='color:red; display: none'>SECRET-DISPLAY</p>"
        "<div class='note hidden'>SECRET-CLASS</div><div class='d-none'>SECRET-DNONE</div>"
        "<p hidden>SECRET-ATTR</p><span style='font-size:0'>SECRET-FONT</span>"
        "<span style='opacity: 0;'>SECRET-OPACITY</span>"
        "<p><![CDATA[SECRET-CDATA]]></p><p style='opacity:0.9'>Shown too.</p></main>")
    doc = convert(page)
    assert "SECRET" not in doc.text, doc.text
    assert "Refunds take 14 days." in doc.text and "Shown too." in doc.text


def word_with(body_xml: str, tmp_path, name="w.docx", keep_paragraph=True):
    """A DOCX whose body holds ``body_xml`` (WordprocessingML, ``w:`` prefix) after one
    ordinary paragraph."""
    word = docx.Document()
    if keep_paragraph:
        word.add_paragraph("Refunds take 14 days.")
    body = word.element.body
    wrapper = parse_xml(f"<w:body {nsdecls('w')} xmlns:v='urn:schemas-microsoft-com:vml'>"
                        f"{body_xml}</w:body>")
    for el in list(wrapper):
        body.insert(len(body) - 1, el)           # before the section properties
    path = tmp_path / name
    word.save(path)
    return path


def test_a_docx_table_without_tblpr_converts(tmp_path):
    path = word_with("<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid><w:tr>"
                     "<w:tc><w:p><w:r><w:t>Plan</w:t></w:r></w:p></w:tc>"
                     "<w:tc><w:p><w:r><w:t>Enterprise</w:t></w:r></w:p></w:tc>"
                     "</w:tr></w:tbl>", tmp_path)
    assert "Plan | Enterprise" in convert(path).text


def test_docx_hidden_runs_out_insertions_controls_fields_text_boxes_in(tmp_path):
    path = word_with(
        "<w:p><w:r><w:t xml:space='preserve'>Shown </w:t></w:r>"
        "<w:r><w:rPr><w:vanish/></w:rPr><w:t>SECRET-HIDDEN</w:t></w:r>"
        "<w:del><w:r><w:delText>SECRET-DELETED</w:delText></w:r></w:del>"
        "<w:ins><w:r><w:t xml:space='preserve'> inserted-words</w:t></w:r></w:ins></w:p>"
        "<w:sdt><w:sdtContent><w:p><w:r><w:t>control-block-words</w:t></w:r></w:p>"
        "</w:sdtContent></w:sdt>"
        "<w:p><w:sdt><w:sdtContent><w:r><w:t>control-inline-words</w:t></w:r></w:sdtContent>"
        "</w:sdt><w:fldSimple w:instr='DOCPROPERTY Plan'><w:r><w:t xml:space='preserve'> "
        "field-result-words</w:t></w:r></w:fldSimple></w:p>"
        "<w:p><w:r><w:pict><v:shape><v:textbox><w:txbxContent><w:p><w:r>"
        "<w:t>text-box-words</w:t></w:r></w:p></w:txbxContent></v:textbox></v:shape></w:pict>"
        "</w:r></w:p>", tmp_path)
    text = convert(path).text
    assert "SECRET" not in text, text
    for words in ("Shown inserted-words", "control-block-words", "control-inline-words",
                  "field-result-words", "text-box-words"):
        assert words in text, (words, text)


def test_a_docx_that_unzips_past_the_limit_is_refused_by_name(tmp_path, monkeypatch):
    path = word_with("", tmp_path, "bomb.docx")
    monkeypatch.setattr(conv, "MAX_UNZIPPED", 1000)
    with pytest.raises(ConversionError, match=r"bomb.docx' unzips to .* over MAX_UNZIPPED"):
        convert(path)
    (tmp_path / "ok.md").write_text("Refunds take 14 days.\n")
    with pytest.warns(UserWarning, match="bomb.docx"):   # in a folder: skipped, named
        assert [d.id for d in read_documents(tmp_path)] == ["ok"]


def compressed_pdf(repeats: int, ops: str | None = None) -> bytes:
    """A one-page PDF whose compressed content stream shows one sentence ``repeats`` times:
    a few KB of file, ``repeats`` x 40 characters of text (or draws ``ops``)."""
    writer = pypdf.PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                             NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    stream = DecodedStreamObject()
    stream.set_data((ops or "BT /F1 11 Tf 14 TL 72 720 Td "
                     + "(Refunds take fourteen days in all plans.) Tj T* " * repeats
                     + "ET").encode("latin-1"))
    page.replace_contents(stream)
    page.compress_content_streams()
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_text_past_max_chars_is_cut_with_a_warning(tmp_path):
    path = tmp_path / "expands.pdf"
    path.write_bytes(compressed_pdf(5000))
    assert path.stat().st_size < 5000                   # ~200,000 characters of text
    with pytest.warns(UserWarning, match=r"expands.pdf' converts to .* over max_chars=20,000"):
        doc = convert(path, max_chars=20_000)
    assert len(doc.text) <= 20_000 and doc.text.startswith("Refunds take")
    assert doc.metadata["page_starts"] == [0]


def test_invisible_pdf_text_is_not_indexed(tmp_path):
    path = tmp_path / "invisible.pdf"
    path.write_bytes(compressed_pdf(0, "BT /F1 11 Tf 14 TL 72 720 Td (Refunds take 14 days.) Tj "
                                       "T* 3 Tr (SECRET-INVISIBLE) Tj T* 0 Tr (Shown after.) Tj "
                                       "ET"))
    text = convert(path).text
    assert "SECRET" not in text, text
    assert "Refunds take 14 days." in text and "Shown after." in text
