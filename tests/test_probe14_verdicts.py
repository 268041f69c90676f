"""Issue 36, session 14: verdicts a reader's checks should reach but did not. Three classes a
hostile probe got delivered — by ``ask`` and shown by ``stream`` alike — by the generative
reader over a chat model that writes what it is scripted to (the *model* is the test
double; the reader, its checks and the pipeline are the real ones, on a small BM25 index):

* a figure with its unit swapped ("14 hours" against a passage that gives 14 days) counted
  as backed, since only the digits were looked for;
* an invented statement glued to a quoted one where the sentence splitter sees no boundary
  ("...payment method.Enterprise customers ...", "; ", "。") rode on the quoted words'
  share;
* a figure written in words ("ninety days", "thirty days") escaped the conflict check,
  which read only digits: the same answer in digits escalated ``conflict``.
"""
import re

import pytest

from ragbook.bm25 import BM25Index
from ragbook.chunking import chunk_documents
from ragbook.conflicts import as_digits, contradicts, figures, find_conflict
from ragbook.pipeline import Pipeline
from ragbook.readers import GenerativeReader, support
from ragbook.types import Document, Span

REFUND = ("Refunds for monthly plans are issued within 14 days of the request to the "
          "original payment method")
HISTORY = "On the Free plan, 90 days of ticket history are kept."
RETENTION = "On the Free plan, tickets older than 30 days are deleted."


def page(doc_id: str, text: str) -> Document:
    return Document(doc_id, f"# {doc_id}\n\n{text}\n", metadata={"status": "current"})


PAGES = [page("refunds", f"{REFUND}. Annual plans can be cancelled at any time."),
         page("history", HISTORY), page("retention", RETENTION),
         page("twofa", "Go to Settings > Security to turn on two-step verification.")]


class Scripted:
    """A chat model that replies ``reply``, streamed in ``size``-character pieces (0: in one
    piece; None: word by word)."""

    def __init__(self, reply: str, size: int | None = None):
        self.reply, self.size = reply, size

    def generate(self, messages, max_new_tokens=None, stop=()):
        return self.reply

    def stream(self, messages, max_new_tokens=None, stop=()):
        if self.size is None:
            yield from re.findall(r"\S+\s*", self.reply)
        else:
            step = self.size or len(self.reply)
            yield from (self.reply[i:i + step] for i in range(0, len(self.reply), step))


def pipeline(reply: str, pages=PAGES, size: int | None = None) -> Pipeline:
    index = BM25Index().build(chunk_documents(pages, size=256, overlap=32))
    return Pipeline(index, reader=GenerativeReader(Scripted(reply, size), reorder=False))


def cite(question: str, doc: str, pages=PAGES) -> int:
    """The passage number ``doc`` has in the prompt of ``question``."""
    pipe = pipeline("", pages)
    pipe.reader.read(question, pipe.prepare(question).candidates)
    prompt = pipe.reader.last_["messages"][-1]["content"]
    return int(re.search(rf'<passage n="(\d+)" source="{doc}">', prompt)[1])


def verdicts(pipe: Pipeline, question: str):
    """(ask's Result, stream's Result, what the stream showed)."""
    asked, streamed = pipe.ask(question), pipe.stream(question)
    shown = "".join(streamed)
    return asked, streamed.result, shown


REFUNDS_Q = "how long do refunds for monthly plans take?"
HISTORY_Q = "how many days of ticket history does the free plan keep?"


# -- a figure's unit ---------------------------------------------------------------------
@pytest.mark.parametrize("claim", ["Refunds for monthly plans are issued within 14 hours",
                                   "Refunds for monthly plans are issued within 14 weeks of "
                                   "the request"])
def test_a_figure_with_its_unit_swapped_is_not_backed(claim):
    assert support(claim, f"{REFUND}.") == 0.0
    assert support(f"{REFUND}.", f"{REFUND}.") == 1.0
    assert support("Refunds for monthly plans take fourteen days", f"{REFUND}.") >= 0.5


@pytest.mark.parametrize("size", [None, 0, 1])
def test_a_swapped_unit_escalates_on_ask_and_stream_alike(size):
    n = cite(REFUNDS_Q, "refunds")
    reply = f"Refunds for monthly plans are issued within 14 hours [{n}]."
    asked, streamed, shown = verdicts(pipeline(reply, size=size), REFUNDS_Q)
    assert asked.reason == streamed.reason == "unsupported_answer" and shown == ""
    assert asked.detail == streamed.detail and asked.detail.endswith("unsupported")


def test_a_figure_the_passage_gives_in_two_units_is_still_backed():
    passage = "Setup takes 14 minutes; the first sync takes 14 hours."
    assert support("The first sync takes 14 hours", passage) >= 0.5
    assert support("Refunds take 14 business days", "Refunds take 14 business days.") >= 0.5


# -- two statements the splitter read as one ---------------------------------------------
RIDER = "Enterprise customers also get a free upgrade to Premium"


@pytest.mark.parametrize("glue", [".", "; ", "。", "；"])
def test_an_invented_statement_glued_to_a_quoted_one_is_not_backed(glue):
    rider = RIDER if glue != "; " else RIDER[0].lower() + RIDER[1:]
    assert support(f"{REFUND}{glue}{rider} [1].", f"{REFUND}.") == 0.0
    assert support(f"{REFUND} [1].", f"{REFUND}.") == 1.0


@pytest.mark.parametrize("size", [None, 0, 1, 7])
@pytest.mark.parametrize("glue", [".", "; ", "。"])
def test_a_glued_rider_is_neither_answered_nor_streamed(glue, size):
    n = cite(REFUNDS_Q, "refunds")
    asked, streamed, shown = verdicts(pipeline(f"{REFUND}{glue}{RIDER} [{n}].", size=size),
                                      REFUNDS_Q)
    assert asked.reason == streamed.reason == "unsupported_answer", asked.answer.text
    assert RIDER not in shown and shown == ""


def test_two_quoted_statements_joined_by_a_semicolon_are_still_answered():
    n = cite(REFUNDS_Q, "refunds")
    reply = f"{REFUND}; annual plans can be cancelled at any time [{n}]."
    asked, streamed, shown = verdicts(pipeline(reply), REFUNDS_Q)
    assert not asked.escalated and asked.answer.text == streamed.answer.text == shown


def test_a_version_number_or_a_url_is_not_a_hidden_sentence_end():
    passage = "Version 1.2 adds exports; see help.acme.example/exports for the details."
    assert support("Version 1.2 adds exports, see help.acme.example/exports [1].",
                   passage) >= 0.5


# -- figures written in words ------------------------------------------------------------
def test_number_words_are_figures():
    assert as_digits("two hundred and fifty rows, thirty-five days, one of them") == \
        "250 rows, 35 days, one of them"
    assert figures("tickets older than thirty days") == {("30", "day")}
    assert contradicts("On the Free plan, ninety days of ticket history are kept.", RETENTION)
    assert not contradicts("On the Free plan, ninety days of ticket history are kept.",
                           HISTORY)


def test_a_span_answer_conflicts_with_a_page_that_spells_its_figure_out():
    answer = Span(HISTORY, 0, len(HISTORY), 0.81, "history#0")
    other = "On the Free plan, tickets older than thirty days are deleted."
    assert find_conflict(answer, [Span(other, 0, len(other), 0.80, "retention#0")])


@pytest.mark.parametrize("path", ["ask", "stream"])
@pytest.mark.parametrize("spelled", ["claim", "other page"])
def test_a_generated_figure_in_words_escalates_as_a_conflict(spelled, path):
    pages = PAGES if spelled == "claim" else [
        *PAGES[:2], page("retention", RETENTION.replace("30", "thirty")), PAGES[3]]
    n = cite(HISTORY_Q, "history", pages)
    claim = HISTORY.rstrip(".").replace("90", "ninety" if spelled == "claim" else "90")
    asked, streamed, shown = verdicts(pipeline(f"{claim} [{n}].", pages), HISTORY_Q)
    result = asked if path == "ask" else streamed
    assert result.reason == "conflict" and "retention" in result.detail
    assert result.trace[-1].detail["statements"][0].startswith(claim)
    assert shown == ""


def test_a_figure_in_words_that_agrees_is_answered():
    pages = [*PAGES[:2], PAGES[3]]
    n = cite(HISTORY_Q, "history", pages)
    reply = f"On the Free plan, ninety days of ticket history are kept [{n}]."
    asked, streamed, shown = verdicts(pipeline(reply, pages), HISTORY_Q)
    assert not asked.escalated and asked.answer.text == streamed.answer.text == shown
