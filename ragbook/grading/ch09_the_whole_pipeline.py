"""Chapter 9 (solutions/09-the-whole-pipeline.py): why a question escalates, where the gold
passage was lost, the best confidence threshold, condensing a follow-up, figures and
conflicting answers; then figures and follow-ups on the help centre."""
from __future__ import annotations

from types import SimpleNamespace

from .. import condense, conflicts, datasets, pipeline, readers, result
from ..retrieval import BaseRetriever
from ..types import Hit
from .core import Case, Chapter, Mistake, predicted

CHAPTER = Chapter("09-the-whole-pipeline")


class _SpanReader(readers.BaseSpanReader):
    """An extractive reader as ``Pipeline.decide`` sees it: once every candidate's best span
    is known, only whether it ``accepts`` the best one matters (it never reads: ``spans``
    is ``BaseSpanReader``'s, which raises)."""

    def __init__(self, min_span_score=None):
        self.min_span_score = min_span_score


class _Prepared(BaseRetriever):
    """A retriever that is never asked: decide() works on prepared questions."""

    def search(self, query, k=10, where=None):  # never called by decide
        raise NotImplementedError

    def __len__(self) -> int:
        return 0

    corpus_fingerprint = "none: never searched"


def _prepared(confidence, docs, span_scores):
    """A ``Prepared`` question: one candidate per doc id, the best span of each scored as
    given (sentences without figures, so no conflict can be found)."""
    hits = tuple(Hit(f"{d}:0-40", 0.0 if confidence is None else confidence, r, doc_id=d,
                     text="Admins can change this in the settings.")
                 for r, d in enumerate(docs, 1))
    spans = tuple(readers.Span("Admins can change this in the settings.", 0, 39, s, h.id)
                  for h, s in zip(hits, span_scores, strict=True))
    return pipeline.Prepared("q", "q", hits, confidence, "cosine", spans, ())


@CHAPTER.exercise(
    "escalation_reason",
    "check in the pipeline's order: nothing retrieved -> no_candidates; a min_confidence is set "
    "and the confidence is below it -> low_confidence; a reader floor is set and "
    "the best span scores below it -> reader_abstained; otherwise None (a score equal to "
    "its threshold passes)",
    mistakes=(Mistake("a threshold that rejects an equal score (<=)", "escalate only "
                      "below the threshold: a score equal to it passes",
                      lambda n, conf, best, th, floor: "no_candidates" if n == 0
                      else "low_confidence" if th is not None and conf <= th
                      else "reader_abstained" if floor is not None and best <= floor
                      else None),))
def escalation_reason_cases():
    """Candidate counts, confidences and span scores below, at and above each threshold, as
    ``Pipeline.decide`` judges them."""
    for n, conf, best, th, floor in ((0, None, 0.0, 0.5, None), (0, 0.9, 0.9, None, None),
                                     (3, 0.42, 0.7, 0.45, None), (3, 0.45, 0.7, 0.45, None),
                                     (5, 0.61, 0.30, 0.45, 0.35), (5, 0.61, 0.35, 0.45, 0.35),
                                     (2, 0.30, 0.10, None, None), (2, 0.30, 0.10, None, 0.2),
                                     (4, 0.2, 0.1, 0.5, 0.5)):
        spans = [best] + [best / 2] * (n - 1) if n else []
        p = pipeline.Pipeline(_Prepared(), reader=_SpanReader(floor), min_confidence=th)
        reason = p.decide(_prepared(conf, [f"doc-{i}" for i in range(n)], spans)).reason
        yield Case((n, conf, best, th, floor), reason)


_TRACE = [{"name": "condense", "seconds": 0.0, "ids": [], "scores": [], "detail": {}},
          {"name": "dense", "seconds": 0.01, "ids": ["a:0-9", "g:0-9", "b:0-9"],
           "scores": [0.71, 0.69, 0.52], "detail": {}},
          {"name": "bm25", "seconds": 0.002, "ids": ["c:0-9", "a:0-9"], "scores": [9.1, 7.7],
           "detail": {}},
          {"name": "fuse", "seconds": 0.0003, "ids": ["a:0-9", "c:0-9", "g:0-9", "b:0-9"],
           "scores": [0.032, 0.016, 0.016, 0.016], "detail": {}},
          {"name": "read", "seconds": 0.2, "ids": ["a:0-9", "c:0-9"], "scores": [0.8, 0.5],
           "detail": {}},
          {"name": "decide", "seconds": 0.0, "ids": ["a:0-9"], "scores": [0.8], "detail": {}}]


@CHAPTER.exercise(
    "gold_ranks",
    "skip the condense stage; for every other stage find the position (from 1) of the "
    "first of its ids that is a gold id, or None when it passed on no gold id",
    mistakes=(Mistake("ranks counted from 0", "enumerate(ids, 1): the first id has rank 1",
                      lambda trace, gold: {s: r if r is None else r - 1 for s, r in
                                           result.gold_ranks(trace, gold).items()}),))
def gold_ranks_cases():
    """One sample trace against gold ids found early, late, never and in an escalated run."""
    for gold in ({"g:0-9"}, {"a:0-9"}, {"c:0-9", "g:0-9"}, {"z:0-9"}, set()):
        yield Case((_TRACE, gold), result.gold_ranks(_TRACE, gold))
    escalated = _TRACE[:5] + [{"name": "decide", "seconds": 0.0, "ids": [], "scores": [],
                               "detail": {"escalated": "low_confidence"}}]
    yield Case((escalated, {"a:0-9"}), result.gold_ranks(escalated, {"a:0-9"}))


@CHAPTER.exercise(
    "best_threshold",
    "try no threshold first, then every distinct confidence from the lowest up; a "
    "threshold answers the questions whose confidence is at least it; keep the first "
    "that maximises right - wrong_cost * wrong")
def best_threshold_cases():
    """Confidences with right and wrong answers at several costs of a wrong one, as
    ``Pipeline.calibrate`` picks the threshold."""
    sets = (([0.9, 0.8, 0.7, 0.6, 0.5], [True, True, False, True, False], 2.0),
            ([0.9, 0.8, 0.7], [True, True, True], 2.0),
            ([0.9, 0.8, 0.7], [False, False, False], 2.0),
            ([0.4, 0.6, 0.6, 0.5, 0.8, 0.3], [False, True, False, True, True, False], 1.0),
            ([0.4, 0.6, 0.6, 0.5, 0.8, 0.3], [False, True, False, True, True, False], 3.0),
            ([0.55, 0.75], [False, True], 0.5))
    for confidences, right, cost in sets:
        prepared = [_prepared(c, ["gold" if ok else "other"], [0.9])
                    for c, ok in zip(confidences, right, strict=True)]
        questions = [SimpleNamespace(gold=("gold",)) for _ in confidences]
        expected = pipeline.Pipeline(_Prepared(), reader=_SpanReader()).calibrate(
            prepared, questions, wrong_cost=cost).min_confidence
        yield Case((confidences, right, cost), expected)


_CSV_PRO = [{"role": "user", "content": "can I export our tickets to csv on pro?"},
            {"role": "assistant", "content": "Yes. On Pro, CSV export has unlimited rows."}]


@CHAPTER.exercise(
    "condense_follow_up",
    "no earlier user turn, or not a follow-up -> the question unchanged; otherwise the last "
    "user turn (every plan in it swapped for the first plan the new message names, lower "
    "case), a space, then the new message; mind word boundaries ('it' is not in 'limit')")
def condense_follow_up_cases():
    """Follow-ups and stand-alone questions, with and without an earlier user turn."""
    cases = [("and on the free plan?", _CSV_PRO), ("and on the free plan?", None),
             ("and on the free plan?", []),
             ("How do I reset the password of an agent who left the company last week?", _CSV_PRO),
             ("what about Enterprise, is there anything extra we should know before we sign?",
              _CSV_PRO),
             ("we looked at the export limits page but could not find where it is configured",
              _CSV_PRO),
             ("Is there a limit on the number of rows in a single export on the Starter plan?",
              _CSV_PRO),
             ("and starter?", [{"role": "user", "content": "Pro or Team: which plan has SSO on "
                                                           "the pro tier?"}]),
             ("does that apply to attachments too?",
              [{"role": "user", "content": "how long do you keep tickets"},
               {"role": "assistant", "content": "90 days on Free."},
               {"role": "user", "content": "   "}]),
             ("Okay, can admins do it?", [{"role": "assistant", "content": "Hello!"}])]
    for question, history in cases:
        yield Case((question, history), condense.RuleCondenser().condense(question, history))


@CHAPTER.exercise(
    "extract_quantities",
    "a number (digits, maybe with , or . inside) then, after optional spaces and one "
    "optional hyphen, a unit from the table not followed by another letter; drop the "
    "commas, normalise the unit; return a set of (value, unit)")
def extract_quantities_cases():
    """Sentences with figures in several units and spellings, look-alikes, and none."""
    for text in ("Free keeps 90 days of history; exports hold 10,000 rows.",
                 "Enterprise annual contracts carry a 14-day refund window.",
                 "Uptime is 99.9% and we answer within 4 hours, or 240 Minutes.",
                 "Version 3.11 added nothing measured in days.",
                 "Pro allows 1,200 requests per minute and 50 GB of attachments.",
                 "A 30 - day trial, 2 agents, 1 year, 7 dayshift workers.",
                 "No figures here at all."):
        yield Case((text,), conflicts.quantities(text))


_RETENTION = [("On the Free plan, 90 days of ticket history are kept.", 0.81),
              ("On the Free plan, tickets older than 30 days are deleted.", 0.80),
              ("On the Free plan, ticket history lasts 90 days.", 0.79),
              ("We email the owner 3 days before the trial ends.", 0.80),
              ("On the Free plan, tickets older than 30 days are deleted.", 0.70),
              ("Free plan tickets are kept for a while.", 0.80),
              ("Starter keeps 1 year of ticket history.", 0.84)]


@CHAPTER.exercise(
    "first_conflict",
    "an answer without figures has no conflict; go through the others in order, skip one "
    "scoring more than `margin` below the answer or sharing fewer than `min_shared` topic "
    "words with it; the first that states a figure in one of the answer's units, and none "
    "of the answer's (value, unit) pairs in those units, is the conflict")
def first_conflict_cases():
    """Retention answers against agreeing, conflicting, off-topic and low-scoring others."""
    span = lambda t: readers.Span(t[0], 0, len(t[0]), t[1])  # noqa: E731
    r = _RETENTION
    for answer, others, margin in ((r[0], [r[1]], 0.05), (r[0], [r[2], r[3], r[4]], 0.05),
                                   (r[0], [r[4]], 0.2), (r[0], [r[5], r[1]], 0.05),
                                   (r[5], [r[1]], 0.05), (r[6], [r[0], r[1]], 0.05),
                                   (r[3], [r[1]], 0.05)):
        found = conflicts.find_conflict(span(answer), [span(o) for o in others], margin)
        yield Case((answer, others, margin), None if found is None else found.text)


# -- on the real corpus

def _figure_articles() -> list[str]:
    docs = sorted(datasets.load_helpcentre().documents,
                  key=lambda d: (-len(conflicts.quantities(d.text)), d.id))
    return [d.text for d in docs[:3]] + [datasets.load_helpcentre().doc("api-rate-limits").text]


@CHAPTER.exercise("figures_by_unit",
                  "find every (value, unit) as in extract_quantities, then group: one entry "
                  "per unit, holding the sorted distinct values")
def figures_by_unit_cases():
    """The three articles with the most figures, and the API rate limits page."""
    for text in _figure_articles():
        found = conflicts.quantities(text)
        yield Case((text,), {u: sorted({v for v, w in found if w == u}) for _, u in found})


def _condensed_follow_ups() -> int:
    rc = condense.RuleCondenser()
    return sum(rc.condense(q.text, list(q.turns)) != q.text
               for q in datasets.load_helpcentre().questions if q.category == "follow_up")


@CHAPTER.exercise("predict_condensed_follow_ups",
                  "the rule condenser only rewrites a message it recognises as a follow-up "
                  "(short, or opening with 'and', 'what about', ...)")
def predict_condensed_follow_ups_cases():
    """The learner's guess of the help centre's follow-ups the rule condenser rewrites,
    within 3."""
    actual = _condensed_follow_ups()
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 3,
                                    "a prediction within 3 passes"))
