"""``ds.source()``: random access to a pinned version's records, by position.

A ``DataSource`` is what ``torch.utils.data.Dataset`` (map-style, any sampler, including
``DistributedSampler``) and grain's ``RandomAccessDataSource`` ask for: ``len(src)`` and
``src[i]``. It carries its read plan only, never a connection to the manifest, so it pickles
into DataLoader workers under fork, spawn and forkserver; each process opens the shards it
reads itself (see positions.py).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import UsageError
from catalog.readers.decoding import Decoder, check_columns
from catalog.readers.images import image_decoding
from catalog.readers.positions import RecordReader
from catalog.schema import batch_rows
from catalog.words import counted


class DataSource:
    """Random access to a read plan's records (see the module docstring).

    - ``src[i]``: the row at position ``i`` (negative counts from the end), as ``Schema.decode``;
    - ``src[[i, j, ...]]``, ``src[np.array]`` or ``src[a:b:c]``: a columnar batch of those rows,
      in that order, as ``Schema.decode_batch``;
    - ``src.records(indices)``: the raw serialized records (an int gives one ``bytes``).
    """

    def __init__(
        self,
        plan: ReadPlan,
        columns: str | Iterable[str] | None = None,
        decode_images: bool = False,
        channels: int | None = None,
    ) -> None:
        compressed = next((s for s in plan.shards if s.compression != "none"), None)
        if compressed is not None:
            raise UsageError(
                f"{compressed.path}: a {compressed.compression}-compressed shard cannot be read at an offset, so "
                f"dataset {plan.dataset!r} has no random access: read it with ds.torch() or ds.batches(), which "
                f"read compressed shards front to back, or store it uncompressed: `catalog compact {plan.dataset} "
                "--compression none`"
            )
        self.plan = plan
        self.columns = check_columns(plan.schema(), columns)
        image_decoding(plan.schema(), self.columns, decode_images, channels)  # checked now, not in a worker
        self.decode_images, self.channels = decode_images, channels
        self._reader = RecordReader(plan)
        self._decoder: Decoder | None = None

    def __repr__(self) -> str:
        split = f", split={self.plan.split!r}" if self.plan.split is not None else ""
        return f"DataSource({self.plan.dataset!r}, version={self.plan.version}{split}, records={len(self)})"

    def __len__(self) -> int:
        return len(self._reader)

    def __getstate__(self) -> dict[str, Any]:
        return {"plan": self.plan, "columns": self.columns, "images": (self.decode_images, self.channels)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.plan, self.columns = state["plan"], state["columns"]
        self.decode_images, self.channels = state.get("images", (False, None))
        self._reader = RecordReader(self.plan)
        self._decoder = None

    @property
    def decoder(self) -> Decoder:
        if self._decoder is None:  # the schema compiled once per process, not per pickle
            self._decoder = Decoder(self.plan, self.columns, self.decode_images, self.channels)
        return self._decoder

    def __getitem__(self, key: Any) -> Any:
        if _is_int(key):
            i = self._position(key)
            reader = self._reader
            return self.decoder.row(reader.read_one(i), lambda _j: reader.where_one(i))
        positions = self._positions(key)
        reader = self._reader
        return self.decoder.spans(reader.read_spans(positions, self.decoder.pad), reader.where_of(positions))

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """Rows at ``indices``, read together (what a DataLoader fetches for one batch from a
        map-style dataset): one sorted pass over the shards, then ``src[i]``'s rows, parsed
        as one columnar batch and split (a SequenceExample's rows one record at a time)."""
        positions = self._positions(list(indices))
        reader, decoder = self._reader, self.decoder
        where = reader.where_of(positions)
        if not decoder.schema.sequence:
            return batch_rows(decoder.spans(reader.read_spans(positions, decoder.pad), where), len(positions))
        return [decoder.row(r, where, i) for i, r in enumerate(reader.read(positions))]

    def records(self, indices: Any) -> Any:
        """The raw records at ``indices`` (a list of ``bytes``), or at one index (``bytes``)."""
        if _is_int(indices):
            return self._reader.read_one(self._position(indices))
        return self._reader.read(self._positions(indices))

    # ---- positions
    def _position(self, key: Any) -> int:
        n = len(self)
        i = operator.index(key)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for {counted(n, 'record')}")
        return i + n if i < 0 else i

    def _positions(self, key: Any) -> np.ndarray:
        n = len(self)
        if isinstance(key, slice):
            return np.arange(*key.indices(n), dtype=np.int64)
        arr = np.asarray(key)
        if arr.dtype == bool or (arr.size and arr.dtype.kind not in "iu") or arr.ndim != 1:
            raise TypeError(f"index a DataSource with an int, a slice or a 1-D sequence of ints, not {key!r:.80}")
        arr = arr.astype(np.int64)
        bad = (arr < -n) | (arr >= n)
        if bad.any():
            raise IndexError(f"index {int(arr[np.flatnonzero(bad)[0]])} out of range for {counted(n, 'record')}")
        return np.where(arr < 0, arr + n, arr)


def _is_int(key: Any) -> bool:
    return isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_))
