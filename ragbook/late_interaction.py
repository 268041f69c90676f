"""Late interaction (ColBERT-style MaxSim): read a passage token by token against the question.

A bi-encoder squeezes each text into one vector before the two meet. Late interaction keeps
a vector per *token* and lets question and passage meet token by token (Khattab & Zaharia,
2020, "ColBERT"): every question token finds its best match among the passage's tokens, and
the passage scores the mean of those best matches,

    maxsim(q, p) = mean over question tokens i of  max over passage tokens j of  cos(q_i, p_j)

Here the token vectors are the offline encoder's own (all-MiniLM-L6-v2's last layer, the
vectors its mean pooling averages), not a model trained for MaxSim, so the score is blended
with the dense cosine: ``dense_weight * cos(q, p) + (1 - dense_weight) * maxsim(q, p)``,
the weight (0.2) chosen on the help-centre *dev* split (``bench/second_stage.py``,
chapter 6). It is the offline profile's ``cross_encoder`` role: over the hybrid top 50 it
lifted MRR@10 on both test splits (``docs/benchmarks.md``).
``[CLS]``, ``[SEP]`` and padding carry no word of the text and are dropped.

Token vectors are computed on the fly for the candidates a question brings and kept in an
in-memory cache of at most ``token_cache_mb`` (float16, least recently used first out): a
passage is 256 tokens x 384 numbers = 192 KiB, so the default 256 MB holds ~1,300 passages
(the whole help centre; every Python-docs section would need ~2 GB, more than a cache
should hold by default). Each pair's MaxSim, one number, is kept on disk instead, beside the
encoder's vectors (``ragbook.vector_store``): a re-run scores a pair it scored before without
reading a token, and a first run takes the scores ``ragbook.shipped`` carries for the pinned
encoder (verified on a probe first). ``keep_scores=False``, or an encoder with ``cache=False``,
keeps none and reads every pair's tokens, as a latency measurement wants.

>>> maxsim(np.eye(3)[:2], np.eye(3))          # each question token finds itself
1.0
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from . import models, shipped
from .checks import check_k
from .component import Component
from .embeddings import Encoder
from .rerank import CrossEncoderReranker
from .shipped import text_key
from .vector_store import VectorStore, fill, slug

__all__ = ["maxsim", "maxsim_alignment", "MaxSimScorer", "MaxSimReranker"]


def maxsim_alignment(query_tokens: np.ndarray,
                     passage_tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``query_tokens``, the row of ``passage_tokens`` it aligns with (its
    best cosine; both unit rows, so the inner product is the cosine) and that cosine: what
    ``maxsim`` averages, kept apart so an explanation can name each alignment.

    >>> maxsim_alignment(np.eye(3)[:2], np.eye(3)[::-1])[0].tolist()
    [2, 1]
    """
    sims = np.asarray(query_tokens, np.float32) @ np.asarray(passage_tokens, np.float32).T
    best = sims.argmax(axis=1)
    return best, sims[np.arange(len(best)), best]


def maxsim(query_tokens: np.ndarray, passage_tokens: np.ndarray) -> float:
    """Mean over the rows of ``query_tokens`` of their best cosine with a row of
    ``passage_tokens`` (``maxsim_alignment``'s cosines, averaged)."""
    return float(maxsim_alignment(query_tokens, passage_tokens)[1].mean())


class _TokenCache:
    """Token matrices by text hash, least recently used evicted past ``budget`` bytes."""

    def __init__(self, budget: int):
        self.budget, self.size, self.rows = budget, 0, OrderedDict()

    def get(self, key: str):
        if key in self.rows:
            self.rows.move_to_end(key)
            return self.rows[key]
        return None

    def put(self, key: str, value: np.ndarray) -> None:
        if value.nbytes > self.budget:
            return
        self.rows[key] = value
        self.size += value.nbytes
        while self.size > self.budget:
            self.size -= self.rows.popitem(last=False)[1].nbytes


class MaxSimScorer(Component):
    """Score (question, passage) pairs by the dense cosine blended with MaxSim over the
    encoder's token vectors — the cross-encoder's ``predict`` contract, so
    ``CrossEncoderReranker(MaxSimScorer())`` reranks with it. ``dense_weight=0`` is MaxSim
    alone, ``1`` the dense cosine alone. Scores lie in [-1, 1].

    ``keep_scores`` (with the encoder's cache on) keeps each pair's MaxSim on disk and takes
    shipped ones; ``keep_scores=False`` scores every pair from token vectors, as a server
    meeting new questions does — what a latency measurement wants."""

    # memory for token vectors, and where a score is read from: neither changes a score
    neutral_settings = frozenset({"token_cache_mb", "keep_scores"})

    def __init__(self, encoder=None, dense_weight: float = 0.2, token_cache_mb: int = 256,
                 keep_scores: bool = True):
        if not 0.0 <= float(dense_weight) <= 1.0:
            raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}; 0 scores by "
                             f"MaxSim alone, 1 by the dense cosine alone")
        self.encoder = encoder if encoder is not None else Encoder()
        self.dense_weight = float(dense_weight)
        self.token_cache_mb = check_k(token_cache_mb, "token_cache_mb")
        if not isinstance(keep_scores, bool):
            raise TypeError(f"keep_scores must be True or False, got {keep_scores!r}")
        self.keep_scores = keep_scores
        self._tokens = _TokenCache(token_cache_mb * 2 ** 20)
        self._store: VectorStore | None = None       # the MaxSim store, opened on first use

    def _token_model(self):
        """The encoder's sentence-transformers model, the only kind that gives token vectors
        and character offsets; a ``TypeError`` saying what to use instead for any other."""
        model = getattr(self.encoder, "model", None)
        if not (hasattr(model, "tokenizer") and hasattr(self.encoder, "format_passage")):
            name = getattr(self.encoder, "model_id", type(self.encoder).__name__)
            runs = f"runs a {type(model).__name__}" if model is not None else "has no .model"
            raise TypeError(
                f"MaxSim reads token vectors, which only a sentence-transformers model gives; "
                f"the encoder {name!r} {runs}, which gives none. Give it "
                f"a ragbook Encoder whose model is a sentence-transformers one (Encoder(), the "
                f"profile's 'encoder' role), or score without MaxSim: "
                f"SentenceReader(scoring='cosine'), a CrossEncoderReranker")
        return model

    def token_vectors(self, texts: Sequence[str], kind: str = "passage") -> list[np.ndarray]:
        """One (tokens, dim) matrix of unit rows per text, ``[CLS]``/``[SEP]``/padding
        dropped, as the encoder reads the text (its prefix for ``kind``, its ``max_length``)."""
        model = self._token_model()
        fmt = self.encoder.format_query if kind == "query" else self.encoder.format_passage
        texts = [fmt(t) for t in texts]
        keys = [text_key(t) for t in texts]
        out = [self._tokens.get(k) for k in keys]
        todo = sorted({k: t for k, t, o in zip(keys, texts, out, strict=True) if o is None}.items())
        if todo:                     # the model is shared: the input length travels with the call
            length = self.encoder.max_length or model.max_seq_length
            mats = model.encode([t for _, t in todo], output_value="token_embeddings",
                                batch_size=self.encoder.batch_size, show_progress_bar=False,
                                processing_kwargs={"text": {"max_length": length}})
            done = {}
            for (k, _), m in zip(todo, mats, strict=True):
                m = np.asarray(m.float().cpu().numpy()[1:-1])  # drop [CLS] and [SEP]
                m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
                done[k] = m.astype(np.float16)
                self._tokens.put(k, done[k])
            out = [o if o is not None else done[k] for k, o in zip(keys, out, strict=True)]
        return [o.astype(np.float32) for o in out]

    def token_strings(self, text: str, kind: str = "passage") -> list[str]:
        """The tokenizer's word pieces of ``text``, one per row ``token_vectors`` gives it
        (same prefix, same ``max_length``, ``[CLS]``/``[SEP]`` dropped): the names an
        explanation shows for each row."""
        model = self._token_model()
        fmt = self.encoder.format_query if kind == "query" else self.encoder.format_passage
        ids = model.tokenizer(fmt(text), truncation=True,
                              max_length=self.encoder.max_length or model.max_seq_length,
                              )["input_ids"]
        return model.tokenizer.convert_ids_to_tokens(ids)[1:-1]

    def span_scores(self, question: str, passage: str,
                    spans: Sequence[tuple[int, int]]) -> list[float]:
        """MaxSim of ``question`` against each ``(start, end)`` character span of ``passage``
        *as read in the passage*: every question token's best cosine with a passage token
        that lies inside the span — the passage's own token vectors, each made with its
        neighbours in view — averaged over the question's tokens. What a span reader wants
        from a bi-encoder: the span is scored by words read in context, not re-embedded
        alone. A span past the encoder's ``max_length`` has no such token and is scored
        alone (its own token vectors)."""
        spans = list(spans)
        if not spans:
            return []
        enc, model = self.encoder, self._token_model()
        text = enc.format_passage(passage)
        shift = len(text) - len(passage)      # a passage prefix comes before every offset
        offsets = model.tokenizer(text, truncation=True, return_offsets_mapping=True,
                                  max_length=enc.max_length or model.max_seq_length,
                                  )["offset_mapping"][1:-1]
        tokens = self.token_vectors([passage])[0]
        offsets = offsets[:len(tokens)]
        query = self.token_vectors([question], "query")[0]
        sims = query @ tokens.T
        inside = [[i for i, (a, z) in enumerate(offsets) if z > a and z - shift > start
                   and a - shift < end] for start, end in spans]
        alone = iter(self.token_vectors([passage[start:end] for (start, end), rows
                                         in zip(spans, inside, strict=True) if not rows]))
        return [float(sims[:, rows].max(axis=1).mean()) if rows else maxsim(query, next(alone))
                for rows in inside]

    def parts(self, pairs: Sequence[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
        """``(dense cosine, maxsim)`` per pair, the two scores the blend mixes."""
        pairs = list(pairs)
        if not pairs:
            return np.zeros(0, np.float32), np.zeros(0, np.float32)
        self._token_model()                  # a TypeError saying what to use, before any work
        questions = list(dict.fromkeys(q for q, _ in pairs))
        qvec = dict(zip(questions, self.encoder.encode_queries(questions), strict=True))
        pvec = self.encoder.encode_passages([p for _, p in pairs])
        dense = np.array([pvec[i] @ qvec[q] for i, (q, _) in enumerate(pairs)], np.float32)
        enc = self.encoder
        keys = [shipped.pair_key(enc.format_query(q), enc.format_passage(p)) for q, p in pairs]
        store, name = self._late_store()
        late, _ = fill(keys, pairs, self._maxsim_rows, 1, store,
                       shipped.shipped_for(name, shipped.ShippedScores),
                       size=lambda pair: len(pair[1]), block=512)
        return dense, late[:, 0]

    def _maxsim_rows(self, pairs: Sequence[Sequence[str]]) -> np.ndarray:
        """(n, 1): each (question, passage) pair's MaxSim, from their token vectors."""
        questions = list(dict.fromkeys(q for q, _ in pairs))
        qtok = dict(zip(questions, self.token_vectors(questions, "query"), strict=True))
        ptok = self.token_vectors([p for _, p in pairs])
        return np.array([[maxsim(qtok[q], ptok[i])] for i, (q, _) in enumerate(pairs)],
                        np.float32)

    def _late_store(self) -> tuple[VectorStore | None, str]:
        """The on-disk MaxSim store of this encoder (None when it caches nothing) and its
        name, which the shipped scores share: the slug of the encoder's fingerprint."""
        name = "maxsim__" + slug(getattr(self.encoder, "fingerprint", ""))
        if not (self.keep_scores and getattr(self.encoder, "cache", False)):
            return None, name
        if self._store is None:
            try:
                folder = models.cache_dir("embeddings")
            except OSError:     # the encoder's own cache has said so; score without one
                return None, name
            self._store = VectorStore(folder / f"{name}.sqlite", 1, unit=False)
        return self._store, name

    def predict(self, pairs: Sequence[tuple[str, str]], batch_size: int = 32, **_) -> np.ndarray:
        """The blended score of each (question, passage) pair, in input order."""
        dense, late = self.parts(pairs)
        return (self.dense_weight * dense + (1 - self.dense_weight) * late).astype(np.float32)


class MaxSimReranker(CrossEncoderReranker):
    """``CrossEncoderReranker`` over a ``MaxSimScorer``: the same ``order``/``cut``/
    ``rerank``, ``min_rerank_score`` and latency log, with scores in [-1, 1]
    (``confidence_kind = "rerank"``)."""

    neutral_settings = CrossEncoderReranker.neutral_settings | {"token_cache_mb", "keep_scores"}

    def __init__(self, encoder=None, dense_weight: float = 0.2, *, token_cache_mb: int = 256,
                 keep_scores: bool = True, batch_size: int = 32,
                 min_rerank_score: float | None = None):
        super().__init__(MaxSimScorer(encoder, dense_weight, token_cache_mb, keep_scores),
                         batch_size=batch_size, min_rerank_score=min_rerank_score)
        self.encoder, self.dense_weight = self._model.encoder, dense_weight
        self.token_cache_mb, self.keep_scores = token_cache_mb, keep_scores

    def confidence_bounds(self) -> tuple[float, float]:
        """A blend of cosines: always within [-1, 1]."""
        return -1.0, 1.0
