"""Engines and what the database says (catalog/manifest/engine.py): bad URLs, unreachable and
damaged databases are one ManifestError line naming the manifest; locks pass through."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from catalog.errors import ManifestError
from catalog.manifest.engine import (
    BUSY_TIMEOUT_MS,
    VERIFY_HINT,
    check_connection,
    damaged,
    integrity_problems,
    is_lock_error,
    make_engine,
    manifest_errors,
    manifest_where,
)


def test_a_sqlite_engine_sets_up_its_connections(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == BUSY_TIMEOUT_MS
    assert manifest_where(engine) == f"sqlite:///{tmp_path / 'c.db'}"
    assert integrity_problems(engine) == []


def test_bad_urls_are_one_manifest_error() -> None:
    with pytest.raises(ManifestError) as e:
        make_engine("postgresql://me:pw@host:12ab/db")
    assert str(e.value) == "bad database URL: its port '12ab' is not a number"
    with pytest.raises(ManifestError) as e1:  # unparsable: not echoed, it may hold a password
        make_engine("me:pw@no-scheme-here")
    assert str(e1.value) == (
        "bad database URL '<unparsable database URL>': Could not parse SQLAlchemy URL from given URL string"
    )
    with pytest.raises(ManifestError) as e2:
        make_engine("nosuchdb://me:pw@h/db")
    assert str(e2.value) == "bad database URL 'nosuchdb://me@h/db': Can't load plugin: sqlalchemy.dialects:nosuchdb"
    with pytest.raises(ManifestError) as e3:  # a dialect whose driver is not installed
        make_engine("mysql+mysqldb://me:pw@h/db")
    assert str(e3.value) == "no database driver for 'mysql+mysqldb://me@h/db': No module named 'MySQLdb'"


def test_an_unreachable_database_names_itself_without_its_password(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    with pytest.raises(ManifestError) as e:
        check_connection(engine)
    assert str(e.value).startswith(f"cannot connect to the manifest database sqlite:///{tmp_path}/no/such/dir.db: ")


def test_a_damaged_file_is_one_line_naming_the_manifest(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database" * 512)
    engine = make_engine(f"sqlite:///{path}")
    with pytest.raises(ManifestError) as e, manifest_errors(engine), engine.connect() as conn:
        conn.execute(text("SELECT * FROM sqlite_master"))
    assert str(e.value) == f"manifest database error in sqlite:///{path}: file is not a database"
    message = str(damaged(engine, "totals disagree"))
    assert message == f"sqlite:///{path}: the manifest is damaged: totals disagree{VERIFY_HINT}"


def test_locks_and_values_go_their_own_ways(tmp_path: Path) -> None:
    locked = OperationalError("BEGIN", {}, sqlite3.OperationalError("database is locked"))
    other = OperationalError("SELECT", {}, sqlite3.OperationalError("no such table: x"))
    assert is_lock_error(locked) and not is_lock_error(other)
    engine = make_engine(f"sqlite:///{tmp_path / 'c.db'}")
    with pytest.raises(OperationalError), manifest_errors(engine):  # a lock: the caller waits it out
        raise locked
    with pytest.raises(ManifestError) as e, manifest_errors(engine):
        raise ValueError("Invalid isoformat string: 'yesterday'")
    where = f"sqlite:///{tmp_path / 'c.db'}"
    assert str(e.value) == f"manifest database error in {where}: Invalid isoformat string: 'yesterday'"
