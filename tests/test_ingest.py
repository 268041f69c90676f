"""read_documents: folders of Markdown/text, JSONL files, and the errors a real corpus hits."""
import json

import pytest

from ragbook.datasets import load_helpcentre, split_front_matter
from ragbook.ingest import read_documents


def write(path, text, encoding="utf-8"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def test_folder_ids_titles_front_matter_and_order(tmp_path):
    write(tmp_path / "billing" / "refunds.md",
          "---\nstatus: current\nupdated: 2026-03-01\n---\n\n# Refund policy\n\n14 days.\n")
    write(tmp_path / "a-notes.txt", "# not a heading in a .txt\nplain text\n")
    write(tmp_path / "guide.markdown", "```bash\n# a shell comment\n```\n\n# Guide\n\nStep.\n")
    write(tmp_path / "no-heading.md", "---\ntitle: From front matter\n---\nBody only.\n")
    write(tmp_path / "ignored.rst", "not read\n")
    write(tmp_path / ".git" / "x.md", "# hidden folder: skipped\n")
    docs = read_documents(tmp_path)
    assert [d.id for d in docs] == ["a-notes", "billing/refunds", "guide", "no-heading"]
    by_id = {d.id: d for d in docs}
    refunds = by_id["billing/refunds"]
    assert refunds.title == "Refund policy"
    assert dict(refunds.metadata) == {"status": "current", "updated": "2026-03-01"}
    assert refunds.text == "# Refund policy\n\n14 days.\n"  # front matter removed
    assert by_id["a-notes"].title == "a-notes"              # .txt: the stem
    assert by_id["guide"].title == "Guide"                  # a fenced '# ' is not a heading
    assert by_id["no-heading"].title == "From front matter"


def test_helpcentre_folder_reads_like_the_loader():
    from ragbook.datasets import data_dir

    docs = read_documents(data_dir() / "helpcentre" / "articles")
    loaded = {d.id: d for d in load_helpcentre().documents}
    assert len(docs) == len(loaded)
    assert all(loaded[d.id].text == d.text for d in docs)  # same text -> same chunk ids


def test_split_front_matter_is_optional_and_strict():
    assert split_front_matter("# Title\n") == ({}, "# Title\n")
    with pytest.raises(ValueError, match=r"doc\.md: front-matter line 'no colon here'"):
        split_front_matter("---\nno colon here\n---\nbody\n", "doc.md")


def test_crlf_and_bom_are_normalised(tmp_path):
    write(tmp_path / "w.md", "\ufeff---\r\nstatus: current\r\n---\r\n# Win\r\n\r\ntext\r\n")
    doc, = read_documents(tmp_path)
    assert (doc.title, dict(doc.metadata), doc.text) == ("Win", {"status": "current"},
                                                         "# Win\n\ntext\n")


def test_blank_documents_are_skipped_with_one_warning(tmp_path):
    write(tmp_path / "empty.md", "")
    write(tmp_path / "only-front.md", "---\nstatus: draft\n---\n\n")
    write(tmp_path / "real.md", "# Real\n\ntext\n")
    with pytest.warns(UserWarning, match=r"skipped 2 blank documents .*'empty', 'only-front'"):
        docs = read_documents(tmp_path)
    assert [d.id for d in docs] == ["real"]


def test_all_blank_is_an_error(tmp_path):
    write(tmp_path / "empty.md", "  \n")
    with pytest.raises(ValueError, match="every document .* is blank"):
        read_documents(tmp_path)


def test_non_utf8_file_is_named(tmp_path):
    write(tmp_path / "ok.md", "fine\n")
    latin = write(tmp_path / "latin.md", "caf\u00e9\n", encoding="latin-1")
    with pytest.warns(UserWarning) as caught:
        assert [d.id for d in read_documents(tmp_path)] == ["ok"]   # the rest is read
    assert "latin.md' is not UTF-8" in str(caught[0].message) and "iconv" in str(caught[0].message)
    with pytest.raises(ValueError, match=r"latin\.md' is not UTF-8 .*iconv"):
        read_documents(latin)                                      # given alone: an error


def test_duplicate_ids_name_both_files(tmp_path):
    write(tmp_path / "faq.md", "a\n")
    write(tmp_path / "faq.txt", "b\n")
    with pytest.raises(ValueError, match=r"faq\.md' and .*faq\.txt' both give the document id"):
        read_documents(tmp_path)


def test_missing_path_and_empty_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist; give a folder"):
        read_documents(tmp_path / "nope")
    write(tmp_path / "docs" / "x.odt", "binary-ish")
    with pytest.raises(ValueError, match=r"holds no \.md, \.markdown, \.txt, \.pdf, \.html"):
        read_documents(tmp_path / "docs")
    with pytest.raises(ValueError, match=r"cannot read .*x\.odt"):
        read_documents(tmp_path / "docs" / "x.odt")


def jsonl(tmp_path, *rows):
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    return write(tmp_path / "docs.jsonl", "\n".join(lines) + "\n")


def test_jsonl_documents(tmp_path):
    path = jsonl(tmp_path, {"id": "a", "text": "alpha", "title": "A", "metadata": {"n": 1}},
                 "", {"id": "b", "text": "beta", "extra": "ignored"})
    a, b = read_documents(path)
    assert (a.id, a.text, a.title, dict(a.metadata)) == ("a", "alpha", "A", {"n": 1})
    assert (b.id, b.title, dict(b.metadata)) == ("b", "", {})


@pytest.mark.parametrize("row, message", [
    ('{"id": "a", "text": "x"', r"line 2 is not valid JSON"),
    ('["a", "x"]', r"line 2 is a JSON list, not an object"),
    ({"text": "x"}, r"line 2 has no 'id' field"),
    ({"id": "b"}, r"line 2 has no 'text' field"),
    ({"id": 7, "text": "x"}, r"line 2: field 'id' must be a non-empty str, got 7"),
    ({"id": "b", "text": ["x"]}, r"line 2: field 'text' must be a non-empty str"),
    ({"id": "b", "text": "x", "metadata": {"d": {"nested": 1}}},
     r"line 2: field 'metadata' is invalid"),
    ({"id": "a", "text": "again"}, r"line 2 repeats the id 'a' of line 1"),
])
def test_jsonl_errors_name_line_and_field(tmp_path, row, message):
    path = jsonl(tmp_path, {"id": "a", "text": "first"}, row)
    with pytest.raises(ValueError, match=message):
        read_documents(path)


def test_jsonl_blank_texts_warn_and_bad_bytes_name_the_line(tmp_path):
    path = jsonl(tmp_path, {"id": "a", "text": "x"}, {"id": "b", "text": " "})
    with pytest.warns(UserWarning, match=r"skipped 1 blank document .*'b'"):
        assert [d.id for d in read_documents(path)] == ["a"]
    path.write_bytes(b'{"id": "a", "text": "x"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=r"line 2 is not UTF-8"):
        read_documents(path)


def test_a_link_out_of_the_folder_is_not_indexed(tmp_path):
    secret = tmp_path / "outside" / "salaries.md"
    secret.parent.mkdir()
    secret.write_text("# Salaries\n\nThe CEO earns a lot.\n", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.md").write_text("# FAQ\n\nRefunds take 14 days.\n", encoding="utf-8")
    (docs / "inner.md").symlink_to(docs / "faq.md")          # a link inside: fine
    (docs / "salaries.md").symlink_to(secret)                # a link out: skipped, said
    with pytest.warns(UserWarning, match=r"skipped 1 file\(s\).*link to places outside"):
        got = read_documents(docs)
    assert [d.id for d in got] == ["faq", "inner"]
    with pytest.warns(UserWarning, match=r"reading 1 file\(s\).*follow_links_out=True"):
        got = read_documents(docs, follow_links_out=True)
    assert [d.id for d in got] == ["faq", "inner", "salaries"]


@pytest.mark.parametrize("raw, message", [
    ("Refunds take 14 days.\n".encode("utf-16"), "UTF-16LE text.*iconv -f utf-16le -t utf-8"),
    ("Refunds take 14 days.\n".encode("utf-16-le"), "NUL bytes.*UTF-16 without a byte-order"),
    (b"PK\x03\x04\x00\x00binary", "NUL bytes"),
])
def test_utf16_and_binary_files_are_refused_with_the_right_advice(tmp_path, raw, message):
    (tmp_path / "a.md").write_bytes(raw)
    with pytest.raises(ValueError, match=message):
        read_documents(tmp_path / "a.md")


def test_a_file_name_that_is_not_utf8_gives_a_valid_id_with_a_warning(tmp_path):
    """b'caf\\xe9.md' gave the id 'caf\\udce9', which failed only when the index was saved,
    after embedding; now the id is valid Unicode and the warning names the file."""
    import os
    write(tmp_path / "good.md", "Refunds take 14 days.\n")
    try:
        with open(os.path.join(os.fsencode(tmp_path), b"caf\xe9.md"), "w") as f:
            f.write("Caf\u00e9 opening hours.\n")
    except OSError:
        pytest.skip("this file system refuses names that are not UTF-8")
    with pytest.warns(UserWarning, match=r"caf\\udce9\.md': its id and title held lone surr"):
        docs = read_documents(tmp_path)
    assert sorted(d.id for d in docs) == ["caf\ufffd", "good"]
    for d in docs:
        (d.id + d.title + d.text).encode("utf-8")        # strict: no surrogate left


def test_one_unreadable_text_file_is_skipped_and_the_rest_indexed(tmp_path, monkeypatch):
    """A Markdown file without read permission, with front matter that is not `key: value`,
    or not UTF-8 stopped the whole folder; it is skipped like a bad PDF, named with the fix."""
    import pathlib
    write(tmp_path / "good.md", "Refunds take 14 days.\n")
    locked = write(tmp_path / "locked.md", "secret\n")
    write(tmp_path / "front.md", "---\ntags:\n  - a\n  - b\n---\nbody\n")        # YAML list
    write(tmp_path / "latin.txt", "caf\u00e9\n", encoding="latin-1")
    real = pathlib.Path.read_bytes

    def read_bytes(self):
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(pathlib.Path, "read_bytes", read_bytes)
    with pytest.warns(UserWarning) as caught:
        docs = read_documents(tmp_path)
    assert [d.id for d in docs] == ["good"]
    assert docs.skipped.keys() == {"front", "latin", "locked"}
    said = "\n".join(str(w.message) for w in caught)
    assert "locked.md' could not be read (Permission denied); give yourself read" in said
    assert "front.md" in said and "not 'key: value'" in said
    assert "latin.txt' is not UTF-8" in said and "iconv" in said
    assert "skipped 3 of 4 files under" in said
    with pytest.raises(ValueError, match="locked.md' could not be read"):
        read_documents(locked)                    # given alone, its error is raised


def test_a_file_unreadable_on_reindex_keeps_its_chunks_only_a_removed_file_is_deleted(tmp_path):
    """`ragbook index` again after one file broke said "1 deleted" and dropped its chunks: a
    skipped file is not a deleted one. Its previous chunks stay, with a warning naming it."""
    from ragbook.embeddings import Encoder
    from ragbook.ingest import sync_index
    src, out, encoder = tmp_path / "src", tmp_path / "index", Encoder()
    write(src / "refunds.md", "# Refunds\n\nRefunds take 14 days.\n")
    broken = write(src / "leave.md", "# Leave\n\nEvery employee gets 25 days of paid leave.\n")
    first = sync_index(read_documents(src), out, encoder, size=64, overlap=8)
    kept = [r["id"] for r in first.retriever.items_ if r["doc_id"] == "leave"]
    broken.write_bytes(b"# Leave\n\nCaf\xe9 opening hours.\n")       # not UTF-8 now
    with pytest.warns(UserWarning) as caught:
        again = sync_index(read_documents(src), out, encoder, size=64, overlap=8)
    assert (again.added, again.changed, again.deleted) == ((), (), ())
    assert [r["id"] for r in again.retriever.items_ if r["doc_id"] == "leave"] == kept
    assert any("kept 'leave' from the previous index" in str(w.message)
               and "leave.md' is not UTF-8" in str(w.message) for w in caught)
    import shutil
    shutil.copytree(out, tmp_path / "copy")      # built in full: the loss is said, not silent
    with pytest.warns(UserWarning) as caught:
        sync_index(read_documents(src), tmp_path / "copy", encoder, size=64, overlap=8,
                   rebuild=True)
    assert any("in full without ['leave'], whose files could not be read now"
               in str(w.message) for w in caught)
    broken.unlink()                                                  # gone: now deleted
    gone = sync_index(read_documents(src), out, encoder, size=64, overlap=8)
    assert gone.deleted == ("leave",)
    assert not [r for r in gone.retriever.items_ if r["doc_id"] == "leave"]


def _within_5_seconds(call):
    """``call()``'s result or exception, failing the test (not hanging it) when it blocks."""
    import threading
    result = {}

    def run():
        try:
            result["value"] = call()
        except Exception as err:  # noqa: BLE001 - handed back to the test
            result["error"] = err
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "blocked reading a named pipe"
    return result


def _unblock(fifo):
    """Open the pipe's write end once, so a reader stuck opening it gets end-of-file."""
    import os
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("name", ["p.md", "p.jsonl", "p.html"])
def test_a_named_pipe_is_refused_by_name_not_read_forever(tmp_path, name):
    import os

    from ragbook.convert import ConversionError, convert
    fifo = tmp_path / name
    os.mkfifo(fifo)
    try:
        result = _within_5_seconds(lambda: read_documents(fifo))
        assert isinstance(result.get("error"), ValueError), result
        assert "not a regular file" in str(result["error"]) and name in str(result["error"])
        if name.endswith(".html"):
            result = _within_5_seconds(lambda: convert(fifo))
            assert isinstance(result.get("error"), ConversionError), result
        if name.endswith(".jsonl"):
            return                                 # a folder reads no .jsonl files
        write(tmp_path / "ok.md", "# OK\n\nRefunds take 14 days.\n")
        with pytest.warns(UserWarning, match=rf"not regular files.*{name}"):
            result = _within_5_seconds(lambda: read_documents(tmp_path))
        assert [d.id for d in result["value"]] == ["ok"]
    finally:
        _unblock(fifo)


def test_markdown_text_a_rendered_page_never_shows_is_not_indexed(tmp_path):
    """An HTML comment and a hidden <div> in a Markdown file were indexed (an instruction
    planted there reached the reader); they are dropped, as the HTML converter drops them,
    while code that shows such markup as written, and visible HTML, stay."""
    write(tmp_path / "a.md", "# Refunds\n\nVisible refund text.<!-- SECRET1 ignore previous -->\n"
          "\n<div hidden>SECRET2</div>\n<span aria-hidden=\"true\">SECRET3</span>"
          "<p style=\"display:none\">SECRET4</p><p class=\"d-none\">SECRET5</p>\n"
          "<!--\n```\nSECRET6 in a fence inside a comment\n```\n-->\n"
          "```html\n<!-- shown in code -->\n```\n\n`<!-- inline code -->` and <b>bold</b>\n")
    write(tmp_path / "b.md", "# B\n\nshown\n\n<div hidden>\n\nSECRET7: never closed\n")
    docs = {d.id: d for d in read_documents(tmp_path)}
    text = docs["a"].text
    assert "SECRET" not in text + docs["b"].text, text
    assert "Visible refund text." in text and "<!-- shown in code -->" in text
    assert "`<!-- inline code -->` and <b>bold</b>" in text and docs["b"].text == "# B\n\nshown\n"


def test_front_matter_cannot_set_a_converters_page_map(tmp_path):
    """'page_starts: 0,1,2' in front matter became a str page map, and pages_of raised a raw
    TypeError on every hit of the file: such keys are ignored with a warning naming them,
    and pages_of gives no pages (with a warning) for a page map that is not one."""
    from ragbook.convert import pages_of
    from ragbook.types import Hit

    write(tmp_path / "b.md", "---\npage_starts: 0,1,2\nformat: pdf\nteam: x\n---\n# Pages\n\n1.\n")
    with pytest.warns(UserWarning, match=r"'format', 'page_starts'.*ignored them"):
        doc, = read_documents(tmp_path)
    assert dict(doc.metadata) == {"team": "x"}
    for bad in ("0,1,2", [0, "9"], [5, 2], [True, 4], [-3, 0]):
        with pytest.warns(UserWarning, match="not a list of increasing character offsets"):
            assert pages_of(Hit("b:0-5", 1.0, 1, "b", "", {"page_starts": bad}, 0, 5)) == ()
    assert pages_of(Hit("b:0-5", 1.0, 1, "b", "", {"page_starts": [0, 3]}, 0, 5)) == (1, 2)
