"""Parquet inputs, through pyarrow (the optional extra ``parquet``): columns map to features by
name, read a batch of rows at a time so memory stays bounded whatever the file's size. Lists
become variable-length or shaped values, binary becomes bytes, and a null a missing value."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError
from catalog.inputs.files import InputOptions
from catalog.schema import Feature, Schema
from catalog.schema.inference import RowInference

BATCH = 8192  # rows per batch taken from a row group


def require_pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise AppendError("Parquet inputs need pyarrow: pip install 'tfrecord-catalog[parquet]' (or pyarrow)") from e
    return pq


class ParquetRows:
    """The rows of a Parquet file, as (row index, row); a null leaves its feature out."""

    unit = "row"

    def __init__(self, path: Path, schema: Schema | None) -> None:
        self.path, self.schema = path, schema  # schema None: inferring one, any columns
        self.names: list[str] = []  # the file's columns, once it is open

    def _fail(self, reason: str) -> AppendError:
        return AppendError(f"{self.path}: {reason}", str(self.path))

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for columns, rows in self.batches():
            names = list(columns)
            for i, values in enumerate(zip(*columns.values(), strict=True)):
                yield rows[i], {k: v for k, v in zip(names, values, strict=True) if v is not None}

    def batches(self) -> Iterator[tuple[dict[str, list[Any]], list[int]]]:
        """A record batch at a time, as columns (None for a null) with each row's index."""
        pq = require_pyarrow()
        import pyarrow as pa

        try:
            file = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as e:
            raise self._fail(f"not a Parquet file pyarrow can read: {e}") from e
        with file:
            self.names = list(file.schema_arrow.names)
            self._check_columns(self.names)
            index = 0
            try:
                for batch in file.iter_batches(batch_size=BATCH):
                    yield batch.to_pydict(), list(range(index, index + batch.num_rows))
                    index += batch.num_rows
            except (pa.ArrowException, OSError) as e:
                raise self._fail(f"row {index}: cannot read: {e}") from e

    def _check_columns(self, names: list[str]) -> None:
        if len(set(names)) != len(names):
            twice = next(n for i, n in enumerate(names) if n in names[:i])
            raise self._fail(f"column {twice!r} appears twice: rows would keep only one of them")
        if self.schema is None:
            return
        feats = self.schema.features
        for name in names:
            if name not in feats:
                raise self._fail(f"column {name!r} is not a feature of the schema")
        for name, feat in feats.items():
            if name not in names and not feat.may_be_absent:
                raise self._fail(f"no column {name!r}, and the feature has no default")


def parquet_rows(path: Path, schema: Schema, options: InputOptions, stream: IO[bytes] | None) -> ParquetRows:
    """The format table's reader (it opens the file itself)."""
    return ParquetRows(path, schema)


def infer_parquet(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference."""
    table = ParquetRows(path, None)
    for _, row in table:
        tally.add(row)
    tally.declare(table.names)  # a column of nulls only too
    return []
