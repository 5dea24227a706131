"""Files written outside the data area (export, backup) before they get their final name.

A partial file is ".catalog-partial-<machine>-<pid>-<process start>-<final name>.tmp". The
next export or backup into the directory removes those whose process is gone (a SIGKILL's),
and a finished one takes a name that must still be free: a file someone created there
meanwhile is never replaced. With ``--force`` (``force=True``) a finished one replaces the
file there in one rename: until then that file is untouched, so a failed, interrupted or
killed write leaves it as it was.

A spill directory (:func:`spill_dir`: work files too large for memory, dedup's hash
partitions) is named the same way and removed when its block ends, or, after a SIGKILL, by
the next one made beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from catalog.errors import StorageError
from catalog.storage.fileio import fsync_dir

PARTIAL_PREFIX = ".catalog-partial-"
_PARTIAL_RE = re.compile(re.escape(PARTIAL_PREFIX) + r"([0-9a-f]{8})-([0-9]+)-([0-9]+)-.*")


def _machine_tag() -> str:
    """This machine since its last boot: a pid means nothing on another host, or after a reboot."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return hashlib.sha256(f"{os.uname().nodename}/{boot}".encode()).hexdigest()[:8]


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), None when there is no such process.
    With the pid it names one process: a pid is reused, a (pid, start) pair is not."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[19])  # field 22; the name in (...) may hold spaces


def _own_prefix() -> str:
    pid = os.getpid()
    return f"{PARTIAL_PREFIX}{_machine_tag()}-{pid}-{_process_start(pid) or 0}-"


def partial_path(target: Path) -> Path:
    """Where to write ``target`` before publishing it (see PARTIAL_PREFIX)."""
    return target.with_name(f"{_own_prefix()}{target.name}.tmp")


@contextlib.contextmanager
def spill_dir(parent: Path, what: str) -> Iterator[Path]:
    """A new directory of this process's own in ``parent`` (made if need be) for work files
    too large for memory, removed with its files when the block ends; those left by processes
    of this machine that are gone are removed first."""
    try:
        parent.mkdir(parents=True, exist_ok=True)
        clear_dead_partials(parent)
        path = Path(tempfile.mkdtemp(prefix=f"{_own_prefix()}{what}-", dir=parent))
    except OSError as e:
        raise StorageError(f"{parent}: cannot make a spill directory: {e.strerror or e}") from e
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def clear_dead_partials(directory: Path) -> None:
    """Remove partial files in ``directory`` left by processes of this machine that are gone."""
    tag = _machine_tag()
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            m = _PARTIAL_RE.fullmatch(entry.name)
            if m and m[1] == tag and _process_start(int(m[2])) != int(m[3]):
                if entry.is_dir(follow_symlinks=False):  # a spill directory
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def check_target(target: Path, force: bool, catalog_root: Path, own: tuple[str, ...]) -> None:
    """Before writing ``target``: a file there is replaced only with ``force``, and never one
    of the catalog's own (under ``own``: its directory, its local data area), which would
    lose a shard or the manifest. A symbolic link there is replaced itself, never followed."""
    if not os.path.lexists(target):
        return
    if not force:
        raise StorageError(f"{target}: already exists; use --force to replace it")
    if target.is_dir() and not target.is_symlink():
        raise StorageError(f"{target}: a directory; --force replaces only a file")
    where = Path(os.path.realpath(target.parent), target.name)  # the entry a rename replaces
    if any(where.is_relative_to(os.path.realpath(r)) for r in own):
        raise StorageError(f"{target}: a file of the catalog at {catalog_root}; --force replaces only files outside it")


def publish_written(temp: Path, target: Path, force: bool) -> None:
    """Give the written, fsynced file ``temp`` the name ``target``: a free name
    (:func:`publish_new`), or with ``force`` over whatever is there, in one rename."""
    if not force:
        publish_new(temp, target)
        return
    try:
        os.replace(temp, target)
    except OSError as e:
        raise StorageError(f"{target}: cannot replace: {e.strerror or e}") from e
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(target.parent)


def publish_new(temp: Path, target: Path) -> None:
    """Give the written, fsynced file ``temp`` the name ``target``, which must still be free:
    a file someone created there meanwhile is never replaced (a hard link cannot replace)."""
    try:
        os.link(temp, target)
    except FileExistsError as e:
        raise StorageError(f"{target}: created by someone else meanwhile; left as it is, nothing written") from e
    except OSError as e:
        raise StorageError(f"{target}: cannot create: {e.strerror}") from e
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(target.parent)
