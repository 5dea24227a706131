"""Migrate, compact, verify and appends on a Dask cluster: a LocalCluster of 2 worker
processes, reached through its scheduler address as a real cluster would be."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.executors import open_executor

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (pip install '.[test]')")

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
NAME = "ev"
IDS = list(range(120))

# A computed field whose worker dies, once, the first time it runs: Dask reruns the task
# on a fresh worker process (the nanny restarts the dead one).
KILLING_MIGRATION = '''
import os
from catalog.migrate import AddField

FLAG = {flag!r}


def twice(row):
    if not os.path.exists(FLAG):
        open(FLAG, "w").close()
        os._exit(1)  # the worker process dies mid-migration, with a shard half done
    return row["id"] * 2


operations = [AddField("twice", {{"dtype": "int64"}}, fn=twice)]
'''


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as c:
        yield c


def cli(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def make(root: Path) -> Catalog:
    cat = Catalog.init(root)
    ds = cat.register(NAME, SCHEMA)
    for first in range(0, len(IDS), 40):
        ds.append_rows([{"id": i, "text": f"t{i}"} for i in IDS[first : first + 40]], shard_records=10)
    return cat


def test_dask_migrate_equals_a_local_one(cluster: Any, tmp_path: Path) -> None:
    local, remote = make(tmp_path / "local"), make(tmp_path / "dask")
    local.dataset(NAME).migrate(add=["h:int64=3"], rename=["text:caption"])
    with open_executor("dask", cluster.scheduler_address) as ex:
        report = remote.dataset(NAME).migrate(add=["h:int64=3"], rename=["text:caption"], executor=ex)
    assert report.migrations[0].shards == 12
    want, got = list(local.dataset(NAME).read()), list(remote.dataset(NAME).read())
    assert got == want and [r["id"] for r in got] == IDS and {r["h"] for r in got} == {3}
    assert remote.verify().ok


def test_cli_executor_dask_for_migrate_compact_verify_append(
    cluster: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "c"
    make(root).close()
    address = cluster.scheduler_address
    cli("-C", str(root), "migrate", NAME, "--add", "h:int64=1", "--executor", "dask", "--scheduler", address)
    monkeypatch.setenv("CATALOG_DASK_SCHEDULER", address)  # the environment names the cluster
    cli("-C", str(root), "compact", NAME, "--executor", "dask")
    inputs = []
    for k in range(3):
        p = tmp_path / f"in{k}.jsonl"
        p.write_text("".join(json.dumps({"id": 1000 + 10 * k + j, "text": "x", "h": 1}) + "\n" for j in range(10)))
        inputs.append(str(p))
    cli("-C", str(root), "append", NAME, *inputs, "--executor", "dask")
    report = json.loads(cli("-C", str(root), "verify", "--json", "--executor", "dask").stdout)
    # 12 appended + 12 migrated (both retired, kept for time travel) + 1 compacted + 1 per input appended
    assert report["ok"] is True and report["checked"] == 12 + 12 + 1 + 3
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        assert [r["id"] for r in ds.read()] == IDS + [1000 + 10 * k + j for k in range(3) for j in range(10)]
        # A damaged shard is still found by verify on the cluster.
        path = Path(ds.files()[0])
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    result = cli("-C", str(root), "verify", "--json", "--executor", "dask", ok=False)
    assert result.exit_code == 1
    assert [p["problem"] for p in json.loads(result.stdout)["problems"]] == ["unreadable"]  # a record CRC fails


def test_a_worker_killed_mid_migration_changes_nothing_visible_and_the_run_completes(
    cluster: Any, tmp_path: Path
) -> None:
    cat = make(tmp_path / "c")
    flag = tmp_path / "killed-once"
    mdir = tmp_path / "migrations"
    (mdir / NAME).mkdir(parents=True)
    (mdir / NAME / "0001_twice.py").write_text(KILLING_MIGRATION.format(flag=str(flag)))
    ds = cat.dataset(NAME)
    before = ds.version
    with open_executor("dask", cluster.scheduler_address) as ex:
        try:
            ds.migrate(mdir, executor=ex)
        except Exception as e:  # allowed: a clean failure, nothing registered; the rerun below completes
            assert "Traceback" not in str(e)
            assert cat.dataset(NAME).version == before
            ds = cat.dataset(NAME)
            ds.migrate(mdir, executor=ex)
    assert flag.exists()  # a worker really died
    ds = cat.dataset(NAME)
    rows = list(ds.read())
    assert Counter(r["id"] for r in rows) == Counter(IDS)  # every record exactly once
    assert all(r["twice"] == 2 * r["id"] for r in rows)
    assert ds.version == before + 1 and [m.status for m in ds.migrations(mdir)] == ["applied"]
    assert cat.verify().ok


def test_unreachable_scheduler_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from servers import free_port

    monkeypatch.setenv("DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT", "3s")
    root = tmp_path / "c"
    make(root).close()
    address = f"tcp://127.0.0.1:{free_port()}"
    result = cli("-C", str(root), "migrate", NAME, "--add", "h:int64=1", "--executor", "dask", "--scheduler", address,
                 ok=False)  # fmt: skip
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: cannot reach the Dask scheduler at {address}")
    assert result.stderr.count("\n") == 1
    with Catalog.open(root) as cat:
        assert cat.dataset(NAME).schema_version == 1
