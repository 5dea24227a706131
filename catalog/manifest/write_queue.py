"""SQLite's writers' queue: write transactions take their turn in ticket order (see below).
``transactions.write_txn`` enters it; nothing else does.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine

try:
    import fcntl
except ImportError:  # Windows: no writers' queue (see WRITE_QUEUE)
    fcntl = None  # type: ignore[assignment]

# SQLite's busy handler makes a waiting writer sleep and retry on a growing interval, so
# under load a writer that has just committed takes the lock again before waiters wake:
# 8 appenders saw p99 551 ms, max 1.96 s. Writers therefore queue first, in ticket order,
# on OFD byte-range locks of a file beside the database (Linux; elsewhere the busy handler
# alone, as before). The queue only orders writers: SQLite's lock still excludes them, so
# a writer that bypasses the queue (an older version, another OS, a nested transaction)
# costs fairness, never correctness. The kernel frees a dead process's locks.
WRITE_QUEUE = hasattr(fcntl, "F_OFD_SETLKW")
QUEUE_SUFFIX = ".lock"
_TICKET = struct.Struct("<Q")  # the next ticket, at offset 0, guarded by a lock on that range
_SLOTS_AT = 1 << 20  # ticket t's slot is the byte at _SLOTS_AT + t % _SLOTS
_SLOTS = 1 << 40
_queued = threading.local()  # this thread is in the queue: it never waits in one again (nesting)
_queue_fds: set[int] = set()  # open in this process; a forked child closes its copies, which would hold the slots


@contextmanager
def _write_queue(engine: Engine) -> Iterator[None]:
    """Wait for this process's turn to write to ``engine``'s SQLite file: take a ticket
    (lock my slot, bump the counter, under the counter's lock), then wait until the ticket
    before mine has let go of its slot. Mine is let go when the transaction ends."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not WRITE_QUEUE or not path or path == ":memory:" or getattr(_queued, "active", False):
        yield
        return
    _finish_interrupted_leave(path + QUEUE_SUFFIX)
    fd = _queue_turn(path + QUEUE_SUFFIX)
    _queued.active, _queued.fd = True, fd
    try:
        yield
    finally:
        _queued.active = False
        if fd is not None:
            _leave_queue(fd)  # the next ticket's holder goes
        _queued.fd = None


def _finish_interrupted_leave(lock_path: str) -> None:
    """Close the queue descriptor a Ctrl-C kept this thread from closing: it holds a slot the
    next writer waits on (the writer's own cleanup among them). Only if it still is that
    open lock file, never a descriptor number reused since."""
    fd = getattr(_queued, "fd", None)
    _queued.fd = None
    if fd is None or fd not in _queue_fds:
        return
    with contextlib.suppress(OSError):
        here, there = os.fstat(fd), os.stat(lock_path)
        if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            _leave_queue(fd)


def _queue_turn(lock_path: str) -> int | None:
    """A descriptor holding my slot once my turn has come; None when no queue can be had
    (a read-only directory, a file system without these locks): SQLite's busy handler then."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    _queue_fds.add(fd)
    try:
        _lock(fd, 0, _TICKET.size, wait=True)
        raw = os.pread(fd, _TICKET.size, 0)
        ticket = _TICKET.unpack(raw)[0] if len(raw) == _TICKET.size else 0
        _lock(fd, _SLOTS_AT + ticket % _SLOTS, 1, wait=False)
        os.pwrite(fd, _TICKET.pack(ticket + 1), 0)
        _lock(fd, 0, _TICKET.size, unlock=True)
        # The previous ticket's slot was locked before the counter passed it: once I get
        # it, that writer is done (or dead). I let it go at once; nobody else waits on it.
        before = _SLOTS_AT + (ticket - 1) % _SLOTS
        _lock(fd, before, 1, wait=True)
        _lock(fd, before, 1, unlock=True)
    except OSError:  # no such locks here, or a slot taken by a ticket reused: no queue
        _leave_queue(fd)
        return None
    except BaseException:  # Ctrl-C while waiting: leave the queue (the next in line goes on)
        _leave_queue(fd)
        raise
    return fd


def _leave_queue(fd: int) -> None:
    os.close(fd)  # the last descriptor of its open file: its locks go, my slot with them
    _queue_fds.discard(fd)  # after: an interrupted close is finished by _finish_interrupted_leave


def _forget_queue_in_child() -> None:
    for fd in list(_queue_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    _queue_fds.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_queue_in_child)


# struct flock: l_type, l_whence, l_start, l_len, l_pid (which must be 0 for OFD locks).
_FLOCK = struct.Struct("hhqqi4x")


def _lock(fd: int, start: int, length: int, wait: bool = False, unlock: bool = False) -> None:
    kind = fcntl.F_UNLCK if unlock else fcntl.F_WRLCK
    cmd = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
    fcntl.fcntl(fd, cmd, _FLOCK.pack(kind, os.SEEK_SET, start, length, 0))
