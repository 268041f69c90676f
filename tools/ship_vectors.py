"""Write (or ``--check``) the shipped vectors of the Python docs' sections for the offline
encoder: ``data/vectors/<cache name>.npz`` (``ragbook.shipped``).

The texts are exactly what ``DenseIndex(Encoder()).build(load_pydocs().documents)`` embeds
(chapters 3, 4, 5 and 10 do), keyed like the embedding cache; the vectors come from the
encoder itself — from your filled cache, else embedded now — so a file written here equals
what this machine computes. Eight texts picked with a fixed seed form the probe every
encoder recomputes before it uses the file. Only the offline encoder's fp32 vectors at the
default input length are shipped (16 MB); nothing else is worth its size: the chapters' other
embeddings take well under a minute each.

    .venv/bin/python tools/ship_vectors.py           # write
    .venv/bin/python tools/ship_vectors.py --check   # file covers today's corpus, probe agrees
"""
import argparse
import hashlib
import io
import sys

import numpy as np

from ragbook import Encoder, models
from ragbook.datasets import load_pydocs
from ragbook.shipped import FOLDER, TOLERANCE, ShippedVectors

PROBE = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    args = parser.parse_args()
    if models.active_profile() != "offline":
        sys.exit("run with RAGBOOK_PROFILE=offline: only the offline encoder's vectors ship")
    encoder = Encoder(show_progress=True)
    texts = list(dict.fromkeys(encoder.format_passage(d.text) for d in load_pydocs().documents))
    path = FOLDER / f"{encoder._cache_name}.npz"
    if args.check:
        shipped = ShippedVectors(path)
        hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        if not shipped.verify(encoder._unit_vectors):
            print(f"{path.name}: probe disagrees with this model")
            return 1
        missing = len(hashes) - len(shipped.take(hashes, encoder._unit_vectors))
        print(f"{path.name}: {len(hashes) - missing}/{len(hashes)} texts shipped, probe "
              f"within {TOLERANCE}")
        return 1 if missing else 0
    vectors = encoder.encode_passages([t[len(encoder.prefixes.passage):] for t in texts])
    rng = np.random.default_rng(0)
    short = [i for i, t in enumerate(texts) if len(t.split()) < 120]  # read whole: no warning
    probe = sorted(rng.choice(short, size=PROBE, replace=False).tolist())
    buf = io.BytesIO()
    np.savez(buf, hashes=np.array([np.frombuffer(hashlib.sha256(t.encode()).digest(), np.uint8)
                                for t in texts]),
             vectors=vectors.astype(np.float32),
             probe_texts=np.array([texts[i] for i in probe]), probe_vectors=vectors[probe])
    FOLDER.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buf.getvalue())
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(texts)} texts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
