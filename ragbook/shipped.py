"""Shipped vectors: corpus vectors of a pinned model, carried as data, so a first run does not
embed them again (issue 34: from an empty cache, chapter 3 spent ~7 of its minutes on 2 cores
embedding the Python docs' 10,370 sections).

``data/vectors/NAME.npz`` and ``data/vectors/NAME.PART.npz`` (NAME: the embedding cache's
file name for one model, weights and input length, so a file serves exactly the encoder whose
cache it would be; PART names one more text set for the same cache) hold ``hashes`` (an
(n, 32) uint8 array: the sha256 digests of the exact texts the model reads, prefix included:
the cache's keys), ``vectors`` (unit length; float32, or float16 where the repository's size
budget asks for it — read back as float32 rows made unit again; their cosines with a question
stay within 1e-4 of the float32 vectors', 5e-5 at most on chapter 6's windows) and a probe,
``probe_texts`` with their float32 ``probe_vectors``. Before an encoder takes a vector from
the file, it embeds the probe with its own model; the file is used only when every probe
vector agrees with the shipped one to a cosine of at least ``1 - TOLERANCE``. A different
model, weights or maths library thus recomputes, with a warning that says why, and never gets
a vector its model would not have made.
``tools/ship_vectors.py`` writes a file from a filled cache (and ``--check`` verifies it).

Shipped scores, the same layout for one number per key: ``data/vectors/maxsim__NAME.npz``
(NAME: the slug of the encoder's fingerprint) holds the MaxSim of (question, passage) pairs
(``hashes``: ``pair_key`` of the pair as the model reads it; ``vectors``: (n, 1) float32;
``probe_texts``: (m, 2) pairs). ``MaxSimScorer`` takes a score once its own model gives every
probe pair's within ``SCORE_TOLERANCE``; ``tools/ship_scores.py`` writes the file.

Shipped replies, the same idea for the generator: ``data/replies/NAME.json`` (NAME: the
model's identity, name and weights digest) holds the ``generations`` cache's rows for the
book's prompts (``rows``: cache key -> reply) and a probe request with its reply. A
``LocalLLM`` whose cache misses takes a row only after its own model has written the probe's
reply again word for word (greedy decoding: same weights and maths, same words).
``tools/ship_replies.py`` writes the file from the cache of a run of the book's LLM chapters.
"""
from __future__ import annotations

import glob
import hashlib
import json
import re
import warnings
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

__all__ = ["ShippedReplies", "ShippedScores", "ShippedVectors", "TOLERANCE", "SCORE_TOLERANCE",
           "FOLDER", "REPLIES", "pair_key", "replies_file", "replies_for", "shipped_for",
           "text_key"]

#: a probe vector must reach cosine >= 1 - TOLERANCE with the shipped one (fp32 on two CPU
#: kinds differs by ~1e-7; another model or weights by far more than this)
TOLERANCE = 1e-4
#: a probe score must be within SCORE_TOLERANCE of the shipped one (MaxSim reads token vectors
#: rounded to float16: ~1e-4 apart on two CPU kinds at most; another model far more)
SCORE_TOLERANCE = 1e-3
#: where the files live in a source checkout
FOLDER = Path(__file__).resolve().parent.parent / "data" / "vectors"
#: where the generator's shipped replies live in a source checkout
REPLIES = FOLDER.parent / "replies"


def text_key(text: str) -> str:
    """A text's key in the embedding cache and in a shipped file: the sha256 hex digest of the
    exact text the model reads (its prefix included), so one text has one key everywhere."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def pair_key(query: str, passage: str) -> str:
    """A (question, passage) pair's key: ``text_key`` of both texts as the model reads them,
    written unambiguously (no two pairs share a key, whatever characters they hold)."""
    return text_key(json.dumps([query, passage], ensure_ascii=False))


class ShippedVectors:
    """The vectors of one ``.npz`` file, read on first use and verified against ``encode``
    (a callable: texts -> unit vectors from the encoder's own model) before any is taken."""

    unit = True                    # rows are unit vectors (made unit again when stored small)
    tolerance = TOLERANCE
    what, tool = "vectors", "tools/ship_vectors.py"

    def __init__(self, path: Path):
        self.path = Path(path)
        self._rows: dict[str, int] | None = None
        self.usable: bool | None = None        # None: not verified yet
        self.taken = 0                         # vectors handed out (tests and reports)

    def _load(self) -> None:
        data = np.load(self.path, allow_pickle=False)
        stored = data["vectors"]                     # each access re-reads the array
        vectors = np.asarray(stored, dtype=np.float32)
        if self.unit and stored.dtype != np.float32:  # stored smaller: unit length again
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        self._vectors = vectors
        self._rows = {bytes(h).hex(): i for i, h in enumerate(data["hashes"])}
        self._probe = (data["probe_texts"].tolist(),
                       np.asarray(data["probe_vectors"], dtype=np.float32))

    def _gap(self, got: np.ndarray, shipped: np.ndarray) -> tuple[float, str]:
        """How far this model's probe rows are from the file's, and that said in words."""
        worst = float(np.min(np.einsum("ij,ij->i", got, shipped)))
        return 1 - worst, (f"its probe texts' cosine with this model's vectors is {worst:.6f} "
                           f"(need >= {1 - self.tolerance})")

    def verify(self, encode: Callable[[list[str]], np.ndarray]) -> bool:
        """Run the probe through ``encode`` and keep the file only if every row is within
        ``tolerance`` of the shipped one (``_gap``; once per process and file)."""
        if self.usable is None:
            try:
                self._load()
                texts, shipped = self._probe
                got = np.asarray(encode(texts), dtype=np.float32).reshape(shipped.shape)
                gap, said = self._gap(got, shipped)
                self.usable = bool(len(texts)) and gap <= self.tolerance
                why = (f"{said}: the file was made with another model or weights; rerun "
                       f"{self.tool} for yours")
            except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile) as err:
                self.usable = False
                why = (f"it cannot be read ({err}); restore it from the repository "
                       f"(git checkout -- data/vectors) or rerun {self.tool}")
            if not self.usable:
                warnings.warn(f"the shipped {self.what} {self.path.name} are not used, they "
                              f"are computed instead: {why}", stacklevel=5)
        return self.usable

    def take(self, hashes: Sequence[str],
             encode: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
        """The shipped vectors of those ``hashes`` the file has ({} if it fails to verify)."""
        if not hashes or not self.verify(encode):
            return {}
        found = {h: self._vectors[self._rows[h]] for h in hashes if h in self._rows}
        self.taken += len(found)
        return found


class ShippedScores(ShippedVectors):
    """One score per key (a pair's MaxSim) in the same layout: ``vectors`` is (n, 1) and is
    never renormalised, the probe's texts are (question, passage) pairs, and the file is kept
    when every probe score is within ``SCORE_TOLERANCE`` of the model's."""

    unit, tolerance = False, SCORE_TOLERANCE
    what, tool = "scores", "tools/ship_scores.py"

    def _gap(self, got: np.ndarray, shipped: np.ndarray) -> tuple[float, str]:
        gap = float(np.max(np.abs(got - shipped)))
        return gap, (f"this model's probe scores differ from the file's by up to {gap:.2e} "
                     f"(allowed {self.tolerance:g})")


_OPEN: dict[str, list[ShippedVectors]] = {}


def shipped_for(name: str, kind: type[ShippedVectors] = ShippedVectors) -> list[ShippedVectors]:
    """The shipped files for the cache file ``name`` (without its suffix): ``NAME.npz`` and
    every ``NAME.PART.npz``, in name order, read as ``kind``; [] if none."""
    if name not in _OPEN:
        paths = [FOLDER / f"{name}.npz", *sorted(FOLDER.glob(f"{glob.escape(name)}.*.npz"))]
        _OPEN[name] = [kind(p) for p in paths if p.is_file()]
    return _OPEN[name]


class ShippedReplies:
    """The generator replies of one ``.json`` file, read on first use and verified against
    ``generate`` (a callable: messages, token budget, stop strings -> the model's reply)
    before any is given out."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._rows: dict[str, str] | None = None
        self.usable: bool | None = None        # None: not verified yet
        self.taken = 0                         # replies handed out (tests and reports)

    def _read(self) -> dict[str, str]:
        """The file's rows ({} when it cannot be read, refused with a warning), read once."""
        if self._rows is None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self._rows, self._probe = dict(data["rows"]), dict(data["probe"])
            except (OSError, ValueError, KeyError, TypeError) as err:
                self._rows = {}
                self._refuse(f"it cannot be read ({err}); restore it from the repository "
                             f"(git checkout -- data/replies) or rerun tools/ship_replies.py")
        return self._rows

    def verify(self, generate: Callable[[list, int, list], str]) -> bool:
        """Run the file's probe request through ``generate`` and keep the file only if the
        reply is the shipped one word for word (once per process and file)."""
        if self.usable is None and self._read():
            p = self._probe
            got = generate(p["messages"], p["max_new_tokens"], p["stop"])
            self.usable = got == p["reply"]
            if not self.usable:
                self._refuse(f"this model writes {got[:60]!r} for its probe, not "
                             f"{p['reply'][:60]!r}: the file was made with other weights or "
                             f"maths; rerun tools/ship_replies.py for yours")
        return bool(self.usable)

    def get(self, key: str, generate: Callable[[list, int, list], str]) -> str | None:
        """The shipped reply under ``key``, or None (not in the file, or the file fails). The
        probe runs only when the file has the key, so other prompts cost nothing."""
        if key not in self._read() or not self.verify(generate):
            return None
        self.taken += 1
        return self._rows[key]

    def _refuse(self, why: str) -> None:
        self.usable = False
        warnings.warn(f"the shipped replies {self.path.name} are not used, the model writes "
                      f"them instead: {why}", stacklevel=5)


_REPLIES: dict[str, ShippedReplies | None] = {}


def replies_file(identity: str) -> Path:
    """Where the shipped replies of the generator ``identity`` live."""
    return REPLIES / (re.sub(r"[^A-Za-z0-9.-]+", "_", identity) + ".json")


def replies_for(identity: str) -> ShippedReplies | None:
    """The shipped replies of the generator ``identity`` (its name and weights), or None."""
    if identity not in _REPLIES:
        path = replies_file(identity)
        _REPLIES[identity] = ShippedReplies(path) if path.is_file() else None
    return _REPLIES[identity]
