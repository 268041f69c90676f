"""Readers: turn a question and retrieved hits into an ``Answer``.

* ``readers.extractive`` — ``ExtractiveReader`` points at a span of a passage with a
  question-answering model; ``BaseSpanReader`` is what every extractive reader shares
  (``hit_spans``, ``accepts``, ``read``); ``best_span`` and friends are its steps.
* ``readers.sentence`` — ``SentenceReader`` returns the passage sentence closest to the
  question (the offline extractive reader), over whole answer units (``readers.units``);
  ``default_extractive_reader`` is the one each profile ships; ``calibrate_min_span_score``
  sets a reader's abstention floor.
* ``readers.grounding`` — the prompt, citations, claims and support checks of a generated
  answer.
* ``readers.generative`` — ``GenerativeReader`` writes an answer with a chat model and
  checks what it cites.

Import from here (``from ragbook.readers import SentenceReader``): the modules are how the
code is laid out, this is the API. The sentences a document plants for the model
(``instruction_like``, ``planted_spans``), which are never an answer and never evidence, are
found by ``ragbook.injection``, not by a reader.
"""
from .extractive import (
    BaseSpanReader,
    ExtractiveReader,
    Span,
    answer_or_abstain,
    best_span,
    span_to_characters,
)
from .generative import GenerativeReader
from .grounding import (
    FEW_SHOT,
    NOT_IN_CONTEXT,
    SYSTEM_PROMPT,
    Citations,
    build_messages,
    is_abstention,
    number_passages,
    order_for_reading,
    parse_citations,
    split_claims,
    support,
)
from .sentence import (
    OFFLINE_MIN_SPAN_SCORE,
    OFFLINE_RANK_WEIGHT,
    OFFLINE_SENTENCE_ENCODER,
    SentenceReader,
    calibrate_min_span_score,
    default_extractive_reader,
)

__all__ = [
    # extractive span reader
    "Span", "BaseSpanReader", "ExtractiveReader", "best_span", "span_to_characters",
    "answer_or_abstain",
    # sentence reader, the shipped default and its floor
    "SentenceReader", "default_extractive_reader", "calibrate_min_span_score",
    "OFFLINE_MIN_SPAN_SCORE", "OFFLINE_RANK_WEIGHT", "OFFLINE_SENTENCE_ENCODER",
    # grounding a generated answer
    "NOT_IN_CONTEXT", "SYSTEM_PROMPT", "FEW_SHOT", "build_messages", "number_passages",
    "order_for_reading", "Citations", "parse_citations", "is_abstention", "split_claims",
    "support",
    # generative reader
    "GenerativeReader",
]
