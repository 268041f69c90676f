"""MilvusStore over TCP against a real Milvus server: the 2.3.5 standalone server (embedded
etcd, local storage) that the pip package ``milvus`` ships (``make setup`` installs it with
--no-deps). One server for the module, on free ports in a temporary folder; the module skips
with one line when it cannot start. Dense search equals FAISS on the help centre, the hostile
filters of tests/test_milvus.py select what ``matches`` selects, two client processes write
at once, a failed rebuild keeps the old rows, BM25/hybrid say they need Milvus >= 2.5, and a
``kill -9`` of the server during upserts loses no acknowledged write."""
import json
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from importlib.util import find_spec

import numpy as np
import pytest
from test_milvus import random_metadata, random_where, unit_rows

from ragbook import Encoder
from ragbook.dense import DenseIndex
from ragbook.filters import matches
from ragbook.milvus_retriever import MilvusRetriever
from ragbook.retrieval import records_from
from ragbook.scaling.compare import overlap_at_k
from ragbook.stores import MilvusStore, milvus_filter
from ragbook.stores.milvus import MilvusVersionError
from ragbook.types import Document

pytestmark = pytest.mark.skipif(find_spec("pymilvus") is None,
                                reason='needs pip install "ragbook[milvus]"')
logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # expected errors log tracebacks


def _free(port: int) -> bool:
    """Can a server listen on ``port`` (SO_REUSEADDR, as Milvus's own listeners do, so a
    port a killed server left in TIME_WAIT counts as free)?"""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


class Server:
    """The ``milvus`` package's standalone server on ``folder``: started, killed with
    SIGKILL and restarted on the same data by the tests."""

    def __init__(self, folder):
        from milvus import MilvusServer, MilvusServerConfig

        class Config(MilvusServerConfig):
            def try_bind_port(self, port):   # the package's probe, with SO_REUSEADDR
                if not _free(port):
                    return None
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", port))
                sock.listen()
                return sock

        self.folder = folder
        self.milvus = MilvusServer(Config(), wait_for_started=False, data_dir=str(folder))
        # a restart waits out the killed server's etcd sessions: 30 s by default
        self.milvus.config.set("common.session.ttl", 5)
        # a Strong-consistency request waits for the next time tick: 200 ms apart by default
        # (0.2-0.3 s a search or get, measured), 20 ms here to keep the module short
        self.milvus.config.set("proxy.timeTickInterval", 20)

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.milvus.listen_port}"

    @property
    def pid(self) -> int:
        return self.milvus.server_proc.pid

    def start(self, deadline: float = 120) -> float:
        """Start and wait for /healthz; the seconds it took. RuntimeError (one line) when
        the process exits or is not healthy by ``deadline``."""
        t = time.perf_counter()
        self.milvus.start()
        health = f"http://127.0.0.1:{self.milvus.webservice_port}/healthz"
        while time.perf_counter() - t < deadline:
            if self.milvus.server_proc.poll() is not None:
                log = (self.folder / "logs" / "milvus-stderr.log").read_text(errors="replace")
                last = (log.strip().splitlines() or ["(no output)"])[-1][:200]
                raise RuntimeError(f"exited with {self.milvus.server_proc.returncode}: {last}")
            try:
                with urllib.request.urlopen(health, timeout=2) as reply:
                    if b"OK" in reply.read():
                        return time.perf_counter() - t
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"not healthy after {deadline:.0f} s")

    def kill(self) -> None:
        """``kill -9`` the server process (no shutdown of any kind)."""
        os.kill(self.pid, signal.SIGKILL)
        self.milvus.server_proc.wait()
        self.milvus.server_proc = None
        self.milvus.stop()                                    # closes its log files

    def stop(self) -> None:
        self.milvus.stop()                                    # SIGTERM, SIGKILL after 1 s


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if find_spec("milvus") is None:
        pytest.skip("no Milvus server package: pip install --no-deps milvus==2.3.5 "
                    "(make setup does)")
    if not (_free(2379) and _free(2380)):
        pytest.skip("the Milvus server's embedded etcd needs ports 2379 and 2380, which "
                    "another process holds (another etcd or Milvus server?)")
    srv = Server(tmp_path_factory.mktemp("milvus-server"))
    try:
        srv.start_seconds = srv.start()
    except Exception as err:
        pytest.skip(f"the Milvus 2.3.5 server could not start: {err}")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


def test_the_server_is_milvus_2_3_and_bm25_says_it_needs_2_5(server, encoder):
    """BM25 and hybrid need Milvus >= 2.5: the store builds a dense-only collection on an
    older server, and every way to ask for BM25 fails at once with the version and the fix
    (a retriever before it embeds anything)."""
    dense = DenseIndex(encoder, MilvusStore(server.uri, "versions")).build(
        [Document("a", "refund window")])
    store = dense.store_
    assert store.server_version().startswith("v2.3.5")
    assert [h.id for h in dense.search("refunds", 3)] == ["a"]
    for call in (lambda: store.keyword_search(["refund"], 3),
                 lambda: store.hybrid_search(["refund"], unit_rows(1, dim=store.dim_), 3),
                 lambda: MilvusRetriever(encoder, MilvusStore(server.uri, "hc")).build(
                     [Document("b", "x")]),
                 lambda: MilvusRetriever.open(MilvusStore(server.uri, "versions"), encoder),
                 lambda: MilvusRetriever.open(store, encoder, mode="dense").with_mode(
                     "bm25").search("refund")):
        with pytest.raises(MilvusVersionError, match=r"needs Milvus >= 2\.5.*is Milvus "
                           r"v2\.3\.5.*mode='dense'.*Milvus Lite"):
            call()
    with pytest.raises(ValueError, match="before 2.5 cannot parse it"):
        dense.search("refunds", 3, where={"k": {"$ne": None}})
    assert not MilvusStore(server.uri, "hc").client.has_collection("hc")  # nothing written
    store.close()


def test_dense_search_equals_faiss_on_the_help_centre(server, encoder, hc, hc_chunks):
    """The help centre's chunks through the server: the same records back (text, offsets,
    metadata), and for all 299 questions the same top 10 as the in-process flat index,
    filtered or not. (Stores searched with every question in one call: each request to
    this server waits for its time tick, a quarter of a second, for Strong consistency.)"""
    ours = DenseIndex(encoder).build(hc_chunks)
    milvus = MilvusRetriever(encoder, MilvusStore(server.uri, "helpcentre"),
                             mode="dense").build(hc_chunks)
    assert milvus.items_ == ours.items_ and milvus.corpus_fingerprint == ours.corpus_fingerprint
    questions = encoder.encode_queries([q.standalone for q in hc.questions])
    with pytest.raises(ValueError, match="before 2.5"):   # dates need like '____-__-__%'
        milvus.store_.search(questions[:1], 10, {"updated": {"$gte": "2025-01-01"}})
    for where in (None, {"status": {"$ne": "superseded"}},
                  {"access": ["public", "customer"], "department": {"$ne": "billing"}}):
        (faiss_ids, faiss_scores), (milvus_ids, milvus_scores) = (
            s.search(questions, 10, where) for s in (ours.store_, milvus.store_))
        overlaps = [overlap_at_k(a, b, 10) for a, b in zip(faiss_ids, milvus_ids, strict=True)]
        assert np.mean(overlaps) >= 0.99, (where, np.mean(overlaps))
        assert np.allclose(np.concatenate(faiss_scores), np.concatenate(milvus_scores),
                           atol=1e-5)
    a, b = (r.search(hc.questions[0].standalone, 5) for r in (ours, milvus))
    assert [h.id for h in a] == [h.id for h in b]
    assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    milvus.close()


def test_hostile_filters_select_exactly_what_matches_selects(server):
    """The 300 random filters of tests/test_milvus.py (quotes, backslashes, newlines, numbers
    vs strings, bools, None, missing keys, lists, tuples) over TCP: the server's filtered
    search returns what ``matches`` selects, and the few a server before 2.5 cannot write
    (those that must exclude None, and orderings on dates) raise instead of returning
    something else."""
    rng = random.Random(0)
    items = [Document(id=f"item-{i}", text=f"item {i}", metadata=random_metadata(rng))
             for i in range(60)]
    records = records_from(items)
    store = MilvusStore(server.uri, "filters").create(8)
    store.add(records, unit_rows(len(records)))
    rng, query, refused = random.Random(1), unit_rows(1, seed=9), 0
    for _ in range(300):
        where = random_where(rng)
        try:
            milvus_filter(where, old_server=True)
        except ValueError:
            refused += 1
            with pytest.raises(ValueError, match="before 2.5"):
                store.search(query, k=len(records), where=where)
            continue
        expected = {r["id"] for r in records if matches(r["metadata"], where)}
        ids, _ = store.search(query, k=len(records), where=where)
        assert set(ids[0]) == expected, (where, milvus_filter(where, old_server=True))
    # refused: those excluding None, and date orderings (random_where draws dates written
    # several ways, so about a third); the other two thirds are checked against matches
    assert refused < 120, refused
    store.close()


def test_upsert_get_delete_over_tcp(server):
    docs = [Document('say "hi"', "a b", metadata={"tags": ("a", "b")}),
            Document("back\\slash", "c d"), Document("ünï 😀", "g h")]
    records = records_from(docs, contexts=["a note", "", ""])
    with MilvusStore(server.uri, "crud") as store:
        store.create(8).add(records, unit_rows(3))
        assert store.get([d.id for d in docs]) == records     # tuples and contexts kept
        changed = dict(records[1], text="c d e")
        assert store.upsert([changed, *records_from([Document("new", "n")])],
                            unit_rows(2, seed=2)) == (1, 1)
        assert [r["text"] for r in store.records()] == ["a b", "c d e", "g h", "n"]
        assert store.delete([docs[0].id, "no-such-id"]) == 1 and len(store) == 3


def test_a_failed_rebuild_keeps_the_old_rows_on_the_server(server):
    old = records_from([Document(f"p{i}", f"page {i}") for i in range(5)])
    MilvusStore(server.uri, "rebuild").create(8).add(old, unit_rows(5))
    # a record past the store's limits (built by hand: check_metadata refuses it earlier)
    bad = {**records_from([Document("bad", "x")])[0], "metadata": {"n": 2**64}}
    with pytest.raises(ValueError, match="int64 range"):
        MilvusStore(server.uri, "rebuild").create(8).add([*old[:2], bad], unit_rows(3))
    with MilvusStore(server.uri, "rebuild") as again:
        assert len(again.open()) == 5
        again.create(8).add(old[:2], unit_rows(2))
        assert len(MilvusStore(server.uri, "rebuild").open()) == 2
        assert [n for n in again.client.list_collections() if n.startswith("rebuild")] == \
            ["rebuild__v2"]


CLIENT = textwrap.dedent("""
    import json, logging, sys
    import numpy as np
    logging.disable(logging.CRITICAL)
    from ragbook.retrieval import records_from
    from ragbook.stores import MilvusStore
    from ragbook.types import Document
    uri, me, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    store = MilvusStore(uri, mode).open()
    rng, seen = np.random.default_rng(len(me)), []
    for b in range(5 if mode == "shared" else 100_000):
        docs = [Document(f"{me}-{b}-{i}", f"{me} batch {b} row {i}") for i in range(20)]
        v = rng.normal(size=(20, 8)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        store.upsert(records_from(docs), v)
        if mode == "crash":
            print("ack", b, flush=True)           # acknowledged: upsert returned
            continue
        assert [r["id"] for r in store.get([d.id for d in docs])] == [d.id for d in docs]
        assert store.search(v[:1], k=1)[0][0] == [docs[0].id]
        seen.append(len(store))
    store.delete([f"{me}-0-{i}" for i in range(10)])
    print(json.dumps(seen))
""")


def client(server, me, mode):
    return subprocess.Popen([sys.executable, "-c", CLIENT, server.uri, me, mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_client_processes_write_and_read_at_once(server):
    """Two processes upsert 5 batches each into one collection at the same time, each
    reading its own writes back at once (get and search), then delete 10 rows each: the
    final count and ids agree with both."""
    MilvusStore(server.uri, "shared").create(8)
    procs = [client(server, me, "shared") for me in ("left", "right")]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        seen = json.loads(out.strip().splitlines()[-1])
        assert all(n >= 20 * (b + 1) for b, n in enumerate(seen)), seen
    with MilvusStore(server.uri, "shared") as store:
        ids = {r["id"] for r in store.open().records()}
    assert ids == {f"{me}-{b}-{i}" for me in ("left", "right") for b in range(5)
                   for i in range(20) if b or i >= 10}


def test_kill_9_during_upserts_loses_no_acknowledged_write(server):
    """(Last: it kills the module's server.) A client upserts batches of 20; after 15
    acknowledged batches the server gets SIGKILL; after a restart on the same data every
    acknowledged row is there and the collection loads and searches."""
    MilvusStore(server.uri, "crash").create(8)
    writer, acked = client(server, "w", "crash"), []
    while len(acked) < 15:
        line = writer.stdout.readline()
        assert line, writer.stderr.read()[-2000:]
        acked.append(int(line.split()[1]))
    server.kill()
    time.sleep(1)
    writer.kill()
    acked += [int(line.split()[1]) for line in writer.stdout.read().splitlines()
              if line.startswith("ack")]
    writer.wait()
    server.start()
    deadline, store = time.monotonic() + 90, None
    while store is None:
        try:
            store = MilvusStore(server.uri, "crash").open()    # loads the collection
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    ids = [f"w-{b}-{i}" for b in acked for i in range(20)]
    assert len(store.get(ids)) == len(ids) and len(store) >= len(ids)
    assert store.search(unit_rows(1), k=3)[0][0]
    store.close()
