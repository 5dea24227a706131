"""Erasure (`delete --purge`, catalog/ops/rowchanges.py erase): after it no file of the data area
holds the erased records' bytes, every version reads without them, history says an erasure
happened, files the catalog does not own are refused, and a kill at any point leaves either the
old state or the erased one (gc then removes what is left)."""

from __future__ import annotations

import base64
import os
import re
import signal
import sqlite3
import subprocess
import sys
import zlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, faults
from catalog.cli import app
from catalog.errors import CommitConflictError, RowChangeError, UsageError

MARK = "SECRET-ALICE-7f3a"  # a value no other byte sequence of these files holds
SCHEMA = {"features": {"id": {"dtype": "int64", "shape": []}, "who": {"dtype": "string", "shape": []}}}


def _rows(ids: range | list[int], secret: set[int]) -> list[dict[str, Any]]:
    return [{"id": i, "who": MARK if i in secret else f"user{i}"} for i in ids]


def _history_with_secrets(root: Path) -> Any:
    """Three appends compacted into one shard (the three retired, still read by versions 2-4),
    two more appends, a quick migration (every shard rewritten, the old ones retired)."""
    cat = Catalog.init(root / "cat")
    ds = cat.register("people", SCHEMA)
    for k in range(3):
        ds.append_rows(_rows(range(k * 5, k * 5 + 5), {2, 7}))
    ds.compact()
    ds.append_rows(_rows([20, 21], {21}))
    ds.migrate(add=["age:int64=0"])
    ds.append_rows([{"id": 30, "who": MARK, "age": 3}])
    return cat.dataset("people")


def _holding(root: Path) -> list[str]:
    area = root / "cat" / "data"
    return sorted(str(p.relative_to(area)) for p in area.rglob("*") if p.is_file() and MARK.encode() in p.read_bytes())


def test_after_a_purge_no_file_of_the_data_area_holds_the_erased_bytes(tmp_path):
    ds = _history_with_secrets(tmp_path)
    versions = ds.info().version
    before = {v: [r["id"] for r in ds.read(v)] for v in range(2, versions + 1)}
    assert len(_holding(tmp_path)) >= 6

    report = ds.delete(f"who = '{MARK}'", purge=True, message="deletion request 42")

    assert _holding(tmp_path) == []
    assert (report.rows, report.version) == (4, versions + 1)
    assert report.erased > report.rows  # old versions held them too
    erased = {2, 7, 21, 30}
    for v, ids in before.items():  # every version still reads, without the erased rows
        assert [r["id"] for r in ds.read(v)] == [i for i in ids if i not in erased]
    last = ds.history()[-1]
    assert (last.kind, last.message) == ("erase", f"deletion request 42 (erase where who = '{MARK}': 9 rows)")
    cat = Catalog.open(tmp_path / "cat")
    assert cat.verify().ok


def test_history_says_what_was_erased_and_how_many_rows_without_the_rows(tmp_path):
    ds = _history_with_secrets(tmp_path)
    report = ds.delete("id IN (2, 7)", purge=True)
    last = ds.history()[-1]
    assert last.message == f"erase where id IN (2, 7): {report.erased} rows"
    assert last.kind == "erase" and last.total_records == ds.info().records


def test_a_dry_run_counts_and_writes_nothing(tmp_path):
    ds = _history_with_secrets(tmp_path)
    held = _holding(tmp_path)
    version = ds.info().version
    report = ds.delete(f"who = '{MARK}'", purge=True, dry_run=True)
    assert report.version is None and report.rows == 4 and report.erased >= 6
    assert _holding(tmp_path) == held and ds.info().version == version


def test_adopted_files_holding_a_match_are_refused_unless_rewriting_them_is_allowed(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("people", SCHEMA)
    outside = tmp_path / "theirs.tfrecord"
    with RecordWriter(outside) as w:
        for row in _rows(range(3), {1}):
            w.write(ds.schema.encode(row))
    ds.adopt([outside])
    ds.append_rows(_rows(range(10, 13), {11}))
    kept = outside.read_bytes()

    with pytest.raises(
        RowChangeError, match=r"1 file the catalog does not own \(adopted or linked: .*theirs\.tfrecord\)"
    ):
        ds.delete(f"who = '{MARK}'", purge=True)
    assert [r["id"] for r in ds.read()] == [0, 1, 2, 10, 11, 12]

    ds.delete(f"who = '{MARK}'", purge=True, rewrite_adopted=True)
    assert [r["id"] for r in ds.read()] == [0, 2, 10, 12]
    assert outside.read_bytes() == kept  # the user's file is theirs: read, never changed
    assert _holding(tmp_path) == []


def test_a_predicate_old_shards_cannot_answer_is_refused_before_anything_is_written(tmp_path):
    ds = _history_with_secrets(tmp_path)
    held = _holding(tmp_path)
    with pytest.raises(
        RowChangeError, match=r"erase: the shards of schema version 1 cannot be searched .*no feature 'age'"
    ):
        ds.delete("age = 3", purge=True)
    assert _holding(tmp_path) == held
    with pytest.raises(UsageError, match="give no --split"):
        ds.delete("id = 1", purge=True, split="train")
    with pytest.raises(UsageError, match="--rewrite-adopted only means something with --purge"):
        ds.delete("id = 1", rewrite_adopted=True)  # a flag silently ignored would read as obeyed
    assert _holding(tmp_path) == held


def test_a_token_makes_a_retry_a_no_op(tmp_path):
    ds = _history_with_secrets(tmp_path)
    first = ds.delete("id = 2", purge=True, token="req-42")
    again = ds.delete("id = 2", purge=True, token="req-42")
    assert again.duplicate and again.version == first.version


CHILD = r"""
import os, signal, sys
from catalog import Catalog, faults

root, point = sys.argv[1:3]

def on_point(name, info):
    if name == point:
        os.kill(os.getpid(), signal.SIGKILL)

faults.install(on_point)
Catalog.open(root).dataset("people").delete("who = 'SECRET-ALICE-7f3a'", purge=True)
"""


@pytest.mark.parametrize("point", ["commit.before", "commit.after"])
def test_a_kill_leaves_the_old_state_or_the_erased_one_and_gc_removes_the_rest(tmp_path, point):
    ds = _history_with_secrets(tmp_path)
    version = ds.info().version
    ids = [r["id"] for r in ds.read()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "cat"), point], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL

    cat = Catalog.open(tmp_path / "cat")
    ds = cat.dataset("people")
    if point == "commit.before":
        assert ds.info().version == version and [r["id"] for r in ds.read()] == ids
        assert len(_holding(tmp_path)) >= 6  # nothing erased yet: the old files are all there
    else:
        assert ds.info().version == version + 1
        assert [r["id"] for r in ds.read()] == [i for i in ids if i not in (2, 7, 21, 30)]
    cat.gc(grace=timedelta(0))
    assert cat.verify().ok
    if point == "commit.after":  # the old files the killed writer did not delete: unregistered, gc's
        assert _holding(tmp_path) == []
    else:
        ds.delete(f"who = '{MARK}'", purge=True)
        assert _holding(tmp_path) == []


def test_a_linked_file_holding_a_match_is_refused_even_when_it_was_linked_just_now(tmp_path):
    # A small file linked in: the link itself changes its ctime, so its fingerprint is
    # "unchecked" (storage.content's racy rule), not "stat:...": it is still the user's file.
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("people", SCHEMA)
    theirs = tmp_path / "theirs.tfrecord"
    with RecordWriter(theirs) as w:
        for row in _rows(range(3), {1}):
            w.write(ds.schema.encode(row))
    ds.append_files([theirs], link=True)
    assert os.stat(theirs).st_nlink == 2
    kept = theirs.read_bytes()

    with pytest.raises(RowChangeError, match=r"1 file the catalog does not own \(adopted or linked: .*\)"):
        ds.delete(f"who = '{MARK}'", purge=True)
    assert [r["id"] for r in ds.read()] == [0, 1, 2]

    ds.delete(f"who = '{MARK}'", purge=True, rewrite_adopted=True)
    assert [r["id"] for r in ds.read()] == [0, 2]
    assert theirs.read_bytes() == kept and _holding(tmp_path) == []


def test_a_message_given_to_an_erasure_keeps_the_predicate_and_the_count_in_history(tmp_path):
    ds = _history_with_secrets(tmp_path)
    report = ds.delete("id IN (2, 7)", purge=True, message="deletion request 43")
    assert ds.history()[-1].message == f"deletion request 43 (erase where id IN (2, 7): {report.erased} rows)"


def test_a_restore_s_own_hard_links_are_the_catalog_s_to_erase(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("people", SCHEMA)
    ds.append_rows(_rows(range(4), {1}))
    ds.delete("id = 3")
    ds.restore(2)  # version 2's shard back, by hard link under a new name
    ds.delete(f"who = '{MARK}'", purge=True)
    assert [r["id"] for r in ds.read()] == [0, 2, 3] and _holding(tmp_path) == []


def test_the_manifest_keeps_no_copy_of_the_erased_rows_statistics(tmp_path, sqlite_only):
    """A shard's statistics hold its string values (the top-values sketch): the erased shards'
    rows go from the manifest, and SQLite keeps deleted rows' bytes in free pages and in the
    write-ahead log until they are reused; after a purge neither file holds them."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("people", SCHEMA)
    ds.append_rows(_rows(range(10), {7}))
    ds.append_rows(_rows(range(10, 20), set()))
    db = tmp_path / "cat" / "catalog.db"
    with sqlite3.connect(db) as conn:
        held = [bytes(v) for (v,) in conn.execute("SELECT data FROM shard_stats")]
    assert any(MARK.encode() in _decoded(v) for v in held)  # what would leak
    ds.delete("id = 7", purge=True)
    manifest = b"".join(p.read_bytes() for p in db.parent.glob("catalog.db*"))
    assert not [v for v in held if MARK.encode() in _decoded(v) and v[:64] in manifest]


def _decoded(stats: bytes) -> bytes:
    """A statistics blob's JSON with its base64 sketches decoded (the values are in those)."""
    text = zlib.decompress(stats).decode()
    return text.encode() + b"".join(base64.b64decode(s) for s in re.findall(r'"([A-Za-z0-9+/]{16,}=*)"', text))


def test_statistics_of_shards_gc_collected_go_with_an_erasure(tmp_path, sqlite_only):
    """A plain delete, then gc: the old shard's file is gone but its statistics (the values of
    its records, the erased one's too) stay for old versions' `stats`. Its records cannot be
    checked for the predicate any more: an erasure drops such statistics, even when no file
    holds a match, and says so."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("people", SCHEMA)
    ds.append_rows(_rows(range(10), {7}))
    ds.delete("id = 7")
    cat.gc(grace=timedelta(0), keep_versions=1)
    db = tmp_path / "cat" / "catalog.db"
    with sqlite3.connect(db) as conn:
        held = [bytes(v) for (v,) in conn.execute("SELECT data FROM shard_stats")]
    assert any(MARK.encode() in _decoded(v) for v in held)
    report = ds.delete(f"who = '{MARK}'", purge=True)
    assert (report.erased, report.version, report.stats_dropped) == (0, None, 1)
    with sqlite3.connect(db) as conn:
        assert not [v for (v,) in conn.execute("SELECT data FROM shard_stats") if MARK.encode() in _decoded(bytes(v))]
    manifest = b"".join(p.read_bytes() for p in db.parent.glob("catalog.db*"))
    assert not [v for v in held if MARK.encode() in _decoded(v) and v[:64] in manifest]
    assert ds.stats(2).at.missing_shards == 1  # version 2's: not computed now
    out = CliRunner().invoke(app, ["-C", str(tmp_path / "cat"), "delete", "people", "--where", "id = 7", "--purge"])
    assert out.stdout == "people: no row matches id = 7: nothing committed\n"  # (dropped already)


def _people(root: Path) -> Any:
    cat = Catalog.init(root / "cat")
    ds = cat.register("people", SCHEMA)
    for k in range(3):
        ds.append_rows(_rows(range(k * 5, k * 5 + 5), {2, 7}))
    return cat.dataset("people")


def _once_before(kind: str, run: Any, request: pytest.FixtureRequest) -> list[str]:
    """Run ``run`` (another writer) once, just before the first commit of ``kind`` goes in."""
    done: list[str] = []

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "commit.before" and info["change"].kind == kind and not done:
            done.append(kind)
            run()

    faults.install(hook)
    request.addfinalizer(lambda: faults.install(None))
    return done


@pytest.mark.parametrize("rewrite", ["update", "delete", "compact", "dedup"])
def test_a_rewrite_planned_before_a_purge_does_not_bring_the_erased_rows_back(
    tmp_path: Path, rewrite: str, request: pytest.FixtureRequest
) -> None:
    """A rewrite that read the shards before an erasure replaced their files commits after it:
    it must start again on the erased files (never register its copies of the old ones)."""
    ds = _people(tmp_path)

    def purge() -> None:
        with Catalog.open(tmp_path / "cat") as other:
            other.dataset("people").delete(f"who = '{MARK}'", purge=True)

    done = _once_before(rewrite if rewrite != "compact" else "compact", purge, request)
    if rewrite == "update":
        ds.update("id >= 0", set={"id": 1})
    elif rewrite == "delete":
        ds.delete("id = 3")
    elif rewrite == "compact":  # it fails in one line instead of planning again
        with pytest.raises(CommitConflictError, match=r"rewritten meanwhile .* erasure"):
            ds.compact()
    else:
        ds.dedup(key=["who"])
    assert done, "the purge ran"
    faults.install(None)
    assert _holding(tmp_path) == []
    assert MARK not in {r["who"] for r in Catalog.open(tmp_path / "cat").dataset("people").read()}


@pytest.mark.parametrize("rewrite", ["update", "compact"])
def test_a_purge_planned_before_a_rewrite_plans_again_on_its_shards(
    tmp_path: Path, rewrite: str, request: pytest.FixtureRequest
) -> None:
    """A rewrite that commits while a purge reads: its new shards hold the rows the purge is to
    erase (read before it), so the purge must plan again on them, not replace the old files only."""
    ds = _people(tmp_path)

    def other_rewrite() -> None:
        with Catalog.open(tmp_path / "cat") as other:
            people = other.dataset("people")
            people.update("id >= 0", set={"id": 1}) if rewrite == "update" else people.compact()

    done = _once_before("erase", other_rewrite, request)
    ds.delete(f"who = '{MARK}'", purge=True)
    assert done
    faults.install(None)
    gc = Catalog.open(tmp_path / "cat")
    gc.gc(grace=timedelta(0))
    assert MARK not in {r["who"] for r in gc.dataset("people").read()}
    assert _holding(tmp_path) == []


def keep_all(row: dict[str, Any]) -> dict[str, Any]:
    """A map that keeps every feature (its rows hold the source's values)."""
    return row


def anonymous(row: dict[str, Any]) -> dict[str, Any]:
    """A map that drops the person's name."""
    return {"id": row["id"]}


def test_a_purge_erases_from_the_datasets_derived_from_it_and_says_so(tmp_path: Path) -> None:
    """A deletion request reaches every copy: a filter of the dataset, a map of that filter (its
    schema takes the predicate), each erased in its own commit, reported with the source's."""
    ds = _people(tmp_path)
    ds.filter("id < 12", into="some")
    some = Catalog.open(tmp_path / "cat").dataset("some")
    some.map(keep_all, into="mapped")
    assert len(_holding(tmp_path)) >= 3
    report = ds.delete(f"who = '{MARK}'", purge=True)
    assert [(d.dataset, d.rows) for d in report.derived] == [("some", 2), ("mapped", 2)]
    assert _holding(tmp_path) == []
    cat = Catalog.open(tmp_path / "cat")
    for name in ("people", "some", "mapped"):
        assert MARK not in {r["who"] for r in cat.dataset(name).read()}
        assert cat.dataset(name).history()[-1].kind == "erase"
    again = ds.delete(f"who = '{MARK}'", purge=True)  # nothing left anywhere: no commit
    assert (again.version, [d.version for d in again.derived]) == (None, [None, None])


def test_a_purge_refuses_before_erasing_when_a_derived_dataset_cannot_take_the_predicate(tmp_path: Path) -> None:
    ds = _people(tmp_path)
    ds.map(anonymous, into="ids")
    before = _holding(tmp_path)
    with pytest.raises(UsageError, match=r"'ids', derived from 'people', cannot take the predicate.*--skip-derived"):
        ds.delete(f"who = '{MARK}'", purge=True)
    assert _holding(tmp_path) == before  # nothing erased anywhere
    report = ds.delete(f"who = '{MARK}'", purge=True, skip_derived=True)
    assert report.derived == [] and _holding(tmp_path) == []


def test_skip_derived_needs_purge(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--skip-derived only means something with --purge"):
        _people(tmp_path).delete("id = 1", skip_derived=True)


def test_the_cli_says_what_it_erased_in_derived_datasets(tmp_path: Path) -> None:
    ds = _people(tmp_path)
    ds.filter("id < 12", into="some")
    out = CliRunner().invoke(
        app, ["-C", str(tmp_path / "cat"), "delete", "people", "--where", f"who = '{MARK}'", "--purge"]
    )
    assert out.exit_code == 0, out.output
    lines = out.output.strip().splitlines()
    assert lines[0].startswith("people: erased 2 rows") and lines[1].startswith("some: erased 2 rows"), out.output


KILLED_UPDATE = r"""
import os, signal, sys
from catalog import Catalog, faults

faults.install(lambda name, info: os.kill(os.getpid(), signal.SIGKILL) if name == "commit.before" else None)
Catalog.open(sys.argv[1]).dataset("people").update("id >= 0", set={"id": 1})
"""


def test_a_purge_names_the_files_a_killed_writer_left_and_gc_grace_0_removes_them(tmp_path: Path) -> None:
    """A writer killed before its commit leaves unregistered copies (of rows to erase, here):
    the erasure does not read them (a live writer's look the same), says how many there are
    and what removes them; gc with no grace does."""
    _people(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", KILLED_UPDATE, str(tmp_path / "cat")], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL
    out = CliRunner().invoke(
        app, ["-C", str(tmp_path / "cat"), "delete", "people", "--where", f"who = '{MARK}'", "--purge"]
    )
    assert out.exit_code == 0, out.output
    leftover = re.search(
        r"people: (\d+) unregistered files? in its folder .* `catalog gc --grace 0` removes them", out.output
    )
    assert leftover and int(leftover.group(1)) >= 1, out.output
    assert _holding(tmp_path)  # the killed writer's copies
    Catalog.open(tmp_path / "cat").gc(grace=timedelta(0))
    assert _holding(tmp_path) == []


def _purge_by_cli(tmp_path: Path) -> Any:
    args = ["-C", str(tmp_path / "cat"), "delete", "people", "--where", f"who = '{MARK}'", "--purge"]
    return CliRunner().invoke(app, args)


def is_secret(row: dict[str, Any]) -> bool:
    return bool(row["who"] == MARK)


def test_a_function_erases_through_filters_only(tmp_path: Path) -> None:
    """A function of the source's rows reaches filters of it (and filters of those), whose rows
    are the source's; a dataset a map made anywhere along the way is refused first."""
    ds = _people(tmp_path)
    ds.filter("id < 12", into="some")
    cat = Catalog.open(tmp_path / "cat")
    cat.dataset("some").filter("id >= 0", into="again")
    report = ds.delete(is_secret, purge=True)
    assert [(d.dataset, d.rows) for d in report.derived] == [("some", 2), ("again", 2)]
    assert _holding(tmp_path) == []
    ds.append_rows(_rows([40], {40}))
    cat.dataset("again").map(keep_all, into="mapped")
    with pytest.raises(UsageError, match=r"'mapped' was derived from 'people' by a map"):
        ds.delete(is_secret, purge=True)
    assert _holding(tmp_path)  # refused before anything was erased: row 40 still there
