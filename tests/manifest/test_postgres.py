"""What only a shared PostgreSQL manifest has: attaching, secrets, machines appending at once,
and copying manifests between backends. (The rest of the behaviour suite runs on both
backends through the `backend` fixture.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from servers import SECRET_PASSWORD, SECRET_USER, free_port
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.manifest import METADATA

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "who": {"dtype": "string"}}}


@pytest.fixture(autouse=True)
def _no_env_url(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CATALOG_DB_URL", "PGPASSWORD", "CATALOG_ROOT"):
        monkeypatch.delenv(var, raising=False)


def cli(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def ids_of(ds: Any) -> list[int]:
    return [r["id"] for r in ds.read()]


def test_init_keeps_the_manifest_in_postgres_and_attaches_a_second_directory(pg_url: str, tmp_path: Path) -> None:
    first, second = tmp_path / "machine-a", tmp_path / "machine-b"
    out = cli("init", str(first), "--db-url", pg_url).stdout
    assert "manifest postgresql+psycopg://postgres@127.0.0.1" in out
    assert not (first / "catalog.db").exists()  # no SQLite file: the manifest is in PostgreSQL
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    cli("-C", str(first), "register", "events", "--schema", str(tmp_path / "s.json"))
    with Catalog.open(first) as a:
        a.dataset("events").append_rows([{"id": 1, "who": "a"}])
        data_root = a.data_root
    assert data_root.is_absolute() and data_root == (first / "data").resolve()

    cli("init", str(second), "--db-url", pg_url)  # the same URL again: attach, not create
    with Catalog.open(second) as b:
        assert b.data_root == data_root  # one data area, recorded in the manifest
        ds = b.dataset("events")
        assert ids_of(ds) == [1]
        ds.append_rows([{"id": 2, "who": "b"}])
    listed = json.loads(cli("-C", str(first), "list", "--json").stdout)
    assert [(d["name"], d["version"], d["records"]) for d in listed] == [("events", 3, 2)]
    with sa.create_engine(pg_url).connect() as conn:
        assert conn.exec_driver_sql("SELECT value FROM catalog_meta WHERE key = 'data_root'").scalar() == str(data_root)


def test_attaching_with_another_storage_is_refused(pg_url: str, tmp_path: Path) -> None:
    cli("init", str(tmp_path / "a"), "--db-url", pg_url)
    result = cli("init", str(tmp_path / "b"), "--db-url", pg_url, "--storage", str(tmp_path / "elsewhere"), ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: this manifest keeps its data at ")
    assert not (tmp_path / "b" / "catalog.json").exists()


def test_catalog_db_url_at_init_and_plain_postgresql_scheme(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CATALOG_DB_URL", pg_url.replace("postgresql+psycopg://", "postgresql://"))
    cli("init", str(tmp_path / "c"))
    doc = json.loads((tmp_path / "c" / "catalog.json").read_text())
    assert doc["db_url"] == pg_url  # normalized to the psycopg 3 driver
    monkeypatch.delenv("CATALOG_DB_URL")
    with Catalog.open(tmp_path / "c") as cat:
        assert cat.engine.dialect.name == "postgresql"


@pytest.fixture
def secret_db(pg_server: Any) -> Any:
    """A database owned by the role that needs a password."""
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    name = f"secret_{os.getpid()}_{time.monotonic_ns()}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name} OWNER {SECRET_USER}")
    bare = f"postgresql+psycopg://{SECRET_USER}@127.0.0.1:{pg_server.port}/{name}"
    yield bare, bare.replace(f"{SECRET_USER}@", f"{SECRET_USER}:{SECRET_PASSWORD}@")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    admin.dispose()


def test_passwords_are_never_recorded_nor_printed(
    secret_db: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, with_password = secret_db
    root = tmp_path / "c"
    result = cli("init", str(root), "--db-url", with_password)
    assert SECRET_PASSWORD not in result.output
    assert "the password was not recorded" in result.stdout
    text = (root / "catalog.json").read_text()
    assert json.loads(text)["db_url"] == bare and SECRET_PASSWORD not in text

    # Without the secret the server refuses us: one line, no password, exit 1.
    result = cli("-C", str(root), "list", ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot connect to the manifest database {bare}: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

    # Each place a secret may come from works: CATALOG_DB_URL, PGPASSWORD, ~/.pgpass.
    monkeypatch.setenv("CATALOG_DB_URL", with_password)
    assert cli("-C", str(root), "list", "--json").stdout.strip() == "[]"
    monkeypatch.delenv("CATALOG_DB_URL")
    monkeypatch.setenv("PGPASSWORD", SECRET_PASSWORD)
    assert cli("-C", str(root), "list", "--json").stdout.strip() == "[]"
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"127.0.0.1:*:*:{SECRET_USER}:{SECRET_PASSWORD}\n")
    pgpass.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    assert cli("-C", str(root), "list", "--json").stdout.strip() == "[]"

    # A wrong password in the environment: the error masks whatever we were given.
    monkeypatch.delenv("PGPASSFILE")
    monkeypatch.setenv("PGPASSWORD", "wrong-secret-xyz")
    result = cli("-C", str(root), "show", "nope", ok=False)
    assert result.exit_code == 1 and "wrong-secret-xyz" not in result.output


@pytest.mark.parametrize(
    ("url", "safe", "redacted"),
    [
        ("postgresql://alice:pw1@h/db", "postgresql://alice@h/db", "*** pw2 pw3"),
        ("postgresql://alice@h/db?password=pw1&ssl=on", "postgresql://alice@h/db?ssl=on", "*** pw2 pw3"),
        ("postgresql://alice:pw1@h/db?password=pw2&password=pw3", "postgresql://alice@h/db", "*** *** ***"),
        ("postgresql://alice@h/db", "postgresql://alice@h/db", "pw1 pw2 pw3"),
        # never printed, so there is nothing to redact: make_engine's error does not quote it
        ("postgresql://alice@h:notaport/db?password=pw1", "<unparsable database URL>", "pw1 pw2 pw3"),
    ],
)
def test_safe_url_strips_every_password(url: str, safe: str, redacted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from catalog.manifest import has_password, redact, safe_url

    assert safe_url(url) == safe
    assert has_password(url) is (redacted != "pw1 pw2 pw3")
    monkeypatch.setenv("CATALOG_DB_URL", url)
    assert redact("pw1 pw2 pw3") == redacted


def test_a_password_in_the_query_is_never_recorded_nor_printed(
    secret_db: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare, _ = secret_db
    in_query = f"{bare}?password={SECRET_PASSWORD}"  # libpq takes the password from the query too
    root = tmp_path / "c"
    result = cli("init", str(root), "--db-url", in_query)
    assert SECRET_PASSWORD not in result.output and "the password was not recorded" in result.stdout
    text = (root / "catalog.json").read_text()
    assert json.loads(text)["db_url"] == bare and SECRET_PASSWORD not in text
    result = cli("-C", str(root), "list", ok=False)
    assert result.stderr.startswith(f"error: cannot connect to the manifest database {bare}: ")
    monkeypatch.setenv("CATALOG_DB_URL", in_query)  # the same database: its password is used
    assert cli("-C", str(root), "list", "--json").stdout.strip() == "[]"
    monkeypatch.setenv("CATALOG_DB_URL", f"{bare}?password=wrong-secret-xyz")
    result = cli("-C", str(root), "list", ok=False)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and "wrong-secret-xyz" not in result.output
    monkeypatch.delenv("CATALOG_DB_URL")
    result = cli("init", str(tmp_path / "d"), "--db-url", f"{bare}?password=wrong-secret-xyz", ok=False)
    assert result.stderr.startswith(f"error: cannot connect to the manifest database {bare}: ")
    assert "wrong-secret-xyz" not in result.output

    # copy-manifest, --json and text, into the database with the password in the query
    lite = tmp_path / "lite"
    Catalog.init(lite).close()
    engine = sa.create_engine(in_query)
    try:
        METADATA.drop_all(engine)  # empty again after the init above
        doc = json.loads(cli("-C", str(lite), "copy-manifest", in_query, "--no-switch", "--json").stdout)
        assert doc["target"] == bare
        METADATA.drop_all(engine)
    finally:
        engine.dispose()
    result = cli("-C", str(lite), "copy-manifest", in_query)
    assert result.stdout.startswith("copied ") and f"to {bare}\n" in result.stdout
    assert SECRET_PASSWORD not in result.output
    text = (lite / "catalog.json").read_text()
    assert json.loads(text)["db_url"] == bare and SECRET_PASSWORD not in text


def test_unreachable_server_is_one_line_and_quick(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://someone:hunter2@127.0.0.1:{free_port()}/nowhere"
    start = time.monotonic()
    result = cli("init", str(tmp_path / "c"), "--db-url", url, ok=False)
    assert time.monotonic() - start < 30
    assert result.exit_code == 1
    assert result.stderr.startswith("error: cannot connect to the manifest database postgresql+psycopg://someone@")
    assert "hunter2" not in result.output and result.stderr.count("\n") == 1
    assert not (tmp_path / "c" / "catalog.json").exists()


MACHINE = r"""
import json, sys
from catalog import Catalog

root, who, first, count, barrier = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
import os, time
while not os.path.exists(barrier):
    time.sleep(0.005)
out = []
with Catalog.open(root) as cat:
    ds = cat.dataset("events")
    for i in range(first, first + count):
        c = ds.append_rows([{"id": i, "who": who}], token=f"{who}-{i}")
        out.append(c.version)
print(json.dumps(out))
"""


def test_machines_appending_at_once_land_every_commit_once(pg_url: str, tmp_path: Path) -> None:
    """Four "machines" (own catalog directory, own process, one manifest and data area)."""
    machines, per = 4, 15
    with Catalog.init(tmp_path / "m0", pg_url) as cat:
        cat.register("events", SCHEMA)
    for m in range(1, machines):
        Catalog.init(tmp_path / f"m{m}", pg_url).close()
    barrier = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", MACHINE, str(tmp_path / f"m{m}"), f"m{m}", str(m * 1000), str(per), str(barrier)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for m in range(machines)
    ]
    time.sleep(0.5)
    barrier.touch()
    versions: list[int] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err  # no error reached any writer
        versions += json.loads(out)
    total = machines * per
    assert sorted(versions) == list(range(2, 2 + total))  # gapless, each version once
    with Catalog.open(tmp_path / "m2") as cat:
        ds = cat.dataset("events")
        assert ds.version == 1 + total
        assert Counter(ids_of(ds)) == Counter(m * 1000 + i for m in range(machines) for i in range(per))
        assert [c.version for c in ds.history()] == list(range(1, 2 + total))
        assert cat.verify().ok


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every manifest table, in primary-key order."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            # A switched-from manifest carries its "moved_to" mark, which the copy must not.
            return {
                t.name: [
                    tuple(r)
                    for r in conn.execute(sa.select(t).order_by(*t.primary_key.columns))
                    if t.name != "catalog_meta" or r[0] != "moved_to"
                ]
                for t in METADATA.sorted_tables
            }
    finally:
        engine.dispose()


def test_copy_manifest_sqlite_to_postgres_and_back_loses_nothing(pg_url: str, tmp_path: Path) -> None:
    root = tmp_path / "c"
    with Catalog.init(root) as cat:
        ds = cat.register("events", SCHEMA, description="copied")
        for i in range(5):
            ds.append_rows([{"id": 10 * i + k, "who": "x"} for k in range(3)], token=f"t{i}", shard_records=2)
        ds.migrate(add=["score:float32=0.5"])
        ds.compact()
        before_rows = ids_of(ds)
    sqlite_url = f"sqlite:///{root / 'catalog.db'}"
    original = _rows(sqlite_url)

    result = cli("-C", str(root), "copy-manifest", pg_url, "--json")
    report = json.loads(result.stdout)
    assert report["rows"]["shards"] == len(original["shards"]) and report["switched"] is True
    assert json.loads((root / "catalog.json").read_text())["db_url"] == pg_url
    copied = _rows(pg_url)
    data_root = str((root / "data").resolve())
    expect_meta = [(k, data_root if k == "data_root" else v) for k, v in original["catalog_meta"]]
    assert copied == {**original, "catalog_meta": expect_meta}

    with Catalog.open(root) as cat:  # now on PostgreSQL: reads, appends (ids continue), verify
        ds = cat.dataset("events")
        assert ids_of(ds) == before_rows
        commit = ds.append_rows([{"id": 99, "who": "pg", "score": 1.0}])
        assert commit.version == ds.version + 1
        assert cat.verify().ok

    back = tmp_path / "back.db"
    cli("-C", str(root), "copy-manifest", f"sqlite:///{back}")
    assert _rows(f"sqlite:///{back}") == _rows(pg_url)
    with Catalog.open(root) as cat:
        assert cat.engine.dialect.name == "sqlite"
        assert ids_of(cat.dataset("events")) == [*before_rows, 99]


def test_copy_manifest_refuses_a_target_that_holds_one(pg_url: str, tmp_path: Path) -> None:
    Catalog.init(tmp_path / "pg", pg_url).close()
    Catalog.init(tmp_path / "lite").close()
    result = cli("-C", str(tmp_path / "lite"), "copy-manifest", pg_url, ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: postgresql+psycopg://") and "already holds a manifest" in result.stderr
    assert json.loads((tmp_path / "lite" / "catalog.json").read_text())["db_url"] is None


def test_the_current_shard_list_comes_in_index_order_without_a_sort(pg_url: str, tmp_path: Path) -> None:
    """A million-shard `files()` or `show --json` must not wait for PostgreSQL to sort the whole
    list: the live shards' query has to be one the index (dataset, removed_version, seq) answers
    in order. The planner is told to avoid sequential scans, as it would at a million rows."""
    from catalog.commit.handles import live_at

    with Catalog.init(tmp_path / "c", pg_url) as cat:
        ds = cat.register("events", SCHEMA)
        for start in (0, 10, 20):
            with ds.writer(shard_records=2) as w:
                for i in range(start, start + 10):
                    w.write({"id": i, "who": "x"})
        ds.compact(target_size=1 << 20)  # retired shards in the table too
        ds.append_rows([{"id": 30, "who": "y"}])
        with cat.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE shards")
            conn.exec_driver_sql("SET enable_seqscan = off")
            query = live_at(conn, ds.id, ds.info().version)
            sql = str(query.compile(conn, compile_kwargs={"literal_binds": True}))
            plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + sql))
        assert "ix_shards_live_seq" in plan and "Sort" not in plan, plan
        assert ids_of(ds) == list(range(31))
        assert ds.files() == [s.path for s in ds.shards()] and len(ds.files()) == 2


def test_one_splits_shards_come_from_the_split_index_in_order_after_an_upgrade(pg_url: str, tmp_path: Path) -> None:
    """Planning a read of one split asks for that split's live shards in read order: on a
    format-9 manifest brought to format 10 by `upgrade`, the index (dataset, removed_version,
    split, seq) answers it without a pass over the other splits' shards and without a sort."""
    from catalog.commit.handles import live_at
    from catalog.manifest import SHARDS

    with Catalog.init(tmp_path / "c", pg_url) as cat:
        ds = cat.register("events", SCHEMA)
        ds.append_rows([{"id": i, "who": "x"} for i in range(6)], shard_records=2)
        ds.append_rows([{"id": 6, "who": "y"}], split="test")
        with cat.engine.begin() as conn:  # what format 9 had
            conn.exec_driver_sql("DROP INDEX ix_shards_split_seq")
            conn.exec_driver_sql(
                "CREATE INDEX ix_shards_split_totals ON shards (dataset_id, removed_version, split, records, bytes)"
            )
            conn.exec_driver_sql("ALTER TABLE commits DROP COLUMN splits")
            conn.exec_driver_sql("UPDATE catalog_meta SET value = '9' WHERE key = 'format_version'")
        assert cli("-C", str(tmp_path / "c"), "upgrade").stdout.startswith("manifest format 9 -> ")
        with cat.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE shards")
            conn.exec_driver_sql("SET enable_seqscan = off")
            query = live_at(conn, ds.id, ds.info().version).where(SHARDS.c.split.in_(["test"]))
            sql = str(query.compile(conn, compile_kwargs={"literal_binds": True}))
            plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + sql))
        assert "ix_shards_split_seq" in plan and "Sort" not in plan, plan
        assert [r["id"] for r in ds.read(split="test")] == [6]


def test_backup_of_a_postgres_manifest_is_a_sqlite_file_holding_every_row(pg_url: str, tmp_path: Path) -> None:
    root = tmp_path / "c"
    with Catalog.init(root, pg_url) as cat:
        ds = cat.register("events", SCHEMA)
        for i in range(3):
            ds.append_rows([{"id": i, "who": "x"}], token=f"t{i}")
        ds.migrate(add=["score:float32=0.5"])
    out = tmp_path / "manifest-backup.db"
    assert cli("-C", str(root), "backup", str(out)).exit_code == 0
    assert _rows(f"sqlite:///{out}") == _rows(pg_url)
    again = cli("-C", str(root), "backup", str(out), ok=False)
    assert again.exit_code == 1 and again.stderr == f"error: {out}: already exists; use --force to replace it\n"


def test_a_server_gone_mid_read_is_one_manifest_error(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed `show --json` whose server connection dies between chunks: the ManifestError
    line the CLI prints, not a driver traceback."""
    from catalog.commit import handles
    from catalog.errors import ManifestError

    monkeypatch.setattr(handles, "SHARD_CHUNK", 2)  # a round trip to the server every 2 shards
    with Catalog.init(tmp_path / "c", pg_url) as cat:
        ds = cat.register("events", SCHEMA)
        ds.append_rows([{"id": i, "who": "x"} for i in range(10)], shard_records=1)
        shards = ds.iter_shards()
        assert next(shards).records == 1
        killer = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
        with killer.connect() as conn:
            conn.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND datname = current_database()"
            )
        killer.dispose()
        with pytest.raises(ManifestError, match=r"^manifest database error in postgresql\+psycopg://") as caught:
            list(shards)
        assert "\n" not in str(caught.value)
        assert len(ds.shards()) == 10  # the next read reconnects (pool_pre_ping)
