"""Shipped vectors (``ragbook.shipped``, issue 34 part 2): a first run takes the Python docs'
vectors from data instead of embedding them, but only after the encoder's own model has
reproduced the file's probe; a file made by another model is refused with a warning."""
import sys
from pathlib import Path

import numpy as np
import pytest

from ragbook import Encoder, shipped
from ragbook.datasets import load_pydocs
from ragbook.shipped import TOLERANCE, ShippedVectors, text_key

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from ship_vectors import SETS  # noqa: E402  (the text sets the files are made from)


@pytest.fixture
def encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))    # an empty cache: a first run
    return Encoder(show_progress=False)


@pytest.mark.parametrize("role", sorted(SETS))
def test_the_files_cover_todays_texts(role, tmp_path, monkeypatch):
    """Every text of each shipped set is in its file (fails after a corpus or chapter 3's
    demo changes: rerun ``tools/ship_vectors.py``)."""
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    encoder = Encoder(role, show_progress=False)
    found = shipped.shipped_for(encoder._cache_name)
    assert found is not None, f"no shipped vectors for {role}: run tools/ship_vectors.py"
    texts = {encoder.format_passage(t) for t in SETS[role]()}
    hashes = [text_key(t) for t in texts]
    assert len(found.take(hashes, encoder._unit_vectors)) == len(hashes)


def test_a_first_run_takes_shipped_vectors_equal_to_the_models(encoder):
    docs = load_pydocs().documents[:40]
    found = shipped.shipped_for(encoder._cache_name)
    before = found.taken
    vectors = encoder.encode_passages([d.text for d in docs])
    assert found.taken - before == len({d.text for d in docs})    # none embedded ...
    assert encoder.cache_misses == 0
    own = encoder._unit_vectors([d.text for d in docs])           # ... and as the model makes them
    assert np.min(np.einsum("ij,ij->i", vectors, own)) >= 1 - TOLERANCE
    again = Encoder(show_progress=False)                          # and cached for next time
    assert np.array_equal(again.encode_passages([d.text for d in docs]), vectors)


def test_a_file_from_another_model_is_refused(encoder, tmp_path):
    texts = ["Lists are mutable sequences.", "A tuple is an immutable sequence of values."]
    other = np.eye(encoder.dim, dtype=np.float32)[:2]              # not this model's vectors
    path = tmp_path / "other.npz"
    np.savez(path, hashes=np.zeros((2, 32), np.uint8), vectors=other,
             probe_texts=np.array(texts), probe_vectors=other)
    file = ShippedVectors(path)
    with pytest.warns(UserWarning, match="other.npz are not used.*cosine.*another model"):
        assert file.take(["00" * 32], encoder._unit_vectors) == {}
    assert file.usable is False and file.taken == 0


def test_a_damaged_file_is_refused_and_says_how_to_restore_it(encoder, tmp_path):
    path = tmp_path / "damaged.npz"
    path.write_bytes(b"PK\x03\x04 cut short")
    file = ShippedVectors(path)
    with pytest.warns(UserWarning, match="damaged.npz are not used.*cannot be read.*checkout"):
        assert file.take(["00" * 32], encoder._unit_vectors) == {}
