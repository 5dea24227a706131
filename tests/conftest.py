"""Shared fixtures. Under CI=true a skipped test is a failure: CI must really run them all."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    # The one exemption: a test marked `ci_may_skip` checks an integration with a package that
    # is no dependency of the project, test extra included, since it does not install on every
    # platform (grain); where it is installed the test runs, where not CI accepts its skip.
    exempt = item.get_closest_marker("ci_may_skip") is not None
    if IN_CI and report.skipped and not hasattr(report, "wasxfail") and not exempt:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped under CI=true (CI must run every test): {reason}"


@pytest.fixture(scope="session")
def tf() -> Any:
    """The TensorFlow module; skips (fails under CI=true) when it is not installed."""
    tf = pytest.importorskip("tensorflow", reason="TensorFlow is not installed (pip install '.[test]')")
    return tf


# --------------------------------------------------------------------------- backends
# The same behaviour suite runs on both manifest backends: a module opts in with
# `pytestmark = pytest.mark.usefixtures("backend")`; a test that is about SQLite itself
# (its file, its backup API) says `@pytest.mark.sqlite_only`. The PostgreSQL runs reach
# their catalogs through $CATALOG_DB_URL, as a user's would, so CLI subprocesses follow too.

BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: runs on the SQLite backend only")
    config.addinivalue_line("markers", "ci_may_skip: its skip (an optional package absent) is no failure under CI")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("backend", ["sqlite"] if only else list(BACKENDS), indirect=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster on loopback for the whole session."""
    from servers import Unavailable, start_postgres

    try:
        pytest.importorskip("psycopg", reason="psycopg is not installed (pip install '.[test]')")
        server = start_postgres()
    except Unavailable as e:
        pytest.skip(f"no PostgreSQL server: {e}")
    import sqlalchemy as sa
    from servers import SECRET_PASSWORD, SECRET_USER

    admin = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {SECRET_USER} LOGIN CREATEDB PASSWORD '{SECRET_PASSWORD}'")
    admin.dispose()
    yield server
    server.stop()


_databases = iter(range(1, 1 << 30))


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    """A new, empty database on the test cluster; dropped afterwards."""
    import sqlalchemy as sa

    name = f"t{next(_databases)}_{os.getpid()}"
    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        yield pg_server.url(name)
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        admin.dispose()


@pytest.fixture
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """ "sqlite" (the embedded default) or "postgresql" (a fresh database, via CATALOG_DB_URL)."""
    if request.param == "postgresql":
        monkeypatch.setenv("CATALOG_DB_URL", request.getfixturevalue("pg_url"))
    else:
        monkeypatch.delenv("CATALOG_DB_URL", raising=False)
    return str(request.param)


@pytest.fixture
def sqlite_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of the embedded default alone: a CATALOG_DB_URL in the caller's environment
    must not send them to another manifest."""
    monkeypatch.delenv("CATALOG_DB_URL", raising=False)


# --------------------------------------------------------------------------- object storage


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """moto's S3 server on loopback for the whole session."""
    from servers import Unavailable, start_s3

    try:
        pytest.importorskip("s3fs", reason="s3fs is not installed (pip install '.[test]')")
        server = start_s3()
    except Unavailable as e:
        pytest.skip(f"no S3 server: {e}")
    yield server
    server.stop()


_buckets = iter(range(1, 1 << 30))


@pytest.fixture
def s3_url(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """``s3://<new bucket>/data``, with the credentials and endpoint in the standard AWS
    environment variables (subprocesses inherit them), as a user would have them."""
    import fsspec
    from servers import S3_ENV

    for key, value in S3_ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    fsspec.filesystem("s3").invalidate_cache()
    bucket = f"catalog-test-{next(_buckets)}-{os.getpid()}"
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(bucket)
    return f"s3://{bucket}/data"


@pytest.fixture
def every_index_a_file() -> Iterator[None]:
    """Every shard's record index a file of its own, however small the shard: for the tests of
    index files, whose shards are tiny (a local shard of at most storage.index.FILE_MIN_BYTES
    keeps none). A patch of its own: a test's monkeypatch.undo() leaves it in place."""
    from catalog.storage import index

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index, "FILE_MIN_BYTES", 0)
        yield
