"""Write (or ``--check``) the shipped MaxSim scores (``ragbook.shipped``):
``data/vectors/maxsim__<encoder fingerprint>.npz``, the MaxSim of every (question, passage)
pair the book's second stage scores, so that a first run does not read their tokens again
(issue 34: from an empty cache, chapter 9 spent over a minute of each run on 2 Intel Xeon
cores computing the token vectors of ~3,500 Python-docs sections).

The scores come from a cache folder that only the book has written MaxSim scores to: run the
chapters and solutions with ``RAGBOOK_CACHE`` set to a new folder whose ``embeddings`` holds
a copy of your filled vector cache (vectors are not scores; the copy leaves your own MaxSim
store out), then ship that folder's scores::

    mkdir -p /tmp/book/embeddings /tmp/book/cache
    cp ~/.cache/ragbook/embeddings/[!m]*.sqlite /tmp/book/embeddings/
    cp ~/.cache/ragbook/cache/{generations,contextual}.sqlite /tmp/book/cache/   # LLM notes
    ln -s ~/.cache/ragbook/models /tmp/book/models
    RAGBOOK_CACHE=/tmp/book .venv/bin/python -m pytest tests/test_book.py -k "not planted"
    .venv/bin/python tools/ship_scores.py /tmp/book          # write
    .venv/bin/python tools/ship_scores.py --check            # the probe agrees

The probe is four help-centre pairs scored by the model now, with its cache off.
"""
import sqlite3
import sys

import numpy as np
from shipping import arguments, verdict

from ragbook import Encoder
from ragbook.datasets import load_helpcentre
from ragbook.late_interaction import MaxSimScorer
from ragbook.shipped import FOLDER, ShippedScores


def probe_pairs() -> list[tuple[str, str]]:
    """Four fixed (question, passage) pairs: the first dev questions with their gold page."""
    hc = load_helpcentre()
    return [(q.text, hc.doc(q.gold[0]).text[:1500]) for q in hc.split("dev")[:4]]


def main() -> int:
    args = arguments(__doc__, "the RAGBOOK_CACHE folder of a run of the book",
                     "second stage's scores")
    scorer = MaxSimScorer(Encoder(cache=False, show_progress=False))
    _, name = scorer._late_store()
    path = FOLDER / f"{name}.npz"
    if args.check:
        return verdict(path, ShippedScores(path).verify(scorer._maxsim_rows))
    store = args.folder / "embeddings" / f"{name}.sqlite"
    if not store.is_file():
        sys.exit(f"no MaxSim scores in {store}: run the book there first")
    rows = sqlite3.connect(store).execute("SELECT h, v FROM vec ORDER BY h").fetchall()
    pairs = probe_pairs()
    np.savez(path, hashes=np.frombuffer(b"".join(bytes.fromhex(h) for h, _ in rows),
                                        np.uint8).reshape(-1, 32),
             vectors=np.frombuffer(b"".join(v for _, v in rows), np.float32).reshape(-1, 1),
             probe_texts=np.array(pairs), probe_vectors=scorer._maxsim_rows(pairs))
    print(f"wrote {path} ({len(rows)} scores, {path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
