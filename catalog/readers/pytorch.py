"""``ds.torch()``: a ``torch.utils.data.IterableDataset`` over a pinned version.

- Partition: ranks from ``rank=``/``world_size=``, else from ``torch.distributed`` when it is
  initialized (looked up when the dataset is made, when it is pickled for spawned workers,
  and when it is iterated in the main process), else one rank; DataLoader workers from
  ``get_worker_info()``. Every record once per epoch across ranks and workers, padded or cut
  exactly as ``DistributedSampler`` does (see order.py).
- Order: dataset order, or (``shuffle=True``) a permutation that depends on (seed, epoch)
  alone, whatever the world size and worker count; ``set_epoch(e)`` as with
  ``DistributedSampler``.
- Resumption: ``load_state_dict({"epoch": e, "samples": k})`` (k: samples consumed globally,
  steps x global batch size) before iterating: the job gets exactly what follows sample k of
  epoch e's order, on any world size. ``set_epoch`` to another epoch starts it from its
  beginning. ``state_dict()`` counts what this process's own iteration delivered (exact with
  ``num_workers=0``); with DataLoader workers the records are taken in other processes, so
  give ``samples`` from the trainer's step count. A state also names its read (dataset,
  version, split, shuffle, seed, columns, records: READ_KEYS), and a reader refuses a state
  whose read is not its own (one line naming the field): resumed into another order, an
  epoch would repeat some records and never deliver others. A key the state leaves out is
  not checked; world size, workers, batch size and drop_last may change.
- Output: a dict of tensors per feature: numeric columns as tensors (a batch's scalars 1-D,
  fixed shapes as (batch, *shape)); variable-length numbers and tensors of unknown
  dimensions as a list of tensors; text and bytes as lists of ``str``/``bytes``; an absent
  optional value as None. With ``batch_size`` the dataset yields batches (use
  ``DataLoader(ds, batch_size=None)``) and ``transform`` is applied to each batch; without,
  it yields rows (0-d tensors for scalars) and ``transform`` is applied to each row.
- Transfer: in a DataLoader worker, each item that is a plain dict is yielded as a
  ``carry.Carried`` (still a dict), which crosses to the trainer as one buffer (see carry.py).

torch is imported when a dataset is made, never by ``import catalog``.
"""

from __future__ import annotations

import functools
import multiprocessing
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from multiprocessing.context import get_spawning_popen
from typing import Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import DependencyError, ReaderStateError, UsageError
from catalog.readers.batches import check_batch_size, decoded
from catalog.readers.carry import carried
from catalog.readers.decoding import Decoder, check_columns
from catalog.readers.images import image_decoding
from catalog.readers.order import EpochOrder, check_ranks, check_samples, output_count
from catalog.readers.positions import RecordReader
from catalog.words import counted

STATE_KEYS = ("epoch", "samples")  # a state's position: required
READ_KEYS = ("dataset", "version", "split", "shuffle", "seed", "columns", "records")  # checked when present


class TorchReader:
    """The reading half of the dataset ``ds.torch()`` returns (see the module docstring); the
    class users get also derives from ``torch.utils.data.IterableDataset``."""

    def __init__(
        self,
        plan: ReadPlan,
        batch_size: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        columns: str | Iterable[str] | None = None,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        decode_images: bool = False,
        channels: int | None = None,
    ) -> None:
        check_batch_size(batch_size, optional=True)
        if (rank is None) != (world_size is None):
            raise UsageError("give both rank= and world_size=, or neither (torch.distributed's are used then)")
        if rank is not None and world_size is not None:
            check_ranks(rank, world_size)
        self.plan = plan
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.columns = check_columns(plan.schema(), columns)
        image_decoding(plan.schema(), self.columns, decode_images, channels)  # checked now, not in a worker
        self.decode_images, self.channels = decode_images, channels  # decoded where the rows are: in the workers
        self.drop_last = bool(drop_last)
        self.transform = transform
        self.epoch = 0
        self.samples = 0  # where this epoch starts: samples consumed globally before (a resumption)
        self._given = None if rank is None or world_size is None else (rank, world_size)
        self._distributed = _from_distributed()
        self._taken = 0  # items this process's iteration delivered since the epoch (re)started
        # (epoch, samples) shared with DataLoader workers: persistent workers keep the copy
        # of the dataset they started with, and must still read the epoch set_epoch set since.
        self._shared = multiprocessing.RawArray("q", 2)
        self._publish()
        self._reader = RecordReader(plan)
        self._decoder: Decoder | None = None

    def __repr__(self) -> str:
        return (
            f"<catalog torch dataset {self.plan.dataset!r} version {self.plan.version}, "
            f"{counted(self.plan.records, 'record')}, "
            f"batch_size={self.batch_size}, shuffle={self.shuffle}, epoch {self.epoch}>"
        )

    # ---- pickling: the plan and settings, nothing of this process
    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_reader", "_decoder")}
        if get_spawning_popen() is None:  # a copy (a checkpoint, say), not a worker being started
            state["_shared"] = None
        if self._given is None:  # pickled for spawned workers: they have no process group
            state["_distributed"] = _from_distributed() or self._distributed
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reader = RecordReader(self.plan)
        self._decoder = None
        if self._shared is None:
            self._shared = multiprocessing.RawArray("q", 2)
            self._publish()

    def _publish(self) -> None:
        """Share (epoch, samples) with the workers (the seed is fixed when the dataset is made)."""
        self._shared[:] = [self.epoch, self.samples]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.__getstate__(),))

    # ---- epochs and resumption
    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` next: from its start, unless it is the epoch a loaded state
        resumes (as with DistributedSampler, call it before each epoch's iteration)."""
        if int(epoch) != self.epoch:
            self.epoch, self.samples, self._taken = int(epoch), 0, 0
            self._publish()

    def state_dict(self) -> dict[str, Any]:
        """Where this read is (epoch, samples consumed globally) and what identifies the read
        (see :meth:`load_state_dict`); plain values, so it pickles and survives JSON."""
        _rank, world = self.ranks()
        consumed = min(self.samples + self._taken * world, self.plan.records)
        return {"epoch": self.epoch, "samples": consumed, **self._identity(), "world_size": world}

    def _identity(self) -> dict[str, Any]:
        """What identifies this reader's read: a state of another is refused (READ_KEYS)."""
        columns = None if self.columns is None else list(self.columns)
        return {
            "dataset": self.plan.dataset,
            "version": self.plan.version,
            "split": self.plan.split,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "columns": columns,
            "records": self.plan.records,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at ``state["samples"]`` of epoch ``state["epoch"]``. A state of another read
        is refused (ReaderStateError, naming the field): each of READ_KEYS the state has must
        be this reader's (make the reader with the dataset, version, split, shuffle, seed and
        columns the state was saved with). A key the state leaves out is not checked: a
        checkpoint written by hand as ``{"epoch": e, "samples": k}`` is trusted. World size,
        rank, workers, batch size and drop_last may differ: resuming on another world size is
        the point of ``samples``."""
        epoch, samples = check_state(state, self._identity())
        self.epoch, self.samples, self._taken = epoch, samples, 0
        self._publish()

    # ---- the partition
    def ranks(self) -> tuple[int, int]:
        """(rank, world size) this dataset reads for."""
        if self._given is not None:
            return self._given
        found = _from_distributed()
        if found is not None:
            self._distributed = found
        return self._distributed or (0, 1)

    def order(self, worker: bool = False) -> EpochOrder:
        """This rank's epoch; in a DataLoader ``worker``, as the main process set it last."""
        rank, world = self.ranks()
        epoch, samples = self._shared[:] if worker else (self.epoch, self.samples)
        return EpochOrder(self.plan.records, self.shuffle, self.seed, epoch, samples, rank, world, self.drop_last)

    def __len__(self) -> int:
        """Items (batches with ``batch_size``, else rows) this rank yields this epoch."""
        return output_count(self.order().per_rank, self.batch_size)

    # ---- reading
    @property
    def decoder(self) -> Decoder:
        if self._decoder is None:
            self._decoder = Decoder(self.plan, self.columns, self.decode_images, self.channels)
        return self._decoder

    def __iter__(self) -> Iterator[Any]:
        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        main = info is None  # only here is what is yielded what the trainer takes
        if main:
            self._taken = 0
        order = self.order(worker=not main)
        carry = carried if not main else _same  # a worker's items cross to the trainer packed
        for batch in decoded(self._reader, self.decoder, order, self.batch_size, worker, workers):
            tensors = to_tensors(batch)
            if self.batch_size is not None:
                if main:
                    self._taken += len(next(iter(batch.values())))
                yield carry(tensors if self.transform is None else self.transform(tensors))
                continue
            for row in _rows(tensors, len(next(iter(batch.values())))):
                if main:
                    self._taken += 1
                yield carry(row if self.transform is None else self.transform(row))


def check_state(state: Any, read: dict[str, Any]) -> tuple[int, int]:
    """(epoch, samples) of ``state``, after checking it is a state of ``read`` (see
    TorchReader.load_state_dict); else ReaderStateError, in one line naming the field."""
    if not isinstance(state, Mapping):
        raise ReaderStateError(f"a reader state is a dict (state_dict()'s), not {type(state).__name__}")
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise ReaderStateError(f"a reader state needs {', '.join(missing)} (it has {', '.join(map(str, state))})")
    for key in READ_KEYS:
        if key in state and not _same_setting(key, state[key], read[key]):
            raise _another_read(key, state[key], read)
    epoch = state["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
        raise ReaderStateError(f"a reader state's epoch must be a whole number, not {epoch!r}")
    samples = check_samples(state["samples"], read["records"], "a reader state's samples", ReaderStateError)
    return int(epoch), samples


def _another_read(key: str, saved: Any, read: dict[str, Any]) -> ReaderStateError:
    """The one line that names the field in which a state's read and this reader's differ."""
    if key == "records":
        return ReaderStateError(
            f"this state is of another read: records {saved!r} in the state; this reader reads {read[key]} "
            f"(dataset {read['dataset']!r} version {read['version']}, split {read['split']!r})"
        )
    return ReaderStateError(
        f"this state is of another read: {key} {saved!r} in the state, {read[key]!r} in this reader"
    )


def _same_setting(key: str, saved: Any, mine: Any) -> bool:
    """Whether a state's ``key`` is this reader's: columns as any sequence of names (a JSON
    checkpoint has lists), the rest as equal values of the same kind (True is not 1)."""
    if key == "columns" and isinstance(saved, (list, tuple)):
        return mine is not None and list(saved) == mine
    if isinstance(saved, bool) or isinstance(mine, bool):
        return saved is mine
    return bool(saved == mine)


def _same(value: Any) -> Any:
    return value


def _rows(tensors: dict[str, Any], n: int) -> Iterator[dict[str, Any]]:
    for i in range(n):
        yield {name: column[i] for name, column in tensors.items()}


def to_tensors(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """A decoded columnar batch as torch values (see the module docstring)."""
    return {name: _tensor(column) if column.dtype != object else _values(column) for name, column in batch.items()}


def _tensor(array: np.ndarray) -> Any:
    import torch

    return torch.from_numpy(array if array.flags.writeable else array.copy())


def _values(column: np.ndarray) -> list[Any]:
    """An object column as a list: arrays (variable-length values, tensors of unknown dimensions)
    as tensors; text, bytes, lists of texts and None (an absent optional value) as they are."""
    values = column.tolist()  # an object array's items, themselves
    if not any(isinstance(v, np.ndarray) for v in values):
        return values
    return [_tensor(v) if isinstance(v, np.ndarray) and v.dtype != object else v for v in values]


def require_torch() -> None:
    """Fail in one line when PyTorch is not installed."""
    try:
        import torch.utils.data  # noqa: F401
    except ImportError as e:
        raise DependencyError(f"ds.torch() needs PyTorch ({e}): pip install 'tfrecord-catalog[torch]'") from e


def _from_distributed() -> tuple[int, int] | None:
    """(rank, world size) of torch.distributed's default group, when one is initialized."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


@functools.cache
def dataset_class() -> type:
    """TorchReader as a ``torch.utils.data.IterableDataset`` (made on first use: torch is an
    optional extra, imported only then)."""
    import torch.utils.data

    return type("TorchDataset", (TorchReader, torch.utils.data.IterableDataset), {"__module__": __name__})


def torch_dataset(plan: ReadPlan, **options: Any) -> Any:
    """The dataset ``ds.torch()`` returns (options: TorchReader's)."""
    return dataset_class()(plan, **options)


def _restore(state: dict[str, Any]) -> Any:
    """Unpickle a dataset (in a spawned worker: the class is made again there)."""
    cls: Any = dataset_class()
    obj = cls.__new__(cls)
    obj.__setstate__(state)
    return obj
