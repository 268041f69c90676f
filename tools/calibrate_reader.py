"""Calibrate the offline extractive reader's abstention threshold — the value shipped as
``ragbook.readers.OFFLINE_MIN_SPAN_SCORE``.

The threshold is a cosine under one encoder, so it means something only for that model: this
script calibrates ``SentenceReader``, with the other settings the offline default ships
(``default_extractive_reader("offline")``: answer units, references skipped, the rank
prior), over the offline profile's encoder (all-MiniLM-L6-v2) on
the help-centre reading tasks of the **dev** split (``calibrate_min_span_score``: the threshold
that maximises mean F1, unanswerable tasks included) and reports it on the **test** split,
next to the same reader with no threshold (what ``min_span_score=None`` gives).

    RAGBOOK_PROFILE=offline .venv/bin/python tools/calibrate_reader.py

Paste the printed threshold into ``OFFLINE_MIN_SPAN_SCORE`` and the table into
docs/benchmarks.md.
"""
from ragbook import Encoder, models
from ragbook.datasets import load_reading_tasks
from ragbook.evaluate import reading_report
from ragbook.readers import SentenceReader, calibrate_min_span_score, default_extractive_reader


def report(name: str, reader, tasks) -> None:
    """One row: abstention rate over all tasks, then ``reading_report``'s main rates."""
    answers = [reader.read(t.question, t.passages) for t in tasks]
    r = reading_report(tasks, answers)
    abstained = sum(a.text is None for a in answers) / len(answers)
    print(f"{name:28s} {abstained:10.3f} {r['answered']:8.3f} {r['right source']:12.3f} "
          f"{r['HasAns F1']:9.3f} {r['NoAns acc']:9.3f} {r['F1']:6.3f}")


if __name__ == "__main__":
    encoder = Encoder(show_progress=False)
    print(f"profile {models.active_profile()}, encoder {encoder.model_id}")
    dev, test = load_reading_tasks("helpcentre", "dev"), load_reading_tasks("helpcentre", "test")
    for name, tasks in (("dev", dev), ("test", test)):
        print(f"{name}: {len(tasks)} reading tasks "
              f"({sum(t.gold is None for t in tasks)} unanswerable)")
    # the shipped reader's settings (units, references, rank prior), its floor left open
    shipped = default_extractive_reader("offline", min_span_score=None).settings(deep=False)
    shipped = {k: v for k, v in shipped.items() if k not in ("encoder", "min_span_score")}
    print(f"SentenceReader settings: {shipped}")
    calibrated = SentenceReader(encoder, **shipped)
    threshold = calibrate_min_span_score(calibrated, dev)
    print(f"min_span_score calibrated on dev (max mean F1): {threshold!r}\n")
    print(f"{'test split':28s} {'abstained':>10s} {'answered':>8s} {'right source':>12s} "
          f"{'HasAns F1':>9s} {'NoAns acc':>9s} {'F1':>6s}")
    report("no threshold (None)", SentenceReader(encoder, **shipped), test)
    report(f"min_span_score {threshold:.4f}", calibrated, test)
