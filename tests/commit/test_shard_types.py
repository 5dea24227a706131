"""Shards: one vocabulary (ARCHITECTURE.md). ``rel`` is a shard's "<dataset>/<file>" relative
to the data area, ``path`` the absolute place a reader opens, ``index_path`` its record index's;
one type per stage of a shard's life. These tests fail when a word or a type drifts back."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from catalog import ShardInfo
from catalog.commit.changes import NewShard
from catalog.commit.handles import LiveShard
from catalog.commit.plans import PlannedShard
from catalog.storage import ShardFile
from catalog.storage.base import StoredFile

PACKAGE = Path(__file__).resolve().parents[2] / "catalog"
ARCHITECTURE = PACKAGE.parent / "ARCHITECTURE.md"

# The words the vocabulary replaced: no dataclass field may be named so again, but for the
# public ShardInfo.relpath (kept for callers; ShardInfo.rel says the same).
RETIRED_WORDS = {"url", "relpath", "index_url", "index_rel"}
PUBLIC_EXCEPTIONS = {("ShardInfo", "relpath")}

# Every type that holds a shard's facts (records, bytes and checksum), by name.
SHARD_TYPES = {"ShardFile", "NewShard", "LiveShard", "PlannedShard", "ShardInfo", "StoredFile"}
# Dataclasses with a file's facts that are no shard: an input file an adoption read (before
# it becomes a ShardFile).
NOT_SHARDS = {"Scanned"}


def _dataclasses() -> list[tuple[Path, str, list[str]]]:
    """(module, class, the fields it declares) of every dataclass in the package."""
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                names = [
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                ]
                found.append((module.relative_to(PACKAGE.parent), node.name, names))
    return found


def test_no_dataclass_field_uses_a_retired_word() -> None:
    found = _dataclasses()
    assert len(found) > 50  # the scan sees the package's dataclasses
    drifted = [
        f"{module}: {cls}.{name}"
        for module, cls, names in found
        for name in names
        if (name in RETIRED_WORDS or name.endswith("_url")) and (cls, name) not in PUBLIC_EXCEPTIONS
    ]
    assert drifted == []


def test_every_dataclass_with_a_files_facts_is_a_documented_shard_type() -> None:
    facts = {"records", "bytes", "checksum"}
    holders = {cls for _m, cls, names in _dataclasses() if facts <= set(names)}
    assert holders - NOT_SHARDS <= SHARD_TYPES, "a new shard type: merge it, or document it in ARCHITECTURE.md"
    section = ARCHITECTURE.read_text(encoding="utf-8").split("### Shards: one vocabulary", 1)[1].split("\n## ", 1)[0]
    for name in SHARD_TYPES | {"SHARDS"}:
        assert f"`{name}`" in section or f".{name}`" in section, name


def test_each_shard_type_says_what_it_is() -> None:
    for cls in (ShardFile, NewShard, LiveShard, PlannedShard, ShardInfo, StoredFile):
        doc = cls.__doc__ or ""
        assert len(doc) > 100 and not doc.startswith(cls.__name__ + "("), cls.__name__


def test_the_words_per_type() -> None:
    def names(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls)}

    assert {"rel"} <= names(ShardFile) and "path" not in names(ShardFile)  # not placed yet: no absolute path
    assert {"rel"} <= names(StoredFile)
    assert {"path", "rel"} <= names(LiveShard)
    assert {"path", "relpath"} <= names(ShardInfo)
    # A planned shard is a live one plus a record range and where its index is.
    assert issubclass(PlannedShard, LiveShard)
    assert names(PlannedShard) - names(LiveShard) == {"index_path", "start", "stop", "cache"}  # cache: a reader's


def test_shard_info_rel_is_relpath_and_its_json_keeps_its_keys() -> None:
    info = ShardInfo("/data/d/a.tfrecord", "d/a.tfrecord", 3, 99, "crc32c:00000000", "none", 1, 1)
    assert info.rel == info.relpath == "d/a.tfrecord"
    assert info.path == "/data/d/a.tfrecord"
    assert list(info.to_json()) == [
        "path", "records", "bytes", "checksum", "compression", "schema_version", "added_version",
        "removed_version", "split", "index_checksum", "source", "external",
    ]  # fmt: skip
    assert info.to_json()["path"] == "/data/d/a.tfrecord"


def test_a_planned_shard_reads_like_the_live_shard_it_extends() -> None:
    live = LiveShard(7, "/data/d/a.tfrecord", 3, 99, "crc32c:00000000", "none", 1, 0, "d/a.tfrecord")
    planned = PlannedShard(
        *(getattr(live, f.name) for f in dataclasses.fields(LiveShard)),
        index_path="/data/.index/d/a.tfrecord.idx",
        start=1,
        stop=3,
    )
    assert (planned.path, planned.rel) == ("/data/d/a.tfrecord", "d/a.tfrecord")
    assert (planned.count, planned.adopted) == (2, False)
    assert dataclasses.replace(live, location="/elsewhere/a.tfrecord").adopted
    assert planned.io is not None and planned.io.remote is False
