"""Option types shared by the verbs, and the parsers of sizes and durations.

A bad value is a usage error (exit 2) raised by the parser, before any verb runs. Closed
sets of values are ``Literal`` types, or, where the library owns the set (input formats,
compressions), a ``LibraryChoice`` of its names: the parser refuses anything else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from typer._types import TyperChoice  # what typer makes of a Literal: the same help and messages
from typer.core import TyperCommand

BYTES_RE = re.compile(r"\s*(\d+)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)\s*", re.IGNORECASE)  # fullmatch
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
DURATION_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")  # fullmatch
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_bytes(text: str) -> int:
    """BYTES: an integer with an optional KiB/MiB/GiB suffix (bad input: usage error, exit 2)."""
    m = BYTES_RE.fullmatch(text)
    if not m or int(m.group(1)) == 0:
        raise typer.BadParameter(f"{text!r} is not a size: use an integer with an optional KiB, MiB or GiB suffix")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_duration(text: str | timedelta) -> timedelta:
    """DURATION: seconds, or N followed by s, m, h or d."""
    if isinstance(text, timedelta):  # typer hands the default through the parser too
        return text
    m = DURATION_RE.fullmatch(text)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a duration: use seconds or N[smhd], e.g. 90, 15m, 2h, 7d")
    try:
        return timedelta(seconds=float(m.group(1)) * _SECONDS[m.group(2)])
    except OverflowError:  # beyond timedelta's range (float("9" * 400) is even infinite)
        raise typer.BadParameter(f"{text!r} is too long a duration: at most {timedelta.max.days}d") from None


def parse_version(text: str) -> str:
    """--version: a version number or a tag (the library tells which, and whether it exists); a
    number below 1 is a usage error (exit 2), as it was when the option took numbers only."""
    value = text.strip()
    if re.fullmatch(r"[+-]?\d+", value):
        if int(value) < 1:
            raise typer.BadParameter(f"{text!r} is not a version: versions are numbered from 1")
        return str(int(value))
    return value


class LibraryChoice(TyperChoice[str]):
    """A closed set of names the library owns, case-insensitive, as a ``Literal`` option would
    take them. The names are read from the library when a value is checked or the verb's help
    shown, never when the CLI starts (``catalog --help`` imports no library module for them),
    and each time (a format added to the table is a choice at once)."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self._names = names
        super().__init__((), case_sensitive=False)

    @property  # typer's attribute, computed here
    def choices(self) -> Sequence[str]:
        return tuple(self._names())

    @choices.setter
    def choices(self, _value: Sequence[str]) -> None:
        pass  # TyperChoice.__init__ sets it: the names stay the library's


def _input_formats() -> tuple[str, ...]:
    from catalog.inputs.registry import format_names

    return format_names()


def compressions() -> tuple[str, ...]:
    from catalog.tfrecord.compression import COMPRESSIONS

    return COMPRESSIONS


# The ``--json`` flag: the command wrapper reads it by this parameter name (``as_json``).
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON.")]
DatasetName = Annotated[str, typer.Argument(help="Dataset name.")]
Version = Annotated[
    str | None,
    typer.Option("--version", parser=parse_version, metavar="N|TAG", help="Dataset version or tag (default: current)."),
]
Split = Annotated[
    str | None,
    typer.Option(
        "--split",
        metavar="SPEC",
        help="Only these records: a split, or a TFDS slice such as 'train[:90%]', 'test[-500:]', 'train[:10%]+test'.",
    ),
]
Defaults = Annotated[
    list[str] | None,
    typer.Option(
        "--default", metavar="FEATURE=VALUE", help="Inferred schema: FEATURE reads as VALUE where a record has none."
    ),
]
FillMissing = Annotated[
    bool, typer.Option("--fill-missing", help="Inferred schema: every optional feature defaults to its dtype's zero.")
]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")]
Force = Annotated[bool, typer.Option("--force", help="Replace a file already there (once the new one is complete).")]
# --format: "auto" and the names of the input format table (catalog.inputs.registry)
FormatOption = Annotated[str, typer.Option("--format", click_type=LibraryChoice(_input_formats), help="Input format.")]
Inputs = Annotated[
    list[str],  # (not Path: Path("") would be the working directory; the library refuses "")
    typer.Argument(
        help="TFRecord (any compression), JSON Lines, CSV/TSV, Parquet, .npy/.npz files, image folders "
        "(DIR/<class>/<file>), folders and globs of these, or - for JSON Lines or CSV on standard input."
    ),
]
Delimiter = Annotated[
    str | None,
    typer.Option("--delimiter", help="CSV cell separator (default: tab for .tsv, else from the header)."),
]
NpyFeature = Annotated[
    str | None, typer.Option("--feature", help="The feature a .npy file's rows fill (default: the only one).")
]
ImageShape = Annotated[
    str | None,
    typer.Option("--image-shape", metavar="H,W,C", help="Decode images into uint8 tensors of this shape (Pillow)."),
]


def compression_option(help: str) -> Any:
    """A ``--compression`` option: one of the names of catalog.tfrecord.compression."""
    return typer.Option("--compression", click_type=LibraryChoice(compressions), help=help)


MigrationsDir = Annotated[
    Path,
    typer.Option("--migrations", help="Folder with one sub-folder of migration scripts per dataset."),
]
Workers = Annotated[
    int | None, typer.Option("--workers", min=1, help="Parallel worker processes (default: the core count).")
]


def workers_option(what: str) -> Any:
    """A verb's own ``--workers`` option: how many of ``what`` it runs at once, one by default."""
    return typer.Option("--workers", min=1, help=f"{what} at once (default: 1).")


@dataclass(frozen=True)
class Jobs:
    """Where a verb's per-shard jobs run: its ``--workers``, ``--executor`` and ``--scheduler``
    (a verb of catalog.cli.generated.takes with ``jobs``; catalog.cli.base.running)."""

    workers: int | None = None
    executor: str = "local"
    scheduler: str | None = None


# Where per-shard jobs run (migrate, compact, verify, append): see catalog.executors.
ExecutorKind = Annotated[
    Literal["local", "dask"],
    typer.Option("--executor", case_sensitive=False, help="Run per-shard jobs in local processes or on Dask."),
]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (else $CATALOG_DASK_SCHEDULER; else a local cluster is started).",
    ),
]


class BareCheck(TyperCommand):
    """A command whose ``--check`` may stand alone, meaning ``--check=fail`` (click cannot give
    an option an optional value)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        cut = args.index("--") if "--" in args else len(args)
        fixed = ["--check=fail" if a == "--check" else a for a in args[:cut]] + args[cut:]
        return super().parse_args(ctx, fixed)


def parse_defaults(given: list[str] | None, flag: str = "--default") -> dict[str, str]:
    """``--default FEATURE=VALUE`` (or ``flag``'s) options as {feature: value text}."""
    out: dict[str, str] = {}
    for item in given or ():
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise typer.BadParameter(f"{item!r}: FEATURE=VALUE, e.g. price=-1", param_hint=flag)
        if name in out:  # which one was meant? the last quietly winning hides a typo
            raise typer.BadParameter(
                f"{name!r} is given twice ({out[name]!r} and {value!r}): give it once", param_hint=flag
            )
        out[name] = value
    return out
