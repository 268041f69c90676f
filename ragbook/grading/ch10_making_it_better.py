"""Chapter 10 (solutions/10-making-it-better.py): parent documents, sentence windows, section
paths, fitting hits into a budget, metadata filters; then heading paths and budgets on the
help centre."""
from __future__ import annotations

from .. import chunking, contextual, datasets, evaluate, expansion, filters
from ..retrieval import BaseRetriever
from ..types import Chunk, Document, Hit
from .core import Case, Chapter, Mistake, predicted
from .corpus import answerable_dev_questions, helpcentre_bm25

CHAPTER = Chapter("10-making-it-better")


class _Replay(BaseRetriever):
    """A retriever that returns stored hits in order: the grader's stand-in for an index."""

    corpus_fingerprint = "replay"

    def __init__(self, hits):
        self.hits = list(hits)

    def search(self, query, k=10, where=None):
        return self.hits[:k]

    def __len__(self):
        return len(self.hits)


@CHAPTER.exercise(
    "parents_for_children",
    "walk the children best first; the parent of a child is the one of the same document "
    "with start <= child start < end; keep each parent the first time you meet it, stop at k")
def parents_for_children_cases():
    """Child hits at parent boundaries, several in one parent, and more parents than k, as
    ``ParentDocumentRetriever`` maps them."""
    parents = [("a#0", "a", 0, 900), ("a#1", "a", 900, 1700), ("b#0", "b", 0, 400),
               ("c#0", "c", 0, 1000), ("c#1", "c", 1000, 1800)]
    chunks = [Chunk(pid, doc, "x" * (e - s), s, e) for pid, doc, s, e in parents]
    for children, k in (([("a", 10), ("a", 950), ("b", 0)], 3),
                        ([("a", 10), ("a", 300), ("c", 1200), ("a", 899), ("b", 40)], 3),
                        ([("c", 1500), ("c", 1000), ("c", 999), ("a", 900)], 2),
                        ([("b", 399)], 5),
                        ([("a", 5), ("a", 6), ("a", 7)], 1)):
        hits = [Hit(f"{d}:{s}", 1.0 - n / 100, n + 1, d, "x", {}, s, s + 1)
                for n, (d, s) in enumerate(children)]
        pdr = expansion.ParentDocumentRetriever(_Replay(hits), chunks, fetch=len(hits))
        yield Case((children, parents, k), [h.id for h in pdr.search("q", k=k)])


_SENTENCES = ("Refunds are issued to the original card. Annual plans get 14 days. Monthly plans "
              "get 30 days. Seats added later follow the plan. Ask billing for anything else.")


@CHAPTER.exercise("sentence_window",
                  "the window runs from sentence i - n to sentence i + n, both included, "
                  "clipped to the first and last sentence; return (start of its first "
                  "sentence, end of its last)")
def sentence_window_cases():
    """Windows in the middle, clipped at either end, of width 0 and wider than the text."""
    spans = expansion.sentence_spans(_SENTENCES)
    doc = Document("d", _SENTENCES)
    for i, n in ((2, 1), (0, 1), (4, 2), (2, 0), (1, 10), (3, 1)):
        hit = Hit("d:s", 1.0, 1, "d", _SENTENCES[slice(*spans[i])], {}, *spans[i])
        swr = expansion.SentenceWindowRetriever(_Replay([hit]), [doc], window=n)
        yield Case((spans, i, n), swr.widen(hit))


_MARKDOWN = ("# Plans\n\nIntro.\n\n## Pro\n\nPro has SSO.\n\n### Limits\n\nTen seats.\n\n"
             "## Team\n\nTeam has more.\n\n# Billing\n\nInvoices monthly.")


@CHAPTER.exercise("section_path",
                  "go through the headings that start at or before the offset; a heading of "
                  "level L replaces every open heading of level >= L; return the open "
                  "headings' titles")
def section_path_cases():
    """Offsets under headings of every level, on a heading, and in a text without any."""
    doc = Document("d", _MARKDOWN)
    for where in ("Intro.", "Pro has", "Ten seats", "Team has", "Invoices", "## Pro"):
        offset = _MARKDOWN.index(where)
        yield Case((_MARKDOWN, offset), contextual.section_path(doc, offset))
    yield Case(("Plain text, no headings.", 5),
               contextual.section_path(Document("p", "Plain text, no headings."), 5))


def _fit_whole(lengths, budget, skip):
    """Whole hits only, stopping at (or, with ``skip``, passing over) one that does not fit."""
    out, left = [], budget
    for n in lengths:
        if n > left and not skip:
            break
        if n <= left:
            out.append(n)
            left -= n
    return out


@CHAPTER.exercise(
    "fit_budget",
    "take each hit whole while it fits in what is left of the budget; the first that does "
    "not fit gets only what is left (if anything is); nothing after it",
    mistakes=(Mistake("the hit that does not fit dropped", "the first hit that does not "
                      "fit is cut to what is left, not left out", lambda lengths, budget:
                      _fit_whole(lengths, budget, skip=False)),
              Mistake("a hit that does not fit skipped", "stop after the first hit that "
                      "does not fit (cut to what is left): later, shorter hits are less "
                      "relevant", lambda lengths, budget:
                      _fit_whole(lengths, budget, skip=True))))
def fit_budget_cases():
    """Hit lengths in words that fit, fill exactly, overflow once, and overflow at once."""
    for lengths, budget in (([200, 200, 200], 512), ([256, 256], 512), ([1000, 50], 256),
                            ([100, 300, 50], 350), ([40, 60], 1024), ([300, 10], 300)):
        hits = [Hit(f"h{n}", 1.0, n + 1, "d", " ".join(["w"] * size))
                for n, size in enumerate(lengths)]
        handed = expansion.fit_budget(hits, budget, length="words")
        yield Case((lengths, budget), [len(h.text.split()) for h in handed])


@CHAPTER.exercise(
    "where_matches",
    "every key must hold: a bare value means equal, a list means one of, a dict maps "
    "operators ($eq $ne $in $nin $gt $gte $lt $lte) to values; a missing key fails all but "
    "$ne and $nin")
def where_matches_cases():
    """A current and a retired page's metadata against filters of every kind."""
    current = {"status": "current", "updated": "2025-06-11", "department": "billing"}
    retired = {"status": "superseded", "updated": "2024-02-10", "department": "billing",
               "superseded_by": "billing-refund-policy"}
    for meta in (current, retired):
        for where in ({"status": "current"}, {"status": {"$ne": "superseded"}},
                      {"department": ["billing", "account"], "status": "current"},
                      {"updated": {"$gte": "2025-01-01", "$lt": "2026-01-01"}},
                      {"superseded_by": {"$nin": ["api-rate-limits"]}},
                      {"access": "public"}):
            yield Case((meta, where), filters.matches(meta, where))


# -- on the real corpus

def _heading_cases():
    for doc_id in ("billing-refund-policy", "api-rate-limits", "security-sso-setup"):
        doc = datasets.load_helpcentre().doc(doc_id)
        offsets = [c.start for c in chunking.chunk_documents([doc], size=300, overlap=0,
                                                             length="chars")]
        yield doc.text, offsets, [contextual.section_path(Document("d", doc.text), o)
                                  for o in offsets]


@CHAPTER.exercise("heading_paths",
                  "section_path at each offset: the headings that start at or before it, each "
                  "heading of level L closing the open ones of level >= L")
def heading_paths_cases():
    """Three articles, at the start of each of their 300-character chunks."""
    for text, offsets, expected in _heading_cases():
        yield Case((text, offsets), expected)


def _whole_in_budget() -> int:
    q = answerable_dev_questions(1)[0]
    hits = helpcentre_bm25().search(q.text, k=10)
    handed = expansion.fit_budget(hits, 512, length="words")
    return sum(len(h.text) == len(o.text) for h, o in zip(handed, hits, strict=False))


@CHAPTER.exercise("predict_whole_in_budget",
                  "a help-centre article runs to a few hundred words, so a 512-word budget "
                  "holds only a couple of whole articles")
def predict_whole_in_budget_cases():
    """The learner's guess of the whole articles of a top 10 that fit 512 words, within 1."""
    actual = _whole_in_budget()
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 1,
                                    "a prediction within 1 passes"))


def _choose_then_score(scores, folds, *, on):
    """The two ways of getting ``held_out_choice`` wrong: choose with every question
    (``on="all"``) or with the fold's own questions (``on="fold"``), then score the fold."""
    ids = [q for fold in folds for q in fold]
    total = 0.0
    for fold in folds:
        pool = ids if on == "all" else fold
        best = max(scores, key=lambda name: sum(scores[name][q] for q in pool))
        total += sum(scores[best][q] for q in fold)
    return total / len(ids)


@CHAPTER.exercise(
    "held_out_choice",
    "for each fold, sum every setting's scores over the questions of the OTHER folds, take "
    "the best (the first on a tie), add up its scores on the fold's own questions; divide "
    "the total by the number of questions",
    mistakes=(Mistake("chosen with every question", "the fold being scored must not take part "
                      "in the choice: choose on the other folds only",
                      lambda scores, folds: _choose_then_score(scores, folds, on="all")),
              Mistake("chosen on the fold itself", "choosing with the questions you then "
                      "score is the trap this exercise is about: choose on the other folds",
                      lambda scores, folds: _choose_then_score(scores, folds, on="fold"))))
def held_out_choice_cases():
    """Score tables where the best setting overall, per fold and held out differ."""
    tables = (
        ({"a": {"q1": 1.0, "q2": 0.0, "q3": 0.5, "q4": 0.5},
          "b": {"q1": 0.0, "q2": 0.5, "q3": 1.0, "q4": 0.0}}, [["q1", "q2"], ["q3", "q4"]]),
        ({"dense": {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0, "q5": 0.5, "q6": 0.5},
          "hybrid": {"q1": 0.0, "q2": 0.0, "q3": 1.0, "q4": 1.0, "q5": 1.0, "q6": 0.0},
          "bm25": {"q1": 0.5, "q2": 0.5, "q3": 0.5, "q4": 0.5, "q5": 0.0, "q6": 1.0}},
         [["q1", "q4"], ["q2", "q5"], ["q3", "q6"]]),
        ({"x": {"q1": 0.2, "q2": 0.9, "q3": 0.4}, "y": {"q1": 0.8, "q2": 0.1, "q3": 0.5}},
         [["q1"], ["q2"], ["q3"]]),
        ({"same": {"q1": 1.0, "q2": 0.0}, "tie": {"q1": 0.0, "q2": 1.0}}, [["q1"], ["q2"]]))
    for scores, folds in tables:
        yield Case((scores, folds), evaluate.held_out_choice(scores, folds))
