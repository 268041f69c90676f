"""Fine-tuning the offline stand-ins on the reader sets' *train* split, on the CPU.

No extractive QA model ships in a pip package, so ``train_span_reader`` fine-tunes a QA
head on top of the packaged MiniLM encoder with the human-labelled SQuAD 2.0-format
examples in ``data/reader`` (train split only; dev is for calibration, test for reporting).
The result is cached under the user cache dir, keyed by a hash of the training data, this
file and the settings, so it is built once per machine and rebuilt when any of them change.

Whether the stand-in earns its place is measured, not assumed: ``bench/readers.py``
compares it with a simple baseline on the test split.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import models
from .datasets import ReaderExample, load_reader_set

__all__ = ["SpanReaderConfig", "train_span_reader", "span_reader_path"]


@dataclass(frozen=True)
class SpanReaderConfig:
    """Settings of ``train_span_reader``'s fine-tuning run (part of the model's cache key, so
    changing one trains a new model)."""
    epochs: int = 3
    learning_rate: float = 5e-5
    batch_size: int = 16
    max_length: int = 256
    stride: int = 64
    warmup: float = 0.1
    seed: int = 0


def _features(examples: list[ReaderExample], tok, cfg: SpanReaderConfig):
    """Tokenise (question, context) with overflow; label each window with the token span
    of the answer, or [CLS] (0, 0) when the window holds no answer (SQuAD 2.0 style)."""
    enc = tok([e.question for e in examples], [e.context for e in examples],
              truncation="only_second", max_length=cfg.max_length, stride=cfg.stride,
              return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    starts, ends = [], []
    for w, sample in enumerate(enc["overflow_to_sample_mapping"]):
        ex, offsets, seq = examples[sample], enc["offset_mapping"][w], enc.sequence_ids(w)
        s = e = 0
        if ex.answers:
            text, a = ex.answers[0]
            z = a + len(text)
            ctx = [i for i, sid in enumerate(seq) if sid == 1]
            if ctx and offsets[ctx[0]][0] <= a and offsets[ctx[-1]][1] >= z:
                s = next(i for i in ctx if offsets[i][1] > a)
                e = next(i for i in reversed(ctx) if offsets[i][0] < z)
        starts.append(s)
        ends.append(e)
    return enc, np.array(starts), np.array(ends)


def _key(cfg: SpanReaderConfig, examples: list[ReaderExample]) -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(json.dumps(asdict(cfg), sort_keys=True).encode())
    h.update(models.resolve("encoder", "offline").name.encode())
    for e in examples:
        h.update(json.dumps([e.id, e.question, e.context, e.answers]).encode())
    return h.hexdigest()[:16]


def span_reader_path(cfg: SpanReaderConfig | None = None) -> Path:
    """Where the span reader for ``cfg`` and the current training data is (or will be) cached."""
    cfg = cfg or SpanReaderConfig()
    return models.cache_dir("models") / f"span-reader-{_key(cfg, load_reader_set('all', 'train'))}"


def train_span_reader(cfg: SpanReaderConfig | None = None, progress: bool = True) -> Path:
    """Fine-tune (or return the cached) MiniLM QA head; returns the model folder, which
    ``ExtractiveReader`` and ``RAGBOOK_MODEL_SPAN_READER`` accept."""
    import torch
    from transformers import (
        AutoTokenizer,
        BertForQuestionAnswering,
        get_linear_schedule_with_warmup,
    )

    cfg = cfg or SpanReaderConfig()
    target = span_reader_path(cfg)
    if (target / "config.json").exists():
        return target
    base = models.resolve("encoder", "offline").path
    random.seed(cfg.seed), np.random.seed(cfg.seed), torch.manual_seed(cfg.seed)
    tok = AutoTokenizer.from_pretrained(base)
    model, _ = models.with_new_head(BertForQuestionAnswering, base)
    model.train()
    enc, starts, ends = _features(load_reader_set("all", "train"), tok, cfg)
    ids = torch.tensor(enc["input_ids"])
    mask = torch.tensor(enc["attention_mask"])
    types = torch.tensor(enc["token_type_ids"])
    starts, ends = torch.tensor(starts), torch.tensor(ends)
    steps = cfg.epochs * -(-len(ids) // cfg.batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, int(cfg.warmup * steps), steps)
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, desc="training the span reader")
    model.train()
    gen = torch.Generator().manual_seed(cfg.seed)
    for _ in range(cfg.epochs):
        order = torch.randperm(len(ids), generator=gen)
        for b in range(0, len(ids), cfg.batch_size):
            idx = order[b:b + cfg.batch_size]
            out = model(input_ids=ids[idx], attention_mask=mask[idx], token_type_ids=types[idx],
                        start_positions=starts[idx], end_positions=ends[idx])
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step(), sched.step(), opt.zero_grad()
            if bar:
                bar.update(1)
    if bar:
        bar.close()
    model.eval()
    tmp = target.with_name(f"{target.name}.partial-{os.getpid()}")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "ragbook-training.json").write_text(json.dumps(
        {"config": asdict(cfg), "windows": len(ids), "examples": "reader sets, train split"}))
    os.replace(tmp, target)
    return target
