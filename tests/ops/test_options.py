"""catalog.ops.options: the options a committing verb hands down, their defaults and derived values."""

from __future__ import annotations

import dataclasses

import pytest

from catalog.errors import CatalogError
from catalog.manifest import DEFAULT_SPLIT
from catalog.ops.options import AdoptOptions, CommitOptions, WriteOptions
from catalog.ops.writer import drift


def test_defaults() -> None:
    assert (CommitOptions().author, CommitOptions(author="ada").author) == (None, "ada")  # None: default_author()
    opts = WriteOptions()
    assert (opts.split, opts.shard_size, opts.shard_records, drift(opts)) == (DEFAULT_SPLIT, None, None, None)
    assert WriteOptions(shard_size=0).shard_size == 0  # 0 is kept (and refused later), not the default
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.split = "x"  # type: ignore[misc]


def test_a_drift_check_is_built_from_its_options() -> None:
    check = drift(WriteOptions(check="warn", max_linf=0.5))
    assert check is not None
    with pytest.raises(CatalogError):
        drift(WriteOptions(check="sometimes"))


def test_an_adoption_writes_with_its_commit_options() -> None:
    adopt = AdoptOptions(token="t", message="m", author="a", split="test", allow_duplicate=True)
    assert adopt.writing("valid") == WriteOptions("t", "m", "a", "valid", allow_duplicate=True)
    assert AdoptOptions().writing("train").allow_duplicate is False


def test_the_default_author_follows_the_login_variables(monkeypatch) -> None:
    from catalog.commit.values import _user, default_author

    _user.cache_clear()  # (what another test's environment cached)
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("USER", "ada")
    assert default_author() == "ada"
    monkeypatch.setenv("LOGNAME", "grace")  # getpass reads LOGNAME first
    assert default_author() == "grace"
    monkeypatch.delenv("LOGNAME")
    monkeypatch.delenv("USER")
    import getpass

    monkeypatch.setattr(getpass, "getuser", lambda: "from-passwd")
    assert default_author() == "from-passwd"
