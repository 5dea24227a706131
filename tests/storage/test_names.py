"""catalog.storage.names: what gc may judge by a file's name alone. A name the catalog makes
must read back as its own (its intent, its index's shard); a name anyone else could pick must not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from catalog.storage.names import (
    index_owner,
    index_rel,
    intent_of,
    is_catalog_file,
    is_catalog_index,
    is_index_name,
    new_intent_id,
    shard_name,
    temp_name,
)

units = st.integers(min_value=0, max_value=99_999)


@given(units, units)
def test_a_shard_name_reads_back_as_the_catalogs_and_names_its_intent(unit: int, index: int) -> None:
    intent = new_intent_id()
    name = shard_name(f"{intent}-{unit:05d}", index)
    assert is_catalog_file(name) and intent_of(name) == intent
    spooled = temp_name(name)
    assert is_catalog_file(spooled) and intent_of(spooled) == intent  # its temporary file too
    assert not is_index_name(name)


@given(units)
def test_an_index_belongs_to_its_shard(index: int) -> None:
    shard = f"ds/{shard_name(new_intent_id(), index)}"
    rel = index_rel(shard)
    assert index_owner(rel) == shard
    file = rel.rsplit("/", 1)[1]
    assert is_index_name(file) and is_catalog_index(file) and not is_catalog_file(file)
    assert is_catalog_index(temp_name(file, "0123456789abcdef"))


@given(st.text(max_size=60))
def test_names_nobody_made_here_are_never_the_catalogs(name: str) -> None:
    """gc deletes only what these say is the catalog's: a user's file must never pass."""
    if len(name) < 28 or not name.endswith(".tfrecord"):
        assert not is_catalog_file(name)
    assert index_owner(name) is None or name.startswith(".index/")


def test_intent_ids_are_time_ordered_and_distinct() -> None:
    ids = [new_intent_id() for _ in range(200)]
    assert len(set(ids)) == 200 and all(len(i) == 28 for i in ids)
    assert [i[:12] for i in ids] == sorted(i[:12] for i in ids)
    assert intent_of("my-data.tfrecord") is None and not is_catalog_file("part-00000.tfrecord")
