"""catalog.ops.options: the options a committing verb hands down, their defaults and derived values."""

from __future__ import annotations

import dataclasses

import pytest

from catalog.commit.values import DEFAULT_SHARD_RECORDS, DEFAULT_SHARD_SIZE, default_author
from catalog.errors import CatalogError
from catalog.manifest import DEFAULT_SPLIT
from catalog.ops.options import AdoptOptions, CommitOptions, WriteOptions


def test_defaults_and_the_committer() -> None:
    assert CommitOptions().committer == default_author()
    assert CommitOptions(author="ada").committer == "ada"
    opts = WriteOptions()
    assert (opts.split, opts.size, opts.records, opts.drift()) == (
        DEFAULT_SPLIT,
        DEFAULT_SHARD_SIZE,
        DEFAULT_SHARD_RECORDS,
        None,
    )
    assert WriteOptions(shard_size=0, shard_records=0).size == 0  # 0 is kept (and refused later), not the default
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.split = "x"  # type: ignore[misc]


def test_a_drift_check_is_built_from_its_options() -> None:
    check = WriteOptions(check="warn", max_linf=0.5).drift()
    assert check is not None
    with pytest.raises(CatalogError):
        WriteOptions(check="sometimes").drift()


def test_an_adoption_writes_with_its_commit_options() -> None:
    adopt = AdoptOptions(token="t", message="m", author="a", split="test", allow_duplicate=True)
    assert adopt.writing("valid") == WriteOptions("t", "m", "a", "valid", allow_duplicate=True)
    assert AdoptOptions().writing("train").allow_duplicate is False
