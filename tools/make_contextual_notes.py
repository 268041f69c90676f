"""Write data/helpcentre/contextual_notes.jsonl: one LLM-written context note per help-centre
chunk, so chapter 10 (and CI) never has to generate them.

The chunks are the ones every chapter evaluates, ``chunk_documents(hc.documents, 256, 32)``;
the notes are written by ``ragbook.contextual.LLMContext`` with the offline profile's local
generator (SmolLM2-135M-Instruct, greedy). The shipped file took ~70 min (8.9 s per note)
at ``nice -n 19`` on a 2-core machine busy with other jobs; one thread per process
(``OMP_NUM_THREADS=1``) was ~5x faster there than two. Each line is stamped with the
generator's identity (model name, a hash of its weights, the prompt):
``LLMContext().load_notes(path)`` takes only lines made by the same generator, so with other
weights (another profile, ``RAGBOOK_LLM_*`` endpoint) the notes are simply generated again.

    OMP_NUM_THREADS=1 nice -n 19 python tools/make_contextual_notes.py
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAGBOOK_PROFILE", "offline")

from ragbook.chunking import chunk_documents  # noqa: E402
from ragbook.contextual import LLMContext  # noqa: E402
from ragbook.datasets import load_helpcentre  # noqa: E402

OUT = ROOT / "data" / "helpcentre" / "contextual_notes.jsonl"


def main() -> int:
    hc = load_helpcentre()
    chunks = chunk_documents(hc.documents, size=256, overlap=32)
    notes = LLMContext()
    t = time.perf_counter()
    notes.save_notes(OUT, chunks, hc.documents)
    seconds = time.perf_counter() - t
    print(f"{len(chunks)} notes by {notes.llm.name} in {seconds:.0f} s "
          f"({seconds / len(chunks):.2f} s per note; cache hits {notes.cache.hits}) -> "
          f"{OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
