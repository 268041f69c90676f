"""Combining rankings: reciprocal rank fusion, a score blend for contrast, and HybridRetriever.

Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009) scores each document by
its *ranks*, never its scores:

    RRF(d) = Σ_{lists L containing d}  w_L / (rrf_k + rank_L(d)),   ranks from 1, rrf_k = 60

A document both lists like rises; one only one list likes survives; one neither ranks
stays down. Because only ranks enter, it needs no calibration between BM25's unbounded
scores and cosine similarities — unlike ``score_blend``, which min-max normalises and
mixes scores and so shifts whenever the corpus (and hence the score ranges) changes.

>>> from ragbook.types import Hit
>>> a = [Hit("x", 9.1, 1), Hit("y", 7.0, 2), Hit("z", 1.2, 3)]
>>> b = [Hit("y", 0.8, 1), Hit("x", 0.7, 2)]
>>> [(h.id, round(h.score, 5)) for h in reciprocal_rank_fusion([a, b])]
[('x', 0.03252), ('y', 0.03252), ('z', 0.01587)]
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .bm25 import BM25Index, check_changes
from .checks import check_k, check_query, check_threshold
from .component import NotBuiltError
from .dense import DenseIndex, passage_vectors
from .filters import scoped, validate_where
from .persist import CorruptIndexError, read_manifest, reading, save_atomic
from .retrieval import BaseRetriever, corpus_fingerprint, records_from, trace_stage
from .types import Chunk, Document, Hit, Retrieved, Stage

__all__ = ["reciprocal_rank_fusion", "score_blend", "minmax_normalise", "HybridRetriever",
           "IndexDriftError", "rescued"]


def _check_lists(rankings, weights, k):
    if isinstance(rankings, (str, bytes)) or not rankings:
        raise ValueError("give at least one ranking (a list of Hits) to fuse")
    for n, hits in enumerate(rankings):
        for h in hits:
            if not isinstance(h, Hit):
                raise TypeError(f"rankings[{n}] holds a {type(h).__name__}; rank lists of Hit "
                                f"objects (what a retriever's search returns)")
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings; give one per "
                         f"ranking")
    for w in weights:
        if check_threshold(w, "weight") < 0:
            raise ValueError(f"weights must be >= 0, got {w!r}")
    return weights, (None if k is None else check_k(k))


def _rebuild(scores: dict[str, float], seen: dict[str, Hit], k: int | None) -> list[Hit]:
    order = sorted(scores, key=lambda d: (-scores[d], d))[:k]
    return [replace(seen[d], score=scores[d], rank=r) for r, d in enumerate(order, 1)]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], *, k: int | None = None,
                           rrf_k: float = 60, weights: Sequence[float] | None = None
                           ) -> list[Hit]:
    """Fuse ranked lists of Hits by RRF and return the best ``k`` (the number of results;
    None = all). ``rrf_k`` is the RRF constant (60 in the paper): larger flattens the
    difference between rank 1 and rank 10. ``weights`` scale each list's contribution
    (weighted RRF). Ties break by id. Raises ``TypeError`` when a list holds something other
    than ``Hit``s and ``ValueError`` for no lists, a negative ``rrf_k`` or weight, or one
    weight too many or too few.

    An item that two lists find beats one that a single list puts first, however weakly
    the second list found it. On a **tiny corpus** that can demote a correct top hit: the
    dense channel returns *every* chunk (it has no notion of "no match"), so any chunk
    BM25 matches on one word is "found by both" and outranks the dense channel's clear
    winner that shares no word with the query:

    >>> dense = [Hit("a", 0.91, 1), Hit("b", 0.35, 2), Hit("c", 0.12, 3)]  # the whole corpus
    >>> keyword = [Hit("c", 2.4, 1)]                                       # one shared word
    >>> [h.id for h in reciprocal_rank_fusion([dense, keyword])]
    ['c', 'a', 'b']

    What to do: fetch each list shallower than the corpus (``depth`` well under the number
    of chunks, so a weak dense match is not in the list at all); give the dense list a
    cosine floor (``DenseIndex(min_cosine=...)``, calibrated on labelled questions); or
    weight the lists (``weights=(2.0, 1.0)`` trusts the dense ranking more). Measure which
    on your own questions; on a few dozen chunks dense search alone may be the better
    choice."""
    if check_threshold(rrf_k, "rrf_k") < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k!r}")
    weights, k = _check_lists(rankings, weights, k)
    scores: dict[str, float] = {}
    seen: dict[str, Hit] = {}
    for hits, w in zip(rankings, weights, strict=True):
        for h in hits:
            scores[h.id] = scores.get(h.id, 0.0) + w / (rrf_k + h.rank)
            seen.setdefault(h.id, h)
    return _rebuild(scores, seen, k)


def minmax_normalise(scores: Sequence[float]) -> list[float]:
    """Scores mapped linearly onto [0, 1]: the lowest to 0.0, the highest to 1.0; all equal
    (or a single score) gives 1.0 each. The step ``score_blend`` applies to every list:
    it depends on the list's own extremes, which is why a blend shifts with the corpus.

    >>> minmax_normalise([3.0, 1.0, 2.0]), minmax_normalise([2.0, 2.0])
    ([1.0, 0.0, 0.5], [1.0, 1.0])
    """
    scores = [float(s) for s in scores]
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    return [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]


def score_blend(rankings: Sequence[Sequence[Hit]], *, k: int | None = None,
                weights: Sequence[float] | None = None) -> list[Hit]:
    """Min-max normalise each list's scores to [0, 1] and add them, weighted: the
    calibration-dependent alternative chapter 5 shows breaking. A document missing from a
    list gets 0 from it. ``k`` is the number of results (None = all)."""
    weights, k = _check_lists(rankings, weights, k)
    scores: dict[str, float] = {}
    seen: dict[str, Hit] = {}
    for hits, w in zip(rankings, weights, strict=True):
        for h, norm in zip(hits, minmax_normalise([h.score for h in hits]), strict=True):
            scores[h.id] = scores.get(h.id, 0.0) + w * norm
            seen.setdefault(h.id, h)
    return _rebuild(scores, seen, k)


class IndexDriftError(RuntimeError):
    """The dense and keyword indexes no longer cover the same items."""


class HybridRetriever(BaseRetriever):
    """Dense + BM25 over the same items, each fetched ``depth`` deep, fused by RRF.

    ``build(items)`` writes both indexes in one call, so they cannot be built from
    different corpora; every search compares the two indexes' corpus fingerprints (ids and
    texts) and raises ``IndexDriftError`` if they differ. ``weights`` = (dense, bm25) for
    weighted RRF; ``rrf_k`` is the RRF constant; ``min_rrf`` drops fused hits whose RRF
    score is below it (a fused score, not a cosine). ``retrieve`` reports three stages
    (dense, bm25, fuse) and, as its confidence, the dense channel's best cosine: a fused
    RRF score says how *consistently* the channels ranked a hit, not how well it matches.

    Small corpora: when ``depth`` is at least the number of chunks, the dense channel returns
    every chunk, so fusion ranks any chunk BM25 matches on a single word above the dense
    channel's best chunk when BM25 does not find that one (``reciprocal_rank_fusion`` shows
    the arithmetic). For a corpus of a few hundred chunks or fewer, set ``depth`` well
    below the chunk count, give the dense index a cosine floor (``DenseIndex(min_cosine=...)``)
    or weight the dense channel up (``weights=(2.0, 1.0)``) — and check on labelled
    questions that hybrid still beats dense alone there.
    """

    confidence_kind = "cosine"

    def __init__(self, dense, bm25, depth: int = 100, rrf_k: float = 60,
                 weights: tuple[float, float] = (1.0, 1.0), min_rrf: float | None = None):
        self.dense, self.bm25 = dense, bm25
        self.depth = check_k(depth, "depth")
        if check_threshold(rrf_k, "rrf_k") < 0:
            raise ValueError(f"rrf_k must be >= 0, got {rrf_k!r}")
        self.rrf_k, self.weights = rrf_k, tuple(weights)
        self.min_rrf = check_threshold(min_rrf, "min_rrf")
        if len(self.weights) != 2:
            raise ValueError(f"weights must be (dense, bm25), got {weights!r}")
        _check_lists([[], []], self.weights, None)

    def build(self, items: Sequence[Chunk | Document], vectors=None,
              contexts: Sequence[str] | None = None) -> HybridRetriever:
        """Build both indexes from the same ``items`` and return self.

        ``vectors``: precomputed dense rows (one unit vector per item, from the same
        encoder), to skip embedding; ``contexts``: a note per item indexed in front of its
        text by both channels (contextual retrieval). Raises ``TypeError`` when ``items``
        are not ``Chunk``/``Document`` objects, ``ValueError`` for blank texts, duplicate ids
        or vectors of the wrong shape (naming the item), and ``IndexDriftError`` if the two
        indexes end up holding different items."""
        items = list(items)
        self.dense.build(items, vectors=vectors, contexts=contexts)
        self.bm25.build(items, contexts=contexts)
        self.check()
        return self

    def check(self) -> int:
        """Raise ``IndexDriftError`` unless both indexes hold the same items (same ids and
        texts, same order); return the item count."""
        for name, index in (("dense", self.dense), ("BM25", self.bm25)):
            try:
                _ = index.corpus_fingerprint
            except NotBuiltError:
                raise NotBuiltError(f"the {name} index of this HybridRetriever is not built: "
                                    f"call HybridRetriever.build(items)") from None
        if self.dense.corpus_fingerprint != self.bm25.corpus_fingerprint:
            n_dense, n_bm25 = len(self.dense), len(self.bm25)
            raise IndexDriftError(
                f"the dense index holds {n_dense} items and the BM25 index {n_bm25}"
                + ("" if n_dense != n_bm25 else " with different ids or texts")
                + f" ({_difference(self.dense.items_, self.bm25.items_)})"
                + "; rebuild both from the same items with HybridRetriever.build(items)")
        return len(self.dense)

    def update(self, upsert: Sequence[Chunk | Document] = (), delete: Sequence[str] = (),
               vectors=None, contexts: Sequence[str] | None = None) -> HybridRetriever:
        """Write one change to both channels: add or replace the items in ``upsert`` and
        remove the ids in ``delete``; returns self. Afterwards the retriever equals
        ``build`` on its new ``items_`` (the items kept, in order, then ``upsert``'s): same
        hits, BM25 scores to 1e-9, cosines to 1e-6, same corpus fingerprint
        (``tests/test_incremental.py``). Only the new texts are tokenised and embedded.

        Everything is checked first — ids, texts and metadata of the items, every ``delete``
        id indexed and none also upserted (``KeyError``/``ValueError``), the encoder — and
        the new texts embedded (or ``vectors`` taken, one unit row per upserted item), so a
        bad change raises before either channel changes. It ends with the count and
        fingerprint check: both channels must hold the items expected, else
        ``IndexDriftError`` names the difference.

        A saved index is updated by load, update, save —
        ``HybridRetriever.load(path).update(...).save(path)`` (what ``ragbook index`` does):
        the save swaps the new folder in atomically, so a crash at any point leaves the
        previous index whole. (Milvus keeps BM25 statistics per segment instead: see
        ``ragbook.stores.milvus`` and chapter 11 for what that asks of you.)"""
        count = self.check()
        upsert = list(upsert)
        contexts = None if contexts is None else list(contexts)
        records = records_from(upsert, contexts)
        known = {r["id"] for r in self.bm25.items_}
        gone = check_changes(records, delete, known)
        self.dense.check_encoder()
        vectors = passage_vectors(self.dense.encoder, records, vectors)
        expected = count - len(gone & known) + len(records)
        delete = sorted(gone - {r["id"] for r in records})
        # BM25 computes its new state before setting any of it, so it changes whole or not at
        # all; the dense store's delete + add come last
        self.bm25.update(upsert, delete, contexts)
        self.dense.update(upsert, delete, vectors=vectors, contexts=contexts)
        if self.check() != expected or len(self.bm25) != expected:
            raise IndexDriftError(f"after the update both indexes hold {len(self.dense)} "
                                  f"items, but {expected} were expected; rebuild both with "
                                  f"HybridRetriever.build(items)")
        return self

    @property
    def corpus_fingerprint(self) -> str:
        """The dense channel's fingerprint, after ``check`` confirms the BM25 channel has the
        same one (``IndexDriftError`` otherwise)."""
        self.check()
        return self.dense.corpus_fingerprint

    def channels(self, query: str, where: Mapping[str, Any] | None = None, *,
                 scope: Mapping[str, Any] | None = None) -> tuple[list[Hit], list[Hit]]:
        """The two ranked lists before fusion, each ``depth`` deep."""
        dense, keyword = self._channel_stages(query, where, scope)
        return dense[0], keyword[0]

    def _channel_stages(self, query, where, scope=None) -> list[tuple[list[Hit], Stage]]:
        """Each channel's ``depth`` hits with its trace stage (``dense``, then ``bm25``),
        both searched with ``scope`` AND-ed into ``where`` (each stage records both)."""
        self.check()
        query, where = check_query(query), validate_where(where)
        out = []
        for name, index in (("dense", self.dense), ("bm25", self.bm25)):
            t = time.perf_counter()
            hits = index.search(query, k=self.depth, where=scoped(where, scope))
            out.append((hits, trace_stage(name, t, hits, {"where": where, "scope": scope,
                                                           "depth": self.depth})))
        return out

    def search(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
               scope: Mapping[str, Any] | None = None) -> list[Hit]:
        """The best ``k`` (the number of results) items by RRF over both channels, each
        searched ``depth`` deep with the same ``where`` filter (inside ``scope``); hits carry
        fused scores and ranks, and ``min_rrf`` (if set) drops weak fused hits, so fewer
        than ``k`` may come back. Raises ``NotBuiltError`` before ``build``/``load``,
        ``IndexDriftError`` when the two indexes hold different items, ``ValueError`` for a
        blank query or a bad ``k``, ``TypeError``/``ValueError`` for a malformed ``where``."""
        return list(self.retrieve(query, k, where, scope=scope).hits)

    def retrieve(self, query: str, k: int = 10, where: Mapping[str, Any] | None = None, *,
                 scope: Mapping[str, Any] | None = None) -> Retrieved:
        """``search``'s hits with the three stages that made them (``dense`` and ``bm25``,
        each ``depth`` deep, then ``fuse``) and the dense channel's best cosine as the
        confidence (``confidence_kind = "cosine"``)."""
        k = check_k(k)
        lists, stages = map(list, zip(*self._channel_stages(query, where, scope),
                                      strict=True))
        t = time.perf_counter()
        fused = reciprocal_rank_fusion(lists, k=k, rrf_k=self.rrf_k, weights=self.weights)
        if self.min_rrf is not None:
            fused = [h for h in fused if h.score >= self.min_rrf]
        stages.append(trace_stage("fuse", t, fused, {"rrf_k": self.rrf_k,
                                                     "weights": list(self.weights),
                                                     "min_rrf": self.min_rrf}))
        return Retrieved(tuple(fused), tuple(stages), lists[0][0].score if lists[0] else None,
                         self.confidence_kind)

    @property
    def items_(self):
        """The indexed records (those of the dense channel; both channels hold the same ones)."""
        return self.dense.items_

    def __len__(self) -> int:
        return len(self.dense)

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path, sources: Mapping[str, Any] | None = None) -> Path:
        """Write both indexes and the fusion settings to folder ``path`` all-or-nothing:
        ``dense/`` and ``bm25/`` (each saved, and later verified, by its own class) and
        ``hybrid.json`` (its own settings: depth, rrf_k, weights, min_rrf), checksummed in
        the manifest. Saving both in one folder keeps them from drifting apart on disk.
        ``sources`` (JSON): what the items were made from, kept in the manifest under that
        key — ``ragbook index`` keeps its chunk settings and a content hash per document
        there, so that the next run updates only the documents that changed."""
        count = self.check()
        settings = {name: value for name, value in self.settings(deep=False).items()
                    if name not in ("dense", "bm25")}

        def write(folder: Path) -> None:
            self.dense.save(folder / "dense")
            self.bm25.save(folder / "bm25")
            (folder / "hybrid.json").write_text(json.dumps(settings), encoding="utf-8")

        info = {"count": count, "corpus_fingerprint": self.corpus_fingerprint,
                **({"sources": dict(sources)} if sources is not None else {})}
        return save_atomic(path, "HybridRetriever", write, info)

    @classmethod
    def load(cls, path: str | Path, encoder=None) -> HybridRetriever:
        """Read a retriever saved by ``save``; ``encoder`` embeds queries (default: the
        profile's ``Encoder()`` in the precision the dense index was saved with) and must match
        the one that built the dense index."""

        path = Path(path)
        with reading(path):       # a save to the same path waits until every file is read
            manifest = read_manifest(path, "HybridRetriever")
            settings = json.loads((path / "hybrid.json").read_text(encoding="utf-8"))
            self = cls(DenseIndex.load(path / "dense", encoder=encoder),
                       BM25Index.load(path / "bm25"),
                       **{name: tuple(v) if isinstance(v, list) else v
                          for name, v in settings.items()})
        if self.corpus_fingerprint != manifest["corpus_fingerprint"]:
            raise CorruptIndexError(f"{str(path)!r}: the saved indexes do not hold the corpus "
                                    f"its manifest describes; rebuild and save it again")
        return self


def _difference(dense: Sequence[dict], bm25: Sequence[dict]) -> str:
    """How two channels' records differ, for an ``IndexDriftError``: ids only one holds,
    then ids whose text or metadata differ, else a different order."""
    a, b = {r["id"]: r for r in dense}, {r["id"]: r for r in bm25}
    parts = []
    for name, ids in (("only in dense", [i for i in a if i not in b]),
                      ("only in BM25", [i for i in b if i not in a]),
                      ("different text or metadata", [i for i in a if i in b and
                                                      corpus_fingerprint([a[i]])
                                                      != corpus_fingerprint([b[i]])])):
        if ids:
            more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
            parts.append(f"{name}: {', '.join(repr(i) for i in ids[:3])}{more}")
    return "; ".join(parts) or "the same items in another order"


def rescued(dense: Sequence[str], keyword: Sequence[str], fused: Sequence[str],
            n: int) -> list[str]:
    """What fusion rescued: ids in the fused top ``n`` that the dense top ``n`` misses and
    the keyword ranking found, in fused order — the documents hybrid search adds. Takes ids
    (for Hits: ``[h.id for h in hits]``).

    >>> rescued(["d1", "d2"], ["k1", "d1"], ["d1", "k1", "d2"], 2)
    ['k1']
    """
    dense_top, by_keyword = set(dense[:n]), set(keyword)
    return [d for d in fused[:n] if d not in dense_top and d in by_keyword]
