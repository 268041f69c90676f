"""Chapter 10's techniques: parent-document and sentence-window retrieval, contextual
notes, and the caches — each on real help-centre text, each checked against the contract."""
import time

import numpy as np
import pytest

from ragbook import BM25Index, DenseIndex, Encoder, HybridRetriever, load_helpcentre
from ragbook.cache import Cache, CachedPipeline, CachedRetriever
from ragbook.chunking import chunk_documents
from ragbook.contextual import LLMContext, contexts_for, section_path, title_context
from ragbook.expansion import (
    ParentDocumentRetriever,
    SentenceWindowRetriever,
    parent_child_chunks,
    sentence_chunks,
    sentence_spans,
)
from ragbook.pipeline import Pipeline
from ragbook.retrieval import Retriever
from ragbook.types import Chunk, Document

HC = load_helpcentre()
DOCS = HC.documents[:30]
Q = "how long is the refund window for enterprise annual contracts?"


@pytest.fixture(scope="module")
def family():
    return parent_child_chunks(DOCS, parent_size=600, child_size=120)


def test_children_lie_inside_exactly_one_parent(family):
    parents, children = family
    text = {d.id: d.text for d in DOCS}
    for c in children:
        assert text[c.doc_id][c.start:c.end] == c.text
        owners = [p for p in parents if p.doc_id == c.doc_id and p.start <= c.start
                  and c.end <= p.end]
        assert len(owners) == 1
    with pytest.raises(ValueError, match="child_size"):
        parent_child_chunks(DOCS, parent_size=100, child_size=200)


def test_parent_document_retriever_returns_each_parent_once(family):
    parents, children = family
    inner = DenseIndex(Encoder()).build(children)
    pdr = ParentDocumentRetriever(inner, parents)
    hits = pdr.search(Q, k=5)
    assert isinstance(pdr, Retriever) and len(pdr) == len(parents)
    assert len({h.id for h in hits}) == len(hits) == 5
    assert [h.rank for h in hits] == [1, 2, 3, 4, 5]
    best_child = inner.search(Q, k=1)[0]
    assert hits[0].start <= best_child.start < hits[0].end and hits[0].score == best_child.score
    text = {d.id: d.text for d in DOCS}
    assert all(text[h.doc_id][h.start:h.end] == h.text for h in hits)


def test_sentence_spans_and_chunks():
    assert sentence_spans("A b c. D e f!\n# Head\nG h i?") == [(0, 6), (7, 13), (14, 20),
                                                               (21, 27)]
    d = Document("d", "One two three. Four five six. Seven.")
    assert [c.text for c in sentence_chunks([d])] == ["One two three.", "Four five six."]


@pytest.mark.parametrize("window", [0, 1, 3])
def test_sentence_windows_are_symmetric_and_merged(window):
    sents = sentence_chunks(DOCS)
    swr = SentenceWindowRetriever(BM25Index().build(sents), DOCS, window=window)
    hits = swr.search("refund window enterprise", k=3)
    assert 0 < len(hits) <= 3 and [h.rank for h in hits] == list(range(1, len(hits) + 1))
    by_id = {d.id: d for d in DOCS}
    for h in hits:
        spans = sentence_spans(by_id[h.doc_id].text)
        assert by_id[h.doc_id].text[h.start:h.end] == h.text
        starts = [a for a, _ in spans]
        assert h.start in starts                   # windows start and end on sentences
    for a, b in zip(hits, hits[1:], strict=False):  # merged: no two windows overlap
        assert a.doc_id != b.doc_id or a.end <= b.start or b.end <= a.start
    one = swr.retriever.search("refund window enterprise", k=1)[0]
    i = [a for a, _ in sentence_spans(by_id[one.doc_id].text)].index(one.start)
    spans = sentence_spans(by_id[one.doc_id].text)
    lo, hi = max(i - window, 0), min(i + window, len(spans) - 1)
    assert swr.widen(one) == (spans[lo][0], spans[hi][1])


def test_title_and_section_path():
    d = Document("p", "# Plans\n\nIntro.\n\n## Pro\n\nPro has SSO.\n\n### Limits\n\nTen.\n\n"
                      "## Team\n\nTeam has more.", title="Plans")
    assert section_path(d, d.text.index("Ten.")) == ["Plans", "Pro", "Limits"]
    assert section_path(d, d.text.index("Team has")) == ["Plans", "Team"]
    c = Chunk("p:x", "p", "Ten.", d.text.index("Ten."), d.text.index("Ten.") + 4)
    assert title_context(c, d) == "Plans > Pro > Limits"


def test_contextual_index_embeds_the_note_but_returns_the_text():
    chunks = chunk_documents(DOCS, size=128, overlap=16)
    notes = contexts_for(chunks, DOCS)
    plain = DenseIndex(Encoder()).build(chunks)
    ctx = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks, contexts=notes)
    hit = ctx.search(Q, k=1)[0]
    assert hit.text == next(c.text for c in chunks if c.id == hit.id)     # returned: the text
    assert ctx.dense.items_[0]["context"] == notes[0]
    assert ctx.corpus_fingerprint != plain.corpus_fingerprint             # indexed: differs
    with pytest.raises(ValueError, match="contexts for"):
        DenseIndex(Encoder()).build(chunks, contexts=notes[:3])


class Notes:
    """A scripted generator for LLMContext: counts calls."""

    name = "scripted"

    def __init__(self):
        self.calls = 0

    def generate(self, messages, max_new_tokens=None, stop=()):
        self.calls += 1
        return " This passage is about refunds. "


def test_llm_notes_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    llm = Notes()
    chunks = chunk_documents(DOCS[:2], size=128, overlap=0)
    first = contexts_for(chunks, DOCS[:2], LLMContext(llm))
    again = contexts_for(chunks, DOCS[:2], LLMContext(llm))
    assert first == again == ["This passage is about refunds."] * len(chunks)
    assert llm.calls == len(chunks)
    LLMContext(llm).save_notes(tmp_path / "notes.jsonl", chunks, DOCS[:2])
    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path / "elsewhere"))
    fresh = Notes()
    ctx = LLMContext(fresh)
    assert ctx.load_notes(tmp_path / "notes.jsonl") == len(chunks)
    assert contexts_for(chunks, DOCS[:2], ctx) == first and fresh.calls == 0


# -- caches ---------------------------------------------------------------------------------
def test_cache_namespace_ttl_and_counters(tmp_path):
    c = Cache("t", "corpus-1", path=tmp_path / "c.sqlite")
    c.put("k", [1, 2])
    assert c.get("k") == [1, 2] and c.get("other") is None and (c.hits, c.misses) == (1, 1)
    c2 = Cache("t", "corpus-2", path=tmp_path / "c.sqlite")
    assert c2.get("k") is None and len(c) == 1 and len(c2) == 0
    short = Cache("t", "corpus-1", ttl=0.05, path=tmp_path / "c.sqlite")
    time.sleep(0.1)
    assert short.get("k") is None                                        # expired
    with pytest.raises(ValueError, match="ttl"):
        Cache("t", "x", ttl=0)


def test_query_cache_hits_and_is_invalidated_by_a_changed_corpus_or_model(tmp_path):
    chunks = chunk_documents(DOCS, size=128, overlap=16)
    index = DenseIndex(Encoder()).build(chunks)
    cached = CachedRetriever(index, path=tmp_path / "q.sqlite")
    first = cached.search(Q, k=3)
    assert cached.search(Q, k=3) == first and cached.cache.hits == 1
    assert first == index.search(Q, k=3)
    index.add(chunk_documents(HC.documents[30:31], size=128, overlap=16))   # corpus changed
    cached.search(Q, k=3)
    assert cached.cache.misses == 2
    other = DenseIndex(Encoder(max_length=64)).build(chunks)              # model setting changed
    assert other.fingerprint != DenseIndex(Encoder()).build(chunks).fingerprint


def test_answer_cache_is_keyed_by_the_condensed_question(tmp_path):
    chunks = chunk_documents(DOCS, size=128, overlap=16)
    p = Pipeline(HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks))
    cp = CachedPipeline(p, path=tmp_path / "a.sqlite")
    a = cp.ask(Q)
    assert cp.ask(Q) == a and cp.cache.hits == 1
    refund = [{"role": "user", "content": "can I get a refund on pro?"}]
    export = [{"role": "user", "content": "can I export tickets to csv on pro?"}]
    cp.ask("and enterprise?", history=refund)
    cp.ask("and enterprise?", history=export)     # the same words, another conversation
    assert cp.cache.misses == 3

    p.min_confidence = 0.99                         # thresholds are part of the namespace
    assert cp.ask(Q).escalated


def test_answer_cache_misses_when_the_corpus_or_the_model_changes(tmp_path):
    chunks = chunk_documents(DOCS, size=128, overlap=16)
    p = Pipeline(HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks))
    cp = CachedPipeline(p, path=tmp_path / "a.sqlite")
    first = cp.ask(Q)
    assert cp.ask(Q) == first and (cp.cache.hits, cp.cache.misses) == (1, 1)
    p.retriever = HybridRetriever(DenseIndex(Encoder()), BM25Index()).build(chunks[:-1])
    cp.ask(Q)
    assert cp.cache.misses == 2                                            # corpus changed
    p.retriever = HybridRetriever(DenseIndex(Encoder(max_length=64)), BM25Index()).build(
        chunks[:-1])
    cp.ask(Q)
    assert cp.cache.misses == 3                                            # model changed
    assert cp.cache.hit_rate == 1 / 4


def test_a_broken_cache_warns_names_the_file_and_the_run_goes_on(tmp_path):
    bad = tmp_path / "answers.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.warns(UserWarning, match=r"answers\.sqlite.*going on without it"):
        c = Cache("answers", "ns", path=bad)
        assert c.get("q") is None            # a miss, not a traceback
    c.put("q", {"a": 1})                     # skipped quietly after the one warning
    assert c.get("q") is None and len(c) == 0 and c.broken


def test_a_damaged_cache_row_is_a_miss(tmp_path):
    import sqlite3

    c = Cache("t", "ns", path=tmp_path / "c.sqlite")
    c.put("q", {"a": 1})
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        db.execute("UPDATE entry SET value = '{not json'")
    assert c.get("q") is None and c.misses == 1
    c.put("q", {"a": 2})
    assert c.get("q") == {"a": 2}


def test_a_damaged_embedding_row_is_embedded_again(tmp_path, monkeypatch):
    import sqlite3

    monkeypatch.setenv("RAGBOOK_CACHE", str(tmp_path))
    enc = Encoder()
    good = enc.encode_passages(["Refunds take 14 days."])
    path = enc._store().path
    with sqlite3.connect(path) as db:
        db.execute("UPDATE vec SET v = ?", (b"\x00" * 7,))              # truncated row
    again = Encoder().encode_passages(["Refunds take 14 days."])
    assert np.allclose(again, good, atol=1e-6)
