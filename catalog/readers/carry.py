"""How a batch crosses from a DataLoader worker to the trainer's process: its tensors' bytes
packed into one buffer, unpacked there into views of it.

torch pickles every tensor on its own: it copies the tensor into a shared-memory segment of
its own, and the trainer fetches that segment's file descriptor over a socket from the
worker, one connection per tensor (0.3-0.5 ms each on a 2-core box, and a batch has a tensor
per feature, a variable-length feature one per row). Packed, a batch costs one buffer: up to
INLINE bytes it travels inside the pickle, through the DataLoader's pipe (cheaper than a
segment and a connection); above, through shared memory: a slot of the worker's ring
(below), else one segment of its own. The trainer receives what the worker yielded, as
plain containers.

Only CPU tensors without autograd history are packed; anything else is pickled as it is.
Tensors under LARGE bytes are laid out first and view one copy of that part in the trainer:
a label or id column kept across an epoch must not keep every batch's images alive.

A segment a batch costs its making, its pages' first touch and a connection to pass its
descriptor: about 1 ms, more than a worker takes to read 256 small images. So each worker
keeps a ring of SLOTS reused slots in one shared-memory file (``/dev/shm``, Linux), made at
its first large batch: a batch is copied into a free slot, the pickle names the ring and
the slot, and the trainer copies the batch out of the slot and frees it as it unpickles.
Nothing waits: with no free slot (a trainer that fell behind, a large prefetch_factor), a
batch larger than a slot, or no ring to be had (no /dev/shm, or a ring would take more than
an eighth of its free space), a batch takes a segment of its own as before. The trainer
removes a ring's file as soon as it has mapped it (both processes keep it open), and its map
once the worker's lock on it is free (the worker ended); a worker removes its own at its
exit, and a ring whose worker was killed before the trainer took it goes with the next ring
any process makes (owned.py). Only multiprocessing's pickler (the DataLoader's queue) puts
a batch in a slot: any other pickle of it holds its bytes.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import secrets
import threading
from multiprocessing.reduction import ForkingPickler
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Any

import numpy as np

from catalog.errors import ExecutorError
from catalog.readers import owned

INLINE = 256 << 10  # bytes: smaller buffers travel in the pickle, larger in one shared segment
LARGE = 64 << 10  # bytes: a tensor this large views the buffer; smaller ones share a copy of their part
ALIGN = 64  # each tensor's bytes start at a multiple of this (any dtype's alignment)
_CONTAINERS = (dict, list, tuple)
SHM = Path("/dev/shm")  # where rings are made; no ring without it
RING = "catalog-ring-"  # a ring file's name: this, then a random token
SLOTS = 4  # per ring: DataLoader keeps up to prefetch_factor (2 by default) batches a worker in flight
RING_MAX = 16 << 20  # bytes: a larger batch takes a segment of its own (the copy outweighs its cost)
SHM_SHARE = 8  # a ring takes at most this share of SHM's free space: the rest for segments (Docker's is 64 MB)
HEAD = 64  # bytes before the slots: a state byte per slot
FREE, TAKEN = 0, 1


class Slot:
    """Where a packed tensor was in the structure: its bytes at ``offset`` in the buffer."""

    __slots__ = ("dtype", "offset", "shape")

    def __init__(self, dtype: Any, shape: tuple[int, ...], offset: int) -> None:
        self.dtype, self.shape, self.offset = dtype, shape, offset

    def __reduce__(self) -> tuple[Any, ...]:
        return (Slot, (self.dtype, self.shape, self.offset))


class Carried(dict[str, Any]):
    """A dict a worker yields: a dict to everything in the worker (DataLoader's conversion
    and collation copy it with ``copy.copy`` and keep the type). multiprocessing's pickler
    (the DataLoader's queue) packs it as one buffer plus its structure, unpickled in the
    trainer as a plain dict whose tensors view that buffer; any other pickling (``torch.save``,
    a cache) takes the plain dict, bytes and all: a ring slot is claimed once and freed by the
    one unpickling that queue does, and must never be named by a pickle kept or loaded twice."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def __copy__(self) -> Carried:
        return Carried(self)


def _reduce_carried(value: Carried) -> tuple[Any, ...]:
    try:
        return pack(dict(value))
    except Exception:  # pickled in the Queue's feeder thread, where an error is printed and
        # the batch dropped (the trainer would wait forever): let torch carry it its own way
        return (dict, (dict(value),))


ForkingPickler.register(Carried, _reduce_carried)


def carried(value: Any) -> Any:
    """``value`` to yield from a DataLoader worker: a plain dict packed for the trip; anything
    else as it is (torch carries it its own way)."""
    return Carried(value) if type(value) is dict else value


def pack(value: Any) -> tuple[Any, ...]:
    """``(unpack, (buffer, structure, small))`` for pickle: ``value`` with each packable tensor
    replaced by a Slot into ``buffer``, the small tensors first (``small``: where they end)."""
    import torch

    packer = _Packer(torch)
    structure = packer.walk(value)
    small, total = packer.layout()
    if total > INLINE and (placed := _WORKER.place(packer, total)) is not None:
        return (unpack_slot, (*placed, total, structure, small))
    if total > INLINE:  # one segment; torch's reducer passes its descriptor
        whole = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(total))
    else:
        whole = torch.empty(total, dtype=torch.uint8)
    for t, slot in packer.tensors:
        _view(whole, slot).copy_(t)  # into a view of its own type and shape: any strides, any dtype
    return (unpack, (whole if total > INLINE else whole.numpy(), structure, small))


def unpack(buffer: Any, structure: Any, small: int) -> Any:
    """The carried value: ``structure`` with each Slot a tensor viewing ``buffer``; the small
    tensors view a copy of their part when large ones follow, so that keeping a label column
    (or ids) does not keep a batch's images alive."""
    import torch

    whole = torch.from_numpy(buffer) if isinstance(buffer, np.ndarray) else buffer
    return _filled(structure, whole, whole[:small].clone() if small < len(whole) else whole)


def unpack_slot(name: str, slot: int, total: int, structure: Any, small: int) -> Any:
    """The carried value from ``slot`` of the ring ``name``: copied out, the slot freed."""
    ring = _attach(name)
    buffer = ring.data[slot, :total].copy()
    ring.state[slot] = FREE
    return unpack(buffer, structure, small)


class _Ring:
    """A worker's shared-memory slots, in one locked file of ``/dev/shm``."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.name = RING + secrets.token_hex(8)
        path = SHM / self.name
        fd = owned.claim(path)
        try:
            # Reserved now, so that a full /dev/shm is an OSError here and not a SIGBUS later
            os.posix_fallocate(fd, 0, HEAD + SLOTS * slot)
            mapped = mmap.mmap(fd, HEAD + SLOTS * slot)
        except (OSError, ValueError):
            os.close(fd)
            path.unlink(missing_ok=True)
            raise
        self.state, self.data = _views(mapped, slot)
        Finalize(self, _remove_ring, args=(path, fd, os.getpid()), exitpriority=0)

    def take(self) -> int | None:
        free = np.flatnonzero(self.state == FREE)
        return int(free[0]) if len(free) else None


class _WorkerRings:
    """This process's ring, made at its first batch too large to travel inline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # batches are pickled in the Queue's feeder thread; one at a time
        self.ring: _Ring | None = None
        self.failed = False

    def place(self, packer: _Packer, total: int) -> tuple[str, int] | None:
        """Copy the packed tensors into a free slot: (ring name, slot), or None to go another way."""
        import torch

        with self.lock:
            ring = self._ring(total)
            slot = ring.take() if ring is not None and total <= ring.slot else None
            if ring is None or slot is None:
                return None
            whole = torch.from_numpy(ring.data[slot])
            for t, where in packer.tensors:
                _view(whole, where).copy_(t)
            ring.state[slot] = TAKEN  # after the bytes: the trainer frees it once it has them
            return ring.name, slot

    def _ring(self, total: int) -> _Ring | None:
        if self.ring is None and not self.failed and total <= RING_MAX:
            self.failed = True  # one try a process
            if owned.LOCKS and SHM.is_dir():
                _sweep_rings()
                slot = min(max(total * 3 // 2, 1 << 20), RING_MAX) + 4095 & ~4095
                with contextlib.suppress(OSError):  # no ring: segments as before
                    if HEAD + SLOTS * slot <= _free_shm() // SHM_SHARE:
                        self.ring = _Ring(slot)
        return self.ring


_WORKER = _WorkerRings()
_attaching = threading.Lock()


def _after_fork() -> None:
    """A forked child starts with no ring (its parent's is not its own) and a lock of its own:
    one another thread held at the fork (the Queue's feeder thread packing a batch) would be
    held forever."""
    global _WORKER, _attaching
    _WORKER, _attaching = _WorkerRings(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class _Attached:
    """The trainer's map of a worker's ring, and its open file (to see its worker's lock)."""

    __slots__ = ("data", "fd", "state")

    def __init__(self, fd: int, mapped: mmap.mmap, slot: int) -> None:
        self.fd = fd
        self.state, self.data = _views(mapped, slot)


_attached: dict[str, _Attached] = {}  # the trainer's rings, by name


def _attach(name: str) -> _Attached:
    """The trainer's view of a worker's ring, mapped at first sight."""
    with _attaching:  # two loaders iterated in two threads share the maps
        ring = _attached.get(name)
        return ring if ring is not None else _attach_new(name)


def _attach_new(name: str) -> _Attached:
    """Map a worker's ring and remove its name: from now on the worker and this process hold
    it open, and nothing is left in /dev/shm however the worker ends (SIGTERM at the
    interpreter's exit for persistent workers, SIGKILL). Rings whose workers ended go first."""
    for old in [n for n, ring in _attached.items() if owned.free(ring.fd)]:
        os.close(_attached.pop(old).fd)
    path = SHM / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        lost = f"a DataLoader worker's batch is lost: its shared memory {path} is gone"
        raise ExecutorError(f"{lost} ({e.strerror})") from e
    try:
        size = os.fstat(fd).st_size
        ring = _Attached(fd, mmap.mmap(fd, size), (size - HEAD) // SLOTS)
    except (OSError, ValueError):
        os.close(fd)
        raise
    with contextlib.suppress(OSError):
        path.unlink()
    _attached[name] = ring
    return ring


def _views(mapped: mmap.mmap, slot: int) -> tuple[np.ndarray, np.ndarray]:
    slots = np.frombuffer(mapped, np.uint8, SLOTS * slot, HEAD).reshape(SLOTS, slot)
    return np.frombuffer(mapped, np.uint8, SLOTS), slots


def _free_shm() -> int:
    """Bytes free in SHM for this user."""
    info = os.statvfs(SHM)
    return info.f_bavail * info.f_frsize


def _sweep_rings() -> None:
    """Remove the rings of workers killed before their trainer took them (no finalizer ran);
    one this user may not remove (another's, in the sticky /dev/shm) is left alone."""
    with contextlib.suppress(OSError):
        for path in SHM.glob(f"{RING}*"):
            if owned.abandoned(path):
                with contextlib.suppress(OSError):
                    path.unlink()


def _remove_ring(path: Path, fd: int, pid: int) -> None:
    if os.getpid() == pid:  # a forked child inherits the finalizer, not the ring
        path.unlink(missing_ok=True)
        os.close(fd)


class _Packer:
    """Walks a value (dicts, lists and tuples, exactly those types), replacing each packable
    tensor by its Slot and laying the tensors out one after another."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.tensors: list[tuple[Any, Slot]] = []

    def walk(self, value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return {k: self.walk(v) for k, v in value.items()}
        if kind is list or kind is tuple:
            if not _holds(value, self.torch.Tensor):  # a column of texts: no walk in Python
                return value
            return kind(self.walk(v) for v in value)
        if isinstance(value, self.torch.Tensor) and self._packable(value):
            slot = Slot(value.dtype, tuple(value.shape), -1)
            self.tensors.append((value, slot))
            return slot
        return value

    def layout(self) -> tuple[int, int]:
        """Place the tensors, small ones first; (where the small ones end, bytes in all)."""
        sized = [(t.numel() * t.element_size(), slot) for t, slot in self.tensors]
        at = small = 0
        for size, slot in sorted(sized, key=lambda pair: pair[0] >= LARGE):  # stable: small first, in order
            slot.offset = at
            at += -(-size // ALIGN) * ALIGN
            small = at if size < LARGE else small
        return small, at

    def _packable(self, t: Any) -> bool:
        """Plain CPU tensors whose bytes are their values (no subclass, autograd, lazy conjugate
        or negation, quantization): the others travel as torch carries them."""
        return bool(
            type(t) is self.torch.Tensor
            and t.device.type == "cpu"
            and t.layout == self.torch.strided
            and not (t.requires_grad or t.is_quantized or t.is_conj() or t.is_neg())
        )


def _holds(items: list[Any] | tuple[Any, ...], kind: type) -> bool:
    """Whether ``items`` hold a container or a ``kind`` (tensors, slots): one pass in C."""
    return any(k in _CONTAINERS or issubclass(k, kind) for k in set(map(type, items)))


def _filled(structure: Any, whole: Any, small: Any) -> Any:
    """``structure`` with each Slot its tensor: a view of ``small`` (the small tensors' part)
    or of ``whole``."""
    kind = type(structure)
    if kind is dict:
        return {k: _filled(v, whole, small) for k, v in structure.items()}
    if kind is list or kind is tuple:
        if not _holds(structure, Slot):
            return structure
        return kind(_filled(v, whole, small) for v in structure)
    if kind is Slot:
        return _view(small if structure.offset < len(small) else whole, structure)
    return structure


def _view(whole: Any, slot: Slot) -> Any:
    """The tensor ``slot`` describes, viewing its bytes in ``whole``."""
    size = int(np.prod(slot.shape, dtype=np.int64)) * slot.dtype.itemsize
    return whole[slot.offset : slot.offset + size].view(slot.dtype).view(slot.shape)
