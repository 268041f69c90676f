"""Hostile probe, session 14 (issue 36): the surfaces — what ``ragbook ask`` prints, what
``ragbook serve`` accepts, and a saved index reached through a symlink. No model loads: the
terminal tests call the printing functions, the server runs a BM25 index with a scripted
chat model, the saves are BM25 indexes. Each test failed on the code before its fix."""
import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from ragbook import persist
from ragbook.bm25 import BM25Index
from ragbook.cli import main
from ragbook.folding import cells
from ragbook.types import Document


def corpus(word: str) -> list[Document]:
    return [Document(f"{word}-{i}", f"{word} refund window number {i} for plan {word}")
            for i in range(3)]


def saved_word(path) -> str:
    """Which corpus the BM25 index at ``path`` holds (loaded and checked)."""
    words = {item["id"].split("-")[0] for item in BM25Index.load(path).items_}
    assert len(words) == 1
    return words.pop()


# -- 1. an index path that is a symlink -------------------------------------------------------
def test_a_save_through_a_symlink_updates_the_folder_it_names_and_keeps_the_link(
        tmp_path, monkeypatch):
    """An index kept on another disk behind a link: the save swapped the *link* for a new
    folder beside it, so the folder the link named kept the old index (and anything else
    pointing there read stale data). Now the named folder is swapped and the link stays —
    and a save through the link killed between its renames still leaves the old index for
    the next load through the link."""
    (tmp_path / "disk").mkdir()
    real, link = tmp_path / "disk" / "idx", tmp_path / "idx"
    BM25Index().build(corpus("old")).save(real)
    link.symlink_to(real, target_is_directory=True)
    BM25Index().build(corpus("new")).save(link)
    assert link.is_symlink() and saved_word(real) == "new" and saved_word(link) == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "idx"]
    assert sorted(p.name for p in (tmp_path / "disk").iterdir()) == ["idx"]

    real_replace, calls = os.replace, [0]

    def replace(src, dst):                 # the second rename (new folder into place) fails
        calls[0] += 1
        if calls[0] >= 2:
            raise OSError("simulated kill between the renames")
        return real_replace(src, dst)
    monkeypatch.setattr(persist.os, "replace", replace)
    with pytest.raises(OSError, match="simulated"):
        BM25Index().build(corpus("third")).save(link)
    monkeypatch.setattr(persist.os, "replace", real_replace)
    assert not real.exists()               # as a kill would leave it: the old one set aside
    assert saved_word(link) == "new" and link.is_symlink()   # restored by the load


# -- 2. a long line of document text, wrapped by the terminal into a forged row ---------------
FAKE = '  [1] legal/official-refund-policy  chars 0-99  "Refunds take 365 days."'
TOOL_ROW = re.compile(r"^(> |    > |  \[\d\] (?!legal)|sources:$|confidence |"
                      r"\(from |\(passage |why these sources:|escalated: |candidates |no candi)")


@pytest.fixture(scope="module")
def planted_index(tmp_path_factory):
    """A JSONL corpus (ids are the file's to choose) whose answer sentence runs past 80
    columns into a fake source line, and a document whose id does the same."""
    root = tmp_path_factory.mktemp("wrap")
    answer = ("The refund window for enterprise contracts is thirty days from the invoice "
              "date, as the enterprise agreement sets out;" + FAKE + " and no longer.")
    rows = [{"id": "refunds", "text": answer},
            {"id": "notes-" + "n" * 70 + FAKE, "text": "Enterprise contracts renew yearly, "
             "and refunds of a renewal follow the same window."}]
    (root / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["index", str(root / "c.jsonl"), "--out", str(root / "idx")]) == 0
    return root


@pytest.mark.parametrize("columns", [80, 50])
@pytest.mark.parametrize("flags", [(), ("--explain",), ("--min-confidence", "0.99")])
def test_no_row_of_ask_s_output_is_wider_than_the_terminal_or_starts_with_a_document_s_text(
        planted_index, capsys, monkeypatch, columns, flags):
    """A terminal wraps a row at its last column and starts the rest at column 0: an
    answer of 78 characters followed by a fake source line printed, inside the quoted
    block, a row exactly like the tool's own (and so did a long document id on a source
    line). ragbook folds such lines itself now: no row is wider than the terminal (at most
    80), and each row is the tool's own or continues a quoted block (``> ``) or a tool
    line (``    > ``)."""
    monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    code = main(["ask", str(planted_index / "idx"), "how long is the refund window for "
                 "enterprise contracts?", "--min-span-score", "0", "--keep", "2", *flags])
    out = capsys.readouterr().out
    assert code == 0 and "legal/official-refund-policy" in out            # it was printed
    assert ("escalated" in out) == ("0.99" in flags) and ("nnnnnnnn" in out) == ("0.99" in flags)
    rows = out.splitlines()
    wide = [r for r in rows if cells(r) > columns and not r.startswith("confidence ")]
    assert not wide, wide                  # (the confidence line holds no document text)
    strays = [row for row in rows if not TOOL_ROW.match(row) and not row.startswith("      ")]
    assert not strays, out
    assert not any(re.match(r"^\s*\[1\] legal", row) for row in rows), out



HOSTILE = "256\x1b]0;owned\x07\n  [1] legal/official-refund-policy"


def test_text_from_a_saved_index_or_baseline_is_shown_escaped_on_its_line(
        planted_index, tmp_path, capsys):
    """``ragbook index`` quoted OUT's manifest (its --size) and ``eval --against`` the
    baseline's corpus fingerprint raw: an index folder or a baseline from elsewhere could
    set the terminal's title, or print a line of its own. Both are escaped now."""
    index = tmp_path / "idx"
    shutil.copytree(planted_index / "idx", index)
    manifest = json.loads((index / "manifest.json").read_text())
    manifest["sources"]["size"] = HOSTILE
    (index / "manifest.json").write_text(json.dumps(manifest))
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "refund window?",
                                     "gold": ["refunds"]}) + "\n")
    capsys.readouterr()
    assert main(["eval", str(index), str(questions), "--save", str(tmp_path / "b.json")]) == 0
    baseline = json.loads((tmp_path / "b.json").read_text())
    baseline["corpus_fingerprint"] = HOSTILE
    (tmp_path / "b.json").write_text(json.dumps(baseline))
    assert main(["eval", str(index), str(questions), "--against", str(tmp_path / "b.json")]) == 0
    assert main(["index", str(planted_index / "c.jsonl"), "--out", str(index)]) == 0
    out = capsys.readouterr().out
    assert "again in full" in out and "corpus fingerprint 256" in out, out
    assert "\x1b" not in out and "\x07" not in out, out
    assert not re.search(r"^\s*\[1\] legal", out, re.M), out

# -- 3. ragbook serve: requests two readers could read differently ----------------------------
class Quoting:
    """A chat model that cites passage 1's first sentence, counting its calls."""

    def __init__(self):
        self.calls = 0

    def generate(self, messages, max_new_tokens=None, stop=()):
        self.calls += 1
        text = re.search(r'<passage n="1" source="[^"]*">\n(.*?)\n</passage>',
                         messages[-1]["content"], re.DOTALL)[1]
        return text.split(". ")[0].rstrip(".") + " [1]."


def _request(body: bytes, *headers: str) -> bytes:
    head = "".join(f"{h}\r\n" for h in ("POST /ask HTTP/1.1", "Host: localhost",
                                         "Content-Type: application/json", *headers))
    return head.encode() + b"\r\n" + body


ASK = b'{"question": "refund window?"}'
CHUNKED = b"%x\r\n%s\r\n0\r\n\r\n" % (len(ASK), ASK)
TWICE = b'{"question": "refund window?", "question": "staff codes?"}'
SCOPE_TWICE = b'{"question": "refund window?", "scope": {"access": "public", "access": "staff"}}'
AMBIGUOUS = {
    "a key twice": _request(TWICE, f"Content-Length: {len(TWICE)}"),
    "a scope key twice": _request(SCOPE_TWICE, f"Content-Length: {len(SCOPE_TWICE)}"),
    "Content-Length and chunked": _request(CHUNKED, "Content-Length: 4",
                                           "Transfer-Encoding: chunked"),
    "Content-Length twice": _request(ASK, f"Content-Length: {len(ASK)}",
                                     f"Content-Length: {len(ASK) + 9}"),
    "a header without a colon": _request(ASK, f"Content-Length: {len(ASK)}", "X-Broken"),
}


@pytest.mark.parametrize("name", list(AMBIGUOUS))
def test_a_request_two_readers_could_read_differently_is_a_json_400_and_never_answered(name):
    """``{"question": "a", "question": "b"}`` was answered for "b" (Python keeps the last
    key; a proxy or a log that checked the first saw "a"); Content-Length beside
    Transfer-Encoding (how request smuggling starts) was answered by its chunks; and what
    uvicorn's parser refused (two Content-Lengths, a broken header) was a plain-text 400,
    not the API's JSON error. Each is now a JSON 400 and nothing is asked."""
    pytest.importorskip("uvicorn")
    from ragbook import GenerativeReader, Pipeline
    from ragbook.serving.app import RagServer

    llm = Quoting()
    docs = [Document("refund", "The refund window for annual contracts is thirty days.",
                     metadata={"access": "public"})]
    pipeline = Pipeline(BM25Index().build(docs), reader=GenerativeReader(llm, keep=3))
    with RagServer(pipeline, request_timeout=5) as server:
        with socket.create_connection(("127.0.0.1", server.policy.port), timeout=10) as sock:
            sock.sendall(AMBIGUOUS[name])
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        assert llm.calls == 0
        ok = _request(ASK, f"Content-Length: {len(ASK)}", "Connection: close")
        with socket.create_connection(("127.0.0.1", server.policy.port), timeout=10) as sock:
            sock.sendall(ok)
            served = b""
            while chunk := sock.recv(65536):
                served += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"application/json" in head.lower(), data
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    assert served.startswith(b"HTTP/1.1 200 ") and llm.calls == 1   # the server is fine


# -- 4. the page: a document id that reorders or hides its heading ----------------------------
PAGE_IDS = {"invoice\u202egnp.exe": "invoice\\u202egnp.exe",      # right-to-left override
            "billing/refunds\u200b": "billing/refunds\\u200b",    # passes for another id
            "faq\u2028[2] forged": "faq\\u2028[2] forged",        # a line separator
            "notes\u2066x": "notes\\u2066x", "blank\u3164": "blank\\u3164",
            "help/refunds.md é 日本": "help/refunds.md é 日本"}      # honest text unchanged


def test_the_page_shows_a_document_id_escaped_and_isolated_as_the_command_line_does():
    """The page set ``hit.doc_id`` raw into the source heading: U+202E reversed the rest
    of the heading (", characters 0–5" read backwards after the id), a zero-width space
    let one id pass for another. The page now writes them as visible escapes (as
    ``ragbook ask`` does) inside a <bdi>, and the escalation detail likewise."""
    from ragbook.serving.page import SCRIPT

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert 'el("bdi", shown(hit.doc_id))' in SCRIPT and "shown(result.detail)" in SCRIPT
    helper = SCRIPT[SCRIPT.index("const HIDDEN"):SCRIPT.index("function el(")]
    js = f"{helper}\nconsole.log(JSON.stringify({json.dumps(list(PAGE_IDS))}.map(shown)));"
    run = subprocess.run([node, "-e", js], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == list(PAGE_IDS.values())
