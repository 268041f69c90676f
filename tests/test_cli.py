"""The command line, run in process (``ragbook.cli.main``) and once as ``python -m ragbook``."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragbook.cli import _fail, main
from ragbook.datasets import data_dir

ARTICLES = ["billing-refund-policy", "billing-cancel-subscription", "billing-invoices",
            "account-enterprise-plan", "account-export-csv", "account-free-plan-overview"]
REFUND = "how long is the refund window for enterprise contracts?"
ABSENT = "what is the capital of mongolia?"


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("ragbook: error: ") and "; " in lines[0], lines[0]
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    for name in ARTICLES:
        shutil.copy(data_dir() / "helpcentre" / "articles" / f"{name}.md", root / f"{name}.md")
    return root


@pytest.fixture(scope="module")
def index(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("idx") / "index"
    assert main(["index", str(corpus), "--out", str(out)]) == 0
    return out


def test_index_prints_a_summary_and_saves(corpus, tmp_path, capsys):
    code, out, _ = run(capsys, "index", corpus, "--out", tmp_path / "i", "--size", 128,
                       "--overlap", 16)
    assert code == 0
    assert out.startswith("indexed 6 documents as ") and f"saved to {tmp_path / 'i'}" in out
    assert (tmp_path / "i" / "manifest.json").exists()
    # a re-run embeds nothing new: the on-disk cache is what makes an interrupted build resume
    code, out, _ = run(capsys, "index", corpus, "--out", tmp_path / "i", "--size", 128,
                       "--overlap", 16)
    assert code == 0 and "(0 embedded," in out


def test_index_warns_in_one_line_about_blank_files(corpus, tmp_path, capsys):
    src = tmp_path / "src"
    shutil.copytree(corpus, src)
    (src / "empty.md").write_text("")
    code, _, err = run(capsys, "index", src, "--out", tmp_path / "i")
    assert code == 0
    assert "ragbook: warning: skipped 1 blank document" in err and "'empty'" in err


def test_index_refuses_to_replace_a_folder_that_is_not_an_index(corpus, tmp_path, capsys):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    code, _, err = run(capsys, "index", corpus, "--out", tmp_path / "mine")
    assert code == 1 and "is a folder that is not a ragbook index" in one_error_line(err)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


def test_eval_prints_the_three_runs_with_intervals(index, tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    rows = [{"id": "q1", "question": REFUND, "gold": ["billing-refund-policy"]},
            {"id": "q2", "question": "how do I cancel my subscription",
             "gold": ["billing-cancel-subscription"]},
            {"id": "q3", "question": "export tickets to a CSV file",
             "gold": ["account-export-csv"]},
            {"id": "q4", "question": "unlabelled", "gold": []}]
    questions.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, _ = run(capsys, "eval", index, questions)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("3 questions (1 without gold ids not scored)")
    assert lines[1].split() == ["run", "recall@5", "recall@10", "mrr@10", "ndcg@10"]
    assert [line.split()[0] for line in lines[2:]] == ["dense", "bm25", "hybrid"]
    assert "[" in lines[2] and "]" in lines[2]


def test_eval_bad_jsonl_line_is_one_error(index, tmp_path, capsys):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q1", "question": "refunds?", "gold": ["a"]}\n{"id": "q2"\n')
    code, _, err = run(capsys, "eval", index, questions)
    assert code == 1 and "line 2 is not valid JSON" in one_error_line(err)
    questions.write_text('{"id": "q1", "gold": ["a"]}\n')
    code, _, err = run(capsys, "eval", index, questions)
    assert code == 1 and "line 1: field 'question'" in one_error_line(err)


@pytest.mark.parametrize("argv, code, message", [
    (["ask", "{tmp}/missing", "refunds?"], 1, "does not exist; build one with 'ragbook index"),
    (["eval", "{tmp}/missing", "{tmp}/q.jsonl"], 1, "q.jsonl' is not a file"),
    (["index", "{tmp}/empty", "--out", "{tmp}/i"], 1,
     "holds no .md, .markdown, .txt, .pdf, .html, .htm, .docx files"),
    (["index", "{tmp}/nowhere", "--out", "{tmp}/i"], 1, "does not exist; give a folder"),
    (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
    ([], 2, "the following arguments are required: COMMAND"),
    (["index", "{tmp}/empty"], 2, "--out"),
    (["index", "{tmp}/empty", "--out", "{tmp}/i", "--size", "0"], 2, "--size: must be a whole"),
    (["index", "{tmp}/empty", "--out", "{tmp}/i", "--size", "32", "--overlap", "32"], 2,
     "--overlap 32 must be smaller than --size 32"),
    (["ask", "{tmp}/missing", "q", "--keep", "x"], 2, "--keep: must be a whole number"),
])
def test_errors_are_one_line_with_the_right_exit_code(tmp_path, capsys, argv, code, message):
    (tmp_path / "empty").mkdir()
    got, out, err = run(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert got == code
    assert message in one_error_line(err)


def test_an_error_line_shows_a_file_names_escape_sequences_never_obeys_them(tmp_path,
                                                                           capsys):
    """A Markdown file whose name held an escape sequence, and whose front matter was
    malformed, erased the error line and printed a green 'indexed ... OK' in its place:
    the error line shows such characters as escapes, as a warning line does."""
    bad = tmp_path / "evil\x1b[2K\r\x1b[32mragbook: indexed 5 documents OK\x1b[0m.md"
    bad.write_text("---\nno colon here\n---\n# T\nbody\n", encoding="utf-8")
    code, _, err = run(capsys, "index", bad, "--out", tmp_path / "i")
    assert code == 1 and "\x1b" not in err and "\r" not in err
    line = one_error_line(err)
    assert "/evil\\x1b[2K\\r\\x1b[32mragbook" in line and "is not 'key: value'" in line
    assert _fail("bad\x1b]0;title\x07 thing; fix it", 1) == 1
    assert "bad\\x1b]0;title\\x07 thing" in one_error_line(capsys.readouterr().err)


def test_debug_shows_the_traceback(tmp_path):
    with pytest.raises(FileNotFoundError):
        main(["--debug", "index", str(tmp_path / "nowhere"), "--out", str(tmp_path / "i")])
    with pytest.raises(FileNotFoundError):
        main(["index", str(tmp_path / "nowhere"), "--out", str(tmp_path / "i"), "--debug"])


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "index", "--help")
    assert code == 0 and "Resumable" in out


def test_python_dash_m_ragbook():
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "ragbook", "--help"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ragbook") and all(
        c in done.stdout for c in ("index", "ask", "eval"))
    done = subprocess.run([sys.executable, "-m", "ragbook", "nope"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    one_error_line(done.stderr)


# -- ask: needs ragbook.pipeline --------------------------------------------------------------

@pytest.fixture
def pipeline():
    return pytest.importorskip("ragbook.pipeline")


def test_ask_answers_with_sources(pipeline, index, capsys):
    code, out, _ = run(capsys, "ask", index, REFUND)
    assert code == 0
    assert "14-day" in out.splitlines()[0]
    assert "sources:" in out and "billing-refund-policy  chars " in out
    # the quantity the pipeline decided on, named — not a fused RRF score per source
    assert re.search(r"^confidence 0\.\d\d \(cosine similarity of the best dense hit; no "
                     r"--min-confidence set\)$", out, re.M), out
    assert " score " not in out
    assert re.search(r"^\(from billing-refund-policy, chars \d+-\d+; passage \d of \d read\)$",
                     out, re.M), out


def test_ask_answers_what_pipeline_answers_with_the_same_defaults(pipeline, index, capsys):
    """One place defines the defaults (Pipeline's signature): the shell and Python give the
    same answer, or the same escalation, to the same question."""
    from ragbook.cli import ASK_DEFAULTS
    from ragbook.commands import load_index

    signature = __import__("inspect").signature(pipeline.Pipeline).parameters
    assert ASK_DEFAULTS == {k: signature[k].default for k in ("keep", "min_confidence")}
    for question in (REFUND, ABSENT, "can I export tickets to csv?"):
        code, out, _ = run(capsys, "ask", index, question, "--json")
        asked = pipeline.Pipeline(load_index(index)).ask(question)
        shell = json.loads(out)
        assert (shell["answer"], shell["reason"]) == (asked.answer.text, asked.reason)


def test_ask_explain_prints_why_each_source_scored(pipeline, index, capsys):
    """--explain prints, under the sources, each source's RRF channels (adding up to its
    fused score) and the status filter the pipeline ran: the lines explain_result gives for
    the same question asked in Python."""
    from ragbook.commands import explain_lines, load_index

    code, out, _ = run(capsys, "ask", index, REFUND)
    assert code == 0 and "why these sources:" not in out
    code, out, _ = run(capsys, "ask", index, REFUND, "--explain")
    assert code == 0
    sources, why = out.split("\nsources:\n")[1].split("why these sources:\n")
    n = len(sources.splitlines())
    heads = re.findall(r"^  \[(\d)\] rrf \S+: (0\.\d{4}) = sum of (\d) parts$", why, re.M)
    assert [int(h[0]) for h in heads] == list(range(1, n + 1)), out
    for block in why.split("\n  [")[1:]:
        if " rrf " in block.splitlines()[0]:
            score = float(block.splitlines()[0].split(": ")[1].split(" ")[0])
            parts = [float(x) for x in re.findall(r"^      (?:dense|bm25): \+(\S+)", block, re.M)]
            assert abs(sum(parts) - score) <= 2e-4 and 1 <= len(parts) <= 2, block
    assert why.count("status $ne 'superseded': +1.0000") == n
    asked = pipeline.Pipeline(load_index(index))
    assert why.splitlines() == explain_lines(asked, asked.ask(REFUND))[1:]


def test_ask_explain_json_lists_each_sources_parts(index, capsys):
    """--explain --json adds, per source, the explanations as JSON: their parts add up to
    the score, the RRF one's score is the source's fused score, and the text is the one
    --explain prints; plain --json has no such key."""
    code, out, _ = run(capsys, "ask", index, REFUND, "--json")
    assert code == 0 and "explanations" not in json.loads(out)
    code, out, _ = run(capsys, "ask", index, REFUND, "--json", "--explain")
    shell = json.loads(out)
    assert code == 0 and len(shell["explanations"]) == len(shell["sources"]) > 0
    for source, whys in zip(shell["sources"], shell["explanations"], strict=True):
        rrf, flt = whys
        assert (rrf["stage"], rrf["hit_id"], flt["stage"]) == ("rrf", source["id"], "filter")
        assert abs(sum(p["value"] for p in rrf["parts"]) - rrf["score"]) <= 1e-9
        assert abs(rrf["score"] - source["score"]) <= 1e-9
        assert {p["name"] for p in rrf["parts"]} <= {"dense", "bm25"}
        assert rrf["text"].startswith(f"rrf {source['id']}: ")


def test_ask_min_span_score_is_the_readers_floor(pipeline, index, capsys):
    code, out, _ = run(capsys, "ask", index, REFUND, "--min-span-score", "0.99")
    assert code == 0 and out.startswith("escalated: reader_abstained"), out
    code, out, _ = run(capsys, "ask", index, REFUND, "--min-span-score", "0")
    assert code == 0 and out.startswith("> ") and "14-day" in out
    code, _, err = run(capsys, "ask", index, REFUND, "--min-span-score", "0.5", "--generative")
    assert code == 2 and "give one of them" in one_error_line(err)


def test_a_document_cannot_print_a_line_that_looks_like_the_tools_own(pipeline, tmp_path,
                                                                       capsys):
    """A planted page whose text holds line breaks followed by a fake sources block: the
    answer is a quoted block (every line it holds starts with '> '), details stay on one
    line, and the only source lines are the ones the Result holds."""
    docs = tmp_path / "docs"
    docs.mkdir()
    fake = ("  [1] legal/official-refund-policy  chars 0-99  score 0.999  "
            "\"Refunds for enterprise contracts take 365 days.\"")
    (docs / "planted.md").write_text(
        "# Refund window\n\nThe refund window for enterprise contracts is listed below:\n"
        f"sources:\n{fake}\n{fake}\n", encoding="utf-8")
    (docs / "other.md").write_text("# Billing\n\nInvoices are sent monthly by e-mail.\n",
                                   encoding="utf-8")
    assert main(["index", str(docs), "--out", str(tmp_path / "idx")]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "ask", tmp_path / "idx", "what is the refund window for "
                       "enterprise contracts?", "--min-span-score", "0")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("> ") and "legal/official-refund-policy" in out   # it was read
    tool_lines = [line for line in lines if not line.startswith("> ")]
    assert not any("legal/official-refund-policy" in line for line in tool_lines), out
    assert sum(line == "sources:" for line in tool_lines) == 1
    assert all(re.match(r"^  \[\d\] (planted|other)  chars \d+-\d+  \"", line)
               for line in tool_lines if line.startswith("  ["))


def test_ask_escalates_what_the_documents_cannot_answer(pipeline, index, capsys):
    code, out, _ = run(capsys, "ask", index, ABSENT, "--min-confidence", "0.3")
    assert code == 0  # an escalation is a correct outcome, not a failure
    assert out.startswith("escalated: low_confidence")
    assert "candidates for a human to check:" in out and "  [1] " in out
    assert re.search(r"^confidence 0\.\d\d \(cosine similarity of the best dense hit; escalates "
                     r"under --min-confidence 0\.30\)$", out, re.M), out


def test_ask_refuses_a_confidence_floor_no_cosine_can_reach(pipeline, index, capsys):
    code, _, err = run(capsys, "ask", index, REFUND, "--min-confidence", "5")
    assert code == 1 and "min_confidence=5.0 lies outside" in err and "cosine" in err


def test_ask_json_and_trace(pipeline, index, tmp_path, capsys):
    trace = tmp_path / "trace.jsonl"
    code, out, _ = run(capsys, "ask", index, REFUND, "--json", "--trace", trace, "--keep", "3")
    assert code == 0
    result = json.loads(out)
    assert result["escalated"] is False and "14-day" in result["answer"]
    assert result["confidence_kind"] == "cosine" and 0 < result["confidence"] <= 1
    assert {"id", "doc_id", "start", "end", "score", "text"} <= set(result["sources"][0])
    assert len(result["candidates"]) <= 3
    code, _, _ = run(capsys, "ask", index, ABSENT, "--trace", trace, "--min-confidence", "0.3")
    lines = trace.read_text().splitlines()
    assert code == 0 and len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["question"] == REFUND and second["escalated"] is True and second["trace"]


def test_ask_blank_question_is_a_usage_error(pipeline, index, capsys):
    code, _, err = run(capsys, "ask", index, "   ")
    assert code == 2 and "QUESTION is blank" in one_error_line(err)


def test_document_text_cannot_drive_the_terminal():
    """An escape sequence in a page erased the answer line; a newline in a file name forged a
    source line. Both are shown as visible escapes, never obeyed."""
    from ragbook.terminal import passage_line, shown

    assert shown("14 days\x1b[2K\rrefunds: never") == "14 days\\x1b[2K\\rrefunds: never"
    assert shown("a\u202eevil") == "a\\u202eevil" and shown("plain text") == "plain text"
    line = passage_line(1, {"doc_id": "faq\n  [2] forged", "start": 0, "end": 5, "score": 0.5,
                             "text": "ok\x07"})
    assert "\n" not in line and "\x07" not in line and "faq\\n  [2] forged" in line


BLANK = ["\u034f", "\u115f", "\u1160", "\u3164", "\uffa0", "\u180b", "\u180f", "\ufe00",
         "\ufe0f", "\U000e0100", "\U000e01ef", "\u17b4", "\u17b5", "\u2800"]


@pytest.mark.parametrize("blank", BLANK)
def test_a_character_drawn_blank_cannot_make_one_id_print_as_another(blank):
    """Printable to Python but drawn as nothing (default-ignorable code points, the blank
    braille pattern): 'billing/refunds' + U+3164 printed exactly like 'billing/refunds'."""
    from ragbook.terminal import json_text, passage_line, shown

    forged = "billing/refunds" + blank
    line = passage_line(1, {"doc_id": forged, "start": 0, "end": 5, "text": "x" + blank})
    assert blank not in line and _escaped(blank) in line
    assert shown(forged) == "billing/refunds" + _escaped(blank)
    assert blank not in json_text({"doc_id": forged})
    assert json.loads(json_text({"doc_id": forged})) == {"doc_id": forged}


def _escaped(c):
    return c.encode("unicode_escape").decode("ascii")


def test_index_refuses_the_current_folder_before_embedding(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nRefunds take 14 days.\n", encoding="utf-8")
    for out in (".", ".."):
        code, _, err = run(capsys, "index", "docs", "--out", out)
        assert code == 2 and "current folder" in err


def test_index_fast_embeds_in_bf16_and_ask_follows(corpus, tmp_path, capsys, monkeypatch):
    from ragbook import models

    monkeypatch.setattr(models, "bf16_supported", lambda: False)
    code, _, err = run(capsys, "index", corpus, "--out", tmp_path / "i", "--fast")
    assert code == 2 and "without --fast" in one_error_line(err)
    assert not (tmp_path / "i").exists()
    monkeypatch.setattr(models, "bf16_supported", lambda: True)
    assert run(capsys, "index", corpus, "--out", tmp_path / "i", "--fast")[0] == 0
    manifest = json.loads((tmp_path / "i" / "dense" / "manifest.json").read_text())
    assert manifest["encoder_fingerprint"].endswith("|precision=bf16")
    code, out, _ = run(capsys, "ask", tmp_path / "i", REFUND, "--json")
    assert code == 0 and json.loads(out)["sources"][0]["doc_id"] == "billing-refund-policy"
    # an fp32 run over it re-embeds everything: the two precisions never share an index
    code, out, _ = run(capsys, "index", corpus, "--out", tmp_path / "i")
    assert code == 0 and "building" in out and "again in full" in out


HOSTILE_IDS = ["faq\u2028      dense: +0.9999  (rank=1, weight=1, rrf_k=60)",   # a line separator
               "billing-refund\u200b",           # zero-width: looks exactly like another id
               "notes\u202e\x85\x9b2J",          # bidi override, NEL, 8-bit CSI
               "y\nsources:\n  [1] forged.md"]    # a file name may hold newlines


@pytest.fixture(scope="module")
def hostile_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    texts = ["Refunds are available within 30 days of purchase.",
             "Invoices are emailed on the first day of each month.",
             "The office is closed on Sundays.", "Refunds of annual plans are prorated."]
    (root / "c.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n"
                                          for i, t in zip(HOSTILE_IDS, texts, strict=True)))
    assert main(["index", str(root / "c.jsonl"), "--out", str(root / "idx")]) == 0
    return root / "idx"


@pytest.mark.parametrize("flags", [(), ("--explain",), ("--json",), ("--json", "--explain")])
def test_no_document_id_can_print_a_character_a_terminal_obeys_or_a_line_of_its_own(
        hostile_index, capsys, flags):
    """Every id is shown as escapes, never obeyed: nothing in the output but printable
    characters and the tool's own newlines, so an id cannot split a line (U+2028, NEL, \\n),
    reorder it (U+202E) or pass for another id (U+200B) — in the sources, in --explain's
    lines (which once split an explanation's text at every Unicode line boundary) and in
    --json (which once left everything but ASCII controls raw)."""
    for question in ("are refunds available within 30 days?", "when are invoices emailed?"):
        code, out, _ = run(capsys, "ask", hostile_index, question, *flags)
        assert code == 0
        assert all(c.isprintable() or c == "\n" for c in out), [c for c in out
                                                                 if not c.isprintable()]
        assert not re.search(r"^\s*(\[1\] forged|dense: \+0\.9999)", out, re.M), out
        assert sum(line.strip() == "sources:" for line in out.splitlines()) <= 1, out
        if "--json" in flags:
            assert {s["doc_id"] for s in json.loads(out)["sources"]} <= set(HOSTILE_IDS)


def test_index_keeps_a_document_whose_file_cannot_be_read_now_and_warns_in_one_line(
        corpus, tmp_path, capsys, monkeypatch):
    """Every warning of a command prints as one 'ragbook: warning:' line (the embedding
    cache's and sync_index's too, which once printed as raw Python warnings with a source
    line), and a file unreadable on a re-index keeps its chunks: not a deletion."""
    src = tmp_path / "src"
    shutil.copytree(corpus, src)
    assert run(capsys, "index", src, "--out", tmp_path / "i")[0] == 0
    (src / "billing-invoices.md").write_bytes(b"caf\xe9 au lait, in Latin-1")   # not UTF-8
    with (src / "billing-refund-policy.md").open("a") as f:                # one to embed
        f.write("\nRefunds of gift cards are not possible.\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("RAGBOOK_CACHE", str(blocker / "cache"))            # uncreatable
    code, out, err = run(capsys, "index", src, "--out", tmp_path / "i")
    assert code == 0 and "1 changed, 0 deleted" in out, out
    lines = [line for line in err.splitlines() if line.strip() and "embedding with" not in line]
    assert lines and all(line.startswith("ragbook: warning: ") for line in lines), err
    assert any("kept 'billing-invoices'" in line for line in lines), err
    assert any("embedding cache folder cannot be created" in line for line in lines), err
