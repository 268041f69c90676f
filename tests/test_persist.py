"""save_atomic / read_manifest: a save interrupted at any step (an error, or SIGKILL) leaves
the old or the new index loadable at its path, never nothing; concurrent saves never
collide; leftovers of interrupted saves are cleaned; a folder from an older save loads."""
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import ragbook.bm25
from ragbook import persist
from ragbook.bm25 import BM25Index
from ragbook.persist import read_manifest, save_atomic
from ragbook.types import Document

DEAD_PID = 99999999  # above pid_max on Linux and macOS: never a running process


def corpus(word: str) -> list[Document]:
    return [Document(f"{word}-{i}", f"{word} refund window number {i} for plan {word}")
            for i in range(3)]


def saved_word(path) -> str:
    """Load the BM25 index at ``path`` (verifying its manifest) and say which corpus it holds."""
    index = BM25Index.load(path)
    words = {item["id"].split("-")[0] for item in index.items_}
    assert len(words) == 1 and len(index) == 3
    return words.pop()


def leftovers(folder, name="idx") -> list[str]:
    return sorted(p.name for p in folder.iterdir()
                  if p.name.startswith((f".{name}.saving-", f".{name}.old-")))


# -- a save that fails with an error at every step --------------------------------------------
def test_a_save_failing_at_every_step_keeps_the_old_index(tmp_path, monkeypatch):
    path = tmp_path / "idx"
    BM25Index().build(corpus("old")).save(path)
    real_replace = os.replace

    def failing_from(n):
        calls = [0]

        def replace(src, dst):
            calls[0] += 1
            if calls[0] >= n:  # this rename and every later one fail, the restore included
                raise OSError(f"simulated failure of rename {calls[0]}")
            return real_replace(src, dst)
        return replace

    # 1: write itself raises; 2: the rename of the old folder aside fails; 3: the rename of
    # the new folder into place fails and so does putting the old one back (path is gone)
    for step in ("write", 1, 2):
        if step == "write":
            def write(folder):
                (folder / "half.json").write_text("{")
                raise KeyboardInterrupt("killed mid-write")
            with pytest.raises(KeyboardInterrupt):
                save_atomic(path, "BM25Index", write, {})
        else:
            monkeypatch.setattr(persist.os, "replace", failing_from(step))
            with pytest.raises(OSError, match="simulated failure"):
                BM25Index().build(corpus("new")).save(path)
            monkeypatch.setattr(persist.os, "replace", real_replace)
        # whatever the step, the old index loads at path (restored by read_manifest if needed)
        assert saved_word(path) == "old", step
        assert (path / "manifest.json").is_file() and not path.is_symlink()
    BM25Index().build(corpus("new")).save(path)
    assert saved_word(path) == "new"
    assert leftovers(tmp_path) == []


# -- a save killed (SIGKILL) between its steps --------------------------------------------------
KILLER = textwrap.dedent("""
    import os, signal, sys
    from ragbook import persist
    from ragbook.bm25 import BM25Index
    from ragbook.types import Document

    path, when = sys.argv[1:]
    real_replace, real_sha = os.replace, persist._sha256
    calls = [0]

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def replace(src, dst):
        calls[0] += 1
        if when == f"before-rename-{calls[0]}":
            die()
        real_replace(src, dst)
        if when == f"after-rename-{calls[0]}":
            die()

    def sha(p):
        die()  # the data files are written, the manifest is not

    persist.os.replace = replace
    if when == "in-write":
        persist._sha256 = sha
    docs = [Document(f"new-{i}", f"new refund window number {i} for plan new") for i in range(3)]
    BM25Index().build(docs).save(path)
    print("not killed")
""")


@pytest.mark.parametrize("when, survivor", [("in-write", "old"), ("before-rename-1", "old"),
                                             ("after-rename-1", "old"),
                                             ("after-rename-2", "new")])
def test_a_save_killed_between_steps_leaves_an_index_and_the_next_save_cleans_up(
        tmp_path, when, survivor):
    path = tmp_path / "idx"
    BM25Index().build(corpus("old")).save(path)
    run = subprocess.run([sys.executable, "-c", KILLER, str(path), when], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == -signal.SIGKILL, run.stdout + run.stderr
    assert leftovers(tmp_path), "the kill should leave a temporary or old folder behind"
    # the old index, or the complete new one, loads at path: never nothing
    assert saved_word(path) == survivor
    # the next complete save wins and removes the dead save's folders
    BM25Index().build(corpus("next")).save(path)
    assert saved_word(path) == "next"
    assert leftovers(tmp_path) == []


def test_a_path_left_missing_by_a_kill_is_restored_on_read(tmp_path):
    """What the old two-rename save left when killed between its renames: no ``idx``, the
    previous save in ``.idx.old-PID``. Loading puts it back; so does the next save."""
    BM25Index().build(corpus("old")).save(tmp_path / "idx")
    os.rename(tmp_path / "idx", tmp_path / f".idx.old-{DEAD_PID}")
    assert saved_word(tmp_path / "idx") == "old"
    assert leftovers(tmp_path) == []

    BM25Index().build(corpus("old")).save(tmp_path / "other")
    os.rename(tmp_path / "other", tmp_path / f".other.old-{DEAD_PID}")
    assert read_manifest(tmp_path / "other", "BM25Index")["count"] == 3
    os.rename(tmp_path / "other", tmp_path / f".other.old-{DEAD_PID}-1-abc")

    def fail(folder):
        raise RuntimeError("the save fails after recovery")
    with pytest.raises(RuntimeError):
        save_atomic(tmp_path / "other", "BM25Index", fail, {})
    # a failed save never makes things worse: the old index is still loadable
    assert saved_word(tmp_path / "other") == "old"


# -- concurrent saves ----------------------------------------------------------------------------
@pytest.mark.parametrize("n_paths", [1, 2, 4], ids=["same-path", "pairs", "different-paths"])
def test_concurrent_saves_from_four_threads_end_loadable_and_consistent(
        tmp_path, monkeypatch, n_paths):
    words = ["alpha", "beta", "gamma", "delta"]
    indexes = {w: BM25Index().build(corpus(w)) for w in words}
    paths = [tmp_path / f"idx{i}" for i in range(n_paths)]
    barrier = threading.Barrier(4, timeout=30)
    real_dumps = ragbook.bm25.dumps

    def dumps_together(obj):  # every thread is inside its write at the same moment
        barrier.wait()
        return real_dumps(obj)
    monkeypatch.setattr(ragbook.bm25, "dumps", dumps_together)
    errors, finished = [], {p: [] for p in paths}
    lock = threading.Lock()

    def worker(i):
        try:
            for _ in range(3):
                indexes[words[i]].save(paths[i % n_paths])
                with lock:
                    finished[paths[i % n_paths]].append(words[i])
        except BaseException as err:  # noqa: BLE001 - any error fails the test
            errors.append(repr(err))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    for path in paths:
        # each path holds one complete save, by one of the threads that saved there
        assert saved_word(path) in set(finished[path])
        assert len(finished[path]) == 3 * 4 // n_paths
        assert leftovers(tmp_path, path.name) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)


def test_the_last_complete_save_wins(tmp_path):
    for w in ("one", "two", "three"):
        BM25Index().build(corpus(w)).save(tmp_path / "idx")
    assert saved_word(tmp_path / "idx") == "three"


# -- leftovers and older saves -------------------------------------------------------------------
def test_leftovers_are_cleaned_and_nothing_else(tmp_path):
    path = tmp_path / "idx"
    BM25Index().build(corpus("old")).save(path)
    ours = [f".idx.saving-{DEAD_PID}", f".idx.old-{DEAD_PID}",  # the older ragbook's names
            f".idx.saving-{DEAD_PID}-140000-0a1b2c", f".idx.old-{os.getpid()}-1-abc"]
    live = f".idx.saving-{os.getppid()}-1-abc"  # a save by a running process: kept
    others = [".idx.saving-notes", ".idx.old", "idx.old-1", ".idx2.saving-1", ".idx.saving-1x",
              ".idx.old-1.saving-1", "notes.txt"]
    for name in ours + [live] + others:
        (tmp_path / name).mkdir()
        (tmp_path / name / "f.json").write_text("{}")
    (tmp_path / f".idx.saving-{DEAD_PID}-1-ff").write_text("a file, not a folder")
    BM25Index().build(corpus("new")).save(path)
    assert saved_word(path) == "new"
    assert leftovers(tmp_path) == sorted([live, ".idx.old-1.saving-1",
                                          ".idx.saving-1x", ".idx.saving-notes"])
    for name in others + [live]:
        assert (tmp_path / name / "f.json").read_text() == "{}"


def test_a_folder_saved_in_the_old_layout_loads_and_is_replaced(tmp_path):
    """The older save left a plain folder (manifest and files) plus, after crashes,
    ``.NAME.saving-PID`` / ``.NAME.old-PID`` folders; it loads as it is, and saving over
    it replaces it with a plain folder and removes those leftovers."""
    path = tmp_path / "idx"
    path.mkdir()
    BM25Index().build(corpus("old")).save(tmp_path / "src")
    for f in (tmp_path / "src").iterdir():
        (path / f.name).write_bytes(f.read_bytes())
    (tmp_path / "src").rename(tmp_path / f".idx.old-{DEAD_PID}")
    (tmp_path / f".idx.saving-{DEAD_PID}").mkdir()
    (tmp_path / f".idx.saving-{DEAD_PID}" / "records.json").write_text("[")
    assert saved_word(path) == "old"
    BM25Index().build(corpus("new")).save(path)
    assert saved_word(path) == "new"
    assert path.is_dir() and not path.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]
