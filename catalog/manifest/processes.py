"""Process identity: which process of which machine wrote a row (a write intent's writer,
a pending dataset's registrar), and whether it is known dead. No SQL: plain /proc and kill(0).
"""

from __future__ import annotations

import functools
import os


def host_and_pid() -> tuple[str, int]:
    return os.uname().nodename, os.getpid()


@functools.cache
def _machine() -> str | None:
    """What makes a pid mean one process: this boot of this kernel and this pid namespace.
    A host name alone does not (containers share one; a reboot reuses pids). None off Linux."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    """The start time (clock ticks since boot) of a running process; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name, in parentheses, may hold spaces
    return None if fields[0] in ("Z", "X") else fields[19]


def process_identity() -> str | None:
    """This process as this machine knows it: "<boot id>/<pid namespace>/<pid>/<start ticks>"."""
    return _identity(os.getpid())  # (a forked child asks for its own pid's)


@functools.lru_cache(maxsize=4)
def _identity(pid: int) -> str | None:
    """A pid's start never changes while it runs: read once, not at every write intent (a
    /proc read an append)."""
    machine = _machine()
    start = _start_ticks(pid)
    return None if machine is None or start is None else f"{machine}/{pid}/{start}"


def process_is_dead(process: str | None) -> bool:
    """True only when ``process`` names a process of this machine that no longer runs (a pid
    now used by a later process counts as dead). False when it runs, or when this machine
    cannot tell (another machine, no /proc, a pid hidden from us): the heartbeat decides then."""
    parts = (process or "").split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != _machine() or not parts[2].isdigit():
        return False
    pid, start = int(parts[2]), parts[3]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return False
    found = _start_ticks(pid)
    if found is None:  # a zombie, or /proc hides it (hidepid): dead only if we can see it is a zombie
        return os.path.exists(f"/proc/{pid}/stat")
    return found != start


def abandoned(pending: str | None) -> bool:
    """Whether a dataset registered for inputs (datasets.pending) lost its registering process
    before their commit: then it is no dataset."""
    return pending is not None and process_is_dead(pending)
