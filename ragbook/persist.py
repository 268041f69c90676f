"""Saving indexes: JSON that keeps tuples, and atomic, checksummed folders.

A save is written to a temporary folder, given a ``manifest.json`` (kind, format version,
counts and fingerprints, a SHA-256 per file) and renamed over the old one; ``read_manifest``
names the file that is missing or changed.

>>> loads(dumps({"path": ("Library", "os")}))
{'path': ('Library', 'os')}
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["FORMAT_VERSION", "CorruptIndexError", "dumps", "loads", "save_atomic",
           "read_manifest"]

FORMAT_VERSION = 3  # 3: corpus fingerprints cover metadata


class CorruptIndexError(ValueError):
    """A saved index does not match its manifest (a file changed, is missing or is truncated)."""


# -- JSON that keeps tuples -------------------------------------------------------------------
# A tuple is written as {"__tuple__": [...]}; a real dict whose only key is one of the tags
# is written as {"__dict__": [[key, value]]}, so no document's metadata can pose as a tag.
_TAGS = ({"__tuple__"}, {"__dict__"})


def _encode(o: Any) -> Any:
    if isinstance(o, tuple):
        return {"__tuple__": [_encode(v) for v in o]}
    if isinstance(o, list):
        return [_encode(v) for v in o]
    if isinstance(o, dict):
        if set(o) in _TAGS:
            return {"__dict__": [[k, _encode(v)] for k, v in o.items()]}
        return {k: _encode(v) for k, v in o.items()}
    return o


def _decode(o: dict) -> Any:
    if set(o) == {"__tuple__"}:
        return tuple(o["__tuple__"])
    if set(o) == {"__dict__"} and isinstance(o["__dict__"], list):
        return dict(o["__dict__"])
    return o


def dumps(obj: Any) -> str:
    """JSON in which tuples come back as tuples (metadata round-trips unchanged)."""
    return json.dumps(_encode(obj), ensure_ascii=False, allow_nan=False)


def loads(text: str) -> Any:
    """Read JSON written by ``dumps``: tuples come back as tuples."""
    return json.loads(text, object_hook=_decode)


# -- atomic, checksummed saves ------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_atomic(path: str | os.PathLike, kind: str, write, info: Mapping[str, Any]) -> Path:
    """Save a folder all-or-nothing: ``write(tmp)`` fills a temporary folder next to
    ``path``; a ``manifest.json`` (kind, format version, ``info`` such as counts and
    fingerprints, a SHA-256 per file) is added; then the folder replaces ``path`` by
    renames. A save that fails midway leaves the previous save untouched."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{str(path)!r} is a file; save an index to a folder path")
    if path.resolve() == Path.cwd().resolve() or path.resolve() in Path.cwd().resolve().parents:
        raise ValueError(f"cannot save into {str(path)!r}: it is the current folder or one "
                         f"above it, which the save would replace; give a new folder path")
    path = path.resolve() if not path.name else path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.saving-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        files = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = {"kind": kind, "format_version": FORMAT_VERSION, **info, "files": files}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not path.exists():
            os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return path


def read_manifest(path: str | os.PathLike, kind: str) -> dict:
    """Check a folder written by ``save_atomic`` and return its manifest; raise
    ``CorruptIndexError`` naming the file that is missing or changed."""
    path = Path(path)
    mf = path / "manifest.json"
    if not mf.exists():
        raise FileNotFoundError(f"no saved {kind} in {str(path)!r} (no manifest.json); save "
                                f"one with .save(path) first")
    try:
        manifest = json.loads(mf.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CorruptIndexError(f"{str(mf)!r} is not a readable manifest ({err}); the save is "
                                f"damaged: rebuild and save the index again") from None
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
    for name, digest in manifest["files"].items():
        f = path / name
        if not f.exists():
            raise CorruptIndexError(f"{str(f)!r} is missing; the save in {str(path)!r} is "
                                    f"incomplete: rebuild and save the index again")
        if _sha256(f) != digest:
            raise CorruptIndexError(f"{str(f)!r} does not match its checksum in manifest.json "
                                    f"(changed or truncated since it was saved); rebuild and "
                                    f"save the index again")
    return manifest
