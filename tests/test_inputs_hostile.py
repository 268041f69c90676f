"""Hostile inputs (issue 21, defects 9 and 10): big documents chunk in bounded memory with
the same cuts as before, an over-long word is cut at the size, and each bad question set,
saved index or JSONL document gets one line naming the file or value and what to do."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragbook import chunking
from ragbook.chunking import RecursiveSplitter

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_chunk_reference import reference_documents  # noqa: E402


@pytest.mark.parametrize("piece", [chunking._PIECE, 300])
def test_chunks_are_the_whole_document_splitters(piece, monkeypatch):
    """Reading a document piece by piece cuts exactly where tokenising it whole did
    (chunk_reference.json, written by that splitter): the help centre, every 100th Python-docs
    section, the 20 longest, and both joined into long documents; with pieces of 300
    characters every long document crosses hundreds of piece ends."""
    monkeypatch.setattr(chunking, "_PIECE", piece)
    reference = json.loads((FIXTURES / "chunk_reference.json").read_text())
    docs = reference_documents()
    for size, overlap, length in reference["settings"]:
        splitter = RecursiveSplitter(size=size, overlap=overlap, length=length)
        expected = reference["chunks"][f"{size}/{overlap}/{length}"]
        assert [d.id for d in docs] == [doc_id for doc_id, _ in expected]
        for doc, (_, spans) in zip(docs, expected, strict=True):
            got = [[c.start, c.end] for c in splitter.split(doc)]
            assert got == spans, (size, overlap, length, doc.id)


MEASURE = """
import random, sys
from pathlib import Path


def peak_kb():   # this process's own high-water mark (ru_maxrss keeps the parent's across exec)
    status = Path("/proc/self/status").read_text().splitlines()
    return int(next(line.split()[1] for line in status if line.startswith("VmHWM:")))

from ragbook.chunking import RecursiveSplitter, encoder_tokenizer
from ragbook.types import Document

rng = random.Random(0)
words = ("refund window invoice the a of enterprise plan console render ERR_CONN_4021 port 8883 "
         "annual contracts 14-day https://example.com/docs/a_long-path café 4. `code` e.g.").split()
parts, n = [], 0
while n < 20_000_000:                       # 20 MB of Markdown: headings and paragraphs
    if len(parts) % 7 == 0:
        part = "## Section " + " ".join(rng.choices(words, k=5))
    else:
        part = " ".join(" ".join(rng.choices(words, k=rng.randint(4, 20))) + "."
                        for _ in range(rng.randint(1, 6)))
    parts.append(part)
    n += len(part) + 2
Path(sys.argv[1]).write_text("\\n\\n".join(parts))
del parts
encoder_tokenizer()
before = peak_kb()
doc = Document(id="big", text=Path(sys.argv[1]).read_text())
chunks = RecursiveSplitter().split(doc)
assert chunks[-1].end == len(doc.text.rstrip())
print(before // 1024, peak_kb() // 1024, len(chunks))
"""


def test_a_20_mb_markdown_file_chunks_in_bounded_memory(tmp_path):
    """Peak memory of a fresh process that chunks 20 MB of Markdown with the default splitter
    (256 tokens). Measured: 334 MB peak, of which 268 MB is Python with the tokenizer loaded;
    tokenising the whole text at once peaked at 3,944 MB."""
    out = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path / "big.md")],
                         capture_output=True, text=True, check=True).stdout
    before_mb, peak_mb, n_chunks = map(int, out.split())
    assert n_chunks > 30_000
    assert peak_mb < 500, f"peak {peak_mb} MB ({before_mb} MB before chunking)"


@pytest.mark.parametrize("length", ["tokens", "chars"])
def test_an_overlong_word_is_cut_at_the_size(length):
    """A hex dump with no spaces (WordPiece reads any word over 100 characters as one unknown
    token) is cut into chunks of the size, not kept as one huge chunk."""
    hexdump = bytes(range(256)).hex() * 400                  # 204,800 characters
    doc = chunking.Document(id="h", text=f"Intro.\n\n{hexdump}\n\nAfter the dump.")
    chunks = RecursiveSplitter(size=64, overlap=8, length=length).split(doc)
    assert max(len(c.text) for c in chunks) <= 64
    assert len(chunks) >= len(hexdump) // 64
    assert chunks[0].text == "Intro." and chunks[-1].text.endswith("After the dump.")
    assert chunking.coverage_gaps(doc, chunks) == []


# -- defect 10: each error is one line naming the file or value and what to do ------------

def test_relevance_given_as_a_string_is_named():
    from ragbook.evaluate import evaluate

    with pytest.raises(ValueError, match=r"qrels\['q1'\]\['d'\] is '1': relevance must be a "
                                         r"finite number.*int\('1'\)"):
        evaluate({"q1": {"d": "1"}}, {"q1": {"d": 1.0}}, "recall@5")
    with pytest.raises(ValueError, match=r"scores document 'd' 'high'; every score must be"):
        evaluate({"q1": {"d": 1}}, {"q1": {"d": "high"}}, "recall@5")


def test_question_ids_that_repeat_are_refused_before_searching():
    from ragbook.evaluate import retrieve_run

    class Never:
        def search(self, *args, **kwargs):
            raise AssertionError("searched before the ids were checked")

    with pytest.raises(ValueError, match=r"question id 'q1' appears twice \(items 0 and 2\)"):
        retrieve_run(Never(), [("q1", "a?"), ("q2", "b?"), ("q1", "c?")])


def test_a_lone_surrogate_in_a_jsonl_document_is_refused_at_read_time(tmp_path):
    from ragbook.ingest import read_documents

    path = tmp_path / "docs.jsonl"
    path.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": "bad \\ud800 here"}\n'
                    '{"id": "c", "text": "a pair is one character: \\ud83d\\ude00"}\n')
    with pytest.raises(ValueError, match=r"docs.jsonl' line 2: field 'text' holds a lone "
                                         r"surrogate escape.*remove the escape"):
        read_documents(path)
    path.write_text('{"id": "c", "text": "a pair is one character: \\ud83d\\ude00"}\n')
    assert read_documents(path)[0].text.endswith("\U0001F600")


@pytest.fixture(scope="module")
def saved_index(tmp_path_factory):
    import shutil

    from ragbook.cli import main
    from ragbook.datasets import data_dir

    docs = tmp_path_factory.mktemp("docs")
    for name in ("billing-refund-policy", "billing-invoices", "account-enterprise-plan"):
        shutil.copy(data_dir() / "helpcentre" / "articles" / f"{name}.md", docs)
    out = tmp_path_factory.mktemp("idx") / "index"
    assert main(["index", str(docs), "--out", str(out)]) == 0
    return out


def _damaged_copy(saved_index, tmp_path, damage):
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(saved_index, copy)
    damage(copy)
    return copy


def _cli_error(capsys, path) -> str:
    from ragbook.cli import main

    assert main(["ask", str(path), "how long is the refund window?"]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ragbook: error: "), lines
    return lines[0]


def test_a_missing_dense_folder_gets_advice_for_who_is_reading(saved_index, tmp_path, capsys):
    import shutil

    from ragbook.fusion import HybridRetriever
    from ragbook.persist import CorruptIndexError

    path = _damaged_copy(saved_index, tmp_path, lambda p: shutil.rmtree(p / "dense"))
    with pytest.raises(CorruptIndexError, match=r"dense' is missing from the index saved in "
                                                r".*; rebuild and save the index again"):
        HybridRetriever.load(path)
    line = _cli_error(capsys, path)
    assert "dense' is missing" in line and f"rebuild it with 'ragbook index SRC --out {path}'" \
        in line and "save(" not in line


def test_a_bad_faiss_file_with_a_valid_checksum_is_a_corrupt_index(saved_index, tmp_path,
                                                                   capsys):
    import hashlib

    from ragbook.fusion import HybridRetriever
    from ragbook.persist import CorruptIndexError

    def damage(path):
        faiss_file = path / "dense" / "index.faiss"
        faiss_file.write_bytes(b"garbage, not a FAISS index" * 10)
        manifest = json.loads((path / "dense" / "manifest.json").read_text())
        manifest["files"]["index.faiss"] = hashlib.sha256(faiss_file.read_bytes()).hexdigest()
        (path / "dense" / "manifest.json").write_text(json.dumps(manifest))

    path = _damaged_copy(saved_index, tmp_path, damage)
    with pytest.raises(CorruptIndexError, match=r"index.faiss' is not an index FAISS can read"):
        HybridRetriever.load(path)
    line = _cli_error(capsys, path)
    assert "index.faiss' is not an index FAISS can read" in line and "ragbook index SRC" in line
