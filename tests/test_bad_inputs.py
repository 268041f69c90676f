"""The probe of bad inputs (issue: "go through every public function"), kept as a test: each
public entry point gets a clear error naming the value and the fix, or a documented result."""
import math

import numpy as np
import pytest

from ragbook import (
    BM25Index,
    Chunk,
    CrossEncoderReranker,
    DenseIndex,
    Document,
    Encoder,
    ExtractiveReader,
    FaissStore,
    GenerativeReader,
    HybridRetriever,
    LocalLLM,
    RecursiveSplitter,
    SentenceReader,
    chunking,
    evaluate,
    fusion,
    load_pydocs,
    load_reader_set,
    similarity,
)
from ragbook.types import Hit

NAN = math.nan
HIT = Hit("a", 1.0, 1, text="Refunds take five days.")

ERRORS = [
    ("Document id ''", lambda: Document("", "x"), ValueError, "non-empty string"),
    ("Document text None", lambda: Document("a", None), TypeError, "must be a str"),
    ("Document metadata list", lambda: Document("a", "x", metadata=[1]), TypeError, "mapping"),
    ("Chunk offsets reversed", lambda: Chunk("a", "d", "xy", 3, 1), ValueError, "start <= end"),
    ("Hit rank 0", lambda: Hit("a", 1.0, 0), ValueError, "counting from 1"),
    ("Hit rank True", lambda: Hit("a", 1.0, True), ValueError, "counting from 1"),
    ("Hit score NaN", lambda: Hit("a", NAN, 1), ValueError, "not NaN"),
    ("Hit score str", lambda: Hit("a", "1", 1), ValueError, "must be a number"),
    ("window size 0", lambda: chunking.sliding_windows(10, 0, 0), ValueError, "size must be >= 1"),
    ("window overlap = size", lambda: chunking.sliding_windows(10, 4, 4), ValueError, "overlap"),
    ("window size 4.5", lambda: chunking.sliding_windows(10, 4.5, 1), TypeError, "whole number"),
    ("chunk_documents(None)", lambda: chunking.chunk_documents(None), TypeError,
     "list of Document"),
    ("chunk_documents(str)", lambda: chunking.chunk_documents("text"), TypeError,
     "list of Document"),
    ("split(None)", lambda: RecursiveSplitter().split(None), TypeError, "takes a Document"),
    ("cosine dims", lambda: similarity.cosine([1, 0, 0], [1, 0]), ValueError, "dimensions differ"),
    ("cosine NaN", lambda: similarity.cosine([NAN, 0], [1, 0]), ValueError, "NaN"),
    ("metric typo", lambda: evaluate.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, ["recal@5"]),
     ValueError, "unknown metric 'recal@5'"),
    ("metric @0", lambda: evaluate.evaluate({"q": {"d": 1}}, {"q": {"d": 1.0}}, "recall@0"),
     ValueError, "K >= 1"),
    ("NaN in a run", lambda: evaluate.evaluate({"q": {"d": 1}}, {"q": {"d": NAN}}, "recall@5"),
     ValueError, "'d' NaN"),
    ("rrf(None)", lambda: fusion.reciprocal_rank_fusion(None), ValueError, "at least one ranking"),
    ("rrf of ints", lambda: fusion.reciprocal_rank_fusion([[1, 2]]), TypeError, "Hit objects"),
    ("rrf_k NaN", lambda: fusion.reciprocal_rank_fusion([[HIT]], rrf_k=NAN), ValueError, "rrf_k"),
    ("blend weight NaN", lambda: fusion.score_blend([[HIT]], weights=[NAN]), ValueError, "weight"),
    ("Encoder max_length 0", lambda: Encoder(max_length=0), ValueError, "max_length"),
    ("Encoder role None", lambda: Encoder(None), ValueError, "unknown model role"),
    ("FaissStore kind", lambda: FaissStore(kind="ivf"), ValueError, "flat, hnsw"),
    ("DenseIndex.build(None)", lambda: DenseIndex().build(None), TypeError, "list of Chunk"),
    ("DenseIndex.build([str])", lambda: DenseIndex().build(["s"]), TypeError, "Chunk or Document"),
    ("unbuilt search", lambda: DenseIndex().search("x"), RuntimeError, r"call .build"),
    ("BM25 k1 NaN", lambda: BM25Index(k1=NAN), ValueError, "k1"),
    ("BM25 b str", lambda: BM25Index(b="x"), ValueError, "b must be"),
    ("Hybrid depth 0", lambda: HybridRetriever(DenseIndex(), BM25Index(), depth=0), ValueError,
     "depth"),
    ("rerank k 0", lambda: CrossEncoderReranker().rerank("q", [], k=0), ValueError, "k must be"),
    ("rerank blank query", lambda: CrossEncoderReranker().rerank("", [HIT], k=1), ValueError,
     "blank"),
    ("reader min_span_score NaN", lambda: SentenceReader(min_span_score=NAN), ValueError,
     "min_span_score"),
    ("extractive min_span_score NaN", lambda: ExtractiveReader(min_span_score=NAN), ValueError,
     "min_span_score"),
    ("reader blank question", lambda: SentenceReader().read("", [HIT]), ValueError, "blank"),
    ("reader question None", lambda: SentenceReader().read(None, [HIT]), TypeError,
     "must be a str"),
    ("reader hits str", lambda: SentenceReader().read("q", "text"), TypeError, "list of Hit"),
    ("generative keep 0", lambda: GenerativeReader(keep=0), ValueError, "keep must be"),
    ("LLM max_new_tokens 0", lambda: LocalLLM(max_new_tokens=0), ValueError, "max_new_tokens"),
    ("LLM messages str", lambda: LocalLLM().generate("hi"), TypeError, "list of"),
    ("LLM messages []", lambda: LocalLLM().generate([]), ValueError, "messages is empty"),
    ("pydocs split", lambda: load_pydocs().split("x"), ValueError, "no split 'x'"),
    ("reader set name", lambda: load_reader_set("nope"), ValueError, "unknown reader set"),
]


@pytest.mark.parametrize("name, call, error, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_input_gets_a_clear_error(name, call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_documented_results_for_edge_inputs():
    assert chunking.sliding_windows(-1, 4, 1) == []          # nothing to cover: no window
    assert similarity.cosine([0, 0], [1, 0]) == 0.0          # a zero vector points nowhere
    assert np.all(similarity.normalise(np.zeros((1, 3))) == 0)
    # a query the run never answered scores 0, as in trec_eval
    assert evaluate.evaluate({"q": {"d": 1}}, {}, "recall@5") == 0.0
    assert SentenceReader().read("q", []).reason == "no_candidates"
