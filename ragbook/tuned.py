"""Tuned settings as a file: what ``ragbook tune`` chose, for ``ragbook ask --settings`` and
``Pipeline(**load_settings(path, retriever))``.

The file (JSON) holds the chosen first stage (dense, BM25 or the hybrid with its depth,
``rrf_k`` and weights), the second stage (none, MaxSim blend, or the learned reranker with
its fitted weights), the number of candidates, why it was chosen, and two fingerprints:

* ``corpus_fingerprint`` — the index the settings were tuned on. Settings tuned on one
  corpus say nothing about another (what wins depends on the corpus), so loading them
  against an index with another corpus is refused, naming both fingerprints;
* ``fingerprint`` — of the components the settings build (their classes, settings, the
  encoder, the learned weights): loading rebuilds them and refuses a mismatch (another
  encoder, another version of ragbook's components).

``ragbook calibrate`` adds a ``calibration`` block: the ``min_confidence`` (and its kind)
chosen on labelled questions with these settings, the rule, and what it cost there;
``load_settings`` hands it to ``Pipeline`` with the rest.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .fusion import HybridRetriever
from .late_interaction import MaxSimReranker, MaxSimScorer
from .learned_rerank import LearnedReranker
from .tuning import MAXSIM_WEIGHT, Setting, TuneReport, search_space

__all__ = ["KIND", "SettingsMismatchError", "components", "save_settings", "load_settings",
           "save_calibration"]

KIND = "ragbook.tuned-settings"


class SettingsMismatchError(ValueError):
    """A settings file was tuned on another index (or builds other components)."""


def components(doc: dict, retriever: HybridRetriever, model_weights=None):
    """``(first stage, reranker or None)`` that the settings ``doc`` (``Setting.describe()``
    form) describe, built on ``retriever``'s indexes."""
    first = doc["retriever"]
    channel = first["channel"]
    if channel == "dense":
        stage = retriever.dense
    elif channel == "bm25":
        stage = retriever.bm25
    elif channel == "hybrid":
        stage = retriever.with_settings(depth=int(first["depth"]), rrf_k=float(first["rrf_k"]),
                                        weights=tuple(first["weights"]))
    else:
        raise ValueError(f"unknown first stage {channel!r} in the settings; expected dense, "
                         f"bm25 or hybrid: tune again with this version of ragbook")
    second = doc["second_stage"]
    encoder = retriever.dense.encoder
    if second == "none":
        return stage, None
    if second == "maxsim":
        return stage, MaxSimReranker(encoder, MAXSIM_WEIGHT)
    if second == "learned":
        if model_weights is None:
            raise ValueError("the settings name a learned reranker but carry no weights; tune "
                             "again to write them")
        reranker = LearnedReranker(MaxSimScorer(encoder))
        reranker.weights_ = model_weights
        return stage, reranker
    raise ValueError(f"unknown second stage {second!r} in the settings; expected none, maxsim "
                     f"or learned: tune again with this version of ragbook")


def _fingerprint(stage, reranker, candidates: int) -> str:
    text = json.dumps([stage.fingerprint, reranker.fingerprint if reranker else None,
                       candidates])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_settings(path: str | os.PathLike, chosen: TuneReport | Setting,
                  retriever: HybridRetriever, *, model: LearnedReranker | None = None,
                  about: dict | None = None, calibration: dict | None = None) -> Path:
    """Write what ``tune`` chose (a ``TuneReport``: its setting, its learned model, its
    reason and nested-CV estimate; or a bare ``Setting`` with ``model`` for a learned second
    stage) for ``retriever`` as JSON, atomically."""
    if isinstance(chosen, TuneReport):
        nested = chosen.nested
        about = {"reason": chosen.reason, "questions": sum(map(len, chosen.folds)),
                 "folds": chosen.folds, "seed": chosen.seed,
                 "nested_cv_mrr@10": list(nested["mrr@10"]),
                 "nested_cv_delta_mrr@10_vs_dense": list(nested["Δmrr@10"]), **(about or {})}
        chosen, model = chosen.chosen, chosen.model
    setting = chosen
    doc = setting.describe()
    weights = getattr(model, "weights_", None)
    stage, reranker = components(doc, retriever, weights)
    return _write(path, {"kind": KIND, "version": 1, **doc,
                         "learned_weights": weights,
                         "corpus_fingerprint": retriever.corpus_fingerprint,
                         "fingerprint": _fingerprint(stage, reranker, doc["candidates"]),
                         "tuning": about or {},
                         **({"calibration": dict(calibration)} if calibration else {})})


def save_calibration(path: str | os.PathLike, settings: str | os.PathLike | None,
                     retriever: HybridRetriever, calibration: dict) -> Path:
    """Write the settings of the file ``settings`` (None: ``retriever``'s own hybrid, as
    ``ragbook ask`` runs it without ``--settings``) with ``calibration`` — at least
    ``min_confidence`` and ``min_confidence_kind`` — to ``path``, atomically. ``path`` may be
    ``settings`` itself."""
    if settings is None:
        hybrid = next(s for s in search_space(retriever) if s.name == "hybrid (default)")
        return save_settings(path, hybrid, retriever, about={"reason": "the index's own hybrid"},
                             calibration=calibration)
    load_settings(settings, retriever)          # refuses a file for another index
    return _write(path, {**_read(settings), "calibration": dict(calibration)})


def _read(path) -> dict | None:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def _write(path, out: dict) -> Path:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    os.replace(tmp, path)
    return path


def load_settings(path: str | os.PathLike, retriever: HybridRetriever) -> dict[str, Any]:
    """The Pipeline arguments the file at ``path`` describes, built on ``retriever``:
    ``{"retriever": ..., "reranker": ..., "candidates": ...}``, so
    ``Pipeline(**load_settings(path, retriever), keep=5)`` — with ``min_confidence`` and
    its kind too when ``ragbook calibrate`` wrote them. Raises
    ``SettingsMismatchError`` when ``retriever`` indexes another corpus than the one tuned
    on, or the components built differ from those saved (both fingerprints named)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{str(path)!r} is not a file; write one with "
                                f"'ragbook tune INDEX QUESTIONS --out {path}'")
    doc = _read(path)
    if not isinstance(doc, dict) or doc.get("kind") != KIND:
        raise ValueError(f"{str(path)!r} is not a settings file written by 'ragbook tune'; "
                         f"write one with 'ragbook tune INDEX QUESTIONS --out {path}'")
    have = retriever.corpus_fingerprint
    if doc.get("corpus_fingerprint") != have:
        raise SettingsMismatchError(
            f"{str(path)!r} was tuned on an index with corpus fingerprint "
            f"{doc.get('corpus_fingerprint')}, this index has {have}; settings chosen on one "
            f"corpus say nothing about another: run 'ragbook tune' on this index and its "
            f"labelled questions")
    stage, reranker = components(doc, retriever, doc.get("learned_weights"))
    built = _fingerprint(stage, reranker, doc["candidates"])
    if built != doc.get("fingerprint"):
        raise SettingsMismatchError(
            f"{str(path)!r} has settings fingerprint {doc.get('fingerprint')}, the components "
            f"they build here have {built} (another encoder or version of ragbook); run "
            f"'ragbook tune' again with this setup")
    out = {"retriever": stage, "reranker": reranker, "candidates": int(doc["candidates"])}
    calibrated = doc.get("calibration") or {}
    if calibrated.get("min_confidence") is not None:
        out.update(min_confidence=float(calibrated["min_confidence"]),
                   min_confidence_kind=str(calibrated["min_confidence_kind"]))
    return out
