"""An index update killed at any step leaves a path every command loads: the previous index,
or the complete new one, never a mix and never "does not exist".

A kill is simulated in process: from step N on, every rename raises (so the save's own restore
fails too, as it never runs after SIGKILL) and nothing is deleted (a killed save cleans up
nothing), which leaves exactly the folders a SIGKILL at that step leaves."""
import os

import pytest

from ragbook import persist
from ragbook.bm25 import BM25Index
from ragbook.commands import load_index
from ragbook.dense import DenseIndex
from ragbook.embeddings import Encoder
from ragbook.fusion import HybridRetriever
from ragbook.types import Document


class Killed(BaseException):
    """Stands for SIGKILL: not an Exception, so nothing on the way catches it as an error."""


def corpus(word: str) -> list[Document]:
    return [Document(f"{word}-{i}", f"{word} refund window number {i} for plan {word}")
            for i in range(3)]


def build(word: str, encoder) -> HybridRetriever:
    return HybridRetriever(DenseIndex(encoder), BM25Index()).build(corpus(word))


def held(retriever: HybridRetriever) -> str:
    """Which corpus the loaded index holds, checking both channels hold the same one."""
    dense = {item["id"].split("-")[0] for item in retriever.dense.items_}
    bm25 = {item["id"].split("-")[0] for item in retriever.bm25.items_}
    assert dense == bm25 and len(dense) == 1, (dense, bm25)  # never a mix
    return dense.pop()


@pytest.fixture(scope="module")
def encoder():
    return Encoder()


# step: how many renames succeed before the kill ("write": killed while writing; "cleanup":
# both renames done, killed before the old folder is removed)
STEPS = [("write", "old"), (0, "old"), (1, "old"), ("cleanup", "new")]


@pytest.mark.parametrize("step, survivor", STEPS, ids=[str(s) for s, _ in STEPS])
def test_a_kill_at_every_step_of_an_update_leaves_an_index_that_loads(
        tmp_path, monkeypatch, encoder, step, survivor):
    path = tmp_path / "index"
    build("old", encoder).save(path)
    new = build("new", encoder)
    real_replace = os.replace
    renames = [0]

    def replace(src, dst):
        if os.path.dirname(dst) != str(tmp_path):  # the dense and BM25 saves inside the write
            return real_replace(src, dst)
        if step != "cleanup" and (step == "write" or renames[0] >= step):
            raise Killed(f"killed before rename {renames[0] + 1}")
        renames[0] += 1
        return real_replace(src, dst)

    def rmtree(p, ignore_errors=False):
        if step == "cleanup" and os.path.dirname(p) == str(tmp_path):
            raise Killed("killed before the old folder was removed")

    def sha(p):
        raise Killed("killed while writing, before the manifest")

    with monkeypatch.context() as m:
        m.setattr(persist.os, "replace", replace)
        m.setattr(persist.shutil, "rmtree", rmtree)
        if step == "write":
            m.setattr(persist, "_sha256", sha)
        with pytest.raises(Killed):
            new.save(path)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".index."))
    assert left, "the simulated kill should leave a temporary or old folder"
    if step == 1:  # the case of the issue: killed between the two renames
        assert not path.exists()
        assert {n.split("-")[0] for n in left} == {".index.old", ".index.saving"}
    # what `ragbook ask` and `ragbook eval` call first
    assert held(load_index(path)) == survivor
    assert (path / "manifest.json").is_file()
    # and the next update completes and cleans up after the dead one
    build("next", encoder).save(path)
    assert held(load_index(path)) == "next"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".index.")] == []


def test_ask_loads_the_previous_index_after_a_kill_between_the_renames(tmp_path, encoder,
                                                                       capsys):
    pytest.importorskip("ragbook.pipeline")
    from ragbook.cli import main

    path = tmp_path / "index"
    build("old", encoder).save(path)
    os.rename(path, tmp_path / ".index.old-99999999-1-abc")            # the first rename
    build("new", encoder).save(tmp_path / "staged")                    # the complete new save
    os.rename(tmp_path / "staged", tmp_path / ".index.saving-99999999-1-abc")
    code = main(["ask", str(path), "how long is the refund window for plan old?"])
    out, err = capsys.readouterr()
    assert "does not exist" not in err, err
    assert code == 0, err
    assert held(load_index(path)) == "old"
