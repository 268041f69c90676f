"""``ragbook calibrate``: chapter 9's threshold chosen on the user's labels from the shell,
written into a settings file that ``ragbook ask --settings`` applies."""
import json

import pytest

from ragbook.cli import main
from ragbook.commands import load_index
from ragbook.pipeline import Pipeline
from ragbook.result import outcome
from ragbook.tuned import load_settings

# labelled unanswerable (no gold): the pipeline answers the first two from a near page (wrong)
OFF_TOPIC = (("u1", "can I get a refund on a monthly plan after 60 days?"),
             ("u2", "can I export my invoices as csv?"),
             ("u3", "what is the boiling point of mercury?"))


@pytest.fixture
def labelled_file(six_questions, tmp_path):
    """The six help-centre questions plus three labelled unanswerable (no gold)."""
    triples, path = six_questions
    with path.open("a") as fh:
        for q, text in OFF_TOPIC:
            fh.write(json.dumps({"id": q, "question": text, "gold": []}) + "\n")
    return triples, path


def test_calibrate_writes_the_threshold_pipeline_calibrate_chooses(article_index, labelled_file,
                                                                   tmp_path, capsys):
    triples, questions = labelled_file
    index, out = article_index(), tmp_path / "calibrated.json"
    assert main(["calibrate", str(index), str(questions), "--out", str(out),
                 "--wrong-cost", "2"]) == 0
    printed = capsys.readouterr().out
    saved = json.loads(out.read_text())["calibration"]
    # the reference: the same rule through the Python API on the same questions
    pipeline = Pipeline(load_index(index))
    texts = [t for _, t, _ in triples] + [t for _, t in OFF_TOPIC]
    golds = [(g,) for *_, g in triples] + [()] * len(OFF_TOPIC)

    class Q:
        def __init__(self, gold):
            self.gold = gold

    prepared = [pipeline.prepare(t) for t in texts]
    chosen = pipeline.calibrate(prepared, [Q(g) for g in golds], verbose=False)
    assert saved["min_confidence"] == pytest.approx(chosen.min_confidence)
    assert saved["min_confidence_kind"] == "cosine"
    outs = [outcome(chosen.decide(p), g) for p, g in zip(prepared, golds, strict=True)]
    assert saved["counts"] == {o: outs.count(o) for o in ("right", "wrong", "escalated")}
    assert f"escalated {outs.count('escalated')} of 9" in printed
    # ask --settings applies it: an off-topic question under the threshold is handed over
    loaded = load_settings(out, load_index(index))
    assert loaded["min_confidence"] == pytest.approx(chosen.min_confidence)
    below = next((t for t, p in zip(texts, prepared, strict=True)
                  if p.confidence is not None and p.confidence < chosen.min_confidence), None)
    assert below is not None, "no question under the calibrated threshold: the test is moot"
    assert main(["ask", str(index), below, "--settings", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["escalated"] and result["reason"] == "low_confidence"


def test_calibrate_with_a_target_error_prints_the_promise(article_index, labelled_file,
                                                          tmp_path, capsys):
    _, questions = labelled_file
    out = tmp_path / "promised.json"
    assert main(["calibrate", str(article_index()), str(questions), "--out", str(out),
                 "--target-error", "0.5", "--probability", "0.9"]) == 0
    printed = capsys.readouterr().out
    saved = json.loads(out.read_text())["calibration"]
    assert "target_error 0.5" in saved["rule"] and saved["guarantee"]
    assert saved["guarantee"] in printed


def test_calibrate_refuses_both_rules_and_other_indexes(article_index, labelled_file, tmp_path,
                                                        capsys):
    _, questions = labelled_file
    index, out = article_index(), tmp_path / "c.json"
    assert main(["calibrate", str(index), str(questions), "--out", str(out), "--wrong-cost",
                 "1", "--target-error", "0.2"]) == 1
    assert "not both" in capsys.readouterr().err
    assert main(["calibrate", str(index), str(questions), "--out", str(out)]) == 0
    other = article_index(without=("account-export-csv",))
    assert main(["ask", str(other), "refund window?", "--settings", str(out)]) == 1
    assert "corpus fingerprint" in capsys.readouterr().err
