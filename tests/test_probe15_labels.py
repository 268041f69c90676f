"""Hostile probe, session 14: a user's own labels file for ``ragbook eval``, ``tune`` and
``calibrate``. Each test is one defect class that was open before this round:

* JSONL split at Unicode line breaks and a UTF-8 byte-order mark refused (valid files lost);
* a JSON array file, an empty gold id: errors that did not say what to write instead;
* an infinite relevance grade turned nDCG into NaN;
* one question asked twice landed on both sides of a tuning split (leakage);
* ``--save`` / ``--out`` written over the questions file, the baseline being gated, or
  into the index;
* gold ids the index lacks (a suffix kept, another case, a folder): tune and calibrate
  wrote settings from them silently, and eval's warning did not say the id meant;
* a baseline whose labels have since changed: the gate blamed retrieval for a label edit.
"""
import json
import math

import pytest

from ragbook.cli import main
from ragbook.evaluate import evaluate
from ragbook.label_checks import unknown_gold
from ragbook.questions import read_questions
from ragbook.tuning import Pools, Setting, tune
from ragbook.types import Hit


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ragbook: error: "), err
    return lines[0]


# -- reading the file (no model) -------------------------------------------------------------

def test_jsonl_is_split_at_newlines_only_and_a_byte_order_mark_is_skipped(tmp_path):
    # json.dumps(ensure_ascii=False) writes U+2028 and U+0085 raw inside strings: still JSONL
    rows = [{"id": "q1", "question": "refunds\u2028after 30 days?", "gold": ["a"]},
            {"id": "q2", "question": "cancel\u0085now", "gold": ["b"]}]
    text = "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\r\n"
    path = tmp_path / "q.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))          # Notepad / Excel
    assert read_questions(path) == [("q1", "refunds\u2028after 30 days?", ("a",)),
                                     ("q2", "cancel\u0085now", ("b",))]
    path.write_bytes(text.encode("utf-16"))
    with pytest.raises(ValueError, match="is UTF-16LE text .* iconv -f utf-16le -t utf-8"):
        read_questions(path)


def test_a_json_array_and_an_empty_gold_id_say_what_to_write(tmp_path):
    path = tmp_path / "q.json"
    path.write_text(json.dumps([{"id": "q1", "question": "refunds?", "gold": ["a"]}], indent=2))
    with pytest.raises(ValueError, match=r"line 1 .*one JSON array.*jq -c '\.\[\]'"):
        read_questions(path)
    write_rows(path, [{"id": "q1", "question": "refunds?", "gold": [""]}])
    with pytest.raises(ValueError, match=r"line 1: field 'gold' .*non-empty.*\"gold\": \[\]"):
        read_questions(path)


def test_an_infinite_relevance_grade_is_refused_not_a_nan_metric():
    with pytest.raises(ValueError, match=r"qrels\['q'\]\['a'\] is inf: relevance must be a "
                                         r"finite number"):
        evaluate({"q": {"a": math.inf}}, {"q": {"a": 1.0}}, "ndcg@10")


def test_gold_ids_the_index_lacks_come_with_the_id_meant():
    known = ["billing/refund-policy", "account-export-csv", "caf\u00e9-plan", "a/x", "b/x"]
    questions = [("q1", "?", ("refund-policy",)), ("q2", "?", ("Account-Export-CSV.md",)),
                 ("q3", "?", ("cafe\u0301-plan",)), ("q4", "?", ("docs/billing/refund-policy",)),
                 ("q5", "?", ("x",)), ("q6", "?", ("account-export-csv",))]
    assert unknown_gold(questions, known) == [
        ("q1", "refund-policy", "billing/refund-policy"),
        ("q2", "Account-Export-CSV.md", "account-export-csv"),
        ("q3", "cafe\u0301-plan", "caf\u00e9-plan"),
        ("q4", "docs/billing/refund-policy", "billing/refund-policy"),
        ("q5", "x", None)]                                  # a/x or b/x: not guessed


# -- tuning splits (planted pools, no model) -------------------------------------------------

def _pools(qids):
    """Dense and hybrid put every question's gold document first: nothing to choose."""
    def hits(q):
        return [Hit(f"{q}-gold", 1.0, 1, doc_id=f"{q}-gold"),
                Hit(f"{q}-other", 0.5, 2, doc_id=f"{q}-other")]
    first = {name: {q: hits(q) for q in qids} for name in ("dense", "hybrid (default)")}
    return Pools(first, {}, {q: {f"{q}-gold": 1} for q in qids})


def test_a_question_asked_twice_is_never_on_both_sides_of_a_tuning_split():
    space = (Setting("dense", "dense", rank=0), Setting("hybrid (default)", "hybrid", rank=2))
    texts = {f"q{i:02d}": f"question number {i}" for i in range(12)}
    twins = {"q90": "Question number 3?", "q91": "QUESTION  number 7", "q92": "question number 10"}
    questions = [(q, t, (f"{q}-gold",)) for q, t in {**texts, **twins}.items()]
    report = tune(None, questions, folds=3, seed=0, n=200, progress=False,
                  space=space, pools=_pools([q for q, _, _ in questions]))
    home = {q: i for i, fold in enumerate(report.folds) for q in fold}
    assert sorted(home) == sorted(q for q, _, _ in questions)           # each held out once
    assert home["q03"] == home["q90"] and home["q07"] == home["q91"] \
        and home["q10"] == home["q92"]
    from ragbook.questions import repeated_questions  # what eval warns about
    assert sorted(map(sorted, repeated_questions(questions))) == [
        ["q03", "q90"], ["q07", "q91"], ["q10", "q92"]]


# -- the commands on a real index (loads the encoder: run under the heavy lock) -------------

@pytest.fixture(scope="module")
def index(article_index):
    return article_index()


def test_outputs_never_overwrite_what_the_command_reads(index, six_questions, tmp_path, capsys):
    questions = six_questions[1]
    labels = questions.read_text()
    base = tmp_path / "base.json"
    assert main([str(a) for a in ("eval", index, questions, "--save", base)]) == 0
    kept = base.read_text()
    for argv, what in (
            (["eval", index, questions, "--save", questions], "is the questions file"),
            (["eval", index, questions, "--save", base, "--against", base],
             "is the baseline --against reads"),
            (["tune", index, questions, "--out", questions, "--folds", "2"],
             "is the questions file"),
            (["tune", index, questions, "--out", index / "tuned.json", "--folds", "2"],
             "lies inside the index"),
            (["calibrate", index, questions, "--out", questions], "is the questions file")):
        capsys.readouterr()
        assert main([str(a) for a in argv]) == 1, argv
        line = error_line(capsys.readouterr().err)
        assert what in line and "give --" in line, line
        assert questions.read_text() == labels and base.read_text() == kept
    assert not (index / "tuned.json").exists()


def test_tune_and_calibrate_refuse_gold_ids_the_index_lacks(index, six_questions, tmp_path,
                                                            capsys):
    rows = [{"id": q, "question": t, "gold": [g]} for q, t, g in six_questions[0]]
    rows[0]["gold"] = ["Billing-Refund-Policy.md"]          # kept the suffix, other case
    path = write_rows(tmp_path / "q.jsonl", rows)
    for command in (["tune", index, path, "--out", tmp_path / "t.json", "--folds", "2"],
                    ["calibrate", index, path, "--out", tmp_path / "t.json"]):
        capsys.readouterr()
        assert main([str(a) for a in command]) == 1
        line = error_line(capsys.readouterr().err)
        assert "'Billing-Refund-Policy.md' (did you mean 'billing-refund-policy'?)" in line
        assert not (tmp_path / "t.json").exists()
    assert main(["eval", str(index), str(path)]) == 0           # measuring: a warning
    assert "did you mean 'billing-refund-policy'" in capsys.readouterr().err


def test_the_gate_does_not_blame_retrieval_for_a_changed_label(index, six_questions, tmp_path,
                                                               capsys):
    questions, base = six_questions[1], tmp_path / "base.json"
    assert main(["eval", str(index), str(questions), "--save", str(base)]) == 0
    rows = [{"id": q, "question": t, "gold": ["billing-invoices"]}       # relabelled: 5 of 6
            for q, t, _ in six_questions[0]]
    relabelled = write_rows(tmp_path / "q2.jsonl", rows)
    capsys.readouterr()
    assert main(["eval", str(index), str(relabelled), "--against", str(base)]) == 0
    out = capsys.readouterr().out
    assert "(5 questions have another text or gold ids than in the baseline, not compared" in out
    assert "pass: Δmrr@10 +0.000" in out and "over 1 questions" in out
    rows[3]["gold"] = ["account-export-csv"]                           # now all 6 changed
    write_rows(relabelled, rows)
    assert main(["eval", str(index), str(relabelled), "--against", str(base)]) == 1
    assert "save a new baseline with --save" in error_line(capsys.readouterr().err)
