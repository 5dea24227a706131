"""How a batch crosses from a DataLoader worker to the trainer's process: its tensors' bytes
packed into one buffer, unpacked there into views of it.

torch pickles every tensor on its own: it copies the tensor into a shared-memory segment of
its own, and the trainer fetches that segment's file descriptor over a socket from the
worker, one connection per tensor (0.3-0.5 ms each on a 2-core box, and a batch has a tensor
per feature, a variable-length feature one per row). Packed, a batch costs one buffer: up to
INLINE bytes it travels inside the pickle, through the DataLoader's pipe (cheaper than a
segment and a connection); above, in one shared-memory segment (one descriptor, no copies
through the pipe). The trainer receives what the worker yielded, as plain containers.

Only CPU tensors without autograd history are packed; anything else is pickled as it is.
Tensors under LARGE bytes are laid out first and view one copy of that part in the trainer:
a label or id column kept across an epoch must not keep every batch's images alive.
"""

from __future__ import annotations

from typing import Any

import numpy as np

INLINE = 256 << 10  # bytes: smaller buffers travel in the pickle, larger in one shared segment
LARGE = 64 << 10  # bytes: a tensor this large views the buffer; smaller ones share a copy of their part
ALIGN = 64  # each tensor's bytes start at a multiple of this (any dtype's alignment)
_CONTAINERS = (dict, list, tuple)


class Slot:
    """Where a packed tensor was in the structure: its bytes at ``offset`` in the buffer."""

    __slots__ = ("dtype", "offset", "shape")

    def __init__(self, dtype: Any, shape: tuple[int, ...], offset: int) -> None:
        self.dtype, self.shape, self.offset = dtype, shape, offset

    def __reduce__(self) -> tuple[Any, ...]:
        return (Slot, (self.dtype, self.shape, self.offset))


class Carried(dict[str, Any]):
    """A dict a worker yields: a dict to everything in the worker (DataLoader's conversion
    and collation copy it with ``copy.copy`` and keep the type), pickled as one buffer plus
    its structure, unpickled in the trainer as a plain dict whose tensors view that buffer."""

    def __reduce__(self) -> tuple[Any, ...]:
        try:
            return pack(dict(self))
        except Exception:  # pickled in the Queue's feeder thread, where an error is printed and
            # the batch dropped (the trainer would wait forever): let torch carry it its own way
            return (dict, (dict(self),))

    def __copy__(self) -> Carried:
        return Carried(self)


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
