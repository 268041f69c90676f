"""PDF, HTML and DOCX in (``ragbook.convert``, through ``read_documents`` and ``ragbook index``).

Every file is made here by the libraries the converters read with (pypdf writes PDF pages
with a text layer, python-docx writes headings), so each test knows what the file holds and
on which page. Nothing is mocked: the converters read real bytes, and the CLI test embeds
with the real encoder.
"""
import io
import json
import sys
import warnings

import pytest

from ragbook.chunking import chunk_documents
from ragbook.contextual import section_path
from ragbook.convert import ConversionError, convert, pages_of
from ragbook.ingest import read_documents
from ragbook.types import Hit

pypdf = pytest.importorskip("pypdf", reason='needs the documents extra: pip install '
                                           '"ragbook[documents]"')
docx = pytest.importorskip("docx", reason="needs python-docx (the documents extra)")
pytest.importorskip("bs4", reason="needs beautifulsoup4 (the documents extra)")

from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject  # noqa: E402


def name(s):
    return NameObject(s)


def pdf_bytes(pages, title=None, drawing=False, password=None):
    """A PDF whose page i shows the lines pages[i] in Helvetica (an empty list: a page with
    no text; with ``drawing`` it holds a filled rectangle, as a scanned page holds an image)."""
    writer = pypdf.PdfWriter()
    font = DictionaryObject({name("/Type"): name("/Font"), name("/Subtype"): name("/Type1"),
                             name("/BaseFont"): name("/Helvetica")})
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        ops = ["0.5 g 72 72 468 648 re f"] if drawing else []
        if lines:
            ops += ["BT /F1 11 Tf 14 TL 72 720 Td"]
            ops += ["(" + line.replace("(", r"\(").replace(")", r"\)") + ") Tj T*"
                    for line in lines]
            ops += ["ET"]
            page[name("/Resources")] = DictionaryObject(
                {name("/Font"): DictionaryObject({name("/F1"): font})})
        if ops:
            stream = DecodedStreamObject()
            stream.set_data("\n".join(ops).encode("latin-1"))
            page.replace_contents(stream)
    if title:
        writer.add_metadata({"/Title": title})
    if password is not None:
        writer.encrypt(user_password=password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


HANDBOOK = [
    ["Leave policy", "Every employee gets 25 days of paid leave per year.",
     "Leave requests go to your manager two weeks ahead."],
    [],                                                             # a page without text
    ["Expenses", "Receipts must be uploaded within 30 days of purchase.",
     "The travel desk books trains for trips under 600 km."],
    ["Security", "Laptops lock after five minutes without input."],
]


def span(metadata, start, end):
    """A hit over ``[start, end)`` of a document with this metadata."""
    return Hit("span", 1.0, 1, metadata=metadata, start=start, end=end)


def page_of_phrase(doc, phrase):
    offset = doc.text.index(phrase)
    return pages_of(span(doc.metadata, offset, offset + len(phrase)))


def test_pdf_pages_offsets_and_page_map(tmp_path):
    path = tmp_path / "handbook.pdf"
    path.write_bytes(pdf_bytes(HANDBOOK, title="Staff handbook"))
    with pytest.warns(UserWarning, match=r"1 of 4 pages have no text layer \(pages 2\).*OCR"):
        doc = convert(path)
    assert (doc.id, doc.title) == ("handbook", "Staff handbook")
    assert doc.metadata["format"] == "pdf" and doc.metadata["pages"] == 4
    assert doc.text.endswith("30 days of purchase.\nThe travel desk books trains for trips "
                             "under 600 km.\n\nSecurity\nLaptops lock after five minutes "
                             "without input.\n")
    expenses, security = doc.text.index("Expenses"), doc.text.index("Security")
    assert doc.metadata["page_starts"] == [0, expenses, expenses, security]
    assert page_of_phrase(doc, "25 days of paid leave") == (1,)
    assert page_of_phrase(doc, "Receipts must be uploaded") == (3,)
    assert page_of_phrase(doc, "Laptops lock") == (4,)
    # chunks hold exact offsets into the extracted text, and each says the pages it covers
    chunks = chunk_documents([doc], size=90, overlap=20, length="chars")
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)
    for c in chunks:
        pages = pages_of(c)
        assert pages and 2 not in pages, (c.text, pages)  # page 2 holds nothing to cover
        for n, lines in enumerate(HANDBOOK, 1):
            if any(line in c.text for line in lines):
                assert n in pages, (c.text, pages)
    crossing = [c for c in chunks if len(pages_of(c)) > 1]
    assert crossing and all(pages_of(c) == (3, 4) or pages_of(c) == (1, 3) for c in crossing)


def test_pdf_with_an_open_password_is_read_one_with_a_user_password_is_refused(tmp_path):
    (tmp_path / "open.pdf").write_bytes(pdf_bytes(HANDBOOK[:1], password=""))
    assert "25 days" in convert(tmp_path / "open.pdf").text
    (tmp_path / "secret.pdf").write_bytes(pdf_bytes(HANDBOOK[:1], password="s3cret"))
    with pytest.raises(ConversionError, match=r"secret\.pdf' is encrypted and needs a password"
                                              r".*qpdf --decrypt"):
        convert(tmp_path / "secret.pdf")


def test_image_only_pdf_says_run_ocr_first(tmp_path):
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf_bytes([[], []], drawing=True))
    with pytest.raises(ConversionError, match=r"no text layer on any of its 2 page\(s\).*run "
                                              r"OCR first \(e\.g\. ocrmypdf"):
        convert(path)


def test_corrupt_and_mislabelled_files_are_named(tmp_path):
    whole = pdf_bytes(HANDBOOK[:1])
    cases = {"garbage.pdf": b"%PDF-1.7\nthis is not a pdf at all\n" * 3,
             "text.pdf": b"just some text saved with the wrong suffix\n",
             "half.pdf": whole[: len(whole) // 3],
             "notzip.docx": b"PK\x03\x04 not really a zip",
             "text.docx": b"plain text, not a Word file"}
    for file, data in cases.items():
        (tmp_path / file).write_bytes(data)
        with pytest.raises(ConversionError, match=rf"{file}' is not a readable "
                                                  rf"(PDF|DOCX) file \(.+\); open it"):
            convert(tmp_path / file)
    (tmp_path / "binary.html").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(ConversionError, match="NUL bytes: it is binary data, not an HTML"):
        convert(tmp_path / "binary.html")


def test_a_file_over_max_bytes_is_refused_before_it_is_opened(tmp_path):
    path = tmp_path / "big.pdf"
    path.write_bytes(pdf_bytes(HANDBOOK[:1]))
    size = path.stat().st_size
    with pytest.raises(ConversionError, match=rf"is {size:,} bytes, over the limit "
                                              rf"max_bytes=100; split the file"):
        convert(path, max_bytes=100)
    assert convert(path, max_bytes=size).text.startswith("Leave policy")
    with pytest.raises(ValueError, match="max_bytes must be a whole number"):
        convert(path, max_bytes=0)


PAGE = """<!doctype html><html><head><title>Acme Help | Billing</title>
<style>p { color: red }</style><script>var tracking = "do not index me";</script></head>
<body><header><a href="/">Acme</a> Sign in</header>
<nav><ul><li>Home</li><li>Pricing</li><li>Careers</li></ul></nav>
<main><article><header><h1>Billing</h1></header>
<p>Invoices are sent on the first of each month.</p><!-- editor's note: check dates -->
<h2>Refunds</h2><p>Refunds take <b>14</b> days.<br>Contact <a href="/s">support</a>.</p>
<ul><li>Card</li><li>Bank transfer<ul><li>SEPA</li></ul></li></ul>
<h3>Exceptions</h3><table><tr><th>Plan</th><th>Days</th></tr><tr><td>Enterprise</td>
<td>30</td></tr></table>
<pre>acme refund --invoice 42
  --reason duplicate</pre>
<div hidden>internal only</div><div style="display: none">also hidden</div>
</article></main><aside>Related: Pricing FAQ</aside>
<footer>&copy; Acme 2026 &middot; Privacy &middot; Careers</footer></body></html>"""


def test_html_main_content_with_headings_and_no_boilerplate(tmp_path):
    path = tmp_path / "billing.html"
    path.write_text(PAGE, encoding="utf-8")
    doc = convert(path)
    assert doc.title == "Acme Help | Billing" and doc.metadata == {"format": "html"}
    assert doc.text == (
        "# Billing\n\nInvoices are sent on the first of each month.\n\n## Refunds\n\n"
        "Refunds take 14 days. Contact support.\n\n- Card\n\n- Bank transfer\n\n- SEPA\n\n"
        "### Exceptions\n\nPlan | Days\n\nEnterprise | 30\n\n"
        "```\nacme refund --invoice 42\n  --reason duplicate\n```\n")
    for boilerplate in ("Sign in", "Pricing", "Careers", "tracking", "editor", "internal",
                        "hidden", "Privacy", "Related"):
        assert boilerplate not in doc.text
    assert section_path(doc, doc.text.index("Enterprise | 30")) == ["Billing", "Refunds",
                                                                     "Exceptions"]
    # without <main> or <article>, the body is read, still without the page's boilerplate
    bare = tmp_path / "bare.html"
    bare.write_text(PAGE.replace("<main><article>", "<div>").replace("</article></main>",
                                                                     "</div>"))
    assert convert(bare).text == doc.text


def test_html_encoding_title_fallback_and_empty_page(tmp_path):
    latin = tmp_path / "cafe.htm"
    latin.write_bytes('<meta charset="iso-8859-1"><body><h2>Café</h2><p>Crème brûlée.</p>'
                      '</body>'.encode("latin-1"))
    doc = convert(latin)
    assert (doc.title, doc.text) == ("Café", "## Café\n\nCrème brûlée.\n")
    empty = tmp_path / "app.html"
    empty.write_text("<html><head><title>App</title><script>render()</script></head><body>"
                     "<nav>Home</nav><div id='root'></div></body></html>")
    with pytest.raises(ConversionError, match="app.html' holds no text once navigation"):
        convert(empty)


def test_docx_paragraphs_headings_lists_tables(tmp_path):
    word = docx.Document()
    word.add_paragraph("Employee handbook", style="Title")
    word.add_heading("Leave", 1)
    word.add_paragraph("You get 25 days of paid leave.")
    word.add_heading("Sick leave", 2)
    word.add_paragraph("Call your manager before  9 am.")
    word.add_paragraph("Bring a note after three days", style="List Bullet")
    table = word.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Plan", (0, 1): "Days", (1, 0): "Pro", (1, 1): "30"}.items():
        table.cell(r, c).text = text
    word.add_paragraph("")
    word.save(tmp_path / "handbook.docx")
    doc = convert(tmp_path / "handbook.docx")
    assert (doc.title, doc.metadata) == ("Employee handbook", {"format": "docx"})
    assert doc.text == ("# Employee handbook\n\n## Leave\n\nYou get 25 days of paid leave.\n\n"
                        "### Sick leave\n\nCall your manager before 9 am.\n\n"
                        "- Bring a note after three days\n\nPlan | Days\n\nPro | 30\n")
    assert section_path(doc, doc.text.index("Call")) == ["Employee handbook", "Leave",
                                                         "Sick leave"]
    blank = docx.Document()
    blank.add_paragraph("   ")
    blank.save(tmp_path / "blank.docx")
    with pytest.raises(ConversionError, match="blank.docx' holds no text"):
        convert(tmp_path / "blank.docx")


def test_a_missing_library_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "a.pdf").write_bytes(pdf_bytes(HANDBOOK[:1]))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # as if pypdf were not installed
    with pytest.raises(ImportError, match=r"needs the package 'pypdf'.*pip install "
                                          r"\"ragbook\[documents\]\""):
        convert(tmp_path / "a.pdf")


def mixed_folder(root):
    """A docs folder as it comes: good PDF/HTML/DOCX/Markdown, and three files that fail."""
    (root / "hr").mkdir(parents=True)
    (root / "hr" / "handbook.pdf").write_bytes(pdf_bytes(HANDBOOK, title="Staff handbook"))
    (root / "billing.html").write_text(PAGE, encoding="utf-8")
    word = docx.Document()
    word.add_heading("Office hours", 1)
    word.add_paragraph("The office opens at 8 am on weekdays.")
    word.save(root / "office.docx")
    (root / "faq.md").write_text("# FAQ\n\nThe wifi password is on the fridge.\n")
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\n%%EOF garbage")
    (root / "scan.pdf").write_bytes(pdf_bytes([[]], drawing=True))
    (root / "locked.pdf").write_bytes(pdf_bytes(HANDBOOK[:1], password="pw"))
    return root


def test_read_documents_skips_bad_files_and_reads_the_rest(tmp_path):
    root = mixed_folder(tmp_path / "docs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = read_documents(root)
    assert [d.id for d in docs] == ["billing", "faq", "hr/handbook", "office"]
    messages = [str(w.message) for w in caught]
    skipped = [m for m in messages if m.startswith("skipped: ")]
    assert len(skipped) == 3
    assert any("broken.pdf' is not a readable PDF" in m for m in skipped)
    assert any("scan.pdf' has no text layer" in m and "run OCR first" in m for m in skipped)
    assert any("locked.pdf' is encrypted" in m for m in skipped)
    assert any(m.startswith("skipped 3 of 7 files under ") and "indexed the other 4" in m
               for m in messages), messages
    # a folder where nothing can be read is an error, not an empty index
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    (only_bad / "broken.pdf").write_bytes(b"not a pdf")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match=r"none of the 1 file\(s\) under .* could be read"):
            read_documents(only_bad)
    # one file given on its own: its error is raised, not skipped
    with pytest.raises(ConversionError, match="scan.pdf' has no text layer"):
        read_documents(root / "scan.pdf")
    with pytest.raises(ConversionError, match="over the limit max_bytes=10"):
        read_documents(root / "hr" / "handbook.pdf", max_bytes=10)


@pytest.mark.slow
def test_ragbook_index_on_a_mixed_folder_answers_with_the_page(tmp_path, capsys):
    """The whole path a user takes: ``ragbook index`` on a folder with a bad file in it, then
    ``ragbook ask``: the answer comes from the PDF, and its source is traced to page 3."""
    from ragbook.cli import main

    root = mixed_folder(tmp_path / "docs")
    assert main(["index", str(root), "--out", str(tmp_path / "index"), "--size", "24",
                 "--overlap", "4"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("indexed 4 documents as ")
    assert err.count("ragbook: warning: skipped: ") == 3 and "skipped 3 of 7 files" in err
    assert main(["ask", str(tmp_path / "index"), "how many days do I have to upload receipts "
                 "for my expenses?", "--json", "--min-confidence", "0.3"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answer"] == "Receipts must be uploaded within 30 days of purchase.", result
    source = result["sources"][0]
    assert source["doc_id"] == "hr/handbook"
    # the source chunk crosses from page 1 to page 3 (page 2 has no text); the answer itself
    # is traced to its one page through the same page map
    doc_id, start, end = result["answer_span"]
    assert doc_id == "hr/handbook" and pages_of(span(source["metadata"], start, end)) == (3,)
    assert 3 in pages_of(span(source["metadata"], source["start"], source["end"]))


def test_the_capstone_check_accepts_a_folder_of_pdf_and_html(tmp_path, capsys):
    """Chapter 12's first check reads the learner's folder with ``read_documents``: gold files
    may be PDFs or HTML pages, and a quoted passage is looked up in the extracted text."""
    from ragbook.grading import check

    root = mixed_folder(tmp_path / "docs")
    golds = [("hr/handbook.pdf", "Receipts must be uploaded within 30 days of purchase."),
             ("billing.html", "Refunds take 14 days."), ("office.docx", "opens at 8 am"),
             ("faq.md", "The wifi password is on the fridge.")]
    questions = [{"question": f"question {n} about {gold}", "gold": gold, "passage": passage}
                 for n, (gold, passage) in enumerate(golds * 3)][:10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the folder's three bad files are skipped, as above
        assert check("my_corpus_and_questions", lambda: (root, questions))
        questions[0] = {**questions[0], "passage": "Receipts are never needed."}
        assert not check("my_corpus_and_questions", lambda: (root, questions))
    assert "the passage is not in hr/handbook.pdf" in capsys.readouterr().out
