"""Chapter 8 (solutions/08-generative-reader.py): citations in a model's reply, the order to
hand passages in, recognising an abstention, numbering passages; then citations and context
size on help-centre rankings."""
from __future__ import annotations

from .. import datasets, readers
from ..types import Hit
from .core import Case, Chapter, Mistake, predicted
from .corpus import answerable_dev_questions, bm25_ranking, helpcentre_tokens

CHAPTER = Chapter("08-generative-reader")


def _passages(n: int) -> list:
    """``n`` retrieved passages, best first, with ids p1..pn."""
    return [Hit(f"p{i}", 1.0 / i, i) for i in range(1, n + 1)]


@CHAPTER.exercise("parse_citations",
                  "find every [n] in the reply; valid only when there is at least one and "
                  "every n is between 1 and the number of passages")
def parse_citations_cases():
    """Replies with one, several, out-of-range and no citations."""
    for reply, n in (("14 days [1].", 3), ("14 days [1]. 30 days [3][1].", 3), ("14 days [4].", 3),
                     ("Fourteen days.", 3), ("[2] says 7 days; [1] says 21 [2].", 2),
                     ("14 days [0].", 3)):
        cited = readers.parse_citations(reply, _passages(n))
        yield Case((reply, n), (list(cited.numbers), cited.valid))


@CHAPTER.exercise("reading_order",
                  "the strongest passage first, the second-strongest last, the weakest in the "
                  "middle: take ranks 1, 3, 5, ... then the even ranks backwards")
def reading_order_cases():
    """Rankings of 1 to 6 passages."""
    for n in (1, 2, 3, 5, 6):
        ids = [h.id for h in _passages(n)]
        yield Case((ids,), [h.id for h in readers.order_for_reading(_passages(n))])


@CHAPTER.exercise(
    "is_abstention",
    "the model abstains only when the whole reply is the exact string NOT_IN_CONTEXT "
    "(surrounding spaces and a final full stop allowed)",
    mistakes=(Mistake("a search anywhere in the reply", "only a reply that is exactly "
                      "the marker abstains; a sentence that mentions it does not",
                      lambda reply: "NOT_IN_CONTEXT" in reply),
              Mistake("a case-insensitive match", "the marker is exact and upper case",
                      lambda reply: reply.strip().rstrip(".").strip().upper()
                      == "NOT_IN_CONTEXT")))
def is_abstention_cases():
    """The marker alone, padded, in lower case, inside a sentence, spelt out, and an answer."""
    for reply in ("NOT_IN_CONTEXT", " NOT_IN_CONTEXT.\n", "not_in_context",
                  "The answer is NOT_IN_CONTEXT",
                  "NOT IN CONTEXT", "14 days [1]"):
        yield Case((reply,), readers.is_abstention(reply))


@CHAPTER.exercise("number_passages",
                  "one block per passage, numbered from 1, each giving its source, so the model "
                  "can cite [n] and the code can map n back to a source")
def number_passages_cases():
    """One passage, and three."""
    for texts, sources in ((["Refunds take 5 days."], ["billing-faq"]),
                           (["A.", "B.", "C."], ["s1", "s2", "s3"])):
        yield Case((texts, sources), readers.number_passages(texts, sources))


# -- on the real corpus

def _cited_cases():
    for q in answerable_dev_questions(3):
        ids = bm25_ranking(q.text, 5)
        first = datasets.load_helpcentre().doc(ids[0]).text.split("\n\n")[1].strip()
        for reply in (f"{first} [1]", f"{first} [2][1]. See also [1] and [5].",
                      f"{first} [7]", "NOT_IN_CONTEXT"):
            yield reply, ids


@CHAPTER.exercise("cited_sources",
                  "the numbers in [n] marks, in order; keep those between 1 and the number of "
                  "passages; map n to passage_ids[n - 1]; drop repeats, keeping the first")
def cited_sources_cases():
    """Replies citing BM25's top 5 for three dev questions: once, repeatedly, out of range,
    and not at all."""
    for reply, ids in _cited_cases():
        hits = [Hit(d, 1.0, r) for r, d in enumerate(ids, 1)]
        yield Case((reply, ids), list(readers.parse_citations(reply, hits).sources))


def _top3_tokens() -> int:
    q = answerable_dev_questions(2)[1]
    return sum(helpcentre_tokens()[d] for d in bm25_ranking(q.text, 3))


@CHAPTER.exercise("predict_context_tokens",
                  "a help-centre article is a few hundred words, and an encoder token is about "
                  "three quarters of a word")
def predict_context_tokens_cases():
    """The learner's guess of the tokens in a dev question's top 3 articles, within 30%."""
    actual = _top3_tokens()
    yield Case((), verify=predicted(actual, lambda p: abs(p - actual) <= 0.3 * actual,
                                    "a prediction within 30% passes"))
