"""Vector store: rows of floats by key, kept on disk, taken from shipped data or computed.

One idea, used twice: ``Encoder`` keeps each text's vector here (key: the hash of the exact
text its model reads) and ``MaxSimScorer`` each (question, passage) pair's MaxSim (key: the
hash of the pair as the model reads it). ``fill`` asks the store first, then the files
``ragbook.shipped`` carries for the pinned model (each verified by computing its probe), and
computes only what neither has, writing every row it did not read from disk back to the
store — so a re-run computes nothing and a first run only what no file carries.
"""
from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .cache import guarded

__all__ = ["VectorStore", "fill", "progress", "slug"]


def slug(text: str) -> str:
    """``text`` with every character a file name may not hold replaced by ``_``."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in text)


class VectorStore:
    """key -> float32 row of ``dim`` values, one SQLite file. ``unit=True`` (vectors) counts
    a row that is not unit length as damaged; ``unit=False`` (scores) one that is not finite.
    A damaged row is a miss, so it is computed again.
    SQLite makes concurrent notebooks safe and an interrupted run keeps what it finished.
    The file is in WAL mode with ``synchronous=NORMAL``: a commit appends to the log without
    waiting for the disk, so caching one query's vector costs microseconds instead of the
    fsyncs that made a busy machine's queries up to 1.6x slower than the raw model, and a
    crashed process still loses no committed row (only a power cut can drop the last few,
    which are then computed again)."""

    def __init__(self, path: Path, dim: int, unit: bool = True):
        self.path, self.dim, self.unit = path, dim, unit
        self._local = threading.local()
        self.broken: str | None = None   # why the store is off for this run, once it fails
        self._guard(lambda: self._conn().execute(
            "CREATE TABLE IF NOT EXISTS vec (h TEXT PRIMARY KEY, v BLOB NOT NULL)"), None)

    def _guard(self, action, fallback):
        return guarded(self, "the embedding cache", action, fallback)

    def _conn(self) -> sqlite3.Connection:
        if getattr(self._local, "db", None) is None:
            db = sqlite3.connect(self.path, timeout=60)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return self._local.db

    def get(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored rows of ``hashes``, damaged ones left out."""
        def read() -> dict[str, np.ndarray]:
            rows, db = [], self._conn()
            for s in range(0, len(hashes), 500):
                part = list(hashes[s:s + 500])
                q = f"SELECT h, v FROM vec WHERE h IN ({','.join('?' * len(part))})"
                rows += [(h, blob) for h, blob in db.execute(q, part)
                         if isinstance(blob, bytes) and len(blob) == 4 * self.dim]
            if not rows:
                return {}
            vecs = np.frombuffer(b"".join(b for _, b in rows), np.float32).reshape(-1, self.dim)
            with np.errstate(invalid="ignore", over="ignore"):
                ok = (np.abs(np.einsum("ij,ij->i", vecs, vecs) - 1.0) < 1e-3 if self.unit
                      else np.isfinite(vecs).all(axis=1))          # NaN fails either way
            return {h: v for (h, _), v, good in zip(rows, vecs, ok, strict=True) if good}

        return self._guard(read, {})

    def put(self, hashes: Sequence[str], vectors: np.ndarray) -> None:
        """Store rows under their hashes (a failing store is skipped, see ``guarded``)."""
        def write() -> None:
            with self._conn() as db:
                db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)",
                               [(h, np.asarray(v, np.float32).tobytes())
                                for h, v in zip(hashes, vectors, strict=True)])

        self._guard(write, None)


def fill(keys: Sequence[str], items: Sequence, compute: Callable[[list], np.ndarray], dim: int,
         store: VectorStore | None, files: Sequence, *, size: Callable = len, block: int = 256,
         bar: Callable[[int], object] | None = None) -> tuple[np.ndarray, int]:
    """The ``(len(keys), dim)`` rows of ``keys`` (``items[i]`` is what ``keys[i]`` stands
    for) and how many of ``keys`` were computed. A row comes from ``store``, else (only with
    a store: a caller without one, such as ``cache=False``, computes everything) from the
    first of the shipped ``files`` that has it (each verified once by ``compute`` on its
    probe), else from ``compute(items)`` — run in blocks of ``block`` items, the largest by
    ``size`` first (like sizes batch with little padding), each block written to ``store`` as
    it finishes. ``bar(n)`` makes a progress bar for ``n`` computed items."""
    out = np.zeros((len(keys), dim), dtype=np.float32)
    if not len(keys):
        return out, 0
    found = store.get(keys) if store else {}
    for extra in files if store else ():
        if len(found) == len(set(keys)):
            break
        taken = extra.take([h for h in dict.fromkeys(keys) if h not in found], compute)
        if taken:
            store.put(list(taken), np.stack(list(taken.values())))
        found.update(taken)
    todo = sorted({h: it for h, it in zip(keys, items, strict=True) if h not in found}.items(),
                  key=lambda kv: -size(kv[1]))
    shown = bar(len(todo)) if todo and bar else None
    for s in range(0, len(todo), block):
        part = todo[s:s + block]
        rows = np.asarray(compute([it for _, it in part]), np.float32).reshape(len(part), dim)
        found.update({h: r for (h, _), r in zip(part, rows, strict=True)})
        if store:
            store.put([h for h, _ in part], rows)
        if shown is not None:
            shown.update(len(part))
    if shown is not None:
        shown.close()
    for i, h in enumerate(keys):
        out[i] = found[h]
    computed = {h for h, _ in todo}
    return out, sum(1 for h in keys if h in computed)


class _NoBar:
    def update(self, n: int) -> None: ...
    def close(self) -> None: ...


def progress(total: int, show: bool, desc: str, unit: str = "text"):
    """A tqdm bar of ``total`` items (one that shows nothing when ``show`` is false)."""
    if not show:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit)
