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
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .checks import check_k, check_query, check_threshold
from .component import NotBuiltError
from .filters import matches, scoped
from .persist import CorruptIndexError, dumps, loads, parsing, read_manifest, reading, save_atomic
from .retrieval import BaseRetriever, corpus_fingerprint, index_text, make_hit, records_from
from .similarity import top_k
from .text import STOPWORDS
from .types import Chunk, Document, Hit

__all__ = ["Tokenizer", "BM25Index", "idf_lucene", "term_weight", "check_changes"]

# A word, or a code: letter/digit runs joined by _ - . (ERR_CONN_4021, beta.smart_routing,
# 14-day, 3.11, os.path.join). A trailing "." or "-" is punctuation, not part of the token.
# "Letter or digit" is Unicode's (\w minus "_"), so café, Straße and ошибка stay words.
# Han and kana are written without spaces, so each such character is a token of its own
# (the usual unigram baseline for CJK keyword search).
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_ALNUM = f"[^\\W_{_CJK}]"
_TOKEN = re.compile(f"[{_CJK}]|{_ALNUM}+(?:[_\\-.]{_ALNUM}+)*")
_PART = re.compile(f"{_ALNUM}+")


@dataclass(frozen=True)
class Tokenizer:
    """Normalise (Unicode NFKC, case-folded), split into words and codes, drop stopwords.

    ``split_compounds=True`` also emits the parts of a code (``err_conn_4021`` ->
    ``err``, ``conn``, ``4021``), so a query for "conn 4021" still matches; off by default,
    because the parts of different codes collide (``err_conn_4021`` vs ``err_conn_4022``
    share two of three parts).

    >>> Tokenizer()("Café CRÈME, Straße")
    ['café', 'crème', 'strasse']
    """

    stopwords: bool = True
    split_compounds: bool = False

    def __call__(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(f"Tokenizer takes a str, got {type(text).__name__}")
        out = []
        for tok in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
            if self.stopwords and tok in STOPWORDS:
                continue
            out.append(tok)
            if self.split_compounds:
                parts = _PART.findall(tok)
                if len(parts) > 1:
                    out.extend(p for p in parts if not (self.stopwords and p in STOPWORDS))
        return out


class BM25Index(BaseRetriever):
    """BM25 retriever (settings here; ``build`` fills it). Satisfies the retriever contract:
    ``search(query, k, where) -> list[Hit]``; a document sharing no term with the query is
    not a match and is never returned. ``min_bm25`` drops hits whose BM25 score is below it.
    Its confidence (``retrieve``) is the best hit's BM25 score."""

    confidence_kind = "bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75, tokenizer: Tokenizer = Tokenizer(),
                 min_bm25: float | None = None):
        if check_threshold(k1, "k1") is None or k1 < 0:
            raise ValueError(f"k1 must be a number >= 0, got {k1!r}")
        if check_threshold(b, "b") is None or not 0 <= b <= 1:
            raise ValueError(f"b must be a number in [0, 1], got {b!r}")
        self.k1, self.b = float(k1), float(b)
        if not callable(tokenizer):
            raise TypeError(f"tokenizer must be callable (text -> list of terms), got "
                            f"{type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.min_bm25 = check_threshold(min_bm25, "min_bm25")

    def build(self, items: Sequence[Chunk | Document],
              contexts: Sequence[str] | None = None) -> BM25Index:
        """Tokenise every item and precompute its BM25 weight for every term it contains.
        Blank texts and duplicate ids are rejected, naming the item. ``contexts``: a note
        per item indexed in front of its text (contextual BM25); hits return the text."""
        records = records_from(items, contexts)
        vocab: dict[str, int] = {}
        tf = self._term_counts(records, vocab)
        self._fit(records, tf, np.bincount(tf.indices, minlength=len(vocab)), vocab)
        return self

    def _term_counts(self, records: list[dict], vocab: dict[str, int]):
        """Term frequencies, one CSR row per record, one column per term of ``vocab`` (terms
        not in it yet are added). A row sums to the record's length in tokens."""
        from scipy import sparse

        tokens = [self.tokenizer(index_text(it)) for it in records]
        lengths = [len(t) for t in tokens]
        # one (row, term id) pair per token; the matrix constructor sums repeated pairs,
        # which counts them (no dict per document)
        cols = np.fromiter((vocab.setdefault(t, len(vocab)) for doc in tokens for t in doc),
                           dtype=np.int64, count=sum(lengths))
        rows = np.repeat(np.arange(len(records)), lengths)
        tf = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)),
                               shape=(len(records), len(vocab)))
        tf.sum_duplicates()
        return tf

    def _fit(self, records: list[dict], tf, df: np.ndarray, vocab: dict[str, int]) -> None:
        """Every corpus statistic from the term counts ``tf`` and document frequencies ``df``
        (length, average length, IDF), then every (document, term) weight at once, on the
        non-zeros only. Attributes are set only at the end: a failure leaves the index as it
        was. ``build`` and ``update`` both end here, so an update scores as a rebuild does."""
        from scipy import sparse

        n = len(records)
        doc_len = np.asarray(tf.sum(axis=1), dtype=np.float64).ravel()
        avgdl = float(doc_len.mean()) if n else 0.0
        idf = idf_lucene(n, df)
        w = tf.tocoo()
        data = term_weight(w.data, doc_len[w.row], max(avgdl, 1e-9), idf[w.col], self.k1, self.b)
        weights = sparse.csc_matrix((data, (w.row, w.col)), shape=tf.shape)
        fingerprint = corpus_fingerprint(records)
        self.items_, self.vocab_, self.tf_, self.df_ = records, vocab, tf, df
        self.doc_len_, self.avgdl_, self.idf_, self.weights_ = doc_len, avgdl, idf, weights
        self.corpus_fingerprint_ = fingerprint

    # -- updating --------------------------------------------------------------------------
    def update(self, upsert: Sequence[Chunk | Document] = (), delete: Sequence[str] = (),
               contexts: Sequence[str] | None = None) -> BM25Index:
        """Add or replace the items in ``upsert`` and remove the ids in ``delete``, tokenising
        only the new texts; returns self. Scores afterwards equal those of a rebuild on
        ``self.items_`` (the items kept, in order, then ``upsert``'s): BM25 weighs every
        document by the corpus's size, document frequencies and average length, so each
        weight is recomputed, from the term counts kept per item, without re-reading text.

        Checked before anything changes: blank texts and repeated ids (``ValueError``), a
        ``delete`` id not in the index (``KeyError``) or also upserted (``ValueError``)."""
        from scipy import sparse

        self._built()
        records = records_from(upsert, contexts)
        gone = check_changes(records, delete, {r["id"] for r in self.items_})
        keep = np.array([r["id"] not in gone for r in self.items_], dtype=bool)
        vocab = dict(self.vocab_)
        added = self._term_counts(records, vocab)  # new terms extend the vocabulary
        old = sparse.csr_matrix((self.tf_.data, self.tf_.indices, self.tf_.indptr),
                                shape=(len(self.items_), len(vocab)))  # room for new terms
        # document frequencies: minus the removed rows' terms, plus the added rows'
        df = (np.pad(self.df_, (0, len(vocab) - len(self.df_)))
              - np.bincount(old[~keep].indices, minlength=len(vocab))
              + np.bincount(added.indices, minlength=len(vocab)))
        # a term no document holds any more leaves the vocabulary, as a rebuild never saw it
        live = df > 0
        column = np.cumsum(live) - 1
        tf = sparse.vstack([old[keep], added], format="csr")[:, live]
        vocab = {t: int(column[i]) for t, i in vocab.items() if live[i]}
        self._fit([r for r, k in zip(self.items_, keep, strict=True) if k] + records, tf,
                  df[live], vocab)
        return self

    def upsert(self, items: Sequence[Chunk | Document],
               contexts: Sequence[str] | None = None) -> tuple[int, int]:
        """Add ``items``, replacing any already indexed under the same id (``update``);
        returns (added, replaced), as ``MilvusRetriever.upsert`` does."""
        items = list(items)
        known = {r["id"] for r in self.items_} if hasattr(self, "items_") else set()
        self.update(upsert=items, contexts=contexts)
        replaced = sum(x.id in known for x in items)
        return len(items) - replaced, replaced

    def delete(self, ids: Sequence[str]) -> int:
        """Remove the items with ``ids`` (unknown ids are skipped, as a ``VectorStore``
        does); returns how many were removed."""
        known = {r["id"] for r in self.items_} if hasattr(self, "items_") else set()
        ids = list(dict.fromkeys(i for i in ids if i in known))
        self.update(delete=ids)
        return len(ids)

    def __len__(self) -> int:
        return len(self.items_) if hasattr(self, "items_") else 0

    def _built(self) -> None:
        if not hasattr(self, "weights_"):
            raise NotBuiltError("this BM25Index is empty: call .build(chunks) or "
                                "BM25Index.load(path)")

    @property
    def corpus_fingerprint(self) -> str:
        """Hash of the indexed ids and texts (``retrieval.corpus_fingerprint``), so a hybrid
        retriever can check both channels index the same corpus. Raises ``NotBuiltError`` before
        ``build``/``load``."""
        self._built()
        return self.corpus_fingerprint_

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every item for ``query`` (0 where no query term occurs)."""
        self._built()
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        # a term repeated in the query counts each time, as in Lucene, bm25s and rank_bm25
        ids = [self.vocab_[t] for t in self.tokenizer(query) if t in self.vocab_]
        # add each query term's column (its postings) into the scores, straight from the CSC
        # arrays: np.add.at per term, no concatenated copy (12,000 tickets: 62 vs 92 µs)
        ptr, rows, vals = self.weights_.indptr, self.weights_.indices, self.weights_.data
        s = np.zeros(len(self.items_))
        for i in ids:
            np.add.at(s, rows[ptr[i]:ptr[i + 1]], vals[ptr[i]:ptr[i + 1]])
        return s

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None,
               min_bm25: float | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The top ``k`` (the number of results) matching items, best first; ``where`` (and
        the application's ``scope``, ``filters.scoped``) filters before ranking; ``min_bm25``
        (or the index's) drops weaker hits."""
        self._built()
        k, where = check_k(k), scoped(where, scope)
        s = self.scores(check_query(query))
        floor = self.min_bm25 if min_bm25 is None else check_threshold(min_bm25, "min_bm25")
        if where:  # filter first, then take the top k of what is left
            candidates = np.array([i for i in np.flatnonzero(s > 0)
                                   if matches(self.items_[i]["metadata"], where)], dtype=np.int64)
        else:  # rank every score (cheaper than listing the matches first: 12 + 11 µs vs 20 µs
            candidates = None  # on 10,370 Python-docs scores, docs/benchmarks.md)
        top = top_k(s if candidates is None else s[candidates], k)
        top = top if candidates is None else candidates[top].tolist()
        kept = [(i, v) for i, v in zip(top, s[top].tolist(), strict=True)
                if v > 0 and (floor is None or v >= floor)]  # drop non-matches, weak hits
        return [make_hit(self.items_[i], v, r) for r, (i, v) in enumerate(kept, 1)]

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the index to folder ``path`` all-or-nothing, with a checksummed manifest."""
        from scipy import sparse

        self._built()

        def write(folder: Path) -> None:
            sparse.save_npz(folder / "weights.npz", self.weights_)
            sparse.save_npz(folder / "tf.npz", self.tf_)  # the term counts ``update`` needs
            if not isinstance(self.tokenizer, Tokenizer):
                raise TypeError(f"only a ragbook Tokenizer can be saved with the index, not "
                                f"a {type(self.tokenizer).__name__}: save the items and "
                                f"rebuild with your tokenizer instead")
            settings = {**self.settings(deep=False), "tokenizer": asdict(self.tokenizer)}
            meta = {"settings": settings, "vocab": self.vocab_,
                    "doc_len": self.doc_len_.tolist(), "idf": self.idf_.tolist()}
            (folder / "bm25.json").write_text(json.dumps(meta, ensure_ascii=False),
                                              encoding="utf-8")
            (folder / "records.json").write_text(dumps(self.items_), encoding="utf-8")

        info = {"count": len(self), "terms": len(self.vocab_),
                "corpus_fingerprint": self.corpus_fingerprint_}
        return save_atomic(path, "BM25Index", write, info)

    @classmethod
    def load(cls, path: str | Path) -> BM25Index:
        """Read an index saved by ``save``, verifying every file against the manifest."""

        path = Path(path)
        with reading(path):  # no save swaps path while its files are read
            manifest = read_manifest(path, "BM25Index")
            self = cls._read(path, "tf.npz" in manifest["files"])
        if self.corpus_fingerprint_ != manifest["corpus_fingerprint"]:
            raise CorruptIndexError(f"{str(path)!r}: records.json does not hold the corpus "
                                    f"the manifest describes; rebuild and save the index again")
        return self

    @classmethod
    def _read(cls, path: Path, with_tf: bool) -> BM25Index:
        """The index in verified folder ``path``; a file that passed its checksum but does not
        parse, or whose shape does not fit the others, is a ``CorruptIndexError`` naming it."""
        from scipy import sparse

        with parsing(path / "bm25.json"):
            meta = json.loads((path / "bm25.json").read_text(encoding="utf-8"))
            settings = meta["settings"]
            self = cls(**{**settings, "tokenizer": Tokenizer(**settings["tokenizer"])})
            self.vocab_ = dict(meta["vocab"])
            self.doc_len_, self.idf_ = np.array(meta["doc_len"]), np.array(meta["idf"])
            self.avgdl_ = float(self.doc_len_.mean()) if len(self.doc_len_) else 0.0
        with parsing(path / "records.json"):
            self.items_ = loads((path / "records.json").read_text(encoding="utf-8"))
            self.corpus_fingerprint_ = corpus_fingerprint(self.items_)
        shape = (len(self.items_), len(self.vocab_))
        with parsing(path / "weights.npz"):
            self.weights_ = sparse.load_npz(path / "weights.npz").tocsc()
            _fits(self.weights_.shape, shape, self.doc_len_.shape, self.idf_.shape)
        # term counts: saved since updates came; an older save re-tokenises its records
        with parsing(path / "tf.npz" if with_tf else path / "records.json"):
            self.tf_ = (sparse.load_npz(path / "tf.npz").tocsr() if with_tf
                        else self._term_counts(self.items_, dict(self.vocab_)))
            _fits(self.tf_.shape, shape)
            self.df_ = np.bincount(self.tf_.indices, minlength=len(self.vocab_))
        return self

    def _repr_state(self) -> str:
        return (f"{len(self)} items, {len(self.vocab_)} terms" if hasattr(self, "vocab_")
                else "not built")


def check_changes(records: Sequence[dict], delete: Sequence[str], known: set[str]) -> set[str]:
    """The ids an update takes out of an index holding ``known`` ids: those in ``delete`` and
    those ``records`` (the upserted items) replace. Refuses, before anything changes, a
    ``delete`` that is not a list of str ids, an id not in the index (``KeyError``: an id
    that is not there is usually a typo or a stale list) and an id both upserted and deleted.

    >>> sorted(check_changes([{"id": "a"}], ["b"], {"a", "b", "c"}))
    ['a', 'b']
    """
    if isinstance(delete, (str, bytes)) or not hasattr(delete, "__iter__"):
        raise TypeError(f"delete must be a list of item ids, got {type(delete).__name__}; "
                        f"wrap a single id in a list")
    delete = list(delete)
    for i in delete:
        if not isinstance(i, str):
            raise TypeError(f"delete holds a {type(i).__name__} ({i!r}); give item ids (str)")
    unknown = [i for i in dict.fromkeys(delete) if i not in known]
    if unknown:
        raise KeyError(f"cannot delete {unknown[0]!r}: no item with that id in the index "
                       f"({len(unknown)} unknown ids); nothing was changed")
    upserted = {r["id"] for r in records}
    both = sorted(upserted & set(delete))
    if both:
        raise ValueError(f"item id {both[0]!r} is both upserted and deleted; give each id in "
                         f"one of the two lists")
    return upserted | set(delete)


def idf_lucene(n_docs: int, df):
    """ln(1 + (N − n + 0.5) / (n + 0.5)) of a document frequency ``df`` (a number, or an
    array of them: ``BM25Index`` computes every term's at once): positive for every n <= N.

    >>> round(idf_lucene(10, 1), 4)
    1.9924
    """
    idf = np.log1p((n_docs - np.asarray(df) + 0.5) / (np.asarray(df) + 0.5))
    return float(idf) if idf.ndim == 0 else idf


def term_weight(tf, doc_len, avgdl, idf, k1: float = 1.2, b: float = 0.75):
    """One query term's contribution to a document's BM25 score:
    ``idf * tf / (tf + k1 * (1 - b + b * doc_len / avgdl))``. ``tf`` saturates (``k1``
    sets how fast); ``b`` sets how much a longer-than-average document is penalised.
    Works elementwise on numpy arrays too — ``BM25Index.build`` computes this weight for
    every (document, term) pair once.

    >>> round(term_weight(tf=1, doc_len=100, avgdl=100, idf=2.0), 4)
    0.9091
    >>> term_weight(tf=0, doc_len=80, avgdl=100, idf=3.0)
    0.0
    """
    return idf * tf / (tf + k1 * (1 - b + b * doc_len / avgdl))


def _fits(matrix: tuple, shape: tuple, doc_len: tuple = (), idf: tuple = ()) -> None:
    """``ValueError`` unless a saved matrix is (items × terms), with a length per item and an
    IDF per term (when given): files that each pass their checksum but do not fit together."""
    if tuple(matrix) != shape or doc_len not in ((), shape[:1]) or idf not in ((), shape[1:]):
        raise ValueError(f"a {matrix} matrix for {shape[0]} items and {shape[1]} terms")
