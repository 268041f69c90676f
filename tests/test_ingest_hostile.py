"""Hostile folders for read_documents (probe 13c): size caps on every format, links into
hidden folders, a quadratic link check, front matter as editors write it, and invisible
Unicode that a reader never sees but a model reads."""
import os
import time

import pytest

from ragbook.convert import valid_unicode
from ragbook.datasets import split_front_matter
from ragbook.ingest import read_documents
from ragbook.types import Document


def test_text_files_obey_max_bytes_and_max_chars(tmp_path):
    """max_bytes and max_chars were only checked for PDF/HTML/DOCX: a 10 MB .txt was read
    whole whatever the caps said."""
    (tmp_path / "big.txt").write_text("word " * 2_000)
    (tmp_path / "long.md").write_text("word " * 30)
    (tmp_path / "ok.md").write_text("Fine.\n")
    with pytest.warns(UserWarning, match="skipped 1 of 3 files"), pytest.warns(
            UserWarning, match=r"big\.txt' is 10,000 bytes, over the limit max_bytes=1,000"):
        docs = read_documents(tmp_path, max_bytes=1_000)
    assert [d.id for d in docs] == ["long", "ok"] and "big" in docs.skipped
    with pytest.raises(ValueError, match="over the limit max_bytes=1,000"):
        read_documents(tmp_path / "big.txt", max_bytes=1_000)
    with pytest.warns(UserWarning, match=r"long\.md' holds 151 characters, over max_chars=50"):
        doc, = read_documents(tmp_path / "long.md", max_chars=50)
    assert doc.text == "word " * 9 + "word\n"


def test_many_links_out_are_filtered_in_linear_time(tmp_path):
    """Dropping the files that link out of the folder compared each file with a list of
    them: 15,000 links took half a minute, in comparisons growing with their square."""
    target = tmp_path / "elsewhere.md"
    target.write_text("Not for serving.\n")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "keep.md").write_text("Keep.\n")
    for i in range(15_000):
        os.symlink(target, root / f"l{i:05d}.md")
    began = time.perf_counter()
    with pytest.warns(UserWarning, match="skipped 15000 file"):
        docs = read_documents(root)
    assert time.perf_counter() - began < 10
    assert [d.id for d in docs] == ["keep"]


def test_a_link_to_a_hidden_file_is_not_read(tmp_path):
    """notes.txt -> .secret/env.txt served the hidden file under a visible name."""
    (tmp_path / "a.md").write_text("Alpha.\n")
    (tmp_path / ".secret").mkdir()
    (tmp_path / ".secret" / "env.txt").write_text("API_KEY=hunter2\n")
    os.symlink(".secret/env.txt", tmp_path / "notes.txt")
    with pytest.warns(UserWarning, match=r"skipped 1 file\(s\) .* link to hidden files or "
                                         r"folders \('.*notes\.txt'\); copy"):
        docs = read_documents(tmp_path)
    assert [d.id for d in docs] == ["a"]


@pytest.mark.parametrize("raw,meta,body", [
    ("---\ntitle: A\n\nstatus: current\n---\nBody.\n", {"title": "A", "status": "current"},
     "Body.\n"),
    ("---\n# draft\nstatus: current\n---\nBody.\n", {"status": "current"}, "Body.\n"),
    ("---\nstatus: \"current\"\ntitle: 'Refunds: how'\n---\nBody.\n",
     {"status": "current", "title": "Refunds: how"}, "Body.\n"),
    ("--- \nstatus: current\n---  \nBody.\n", {"status": "current"}, "Body.\n"),
    ("---\nstatus: current\n...\nBody.\n", {"status": "current"}, "Body.\n"),
    ("---\n---\nBody.\n", {}, "Body.\n"),
    ("---\nnote: say \"hi\" twice\n---\nB\n", {"note": 'say "hi" twice'}, "B\n"),
])
def test_front_matter_as_editors_write_it(raw, meta, body):
    """Blank and comment lines made the whole file unreadable, quotes stayed in the values
    (so a filter on status == current missed "current"), and '--- ', '...' and an empty
    block were not recognised as front matter."""
    assert split_front_matter(raw) == (meta, body)


def test_a_front_matter_title_hides_nothing(tmp_path):
    """The body's HTML comments were removed but the front-matter title's were kept."""
    (tmp_path / "a.md").write_text("---\ntitle: <!-- x --> Refunds\n---\nBody.\n")
    doc, = read_documents(tmp_path / "a.md")
    assert doc.title == doc.metadata["title"] == "Refunds"


INVISIBLE = "\u200b\u2060\u202e\u202c\u2066\u2069" + "".join(map(chr, range(0xE0041, 0xE0046)))


@pytest.mark.parametrize("name", ["a.md", "a.txt"])
def test_invisible_characters_are_removed_from_read_text(tmp_path, name):
    """Tag characters (which spell hidden text), zero-width spaces, word joiners and bidi
    controls were indexed as they were; ZWJ and ZWNJ, which scripts and emoji need, stay."""
    (tmp_path / name).write_text(f"Refunds{INVISIBLE} take 14\u200d\u200c days.\n")
    with pytest.warns(UserWarning, match=rf"{name}': removed 11 invisible character"):
        doc, = read_documents(tmp_path / name)
    assert doc.text == "Refunds take 14\u200d\u200c days.\n"


def test_invisible_characters_are_removed_from_converted_text_and_its_page_map(tmp_path):
    """Every converter passes through valid_unicode: HTML's tag characters were kept, and a
    PDF's page map must follow the shortened text."""
    pytest.importorskip("bs4")
    page = tmp_path / "p.html"
    page.write_text("<title>T\u200b</title><p>Refunds\U000E0049\U000E0067\U000E006E</p>")
    with pytest.warns(UserWarning, match="removed 4 invisible"):
        doc, = read_documents(page)
    assert doc.title == "T" and doc.text == "Refunds\n"
    pdf = Document("p", "ab\u200bc\n\n\u2060d\u200be\n", metadata={"page_starts": [0, 6]})
    with pytest.warns(UserWarning, match="removed 3 invisible"):
        fixed = valid_unicode(pdf, "p.pdf")
    assert fixed.text == "abc\n\nde\n" and fixed.metadata["page_starts"] == [0, 5]
