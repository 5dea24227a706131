"""The options of the verbs that commit, one type per verb family, built once where a call
comes in (a `Dataset` method, the CLI) and handed down whole: a writer, an adoption and the
commit read their options here rather than from a long list of parameters restated at each
layer. A new option of a verb is a field here, the parameter that sets it in the API method,
and its flag in the CLI."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.commit.statistics import DriftCheck
from catalog.commit.values import DEFAULT_SHARD_RECORDS, DEFAULT_SHARD_SIZE, default_author
from catalog.manifest import DEFAULT_SPLIT


@dataclass(frozen=True)
class CommitOptions:
    """What every verb that commits takes: ``token`` (a retry with it answers with the first
    commit), ``message``, ``author`` (default: the user and host)."""

    token: str | None = None
    message: str = ""
    author: str | None = None

    @property
    def committer(self) -> str:
        return self.author or default_author()


@dataclass(frozen=True)
class WriteOptions(CommitOptions):
    """An append's (rows, files, a writer, an adoption): the ``split`` its shards go to, how
    large they grow (None: the defaults), whether an input whose shards have the bytes of live
    ones goes in (``allow_duplicate``), and the drift check before the commit (``check``:
    "fail" or "warn", ``max_linf``)."""

    split: str = DEFAULT_SPLIT
    shard_size: int | None = None
    shard_records: int | None = None
    allow_duplicate: bool = True
    check: str | None = None
    max_linf: float | None = None

    @property
    def size(self) -> int:
        return DEFAULT_SHARD_SIZE if self.shard_size is None else self.shard_size  # (0 is refused, not the default)

    @property
    def records(self) -> int:
        return DEFAULT_SHARD_RECORDS if self.shard_records is None else self.shard_records

    def drift(self) -> DriftCheck | None:
        """The check asked for (None: none)."""
        return DriftCheck.asked(self.check, self.max_linf)


@dataclass(frozen=True)
class AdoptOptions(CommitOptions):
    """An adoption's: the ``split`` (None: train, or a TFDS directory's own splits), ``copy``
    or ``link`` the files into the data area instead of registering them where they are, and
    whether an input already in the dataset goes in again (``allow_duplicate``)."""

    split: str | None = None
    copy: bool = False
    link: bool = False
    allow_duplicate: bool = False

    def writing(self, split: str) -> WriteOptions:
        """The options of the append that registers the adopted shards of ``split``."""
        return WriteOptions(self.token, self.message, self.author, split, allow_duplicate=self.allow_duplicate)
