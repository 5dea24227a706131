"""Process identity (catalog/manifest/processes.py): a running process is alive, a finished
one dead, and what this machine cannot judge is never called dead."""

from __future__ import annotations

import os
import subprocess
import sys

from catalog.manifest.processes import abandoned, host_and_pid, process_identity, process_is_dead


def test_host_and_pid_are_this_process() -> None:
    host, pid = host_and_pid()
    assert (host, pid) == (os.uname().nodename, os.getpid())


def test_this_process_is_alive_and_a_finished_child_is_dead() -> None:
    me = process_identity()
    assert me is not None and me.count("/") == 3 and me.split("/")[2] == str(os.getpid())
    assert not process_is_dead(me)
    child = subprocess.run(
        [sys.executable, "-c", "from catalog.manifest.processes import process_identity; print(process_identity())"],
        capture_output=True,
        text=True,
        check=True,
    )
    theirs = child.stdout.strip()
    assert theirs.rsplit("/", 2)[0] == me.rsplit("/", 2)[0]  # the same machine and pid namespace
    assert process_is_dead(theirs)
    assert abandoned(theirs)


def test_a_pid_reused_by_a_later_process_counts_as_dead() -> None:
    me = process_identity()
    assert me is not None
    machine, pid, start = me.rsplit("/", 2)
    assert process_is_dead(f"{machine}/{pid}/{int(start) + 1}")


def test_what_this_machine_cannot_judge_is_never_dead() -> None:
    for process in (None, "", "garbage", "other-boot/pidns/1/100", "a/b/c/d/e"):
        assert not process_is_dead(process), process
    me = process_identity()
    assert me is not None
    machine = me.rsplit("/", 2)[0]
    assert not process_is_dead(f"{machine}/notapid/1")
    assert not abandoned(None)


def test_a_forked_child_has_its_own_identity() -> None:
    """The identity is read once a pid: a child forked after the parent asked has its own."""
    me = process_identity()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its identity down the pipe, then out without pytest's clean-up
        os.write(write, str(process_identity()).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        theirs = f.read()
    os.waitpid(pid, 0)
    assert theirs.split("/")[2] == str(pid) and theirs != me
    assert process_is_dead(theirs) and not process_is_dead(me)
