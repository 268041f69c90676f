"""Saving indexes: JSON that keeps tuples, and atomic, checksummed folders.

A save is written to a temporary folder, given a ``manifest.json`` (kind, format version,
counts and fingerprints, a SHA-256 per file) and swapped in for the old one;
``read_manifest`` names the file that is missing or changed.

How a save never loses the old index. ``path`` stays a plain folder (what every loader
reads, and what a save by an older ragbook left), and the swap is two renames made
recoverable, not one rename of a symlink: a symlinked ``path`` breaks ``shutil.rmtree``,
``cp -r``/zip copies, Windows and tools that resolve it once, while two renames of real
folders behave the same on Linux and macOS. In order:

1. ``write`` fills ``.NAME.saving-PID-TID-TOKEN`` next to ``path`` (process id, thread id and
   a random token: threads and processes saving the same or different indexes never share
   a temporary folder); the manifest is written last.
2. Under a lock on the parent folder (a ``threading.Lock`` plus ``flock`` on the folder,
   so saves in this process and in others take turns for the swap only): ``path`` is
   renamed to ``.NAME.old-PID-TID-TOKEN``, the new folder is renamed to ``path``, the old
   one is deleted. The last save to finish its swap wins; every one is complete.
3. Recovery: a kill between the two renames leaves no ``path`` but a complete
   ``.NAME.old-*``; the next ``save_atomic`` or ``read_manifest`` on ``path`` (under the
   same lock, so it never mistakes a swap in progress for a crash) renames the newest one
   back. So at every instant the old or the new save is at ``path``, or is restored there
   by the next read.
4. Cleaning: after its swap a save removes leftovers of earlier interrupted saves of
   ``path``, matching only ``.NAME.saving-<pid>[-<tid>-<token>]`` and ``.NAME.old-...``
   exactly (the older ragbook's ``.NAME.saving-PID`` too): every ``.NAME.old-*`` (stale
   once ``path`` exists) and each ``.NAME.saving-*`` whose writer is gone (its pid is not
   a running process, or it is this process and no save of ours is using it). A temporary
   folder of a live save elsewhere is left alone.
5. Reading: a loader holds ``reading(path)`` (a shared ``flock`` on the same parent folder)
   while it checks the manifest and reads the files, so a swap waits for it and it never
   sees a folder half old, half new, or missing between the two renames.

``read_manifest`` accepts only plain names of regular files inside the folder (no symlink,
FIFO or device: it could point outside or never end) and requires the files the kind needs.

A ``path`` that is a symlink (the user's own: an index kept on another disk) is followed:
the folder it names is the one swapped, beside it, and the link is kept.

Limits: a loader is safe from a swap only if it holds ``reading`` around all its reads
(``BM25Index.load`` does). A pid from another machine sharing the folder cannot be checked,
so only save one index path from one machine at a time. Nothing is fsynced but the parent
folder after the swap: a kill never loses a save, a power cut right after one may.

>>> loads(dumps({"path": ("Library", "os")}))
{'path': ('Library', 'os')}
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import threading
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .tagged_json import dumps, loads

try:  # Linux and macOS; elsewhere saves in one process still take turns
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["FORMAT_VERSION", "CorruptIndexError", "dumps", "loads", "save_atomic",
           "read_manifest", "recover", "reading", "parsing"]

FORMAT_VERSION = 3  # 3: corpus fingerprints cover metadata


class CorruptIndexError(ValueError):
    """A saved index does not match its manifest (a file changed, is missing or is truncated).
    ``problem`` is the message without its advice, so a caller with other advice (the command
    line: rebuild with ``ragbook index``) can give its own."""

    def __init__(self, problem: str, fix: str | None = None):
        super().__init__(problem if fix is None else f"{problem}; {fix}")
        self.problem = problem


# -- atomic, checksummed saves ------------------------------------------------------------------
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _read_regular(path: Path, each) -> None:
    """Feed the bytes of regular file ``path`` to ``each``, block by block. Refuses a symlink,
    FIFO or device (``CorruptIndexError``: it could point outside the folder or never end;
    opened without following links or blocking) and reads no more than its size when opened."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise _not_regular(path, "is a symlink") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(path, "is a FIFO, device or folder")
        left = info.st_size + 1  # one byte more: a file that grew no longer matches
        while left > 0 and (block := f.read(min(1 << 20, left))):
            each(block)
            left -= len(block)


def _not_regular(path: Path, what: str) -> CorruptIndexError:
    return CorruptIndexError(f"{str(path)!r} {what}, where a save writes a plain file (it "
                             f"could point outside the folder or never end)", "rebuild and "
                             "save the index again, or restore the folder from a backup")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    _read_regular(path, h.update)
    return h.hexdigest()


def _read_text(path: Path) -> str:
    parts: list[bytes] = []
    _read_regular(path, parts.append)
    return b"".join(parts).decode("utf-8")


# What a file of a saved index that passed its checksum may still raise when parsed: it was
# damaged before the save took its checksum, or edited with the manifest re-hashed.
DAMAGED = (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError,
           EOFError, zipfile.BadZipFile, zlib.error)


@contextmanager
def parsing(file: str | os.PathLike) -> Iterator[None]:
    """Turn what a damaged ``file`` raises while a loader parses it (bad JSON, a wrong shape,
    a broken zip, nesting too deep) into ``CorruptIndexError`` naming the file and the fix."""
    try:
        yield
    except CorruptIndexError:
        raise
    except DAMAGED as err:
        reason = f"{type(err).__name__}: {str(err)[:200]}".rstrip(": ")
        raise CorruptIndexError(f"{str(file)!r} is damaged ({reason})",
                                "rebuild and save the index again, or restore the folder "
                                "from a backup") from None


_REGISTRY = threading.Lock()                    # guards the two below
_FOLDER_LOCKS: dict[str, threading.Lock] = {}    # parent folder -> lock for its swaps
_ACTIVE: set[str] = set()                        # temporary folders of saves running here


@contextmanager
def _swap_lock(folder: Path) -> Iterator[int | None]:
    """Hold the lock for swaps in ``folder``: one thread of this process at a time, and
    (``flock`` on the folder) one process at a time. Yields the folder's fd (or None)."""
    key = os.path.realpath(folder)
    with _REGISTRY:
        lock = _FOLDER_LOCKS.setdefault(key, threading.Lock())
    with lock:
        try:
            fd: int | None = os.open(folder, os.O_RDONLY)
        except OSError:
            fd = None
        try:
            if fd is not None and fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except OSError:  # a file system without flock: threads still take turns
                    pass
            yield fd
        finally:
            if fd is not None:
                os.close(fd)  # releases the flock


def _followed(path: Path) -> Path:
    """``path``, or the folder it names when it is a symlink (followed to the end, even
    while that folder is missing mid-swap): a save replaces that folder, beside it, and
    the link stays — not the link swapped for a new folder while the one it named keeps
    the old index — and recovery and ``reading`` look (and lock) there too."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


_HELD = threading.local()  # .folders: parent folders this thread holds ``reading`` on


def _held() -> dict[str, int]:
    return _HELD.__dict__.setdefault("folders", {})


@contextmanager
def reading(path: str | os.PathLike) -> Iterator[None]:
    """Hold while reading the index saved at ``path``: a shared ``flock`` on its parent
    folder, the lock a save holds exclusively for its swap, so no save swaps ``path`` while
    its files are read (the load sees the old save or the new one, whole). Readers do not
    wait for each other; a thread may nest it. Restores a save killed mid-swap first."""
    path = _followed(Path(path))
    recover(path)  # before the shared lock: recovery takes the lock exclusively
    key, held, fd = os.path.realpath(path.parent), _held(), None
    if not held.get(key) and fcntl is not None:
        with suppress(OSError):  # no folder we may open, or no flock: read without the lock
            fd = os.open(path.parent, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_SH)
    held[key] = held.get(key, 0) + 1
    try:
        yield
    finally:
        held[key] -= 1
        if fd is not None:
            os.close(fd)  # releases the flock


def _leftovers(path: Path) -> Iterator[tuple[Path, str, int]]:
    """Our own temporary and old folders of ``path`` (exact names only): (folder, "saving"
    or "old", pid)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.(saving|old)-(\d+)(?:-\d+-[0-9a-f]+)?")
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m:
            yield entry, m.group(1), int(m.group(2))


def _writer_alive(folder: Path, pid: int) -> bool:
    if pid == os.getpid():
        with _REGISTRY:
            return str(folder) in _ACTIVE
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # exists but is not ours to signal, or cannot tell: keep its folder
        return True
    return True


def _remove(p: Path) -> None:
    if p.is_symlink() or p.is_file():
        try:
            p.unlink()
        except OSError:
            pass
    else:
        shutil.rmtree(p, ignore_errors=True)


def _recover(path: Path) -> Path | None:
    """Hold the swap lock. If ``path`` is missing and a save was killed between its two
    renames, rename the newest complete ``.NAME.old-*`` back to ``path``; return it."""
    if path.exists() or path.is_symlink():
        return None
    olds = [f for f, kind, _ in _leftovers(path)
            if kind == "old" and (f / "manifest.json").is_file()]
    if not olds:
        return None
    newest = max(olds, key=lambda f: f.stat().st_ctime)  # a rename updates ctime
    os.replace(newest, path)
    return newest


def _clean(path: Path) -> None:
    """Hold the swap lock, with ``path`` in place: remove the leftovers of interrupted saves."""
    for folder, kind, pid in _leftovers(path):
        if kind == "old" or not _writer_alive(folder, pid):
            _remove(folder)


def save_atomic(path: str | os.PathLike, kind: str, write, info: Mapping[str, Any]) -> Path:
    """Save a folder all-or-nothing: ``write(tmp)`` fills a temporary folder next to
    ``path`` (its name unique to this save); a ``manifest.json`` (kind, format version,
    ``info`` such as counts and fingerprints, a SHA-256 per file) is added; then the folder
    replaces ``path`` under a lock (see the module notes). A save that fails or is killed
    midway leaves the previous save at ``path`` (or restorable there by the next
    ``read_manifest``/``save_atomic``); a save that completes removes the leftovers of
    earlier interrupted ones."""
    path = _followed(Path(path))
    if path.is_file():  # not "exists and not is_dir": another save may be mid-swap
        raise FileExistsError(f"{str(path)!r} is a file; save an index to a folder path")
    if path.resolve() == Path.cwd().resolve() or path.resolve() in Path.cwd().resolve().parents:
        raise ValueError(f"cannot save into {str(path)!r}: it is the current folder or one "
                         f"above it, which the save would replace; give a new folder path")
    path = path.resolve() if not path.name else path
    path.parent.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(6)}"
    tmp = path.with_name(f".{path.name}.saving-{token}")
    old = path.with_name(f".{path.name}.old-{token}")
    with _REGISTRY:
        _ACTIVE.add(str(tmp))
    try:
        tmp.mkdir()
        try:
            write(tmp)
            files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
            manifest = {"kind": kind, "format_version": FORMAT_VERSION, **info, "files": files}
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1),
                                               encoding="utf-8")
            with _swap_lock(path.parent) as fd:
                _recover(path)
                if path.is_file():
                    raise FileExistsError(f"{str(path)!r} is a file; save an index to a "
                                          f"folder path")
                if path.exists() or path.is_symlink():
                    os.replace(path, old)
                try:
                    os.replace(tmp, path)
                except BaseException:
                    if old.exists() and not (path.exists() or path.is_symlink()):
                        os.replace(old, path)
                    raise
                if fd is not None:
                    try:
                        os.fsync(fd)
                    except OSError:
                        pass
                _remove(old)
                _clean(path)
        except BaseException:
            _remove(tmp)
            raise
    finally:
        with _REGISTRY:
            _ACTIVE.discard(str(tmp))
    return path


def recover(path: str | os.PathLike) -> bool:
    """Put back the index a save killed between its two renames left beside ``path``
    (``.NAME.old-*``), if ``path`` is missing; True when it did. Every loader calls this
    first (``read_manifest`` does), so ``ragbook ask``/``eval`` load the previous index
    instead of saying there is none. Waits for the swap lock, so a swap in progress in
    another thread or process is never mistaken for a crash."""
    path = _followed(Path(path))
    if (path / "manifest.json").exists() or not path.name or not path.parent.is_dir():
        return False
    if _held().get(os.path.realpath(path.parent)):  # this thread reads there: recovered
        return False  # before its lock (waiting for the exclusive lock would deadlock)
    try:
        with _swap_lock(path.parent):
            return _recover(path) is not None
    except OSError:  # a folder we may not rename in: the caller reports what is missing
        return False


# Files each kind's loader reads (besides manifest.json): a manifest must list them, so one
# whose "files" was emptied or trimmed cannot switch their checksums off.
REQUIRED_FILES = {"BM25Index": ("bm25.json", "records.json", "weights.npz"),
                  "HybridRetriever": ("hybrid.json",)}
_DIGEST = re.compile(r"[0-9a-f]{64}")


def _entry(path: Path, name: Any, digest: Any) -> Path:
    """The file a manifest entry names, if it is a plain name inside ``path`` with a SHA-256;
    else ``CorruptIndexError`` naming the entry."""
    plain = (isinstance(name, str) and name not in ("", ".", "..", "manifest.json")
             and not any(c in name for c in "/\\\0") and not os.path.isabs(name))
    if not plain or not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        what = "a file name inside the folder" if not plain else f"a SHA-256 ({digest!r})"
        raise CorruptIndexError(f"{str(path / 'manifest.json')!r} lists {name!r}, which is not "
                                f"{what}: the manifest was edited",
                                "rebuild and save the index again")
    return path / name


def read_manifest(path: str | os.PathLike, kind: str) -> dict:
    """Check a folder written by ``save_atomic`` and return its manifest; raise
    ``CorruptIndexError`` naming the file that is missing, changed, not a plain file, or an
    entry naming something outside the folder. Holds ``reading(path)`` while it checks; a
    loader that reads the files afterwards holds it around both."""
    path = Path(path)
    with reading(path):
        return _check(path, kind)


def _check(path: Path, kind: str) -> dict:
    mf = path / "manifest.json"
    if not mf.exists() and (path.parent / "manifest.json").is_file():
        raise CorruptIndexError(f"{str(path)!r} is missing from the index saved in "
                                f"{str(path.parent)!r}", "rebuild and save the index again")
    if not mf.exists() and not mf.is_symlink():
        raise FileNotFoundError(f"no saved {kind} in {str(path)!r} (no manifest.json); save "
                                f"one with .save(path) first")
    try:
        manifest = json.loads(_read_text(mf))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        reason = str(err)[:200] or "nested too deep"
        raise CorruptIndexError(f"{str(mf)!r} is not a readable manifest ({reason}); the save "
                                f"is damaged: rebuild and save the index again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise CorruptIndexError(f"{str(mf)!r} is not a ragbook manifest (expected a JSON object "
                                f"with 'kind' and 'files'); rebuild and save the index again")
    if manifest.get("kind") != kind:
        raise CorruptIndexError(f"{str(path)!r} holds a {manifest.get('kind')!r}, not a {kind}; "
                                f"load it with the matching class")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise CorruptIndexError(
            f"{str(path)!r} was saved in format {manifest.get('format_version')}, this "
            f"ragbook reads format {FORMAT_VERSION}; rebuild and save the index again")
    files = manifest["files"]
    unlisted = [n for n in REQUIRED_FILES.get(kind, ()) if n not in files]
    if unlisted or not files:
        raise CorruptIndexError(f"{str(mf)!r} lists no checksum for "
                                f"{unlisted[0] if unlisted else 'any file'!r}, which every "
                                f"saved {kind} has (the manifest was edited)",
                                "rebuild and save the index again")
    checked = [(_entry(path, name, digest), digest) for name, digest in files.items()]
    for f, digest in checked:
        if not (f.exists() or f.is_symlink()):
            raise CorruptIndexError(f"{str(f)!r} is missing; the save in {str(path)!r} is "
                                    f"incomplete: rebuild and save the index again")
        if _sha256(f) != digest:
            raise CorruptIndexError(f"{str(f)!r} does not match its checksum in manifest.json "
                                    f"(changed or truncated since it was saved); rebuild and "
                                    f"save the index again")
    return manifest
