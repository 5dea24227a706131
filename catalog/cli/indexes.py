"""The ``index`` verb: record indexes for shards registered without one, and DALI's index files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import open_catalog, progress_bar, verb
from catalog.cli.options import AsJson, Version
from catalog.cli.output import Output, counted, human
from catalog.errors import UsageError

if TYPE_CHECKING:
    from catalog.ops.indexing import DaliReport, IndexReport


DALI = "Also write NVIDIA DALI's index file of each shard (one dataset) into DIR, as <shard file>.idx."


@verb
def index(
    names: Annotated[list[str] | None, typer.Argument(help="Datasets (default: all).")] = None,
    version: Version = None,
    dali: Annotated[Path | None, typer.Option("--dali", metavar="DIR", help=DALI)] = None,
    as_json: AsJson = False,
) -> Output:
    if dali is not None and (not names or len(names) != 1):
        raise UsageError("--dali needs exactly one dataset name")
    cat = open_catalog()
    with progress_bar("index", None) as progress:
        reports = cat.index(names or None, version, progress)
        written = cat.dataset(names[0]).dali_index(dali, version) if dali is not None and names else None

    def doc() -> dict[str, Any]:
        out: dict[str, Any] = {"datasets": [r.to_json() for r in reports]}
        if written is not None:
            out["dali"] = written.to_json()
        return out

    return Output(text=_index_text(reports, written), json=doc)


def _index_text(reports: list[IndexReport], dali: DaliReport | None) -> Iterator[str]:
    if not reports:
        yield "no datasets"
    for r in reports:
        rest = [f"{r.already} already indexed"]
        if r.rebuilt:
            rest.append(f"{counted(r.rebuilt, 'lost or damaged index file')} written again")
        if r.compressed:
            rest.append(f"{r.compressed} compressed (no random access, no index)")
        yield (
            f"{r.dataset} version {r.version}: indexed {counted(r.indexed, 'shard')} ({counted(r.records, 'record')}, "
            f"{human(r.index_bytes)} of index); " + ", ".join(rest)
        )
    if dali is not None:
        files = counted(len(dali.files), "DALI index file")
        yield f"wrote {files} ({counted(dali.records, 'record')}) to {dali.directory}"
