"""The Milvus Lite servers this process started: one per folder, shared by the stores that
use it (``open_lite``), stopped (and a temporary folder deleted) with the last (``release``);
a folder another process has open is detected before Milvus Lite fails with a bare message.
Also the pymilvus import with what to install, and silencing log lines we turn into clearer
errors."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

__all__ = ["MilvusLockedError", "import_pymilvus", "quiet", "is_local", "open_lite", "release"]


class MilvusLockedError(RuntimeError):
    """A Milvus Lite folder is open in another process (one process per folder)."""


def import_pymilvus():
    """The ``pymilvus`` module; ``ModuleNotFoundError`` with the pip command without it."""
    try:
        import pymilvus
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            'the Milvus backend needs pymilvus and milvus-lite: pip install "ragbook[milvus]" '
            '(or make setup)') from err
    return pymilvus


@contextlib.contextmanager
def quiet(*loggers: str):
    """Silence log lines we turn into a clearer exception (or that are noise, like Lite's
    missing iterator timestamp), for the duration of one call."""
    saved = [(lg, lg.level) for lg in map(logging.getLogger, loggers)]
    for lg, _ in saved:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


_OPEN: dict[str, int] = {}   # folder -> stores using it here
_SCRATCH: dict[str, str] = {}  # temporary folder -> the directory to delete with it
_LOCAL_GRPC = {"grpc.keepalive_time_ms": 2**31 - 1, "grpc.keepalive_permit_without_calls": 0}


def is_local(uri: str) -> bool:
    """``uri`` names a Milvus Lite folder, not a server (``http://``, ``tcp:``, ...)."""
    return not re.match(r"^(https?|tcp|unix):", uri)


def _locked_elsewhere(folder: str) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: no flock to probe with
        return False
    lock = os.path.join(folder, "LOCK")
    if not os.path.exists(lock):
        return False
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def open_lite(uri: str | None):
    """``(client, folder)``: a pymilvus ``MilvusClient`` on the Milvus Lite database ``uri``
    (a folder ending in ``.db``; None: a temporary one, deleted with its last store) and that
    folder's absolute path, which counts one more store using it until ``release(folder)``.
    Raises ``ModuleNotFoundError`` (with the pip command) without milvus-lite,
    ``MilvusLockedError`` when another process has the folder open."""
    pymilvus = import_pymilvus()
    scratch = None
    if uri is None:
        scratch = tempfile.mkdtemp(prefix="ragbook-milvus-")
        uri = os.path.join(scratch, "milvus.db")
    folder = os.path.abspath(uri)
    Path(folder).parent.mkdir(parents=True, exist_ok=True)
    try:
        import milvus_lite  # noqa: F401
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError('a local Milvus database needs milvus-lite: pip install '
                                  '"ragbook[milvus]"') from err
    try:
        with quiet("milvus_lite.server_manager"):
            # no keepalive pings to our own thread: Lite's server answers an idle client's
            # 10 s pings with GOAWAY "too_many_pings", logged by gRPC on stderr
            client = pymilvus.MilvusClient(folder, grpc_options=_LOCAL_GRPC)
    except Exception as err:
        if folder not in _OPEN and _locked_elsewhere(folder):
            raise MilvusLockedError(
                f"the Milvus Lite database {folder!r} is open in another process, and "
                f"Milvus Lite allows one process per database folder. Close the other "
                f"process (or its retriever: .close()), work on a copy of the folder, or "
                f"serve it once with `milvus-lite server --data-dir {folder}` and connect "
                f"every process to http://127.0.0.1:19530") from None
        raise RuntimeError(f"could not open Milvus Lite at {folder!r}: {err}") from err
    _OPEN[folder] = _OPEN.get(folder, 0) + 1
    if scratch:
        _SCRATCH[folder] = scratch
    return client, folder


def release(folder: str) -> None:
    """Stop this process's Milvus Lite server for ``folder`` when no store uses it (and delete
    the folder if it was a temporary one)."""
    _OPEN[folder] = _OPEN.get(folder, 1) - 1
    if _OPEN[folder] <= 0:
        _OPEN.pop(folder, None)
        try:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(folder)
        except ImportError:
            pass
        scratch = _SCRATCH.pop(folder, None)
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
