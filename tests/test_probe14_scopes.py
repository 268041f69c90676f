"""Hostile probe, session 14 (issue 36): access scopes, ``where`` filters and telemetry.

Three defect classes, each checked against a plain-Python reference written here:

* a deny-list that denies only None (``{'$ne': None}``, ``{'$nin': [None]}``: what
  ``{'$ne': user.denied_group}`` is for a user with none) granted every item with the key,
  as the empty deny-list fixed earlier did;
* one text in two Unicode encodings (composed 'é' and decomposed 'e' + U+0301) was two
  values: an item labelled in one escaped a deny-list written in the other, in every store;
* telemetry hashed structured values through ``repr``: a set-valued scope got another hash in
  every process (the hash seed orders a set's repr), the same hash as its own string, and a
  detail with keys of mixed types raised inside ``emit`` — after the answer was computed.
"""
import json
import logging
import os
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from ragbook import BM25Index
from ragbook.filters import check_metadata, matches, scoped, validate_where
from ragbook.retrieval import record
from ragbook.stores import FaissStore
from ragbook.telemetry import stage_attributes
from ragbook.types import Document, Stage

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)


# -- 1. a deny-list of nothing but None --------------------------------------------------------
@pytest.mark.parametrize("vacuous", [
    {"access": {"$ne": None}}, {"access": {"$nin": [None]}}, {"access": {"$nin": (None, None)}},
    {"access": {"$nin": [], "$ne": None}},
    {"$and": [{"access": {"$nin": [None]}}, {"tier": {"$ne": None}}]}])
def test_a_deny_list_that_denies_only_none_is_refused_as_constraining_nothing(vacuous):
    """Every item that has the key passed such a scope (None only ever excludes a missing key,
    which a scope excludes anyway): refused, with what to write instead."""
    with pytest.raises(ValueError, match=r"constrains nothing.*scope by what the user may see"):
        scoped(None, vacuous)
    index = BM25Index().build([Document("d", "refund policy", metadata={"access": "internal"})])
    with pytest.raises(ValueError, match="constrains nothing"):
        index.search("refund", k=1, scope=vacuous)
    kept = scoped(None, {"tenant": "a", "access": {"$ne": None}})   # beside a real condition
    assert matches({"tenant": "a", "access": "x"}, kept)
    assert not matches({"tenant": "b", "access": "x"}, kept)
    assert not matches({"tenant": "a"}, kept)


# -- 2. one text, two encodings ---------------------------------------------------------------
COMPOSED, DECOMPOSED = "Geschäftsführung", "Gescha\u0308ftsfu\u0308hrung"
LABELS = [COMPOSED, DECOMPOSED, "public", [DECOMPOSED, "public"], ("public", COMPOSED), None]


def composed(x):
    return unicodedata.normalize("NFC", x) if isinstance(x, str) else x


def same_text(a, b):
    """The reference: two values are equal when their NFC forms are."""
    return composed(a) == composed(b)


def allowed(meta, op, arg):
    """The scope {'access': {op: arg}} in plain Python (a list is a set of values; a scope
    key must be present)."""
    value = meta.get("access")
    if value is None:
        return False
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    hit = any(same_text(v, a) for v in values for a in (arg if op in ("$in", "$nin") else [arg]))
    return hit if op in ("$eq", "$in") else not hit


SCOPES = [(op, arg) for form in (COMPOSED, DECOMPOSED)
          for op, arg in (("$eq", form), ("$ne", form), ("$in", [form]), ("$nin", [form, "x"]))]
DOCS = [Document(f"d{i}", f"refund policy note {i}", metadata={"access": v} if v else {})
        for i, v in enumerate(LABELS)]


def check(search):
    for op, arg in SCOPES:
        want = {d.id for d in DOCS if allowed(d.metadata, op, arg)}
        got = set(search({"access": {op: arg}}))
        assert got == want, (op, ascii(arg), sorted(got ^ want))


def test_one_text_in_two_encodings_is_one_value_for_bm25_and_matches():
    index = BM25Index().build(DOCS)
    check(lambda scope: [h.id for h in index.search("refund policy", k=10, scope=scope)])
    check(lambda scope: [d.id for d in DOCS if matches(d.metadata, scoped(None, scope))])


def vectors(n, dim=4):
    v = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_one_text_in_two_encodings_is_one_value_for_a_faiss_store():
    store = FaissStore().create(4)
    store.add([record(d) for d in DOCS], vectors(len(DOCS)))
    check(lambda scope: store.search(vectors(1), 10, scoped(None, scope))[0][0])


@pytest.mark.needs_milvus
def test_one_text_in_two_encodings_is_one_value_for_milvus_lite(tmp_path):
    from ragbook.stores import MilvusStore

    with MilvusStore(tmp_path / "nfc.db").create(4) as store:
        store.add([record(d) for d in DOCS], vectors(len(DOCS)))
        check(lambda scope: store.search(vectors(1), 10, scoped(None, scope))[0][0])


def test_a_key_in_two_encodings_is_one_key_and_twins_are_refused():
    key_nfd = "Zugangsstufe\u0308"
    key_nfc = unicodedata.normalize("NFC", key_nfd)
    index = BM25Index().build([Document("a", "refund", metadata={key_nfd: "internal"}),
                               Document("b", "refund", metadata={key_nfc: "public"})])
    assert [h.id for h in index.search("refund", k=5, scope={key_nfc: {"$nin": ["internal"]}})] \
        == ["b"]
    assert index.search("refund", k=5)[0].metadata.keys() == {key_nfc}
    with pytest.raises(ValueError, match="twice, in two Unicode encodings"):
        check_metadata({key_nfc: "a", key_nfd: "b"}, "doc")
    with pytest.raises(ValueError, match=r"twice, in two Unicode\s+encodings.*\$and"):
        validate_where({key_nfc: "a", key_nfd: "b"})


# -- 3. telemetry hashes from a canonical encoding ---------------------------------------------
SCOPE_CODE = ("from ragbook.telemetry import stage_attributes; from ragbook.types import Stage; "
              "print(stage_attributes(Stage('search', 0.1, (), (), {'scope': {'access': "
              "{'internal', 'secret', 'hr', 'billing', 'public'}}}))['ragbook.detail.scope.hmac'])")


def test_a_set_valued_scope_hashes_alike_in_every_process_and_unlike_its_string():
    """With one RAGBOOK_TELEMETRY_KEY, equal values are to be matchable across processes; a
    set's repr follows the hash seed, so every process sent another hash for one scope."""
    env = {**os.environ, "RAGBOOK_TELEMETRY_KEY": "probe14"}
    env.pop("RAGBOOK_TELEMETRY_TEXT", None)
    hashes = {subprocess.run([sys.executable, "-c", SCOPE_CODE], capture_output=True, text=True,
                             check=True, env={**env, "PYTHONHASHSEED": seed}).stdout
              for seed in ("0", "1", "2", "3")}
    assert len(hashes) == 1
    as_set = stage_attributes(Stage("search", 0.1, (), (), {"scope": {"access": {"internal"}}}),
                              text=False)
    as_text = stage_attributes(Stage("search", 0.1, (), (), {"scope": {"access":
                                                                       "{'internal'}"}}),
                               text=False)
    assert as_set["ragbook.detail.scope.hmac"] != as_text["ragbook.detail.scope.hmac"]


def test_a_detail_with_keys_of_mixed_types_is_hashed_not_raised():
    detail = {"by_rank": {1: "alice@example.com", "best": "sk-live-0123456789abcdef"},
              "custom": object()}
    got = stage_attributes(Stage("search", 0.1, ("a",), (1.0,), detail), text=False)
    assert {"ragbook.detail.by_rank.hmac", "ragbook.detail.custom.hmac"} <= got.keys()
    assert "alice" not in json.dumps(got) and "sk-live" not in json.dumps(got)


def test_a_cached_answer_carries_this_askers_question_not_the_first_askers(tmp_path):
    """The answer cache keys on the condensed question, so a second asker whose words
    condense the same way got a ``Result`` holding the *first* asker's question and
    condense input (whatever they pasted into it); now a hit carries the current asker's."""
    from ragbook.cache import CachedPipeline
    from ragbook.chunking import chunk_documents
    from ragbook.datasets import load_helpcentre
    from ragbook.pipeline import Pipeline

    docs = load_helpcentre().documents[:30]
    cp = CachedPipeline(Pipeline(BM25Index().build(chunk_documents(docs, size=256, overlap=32))),
                        path=tmp_path / "a.sqlite")
    history = [{"role": "user", "content": "can I get a refund on the pro plan?"}]
    first = cp.ask("and enterprise?", history=history)
    assert first.condensed != first.question                      # it was rewritten
    second = cp.ask(first.condensed)
    assert cp.cache.hits == 1 and second.answer == first.answer
    assert second.question == first.condensed
    assert second.trace[0].detail["input"] == first.condensed       # not "and enterprise?"
    assert second.trace[0].detail["history_turns"] == 0
