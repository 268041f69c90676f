"""Shipped vectors: corpus vectors of a pinned model, carried as data, so a first run does not
embed them again (issue 34: from an empty cache, chapter 3 spent ~7 of its minutes on 2 cores
embedding the Python docs' 10,370 sections).

``data/vectors/NAME.npz`` (NAME: the embedding cache's file name for one model, weights and
input length, so a file serves exactly the encoder whose cache it would be) holds ``hashes``
(an (n, 32) uint8 array: the sha256 digests of the exact texts the model reads, prefix
included: the cache's keys), ``vectors`` (float32, unit length) and a probe, ``probe_texts``
with their ``probe_vectors``. Before an encoder takes a vector from the file, it embeds the
probe with its own model; the file is used only when every probe vector agrees with the
shipped one to a cosine of at least ``1 - TOLERANCE``. A different model, weights or maths
library thus recomputes, with a warning that says why, and never gets a vector its model
would not have made.
``tools/ship_vectors.py`` writes a file from a filled cache (and ``--check`` verifies it).
"""
from __future__ import annotations

import hashlib
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["ShippedVectors", "TOLERANCE", "FOLDER", "shipped_for", "text_key"]

#: a probe vector must reach cosine >= 1 - TOLERANCE with the shipped one (fp32 on two CPU
#: kinds differs by ~1e-7; another model or weights by far more than this)
TOLERANCE = 1e-4
#: where the files live in a source checkout
FOLDER = Path(__file__).resolve().parent.parent / "data" / "vectors"


def text_key(text: str) -> str:
    """A text's key in the embedding cache and in a shipped file: the sha256 hex digest of the
    exact text the model reads (its prefix included), so one text has one key everywhere."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ShippedVectors:
    """The vectors of one ``.npz`` file, read on first use and verified against ``encode``
    (a callable: texts -> unit vectors from the encoder's own model) before any is taken."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._rows: dict[str, int] | None = None
        self.usable: bool | None = None        # None: not verified yet
        self.taken = 0                         # vectors handed out (tests and reports)

    def _load(self) -> None:
        data = np.load(self.path, allow_pickle=False)
        self._vectors = np.asarray(data["vectors"], dtype=np.float32)
        self._rows = {bytes(h).hex(): i for i, h in enumerate(data["hashes"])}
        self._probe = ([str(t) for t in data["probe_texts"]],
                       np.asarray(data["probe_vectors"], dtype=np.float32))

    def verify(self, encode: Callable[[list[str]], np.ndarray]) -> bool:
        """Embed the probe with ``encode`` and keep the file only if every cosine with the
        shipped vector is >= 1 - ``TOLERANCE`` (once per process and file)."""
        if self.usable is None:
            try:
                self._load()
                texts, shipped = self._probe
                got = np.asarray(encode(texts), dtype=np.float32)
                worst = float(np.min(np.einsum("ij,ij->i", got, shipped)))
                self.usable = bool(len(texts)) and worst >= 1 - TOLERANCE
                why = (f"its probe texts' cosine with this model's vectors is {worst:.6f} "
                       f"(need >= {1 - TOLERANCE}): the file was made with another model or "
                       f"weights; rerun tools/ship_vectors.py for yours")
            except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as err:
                self.usable = False
                why = (f"it cannot be read ({err}); restore it from the repository "
                       f"(git checkout -- data/vectors) or rerun tools/ship_vectors.py")
            if not self.usable:
                warnings.warn(f"the shipped vectors {self.path.name} are not used, their texts "
                              f"are embedded instead: {why}", stacklevel=4)
        return self.usable

    def take(self, hashes: Sequence[str],
             encode: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
        """The shipped vectors of those ``hashes`` the file has ({} if it fails to verify)."""
        if not hashes or not self.verify(encode):
            return {}
        found = {h: self._vectors[self._rows[h]] for h in hashes if h in self._rows}
        self.taken += len(found)
        return found


_OPEN: dict[str, ShippedVectors | None] = {}


def shipped_for(name: str) -> ShippedVectors | None:
    """The shipped vectors for the cache file ``name`` (without its suffix), or None."""
    if name not in _OPEN:
        path = FOLDER / f"{name}.npz"
        _OPEN[name] = ShippedVectors(path) if path.is_file() else None
    return _OPEN[name]
