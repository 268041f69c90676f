"""A Milvus rebuild never loses the collection it replaces (issue: a text over 65,535 bytes
or an int >= 2**64 in the new rows left 5 rows -> 0). Every row is checked against a Milvus
server's limits before anything is written; each build is a collection of its own behind an
alias that moves only once the new rows are in. All on Milvus Lite in temporary folders
(tests/test_milvus_server.py repeats the core of it on a Milvus server)."""
import logging
import threading

import numpy as np
import pytest

from ragbook import Encoder
from ragbook.dense import DenseIndex
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.retrieval import records_from
from ragbook.stores import MilvusStore
from ragbook.stores.milvus_rows import check_record
from ragbook.types import Document

logging.getLogger("pymilvus").setLevel(logging.CRITICAL)

GOOD = [Document(f"page-{i}", f"refunds and invoices, page {i}", metadata={"n": i})
        for i in range(5)]


def bad(**metadata):
    return Document("bad", "x", metadata=metadata)


#: one row a Milvus server cannot store, and what the error must say. "é" is 2 bytes, so
#: 40,000 of them fit Milvus Lite's 65,535 *characters* but not a server's 65,535 bytes.
BAD = {
    "text over 65,535 bytes": (Document("bad", "é" * 40_000), r"80,000 bytes.*65,535.*chunk"),
    "int >= 2**64": (bad(n=2**64), r"int64 range.*as a str"),
    "int < -2**63": (bad(n=-2**63 - 1), r"int64 range"),
    "int in a list": (bad(ns=[1, 2**63]), r"metadata\['ns'\].*int64"),
    "metadata over 64 KiB": (bad(s="y" * 70_000), r"65,536.*metadata"),
    "lone surrogate in metadata": (bad(s="\ud800"), r"lone surrogate"),
    "id over 1,024 bytes": (Document("b" * 1025, "x"), r"its id is 1,025 bytes.*shorter"),
}


@pytest.mark.parametrize("doc,message", BAD.values(), ids=BAD)
def test_each_limit_is_checked_with_the_item_the_limit_and_the_fix(doc, message):
    with pytest.raises(ValueError, match=message) as err:
        check_record(records_from([doc])[0])
    assert repr(doc.id)[:20] in str(err.value)
    check_record(records_from([Document("ok", "é" * 30_000, metadata={"n": 2**63 - 1})])[0])


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


def count(uri, collection="ragbook"):
    with MilvusStore(uri, collection) as store:
        return len(store.open())


@pytest.mark.needs_milvus
@pytest.mark.parametrize("how", ["MilvusRetriever", "DenseIndex"])
@pytest.mark.parametrize("bad", ["text over 65,535 bytes", "int >= 2**64"])
def test_a_rebuild_with_a_bad_row_keeps_the_old_rows_searchable(tmp_path, encoder, how, bad):
    """The retriever refuses the bad row before embedding; a DenseIndex on the store gets
    as far as the store's create + add, where the row is refused before any write. Either
    way the 5 old rows stay live, searchable by a fresh connection."""
    uri = tmp_path / "hc.db"
    MilvusRetriever(encoder, MilvusStore(uri), mode="dense").build(GOOD).close()
    doc, message = BAD[bad]
    rebuild = (MilvusRetriever(encoder, MilvusStore(uri), mode="dense") if how ==
               "MilvusRetriever" else DenseIndex(encoder, MilvusStore(uri)))
    with pytest.raises(ValueError, match=message):
        rebuild.build([*GOOD[:3], doc])
    with MilvusRetriever.open(uri, encoder) as again:
        assert len(again) == 5
        assert {h.id for h in again.search("refunds", k=10)} == {d.id for d in GOOD}
        assert again.store_.client.list_collections() == ["ragbook__v1"]  # nothing left over


def unit_rows(n, dim=8, seed=0):
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.needs_milvus
def test_a_good_rebuild_switches_in_one_step(tmp_path):
    """While 300 rows are written in 30 inserts, a reader counting the collection over and
    over sees the old 5 rows or the new 300, never 0 or a part; afterwards the same reader,
    not reopened, sees the new rows, and the old collection is gone."""
    uri = str(tmp_path / "switch.db")
    with MilvusStore(uri) as first:
        first.create(8).add(records_from(GOOD), unit_rows(5))
    reader = MilvusStore(uri).open()
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            seen.add(len(reader))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        docs = [Document(f"new-{i}", f"new page {i}") for i in range(300)]
        with MilvusStore(uri, batch_size=10) as rebuild:
            rebuild.create(8)
            assert len(reader) == 5                  # created, not yet written: old is live
            rebuild.add(records_from(docs), unit_rows(300, seed=1))
            names = rebuild.client.list_collections()
    finally:
        done.set()
        watcher.join()
    assert seen <= {5, 300} and 5 in seen, seen
    assert len(reader) == 300 and reader.get(["new-299"])[0]["text"] == "new page 299"
    assert names == ["ragbook__v2"]
    reader.close()


@pytest.mark.needs_milvus
def test_a_rebuild_abandoned_before_its_first_write_leaves_the_old_collection(tmp_path):
    uri = str(tmp_path / "abandon.db")
    with MilvusStore(uri) as first:
        first.create(8).add(records_from(GOOD), unit_rows(5))
    with MilvusStore(uri) as rebuild:
        rebuild.create(8)                             # then closed without a write
    assert count(uri) == 5
    with MilvusStore(uri) as again:
        assert again.open().client.list_collections() == ["ragbook__v1"]


@pytest.mark.needs_milvus
def test_a_collection_built_before_aliases_is_replaced_by_an_aliased_one(tmp_path):
    """Collections written by earlier versions are real collections named like the alias:
    readable as they are, and the first rebuild moves the name onto an alias."""
    uri = str(tmp_path / "legacy.db")
    with MilvusStore(uri) as old:
        old.create(8).add(records_from(GOOD), unit_rows(5))
        old.client.drop_alias("ragbook")
        old.client.rename_collection("ragbook__v1", "ragbook")  # the old layout
    assert count(uri) == 5
    with MilvusStore(uri) as rebuild:
        rebuild.create(8).add(records_from(GOOD[:2]), unit_rows(2))
        assert rebuild.client.describe_alias("ragbook")["collection_name"] == "ragbook__v1"
        assert rebuild.client.list_collections() == ["ragbook__v1"]
    assert count(uri) == 2
