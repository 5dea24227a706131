"""Tags (catalog/commit/tags.py): a name for one version that never moves, refused for a
version that cannot be read, deleted to be given again."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog, Dataset
from catalog.commit.tags import tag, untag
from catalog.errors import CommitConflictError, InvalidNameError, VersionNotFoundError

SCHEMA = {"features": {"x": {"dtype": "int64"}}}


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    cat = Catalog.init(tmp_path / "cat")
    d = cat.register("d", SCHEMA)
    d.append_rows([{"x": 1}])  # version 2
    d.append_rows([{"x": 2}])  # version 3
    return d


def test_a_tag_names_the_current_version_and_tagging_it_again_is_a_no_op(ds: Dataset) -> None:
    made = tag(ds, "best", author="ann")
    assert (made.dataset, made.name, made.version, made.author) == ("d", "best", 3, "ann")
    again = tag(ds, "best", 3, author="bob")
    assert (again.version, again.author, again.created) == (3, "ann", made.created)  # as it was
    older = tag(ds, "first", "best")  # a tag names a version too
    assert older.version == 3


def test_a_tag_never_moves(ds: Dataset) -> None:
    tag(ds, "run-1", 2)
    with pytest.raises(CommitConflictError) as e:
        tag(ds, "run-1", 3)
    assert str(e.value) == (
        "tag 'run-1' of 'd' already names version 2; tags never move (delete it first: `catalog tag d run-1 --delete`)"
    )
    removed = untag(ds, "run-1")
    assert removed.version == 2
    assert tag(ds, "run-1", 3).version == 3


def test_bad_names_versions_and_unknown_tags_are_refused(ds: Dataset) -> None:
    with pytest.raises(VersionNotFoundError, match=r"^cannot tag: "):
        tag(ds, "future", 99)
    with pytest.raises(InvalidNameError):
        tag(ds, "no spaces allowed")
    with pytest.raises(VersionNotFoundError, match=r"'nope'"):
        untag(ds, "nope")
