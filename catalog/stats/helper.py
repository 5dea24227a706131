"""A process that tallies statistics on the machine's other core while the writer writes.

The writer is one Python thread: framing, checksums and validation keep one core busy, and
the statistics (sketch updates a value at a time, decoding the records again for JSON Lines)
added a fifth to a third of an append's time on top (benchmarks/bench_stats.py). A tally
hands whole batches of records to this helper when it is ready and keeping up, and tallies
the others itself; the two parts' statistics merge (every field of them does). So the helper
only ever takes work off the writer: while it starts (imports take a few tenths of a
second), or when it falls behind, the writer goes on alone. An adoption hands it spans of a
local file instead (SPAN): it reads them itself, no bytes copied between the processes, and
checks their records against the schema as well as tallying them; a span it refuses, or a
helper lost with its answers, has the writer check the file itself.

Lifecycle, for trust: the helper is ``catalog.stats.serve`` run by this Python, in a
session of its own (a Ctrl-C at the terminal is the writer's to handle, not the helper's),
started at the first tally large enough to want it and kept for the process's later ones,
one tally at a time. It reads its work from a pipe and ends when the pipe closes: when the writer's process
ends however it ends (exit, Ctrl-C, SIGKILL), or at exit by atexit. A helper that dies, hangs
or fails loses nothing: the tally then computes the shard's statistics from the shard itself
(see Tally.result). Nothing of the catalog (manifest, files) is ever touched by it.

Messages, both ways: one byte of kind, eight of length (little-endian), the payload.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import select
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from catalog.tfrecord.framing import record_sizes

HEAD = struct.Struct("<cQ")
# writer -> helper: a new tally; records (the features they lack counted as filled); the tally's result
SCHEMA, BATCH, RESULT = b"S", b"B", b"R"
SAMPLE = b"Q"  # values for one feature's quantile sketch: name length (4 bytes), name, dtype (4), values
# A batch as the writer decoded it (its records' count, columns and ragged values, pickled): the
# helper tallies them without decoding the records again (the writer counted their fills)
COLUMNS = b"C"
# A span of a local file's records for the helper to read itself, check against the schema and tally
# (adopt): SPAN_HEAD, then the file's path (UTF-8); answered by SPAN_OK or REFUSED (see serve.span)
SPAN = b"W"
SPAN_HEAD = struct.Struct("<QQQI?")  # file offset, bytes, records, CRC32C of those bytes, guessed schema
READY, ACK, STATS, FAILED = b"H", b"A", b"T", b"E"  # helper -> writer
SPAN_OK, REFUSED = (
    b"O",
    b"N",
)  # helper -> writer: a span checked and tallied, or not (what it read, or the schema, refused it)
BACKLOG = 2  # batches sent and not yet tallied, at most: more are tallied by the writer
SPANS_AHEAD = 3  # spans sent and not yet answered, at most: the helper always has the next ones queued (2 starved it)
STALL = 20.0  # seconds without a word from a helper that owes one: it is lost


class Lost(Exception):
    """The helper ended, failed or stalled: its part of a tally is gone."""


# --------------------------------------------------------------------------- the writer's side


_PACKAGE = Path(__file__).resolve().parents[1]  # the catalog package the helper must import
# The helper's start: this catalog, not another one in its working directory (sys.path[0] of
# ``-c``) or elsewhere, else it ends at once (and the writer tallies alone).
_BOOT = """
import sys
root, package = {root!r}, {package!r}
sys.path[0:1] = [] if root in sys.path[1:] else [root]
import catalog, os.path
if os.path.dirname(os.path.realpath(catalog.__file__)) != package:
    sys.exit(3)
from catalog.stats.serve import main
main()
"""


def _can_start() -> bool:
    """Whether ``sys.executable`` is a Python to start the helper with (not a frozen app or an
    embedding server, which would start themselves again), and this process may run on more
    than one core: on one (``taskset -c 0``, a container of one CPU) the helper would only add
    its copy and decoding of every batch to that core's work."""
    name = os.path.basename(sys.executable or "").lower()
    python = os.name == "posix" and not getattr(sys, "frozen", False) and name.startswith("python")
    return python and _cores() > 1


def _cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (macOS has no affinity)
        return os.cpu_count() or 1


class Helper:
    """The writer's end of one helper process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(root=str(_PACKAGE.parent), package=str(_PACKAGE))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in, self._out = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(self._out, False)
        self._poll = select.poll()  # (not select.select: it refuses descriptors past 1023)
        self._poll.register(self._out, select.POLLIN)
        self._got = bytearray()
        self.ready = False
        self.lost = False
        self.backlog = 0  # batches sent, not acknowledged
        self.spans = 0  # spans sent, not answered
        self.refused = False  # a span came back refused
        self.asked = False  # the tally's result was asked for (ask_result)
        self._reply: bytes | None = None  # its result, come (taken by result)
        self._queue: queue.SimpleQueue[list[bytes] | None] = queue.SimpleQueue()
        self._sender: threading.Thread | None = None

    # ---- sending: on a thread, since a pipe takes a batch only as fast as the helper reads it
    def open(self, schema_json: bytes) -> None:
        """Start a tally of records of this schema (the previous one's result was taken)."""
        self.spans, self.refused, self.asked, self._reply = 0, False, False, None
        self._sender = threading.Thread(target=self._send_all, name="catalog-statistics-sender", daemon=True)
        self._sender.start()
        self._queue.put([HEAD.pack(SCHEMA, len(schema_json)), schema_json])

    def _send_all(self) -> None:
        while (parts := self._queue.get()) is not None:
            try:
                for part in parts:
                    _write_all(self._in, part)
            except OSError:  # the helper ended: what is queued goes nowhere
                self.lost = True

    def offer(self, records: Sequence[bytes]) -> bool:
        """Send a batch of records if the helper is up and keeping up;
        False: tally them here."""
        if not self._has_room():
            return False
        lengths = record_sizes(records).astype("<u8")
        self._put(BATCH, struct.pack("<Q", len(records)), lengths.tobytes(), b"".join(records))
        return True

    def offer_columns(self, payload: Callable[[], bytes]) -> bool:
        """Send a batch's decoded columns (``COLUMNS``: ``payload()``, pickled by the tally, made
        only then) if the helper keeps up."""
        if not self._has_room():
            return False
        self._put(COLUMNS, payload())
        return True

    def offer_sample(self, name: str, values: np.ndarray) -> bool:
        """Send ``values`` for feature ``name``'s quantile sketch if the helper keeps up."""
        if not self._has_room():
            return False
        key = name.encode("utf-8", "surrogatepass")
        head = struct.pack("<I", len(key)) + key + values.dtype.str.encode("ascii").ljust(4)
        self._put(SAMPLE, head, np.ascontiguousarray(values).tobytes())
        return True

    def offer_span(self, path: str, offset: int, size: int, records: int, crc: int, guessed: bool) -> bool:
        """Send a span of ``path`` (``size`` bytes at ``offset``, ``records`` whole records, of
        CRC32C ``crc`` as the writer read them) to be read, checked and tallied by the helper, if
        it is up and has fewer than SPANS_AHEAD to answer; False: the writer does it."""
        self._take_replies(wait=False)
        if self.lost or not self.ready or self.spans >= SPANS_AHEAD:
            return False
        name = os.fsencode(path)
        self._queue.put(
            [HEAD.pack(SPAN, SPAN_HEAD.size + len(name)), SPAN_HEAD.pack(offset, size, records, crc, guessed), name]
        )
        self.spans += 1
        return True

    def spans_held(self) -> bool:
        """Wait for every span's answer: whether each was checked and tallied (False: one was
        refused, or the helper was lost with its answers; the writer then checks the file itself)."""
        deadline = time.monotonic() + STALL
        while self.spans and not self.lost:
            self._take_replies(wait=True)  # (a result asked for early comes after every span's answer)
            if time.monotonic() > deadline:
                self.lost = True
        return not self.lost and not self.refused

    def _has_room(self) -> bool:
        """Whether the helper is up and has fewer than BACKLOG messages to acknowledge."""
        self._take_replies(wait=False)
        return not self.lost and self.ready and self.backlog < BACKLOG

    def _put(self, kind: bytes, *parts: bytes) -> None:
        """Queue one message for the sender; the helper acknowledges it once it is done."""
        self._queue.put([HEAD.pack(kind, sum(map(len, parts))), *parts])
        self.backlog += 1

    def ask_result(self) -> None:
        """Ask for the tally's statistics now (``result`` takes them): the helper works them out
        while the writer goes on. Nothing more may be sent for this tally."""
        if not self.asked:
            self._queue.put([HEAD.pack(RESULT, 0)])
            self.asked = True

    def result(self) -> bytes:
        """The tally's statistics (DatasetStats bytes) of the batches it was sent; Lost if none."""
        self.ask_result()
        self.end_sending()
        deadline = time.monotonic() + STALL
        while True:
            reply, self._reply = self._reply, None
            if reply is not None:
                return reply
            if self.lost or time.monotonic() > deadline:
                raise Lost()
            self._take_replies(wait=True)

    def end_sending(self) -> None:
        """Let the sender send what is queued and end (a helper that stalls it is lost); with
        no result asked for, the helper then waits for its next tally."""
        self._queue.put(None)
        if self._sender is not None:
            self._sender.join(STALL)
            if self._sender.is_alive():
                self.lost = True
            self._sender = None

    # ---- receiving: without a thread, what has come is read when the tally asks
    def _take_replies(self, wait: bool) -> bytes | None:
        """Read what the helper said; the payload of a STATS reply, if one came."""
        if self.lost:
            return None
        try:
            if wait and not self._poll.poll(1000):
                return None
            while chunk := os.read(self._out, 1 << 16):
                self._got += chunk
            self.lost = True  # end of the pipe: the helper is gone
        except BlockingIOError:
            pass
        except OSError:
            self.lost = True
        return self._parse()

    def _parse(self) -> bytes | None:
        while len(self._got) >= HEAD.size:
            kind, size = HEAD.unpack_from(self._got)
            if len(self._got) < HEAD.size + size:
                break
            payload = bytes(self._got[HEAD.size : HEAD.size + size])
            del self._got[: HEAD.size + size]
            if kind == READY:
                self.ready = True
            elif kind == ACK:
                self.backlog -= 1
            elif kind in (SPAN_OK, REFUSED):
                self.spans -= 1
                self.refused = self.refused or kind == REFUSED
            elif kind == STATS:
                self._reply = payload
                return payload
            else:  # FAILED, or a helper speaking nonsense
                self.lost = True
        return None

    def close(self) -> None:
        """End the helper at once (it holds nothing worth a wait), and this end's threads."""
        self.lost = True
        self.proc.kill()
        self.proc.wait()
        if self._sender is not None:  # blocked on the pipe: the kill broke it
            self._queue.put(None)
            self._sender.join()
            self._sender = None
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# --------------------------------------------------------------------------- one a process


class _Slot:
    """The process's helper: lent to one tally at a time, started on first need."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.helper: Helper | None = None
        self.busy = False
        self.failures = 0  # helpers lost: after a few, this process tallies alone
        # False: this process tallies alone (CATALOG_STATS_HELPER=0, or a pool's worker)
        self.enabled = os.environ.get("CATALOG_STATS_HELPER", "1") != "0"

    def running(self) -> bool:
        """Whether a helper is up, ready and free (lending it costs no start)."""
        helper = self.helper
        return self.enabled and not self.busy and helper is not None and helper.ready and not helper.lost

    def borrow(self) -> Helper | None:
        with self.lock:
            if self.busy or self.failures >= 3 or not self.enabled or not _can_start():
                return None
            if self.helper is None or self.helper.lost:
                self.helper = self._start()
                if self.helper is None:
                    return None
            self.busy = True
            return self.helper

    def _start(self) -> Helper | None:
        try:
            return Helper()
        except (OSError, ValueError, subprocess.SubprocessError):
            self.failures += 1
            return None

    def give_back(self, helper: Helper, failed: bool = True) -> None:
        """``helper`` is free again; one ``lost`` is ended (and counted, if it ``failed``)."""
        with self.lock:
            self.busy = False
            if helper.lost:
                self.failures += int(failed)
                helper.close()
                if self.helper is helper:
                    self.helper = None

    def drop(self, helper: Helper) -> None:
        """A tally that will not finish (its shard abandoned): its helper ended, not waited for."""
        helper.lost = True
        self.give_back(helper, failed=False)

    def forget(self) -> None:
        """In a forked child: the parent's helper is the parent's (its threads did not come).
        The child closes its copies of the pipes: the helper sees its input end when the
        parent's ends, not when the last of its forked children (DataLoader workers) does."""
        self.lock = threading.Lock()
        if self.helper is not None:
            for f in (self.helper.proc.stdin, self.helper.proc.stdout):
                with contextlib.suppress(OSError):
                    if f is not None:
                        f.close()
        self.helper, self.busy = None, False

    def shutdown(self) -> None:
        with self.lock:  # (a helper lent to a tally is ended too: the process is ending)
            if self.helper is not None:
                self.helper.close()
                self.helper = None


SLOT = _Slot()
os.register_at_fork(after_in_child=SLOT.forget)
atexit.register(SLOT.shutdown)
