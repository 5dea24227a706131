"""Throwaway servers for the tests and the benchmarks: a PostgreSQL cluster from the machine's
own binaries, moto's S3.

Nothing here is mocked: the tests talk to a real server on loopback. A server the machine
lacks is installed only under CI=true as root (Debian's package); elsewhere the tests that
need it skip with the reason. The benchmarks' harness starts its servers here too (as
``tests.servers``): one set-up for both, and the package itself depends on neither.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_SETTINGS = {
    # A throwaway cluster: durability of the server itself is not under test, speed is welcome.
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
}


class Unavailable(Exception):
    """The server cannot run on this machine; the message says why."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_bindir() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


def _install_postgres() -> None:
    """Debian's server package, for CI machines that only have the client."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise Unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's `postgresql`")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "postgresql"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise Unavailable(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")


# A role that must give a password (every other connection is trusted): the tests of how
# secrets reach the server use it.
SECRET_USER = "catalog_secret"
SECRET_PASSWORD = "pw-Zq7-never-printed"


def _require_password(hba: Path) -> None:
    """The first matching pg_hba line wins: SECRET_USER over TCP needs scram, others trust."""
    rule = f"host all {SECRET_USER} 127.0.0.1/32 scram-sha-256\n"
    hba.write_text(rule + hba.read_text())


@dataclass
class Postgres:
    bindir: Path
    home: Path  # owned by the server's user: data directory, socket, log
    port: int
    as_user: list[str]  # the command prefix that runs server binaries as a non-root user

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *args: str) -> None:
        done = subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.home / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise Unavailable(f"{Path(args[0]).name} failed: {done.stderr.strip()[-800:]} {tail}")

    def stop(self) -> None:
        try:
            self.run(str(self.bindir / "pg_ctl"), "-D", str(self.home / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.home, ignore_errors=True)


def start_postgres(settings: dict[str, str] | None = None) -> Postgres:
    """initdb + pg_ctl start on a free loopback port with ``settings`` (PG_SETTINGS unless
    given); as `postgres` when we are root (initdb refuses to run as root). ``stop()``
    removes it all."""
    bindir = _pg_bindir()
    if bindir is None:
        if not IN_CI:
            raise Unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found; install Debian's `postgresql`")
        _install_postgres()
        bindir = _pg_bindir()
        if bindir is None:
            raise Unavailable("installed `postgresql` but found no initdb")
    home = Path(tempfile.mkdtemp(prefix="catalog-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            raise Unavailable("running as root without runuser: cannot start PostgreSQL as another user")
        try:
            shutil.chown(home, "postgres")
        except LookupError as e:
            raise Unavailable("running as root and there is no `postgres` user to run the server as") from e
        as_user = ["runuser", "-u", "postgres", "--"]
    pg = Postgres(bindir, home, free_port(), as_user)
    data = str(home / "data")
    pg.run(str(bindir / "initdb"), "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
    _require_password(home / "data" / "pg_hba.conf")
    settings = PG_SETTINGS if settings is None else settings
    opts = " ".join([f"-p {pg.port}", f"-k {home}", *(f"-c {k}={v}" for k, v in settings.items())])
    pg.run(str(bindir / "pg_ctl"), "-D", data, "-o", opts, "-l", str(home / "log"), "-w", "-t", "60", "start")
    return pg


@dataclass
class S3:
    """moto's standalone S3 server on loopback: a real HTTP S3 API, not a patched client."""

    server: object
    endpoint: str

    def stop(self) -> None:
        self.server.stop()  # type: ignore[attr-defined]


S3_ENV = {
    # What any AWS client reads; the catalog never stores credentials.
    "AWS_ACCESS_KEY_ID": "catalog-test-key",
    "AWS_SECRET_ACCESS_KEY": "catalog-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def start_s3() -> S3:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        raise Unavailable(f"moto's server is not installed (pip install '.[test]'): {e}") from e
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return S3(server, f"http://127.0.0.1:{port}")


# --------------------------------------------------------------------------- docs/how-to/scale.md's servers


def empty_database(pg: Postgres, name: str) -> str:
    """A new, empty database on ``pg``: its URL."""
    import sqlalchemy as sa

    admin = sa.create_engine(pg.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    finally:
        admin.dispose()
    return pg.url(name)


def start_dask(env: dict[str, str]) -> tuple[str, Callable[[], object]]:
    """A Dask LocalCluster (two worker processes, one thread each, ``env`` in their
    environment: a cluster's workers have their own credentials): its address and its stop."""
    try:
        from distributed import LocalCluster
    except ImportError as e:
        raise Unavailable(f"dask.distributed is not installed (pip install '.[test]'): {e}") from e
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, env=env)
    return str(cluster.scheduler_address), cluster.close


def start_scale() -> tuple[dict[str, str], list[Callable[[], object]]]:
    """What docs/how-to/scale.md assumes, on this machine: a PostgreSQL server with two empty
    databases, an S3 store with a bucket, a Dask scheduler. The variables that name them (the
    page's ``SCALE_*`` and AWS's own) and the stops, in the order to call them."""
    import importlib.util

    for module, extra in (("psycopg", "postgres"), ("s3fs", "s3")):
        if importlib.util.find_spec(module) is None:
            raise Unavailable(f"{module} is not installed (pip install '.[{extra}]')")
    stops: list[Callable[[], object]] = []
    try:
        pg = start_postgres()
        stops.append(pg.stop)
        s3 = start_s3()
        stops.append(s3.stop)
        env = {**S3_ENV, "AWS_ENDPOINT_URL": s3.endpoint}
        scheduler, stop_dask = start_dask(env)
        stops.append(stop_dask)
        import s3fs

        s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3.endpoint}, key=env["AWS_ACCESS_KEY_ID"],
                          secret=env["AWS_SECRET_ACCESS_KEY"]).mkdir("scale")  # fmt: skip
        env.update(
            SCALE_DB_URL=empty_database(pg, "scale"),
            SCALE_DB_URL_2=empty_database(pg, "scale_moved"),
            SCALE_STORAGE="s3://scale/datasets",
            SCALE_SCHEDULER=scheduler,
        )
    except BaseException:
        for stop in reversed(stops):
            stop()
        raise
    return env, stops[::-1]


def main() -> None:
    """``python tests/servers.py``: throwaway servers for docs/how-to/scale.md on this machine.
    Prints the variables that name them (``eval`` them, or paste them into another shell) and
    serves until Ctrl-C (or SIGTERM), which stops them and removes their files."""
    import shlex
    import signal
    import threading

    env, stops = start_scale()
    for key, value in env.items():
        print(f"export {key}={shlex.quote(value)}")
    print("# serving until Ctrl-C", flush=True)
    done = threading.Event()

    def finish(*_: object) -> None:
        done.set()

    # Ctrl-C and SIGTERM both end it, whatever SIGINT disposition it was started with (a
    # background job or nohup hands SIG_IGN down: a SIGINT raised again would change nothing).
    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    try:
        while not done.wait(0.5):  # (a bare wait() would not let a signal handler run)
            pass
    finally:
        for stop in stops:
            stop()


if __name__ == "__main__":
    main()
