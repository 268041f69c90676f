"""The reader and reranker contracts (ragbook.retrieval: Reader, SpanReader, StreamingReader,
Reranker), checked for every reader and every second stage in the package, and the pipeline's
refusal, at construction, of an object that does not fill its role.

Reranker: ``order`` returns at most ``k`` of the hits it was given, best first, ranks from 1,
scores within ``confidence_bounds``; ``cut`` keeps exactly those scoring at least
``min_rerank_score``; ``rerank == cut(order)``. Reader: ``read`` returns an ``Answer`` whose
sources are ids of the hits it was handed; no hits is an abstention. SpanReader: one span list
per hit, each span a verbatim slice of its hit tagged with the hit's id, ``accepts`` the span
floor, and ``read`` answers with the best span exactly when ``accepts`` does. Adding a reader
or a reranker: one line in READERS or RERANKERS."""
import math

import pytest

from ragbook import models
from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.datasets import load_helpcentre
from ragbook.late_interaction import MaxSimReranker
from ragbook.learned_rerank import LearnedReranker
from ragbook.pipeline import Pipeline
from ragbook.readers import ExtractiveReader, GenerativeReader, SentenceReader
from ragbook.rerank import CrossEncoderReranker, WindowScorer
from ragbook.retrieval import (
    CONFIDENCE_KINDS,
    Reader,
    Reranker,
    SpanReader,
    StreamingReader,
)
from ragbook.types import Answer, Hit

QUESTIONS = ["how long is the refund window for enterprise contracts?",
             "can I export my data as CSV on the free plan?",
             "what does RATE_LIMIT_EXCEEDED mean?"]


@pytest.fixture(scope="module")
def helpcentre():
    hc = load_helpcentre()
    return hc, BM25Index().build(chunk_documents(hc.documents, size=800, overlap=100))


@pytest.fixture(scope="module")
def candidates(helpcentre):
    """Ten BM25 candidates per question: a real first stage's output."""
    _, bm25 = helpcentre
    return {q: bm25.search(q, k=10) for q in QUESTIONS}


def _learned(helpcentre):
    hc, bm25 = helpcentre
    train = [q for q in hc.split("dev") if q.gold][:12]
    return LearnedReranker(candidates=10).fit([(q.id, q.text) for q in train],
                                              hc.qrels("dev"), bm25)


RERANKERS = [
    pytest.param(lambda hc: CrossEncoderReranker(), id="cross-encoder-role"),
    pytest.param(lambda hc: CrossEncoderReranker(WindowScorer()), id="window-scorer"),
    pytest.param(lambda hc: MaxSimReranker(), id="maxsim"),
    pytest.param(_learned, id="learned"),
]


@pytest.mark.parametrize("make", RERANKERS)
def test_every_reranker_keeps_the_reranker_contract(make, helpcentre, candidates):
    reranker = make(helpcentre)
    assert isinstance(reranker, Reranker)
    assert reranker.confidence_kind in CONFIDENCE_KINDS
    lo, hi = reranker.confidence_bounds()
    for q, hits in candidates.items():
        ordered = reranker.order(q, hits, k=5)
        assert 0 < len(ordered) <= 5
        assert [h.rank for h in ordered] == list(range(1, len(ordered) + 1))
        assert [h.score for h in ordered] == sorted((h.score for h in ordered), reverse=True)
        assert {h.id for h in ordered} <= {h.id for h in hits}
        assert all(lo <= h.score <= hi and not math.isnan(h.score) for h in ordered)
        assert reranker.cut(ordered) == ordered                    # no floor: nothing cut
        floor = ordered[len(ordered) // 2].score
        strict = reranker.with_settings(min_rerank_score=floor)
        assert strict.cut(ordered) == [h for h in ordered if h.score >= floor]
        assert strict.rerank(q, hits, k=5) == strict.cut(strict.order(q, hits, k=5))
    assert reranker.order(QUESTIONS[0], [], k=5) == []


def _extractive():
    import torch
    from transformers import AutoTokenizer, BertForQuestionAnswering

    torch.manual_seed(0)      # the packaged MiniLM with an untrained QA head: real mechanics
    path = models.resolve("encoder", "offline").path
    return ExtractiveReader((BertForQuestionAnswering.from_pretrained(path).eval(),
                             AutoTokenizer.from_pretrained(path)), max_length=128, overlap=32)


def _generative():
    from ragbook.llm import LocalLLM

    return GenerativeReader(LocalLLM(max_new_tokens=40), keep=2)


READERS = [
    pytest.param(lambda: SentenceReader(), id="sentence"),
    pytest.param(lambda: SentenceReader(min_span_score=0.5), id="sentence-with-floor"),
    pytest.param(_extractive, id="extractive"),
    pytest.param(_generative, id="generative", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("make", READERS)
def test_every_reader_keeps_the_reader_contract(make, candidates):
    reader = make()
    assert isinstance(reader, Reader)
    q = QUESTIONS[0]
    hits = candidates[q][:3]
    answer = reader.read(q, hits)
    assert isinstance(answer, Answer)
    assert set(answer.sources) <= {h.id for h in hits}
    assert (answer.text is None) == (answer.reason is not None)
    empty = reader.read(q, [])
    assert empty.text is None and empty.reason == "no_candidates"
    if isinstance(reader, SpanReader):
        per_hit = reader.hits_spans(q, hits)
        assert len(per_hit) == len(hits)
        for hit, spans in zip(hits, per_hit, strict=True):
            alone = reader.hit_spans(q, hit)     # batched or not: the same spans (scores
            assert [(s.text, s.start, s.end, s.source) for s in spans] == [  # to rounding)
                (s.text, s.start, s.end, s.source) for s in alone]
            assert all(math.isclose(a.score, b.score, abs_tol=1e-5)
                       for a, b in zip(spans, alone, strict=True))
            for s in spans:
                assert s.source == hit.id and hit.text[s.start:s.end] == s.text
        best = max((s for spans in per_hit for s in spans), key=lambda s: s.score)
        if reader.accepts(best):
            assert (answer.text, answer.sources) == (best.text, (best.source,))
        else:
            assert answer.text is None and answer.reason == "low_confidence"
    if isinstance(reader, StreamingReader):
        streamed = reader.stream(q, hits)
        pieces = list(streamed)
        assert streamed.result == answer
        if answer.text is not None:
            assert "".join(pieces) == answer.text


# -- the pipeline checks each role when it is built --------------------------------------------
class NoCut:
    """Orders but cannot cut: not a reranker."""

    confidence_kind = "rerank"
    min_rerank_score = None

    def order(self, query, hits, k=5):
        return list(hits)[:k]

    def rerank(self, query, hits, k=5):
        return list(hits)[:k]

    def confidence_bounds(self):
        return -math.inf, math.inf


class Mute:
    """Has no read: not a reader."""

    def answer(self, question, hits):
        return Answer(None, reason="mute")


def test_a_wrong_object_fails_when_the_pipeline_is_built_naming_its_role(helpcentre):
    _, bm25 = helpcentre
    with pytest.raises(TypeError, match=r"the reranker must satisfy .*Reranker.*'NoCut' has "
                                        r"no cut"):
        Pipeline(bm25, reranker=NoCut(), reader=SentenceReader())
    with pytest.raises(TypeError, match=r"the reader must satisfy .*Reader.*'Mute' has no read"):
        Pipeline(bm25, reader=Mute())
    with pytest.raises(TypeError, match=r"the retriever must satisfy .*Retriever.*'list' has no "
                                        r"search, retrieve"):
        Pipeline([Hit("a", 1.0, 1)], reader=SentenceReader())


def test_the_pipeline_dispatches_on_the_reader_protocols():
    """A span reader is read by the pipeline (spans in prepare); a generative reader is not a
    span reader but streams."""
    assert isinstance(SentenceReader(), SpanReader) and not isinstance(SentenceReader(),
                                                                       StreamingReader)
    generative = GenerativeReader(llm=object())
    assert isinstance(generative, StreamingReader) and not isinstance(generative, SpanReader)
