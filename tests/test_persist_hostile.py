"""Loading a saved index under hostile conditions: while another process saves over it (the
load sees a whole index, old or new, never an error), and from a folder someone tampered with
(entries naming files outside it, FIFOs, devices, symlinks, an emptied manifest, files damaged
and re-hashed): ``CorruptIndexError`` naming the file, never a hang or a raw parser error."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from ragbook.bm25 import BM25Index
from ragbook.persist import CorruptIndexError
from ragbook.types import Document

SIZES = (3, 7)  # the writer alternates two corpora of these sizes


def corpus(n: int) -> list[Document]:
    return [Document(f"d{i}", f"refund window number {i} for plan {n} " * (i + 1))
            for i in range(n)]


WRITER = textwrap.dedent("""
    import sys, time
    from ragbook.bm25 import BM25Index
    from ragbook.types import Document
    path, seconds, sizes = sys.argv[1], float(sys.argv[2]), (3, 7)
    indexes = [BM25Index().build([Document(f"d{i}", f"refund window number {i} for plan {n} "
                                           * (i + 1)) for i in range(n)]) for n in sizes]
    end, i = time.time() + seconds, 0
    while time.time() < end:
        indexes[i % 2].save(path)
        i += 1
""")


def test_a_load_while_another_process_saves_in_a_loop_always_sees_a_whole_index(tmp_path):
    path = tmp_path / "idx"
    BM25Index().build(corpus(SIZES[0])).save(path)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "4"],
                              cwd=os.path.dirname(os.path.dirname(__file__)))
    errors, sizes = [], set()
    try:
        time.sleep(0.5)  # the writer is saving
        while writer.poll() is None:
            try:
                sizes.add(len(BM25Index.load(path)))
            except Exception as err:  # noqa: BLE001 - every error fails the test
                errors.append(f"{type(err).__name__}: {err}"[:160])
    finally:
        writer.wait(60)
    assert writer.returncode == 0
    assert errors == [], f"{len(errors)} failed loads, e.g. {errors[:3]}"
    assert sizes <= set(SIZES) and sizes


# -- tampered folders ----------------------------------------------------------------------------
@pytest.fixture
def saved(tmp_path):
    BM25Index().build(corpus(3)).save(tmp_path / "good")

    def copy(name: str):
        shutil.copytree(tmp_path / "good", tmp_path / name)
        return tmp_path / name
    return copy


def manifest(path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def write_manifest(path, m: dict) -> None:
    (path / "manifest.json").write_text(json.dumps(m))


def rehashed(path, name: str, data: bytes) -> None:
    """Replace file ``name`` with ``data`` and its checksum too: damaged but consistent."""
    (path / name).write_bytes(data)
    m = manifest(path)
    m["files"][name] = hashlib.sha256(data).hexdigest()
    write_manifest(path, m)


def load_in_child(path) -> str:
    """Load in a child process (a load that hangs reading a device cannot stop a thread):
    the error's type and message, or "LOADED"/"HANG"."""
    code = (f"from ragbook.bm25 import BM25Index\ntry:\n    BM25Index.load({str(path)!r})\n"
            f"    print('LOADED')\nexcept Exception as e:\n    print(type(e).__name__, e)")
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=30, cwd=os.path.dirname(os.path.dirname(__file__)))
    except subprocess.TimeoutExpired:
        return "HANG"
    return done.stdout.strip() or done.stderr.strip()[-300:]


def test_a_manifest_with_no_files_does_not_skip_the_checksums(saved):
    path = saved("nofiles")
    m = manifest(path)
    m["files"] = {}
    write_manifest(path, m)
    meta = json.loads((path / "bm25.json").read_text())
    meta["settings"]["k1"] = 99.0  # an edit that a skipped checksum would let through
    (path / "bm25.json").write_text(json.dumps(meta))
    with pytest.raises(CorruptIndexError, match=r"bm25\.json.*rebuild"):
        BM25Index.load(path)


@pytest.mark.parametrize("entry", ["../outside", "/etc/hostname", "", "a/../../outside"])
def test_a_manifest_entry_outside_the_folder_is_refused(saved, entry):
    path = saved("tampered")
    (path.parent / "outside").write_text("secret")
    m = manifest(path)
    m["files"][entry] = hashlib.sha256(b"secret").hexdigest()
    write_manifest(path, m)
    with pytest.raises(CorruptIndexError, match=f"{entry!r}.*not a file name inside"):
        BM25Index.load(path)


def test_a_manifest_entry_without_a_checksum_is_refused(saved):
    path = saved("nodigest")
    m = manifest(path)
    m["files"]["x"] = None
    write_manifest(path, m)
    with pytest.raises(CorruptIndexError, match="'x'.*not a SHA-256"):
        BM25Index.load(path)


@pytest.mark.parametrize("tamper", ["dev-zero entry", "fifo entry", "symlink to /dev/zero",
                                    "symlink to a good copy"])
def test_devices_fifos_and_symlinks_are_refused_without_hanging(saved, tamper):
    path = saved(tamper.replace(" ", "-").replace("/", ""))
    m, named = manifest(path), "weights.npz"
    if tamper == "dev-zero entry":
        m["files"]["/dev/zero"], named = "0" * 64, "/dev/zero"
    elif tamper == "fifo entry":
        os.mkfifo(path / "pipe")
        m["files"]["pipe"], named = "0" * 64, "pipe"
    elif tamper == "symlink to /dev/zero":
        (path / "weights.npz").unlink()
        os.symlink("/dev/zero", path / "weights.npz")
    else:  # the same bytes, but from outside the folder
        shutil.copy(path / "weights.npz", path.parent / "elsewhere.npz")
        (path / "weights.npz").unlink()
        os.symlink(path.parent / "elsewhere.npz", path / "weights.npz")
    write_manifest(path, m)
    result = load_in_child(path)
    assert result.startswith("CorruptIndexError") and named in result, result


@pytest.mark.parametrize("name, data", [
    ("weights.npz", "truncated"),
    ("bm25.json", b'{"settings": 1}'),
    ("bm25.json", b"[" * 100_000 + b"]" * 100_000),
    ("records.json", b"[" * 100_000 + b"]" * 100_000),
    ("tf.npz", b"PK\x03\x04 not really a zip"),
], ids=["truncated-npz", "wrong-shape-json", "deep-json", "deep-records", "bad-zip"])
def test_a_damaged_file_with_a_matching_checksum_is_corrupt_and_named(saved, name, data):
    path = saved(name + str(len(data)))
    if data == "truncated":
        data = (path / name).read_bytes()[:100]
    rehashed(path, name, data)
    with pytest.raises(CorruptIndexError, match=rf"{name}' is damaged.*rebuild"):
        BM25Index.load(path)


def test_files_that_do_not_fit_together_are_corrupt(saved):
    path = saved("misfit")
    meta = json.loads((path / "bm25.json").read_text())
    meta["idf"] = meta["idf"][:-1]  # one term's IDF lost, the manifest re-hashed
    rehashed(path, "bm25.json", json.dumps(meta).encode())
    with pytest.raises(CorruptIndexError, match="weights.npz' is damaged"):
        BM25Index.load(path)


def test_a_manifest_nested_too_deep_is_corrupt(saved):
    path = saved("deep")
    (path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CorruptIndexError, match=r"manifest\.json.*rebuild"):
        BM25Index.load(path)
