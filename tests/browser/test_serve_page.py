"""``ragbook serve``'s page as a person uses it, in Chromium: type a question, press Enter,
see the answer arrive from the stream, follow the citation with the keyboard and find the
highlighted words equal to the cited span of the document — on a sample of help-centre dev
questions, each checked against ``Pipeline.ask`` in this process — then ask why the sources
scored what they did."""
import io
from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api", reason="playwright is not installed").expect
pytest.importorskip("starlette")

from ragbook.serving.app import RagServer, pipeline_for  # noqa: E402

pytestmark = [pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def served(article_index):
    names = tuple(sorted(p.stem for p in (ROOT / "data" / "helpcentre" / "articles")
                         .glob("*.md")))
    pipeline = pipeline_for(article_index(names))
    with RagServer(pipeline) as server:
        yield server, pipeline


@pytest.fixture
def page(browser, served):
    context = browser.new_context()
    context.set_default_timeout(60_000)
    errors = []
    tab = context.new_page()
    tab.on("pageerror", lambda err: errors.append(str(err)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield tab
    context.close()
    assert not errors, errors          # no script error, no CSP violation


def test_the_page_streams_the_answer_and_highlights_the_cited_span(page, served, hc):
    server, pipeline = served
    answered = escalated = 0
    page.goto(server.base_url)
    box = page.get_by_label("Your question")
    for q in hc.split("dev")[:8]:
        want = pipeline.ask(q.text)
        box.fill(q.text)
        box.press("Enter")                                     # the keyboard submits
        status = page.locator("#status")
        page.wait_for_function("() => /^(Answered|Escalated|Error)/.test("
                               "document.getElementById('status').textContent)")
        shown = status.text_content()
        if want.escalated:
            escalated += 1
            assert shown.startswith(f"Escalated ({want.reason}): "), shown
            assert page.locator("#answer").text_content() == ""
            continue
        answered += 1
        assert shown.startswith("Answered"), shown
        sentences = page.locator("#answer .sentence").all_text_contents()
        assert "".join(sentences) == want.answer.text
        doc, start, end = want.answer_span
        cited = hc.doc(doc).text[start:end]
        link = page.get_by_role("link", name="show the cited words").first
        link.focus()
        link.press("Enter")                                    # follow it with the keyboard
        mark = page.locator("mark:focus")
        expect(mark).to_have_count(1)
        assert mark.text_content() == cited == want.answer.text
        # and in its whole document: the same words marked, at the document's own offsets
        page.get_by_role("button", name="Show in the document").first.click()
        view = page.get_by_label(f"the document {doc}")
        expect(view.locator("mark:focus")).to_have_text(cited)
        shown = view.text_content()
        assert shown.strip() == hc.doc(doc).text.strip()
        page.locator("#question").focus()
    assert answered >= 3 and escalated >= 1
    # an answered question: why did its first source score what it did?
    box.fill("how long is the refund window for annual contracts?")
    box.press("Enter")
    page.get_by_role("button", name="Why these sources?").click()
    first = page.locator("#why li").first
    expect(first).to_contain_text("Why source [1]")
    assert first.locator("pre").first.text_content().startswith("rrf ")


def handbook_pdf() -> bytes:
    """A four-page PDF with a text layer (page 2 blank), written by pypdf."""
    pypdf = pytest.importorskip("pypdf", reason="needs the documents extra")
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    pages = [["Leave policy", "Every employee gets 25 days of paid leave per year."], [],
             ["Expenses", "Receipts must be uploaded within 30 days of purchase."],
             ["Security", "Laptops lock after five minutes without input."]]
    writer, name = pypdf.PdfWriter(), NameObject
    font = DictionaryObject({name("/Type"): name("/Font"), name("/Subtype"): name("/Type1"),
                             name("/BaseFont"): name("/Helvetica")})
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        if lines:
            ops = ["BT /F1 11 Tf 14 TL 72 720 Td", *(f"({line}) Tj T*" for line in lines), "ET"]
            page[name("/Resources")] = DictionaryObject(
                {name("/Font"): DictionaryObject({name("/F1"): font})})
            stream = DecodedStreamObject()
            stream.set_data("\n".join(ops).encode("latin-1"))
            page.replace_contents(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_pdf_source_shows_the_page_of_its_cited_span(page, tmp_path):
    """A PDF's source names the page the cited words are on, as ``pages_of`` counts it."""
    from ragbook.cli import main
    from ragbook.convert import pages_of
    from ragbook.types import Hit

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "handbook.pdf").write_bytes(handbook_pdf())
    assert main(["index", str(tmp_path / "docs"), "--out", str(tmp_path / "index")]) == 0
    pipeline = pipeline_for(tmp_path / "index")
    question = "within how many days must receipts be uploaded?"
    want = pipeline.ask(question)
    assert not want.escalated, want.detail
    doc, start, end = want.answer_span
    cited = Hit("cited", 1.0, 1, doc, "", want.sources[0].metadata, start, end)
    assert pages_of(cited) == (3,)
    with RagServer(pipeline) as server:
        page.goto(server.base_url)
        box = page.get_by_label("Your question")
        box.fill(question)
        box.press("Enter")
        expect(page.locator("#status")).to_contain_text("Answered")
        expect(page.locator("#sources li h3").first).to_have_text(
            f"[1] {doc}, characters {want.sources[0].start}\u2013{want.sources[0].end}, page 3")
        assert page.locator("#sources mark").first.text_content() == want.answer.text
