"""Argument checks every stage shares, each written once: a result count, vectors, a
text, a query, a threshold. Each error names the value, the rule and the fix.

>>> check_k(3.0)
Traceback (most recent call last):
  ...
ValueError: k must be a whole number >= 1 (the number of results), got 3.0; pass e.g. k=10
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["check_k", "check_vectors", "check_text", "check_query", "check_threshold"]


def check_k(k: Any, name: str = "k") -> int:
    """``k`` as an int >= 1 (numpy integers accepted; bools, floats and strings rejected)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        what = " (the number of results)" if name == "k" else ""
        raise ValueError(f"{name} must be a whole number >= 1{what}, got {k!r}; "
                         f"pass e.g. {name}=10")
    return int(k)


def check_vectors(vectors: Any, dim: int | None, n: int | None = None) -> np.ndarray:
    """``vectors`` as a C-contiguous float32 (n, dim) array (one vector becomes one row),
    refusing another dimension than ``dim``, another row count than ``n``, NaN and infinity."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v.reshape(1, -1)
    if v.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array (n, dim), got shape {v.shape}")
    if dim is not None and v.shape[1] != dim:
        raise ValueError(f"vectors have dimension {v.shape[1]} but this store holds "
                         f"{dim}-d vectors; embed with the encoder that built it")
    if n is not None and v.shape[0] != n:
        raise ValueError(f"got {v.shape[0]} vectors for {n} items; give one row per item")
    if not np.isfinite(v).all():
        raise ValueError("vectors contain NaN or infinity; check the encoder's output")
    return np.ascontiguousarray(v)


def check_text(text: Any, name: str = "text") -> str:
    """``text`` as a str that is not blank and encodes to UTF-8 (no lone surrogates)."""
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}: {text!r:.60}")
    if not text.strip():
        raise ValueError(f"{name} is blank ({text!r}); give it some text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{name} holds a lone surrogate {text[err.start]!r} at position {err.start}, which "
            f"is not valid Unicode; decode the source bytes with errors='replace'") from None
    return text


def check_query(query: Any) -> str:
    """A search query: a non-blank, valid-Unicode str."""
    return check_text(query, "query")


def check_threshold(value: Any, name: str = "threshold") -> float | None:
    """A score threshold: None (no threshold) or a finite real number."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number or None, got {value!r}; NaN or "
                         f"infinity would keep everything or nothing")
    return float(value)
