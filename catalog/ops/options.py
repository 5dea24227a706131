"""The options of the verbs that commit, one type per verb family, built once where a call
comes in (a `Dataset` method, the CLI) and handed down whole: a writer, an adoption and the
commit read their options here rather than from a long list of parameters restated at each
layer.

A new option of a verb is written once: a field here, made with :func:`option`, which says
its default and how the CLI offers it (:class:`Flag`: its flag, help and finer points). The
CLI's flags of the verbs that take it are generated from it (``catalog.cli.generated``), and
``tests/cli/test_generated_options.py`` fails until the API methods of the verb take it as a
keyword of the same name, type and default.

Stdlib only (and catalog.keywords): the CLI reads these fields to parse a verb's arguments and show its help, which
must not load the library (the manifest, NumPy). What follows from the options (the shard
sizes a writer uses, its drift check) is the writer's (catalog/ops/writer.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from catalog.keywords import Unpack, check_keywords

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from catalog.commit.values import Progress

__all__ = ["Unpack", "check_keywords"]  # re-exported for the methods that take the keyword sets below

# catalog.manifest.DEFAULT_SPLIT, not imported: the manifest is SQLAlchemy, which a verb's
# --help does not load (tests/cli/test_generated_options.py holds them equal).
DEFAULT_SPLIT = "train"
Opts = TypeVar("Opts", bound="CommitOptions")


@dataclass(frozen=True)
class Flag:
    """How the CLI offers an option: its flag ``names`` (the long one first), ``help``, and
    typer's finer points (``metavar``, ``min``, ``max``); ``parser``: "bytes" (a size with an
    optional KiB, MiB or GiB suffix); ``choices``: a closed set of values; ``library``:
    "compression", the names of catalog.tfrecord.compression."""

    names: tuple[str, ...]
    help: str
    metavar: str | None = None
    min: float | None = None
    max: float | None = None
    parser: str | None = None
    choices: tuple[str, ...] = ()
    library: str | None = None


def option(default: Any, *names: str, help: str, **how: Any) -> Any:
    """A field with its default and its CLI flag (see :class:`Flag`)."""
    return field(default=default, metadata={"flag": Flag(names, help, **how)})


def flag_of(options: type[CommitOptions], name: str) -> Flag:
    """The CLI flag of ``options``' field ``name``."""
    for f in fields(options):
        if f.name == name:
            flag = f.metadata.get("flag")
            if isinstance(flag, Flag):
                return flag
            raise TypeError(f"{options.__name__}.{name} has no flag")
    raise TypeError(f"{options.__name__} has no field {name!r}")


# The flags several types share, each said once.
TOKEN = "Idempotency token: a retry is a no-op."
AUTHOR = "Commit author (default: user name)."


class JobKeywords(TypedDict, total=False):
    """Where a verb's per-shard jobs run and what they report: ``workers`` (processes on this
    machine, None: one per core), an ``executor`` of your own (Dask's, say), and ``progress``
    (called with the input bytes each job processed). Each None by default.

    These keyword sets are taken as ``**kw: Unpack[...]`` (PEP 692) by the methods of the
    verbs, so that a keyword is declared once; the options type of the verb gives the
    defaults of its fields (:meth:`CommitOptions.taking`)."""

    workers: int | None
    executor: Executor | None
    progress: Progress | None


class RunKeywords(JobKeywords, total=False):
    """A verb's that runs jobs and commits what they made: the jobs', the commit's ``message``
    and ``author`` (see :class:`CommitOptions`)."""

    message: str
    author: str | None


class VerbKeywords(RunKeywords, total=False):
    """:class:`RunKeywords` and ``token`` (a retry with it answers with the first commit)."""

    token: str | None


class AdoptKeywords(TypedDict, total=False):
    """An adoption's keywords (``Catalog.adopt``, ``Dataset.adopt``): :class:`AdoptOptions`'
    fields, ``progress`` and an ``executor`` reading each file in a job."""

    split: str | None
    copy: bool
    link: bool
    allow_duplicate: bool
    token: str | None
    message: str
    author: str | None
    progress: Progress | None
    executor: Executor | None


JOB_KEYWORDS = tuple(JobKeywords.__annotations__)


def jobs_of(given: Mapping[str, Any]) -> JobKeywords:
    """The job keywords among ``given`` (a method's ``**`` keywords)."""
    return {k: given[k] for k in JOB_KEYWORDS if k in given}  # type: ignore[return-value]


@dataclass(frozen=True)
class CommitOptions:
    """What every verb that commits takes: ``token`` (a retry with it answers with the first
    commit), ``message``, ``author`` (default: the user and host)."""

    token: str | None = option(None, "--token", help=TOKEN)
    message: str = option("", "--message", "-m", help="Commit message.")
    author: str | None = option(None, "--author", help=AUTHOR)

    @classmethod
    def taking(cls: type[Opts], given: Mapping[str, Any], **fixed: Any) -> Opts:
        """The options whose fields ``given`` (a call's parameters: ``locals()``) names, and
        ``fixed`` (fields a method sets itself); fields neither names keep their default."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in given.items() if k in names}, **fixed)


@dataclass(frozen=True)
class WriteOptions(CommitOptions):
    """An append's (rows, files, a writer, an adoption): the ``split`` its shards go to, how
    large they grow (None: the defaults), whether an input whose shards have the bytes of live
    ones goes in (``allow_duplicate``), and the drift check before the commit (``check``:
    "fail" or "warn", ``max_linf``; see catalog.ops.writer.drift)."""

    split: str = option(DEFAULT_SPLIT, "--split", metavar="SPLIT", help="Register the new shards under this split.")
    shard_size: int | None = option(
        None, "--shard-size", parser="bytes", metavar="BYTES", help="Roll shards at this size."
    )
    shard_records: int | None = option(None, "--shard-records", min=1, help="Roll shards at N records.")
    allow_duplicate: bool = True  # (no flag: append's is AppendOptions')
    check: str | None = option(
        None,
        "--check",
        metavar="[=fail|warn]",
        choices=("fail", "warn"),
        help="Compare the new data's statistics with the dataset's before committing (the schema's checks, "
        "--max-linf, else an L-infinity limit of 0.1 on every feature); print what was compared; refuse "
        "(fail, also --check alone) or commit and warn.",
    )
    max_linf: float | None = option(
        None,
        "--max-linf",
        min=0.0,
        max=1.0,
        help="L-infinity limit for every feature without its own (implies --check).",
    )


@dataclass(frozen=True)
class AppendOptions(WriteOptions):
    """``append_files``'s (``catalog append``): an input already in the dataset is refused
    unless ``allow_duplicate``; ``link``: hard link valid uncompressed TFRecord inputs."""

    allow_duplicate: bool = option(
        False, "--allow-duplicate", help="Append an input even when its bytes are in the dataset already."
    )
    link: bool = option(False, "--link", help="Adopt valid uncompressed TFRecord files by hard link.")


@dataclass(frozen=True)
class AdoptOptions(CommitOptions):
    """An adoption's: the ``split`` (None: train, or a TFDS directory's own splits), ``copy``
    or ``link`` the files into the data area instead of registering them where they are, and
    whether an input already in the dataset goes in again (``allow_duplicate``)."""

    split: str | None = option(
        None, "--split", metavar="SPLIT", help="Register them under this split (default: train)."
    )
    copy: bool = option(False, "--copy", help="Copy them into the data area instead.")
    link: bool = option(False, "--link", help="Hard link them into the data area instead.")
    allow_duplicate: bool = option(
        False, "--allow-duplicate", help="Adopt a file even when its bytes are in the dataset already."
    )

    def writing(self, split: str) -> WriteOptions:
        """The options of the append that registers the adopted shards of ``split``."""
        return WriteOptions(self.token, self.message, self.author, split, allow_duplicate=self.allow_duplicate)


@dataclass(frozen=True)
class RegisterOptions(CommitOptions):
    """A registration's (``register``, ``register_inferred``): ``token`` (a retry of a
    registration that committed answers with it), and with inputs, their ``split``."""

    token: str | None = option(None, "--token", help="Idempotency token: a retried registration is a no-op.")
    split: str = option(DEFAULT_SPLIT, "--split", metavar="SPLIT", help="With --infer: the inputs' split.")


@dataclass(frozen=True)
class RewriteOptions(CommitOptions):
    """A rewrite's (``migrate``, ``compact``): ``compression``, how the rewritten shards, and
    the dataset's new ones from then on, are stored (None: as the dataset's are)."""

    compression: str | None = option(
        None, "--compression", library="compression", help="Store the rewritten shards, and new ones, so."
    )


@dataclass(frozen=True)
class MigrateOptions(RewriteOptions):
    """``migrate``'s."""


@dataclass(frozen=True)
class CompactOptions(RewriteOptions):
    """``compact``'s: the ``split`` to compact (None: each split)."""

    split: str | None = option(None, "--split", metavar="SPLIT", help="Compact this split only (default: each split).")


@dataclass(frozen=True)
class RestoreOptions(CommitOptions):
    """``restore``'s: a commit's options only."""


@dataclass(frozen=True)
class RowChangeOptions(CommitOptions):
    """A row change's (``delete``, ``update``): the ``split`` whose rows it changes (None: every split)."""

    split: str | None = option(
        None, "--split", metavar="SPLIT", help="Change this split's rows only (default: every split)."
    )


@dataclass(frozen=True)
class DeleteOptions(RowChangeOptions):
    """``delete``'s: ``purge`` erases the rows from every version that holds them (their old
    files replaced and deleted), and from the datasets derived from it unless ``skip_derived``;
    ``rewrite_adopted`` lets it stop reading files the catalog does not own (adopted or linked)
    that hold some, rewriting their other rows into the data area."""

    purge: bool = option(
        False,
        "--purge",
        help="Erase the rows from every version that holds them: after it no file in the data area has their bytes.",
    )
    rewrite_adopted: bool = option(
        False,
        "--rewrite-adopted",
        help="With --purge: rewrite adopted or linked files holding matches into the data area (the files stay).",
    )
    skip_derived: bool = option(
        False,
        "--skip-derived",
        help="With --purge: erase from this dataset only, not from the datasets derived from it (filter, map).",
    )


@dataclass(frozen=True)
class UpdateOptions(RowChangeOptions):
    """``update``'s."""


@dataclass(frozen=True)
class DeriveOptions(CommitOptions):
    """A derivation's (``filter``, ``map``): the source's ``split`` it reads (None: every
    split); ``token``: a retry with it answers with the derived dataset's first commit."""

    split: str | None = option(None, "--split", metavar="SPLIT", help="Read this split only (default: every split).")


@dataclass(frozen=True)
class FilterOptions(DeriveOptions):
    """``filter``'s."""


@dataclass(frozen=True)
class MapOptions(DeriveOptions):
    """``map``'s: ``batched``, the function takes a batch of columns and returns one."""

    batched: bool = option(
        False, "--batched", help="The function takes a batch of columns (a dict of arrays) and returns one."
    )


@dataclass(frozen=True)
class RefreshOptions(CommitOptions):
    """``refresh``'s: a commit's options."""


@dataclass(frozen=True)
class DedupOptions(RowChangeOptions):
    """``dedup``'s: the ``split`` whose rows it looks at (None: every split), and ``per_split``:
    a row duplicates only rows of its own split (default: the first of a key across splits)."""

    split: str | None = option(
        None, "--split", metavar="SPLIT", help="Dedup this split's rows only (default: every split)."
    )
    per_split: bool = option(
        False, "--per-split", help="Keep the first row of each key in each split (default: the first across splits)."
    )
