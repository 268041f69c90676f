"""ragbook: every stage of a retriever-reader (RAG) pipeline, built to be read and measured.

The public API is flat; heavy libraries (torch, transformers, faiss) load only when a model
or an index is first used, so ``import ragbook`` stays fast.

>>> import ragbook
>>> ragbook.Chunk(id="d:0-2", doc_id="d", text="hi", start=0, end=2).end
2
"""
from . import models
from .embeddings import PREFIXES, Encoder, PrefixScheme
from .models import ModelUnavailableError, active_profile
from .types import Answer, Chunk, Document, Hit

__version__ = "0.1.0"

__all__ = [
    "Answer", "Chunk", "Document", "Hit",
    "Encoder", "PrefixScheme", "PREFIXES",
    "ModelUnavailableError", "active_profile", "models",
]
