"""`catalog cat`: records as JSON Lines, for programs (piped, --json: every byte, base64) and
for people (a terminal: long bytes and tensors folded to one line's worth)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import open_catalog, verb
from catalog.cli.options import AsJson, DatasetName, Split, Version
from catalog.cli.output import Output
from catalog.errors import FeatureNotFoundError

if TYPE_CHECKING:
    from catalog.schema import Schema


@verb
def cat(
    name: DatasetName,
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="At most N records.")] = None,
    version: Version = None,
    split: Split = None,
    names: Annotated[
        bool, typer.Option("--names", help='Print class labels as their names (features with "names").')
    ] = False,
    columns: Annotated[
        str | None, typer.Option("--columns", metavar="A,B", help="Only these features, in this order.")
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip the first N records.")] = 0,
    sample: Annotated[
        int | None, typer.Option("--sample", min=0, help="N records drawn at random (without replacement).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, help="Seed of --sample: the same seed, the same records.")] = 0,
    as_json: AsJson = False,
) -> Output:
    from catalog.commit.plans import plan
    from catalog.ops.indexing import ensure_indexes
    from catalog.readers.picking import rows_at

    ds = open_catalog().dataset(name)
    selected = plan(ds, version, split)  # one snapshot: the version, its schema, the slice (checked here)
    schema = selected.schema()
    wanted = _columns(schema, columns, name)
    chosen = _indices(selected.records, offset, limit, sample, seed)
    found = rows_at(ds, selected, wanted, chosen, offset, limit, ensure_indexes)
    fold = _line_width() if sys.stdout.isatty() and not as_json else None
    labeled = {n: f.names for n, f in schema.all_features.items() if f.names and names}
    return Output(records=(_shown(schema, row, labeled, fold) for row in found))


def _columns(schema: Schema, text: str | None, dataset: str) -> list[str] | None:
    if text is None:
        return None
    wanted = [c.strip() for c in text.split(",") if c.strip()]
    have = schema.all_features
    unknown = [c for c in wanted if c not in have]
    if unknown or not wanted:
        what = f"no feature {unknown[0]!r}" if unknown else "no feature named in --columns"
        raise FeatureNotFoundError(f"dataset {dataset!r} has {what} (features: {', '.join(have)})")
    return list(dict.fromkeys(wanted))


def _indices(total: int, offset: int, limit: int | None, sample: int | None, seed: int) -> list[int] | None:
    """The record numbers to print, in order; None: from ``offset`` on, read in order."""
    if sample is None:
        return None
    import numpy as np

    pool = max(0, total - offset)
    picked = np.random.default_rng(seed).choice(pool, size=min(sample, pool), replace=False) + offset
    chosen = sorted(int(i) for i in picked)
    return chosen if limit is None else chosen[:limit]


def _line_width() -> int:
    return shutil.get_terminal_size((120, 24)).columns


def _shown(
    schema: Schema, row: dict[str, Any], labeled: Mapping[str, tuple[str, ...]], fold: int | None
) -> dict[str, Any]:
    """One row as JSON: bytes base64, or, on a terminal (``fold``: its width), a value longer
    than a line as ``<bytes 1,717: 89504e47…>`` or ``<uint8[32,32,3]: 12, 40, …>``."""
    import numpy as np

    from catalog.schema import class_name, folded_value, row_to_json

    out = row_to_json(schema, row)
    feats = schema.all_features
    for feature in labeled:
        name = class_name(feats[feature], out.get(feature))
        if name is not None:
            out[feature] = name
    if fold is not None:
        for key, value in row.items():
            if isinstance(value, (bytes, np.ndarray)) and len(repr(out[key])) > fold:
                out[key] = folded_value(value)
    return out
