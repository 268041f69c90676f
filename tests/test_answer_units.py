"""Issue 35's reader failure classes, each from real text of that shape: a cut-off at a
hard-wrapped version list, a wrapped URL, a ``$variable`` or a command on the next line, a
sentence cut after "e.g.", and sentences that only point elsewhere (a cross-reference, a
quoted heading) winning as answers. The shapes come from the Debian FAQ (what the issue
saw on held-out data) and the Ninja manual (``data/ninja``). Also the unseen-corpus data."""
import re

import numpy as np
import pytest

from ragbook.readers import SentenceReader
from ragbook.readers.units import answer_units, fragment_paragraphs, is_reference
from ragbook.text import sentence_spans
from ragbook.types import Hit

VERSIONS = ("The code names used so far are: buzz for release 1.1, rex for release 1.2, bo for "
            "releases\n1.3.x, hamm for release 2.0, slink for release 2.1, potato for release 2.2, "
            "woody for release\n3.0, sarge for release 3.1, etch for release 4.0, lenny for "
            "release 5.0, squeeze for\nrelease 6.0, wheezy for release 7.")
URL = ("The packages are kept in a pool directory, see\n"
       "https://www.debian.org/doc/manuals/debian-faq/pkg-basics.en.html#pool for\n"
       "the layout of the archive.")
VARIABLE = ("The semantics are identical to explicit outputs,\n  the only difference is that "
            "implicit outputs don’t show up in the\n  $out variable.")
JOBS = ("No matter what pools you specify, ninja will never run more concurrent jobs\nthan the "
        "default parallelism, or the number of jobs specified on the command\nline (with -j).")
EG = "- built-in rules. Out of the box, Ninja has no rules for\n  e.g. compiling C code."
COMMAND = ("output a file in the syntax used by graphviz, a automatic\ngraph layout tool.  "
           "Use it like:\n\n```\nninja -t graph mytarget | dot -Tpng -ograph.png\n```\n\n"
           "In the Ninja source tree, ninja graph.png\ngenerates an image for Ninja itself.")


def units(text):
    return [text[a:z] for a, z in answer_units(text)]


@pytest.mark.parametrize("text", [VERSIONS, URL, VARIABLE, JOBS], ids=[
    "version-list", "wrapped-url", "wrapped-variable", "wrapped-option"])
def test_a_hard_wrapped_sentence_is_one_unit(text):
    assert len(sentence_spans(text)) > 1             # the splitter alone cuts it
    assert units(text) == [text]


def test_a_sentence_cut_after_an_abbreviation_is_joined():
    assert units(EG) == ["- built-in rules.", "Out of the box, Ninja has no rules for\n  "
                         "e.g. compiling C code."]


def test_a_sentence_ending_in_a_colon_takes_the_command_it_introduces():
    got = units(COMMAND)
    assert "Use it like:\n\n```\nninja -t graph mytarget | dot -Tpng -ograph.png\n```" in got
    assert "ninja -t graph mytarget | dot -Tpng -ograph.png" in got     # the line alone too
    assert got[-1] == ("In the Ninja source tree, ninja graph.png\n"
                       "generates an image for Ninja itself.")


def test_units_are_exact_slices_and_stay_apart_where_they_should():
    text = ("# Pools\n\nAvailable since Ninja 1.1.\n\n- first item runs on and on and on and on\n"
            "- second item\n\nShort line\nnext line.")
    for a, z in answer_units(text):
        assert text[a:z] == text[a:z].strip() and text[a:z]
    assert units(text) == ["# Pools", "Available since Ninja 1.1.",
                           "- first item runs on and on and on and on", "- second item",
                           "Short line", "next line."]
    fenced = ("```\nrule cc\n  command = gcc -c $in -o $out and more words here to be long\n"
              "build x\n```")
    assert "build x" in units(fenced)                  # code lines are never joined


@pytest.mark.parametrize("sentence", [
    "Section 6.10, “What's in the pool directory?”.",
    "See the full discussion.",
    "For more discussion of how scoping works, consult the reference.",
    "See the dynamic dependencies section for details.",
    "(See the reference on validations.)",
])
def test_references_and_quoted_headings_are_recognised(sentence):
    assert is_reference(sentence)


@pytest.mark.parametrize("sentence", [
    "The log file is kept in the build root in a file called .ninja_log.",
    "See the -d flag: it prints the description of each rule as well.",
    "Section 3 explains that packages are signed with the archive key every day.",
    "Ninja supports one environment variable to control its behavior.",
])
def test_sentences_that_say_something_are_not_references(sentence):
    assert not is_reference(sentence)


class WordEncoder:
    """Bag-of-words cosines over a few words: exact and instant, so a test can make a
    reference sentence the closest one, as a quoted heading is to the question it quotes."""

    VOCAB = ("pool", "directory", "packages", "kept", "release", "code", "names", "squeeze")

    def _vec(self, text):
        words = re.findall(r"[a-z]+", text.lower())
        v = np.array([words.count(w) for w in self.VOCAB], dtype=float)
        return v / (np.linalg.norm(v) or 1.0)

    def encode_passages(self, texts):
        return np.array([self._vec(t) for t in texts])

    encode_queries = encode_passages


def test_a_title_echo_is_passed_over_for_the_answer():
    passage = ("The files of all releases are kept in one pool directory, grouped by source "
               "packages.\nSection 6.10, “What's in the pool directory?”.")
    question = "What's in the pool directory?"
    old = SentenceReader(WordEncoder(), whole_units=False, skip_references=False)
    assert old.read(question, [Hit("faq", 1.0, 1, text=passage)]).text.startswith("Section")
    got = SentenceReader(WordEncoder()).read(question, [Hit("faq", 1.0, 1, text=passage)])
    assert got.text.startswith("The files of all releases are kept in one pool directory")


def test_the_reader_answers_with_the_whole_version_list():
    question = "What code names were used for release squeeze?"
    spans = SentenceReader(WordEncoder()).spans(question, VERSIONS)
    assert [s.text for s in spans] == [VERSIONS]
    old = SentenceReader(WordEncoder(), whole_units=False).spans(question, VERSIONS)
    assert max(old, key=lambda s: s.score).text != VERSIONS


# the Debian FAQ's shape: a definition list whose first sentence only restates the term
PRE_DEPENDS = ("The Pre-Depends field is a special dependency.\nIn the case of most packages, "
               "dpkg will unpack its archive file (i.e., its .deb file) independently\nof "
               "whether or not the files on which it depends exist on the system.")


def test_a_fragment_that_restates_the_term_brings_its_paragraph():
    cut = answer_units(PRE_DEPENDS)
    assert [PRE_DEPENDS[a:z] for a, z in cut][0] == "The Pre-Depends field is a special dependency."
    assert fragment_paragraphs(PRE_DEPENDS, cut) == [(0, len(PRE_DEPENDS))]
    # a paragraph that opens with a sentence saying something is not offered whole
    told = "The log file is kept in the build root, in a file called .ninja_log.\nAlways."
    assert fragment_paragraphs(told, answer_units(told)) == []

    class Words(WordEncoder):
        VOCAB = ("pre", "depends", "dependency", "unpack", "files", "system")

    question = "What does Pre-Depends do when dpkg is about to unpack the files?"
    old = SentenceReader(Words(), fragment_paragraphs=False).spans(question, PRE_DEPENDS)
    assert max(old, key=lambda s: s.score).text != PRE_DEPENDS
    got = SentenceReader(Words()).spans(question, PRE_DEPENDS)
    assert max(got, key=lambda s: s.score).text == PRE_DEPENDS


def test_the_shipped_offline_reader_has_the_issue_35_settings():
    from ragbook.readers import OFFLINE_RANK_WEIGHT, default_extractive_reader

    reader = default_extractive_reader("offline")
    assert (reader.whole_units, reader.skip_references, reader.fragment_paragraphs) == (
        True, True, True)
    assert reader.rank_weight == OFFLINE_RANK_WEIGHT == 0.05
    assert default_extractive_reader("offline", rank_weight=0.0).rank_weight == 0.0


def test_the_unseen_corpus_labels_hold():
    """Every gold span is verbatim in its section, the ids are the ones a user's folder
    gives, and the sizes are what data/ninja/README.md says."""
    from ragbook.datasets import data_dir, load_ninja
    from ragbook.ingest import read_documents

    ds = load_ninja()
    folder = {d.id: d for d in read_documents(data_dir() / "ninja" / "manual")}
    assert set(folder) == {d.id for d in ds.documents} and len(folder) == 38
    for q in ds.questions:
        for a in q.answers:
            assert a["doc"] in q.gold and a["text"] in folder[a["doc"]].text, q.id
        assert bool(q.gold) == bool(q.answers) == (q.category != "unanswerable"), q.id
    counts = {(s, c): sum(q.split == s and q.category == c for q in ds.questions)
              for s in ("dev", "test") for c in ("paraphrase", "unanswerable")}
    assert counts == {("dev", "paraphrase"): 42, ("dev", "unanswerable"): 6,
                      ("test", "paraphrase"): 42, ("test", "unanswerable"): 6}
    assert len({q.text.lower() for q in ds.questions}) == len(ds.questions)


def test_a_title_line_above_a_paragraph_is_not_a_fragment_sentence():
    """Converted HTML/DOCX headings arrive as bare lines ("Expenses"): the paragraph under
    one is not offered as an answer with the title glued on (a fragment is a sentence)."""
    from ragbook.readers.units import answer_units, fragment_paragraphs

    text = "Expenses\nReceipts must be uploaded within 30 days of purchase.\nLate ones are refused."
    assert fragment_paragraphs(text, answer_units(text)) == []
