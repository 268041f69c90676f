"""One question's pipeline work for ``ragbook serve``: ``Job`` runs it on its own thread,
under the server's lock (the models are not re-entrant: one question at a time), and stops
it when the request's deadline passes or its client goes away.

Why stopping needs more than a flag: the work can sit inside a call that yields nothing for
minutes — an LLM endpoint sending only keep-alive comments keeps a stream open for
``ragbook.streaming.STREAM_SECONDS`` — and while it does, it holds the lock, so every other
request would wait for that upstream, not for its own deadline. ``stop`` therefore raises
``Abandoned`` inside the worker thread (CPython's ``PyThreadState_SetAsyncExc``): it arrives
at the worker's next Python instruction (a keep-alive read is one; a read blocked in C ends
at the upstream's own per-read ``timeout``), unwinds the call — closing the upstream
connection on the way, as any exception would — and the lock is released. ``Abandoned`` is
a ``BaseException``, so no ``except Exception`` in a library swallows it."""
from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from collections.abc import Callable

__all__ = ["Abandoned", "Job"]

log = logging.getLogger("ragbook.serving")


class Abandoned(BaseException):
    """Raised inside a ``Job``'s thread when its request no longer waits for it."""


def _raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Make ``exc`` pending in thread ``thread_id`` (None: clear what is pending)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None)


class Job:
    """``work(job)`` on a daemon thread once ``lock`` is free, if it frees before ``until``
    (``time.monotonic()``); the work may add events to ``job.events`` as it goes.
    The last event is ``("done", value)`` with what ``work`` returned, ``("busy", None)``
    when the lock stayed taken or the job was stopped, or ``("failed", None)`` when ``work``
    raised (logged here with its traceback: the client is told nothing of it)."""

    def __init__(self, lock: threading.Lock, work: Callable, until: float):
        self.events: queue.Queue = queue.Queue()
        self._lock, self._work, self._until = lock, work, until
        self._state, self._inside, self._stopped = threading.Lock(), False, False
        self._thread = threading.Thread(target=self._run, daemon=True, name="ragbook-job")
        self._thread.start()

    @property
    def stopped(self) -> bool:
        """True once ``stop`` was called: work that checks it can end early on its own."""
        return self._stopped

    def stop(self) -> None:
        """Stop the work (see the module notes); nothing happens when it is already over."""
        with self._state:
            self._stopped = True
            if self._inside:
                _raise_in(self._thread.ident, Abandoned)

    def _run(self) -> None:
        try:
            if not self._lock.acquire(timeout=max(0.0, self._until - time.monotonic())):
                return self.events.put(("busy", None))
            try:
                with self._state:      # stop() raises only in here, so the lock is released
                    self._inside = not self._stopped
                if not self._inside:
                    return self.events.put(("busy", None))
                try:
                    value = self._work(self)
                finally:
                    with self._state:
                        self._inside = False
                        _raise_in(self._thread.ident, None)   # one stop() sent too late
            finally:
                self._lock.release()
        except Abandoned:
            log.warning("ragbook serve: a question was stopped at its deadline, or when its "
                        "client left; if this repeats, check the LLM endpoint")
            self.events.put(("busy", None))
        except Exception:  # noqa: BLE001 - logged for the operator; the client gets a 500
            log.exception("ragbook serve: the pipeline failed on a question")
            self.events.put(("failed", None))
        else:
            self.events.put(("done", value))
