"""A reranker learned from your own labelled questions (learning to rank, pointwise).

Each candidate the first stage returns becomes a row of features read from the question and
the passage together, and a logistic regression learns from your training questions which
rows are relevant. The features (``FEATURES``), all computed from the question and the
candidate list alone:

* ``dense``, ``dense_gap``, ``dense_rr``: the bi-encoder cosine, its gap to the best cosine
  among the candidates, and 1 / its rank among them;
* ``first_rr``: 1 / the candidate's rank in the first stage's list;
* ``bm25``: BM25 over the candidate list (idf from the candidates), divided by the best;
* ``coverage``: the share of the question's distinct terms found in the passage;
* ``rare``: the same share weighted by each term's idf among the candidates (an exact rare
  token — an error code, a function name — weighs most);
* ``window``: the best ~100-word window's cosine (``WindowScorer``);
* ``maxsim``: late interaction over token vectors (``MaxSimScorer``).

No title or heading feature, on purpose: the Python-docs FAQ questions *equal* their gold
section's heading, so such a feature would learn the label, not relevance.

What it learns is the weighting of *your* corpus and *your* questions: measured in chapter
6, it helps on the split it was trained for and loses on a corpus it never saw. Fit it on
your own train split; it is never a default. ``fit`` then ``save``; ``load`` checks the
fingerprint it was saved with.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from .bm25 import Tokenizer, idf_lucene, term_weight
from .checks import check_k, check_threshold
from .component import NotBuiltError
from .late_interaction import MaxSimScorer
from .rerank import BaseReranker, WindowScorer
from .types import Hit

__all__ = ["FEATURES", "LearnedReranker"]

FEATURES = ("dense", "dense_gap", "dense_rr", "first_rr", "bm25", "coverage", "rare",
            "window", "maxsim")
_TOKENS = Tokenizer()


def _lexical(query: str, texts: Sequence[str]) -> np.ndarray:
    """(n, 3): BM25 / best, term coverage, idf-weighted coverage, with idf from ``texts``."""
    terms = list(dict.fromkeys(_TOKENS(query)))
    docs = [Counter(_TOKENS(t)) for t in texts]
    out = np.zeros((len(texts), 3), np.float32)
    if not terms or not docs:
        return out
    avgdl = max(sum(sum(d.values()) for d in docs) / len(docs), 1.0)
    idf = {w: idf_lucene(len(docs), sum(1 for d in docs if w in d)) for w in terms}
    total_idf = sum(idf.values())
    for i, d in enumerate(docs):
        length = sum(d.values())
        out[i, 0] = sum(term_weight(d[w], length, avgdl, idf[w]) for w in terms if d[w])
        out[i, 1] = sum(1 for w in terms if d[w]) / len(terms)
        out[i, 2] = sum(idf[w] for w in terms if d[w]) / total_idf
    out[:, 0] /= max(float(out[:, 0].max()), 1e-9)
    return out


class LearnedReranker(BaseReranker):
    """Logistic regression over ``FEATURES`` of each (question, candidate) pair. Fit with
    ``fit(questions, qrels, first_stage)``; scoring before ``fit`` or ``load`` raises
    ``NotBuiltError``. Scores are log-odds of relevance (``confidence_kind = "rerank"``),
    ``min_rerank_score`` cuts as every ``BaseReranker`` does."""

    def __init__(self, scorer: MaxSimScorer | None = None, windows: WindowScorer | None = None,
                 *, candidates: int = 50, C: float = 1.0,
                 min_rerank_score: float | None = None):
        self.scorer = scorer if scorer is not None else MaxSimScorer()
        self.windows = windows if windows is not None else WindowScorer(self.scorer.encoder)
        self.candidates = check_k(candidates, "candidates")
        if not C > 0:
            raise ValueError(f"C (inverse regularisation strength) must be > 0, got {C}")
        self.C = float(C)
        self.min_rerank_score = check_threshold(min_rerank_score, "min_rerank_score")
        self.latencies_: list[float] = []

    # -- features --------------------------------------------------------------------------
    def features(self, query: str, hits: Sequence[Hit]) -> np.ndarray:
        """(len(hits), len(FEATURES)) for one question's candidate list, in input order."""
        hits = list(hits)
        if not hits:
            return np.zeros((0, len(FEATURES)), np.float32)
        texts = [h.text for h in hits]
        dense, late = self.scorer.parts([(query, t) for t in texts])
        order = np.argsort(-dense, kind="stable")
        dense_rank = np.empty(len(hits))
        dense_rank[order] = np.arange(1, len(hits) + 1)
        window = self.windows.predict([(query, t) for t in texts])
        lex = _lexical(query, texts)
        return np.column_stack([dense, dense - dense.max(), 1 / dense_rank,
                                [1 / h.rank for h in hits], lex, window, late]).astype(np.float32)

    # -- learning --------------------------------------------------------------------------
    def fit(self, questions: Sequence[tuple[str, str]], qrels: Mapping[str, Mapping[str, int]],
            first_stage) -> LearnedReranker:
        """Learn from ``(question id, text)`` pairs whose ``qrels`` list relevant documents:
        each question's ``candidates`` hits from ``first_stage`` (any retriever), labelled
        relevant when their ``doc_id`` (or id) is in the qrels. Returns self."""
        rows, labels = [], []
        for qid, text in questions:
            if not qrels.get(qid):
                continue
            hits = first_stage.search(text, k=self.candidates)
            rows.append(self.features(text, hits))
            labels += [int((h.doc_id or h.id) in qrels[qid]) for h in hits]
        return self.fit_features(np.vstack(rows) if rows else np.zeros((0, len(FEATURES))),
                                 np.asarray(labels))

    def fit_features(self, X: np.ndarray, y: np.ndarray) -> LearnedReranker:
        """``fit`` on feature rows already computed (``features``) and their 0/1 labels."""
        from sklearn.linear_model import LogisticRegression

        X, y = np.asarray(X, np.float64), np.asarray(y, int)
        if len(set(y.tolist())) < 2:
            raise ValueError(f"fit needs relevant and non-relevant candidates; got {len(y)} "
                             f"rows, {int(y.sum())} relevant. Give it questions whose gold "
                             f"documents the first stage finds")
        mean, scale = X.mean(axis=0), X.std(axis=0)
        scale[scale == 0] = 1.0
        lr = LogisticRegression(C=self.C, max_iter=1000).fit((X - mean) / scale, y)
        self.weights_ = {"mean": mean.tolist(), "scale": scale.tolist(),
                         "coef": lr.coef_[0].tolist(), "intercept": float(lr.intercept_[0])}
        return self

    def _fingerprint_extra(self) -> dict:
        return {"features": list(FEATURES), "weights": getattr(self, "weights_", None)}

    # -- scoring: BaseReranker orders, cuts and reranks by it ------------------------
    def decision(self, X: np.ndarray) -> np.ndarray:
        """Log-odds of relevance for feature rows."""
        w = getattr(self, "weights_", None)
        if w is None:
            raise NotBuiltError("LearnedReranker has no weights yet; call fit(questions, qrels, "
                                "first_stage) on your train split, or LearnedReranker.load(path)")
        z = (np.asarray(X, np.float64) - np.asarray(w["mean"])) / np.asarray(w["scale"])
        return (z @ np.asarray(w["coef"]) + w["intercept"]).astype(np.float32)

    def score(self, query: str, hits: Sequence[Hit]) -> np.ndarray:
        """The learned score of each hit, in input order."""
        if getattr(self, "weights_", None) is None:
            self.decision(np.zeros((0, len(FEATURES))))  # raises NotBuiltError
        return self.decision(self.features(query, hits)) if hits else np.zeros(0, np.float32)

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the weights and the fingerprint to one JSON file (atomically: a temporary
        file renamed over ``path``)."""
        if getattr(self, "weights_", None) is None:
            self.decision(np.zeros((0, len(FEATURES))))  # raises NotBuiltError
        path = Path(path)
        doc = {"kind": "LearnedReranker", "features": list(FEATURES), "weights": self.weights_,
               "settings": {"candidates": self.candidates, "C": self.C,
                            "min_rerank_score": self.min_rerank_score},
               "fingerprint": self.fingerprint}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike, scorer: MaxSimScorer | None = None,
             windows: WindowScorer | None = None) -> LearnedReranker:
        """A reranker saved by ``save``; ``ValueError`` when the features or the fingerprint
        (encoder, settings, weights) differ from what was saved."""
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        if doc.get("kind") != "LearnedReranker" or doc.get("features") != list(FEATURES):
            raise ValueError(f"{path} is not a LearnedReranker over features {FEATURES}; fit "
                             f"and save one with this version of ragbook")
        new = cls(scorer, windows, **doc["settings"])
        new.weights_ = doc["weights"]
        if new.fingerprint != doc["fingerprint"]:
            raise ValueError(f"{path} was saved with fingerprint {doc['fingerprint']}, this "
                             f"reranker has {new.fingerprint}: another encoder or window "
                             f"setting; load it with the scorer it was fitted with")
        return new
