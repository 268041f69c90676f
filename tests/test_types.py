import dataclasses

import pytest

from ragbook import Answer, Chunk, Document, Hit


def test_chunk_text_must_match_offsets():
    with pytest.raises(ValueError, match="document.text\\[start:end\\]"):
        Chunk(id="d:0-3", doc_id="d", text="hello", start=0, end=3)
    with pytest.raises(ValueError, match="0 <= start <= end"):
        Chunk(id="d", doc_id="d", text="", start=5, end=4)


def test_records_are_frozen():
    hit = Hit(id="c1", score=0.5, rank=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hit.score = 1.0


def test_ranks_count_from_one():
    with pytest.raises(ValueError, match="counting from 1"):
        Hit(id="c1", score=0.5, rank=0)


def test_answer_abstention():
    assert Answer(text=None, reason="no_candidates").abstained
    assert not Answer(text="14 days", sources=("a",), scores=(0.9,)).abstained


def test_document_needs_an_id():
    with pytest.raises(ValueError, match="non-empty"):
        Document(id="", text="x")
