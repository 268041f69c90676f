"""BM25 keyword search from scratch on scipy.sparse, with a tokenizer that keeps codes whole.

For a query q and document d (Robertson & Zaragoza, 2009; the Lucene variant, as in
Kamphuis et al., ECIR 2020):

    score(q, d) = Σ_{t in q} IDF(t) · tf(t, d) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))
    IDF(t)      = ln(1 + (N − n_t + 0.5) / (n_t + 0.5))        (never negative)

``k1`` sets how fast repeated terms saturate, ``b`` how much long documents are penalised.
The weights for every (document, term) are computed once at build time, so a query is the
sum of a few sparse columns.

>>> tok = Tokenizer()
>>> tok("Getting ERR_CONN_4021 on the Hub (port 8883).")
['getting', 'err_conn_4021', 'hub', 'port', '8883']
>>> Tokenizer(split_compounds=True)("ERR_CONN_4021")
['err_conn_4021', 'err', 'conn', '4021']
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from .dense import NotBuiltError, _hit, _item, matches
from .types import Chunk, Document, Hit

__all__ = ["Tokenizer", "BM25Index", "STOPWORDS"]

# A short English stopword list (function words only): enough that "how do i" does not
# outweigh the one content word of a question, small enough to keep "not", "free", "plan".
STOPWORDS = frozenset("""a an and are as at be but by can do does for from had has have how i
if in into is it its me my of on or our so than that the their them then there these they
this to was we were what when where which who why will with you your""".split())

# A word, or a code: alphanumeric runs joined by _ - . (ERR_CONN_4021, beta.smart_routing,
# 14-day, 3.11, os.path.join). A trailing "." or "-" is punctuation, not part of the token.
_TOKEN = re.compile(r"[0-9a-z]+(?:[_\-.][0-9a-z]+)*")
_PART = re.compile(r"[0-9a-z]+")


@dataclass(frozen=True)
class Tokenizer:
    """Lower-case, split into words and codes, drop stopwords.

    ``split_compounds=True`` also emits the parts of a code (``err_conn_4021`` ->
    ``err``, ``conn``, ``4021``), so a query for "conn 4021" still matches; off by default,
    because the parts of different codes collide (``err_conn_4021`` vs ``err_conn_4022``
    share two of three parts).
    """

    stopwords: bool = True
    split_compounds: bool = False

    def __call__(self, text: str) -> list[str]:
        out = []
        for tok in _TOKEN.findall(text.lower()):
            if self.stopwords and tok in STOPWORDS:
                continue
            out.append(tok)
            if self.split_compounds:
                parts = _PART.findall(tok)
                if len(parts) > 1:
                    out.extend(p for p in parts if not (self.stopwords and p in STOPWORDS))
        return out


class BM25Index:
    """BM25 retriever (settings here; ``build`` fills it). Satisfies the retriever contract:
    ``search(query, k, where) -> list[Hit]``; a document sharing no term with the query is
    not a match and is never returned."""

    def __init__(self, k1: float = 1.2, b: float = 0.75, tokenizer: Tokenizer | None = None):
        if k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {k1}")
        if not 0 <= b <= 1:
            raise ValueError(f"b must be in [0, 1], got {b}")
        self.k1, self.b = k1, b
        self.tokenizer = tokenizer or Tokenizer()

    def build(self, items: Sequence[Chunk | Document]) -> "BM25Index":
        """Tokenise every item and precompute its BM25 weight for every term it contains."""
        from scipy import sparse

        self.items_ = [_item(x) for x in items]
        if len({it["id"] for it in self.items_}) != len(self.items_):
            raise ValueError("item ids must be unique; two items share an id")
        vocab: dict[str, int] = {}
        rows, cols, tfs, lengths = [], [], [], []
        for r, it in enumerate(self.items_):
            toks = self.tokenizer(it["text"])
            lengths.append(len(toks))
            counts: dict[int, int] = {}
            for t in toks:
                tid = vocab.setdefault(t, len(vocab))
                counts[tid] = counts.get(tid, 0) + 1
            rows += [r] * len(counts)
            cols += list(counts)
            tfs += list(counts.values())
        n = len(self.items_)
        tf = sparse.csr_matrix((np.array(tfs, dtype=np.float64), (rows, cols)), shape=(n, len(vocab)))
        self.vocab_ = vocab
        self.doc_len_ = np.array(lengths, dtype=np.float64)
        self.avgdl_ = float(self.doc_len_.mean()) if n else 0.0
        df = np.bincount(np.array(cols, dtype=np.int64), minlength=len(vocab))
        self.idf_ = np.log1p((n - df + 0.5) / (df + 0.5))
        # weight[d, t] = idf(t) * tf / (tf + k1 * (1 - b + b * |d| / avgdl)), on the non-zeros only
        norm = self.k1 * (1 - self.b + self.b * self.doc_len_ / max(self.avgdl_, 1e-9))
        w = tf.tocoo()
        data = self.idf_[w.col] * w.data / (w.data + norm[w.row])
        self.weights_ = sparse.csc_matrix((data, (w.row, w.col)), shape=tf.shape)
        return self

    def __len__(self) -> int:
        return len(self.items_) if hasattr(self, "items_") else 0

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every item for ``query`` (0 where no query term occurs)."""
        if not hasattr(self, "weights_"):
            raise NotBuiltError("this BM25Index is empty: call .build(chunks) or BM25Index.load(path)")
        # a term repeated in the query counts each time, as in Lucene, bm25s and rank_bm25
        ids = [self.vocab_[t] for t in self.tokenizer(query) if t in self.vocab_]
        if not ids:
            return np.zeros(len(self.items_))
        # add up the query terms' columns straight from the CSC arrays (no sparse slicing)
        ptr, rows, vals = self.weights_.indptr, self.weights_.indices, self.weights_.data
        if len(ids) == 1:
            a, b = ptr[ids[0]], ptr[ids[0] + 1]
            return np.bincount(rows[a:b], weights=vals[a:b], minlength=len(self.items_))
        r = np.concatenate([rows[ptr[i]:ptr[i + 1]] for i in ids])
        v = np.concatenate([vals[ptr[i]:ptr[i + 1]] for i in ids])
        return np.bincount(r, weights=v, minlength=len(self.items_))

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None) -> list[Hit]:
        """The top ``k`` matching items, best first; ``where`` filters before ranking."""
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be a whole number >= 1, got {k!r}")
        s = self.scores(query)
        if where:
            candidates = np.array([i for i in np.flatnonzero(s > 0)
                                   if matches(self.items_[i]["metadata"], where)], dtype=np.int64)
        else:
            candidates = None  # every item; non-matches (score 0) are dropped below
        pool = s if candidates is None else s[candidates]
        if not len(pool):
            return []
        top = np.argpartition(-pool, k - 1)[:k] if len(pool) > k else np.arange(len(pool))
        top = top[np.lexsort((top, -pool[top]))]  # best first; ties by corpus position
        idx = top if candidates is None else candidates[top]
        return [_hit(self.items_[i], s[i], r) for r, i in enumerate(idx[s[idx] > 0], 1)]

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        from scipy import sparse

        if not hasattr(self, "weights_"):
            raise NotBuiltError("nothing to save: call .build(chunks) first")
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        sparse.save_npz(path / "weights.npz", self.weights_)
        meta = {"k1": self.k1, "b": self.b, "tokenizer": asdict(self.tokenizer), "vocab": self.vocab_,
                "doc_len": self.doc_len_.tolist(), "idf": self.idf_.tolist(), "items": self.items_}
        (path / "bm25.json").write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "BM25Index":
        from scipy import sparse

        path = Path(path)
        if not (path / "bm25.json").exists():
            raise FileNotFoundError(f"no saved BM25Index in {str(path)!r} (expected bm25.json and "
                                    f"weights.npz written by BM25Index.save)")
        meta = json.loads((path / "bm25.json").read_text(encoding="utf-8"))
        self = cls(meta["k1"], meta["b"], Tokenizer(**meta["tokenizer"]))
        self.items_, self.vocab_ = meta["items"], meta["vocab"]
        self.doc_len_, self.idf_ = np.array(meta["doc_len"]), np.array(meta["idf"])
        self.avgdl_ = float(self.doc_len_.mean()) if len(self.doc_len_) else 0.0
        self.weights_ = sparse.load_npz(path / "weights.npz").tocsc()
        return self

    def __repr__(self) -> str:
        state = f"{len(self)} items, {len(self.vocab_)} terms" if hasattr(self, "vocab_") else "not built"
        return f"BM25Index(k1={self.k1}, b={self.b}, {state})"


def idf_lucene(n_docs: int, df: int) -> float:
    """ln(1 + (N − n + 0.5) / (n + 0.5)): positive for every n <= N."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
