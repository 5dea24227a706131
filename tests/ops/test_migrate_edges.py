"""Edges of migrations: appends that never stop landing, and data written in an older schema."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

import catalog.ops.migrations.runner as migrations
from catalog import Catalog, faults
from catalog import manifest as mf
from catalog.cli import app
from catalog.errors import AppendError, CommitConflictError, ValidationError
from catalog.manifest import INTENTS

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
runner = CliRunner()


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    c = Catalog.init(tmp_path / "c")
    c.register("events", SCHEMA).append_rows([{"id": i, "text": f"t{i}"} for i in range(20)], shard_records=7)
    return c


def _data_files(cat: Catalog) -> set[str]:
    return {p.name for p in (cat.data_root / "events").iterdir()}


def test_appends_that_keep_landing_fail_the_migration_cleanly(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    appended: list[int] = []

    def append_before_each_migration_commit(name: str, info: dict[str, Any]) -> None:
        # another writer commits after every pass over the shards, as the migration commits
        if name == "commit.before" and info["change"].kind == "migrate":
            n = 100 + len(appended)
            with Catalog.open(cat.root) as other:
                other.dataset("events").append_rows([{"id": n, "text": "late"}])
            appended.append(n)

    faults.install(append_before_each_migration_commit)
    request.addfinalizer(lambda: faults.install(None))
    monkeypatch.setattr(migrations, "CATCHUP_ROUNDS", 3)
    before = cat.dataset("events").info()
    with pytest.raises(CommitConflictError, match="appends to 'events' kept landing during the migration"):
        cat.dataset("events").migrate(tmp_path / "m", add=["n:int64=1"], workers=1)
    assert len(appended) == 3  # one pass per round, each raced by an append
    after = cat.dataset("events").info()
    assert (after.schema_version, after.records) == (before.schema_version, before.records + 3)
    with mf.read_txn(cat.engine) as conn:
        assert conn.execute(select(INTENTS.c.id)).all() == []  # the intent went with its files
    registered = {Path(p).name for p in cat.dataset("events").files()}
    assert _data_files(cat) == registered
    # once the appends stop, the same migration goes through with every record
    faults.install(None)
    cat.dataset("events").migrate(tmp_path / "m", add=["n:int64=1"], workers=1)
    rows = list(cat.dataset("events").read())
    assert [r["id"] for r in rows] == list(range(20)) + appended and {r["n"] for r in rows} == {1}


@pytest.mark.parametrize("form", ["rows", "tfrecord", "jsonl"])
def test_data_in_a_schema_from_before_a_migration_names_both_versions(cat: Catalog, tmp_path: Path, form: str) -> None:
    old = cat.dataset("events")
    old.export(tmp_path / "old.tfrecord")
    (tmp_path / "old.jsonl").write_text(json.dumps({"id": 7, "text": "x"}) + "\n")
    Catalog.open(cat.root).dataset("events").migrate(tmp_path / "m", rename=["text:caption"], workers=1)
    fresh = Catalog.open(cat.root).dataset("events")  # validates against schema version 2
    version = fresh.version
    with pytest.raises(ValidationError if form == "rows" else AppendError) as err:  # bad data, no conflict (issue 30)
        if form == "rows":
            fresh.append_rows([{"id": 7, "text": "x"}])
        else:
            fresh.append_files([tmp_path / f"old.{form}"])
    assert "feature 'caption': missing" in str(err.value)
    assert "this data is in schema version 1 of 'events', which is at schema version 2 now" in str(err.value)
    assert Catalog.open(cat.root).dataset("events").version == version  # nothing registered
    # data in the current schema is still told apart from both: a plain schema error
    with pytest.raises(Exception, match="feature 'nope': not in the schema") as plain:
        fresh.append_rows([{"id": 1, "caption": "c", "nope": 1}])
    assert not isinstance(plain.value, CommitConflictError)


def test_cli_append_of_old_schema_file_is_one_line(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset("events").export(tmp_path / "old.tfrecord")
    cat.dataset("events").migrate(tmp_path / "m", drop=["text"], workers=1)
    result = runner.invoke(app, ["-C", str(cat.root), "append", "events", str(tmp_path / "old.tfrecord")])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {tmp_path / 'old.tfrecord'}: record 0: feature 'text': not in the schema; this data is in schema "
        "version 1 of 'events', which is at schema version 2 now (migrated): migrate the data, or write it in the "
        "new schema\n"
    )


def test_parallel_cast_failure_names_the_first_bad_record_in_dataset_order(tmp_path: Path) -> None:
    # shard 0 is large and fails on its last record; shard 1 is tiny and fails at once, so
    # its worker reports first: the error must still be shard 0's, as a run in order says
    cat = Catalog.init(tmp_path / "c")
    ds = cat.register("m", {"features": {"x": {"dtype": "float32"}}})
    big, small = 60_000, 5
    ds.append_rows([{"x": 1.0}] * (big - 1) + [{"x": 0.5}], shard_records=big)
    ds.append_rows([{"x": 2.5}] * small)
    first = cat.dataset("m").files()[0]
    mdir = tmp_path / "m"
    (mdir / "m").mkdir(parents=True)
    (mdir / "m" / "0001_cast.py").write_text(
        'from catalog.migrate import CastField\noperations = [CastField("x", {"dtype": "int64"})]\n'
    )
    with pytest.raises(migrations.MigrationError) as err:
        cat.dataset("m").migrate(mdir, workers=2)
    assert f"{first}: record {big - 1}: feature 'x': value 0.5 cannot be cast to int64" in str(err.value)


def test_a_long_inline_job_keeps_its_intent_alive(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import catalog.commit.intents as intents
    import catalog.executors as executors

    monkeypatch.setattr(intents, "HEARTBEAT_EVERY", timedelta(0))
    monkeypatch.setattr(executors, "WAIT_SLICE", 0.01)
    beats: list[str] = []
    real_beat = intents.Intent.beat

    def counting_beat(self: intents.Intent) -> None:
        real_beat(self)
        beats.append(self.id)

    monkeypatch.setattr(intents.Intent, "beat", counting_beat)
    mdir = tmp_path / "m"
    (mdir / "events").mkdir(parents=True)
    (mdir / "events" / "0001_slow.py").write_text(
        "import time\nfrom catalog.migrate import AddField\n"
        'operations = [AddField("t", {"dtype": "int64"}, fn=lambda r: time.sleep(0.02) or 1)]\n'
    )
    cat.dataset("events").compact(workers=1)  # one shard: one job, run inline
    cat.dataset("events").migrate(mdir, workers=1)
    assert len(beats) >= 5  # 20 records x 20 ms: beaten from the side while the one job ran
    with mf.read_txn(cat.engine) as conn:
        assert conn.execute(select(INTENTS.c.id)).all() == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('CastField("v", "float32")', "CastField('v', ...): the feature is given by its JSON form"),
        ('AddField("w", "int64", default=0)', "AddField('w', ...): the feature is given by its JSON form"),
        ('AddField("", {"dtype": "int64"}, default=0)', "AddField: a feature name is a non-empty string"),
        ('Transform("not a function", {"features": {}})', "Transform: its first argument is a function of the row"),
    ],
)
def test_a_script_with_bad_operation_arguments_is_one_line(tmp_path: Path, line: str, said: str) -> None:
    """A script's operation built with the wrong kind of argument: one line naming the script
    and the operation, exit 1, nothing migrated (was a Python traceback from deep inside)."""
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", {"features": {"v": {"dtype": "int64"}}}).append_rows([{"v": 1}])
    script = tmp_path / "migrations" / "d" / "0001_bad.py"
    script.parent.mkdir(parents=True)
    script.write_text(f"from catalog.migrate import AddField, CastField, Transform\n\noperations = [{line}]\n")
    args = ["-C", str(cat.root), "migrate", "d", "--migrations", str(tmp_path / "migrations")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith(f"error: {script}: {said}")
    assert cat.dataset("d").version == 2


ADD_REQUIRED = (
    "from catalog.migrate import AddField\n\n"
    'operations = [AddField("n", {"dtype": "int64"}, fn=lambda row: row["id"] * 2)]\n'
)
OLD_ROW_SAYS = "this data is in schema version 1 of 'events', which is at schema version 2 now"


@pytest.mark.parametrize("handle", ["migrating", "fresh", "stale"])
def test_rows_in_the_old_feature_set_after_a_migration_are_a_validation_error(
    cat: Catalog, tmp_path: Path, handle: str
) -> None:
    # issue 30: rows missing the feature a migration added raised CommitConflictError, the same
    # rows with one unknown key more ValidationError; a conflict is only a concurrent commit
    stale = cat.dataset("events")  # opened before the migration
    (tmp_path / "m" / "events").mkdir(parents=True)
    (tmp_path / "m" / "events" / "0001_n.py").write_text(ADD_REQUIRED)
    migrating = cat.dataset("events")
    migrating.migrate(tmp_path / "m", workers=1)
    ds = {"migrating": migrating, "fresh": Catalog.open(cat.root).dataset("events"), "stale": stale}[handle]
    version = Catalog.open(cat.root).dataset("events").version
    with pytest.raises(ValidationError, match=rf"row 0: feature 'n': missing .*; {OLD_ROW_SAYS}") as err:
        ds.append_rows([{"id": 1, "text": "a"}])
    assert not isinstance(err.value, CommitConflictError)
    with pytest.raises(ValidationError, match=r"^row 0: feature 'n': missing \(the feature has no default\)$"):
        ds.append_rows([{"id": 1, "text": "a", "nope": 1}])
    with pytest.raises(ValidationError, match=rf"feature 'n': missing.*; {OLD_ROW_SAYS}"):
        ds.append_rows({"id": [1, 2], "text": ["a", "b"]})  # a dict of columns
    (tmp_path / "old.jsonl").write_text(json.dumps({"id": 7, "text": "x"}) + "\n")
    (tmp_path / "old.csv").write_text("id,text\n7,x\n")
    with pytest.raises(AppendError, match=rf"old\.jsonl: record 0 \(line 1\): feature 'n': missing.*; {OLD_ROW_SAYS}"):
        ds.append_files([tmp_path / "old.jsonl"])
    with pytest.raises(AppendError, match=r"old\.csv: line 1: no column 'n', and the feature has no default"):
        ds.append_files([tmp_path / "old.csv"])
    result = runner.invoke(app, ["-C", str(cat.root), "append", "events", str(tmp_path / "old.jsonl")])
    assert result.exit_code == 1 and OLD_ROW_SAYS in result.stderr
    assert Catalog.open(cat.root).dataset("events").version == version  # nothing registered
    assert ds.append_rows([{"id": 1, "text": "a", "n": 2}]).schema_version == 2  # rows in the new schema land
