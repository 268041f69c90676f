"""The Milvus Lite servers this process started: one per folder, shared by the stores that
use it, stopped (and a temporary folder deleted) with the last; a folder another process has
open is detected before Milvus Lite fails with a bare message. Also the pymilvus import with
what to install, and silencing log lines we turn into clearer errors."""
from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil


class MilvusLockedError(RuntimeError):
    """A Milvus Lite folder is open in another process (one process per folder)."""


def _pymilvus():
    try:
        import pymilvus
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            'the Milvus backend needs pymilvus and milvus-lite: pip install "ragbook[milvus]" '
            '(or make setup)') from err
    return pymilvus


@contextlib.contextmanager
def _quiet(*loggers: str):
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


def _is_local(uri: str) -> bool:
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


def _release(folder: str) -> None:
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
