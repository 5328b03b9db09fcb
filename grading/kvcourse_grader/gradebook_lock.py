"""One writer at a time on a SQLite gradebook, so parallel autograding leaves it consistent.

nbgrader opens its gradebook for short sessions (``with Gradebook(url) as gb: ...``), one per step
of grading a notebook, and never while the student's code runs. SQLite allows one writer, and
two processes that both read and then write can fail with "database is locked" without waiting
(SQLite refuses to wait where waiting could deadlock). So, for a ``sqlite:///`` gradebook, every
session of every process of ours takes a file lock (``<gradebook>.lock``, with the well-kept
``filelock`` package) from the moment the gradebook is opened until it is closed: sessions of
parallel graders run one after the other, each in milliseconds, while the notebooks themselves
execute in parallel. A server database (PostgreSQL) handles concurrency itself and takes no lock.

:func:`serialize_sqlite_sessions` installs the lock in this process (``kvcourse-grade`` does, for
its own reads); ``python -m kvcourse_grader.gradebook_lock ARGS`` is ``nbgrader ARGS`` with it
installed, which is how :mod:`kvcourse_grader.runner` starts nbgrader.
"""

from __future__ import annotations

import threading
from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["LOCK_TIMEOUT", "lock_path", "main", "serialize_sqlite_sessions"]

#: Seconds a session waits for the lock before giving up with an error. A session takes
#: milliseconds; a process killed while holding the lock releases it (it is an flock).
LOCK_TIMEOUT = 300.0

_locks: dict[Path, FileLock] = {}
_guard = threading.Lock()
_installed = False


def lock_path(db_url: str) -> Path | None:
    """The lock file that serializes sessions on the gradebook ``db_url``; None for a server
    database (or an in-memory SQLite one), which needs no lock."""
    prefix = "sqlite:///"
    if not db_url.startswith(prefix):
        return None
    path = db_url[len(prefix) :].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path).resolve().with_name(Path(path).name + ".lock")


def _lock_for(path: Path) -> FileLock:
    # One FileLock per file and process: it is reentrant within a thread (a session opened
    # inside another takes it again) and excludes other threads and processes.
    with _guard:
        if path not in _locks:
            _locks[path] = FileLock(path, timeout=LOCK_TIMEOUT)
        return _locks[path]


def serialize_sqlite_sessions() -> None:
    """Make every nbgrader ``Gradebook`` session in this process hold the gradebook's lock file
    from opening to closing, when the gradebook is SQLite. Safe to call more than once."""
    global _installed
    from nbgrader.api import Gradebook

    if _installed:
        return
    original_init, original_close = Gradebook.__init__, Gradebook.close

    def __init__(self, db_url: str, *args, **kwargs) -> None:
        path = lock_path(db_url)
        lock = _lock_for(path) if path is not None else None
        if lock is not None:
            try:
                lock.acquire()
            except Timeout:
                raise RuntimeError(
                    f"the gradebook {path.with_suffix('')} stayed locked for {LOCK_TIMEOUT:g} s "
                    f"by another grader; if none is running, delete {path}"
                ) from None
        self._kvcourse_lock = lock
        try:
            original_init(self, db_url, *args, **kwargs)
        except BaseException:
            self._release_kvcourse_lock()
            raise

    def _release_kvcourse_lock(self) -> None:
        lock = self.__dict__.pop("_kvcourse_lock", None)
        if lock is not None:
            lock.release()

    def close(self) -> None:
        try:
            original_close(self)
        finally:
            self._release_kvcourse_lock()

    Gradebook.__init__ = __init__
    Gradebook._release_kvcourse_lock = _release_kvcourse_lock
    Gradebook.close = close
    _installed = True


def main() -> None:
    """``nbgrader`` with SQLite gradebook sessions serialized (the arguments are nbgrader's)."""
    serialize_sqlite_sessions()
    from nbgrader.apps.nbgraderapp import main as nbgrader_main

    nbgrader_main()


if __name__ == "__main__":
    main()
