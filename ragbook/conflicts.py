"""Conflicting sources: two pages that state different figures for the same thing (90 vs
30 days of ticket history on Free). The pipeline escalates such an answer instead of
choosing one page's number.

>>> sorted(quantities("Free keeps 90 days of history; exports hold 10,000 rows."))
[('10000', 'row'), ('90', 'day')]

A figure is compared however it is written: ``figures`` reads number words as digits
("ninety days" is 90 days), so a page that spells its figures out still disagrees with one
that writes them in digits, and a generated claim "thirty days" is checked like "30 days".
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from .bm25 import Tokenizer
from .types import Span

__all__ = ["quantities", "figures", "as_digits", "topic_words", "find_conflict",
           "contradicts"]


_UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "month": "month",
          "months": "month", "year": "year", "years": "year", "hour": "hour", "hours": "hour",
          "minute": "minute", "minutes": "minute", "second": "second", "seconds": "second",
          "row": "row", "rows": "row", "agent": "agent", "agents": "agent", "%": "%",
          "percent": "%", "gb": "gb", "mb": "mb", "request": "request", "requests": "request"}
_WORDS = Tokenizer()  # lower-cased content words, stopwords dropped
_QUANTITY = re.compile(r"(\d+(?:[.,]\d+)*)\s*-?\s*(" + "|".join(sorted(_UNITS, key=len,
                                                                        reverse=True))
                       + r")(?![a-z])", re.I)


def quantities(text: str) -> set[tuple[str, str]]:
    """The (value, unit) figures a sentence states, units normalised.

    >>> sorted(quantities("Free keeps 90 days of history; exports hold 10,000 rows."))
    [('10000', 'row'), ('90', 'day')]
    """
    return {(v.replace(",", ""), _UNITS[u.lower()]) for v, u in _QUANTITY.findall(text)}


_ONES = "one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_NUMBER_WORD = ({w: n for n, w in enumerate(_ONES, 1)} | {w: n for n, w in enumerate(_TEENS, 10)}
                | {w: n for n, w in zip(range(20, 100, 10), _TENS, strict=True)}
                | {"hundred": 100, "thousand": 1000})
_ANY_WORD = "|".join(sorted(_NUMBER_WORD, key=len, reverse=True))
# a run of number words: "ninety", "thirty-five", "two hundred and fifty", "one thousand"
_NUMBER_RUN = re.compile(rf"\b(?:{_ANY_WORD})(?:(?:[\s-]+|(?<=hundred)\s+and\s+|"
                         rf"(?<=thousand)\s+and\s+)(?:{_ANY_WORD}))*\b", re.I)


def _value(run: str) -> int:
    """The number a run of number words names ("two hundred and fifty" -> 250)."""
    total = current = 0
    for word in re.findall(r"[a-z]+", run.lower()):
        n = _NUMBER_WORD.get(word)
        if n is None:                                   # "and"
            continue
        if n == 100:
            current = (current or 1) * 100
        elif n == 1000:
            total, current = total + (current or 1) * 1000, 0
        else:
            current += n
    return total + current


def as_digits(text: str) -> str:
    """``text`` with its number words as digits ("ninety days" -> "90 days", "thirty-five"
    -> "35", "two hundred days" -> "200 days"), so a figure is compared however it is
    written; "one" alone is left as it is, since it is as often a pronoun.

    >>> as_digits("Tickets older than thirty days, or two hundred and fifty rows, or one.")
    'Tickets older than 30 days, or 250 rows, or one.'
    """
    return _NUMBER_RUN.sub(lambda m: m.group() if m.group().lower() == "one"
                           else str(_value(m.group())), text)


def figures(text: str) -> set[tuple[str, str]]:
    """``quantities`` of ``text`` with its number words read as digits (``as_digits``): the
    figures the conflict checks compare.

    >>> sorted(figures("On the Free plan, tickets older than thirty days are deleted."))
    [('30', 'day')]
    """
    return quantities(as_digits(text))


def topic_words(text: str) -> set[str]:
    """A sentence's content words without figures or units: what ``find_conflict`` compares
    to decide whether two sentences talk about the same thing.

    >>> sorted(topic_words("On the Free plan, 90 days of history are kept."))
    ['free', 'history', 'kept', 'plan']
    """
    return {t for t in _WORDS(as_digits(text)) if not t[0].isdigit() and t not in _UNITS}


def find_conflict(answer: Span, others: Sequence[Span], margin: float = 0.05,
                  min_shared: int = 2) -> Span | None:
    """Another source's best sentence that states a different figure for the same thing
    while answering almost as well — two pages that disagree (90 vs 30 days of ticket
    history on Free). "The same thing": the same unit with no shared value, and at least
    ``min_shared`` content words in common besides the figures; "almost as well": a score
    within ``margin`` of the answer's. None when there is no such sentence.

    >>> a = Span("On the Free plan, 90 days of ticket history are kept.", 0, 53, 0.81)
    >>> b = Span("On the Free plan, tickets older than 30 days are deleted.", 0, 57, 0.80)
    >>> find_conflict(a, [b]) is b
    True
    """
    return next((o for o in others if o.score >= answer.score - margin
                 and contradicts(answer.text, o.text, min_shared)), None)


def contradicts(claim: str, other: str, min_shared: int = 2, min_share: float = 0.0) -> bool:
    """``other`` states a different figure for the same thing as ``claim``: a figure of the
    same unit and none of the same value (number words read as digits: ``figures``), and at
    least ``min_shared`` content words — and ``min_share`` of the claim's — in common
    besides the figures (a plural counts as its singular: "tickets" is "ticket").

    >>> contradicts("Free keeps 90 days of ticket history.", "Free tickets older than 30 "
    ...             "days are deleted.", min_shared=2)
    True
    """
    mine = figures(claim)
    if not mine:
        return False
    topic = _singular(topic_words(claim))
    if len(topic & _singular(topic_words(other))) < max(min_shared, min_share * len(topic)):
        return False
    theirs = {q for q in figures(other) if q[1] in {u for _, u in mine}}
    return bool(theirs) and not theirs & mine


def _singular(words: set[str]) -> set[str]:
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
            for w in words}
