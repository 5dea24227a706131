"""Temporary files a process owns by a lock: readers leave an inflated copy of a compressed
shard in the temporary folder, DataLoader workers a shared-memory ring in /dev/shm.

The owner keeps an ``flock`` on the file for as long as it lives; the kernel drops the lock
when the process ends, killed or not. A finalizer removes the file at a normal exit; what a
killed process left (SIGKILL, the OOM killer) is removed by the next process that makes one,
when it can take the lock. A lock, not a process id: ids repeat across process-id namespaces
(containers sharing /tmp or /dev/shm), and a stray file of the same name must not make the
sweep guess. Without flock (Windows) nothing is swept.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

SETTLE = 10.0  # seconds: a file younger than this may be made but not locked yet

LOCKS = fcntl is not None


def claim(path: Path) -> int:
    """Make ``path`` and lock it for this process's life: its open file (unlocked without
    flock). Raises OSError when it exists."""
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, 0o600)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise
    return fd


def free(fd: int) -> bool:
    """Whether no other open file holds the lock of the file ``fd`` is open on (its owner
    ended); taking it, this open file holds it until closed."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def abandoned(path: Path) -> bool:
    """Whether ``path`` is a regular file, not a link, past the settling time, whose lock no
    process holds. Anything else (a link, a folder, not this user's to open) is not."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or time.time() - info.st_mtime < SETTLE:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # locked: its process lives
    finally:
        os.close(fd)
    return True
