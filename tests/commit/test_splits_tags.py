"""Splits and tags (issue 13, part 2) through the CLI and the Python API, on SQLite and
PostgreSQL: shards registered under a split, per-split totals, TFDS slices read exactly by
record count (against boundaries computed by hand here), splits kept through migrate,
compact and restore, tags as versions everywhere, and gc keeping what a tag needs."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from probes import downgrade_to_format_3
from typer.testing import CliRunner

from catalog import Catalog, Schema, read_records
from catalog import manifest as mf
from catalog.cli import app
from catalog.commit.plans import plan
from catalog.errors import CommitConflictError, InvalidNameError, VersionNotFoundError
from catalog.ops import maintenance

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "s": {"dtype": "string", "default": ""}}}
# The dataset most tests read: train 0..100 (101 records) appended in two parts with the
# test split (1000..1009) between them, and validation (2000..2006). Shards of 30 records.
TRAIN = list(range(101))
TEST = list(range(1000, 1010))
VALIDATION = list(range(2000, 2007))


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def one_line_error(result: Any, starts: str) -> str:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.startswith(starts), result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    return str(result.stderr)


def rows(ids: list[int]) -> Iterator[dict[str, Any]]:
    return ({"id": i, "s": f"r{i}"} for i in ids)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cat"
    cat = Catalog.init(r)
    cat.register("d", SCHEMA)
    cat.close()
    return r


@pytest.fixture
def loaded(root: Path, tmp_path: Path) -> Path:
    with Catalog.open(root) as cat:
        ds = cat.dataset("d")
        ds.append_rows(rows(TRAIN[:50]), shard_records=30)  # default split: train
        jsonl = tmp_path / "test.jsonl"
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows(TEST)))
    run("-C", str(root), "append", "d", str(jsonl), "--split", "test", "--shard-records", "4")
    with Catalog.open(root) as cat:
        ds = cat.dataset("d")
        ds.append_rows(rows(TRAIN[50:]), shard_records=30, split="train")
        ds.append_rows(rows(VALIDATION), split="validation")
    return root


def c(root: Path, *args: str, ok: bool = True) -> Any:
    return run("-C", str(root), *args, ok=ok)


def show(root: Path, *args: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(c(root, "show", "d", "--json", *args).stdout)
    return out


def cat_ids(root: Path, *args: str) -> list[int]:
    return [json.loads(line)["id"] for line in c(root, "cat", "d", *args).stdout.splitlines()]


def export_ids(root: Path, out: Path, *args: str) -> list[int]:
    report = json.loads(c(root, "export", "d", str(out), "--json", *args).stdout)
    schema = Schema.from_json(SCHEMA)
    ids = [schema.decode(r)["id"] for r in read_records(out)]
    assert report["records"] == len(ids)
    return ids


def totals_from_files(doc: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Per split, from the shard list and the files on disk (not from the manifest's sums)."""
    out: dict[str, dict[str, int]] = {}
    for s in doc["shards"]:
        t = out.setdefault(s["split"], {"records": 0, "shards": 0, "bytes": 0})
        t["records"] += s["records"]
        t["shards"] += 1
        t["bytes"] += os.path.getsize(s["path"])
    return out


# --------------------------------------------------------------------------- splits


def test_append_registers_splits_and_show_and_list_total_them(loaded: Path) -> None:
    doc = show(loaded)
    assert doc["splits"] == totals_from_files(doc)
    assert {k: v["records"] for k, v in doc["splits"].items()} == {"test": 10, "train": 101, "validation": 7}
    assert {k: v["shards"] for k, v in doc["splits"].items()} == {"test": 3, "train": 4, "validation": 1}
    assert list(doc["splits"]) == ["test", "train", "validation"]
    (listed,) = json.loads(c(loaded, "list", "--json").stdout)
    assert listed["splits"] == doc["splits"]
    text = c(loaded, "list").stdout
    assert "splits" not in text and text.splitlines()[1].split()[:5] == ["d", "5", "1", "8", "118"]
    shown = c(loaded, "show", "d", "--no-shards").stdout.splitlines()
    at = shown.index("splits:")
    assert [line.split()[:3] for line in shown[at + 1 : at + 4]] == [
        ["test:", "10", "records,"],
        ["train:", "101", "records,"],
        ["validation:", "7", "records,"],
    ]
    old = show(loaded, "--version", "2")  # an older version has its own totals
    assert old["splits"] == totals_from_files(old) and list(old["splits"]) == ["train"]
    assert (old["splits"]["train"]["records"], old["splits"]["train"]["shards"]) == (50, 2)


def test_an_empty_dataset_has_no_splits(root: Path) -> None:
    assert show(root)["splits"] == {}
    assert json.loads(c(root, "list", "--json").stdout)[0]["splits"] == {}


# Boundaries by hand: train has 101 records; 90% of 101 = 90.9 -> 91; 33% = 33.33 -> 33;
# 67% = 67.67 -> 68; -1% = -1.01 -> -1; test has 10: 25% = 2.5 -> 2 (half to even), 75% = 7.5 -> 8.
SLICES = [
    ("train", TRAIN),
    ("train[:90%]", TRAIN[:91]),
    ("train[90%:]", TRAIN[91:]),
    ("train[33%:67%]", TRAIN[33:68]),
    ("train[-1%:]", TRAIN[100:]),
    ("train[45:55]", TRAIN[45:55]),  # across the shards of two appends, the test split between them
    ("train[1000:2000]", []),
    ("test[-3:]", TEST[7:]),
    ("test[-500:]", TEST),
    ("test[25%:75%]", TEST[2:8]),
    ("train[:10%]+validation", TRAIN[:10] + VALIDATION),  # 10.1 -> 10
    ("validation+test[:1]", VALIDATION + TEST[:1]),
    ("all", TEST + TRAIN + VALIDATION),  # every split, by name
]


@pytest.mark.parametrize(("spec", "expected"), SLICES)
def test_split_slices_through_cat_and_export(loaded: Path, tmp_path: Path, spec: str, expected: list[int]) -> None:
    assert cat_ids(loaded, "--split", spec) == expected
    assert export_ids(loaded, tmp_path / "out.tfrecord", "--split", spec) == expected


def test_slices_partition_a_split_and_take_limit_and_compression(loaded: Path, tmp_path: Path) -> None:
    parts = [cat_ids(loaded, "--split", f"train[{p}%:{p + 20}%]") for p in range(0, 100, 20)]
    assert [i for part in parts for i in part] == TRAIN
    assert cat_ids(loaded, "--split", "test[2:]", "--limit", "3") == TEST[2:5]
    gz = tmp_path / "out.tfrecord.gz"
    c(loaded, "export", "d", str(gz), "--split", "train[-5:]", "--compression", "gzip")
    assert [Schema.from_json(SCHEMA).decode(r)["id"] for r in read_records(gz)] == TRAIN[-5:]
    assert cat_ids(loaded) == TRAIN[:50] + TEST + TRAIN[50:] + VALIDATION  # no split: dataset order


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cat", "d", "--split", "nope"], "error: no split 'nope' in 'nope' (splits: test, train, validation)\n"),
        (["cat", "d", "--split", "train[:x]"], "error: bad split 'train[:x]': cannot read 'train[:x]'"),
        (["cat", "d", "--split", "train+tset"], "error: no split 'tset' in 'train+tset' (splits: test, train, "),
        (["cat", "d", "--split", "train[:101%]"], "error: bad split 'train[:101%]': 101% is beyond 100%"),
        (["export", "d", "OUT", "--split", "valid"], "error: no split 'valid' in 'valid' (splits: test, train"),
        (
            ["compact", "d", "--split", "nope"],
            "error: no split 'nope' in dataset 'd' (splits: test, train, validation)",
        ),
        (["compact", "d", "--split", "train[:5]"], "error: bad split name 'train[:5]'"),
        (["append", "d", "IN", "--split", "all"], "error: bad split name 'all'"),
        (["append", "d", "IN", "--split", "a/b"], "error: bad split name 'a/b'"),
    ],
)
def test_bad_splits_are_one_line_naming_what_exists(loaded: Path, tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "in.jsonl").write_text('{"id": 1}\n')
    args = [
        str(tmp_path / "out.tfrecord") if a == "OUT" else str(tmp_path / "in.jsonl") if a == "IN" else a for a in args
    ]
    before = show(loaded)
    one_line_error(c(loaded, *args, ok=False), says)
    assert show(loaded) == before  # nothing registered
    assert not (tmp_path / "out.tfrecord").exists()


def test_token_retry_with_another_split_is_refused(root: Path, tmp_path: Path) -> None:
    with Catalog.open(root) as cat:
        ds = cat.dataset("d")
        first = ds.append_rows(rows([1, 2]), token="load-1", split="test")
        again = ds.append_rows(rows([1, 2]), token="load-1", split="test")
        assert again.duplicate and again.version == first.version
        with pytest.raises(
            CommitConflictError,
            match="token 'load-1' already committed version 2 of 'd' under split 'test', not 'train'",
        ):
            ds.append_rows(rows([1, 2]), token="load-1")
    jsonl = tmp_path / "x.jsonl"
    jsonl.write_text('{"id": 1}\n')
    one_line_error(
        c(root, "append", "d", str(jsonl), "--token", "load-1", ok=False),
        "error: token 'load-1' already committed version 2 of 'd' under split 'test', not 'train': nothing",
    )
    assert "already committed" in c(root, "append", "d", str(jsonl), "--token", "load-1", "--split", "test").stdout
    assert show(root)["splits"] == {"test": {"records": 2, "shards": 1, "bytes": show(root)["bytes"]}}
    shards = sorted(p.name for p in (root / "data" / "d").iterdir() if p.name.endswith(".tfrecord"))
    assert shards == [Path(show(root)["shards"][0]["path"]).name]  # the refused retries wrote nothing


def test_compact_merges_only_within_a_split(loaded: Path) -> None:
    before = {s: cat_ids(loaded, "--split", s) for s in ("train", "test", "validation")}
    v = show(loaded)["version"]
    out = json.loads(c(loaded, "compact", "d", "--split", "test", "--json").stdout)
    assert (out["split"], out["groups"], out["shards_before"], out["shards_after"]) == ("test", 1, 8, 6)
    after = show(loaded)
    assert {k: t["shards"] for k, t in after["splits"].items()} == {"test": 1, "train": 4, "validation": 1}
    c(loaded, "compact", "d")  # each split on its own: train's two appends merge across the test shards
    doc = show(loaded)
    assert {k: t["shards"] for k, t in doc["splits"].items()} == {"test": 1, "train": 1, "validation": 1}
    assert {k: t["records"] for k, t in doc["splits"].items()} == {"test": 10, "train": 101, "validation": 7}
    assert {s: cat_ids(loaded, "--split", s) for s in before} == before  # each split: same records, same order
    for s in doc["shards"]:  # no shard holds records of two splits
        ids = {json.loads(line)["id"] for line in c(loaded, "cat", "d", "--split", s["split"]).stdout.splitlines()}
        assert s["records"] == len(ids)
    assert cat_ids(loaded, "--version", str(v), "--split", "train[45:55]") == TRAIN[45:55]  # old version intact


def test_a_migration_rewrites_every_split_in_one_commit(loaded: Path) -> None:
    before = show(loaded)
    c(loaded, "migrate", "d", "--add", "h:int64=7", "--workers", "1")
    after = show(loaded)
    assert (after["version"], after["schema_version"]) == (before["version"] + 1, 2)
    assert {k: (t["records"], t["shards"]) for k, t in after["splits"].items()} == {
        k: (t["records"], t["shards"]) for k, t in before["splits"].items()
    }
    lines = c(loaded, "cat", "d", "--split", "test[-2:]").stdout.splitlines()
    assert [(json.loads(x)["id"], json.loads(x)["h"]) for x in lines] == [(1008, 7), (1009, 7)]
    assert cat_ids(loaded, "--split", "train[:90%]") == TRAIN[:91]
    (commit,) = [h for h in json.loads(c(loaded, "history", "d", "--json").stdout) if h["kind"] == "migrate"]
    assert commit["shard_count"] == len(after["shards"])


def test_restore_brings_each_shard_back_in_its_split(loaded: Path) -> None:
    v = show(loaded)["version"]
    c(loaded, "compact", "d")
    with Catalog.open(loaded) as cat:
        cat.dataset("d").append_rows(rows([5000]), split="test")
    c(loaded, "restore", "d", "--version", str(v))
    doc = show(loaded)
    assert doc["splits"] == show(loaded, "--version", str(v))["splits"]
    assert cat_ids(loaded, "--split", "all") == TEST + TRAIN + VALIDATION


# --------------------------------------------------------------------------- tags


def test_tags_name_versions_everywhere(loaded: Path, tmp_path: Path) -> None:
    v = show(loaded)["version"]
    assert c(loaded, "tag", "d", "run-42").stdout == f"tagged d version {v} as run-42\n"
    assert c(loaded, "tag", "d", "first.load_1", "--version", "2").stdout == "tagged d version 2 as first.load_1\n"
    assert c(loaded, "tag", "d", "run-42").stdout == f"tagged d version {v} as run-42\n"  # again: a no-op
    with Catalog.open(loaded) as cat:
        cat.dataset("d").append_rows(rows([9999]))
    tags = json.loads(c(loaded, "tags", "d", "--json").stdout)
    assert [(t["name"], t["version"], t["dataset"]) for t in tags] == [("first.load_1", 2, "d"), ("run-42", v, "d")]
    text = c(loaded, "tags", "d").stdout.splitlines()
    assert text[0].split() == ["TAG", "VERSION", "CREATED", "AUTHOR"] and text[2].split()[:2] == ["run-42", str(v)]
    # --version takes the tag wherever it takes a number
    assert show(loaded, "--version", "run-42")["version"] == v
    assert cat_ids(loaded, "--version", "run-42") == cat_ids(loaded, "--version", str(v)) != cat_ids(loaded)
    assert cat_ids(loaded, "--version", "first.load_1") == TRAIN[:50]
    assert export_ids(loaded, tmp_path / "e.tfrecord", "--version", "run-42", "--split", "test") == TEST
    history = json.loads(c(loaded, "history", "d", "--json").stdout)
    assert [h["tags"] for h in history] == [[], ["first.load_1"], [], [], ["run-42"], []]
    lines = c(loaded, "history", "d").stdout.splitlines()
    assert "[tags: run-42]" in lines[4] and "tags" not in lines[5]
    restored = c(loaded, "restore", "d", "--version", "first.load_1").stdout
    assert restored.startswith("restored d to version 2 (tag first.load_1) as version")
    assert cat_ids(loaded) == TRAIN[:50]


def test_tags_in_python(loaded: Path) -> None:
    with Catalog.open(loaded) as cat:
        ds = cat.dataset("d")
        made = ds.tag("run-42", version=3)
        assert (made.name, made.version, made.dataset) == ("run-42", 3, "d")
        assert [(t.name, t.version) for t in ds.tags()] == [("run-42", 3)]
        assert [r["id"] for r in ds.read(version="run-42")] == TRAIN[:50] + TEST
        assert ds.files(version="run-42") == ds.files(version=3)
        assert ds.info("run-42").version == 3 and ds.schema_at("run-42").to_json() == SCHEMA
        planned = plan(ds, "run-42", "train[10:12]")
        assert (planned.version, planned.records) == (3, 2)
        assert ds.info("3").version == 3  # digits are a number, never a tag
        gone = ds.untag("run-42")
        assert (gone.name, gone.version) == ("run-42", 3) and ds.tags() == []
        with pytest.raises(VersionNotFoundError, match=r"has no tag 'run-42' \(no tags; versions: 1 to 5\)"):
            ds.read(version="run-42").__next__()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["tag", "d", "42"], "error: invalid tag '42': a letter first"),
        (["tag", "d", "-x"], None),  # an option to the parser
        (["tag", "d", "_x"], "error: invalid tag '_x': a letter first"),
        (["tag", "d", "a" * 129], "error: invalid tag 'aaaa"),
        (["tag", "d", "old", "--version", "1"], "error: tag 'old' of 'd' already names version 2; tags never move"),
        (["tag", "d", "new", "--version", "99"], "error: cannot tag: dataset 'd' has no version 99"),
        (["tag", "d", "new", "--version", "nope"], "error: cannot tag: dataset 'd' has no tag 'nope' (tags: old; v"),
        (["tag", "d", "nope", "--delete"], "error: dataset 'd' has no tag 'nope' (tags: old; versions: 1 to 5)\n"),
        (["cat", "d", "--version", "olf"], "error: dataset 'd' has no tag 'olf' (tags: old; versions: 1 to 5)\n"),
        (["show", "d", "--version", "x y"], "error: dataset 'd': 'x y' is neither a version number nor a tag ("),
        (["restore", "d", "--version", "nope"], "error: dataset 'd' has no tag 'nope' (tags: old; versions: 1 to 5)\n"),
        (["tags", "e"], "error: no dataset named 'e'"),
    ],
)
def test_bad_tags_are_one_line(loaded: Path, args: list[str], says: str | None) -> None:
    c(loaded, "tag", "d", "old", "--version", "2")
    before = (show(loaded), c(loaded, "tags", "d", "--json").stdout)
    if says is None:
        assert c(loaded, *args, ok=False).exit_code == 2
    else:
        one_line_error(c(loaded, *args, ok=False), says)
    assert (show(loaded), c(loaded, "tags", "d", "--json").stdout) == before


@pytest.mark.parametrize("args", [["tag", "d", "t", "--delete", "--version", "2"], ["cat", "d", "--version", "0"]])
def test_tag_usage_errors_exit_2(loaded: Path, args: list[str]) -> None:
    assert c(loaded, *args, ok=False).exit_code == 2


def test_python_tag_names_are_checked() -> None:
    from catalog.commit.values import validate_tag

    for bad in ("1", "12", "1a", "", " a", "a b", "a/b", "a" * 129):
        with pytest.raises(InvalidNameError):
            validate_tag(bad)
    for good in ("a", "v1", "run-42", "Best.model_3", "a" * 128):
        assert validate_tag(good) == good


# --------------------------------------------------------------------------- gc and tags


def _retire_all(root: Path) -> None:
    c(root, "migrate", "d", "--add", "h:int64=1", "--workers", "1")  # every shard retired


def test_a_tagged_version_survives_gc_until_its_tag_is_deleted(loaded: Path) -> None:
    c(loaded, "tag", "d", "run-42")
    v = show(loaded)["version"]
    pinned = show(loaded, "--version", "run-42")["shards"]
    expected = cat_ids(loaded, "--version", "run-42")
    _retire_all(loaded)
    dry = json.loads(c(loaded, "gc", "--keep-versions", "1", "--dry-run", "--json").stdout)
    report = json.loads(c(loaded, "gc", "--keep-versions", "1", "--json").stdout)
    for r in (dry, report):
        assert r["retired_removed"] == [] and r["kept_tagged"] == len(pinned)
        (kept,) = r["kept_for_tags"]
        assert (kept["dataset"], kept["tag"], kept["version"]) == ("d", "run-42", v)
        assert sorted(kept["shards"]) == sorted(s["path"] for s in pinned)
    text = c(loaded, "gc", "--keep-versions", "1").stdout
    assert f"kept {len(pinned)} retired shards for tag run-42 of d (version {v})\n" in text
    assert text.rstrip().endswith(f", {len(pinned)} for tags")
    assert all(Path(s["path"]).exists() for s in pinned)
    assert cat_ids(loaded, "--version", "run-42") == expected
    assert json.loads(c(loaded, "verify", "--json").stdout)["ok"] is True

    c(loaded, "tag", "d", "run-42", "--delete")
    report = json.loads(c(loaded, "gc", "--keep-versions", "1", "--json").stdout)
    assert sorted(report["retired_removed"]) == sorted(s["path"] for s in pinned)
    assert report["kept_for_tags"] == [] and report["kept_tagged"] == 0
    assert not any(Path(s["path"]).exists() for s in pinned)
    one_line_error(c(loaded, "cat", "d", "--version", "run-42", ok=False), "error: dataset 'd' has no tag 'run-42'")
    one_line_error(c(loaded, "cat", "d", "--version", str(v), ok=False), f"error: dataset 'd' version {v} is no longer")
    one_line_error(
        c(loaded, "tag", "d", "again", "--version", str(v), ok=False),
        f"error: cannot tag: dataset 'd' version {v} is no longer readable: gc collected its retired shards",
    )


def test_older_than_keeps_tagged_versions_too_and_only_what_they_need(loaded: Path) -> None:
    c(loaded, "tag", "d", "early", "--version", "2")  # train 0..49: 2 shards
    _retire_all(loaded)
    report = json.loads(c(loaded, "gc", "--older-than", "0", "--json").stdout)
    (kept,) = report["kept_for_tags"]
    assert (kept["tag"], kept["version"], len(kept["shards"])) == ("early", 2, 2)
    assert len(report["retired_removed"]) == len(show(loaded)["shards"]) - 2  # every other retired shard went
    assert cat_ids(loaded, "--version", "early") == TRAIN[:50]


def test_a_tag_written_while_gc_decides_is_seen_before_anything_is_marked(
    loaded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _retire_all(loaded)
    v = show(loaded)["version"] - 1
    calls: list[int] = []
    decide = maintenance._spare_tagged

    def tag_in_between(*args: Any) -> Any:
        calls.append(0)
        if len(calls) == 1:  # after gc read the manifest, before its marking transaction
            with Catalog.open(loaded) as other:
                other.dataset("d").tag("late", version=v)
        return decide(*args)

    monkeypatch.setattr(maintenance, "_spare_tagged", tag_in_between)
    with Catalog.open(loaded) as cat:
        report = cat.gc(keep_versions=1)
    assert len(calls) == 2 and report.retired == []
    assert [(k.tag, k.version) for k in report.kept_for_tags] == [("late", v)]
    assert cat_ids(loaded, "--version", "late") == TRAIN[:50] + TEST + TRAIN[50:] + VALIDATION


# --------------------------------------------------------------------------- upgrade


@pytest.mark.sqlite_only  # a hand-built SQLite file of format 3
def test_upgrade_from_format_3_puts_every_shard_in_train(root: Path, tmp_path: Path) -> None:
    with Catalog.open(root) as cat:
        cat.dataset("d").append_rows(rows(TRAIN[:40]), shard_records=15)
    downgrade_to_format_3(root / "catalog.db")
    one_line_error(c(root, "show", "d", ok=False), f"error: the manifest has format 3, older than {mf.FORMAT_VERSION}")
    assert c(root, "upgrade").stdout == f"manifest format 3 -> {mf.FORMAT_VERSION}\n"
    with sqlite3.connect(root / "catalog.db") as db:
        indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "ix_shards_split_seq" in indexes and "ix_shards_split_totals" not in indexes  # format 10's replaced 4's
    doc = show(root)
    assert doc["splits"] == {"train": {"records": 40, "shards": 3, "bytes": doc["bytes"]}}
    assert {s["split"] for s in doc["shards"]} == {"train"} and {s["index_checksum"] for s in doc["shards"]} == {None}
    assert cat_ids(root, "--split", "train[-5:]") == TRAIN[35:40]
    c(root, "tag", "d", "before-test")
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"id": 7}\n')
    c(root, "append", "d", str(jsonl), "--split", "test")
    assert cat_ids(root, "--split", "test") == [7] and cat_ids(root, "--version", "before-test") == TRAIN[:40]


@pytest.mark.sqlite_only  # the fixture is a SQLite file
def test_upgrade_from_format_1_puts_every_shard_in_train(tmp_path: Path) -> None:
    root = tmp_path / "old"
    shutil.copytree(Path(__file__).parents[1] / "fixtures" / "manifest-format1", root)
    c(root, "upgrade")
    doc = json.loads(c(root, "show", "legacy", "--json").stdout)
    assert doc["splits"] == {"train": {"records": 15, "shards": len(doc["shards"]), "bytes": doc["bytes"]}}
    last = c(root, "cat", "legacy", "--split", "train[-3:]").stdout.splitlines()
    assert [json.loads(x)["id"] for x in last] == [12, 13, 14]


# --------------------------------------------------------------------------- more


def test_an_append_on_a_pool_registers_every_input_under_its_split(root: Path, tmp_path: Path) -> None:
    inputs = []
    for k in range(3):
        path = tmp_path / f"in{k}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows(list(range(10 * k, 10 * k + 10)))))
        inputs.append(str(path))
    c(root, "append", "d", *inputs, "--workers", "2", "--split", "validation")
    assert {k: t["records"] for k, t in show(root)["splits"].items()} == {"validation": 30}
    assert cat_ids(root, "--split", "validation[5:25]") == list(range(5, 25))


def test_tags_and_appends_side_by_side(root: Path) -> None:
    """Tagging is a manifest write beside commits: every tag names the version that was
    current when it was written, with that version's records; versions stay gapless."""
    errors: list[BaseException] = []

    def appends() -> None:
        try:
            with Catalog.open(root) as cat:
                ds = cat.dataset("d")
                for i in range(8):
                    ds.append_rows(rows([i]))
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    writer = threading.Thread(target=appends)
    writer.start()
    made = []
    with Catalog.open(root) as cat:
        ds = cat.dataset("d")
        for k in range(8):
            made.append(ds.tag(f"t{k}"))
        writer.join()
        assert not errors
        assert [h.version for h in ds.history()] == list(range(1, 10))
        for t in made:
            assert [r["id"] for r in ds.read(version=t.name)] == list(range(t.version - 1))
        assert sorted((t.name, t.version) for t in ds.tags()) == sorted((t.name, t.version) for t in made)


def test_list_json_reads_the_manifest_alone(root: Path) -> None:
    """`list --json` adds the totals per split from the manifest: still no schema codec, no
    storage, no NumPy (the text listing's own start-up test is in test_cli_startup)."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(sys.modules) + '\\n'))\n"
        "from catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "-C", str(root), "list", "--json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["splits"] == {}
    modules = set(proc.stderr.rpartition("LOADED ")[2].split())
    assert "sqlalchemy.engine" in modules
    assert not {m for m in modules if m.startswith(("numpy", "catalog.schema", "catalog.storage", "sqlalchemy.orm"))}


def test_copy_manifest_keeps_tags_and_splits(loaded: Path, tmp_path: Path) -> None:
    c(loaded, "tag", "d", "run-42", "--version", "3")
    before = (show(loaded)["splits"], c(loaded, "tags", "d", "--json").stdout)
    c(loaded, "copy-manifest", f"sqlite:///{tmp_path / 'copy.db'}")
    assert (show(loaded)["splits"], c(loaded, "tags", "d", "--json").stdout) == before
    assert cat_ids(loaded, "--version", "run-42", "--split", "test[:2]") == TEST[:2]


def test_last_commit_is_the_histories_last(loaded: Path) -> None:
    """The viewer's catalog page reads each dataset's last commit alone: the same as the
    history's last, after appends, a tag, a compaction (shards added and retired) and a gc."""
    with Catalog.open(loaded) as cat:
        ds = cat.dataset("d")
        assert ds.last_commit() == ds.history()[-1]
        ds.compact(split="train")
        ds.tag("run-1")
        last = ds.last_commit()
        assert last == ds.history()[-1] and last.tags == ("run-1",) and last.kind == "compact"
        assert last.records_removed > 0 and last.shards_removed > 1
        cat.gc(keep_versions=1)
        assert ds.last_commit() == ds.history()[-1]


HAS = "(splits: test, train, validation; tags: old; versions: 1 to 5)\n"
VERSIONS = "(versions: 1 to 5; tags: old)\n"
D = "error: dataset 'd'"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["stats", "d", "--compare", "train", "valid"], f"{D} has no split, tag or version 'valid' {HAS}"),
        (["stats", "d", "--compare", "99", "train"], f"error: dataset 'd' has no version 99 {VERSIONS}"),
        (
            ["stats", "d", "--compare", "train", "valid@2"],
            "error: no split 'valid' in dataset 'd' version 2 (splits: train)\n",
        ),
        (["cat", "d", "--version", "olf"], "error: dataset 'd' has no tag 'olf' (tags: old; versions: 1 to 5)\n"),
        (["cat", "d", "--version", "9"], f"error: dataset 'd' has no version 9 {VERSIONS}"),
        (["show", "d", "--version", "x y"], f"{D}: 'x y' is neither a version number nor a tag {VERSIONS}"),
    ],
)
def test_an_unknown_version_tag_or_split_says_what_exists(loaded: Path, args: list[str], says: str) -> None:
    c(loaded, "tag", "d", "old", "--version", "2")
    assert one_line_error(c(loaded, *args, ok=False), says) == says


def test_compare_stats_in_python_says_what_exists(loaded: Path) -> None:
    with Catalog.open(loaded) as cat:
        ds = cat.dataset("d")
        said = r"has no split, tag or version 'valid' \(splits: test, train, validation; no tags; versions: 1 to 5\)"
        with pytest.raises(VersionNotFoundError, match=said):
            ds.compare_stats("train", "valid")
        assert [f.name for f in ds.compare_stats("train", "validation").features] == ["id", "s"]
