"""Shipped vectors (``ragbook.shipped``, issue 34 part 2): a first run takes the Python docs'
vectors from data instead of embedding them, but only after the encoder's own model has
reproduced the file's probe; a file made by another model is refused with a warning."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ragbook import Encoder, shipped
from ragbook.datasets import load_pydocs
from ragbook.llm import LocalLLM
from ragbook.shipped import TOLERANCE, ShippedReplies, ShippedVectors, text_key

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from ship_vectors import SETS, file_of  # noqa: E402  (the text sets the files are made from)


@pytest.fixture
def encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))    # an empty cache: a first run
    return Encoder(show_progress=False)


@pytest.mark.parametrize(("role", "part"), sorted(SETS))
def test_the_files_cover_todays_texts(role, part, tmp_path, monkeypatch):
    """Every text of each shipped set is in its file (fails after a corpus, chapter 3's
    demo or chapter 6's retrieval changes: rerun ``tools/ship_vectors.py``)."""
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    encoder = Encoder(role, show_progress=False)
    path = file_of(encoder, part)
    found = [f for f in shipped.shipped_for(encoder._cache_name) if f.path == path]
    assert found, f"no shipped vectors {path.name}: run tools/ship_vectors.py"
    texts = {encoder.format_passage(t) for t in SETS[role, part][0]()}
    hashes = [text_key(t) for t in texts]
    assert len(found[0].take(hashes, encoder._unit_vectors)) == len(hashes)


def test_float16_files_read_back_as_unit_vectors_close_to_the_models(encoder):
    """A file stored in float16 (the windows: the size budget) reads back as unit float32
    rows whose cosine with the model's own vector is within the probe's tolerance."""
    files = [f for f in shipped.shipped_for(encoder._cache_name) if f.path.name.endswith(
        ".windows.npz")]
    assert files and np.load(files[0].path)["vectors"].dtype == np.float16
    texts = SETS["encoder", "windows"][0]()[:: 500][:12]
    vectors = encoder.encode_passages(texts)
    assert encoder.cache_misses == 0                  # every one from the file
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    own = encoder._unit_vectors(texts)
    assert np.min(np.einsum("ij,ij->i", vectors, own)) >= 1 - 1e-5


def test_a_first_run_takes_shipped_vectors_equal_to_the_models(encoder):
    docs = load_pydocs().documents[:40]
    found = shipped.shipped_for(encoder._cache_name)[0]
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


# -- the generator's shipped replies (data/replies) -------------------------------------------

REAL_REPLIES = shipped.REPLIES                 # before any test swaps it
REQUEST = [{"role": "user", "content": "What does the Hub's status light mean when it blinks?"}]


@pytest.fixture
def replies(tmp_path, monkeypatch):
    """An empty cache, and ``data/replies`` swapped for an empty folder the test fills."""
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(shipped, "REPLIES", tmp_path / "replies")
    monkeypatch.setattr(shipped, "_REPLIES", {})
    (tmp_path / "replies").mkdir()
    return tmp_path / "replies"


def counted(llm):
    """Count the times ``llm`` runs its model."""
    run, llm.runs = llm._run, []
    llm._run = lambda *a, **kw: llm.runs.append(a) or run(*a, **kw)
    return llm


def write_replies(llm, rows, probe_reply=None):
    path = shipped.replies_file(llm.identity)         # inside the swapped folder
    real = json.loads((REAL_REPLIES / path.name).read_text(encoding="utf-8"))
    probe = dict(real["probe"], **({"reply": probe_reply} if probe_reply else {}))
    path.write_text(json.dumps({"model": llm.identity, "probe": probe, "rows": rows}))
    return path


def test_the_books_replies_are_shipped_and_this_model_writes_their_probe():
    llm = LocalLLM(cache=False)
    found = ShippedReplies(shipped.replies_file(llm.identity))
    rows = json.loads(found.path.read_text(encoding="utf-8"))["rows"]
    assert len(rows) >= 20, "rerun tools/ship_replies.py after the book's LLM chapters"
    assert found.get(next(iter(rows)), llm._run) == rows[next(iter(rows))]
    assert found.usable is True


def test_a_first_run_takes_a_shipped_reply_after_one_probe(replies):
    llm = counted(LocalLLM())
    key = llm._request(REQUEST, 32, [])[2]
    write_replies(llm, {key: "A reply that came from the file."})
    assert llm.generate(REQUEST, max_new_tokens=32) == "A reply that came from the file."
    assert len(llm.runs) == 1                          # the probe, nothing else
    assert "".join(llm.stream(REQUEST, max_new_tokens=32)) == "A reply that came from the file."
    again = counted(LocalLLM())                        # cached now: no probe, no model
    assert again.generate(REQUEST, max_new_tokens=32) == "A reply that came from the file."
    assert again.runs == []


def test_replies_whose_probe_this_model_does_not_write_are_refused(replies):
    llm = counted(LocalLLM())
    key = llm._request(REQUEST, 16, [])[2]
    write_replies(llm, {key: "A reply that came from the file."}, probe_reply="Not what it says.")
    with pytest.warns(UserWarning, match="replies .* are not used.*probe.*other weights"):
        reply = llm.generate(REQUEST, max_new_tokens=16)
    assert reply != "A reply that came from the file." and len(llm.runs) == 2


def test_a_damaged_replies_file_is_refused_and_says_how_to_restore_it(replies):
    llm = LocalLLM()
    shipped.replies_file(llm.identity).write_text('{"rows": {"ab', encoding="utf-8")
    with pytest.warns(UserWarning, match="replies .* are not used.*cannot be read.*checkout"):
        assert llm._known("ab") is None
