"""One exception tree for the whole package.

Every error a user can cause derives from :class:`CatalogError`; the CLI turns these
(and only these) into a one-line message and exit code 1.
"""

from __future__ import annotations


class CatalogError(Exception):
    """Base of every error the package raises on purpose."""


class CorruptRecordError(CatalogError):
    """A TFRecord stream is damaged or is not TFRecord at all."""

    def __init__(self, reason: str, path: str | None, offset: int, *, compressed: bool = False):
        self.reason = reason
        self.path = path
        self.offset = offset
        self.compressed = compressed
        where = path if path is not None else "<bytes>"
        unit = " (offset in the decompressed stream)" if compressed else ""
        super().__init__(f"{where}: byte {offset}{unit}: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled from a worker process (job errors travel back to the caller): the default
        # would call __init__ with the message alone.
        return (_corrupt_record_error, (self.reason, self.path, self.offset, self.compressed))


def _corrupt_record_error(reason: str, path: str | None, offset: int, compressed: bool) -> CorruptRecordError:
    return CorruptRecordError(reason, path, offset, compressed=compressed)


class CorruptShardError(CatalogError):
    """A shard is not what the manifest registered (size, record count, index): changed after
    its commit, for instance through a ``--link``ed name. Readers say so rather than read short.
    ``message`` replaces the standard one; a CorruptShardError made from its message alone
    (as torch's DataLoader re-raises a worker's error) keeps its type."""

    def __init__(
        self, path: str, what: str | None = None, registered: object = None, found: object = None,
        message: str | None = None,
    ):  # fmt: skip
        self.path = path
        self.what = what
        self.registered = registered
        self.found = found
        if message is None and what is not None:
            message = f"{path}: {what}: registered {registered}, found {found} (changed after its commit?)"
        super().__init__(path if message is None else message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.what, self.registered, self.found, str(self)))


class ObjectMissingError(CatalogError, FileNotFoundError):
    """An object store has no object at that URL: a CatalogError for the CLI's one line,
    and a FileNotFoundError for code that treats a missing URL like a missing path."""


class ReaderStateError(CatalogError, ValueError):
    """A reader state (``state_dict()``'s) that this reader cannot resume: of another read
    (dataset, version, split, shuffle, seed, columns, record count), or malformed."""


class CodecError(CatalogError):
    """A value cannot be encoded to, or decoded from, a tf.train.Example."""

    def __init__(self, message: str, feature: str | None = None):
        self.feature = feature
        prefix = f"feature {feature!r}: " if feature is not None else ""
        super().__init__(prefix + message)


class SchemaError(CatalogError):
    """A schema document is malformed (unknown key, bad dtype, bad shape...)."""

    def __init__(self, message: str, feature: str | None = None):
        self.feature = feature
        prefix = f"feature {feature!r}: " if feature is not None else ""
        super().__init__(prefix + message)


class ValidationError(CatalogError):
    """A row or record does not match a schema."""

    def __init__(self, message: str, feature: str | None = None, record: int | None = None):
        self.reason = message
        self.feature = feature
        self.record = record
        parts = []
        if record is not None:
            parts.append(f"record {record}")
        if feature is not None:
            parts.append(f"feature {feature!r}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class ManifestError(CatalogError):
    """The manifest is missing, unreadable, of another format, or the database failed."""


class CatalogNotFoundError(CatalogError):
    """No catalog directory was given or found."""


class DatasetError(CatalogError):
    """Something about a named dataset: unknown, already registered, bad name."""

    def __init__(self, message: str, dataset: str | None = None):
        self.dataset = dataset
        super().__init__(message)


class DatasetNotFoundError(DatasetError):
    """No dataset of that name; the message says what to run next (a close name, or `catalog list`)."""


class DatasetExistsError(DatasetError):
    """A dataset of that name is registered already."""


class InvalidNameError(DatasetError):
    """A dataset name that is not allowed: letters, digits, '.', '_' and '-', not starting with
    '.', at most 128 characters."""


class CommitConflictError(CatalogError):
    """A commit lost to a concurrent change it cannot be rebased over (e.g. a schema change)."""


class AppendError(CatalogError):
    """An input to an append is unreadable or breaks the schema; nothing was registered."""

    def __init__(self, message: str, path: str | None = None, record: int | None = None, feature: str | None = None):
        self.path = path
        self.record = record
        self.feature = feature
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.path, self.record, self.feature))  # keeps the fields across processes


class CheckError(CatalogError):
    """An append's new data breaks a feature's checks (`append --check`); nothing was registered."""


class VersionNotFoundError(CatalogError):
    """A dataset version that does not exist, or whose shards were collected."""


class UsageError(CatalogError):
    """A call or command asked for something that cannot be: a bad option value, options that
    exclude each other, an argument of the wrong kind (no data was read wrong: the request was)."""


class PredicateError(UsageError):
    """A ``--where`` expression that cannot be read or does not fit the schema; the message
    names the character where it breaks and what was expected there."""

    def __init__(self, text: str, at: int, what: str):
        self.text = text
        self.at = at
        self.what = what
        shown = text if len(text) <= 80 else f"...{text[max(0, at - 30) : at + 30]}..."
        super().__init__(f"where {shown!r}: at character {at + 1}: {what}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.text, self.at, self.what))


class SplitError(UsageError):
    """A split name or a split spec (``train[:90%]+test``) that cannot be read."""


class SplitNotFoundError(CatalogError):
    """A split the dataset (at that version) does not have."""


class FeatureNotFoundError(CatalogError):
    """A feature the dataset's schema does not have."""


class StorageError(CatalogError):
    """A file or object could not be created, written or read (a full disk, no permission, no
    such directory, a file gone from under a writer); the message names the place."""


class DataAreaError(StorageError):
    """A data area that is not this catalog's (its marker names another, or none): gc and
    attach refuse to touch it."""


class DependencyError(CatalogError):
    """An optional dependency the call needs is not installed (PyTorch, TensorFlow, fsspec, the
    web extra...); the message names what to install."""


class ExecutorError(CatalogError):
    """Where jobs run failed: a worker process died, a Dask cluster could not be started or
    reached, a helper process ended early; nothing was registered."""


class MigrationError(CatalogError):
    """A migration cannot be planned or applied (bad operation, edited script, value that cannot be cast...)."""


class RowChangeError(CatalogError):
    """A row change (delete, update) or a derivation (filter, map, dedup) cannot be applied: its
    predicate or function failed on a record, or a value it sets breaks the schema; the message
    names the shard and the record, and nothing was registered."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) during a write, once the manifest says how it ended: nothing registered
    (``version`` None), or the commit of ``version`` complete, its files kept. A KeyboardInterrupt,
    so code that stops on Ctrl-C still does; the CLI prints it as one line and exits 130."""

    def __init__(self, version: int | None):
        self.version = version
        if version is None:
            super().__init__("interrupted: nothing was registered")
        else:
            super().__init__(f"interrupted after the commit: version {version} is complete")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.version,))


def first_line(e: BaseException, named: bool = False) -> str:
    """The first line of ``e``'s message (its class name when it has none), for one-line
    errors; ``named``: led by the class name, for exceptions from other libraries."""
    lines = str(e).strip().splitlines()
    if not lines:
        return type(e).__name__
    return f"{type(e).__name__}: {lines[0]}" if named else lines[0]
