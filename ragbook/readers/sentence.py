"""The sentence reader: the offline extractive reader, and the reader each profile ships.

``SentenceReader`` returns the passage sentence closest to the question under the
bi-encoder; ``default_extractive_reader`` picks ``ExtractiveReader`` or it by profile, with
the abstention floor calibrated for the offline encoder (``OFFLINE_MIN_SPAN_SCORE``);
``calibrate_min_span_score`` sets any extractive reader's floor from labelled tasks.
"""
from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import replace

from .. import models
from ..checks import check_threshold
from ..embeddings import Encoder
from ..evaluate import f1_score
from ..late_interaction import MaxSimScorer
from ..text import sentence_spans
from ..types import Hit
from .extractive import BaseSpanReader, ExtractiveReader, Span
from .units import answer_units, fragment_paragraphs, is_reference

__all__ = ["SentenceReader", "default_extractive_reader", "calibrate_min_span_score",
           "OFFLINE_MIN_SPAN_SCORE", "OFFLINE_RANK_WEIGHT", "OFFLINE_SENTENCE_ENCODER"]


class SentenceReader(BaseSpanReader):
    """Extract the passage *sentence* most similar to the question under the bi-encoder.

    The honest baseline for a span reader — and, measured on the reader sets' test split
    (``bench/readers.py``), better than a QA head fine-tuned on CPU from the packaged MiniLM
    on our ~250 training questions. Like any extractive reader it can only return text that
    is in the passage; it answers with a whole sentence, so exact match is low and F1 is the
    fairer score.

    Settings: ``encoder`` (None: the active profile's ``Encoder()``, made on first use);
    ``min_span_score``, the abstention floor on a span's score (None: never abstain; the
    value ``default_extractive_reader`` ships is calibrated for one encoder only);
    ``min_words``, the shortest sentence that can be an answer (shorter ones, and Markdown
    headings, are skipped); ``whole_units`` (True): answer with ``readers.units.answer_units``
    — a sentence joined over the wrapped lines the splitter cut (version lists, URLs,
    commands, "e.g."), and a sentence ending in ":" with the block it introduces — instead of
    bare ``ragbook.text.sentence_spans``; ``skip_references`` (True): a sentence that only
    points elsewhere ("See the full discussion.", a quoted heading with its section number:
    ``units.is_reference``) is never an answer; ``fragment_paragraphs`` (True): a paragraph
    that opens with a short sentence (``units.fragment_paragraphs``: "Pre-Depends is a
    special dependency." alone restates the term) is a candidate answer too;
    ``rank_weight``, a prior for the retrieval rank: a sentence of the hit ranked ``r``
    scores ``cosine + rank_weight / r`` (0: cosine alone), so that between two near-equal
    sentences the better-retrieved passage wins — the score, and so the floor it is
    compared with, then carries the rank. 0 here;
    ``default_extractive_reader`` ships ``OFFLINE_RANK_WEIGHT`` (docs/benchmarks.md,
    "Answers on an unseen corpus": it helped on the Python docs and the unseen manual and
    did not hurt the help centre significantly at 0.05; 0.1 did); ``scoring``: ``"cosine"``
    (the default) scores a unit by its own vector's cosine with the question's; ``"late"``
    reads the passage first and scores a unit by MaxSim over the passage's own token vectors
    inside it (``MaxSimScorer.span_scores``: words read in context). On the unseen manual's
    dev half, ``"late"`` picks a right unit for 0.643 of the questions instead of 0.333 and
    holds a 25% delivered error at 62% coverage; on the test half the gain shrinks (+0.071
    right picks, CI includes zero; 41% coverage at 29% error with the dev floor), and on the
    help centre and the Python docs nothing moves beyond its CI (docs/benchmarks.md,
    "Reading the unit in its passage"). It costs one encoder pass per passage read. A floor
    calibrated for one setting of these does not carry over to another.
    """

    def __init__(self, encoder=None, min_span_score: float | None = None, min_words: int = 3,
                 rank_weight: float = 0.0, whole_units: bool = True,
                 skip_references: bool = True, fragment_paragraphs: bool = True,
                 scoring: str = "cosine"):
        rank_weight = check_threshold(rank_weight, "rank_weight") or 0.0
        if rank_weight < 0:
            raise ValueError(f"rank_weight must be >= 0 (a bonus for better-ranked hits), got "
                             f"{rank_weight!r}")
        self._encoder = encoder
        self.min_span_score = check_threshold(min_span_score, "min_span_score")
        self.min_words, self.rank_weight = min_words, rank_weight
        self.whole_units, self.skip_references = bool(whole_units), bool(skip_references)
        self.fragment_paragraphs = bool(fragment_paragraphs)
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))}, got "
                             f"{scoring!r}: 'cosine' scores each sentence's own vector, 'late' "
                             f"its tokens as read in the passage")
        self.scoring = scoring
        self.latencies_: list[float] = []

    def _fingerprint_extra(self) -> dict:
        if self._encoder is not None:  # given: its own fingerprint is in the settings
            return {}
        return {"encoder": self.encoder.fingerprint}  # resolves the model; loads nothing

    @property
    def encoder(self):
        """The bi-encoder: the one given, else the active profile's ``Encoder()`` (made on
        first use; it loads its model on its first ``encode_*`` call)."""
        if self._encoder is not None:
            return self._encoder
        if getattr(self, "_default_encoder", None) is None:  # not a setting
            self._default_encoder = Encoder()
        return self._default_encoder

    def spans(self, question: str, context: str, source: str = "") -> list[Span]:
        """Every sentence (answer unit) of ``context`` of at least ``min_words`` words,
        headings and references skipped, with its score for the question (``scoring``: its
        own vector's cosine, or its MaxSim as read in ``context``); the whole context when
        none qualifies."""
        return self._scored(question, [(source, context, self._sentences(context))])[0]

    def hit_spans(self, question: str, hit: Hit) -> list[Span]:
        """``spans`` of a retrieved hit's text, each score raised by the rank prior
        ``rank_weight / hit.rank`` (unchanged when ``rank_weight`` is 0)."""
        return self.hits_spans(question, [hit])[0]

    def hits_spans(self, question: str, hits: Sequence[Hit]) -> list[list[Span]]:
        """``hit_spans`` of every hit with one encoder call for the question and one for all
        their sentences (per hit, an uncached ``Pipeline.ask`` over five hits embedded the
        question six times and made five small batches: 1.41x the raw model calls)."""
        found = self._scored(question, [(h.id, h.text, self._sentences(h.text)) for h in hits])
        if not self.rank_weight:
            return found
        return [[replace(s, score=s.score + self.rank_weight / h.rank) for s in spans]
                for h, spans in zip(hits, found, strict=True)]

    def _sentences(self, context: str) -> list[tuple[int, int, str]]:
        """(start, end, text) of the sentences that can be an answer (the whole context when
        none qualifies; none for a blank context)."""
        cut = (answer_units if self.whole_units else sentence_spans)(context)
        if self.fragment_paragraphs:
            cut = cut + fragment_paragraphs(context, cut)
        sents = [(a, z, context[a:z]) for a, z in cut]
        sents = [(a, z, t) for a, z, t in sents
                 if len(t.split()) >= self.min_words and not t.startswith("#")
                 and not (self.skip_references and is_reference(t))]
        if not sents and context.strip():
            text = context.strip()
            start = context.index(text)
            sents = [(start, start + len(text), text)]
        return sents

    def _scored(self, question: str, groups) -> list[list[Span]]:
        """Spans of each ``(source, context, sentences)`` group: by cosine in one batch, or
        (``scoring="late"``) by MaxSim over each context's token vectors."""
        texts = [t for *_, sents in groups for *_, t in sents]
        if not texts:
            return [[] for _ in groups]
        if self.scoring == "late":
            if getattr(self, "_late", None) is None:   # not a setting: made from the encoder
                self._late = MaxSimScorer(self.encoder, dense_weight=0.0)
            scores = [x for _, context, sents in groups for x in
                      self._late.span_scores(question, context, [(a, z) for a, z, _ in sents])]
        else:
            scores = (self.encoder.encode_passages(texts)
                      @ self.encoder.encode_queries([question])[0]).tolist()
        out, at = [], 0
        for source, _, sents in groups:
            out.append([Span(t, a, z, s, source) for (a, z, t), s in
                        zip(sents, scores[at:at + len(sents)], strict=True)])
            at += len(sents)
        return out


# The rank prior default_extractive_reader ships for SentenceReader: chosen on dev splits
# by `bench/unseen.py --split dev --compare ...` (docs/benchmarks.md, "Answers on an unseen
# corpus"): of 0.05 and 0.1, the larger one the help centre's dev split did not reject.
OFFLINE_RANK_WEIGHT = 0.05
# The abstention floor default_extractive_reader ships for SentenceReader (a cosine plus the
# rank prior). Where it came from: `RAGBOOK_PROFILE=offline python tools/calibrate_reader.py`,
# 2026-12-04; offline profile, encoder sentence-transformers/all-MiniLM-L6-v2, the shipped
# settings (answer units, references skipped, rank_weight OFFLINE_RANK_WEIGHT);
# calibrate_min_span_score (the score with the best mean F1) on the help-centre reading
# tasks of the DEV split (117 tasks, 53 unanswerable; their passages' ranks are a seeded
# shuffle). On the test split (226 tasks) it abstains on 61% and lifts F1 from 0.194 to
# 0.534: docs/benchmarks.md, "Answers on an unseen corpus". (The sentence-only reader
# without the prior had 0.5605.) A cosine means something only under the encoder that
# produced it: that model alone.
OFFLINE_MIN_SPAN_SCORE = 0.6201
OFFLINE_SENTENCE_ENCODER = "sentence-transformers/all-MiniLM-L6-v2"
#: how ``SentenceReader`` scores a unit (its ``scoring`` setting)
SCORINGS = ("cosine", "late")


def default_extractive_reader(profile: str | None = None, **settings) -> BaseSpanReader:
    """The extractive reader this profile ships: ``ExtractiveReader`` over the profile's
    ``span_reader`` model when it has one, else (offline) the ``SentenceReader`` that
    measured better than a CPU-fine-tuned QA head.

    Offline, ``rank_weight`` defaults to ``OFFLINE_RANK_WEIGHT`` and ``min_span_score`` to
    ``OFFLINE_MIN_SPAN_SCORE`` — chosen and calibrated (on dev splits) for the offline
    encoder (all-MiniLM-L6-v2) and cosine scoring only, so they apply only when the
    profile's encoder is that model and ``scoring`` is ``"cosine"``; with ``scoring="late"``
    (no rank prior: on the unseen manual's dev half it lowered the right picks), any other
    encoder, and for
    ``ExtractiveReader`` (whose score is a span probability, not a cosine), the default is
    None (never abstain) until you calibrate your own (``calibrate_min_span_score`` on
    labelled dev tasks). Passing ``min_span_score=None`` explicitly always means never
    abstain. Settings only ``ExtractiveReader`` has (``max_length``, ``overlap``, ...) are
    not used offline. Nothing is loaded here.
    """
    span_settings = [n for n in inspect.signature(ExtractiveReader).parameters
                     if n not in ("model", "profile")]
    sentence_settings = [n for n in inspect.signature(SentenceReader).parameters
                         if n != "encoder"]
    unknown = sorted(set(settings) - set(span_settings) - set(sentence_settings))
    if unknown:                   # a typo would otherwise be dropped offline without a word
        raise TypeError(f"default_extractive_reader() got unknown setting(s) {unknown}; the "
                        f"offline SentenceReader takes {', '.join(sentence_settings)} and "
                        f"ExtractiveReader {', '.join(span_settings)}")
    try:
        models.resolve("span_reader", profile)
    except models.ModelUnavailableError:
        encoder = Encoder(profile=profile)
        chosen = {k: v for k, v in settings.items() if k in sentence_settings}
        if encoder.model_id == OFFLINE_SENTENCE_ENCODER and chosen.get("scoring",
                                                                      "cosine") == "cosine":
            chosen.setdefault("rank_weight", OFFLINE_RANK_WEIGHT)
            chosen.setdefault("min_span_score", OFFLINE_MIN_SPAN_SCORE)
        return SentenceReader(encoder, **chosen)
    return ExtractiveReader(profile=profile, **settings)


def calibrate_min_span_score(reader: BaseSpanReader, tasks) -> float:
    """Set ``reader.min_span_score`` (any extractive reader) to the floor that maximises mean
    F1 on ``tasks`` (``ReadingTask``s, unanswerable ones included), and return it. Each
    task's best span is taken over its passages' ``reader.hit_spans``, as ``read`` takes it.
    Calibrate on training or dev tasks, never on the ones you report."""
    if not tasks:
        raise ValueError("no tasks to calibrate on; pass labelled ReadingTasks "
                         "(e.g. load_reading_tasks(split='train'))")
    best = [max((s for spans in reader.hits_spans(t.question, t.passages) for s in spans),
                key=lambda s: s.score) for t in tasks]
    reader.min_span_score = max(
        sorted({s.score for s in best}),
        key=lambda th: sum(f1_score(s.text if s.score >= th else None, t.answers)
                           for s, t in zip(best, tasks, strict=True)))
    return reader.min_span_score
