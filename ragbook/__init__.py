"""ragbook: every stage of a retriever-reader (RAG) pipeline, built to be read and measured.

The public API is flat; heavy libraries (torch, transformers, faiss, scipy) load only when a
model or an index is first used, so ``import ragbook`` stays fast.

>>> import ragbook
>>> ragbook.Chunk(id="d:0-2", doc_id="d", text="hi", start=0, end=2).end
2
"""
from . import models
from .bm25 import BM25Index, Tokenizer
from .cache import Cache, CachedPipeline, CachedRetriever
from .chunking import RecursiveSplitter, chunk_documents, sliding_window_chunks, window_count
from .component import Component, NotBuiltError
from .condense import LLMCondenser, RuleCondenser
from .convert import ConversionError, pages_of
from .cost import Workload
from .datasets import (
                  generate_tickets,
                  load_helpcentre,
                  load_pydocs,
                  load_reader_set,
                  load_reading_tasks,
)
from .dense import DenseIndex, EncoderMismatchError
from .embeddings import PREFIXES, Encoder, PrefixScheme
from .evaluate import (  # evaluate() stays in ragbook.evaluate
                  compare_runs,
                  format_table,
                  retrieve_run,
)
from .fusion import HybridRetriever, IndexDriftError, reciprocal_rank_fusion, score_blend
from .injection import instruction_like
from .late_interaction import MaxSimReranker, MaxSimScorer
from .learned_rerank import LearnedReranker
from .llm import (
                  LLMResponseError,
                  LLMUnavailableError,
                  LocalLLM,
                  OpenAICompatibleLLM,
                  get_llm,
)
from .models import ModelUnavailableError, active_profile
from .persist import CorruptIndexError
from .pipeline import Admitted, Pipeline, Prepared
from .readers import (
                  NOT_IN_CONTEXT,
                  ExtractiveReader,
                  GenerativeReader,
                  SentenceReader,
                  default_extractive_reader,
)
from .rerank import BaseReranker, CrossEncoderReranker, RerankedRetriever, WindowScorer
from .result import ESCALATIONS, Result, read_traces
from .retrieval import (
                  CONFIDENCE_KINDS,
                  BaseRetriever,
                  Reader,
                  Reranker,
                  Retriever,
                  SpanReader,
                  StreamingReader,
                  VectorStore,
                  WrapperRetriever,
)
from .serving import ChatServer
from .stores import FaissStore, MilvusStore
from .tuned import SettingsMismatchError, load_settings, save_settings
from .tuning import TuneReport, tune
from .types import Answer, Chunk, Document, Hit, Retrieved, Stage

__version__ = "0.1.0"


def serve(index, **options):
    """Serve ``index`` (a saved index's path, or a ``Pipeline``) over HTTP: the page at
    ``http://127.0.0.1:8000/`` and ``POST /ask``, ``/stream``, ``/explain`` (needs ``pip
    install "ragbook[serve]"``; Starlette and uvicorn load only here). Options are
    ``ragbook.serving.app.serve``'s: ``settings``, ``host``, ``port``, ``scope``, ``keys``,
    ``block=False`` (returns the started server), the guards' limits."""
    from .serving.app import serve as serve_index

    return serve_index(index, **options)


__all__ = [
    "Answer", "Chunk", "Document", "Hit", "Retrieved", "Stage",
    "Component", "Retriever", "BaseRetriever", "WrapperRetriever", "VectorStore",
    "Reranker", "BaseReranker", "Reader", "SpanReader", "StreamingReader", "CONFIDENCE_KINDS",
    "NotBuiltError", "CorruptIndexError", "ConversionError", "pages_of",
    "Pipeline", "Prepared", "Admitted", "Result", "ESCALATIONS", "read_traces",
    "RuleCondenser", "LLMCondenser", "CachedPipeline",
    "Cache", "CachedRetriever", "RerankedRetriever",
    "Encoder", "PrefixScheme", "PREFIXES", "ModelUnavailableError", "active_profile", "models",
    "Workload", "RecursiveSplitter", "chunk_documents", "sliding_window_chunks", "window_count",
    "DenseIndex", "EncoderMismatchError", "BM25Index", "Tokenizer",
    "FaissStore", "MilvusStore",
    "HybridRetriever", "IndexDriftError", "reciprocal_rank_fusion", "score_blend",
    "CrossEncoderReranker", "WindowScorer", "MaxSimScorer", "MaxSimReranker", "LearnedReranker",
    "ExtractiveReader", "SentenceReader", "default_extractive_reader", "GenerativeReader",
    "NOT_IN_CONTEXT", "instruction_like",
    "LocalLLM", "OpenAICompatibleLLM", "ChatServer", "get_llm",
    "LLMUnavailableError", "LLMResponseError",
    "compare_runs", "format_table", "retrieve_run",
    "serve", "tune", "TuneReport", "load_settings", "save_settings", "SettingsMismatchError",
    "load_helpcentre", "load_pydocs", "load_reader_set", "load_reading_tasks", "generate_tickets",
]
