"""Explanations whose parts add up to the hit's score.

``explain_bm25`` splits a BM25 score into one part per query term (tf, idf, length norm,
contribution) through the index's own tokeniser, IDF and ``term_weight``: the same code path
as the scorer, so the sum cannot drift from it. ``explain_rrf`` splits a hybrid's fused score
into one part per channel (its rank and ``weight / (rrf_k + rank)``), asking the hybrid for its
channels' ranked lists without opening the channels themselves. ``explain_maxsim`` splits a
late-interaction score into its dense share and one part per query token (the passage token
it aligned with and their cosine) through the scorer's own ``parts``, ``token_vectors`` and
``maxsim_alignment``; ``explain_reranker`` gives any second stage's score, ``explain_rerank``
adds the rank and score the hit had before it; ``explain_dense`` names the cosine and the
prefixes the encoder put in front of each text; ``explain_filter`` lists the scope and filter
conditions the hit met. ``explain`` picks the right one for a component, ``explain_result``
explains each source of a pipeline's ``Result`` with the filter its trace recorded.

>>> e = Explanation("bm25", "h1", 1.5, (Part("refund", 1.0), Part("order", 0.5)))
>>> e.total()
1.5
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .bm25 import BM25Index, term_weight
from .dense import DenseIndex
from .filters import matches, scoped, translate_where, validate_where
from .fusion import HybridRetriever
from .late_interaction import MaxSimScorer, maxsim_alignment
from .rerank import BaseReranker, CrossEncoderReranker
from .result import Result
from .types import Hit, plain

__all__ = ["Part", "Explanation", "explain_bm25", "explain_rrf", "explain_dense",
           "explain_maxsim", "explain_reranker", "explain_rerank", "explain_filter", "explain",
           "explain_result", "explain_result_dicts"]


@dataclass(frozen=True)
class Part:
    """One term of the sum: what it is (``name``), what it adds (``value``) and how it came
    about (``detail``: tf, idf, rank, ...)."""

    name: str
    value: float
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """Why ``hit_id`` scored ``score`` in ``stage``: ``parts`` add up to ``score``;
    ``detail`` holds what is true of the whole score (a reranker's rank before and after,
    the encoder's prefixes)."""

    stage: str
    hit_id: str
    score: float
    parts: tuple[Part, ...]
    detail: Mapping[str, Any] = field(default_factory=dict)

    def total(self) -> float:
        """The sum of the parts (equals ``score`` up to rounding)."""
        return sum(p.value for p in self.parts)

    def to_dict(self) -> dict:
        """As JSON (``ragbook ask --explain --json``, ``ragbook serve``'s ``/explain``): stage,
        hit id, score, parts (name, value, detail), detail, and ``text()`` — plain Python
        values throughout (``types.plain``), ready for ``json.dumps``."""
        return plain({"stage": self.stage, "hit_id": self.hit_id, "score": self.score,
                      "parts": [{"name": p.name, "value": p.value, "detail": dict(p.detail)}
                                for p in self.parts],
                      "detail": dict(self.detail), "text": self.text()})

    def text(self, show=str) -> str:
        """One line for the hit, one indented line per part; ``show`` writes the names that
        come from documents (the hit's id, a part's token or channel) — a terminal passes
        one that escapes line breaks, so the only ``\\n`` left are the ones put here."""
        lines = [f"{self.stage} {show(self.hit_id)}: {self.score:.4f} = sum of "
                 f"{len(self.parts)} parts"]
        if self.detail:
            lines[0] += f"  ({_pairs(self.detail)})"
        for p in self.parts:
            lines.append(f"  {show(p.name)}: {p.value:+.4f}  ({_pairs(p.detail)})")
        return "\n".join(lines)


def _pairs(detail: Mapping[str, Any]) -> str:
    """``k=v, ...`` with floats to 4 significant digits and texts quoted (a prefix may be
    blank or end in a space)."""
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else
                     f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}"
                     for k, v in detail.items())


def explain_bm25(index, query: str, hit: Hit) -> Explanation:
    """One part per query term (a repeated term once per occurrence, as the scorer counts
    it) of ``hit``'s BM25 score in ``index``. Raises ``KeyError`` when the hit's id is not
    in the index (explain with the index that found it)."""
    row = {it["id"]: i for i, it in enumerate(index.items_)}.get(hit.id)
    if row is None:
        raise KeyError(f"{hit.id!r} is not in this BM25 index; explain a hit with the index "
                       "that returned it")
    doc_len, parts = float(index.doc_len_[row]), []
    norm = index.k1 * (1 - index.b + index.b * doc_len / max(index.avgdl_, 1e-9))
    for term in index.tokenizer(query):
        col = index.vocab_.get(term)
        tf = 0.0 if col is None else float(index.tf_[row, col])
        if tf == 0:
            continue
        idf = float(index.idf_[col])
        value = float(term_weight(tf, doc_len, max(index.avgdl_, 1e-9), idf, index.k1, index.b))
        parts.append(Part(term, value, {"tf": tf, "idf": idf, "length_norm": norm,
                                        "doc_len": doc_len}))
    return Explanation("bm25", hit.id, hit.score, tuple(parts))


def explain_rrf(hybrid, query: str, hit: Hit, where: Mapping[str, Any] | None = None, *,
                scope: Mapping[str, Any] | None = None) -> Explanation:
    """One part per channel that ranked ``hit`` (dense, then bm25): its rank there and
    ``weight / (rrf_k + rank)``, which add up to the fused score. Give the same ``where`` and
    ``scope`` as the search that returned the hit."""
    parts = []
    lists = hybrid.channels(query, where, scope=scope)
    for name, hits, weight in zip(("dense", "bm25"), lists, hybrid.weights, strict=True):
        found = next((h for h in hits if h.id == hit.id), None)
        if found is not None:
            parts.append(Part(name, weight / (hybrid.rrf_k + found.rank),
                              {"rank": found.rank, "weight": weight, "rrf_k": hybrid.rrf_k,
                               "channel_score": found.score}))
    return Explanation("rrf", hit.id, hit.score, tuple(parts))


def explain_dense(index, query: str, hit: Hit) -> Explanation:
    """``hit``'s dense score as one part, the cosine between the query and passage vectors,
    with what the encoder embedded: its prefix scheme, the query prefix, the passage prefix
    (put in front of the chunk's text, after its context if any) and the query exactly as
    embedded. A model trained with prefixes scores worse without them (chapter 3)."""
    encoder = index.encoder
    prefixes = encoder.prefixes
    detail = {"encoder": encoder.model_id, "prefix_scheme": prefixes.name,
              "query_prefix": prefixes.query, "passage_prefix": prefixes.passage,
              "query_embedded": encoder.format_query(query)}
    part = Part("cosine", float(hit.score), {"query_prefix": prefixes.query,
                                             "passage_prefix": prefixes.passage})
    return Explanation("dense", hit.id, float(hit.score), (part,), detail)


def _maxsim_scorer(stage) -> MaxSimScorer | None:
    """The ``MaxSimScorer`` behind ``stage`` (itself, or a reranker's model), else None."""
    if isinstance(stage, MaxSimScorer):
        return stage
    model = stage.model if isinstance(stage, CrossEncoderReranker) else None
    return model if isinstance(model, MaxSimScorer) else None


def explain_maxsim(stage, query: str, hit: Hit) -> Explanation:
    """``hit``'s late-interaction score as ``dense_weight * cosine`` plus, per query token,
    ``(1 - dense_weight) / n_tokens * cos(query token, passage token it aligned with)``:
    the scorer's own blend, so the parts add up to the score it gave ``hit`` for ``query``
    (within 1e-5: the score may come from the scorer's on-disk MaxSim store, computed in
    another batch, and padding moves token vectors by ~1e-6). ``stage`` is a
    ``MaxSimScorer`` or a reranker over one (``MaxSimReranker``, or
    ``CrossEncoderReranker()`` where the profile resolves its ``cross_encoder`` role to
    MaxSim, as offline)."""
    scorer = _maxsim_scorer(stage)
    if scorer is None:
        raise TypeError(f"{type(stage).__name__} does not score by MaxSim; explain it with "
                        f"explain_reranker (or explain, which picks the right explanation)")
    w = scorer.dense_weight
    dense, _ = scorer.parts([(query, hit.text)])
    qtok = scorer.token_vectors([query], "query")[0]
    ptok = scorer.token_vectors([hit.text])[0]
    rows, cosines = maxsim_alignment(qtok, ptok)
    qnames, pnames = scorer.token_strings(query, "query"), scorer.token_strings(hit.text)
    if (len(qnames), len(pnames)) != (len(qtok), len(ptok)):   # name by position instead
        qnames, pnames = ([f"#{i}" for i in range(n)] for n in (len(qtok), len(ptok)))
    parts = [Part("dense cosine", w * float(dense[0]), {"cosine": float(dense[0]), "weight": w})]
    share = (1 - w) / max(len(qtok), 1)
    for i, (j, c) in enumerate(zip(rows.tolist(), cosines.tolist(), strict=True)):
        parts.append(Part(f"{qnames[i]} -> {pnames[j]}", share * c,
                          {"query_token": i, "passage_token": j, "cosine": c,
                           "weight": share}))
    return Explanation("maxsim", hit.id, float(hit.score), tuple(parts),
                       {"dense_weight": w, "query_tokens": len(qtok),
                        "passage_tokens": len(ptok)})


def explain_reranker(reranker, query: str, hit: Hit) -> Explanation:
    """``hit``'s second-stage score: MaxSim's parts (``explain_maxsim``) when the reranker
    scores by MaxSim, else one part, the score the reranker gives ``hit`` alone (a
    cross-encoder reads the pair whole: there is no sum inside it to split)."""
    if _maxsim_scorer(reranker) is not None:
        return explain_maxsim(reranker, query, hit)
    value = float(reranker.score(query, [hit])[0])
    return Explanation("rerank", hit.id, float(hit.score),
                       (Part("model score", value, {"model": type(reranker).__name__}),))


def explain_rerank(first_stage, reranker, query: str, hit: Hit,
                   where: Mapping[str, Any] | None = None, *,
                   scope: Mapping[str, Any] | None = None, candidates: int = 50) -> Explanation:
    """``explain_reranker``'s parts with what the rerank changed: the score and rank ``hit``
    had among the first stage's ``candidates`` (searched again with the same ``where`` and
    ``scope``) and its score and rank after; ``moved`` is how many places it rose (negative:
    fell). Give the settings of the search that returned the hit."""
    first = first_stage.retrieve(query, k=candidates, where=where, scope=scope).hits
    before = next((h for h in first if h.id == hit.id), None)
    if before is None:
        raise KeyError(f"{hit.id!r} is not among the first stage's {candidates} candidates "
                       f"for this query; give the where, scope and candidates of the search "
                       f"that returned it")
    inner = explain_reranker(reranker, query, hit)
    return Explanation("rerank", hit.id, float(hit.score), inner.parts, {
        "scorer": inner.stage, "score_before": float(before.score), "rank_before": before.rank,
        "score_after": float(hit.score), "rank_after": hit.rank,
        "moved": before.rank - hit.rank, **inner.detail})


def explain_filter(hit: Hit, where: Mapping[str, Any] | None = None, *,
                   scope: Mapping[str, Any] | None = None) -> Explanation:
    """One part per condition of the application's ``scope`` (with the presence checks
    ``filters.scoped`` adds) and of the caller's ``where``, each worth 1 when ``hit``'s
    metadata meets it and 0 when not, with the value stored: the score is the number of
    conditions, so a hit the search rightly returned has parts adding up to it."""
    parts = []
    for source, flt in (("scope", scoped(None, scope) if scope else None),
                        ("where", validate_where(where))):
        for key, op, arg in translate_where(flt, lambda k, o, a: (k, o, a)):
            met = matches(hit.metadata, {key: {op: arg}})
            parts.append(Part(f"{key} {op} {arg!r}", float(met),
                              {"from": source, "stored": hit.metadata.get(key), "met": met}))
    return Explanation("filter", hit.id, float(len(parts)), tuple(parts))


def explain(component, query: str, hit: Hit, where: Mapping[str, Any] | None = None, *,
            scope: Mapping[str, Any] | None = None) -> Explanation:
    """Why ``component`` gave ``hit`` its score for ``query``, by what it is: a ``Pipeline``
    (anything with a ``retriever``, a ``reranker`` and ``candidates``: the pipeline is not
    imported here, it composes the stages) or ``RerankedRetriever`` with a reranker ->
    ``explain_rerank``, without one the retriever's explanation; a reranker or MaxSim
    scorer -> ``explain_reranker``; a ``HybridRetriever`` -> ``explain_rrf``; a
    ``BM25Index`` -> ``explain_bm25``; a ``DenseIndex`` -> ``explain_dense``. ``where`` and
    ``scope`` are those of the search that returned the hit (for a pipeline's ``Result``,
    ``explain_result`` reads them from its trace)."""
    if all(hasattr(component, a) for a in ("retriever", "reranker", "candidates")):
        if component.reranker is None:     # a Pipeline without one: its retriever's scores
            return explain(component.retriever, query, hit, where, scope=scope)
        return explain_rerank(component.retriever, component.reranker, query, hit, where,
                              scope=scope, candidates=component.candidates)
    if isinstance(component, (BaseReranker, MaxSimScorer)):
        return explain_reranker(component, query, hit)
    if isinstance(component, HybridRetriever):
        return explain_rrf(component, query, hit, where, scope=scope)
    if isinstance(component, BM25Index):
        return explain_bm25(component, query, hit)
    if isinstance(component, DenseIndex):
        return explain_dense(component, query, hit)
    raise TypeError(f"no explanation for a {type(component).__name__}; explain a Pipeline, "
                    f"RerankedRetriever, reranker, HybridRetriever, BM25Index or DenseIndex "
                    f"(for a wrapper, explain the retriever it wraps)")


def explain_result(pipeline, result: Result) -> list[tuple[Explanation, ...]]:
    """For each source of ``result`` (a ``pipeline.ask`` answer), ``explain``'s explanation
    for the question as searched (``result.condensed``) and, when the search was filtered,
    ``explain_filter``'s: the ``where`` and ``scope`` are read from the trace's first
    retrieval stage, so they are the ones the pipeline used (its ``status`` filter too)."""
    searched = next((s.detail for s in result.trace if "where" in s.detail), {})
    where, scope = searched.get("where"), searched.get("scope")
    out = []
    for hit in result.sources:
        why = (explain(pipeline, result.condensed, hit, where, scope=scope),)
        if where or scope:
            why += (explain_filter(hit, where, scope=scope),)
        out.append(why)
    return out


def explain_result_dicts(pipeline, result: Result) -> list[list[dict]]:
    """``explain_result`` as JSON, one list of ``Explanation.to_dict()`` per source: what
    ``ragbook ask --explain --json`` adds under ``explanations`` and ``ragbook serve``'s
    ``/explain`` returns."""
    return [[e.to_dict() for e in es] for es in explain_result(pipeline, result)]
