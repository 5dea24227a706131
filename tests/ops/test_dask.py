"""The Dask executor: migrate, compact, verify and large appends on a LocalCluster of two worker
processes, through the library and the CLI; workers killed mid-migration, a lost scheduler, an
unreachable one.

Expected records come from the rows written here or from a twin catalog doing the same work
locally, never from the code under test. That the jobs ran on the cluster is checked through
Dask's task stream.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from catalog import Catalog, CatalogError, Dataset, RecordWriter, Schema
from catalog import manifest as mf
from catalog.cli import app
from catalog.errors import AppendError
from catalog.executors import DASK_EXTRA, SCHEDULER_ENV, open_executor
from catalog.manifest import INTENTS
from catalog.storage import intent_of

distributed = pytest.importorskip("distributed", reason="Dask is not installed (pip install '.[dask]')")
import dask  # noqa: E402  (after the skip: dask comes with distributed)

runner = CliRunner()
SCHEMA: dict[str, Any] = {
    "features": {"id": {"dtype": "int64"}, "s": {"dtype": "string"}, "v": {"dtype": "float32", "shape": [2]}}
}
ROWS = 60
PER_SHARD = 5  # 12 shards
IMPORTS = "import os\n\nfrom catalog.migrate import AddField, RenameField\n\n"


class Cluster:
    def __init__(self, client: Any, address: str) -> None:
        self.client = client
        self.address = address

    def task_names(self, run: Callable[[], object]) -> list[str]:
        """The names (key prefixes) of the tasks the cluster ran during ``run()``."""
        with distributed.get_task_stream(client=self.client) as ts:
            run()
        return [str(t["key"]).rsplit("-", 5)[0] for t in ts.data]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # One death per task is retried (Dask's KilledWorker comes at the second): the kill tests
    # stay short. The scheduler reads this when it starts.
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(lc, set_as_default=False)
    try:
        yield Cluster(client, lc.scheduler_address)
    finally:
        client.close()
        lc.close()


def rows(n: int = ROWS, start: int = 0) -> list[dict[str, Any]]:
    # Records of one size: shards of one size, so a compaction target picks its runs exactly.
    return [{"id": i, "s": f"row {i:05d}", "v": [i / 2, -i]} for i in range(start, start + n)]


def make(root: Path, n: int = ROWS, per_shard: int = PER_SHARD) -> Catalog:
    cat = Catalog.init(root)
    cat.register("d", SCHEMA).append_rows(rows(n), shard_records=per_shard)
    return cat


def script(mdir: Path, number: int, body: str) -> Path:
    path = mdir / "d" / f"{number:04d}_step.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(IMPORTS + textwrap.dedent(body))
    return path


def canon(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}


def state(ds: Dataset) -> tuple[int, int, list[str], list[bytes]]:
    """What a reader sees: version, schema version, live shards, records."""
    fresh = ds.catalog.dataset(ds.name)
    return fresh.version, fresh.schema_version, [s.relpath for s in fresh.shards()], list(fresh.records())


def intents(cat: Catalog) -> list[str]:
    with mf.read_txn(cat.engine) as conn:
        return list(conn.execute(select(INTENTS.c.id)).scalars())


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nobody listens there once the socket is closed


# --------------------------------------------------------------------------- library


Y_SCRIPT = """
operations = [
    AddField("y", {"dtype": "int64"}, fn=lambda row: row["id"] * 3 + len(row["s"])),
    RenameField("s", "text"),
]
"""


def test_migrate_on_dask_gives_the_records_of_a_local_migrate(tmp_path: Path, cluster: Cluster) -> None:
    on_dask, local = make(tmp_path / "a"), make(tmp_path / "b")
    script(tmp_path / "m", 1, Y_SCRIPT)

    def run() -> None:
        with open_executor("dask", cluster.address) as ex:
            report = on_dask.dataset("d").migrate(tmp_path / "m", executor=ex)
        assert report.migrations[0].version == on_dask.dataset("d").version == 3

    assert cluster.task_names(run).count("migrate_shard") == ROWS // PER_SHARD
    local.dataset("d").migrate(tmp_path / "m", workers=1)
    a, b = on_dask.dataset("d"), local.dataset("d")
    assert a.schema.to_json() == b.schema.to_json() and a.schema_version == b.schema_version == 2
    assert [s.records for s in a.shards()] == [s.records for s in b.shards()] == [PER_SHARD] * (ROWS // PER_SHARD)
    assert list(a.records()) == list(b.records())  # byte for byte, record by record
    got = [canon(r) for r in a.read()]
    assert got == [canon(r) for r in b.read()]
    assert got == [{"id": r["id"], "text": r["s"], "v": r["v"], "y": r["id"] * 3 + len(r["s"])} for r in rows()]
    assert on_dask.verify().problems == []  # no file left over besides the registered shards


def test_migrate_on_dask_from_a_relative_migrations_folder(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`catalog migrate` run where `./migrations` is (the default, as the README's Dask lines
    do): the workers, whose working directory is not the caller's, get the scripts' absolute
    paths."""
    cat = make(tmp_path / "a")
    script(tmp_path / "m", 1, Y_SCRIPT)
    monkeypatch.chdir(tmp_path)
    with open_executor("dask", cluster.address) as ex:
        report = cat.dataset("d").migrate("m", executor=ex)
    assert report.migrations[0].version == cat.dataset("d").version == 3
    assert [r["y"] for r in cat.dataset("d").read()] == [r["id"] * 3 + len(r["s"]) for r in rows()]


def test_compact_on_dask_writes_the_bytes_of_a_local_compact(tmp_path: Path, cluster: Cluster) -> None:
    on_dask, local = make(tmp_path / "a"), make(tmp_path / "b")
    before = list(on_dask.dataset("d").records())
    target = 3 * on_dask.dataset("d").shards()[0].bytes + 1  # runs of three shards: four jobs

    def run() -> None:
        with open_executor("dask", cluster.address) as ex:
            report = on_dask.dataset("d").compact(target, executor=ex)
        assert (report.groups, report.shards_after) == (4, 4)

    assert cluster.task_names(run).count("concat_job") == 4
    local.dataset("d").compact(target, workers=1)
    a, b = on_dask.dataset("d"), local.dataset("d")
    assert [s.checksum for s in a.shards()] == [s.checksum for s in b.shards()]
    assert [s.records for s in a.shards()] == [3 * PER_SHARD] * 4
    assert list(a.records()) == before
    assert list(a.records(version=2)) == before  # the old version still reads
    assert on_dask.verify().problems == []


def tripled(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"] * 3, "s": row["s"]}


def test_delete_filter_and_map_on_dask_give_what_local_ones_give(tmp_path: Path, cluster: Cluster) -> None:
    on_dask, local = make(tmp_path / "a"), make(tmp_path / "b")

    def run() -> None:
        with open_executor("dask", cluster.address) as ex:
            on_dask.dataset("d").delete("id IN (3, 31)", executor=ex)
            on_dask.dataset("d").filter("id < 40", into="f", executor=ex)
            on_dask.dataset("d").map(tripled, into="m", executor=ex)

    names = cluster.task_names(run)
    # the delete reads only the 2 shards whose statistics do not rule ids 3 and 31 out
    assert names.count("change_shard") == 2 and names.count("derive_shard") == 24
    local.dataset("d").delete("id IN (3, 31)", workers=1)
    local.dataset("d").filter("id < 40", into="f", workers=1)
    local.dataset("d").map(tripled, into="m", workers=1)
    for name in ("d", "f", "m"):
        assert [canon(r) for r in on_dask.dataset(name).read()] == [canon(r) for r in local.dataset(name).read()]
    assert [r["id"] for r in on_dask.dataset("m").read()][:4] == [0, 3, 6, 12]


def damage(cat: Catalog) -> None:
    """One shard flipped, one missing, one cut short, one stray file (and retired shards to check too)."""
    cat.dataset("d").migrate(add=["h:int64=1"])  # version 3: twelve shards retired, twelve new
    shards = cat.dataset("d").shards()
    data = bytearray(Path(shards[1].path).read_bytes())
    data[20] ^= 0x40
    Path(shards[1].path).write_bytes(bytes(data))
    os.unlink(shards[4].path)
    with open(shards[7].path, "r+b") as f:
        f.truncate(10)
    (cat.data_root / "d" / "stray.tfrecord").write_bytes(b"x")


def test_verify_on_dask_reports_what_a_local_verify_reports(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = make(tmp_path / "a")
    damage(cat)
    local = cat.verify()
    monkeypatch.setattr("catalog.ops.maintenance.VERIFY_JOB_BYTES", 3 * cat.dataset("d").shards()[0].bytes)
    seen: list[int] = []

    def run() -> None:
        with open_executor("dask", cluster.address) as ex:
            report = cat.verify(progress=seen.append, executor=ex)
        assert report.to_json() == local.to_json()  # the same problems, in the same order

    assert cluster.task_names(run).count("check_shards") > 2  # several jobs of several shards
    assert sum(seen) == local.bytes
    assert not local.ok and local.checked == 2 * ROWS // PER_SHARD
    kinds = sorted(p.problem for p in local.problems)
    assert kinds == ["missing", "size", "unreadable", "unregistered"]  # the flipped byte breaks a record's CRC


def test_a_worker_killed_mid_migration_changes_nothing_visible(tmp_path: Path, cluster: Cluster) -> None:
    """The first job to reach a record of id 3 mod 5 (mid-shard: its temporary file is open)
    kills its worker process. Dask runs that job again elsewhere; either way no record may be
    lost or doubled, and a failure must leave nothing visible."""
    cat = make(tmp_path / "a")
    flag = tmp_path / "kill-once"
    flag.write_text("")
    script(
        tmp_path / "m",
        1,
        f"""
        def y(row):
            if row["id"] % {PER_SHARD} == 3:
                try:
                    os.unlink({str(flag)!r})  # one attempt in the whole cluster wins the flag
                except FileNotFoundError:
                    pass
                else:
                    os._exit(1)
            return row["id"] * 3

        operations = [AddField("y", {{"dtype": "int64"}}, fn=y)]
        """,
    )
    before = state(cat.dataset("d"))
    try:
        with open_executor("dask", cluster.address) as ex:
            cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    except CatalogError as e:  # allowed, if it says so in one line and leaves nothing behind
        assert "\n" not in str(e) and "run it again" in str(e)
        assert state(cat.dataset("d")) == before and intents(cat) == []
        with open_executor("dask", cluster.address) as ex:
            cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    assert not flag.exists()  # a worker did die
    ds = cat.dataset("d")
    assert ds.schema_version == 2
    assert [canon(r) for r in ds.read()] == [{**r, "y": r["id"] * 3} for r in rows()]  # each record once
    assert [p.problem for p in cat.verify().problems if p.problem != "unregistered"] == []


def test_workers_that_keep_dying_fail_the_migration_in_one_line(tmp_path: Path, cluster: Cluster) -> None:
    """One shard kills every worker that runs it: Dask gives up (KilledWorker); nothing is
    registered, the intent is gone, and a rerun of the fixed (never applied) script completes."""
    cat = make(tmp_path / "a")
    body = """
        def y(row):
            if row["id"] == 13 and KILL:
                os._exit(1)
            return row["id"] + 1

        operations = [AddField("y", {"dtype": "int64"}, fn=y)]
        """
    path = script(tmp_path / "m", 1, "KILL = True\n" + textwrap.dedent(body))
    before = state(cat.dataset("d"))
    with pytest.raises(CatalogError) as info, open_executor("dask", cluster.address) as ex:
        cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    message = str(info.value)
    assert message.startswith("the Dask cluster failed: workers kept dying") and "\n" not in message
    assert message.endswith("nothing was registered; run it again")
    assert state(cat.dataset("d")) == before and intents(cat) == []
    assert cat.verify().ok  # files of jobs cancelled while they ran may be left, unregistered, for gc

    path.write_text(path.read_text().replace("KILL = True", "KILL = False"))
    with open_executor("dask", cluster.address) as ex:
        cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    assert [canon(r) for r in cat.dataset("d").read()] == [{**r, "y": r["id"] + 1} for r in rows()]


def test_a_lost_scheduler_fails_the_migration_in_one_line(tmp_path: Path, cluster: Cluster) -> None:
    cat = make(tmp_path / "a")
    started = tmp_path / "started"
    script(
        tmp_path / "m",
        1,
        f"""
        import time
        from pathlib import Path

        def y(row):
            Path({str(started)!r}).touch()
            time.sleep(0.05)
            return row["id"]

        operations = [AddField("y", {{"dtype": "int64"}}, fn=y)]
        """,
    )
    before = state(cat.dataset("d"))
    doomed = distributed.LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},  # 8787 is the module cluster's: no warning
    )

    def lose_it() -> None:
        while not started.exists():
            time.sleep(0.02)
        doomed.close()

    closer = threading.Thread(target=lose_it)
    closer.start()
    try:
        with pytest.raises(CatalogError) as info, open_executor("dask", doomed.scheduler_address) as ex:
            cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    finally:
        closer.join()
    assert "\n" not in str(info.value) and str(info.value).endswith("nothing was registered; run it again")
    assert state(cat.dataset("d")) == before and intents(cat) == []
    with open_executor("dask", cluster.address) as ex:  # the rerun, on a live cluster
        cat.dataset("d").migrate(tmp_path / "m", executor=ex)
    assert [r["y"] for r in cat.dataset("d").read()] == list(range(ROWS))


# --------------------------------------------------------------------------- appends


def write_inputs(folder: Path) -> list[Path]:
    """Four inputs: raw and gzip TFRecord, JSON Lines, and one empty file, in that order."""
    folder.mkdir()
    schema = Schema.from_json(SCHEMA)
    paths = [folder / "a.tfrecord", folder / "b.tfrecord.gz", folder / "c.jsonl", folder / "d.tfrecord"]
    with RecordWriter(paths[0]) as w:
        w.write_many(schema.encode(r) for r in rows(23, 1000))
    with RecordWriter(paths[1], "gzip") as w:
        w.write_many(schema.encode(r) for r in rows(17, 2000))
    paths[2].write_text("".join(json.dumps(r) + "\n" for r in rows(9, 3000)))
    paths[3].write_bytes(b"")
    return paths


def test_append_on_dask_registers_every_input_in_order_in_one_commit(tmp_path: Path, cluster: Cluster) -> None:
    on_dask, local = make(tmp_path / "a"), make(tmp_path / "b")
    inputs = write_inputs(tmp_path / "in")
    commits = []

    def run() -> None:
        with open_executor("dask", cluster.address) as ex:
            commits.append(on_dask.dataset("d").append_files(inputs, shard_records=10, executor=ex))

    assert cluster.task_names(run).count("ingest_job") == len(inputs)
    expected = local.dataset("d").append_files(inputs, shard_records=10)
    commit = commits[0]
    assert (commit.version, commit.records, commit.total_records) == (3, 49, ROWS + 49)
    assert [s.records for s in commit.shards] == [10, 10, 3, 10, 7, 9]  # shards do not span inputs
    assert list(on_dask.dataset("d").records()) == list(local.dataset("d").records())
    assert expected.records == commit.records
    names = [Path(s.path).name for s in commit.shards]
    assert len(set(names)) == len(names) and {intent_of(n) for n in names} == {names[0][:28]}
    assert intents(on_dask) == [] and on_dask.verify().problems == []


def test_append_on_dask_with_a_bad_input_registers_nothing(tmp_path: Path, cluster: Cluster) -> None:
    cat = make(tmp_path / "a")
    inputs = write_inputs(tmp_path / "in")
    bad = tmp_path / "in" / "bad.jsonl"
    bad.write_text(json.dumps(rows(1)[0]) + "\n" + json.dumps({**rows(1)[0], "id": "seven"}) + "\n")
    before = state(cat.dataset("d"))
    with pytest.raises(AppendError) as info, open_executor("dask", cluster.address) as ex:
        cat.dataset("d").append_files([inputs[0], bad, inputs[1]], executor=ex)
    assert str(info.value).startswith(f"{bad}: record 1 (line 2): feature 'id'")
    assert (info.value.path, info.value.record) == (str(bad), 1)  # the fields survive the trip back
    assert state(cat.dataset("d")) == before and intents(cat) == []
    assert cat.verify().ok


def test_append_on_dask_links_uncompressed_inputs(tmp_path: Path, cluster: Cluster) -> None:
    cat = make(tmp_path / "a")
    inputs = write_inputs(tmp_path / "in")
    with open_executor("dask", cluster.address) as ex:
        commit = cat.dataset("d").append_files(inputs[:2], link=True, executor=ex)
    assert os.stat(commit.shards[0].path).st_ino == os.stat(inputs[0]).st_ino  # adopted by hard link
    with gzip.open(inputs[1]) as f:  # a compressed input is copied: its records, uncompressed
        assert Path(commit.shards[1].path).read_bytes() == f.read()
    assert [s.records for s in commit.shards] == [23, 17]
    assert list(cat.dataset("d").records())[ROWS:] == [
        Schema.from_json(SCHEMA).encode(r) for r in rows(23, 1000) + rows(17, 2000)
    ]


# --------------------------------------------------------------------------- CLI


def test_cli_migrate_compact_verify_append_with_a_scheduler(tmp_path: Path, cluster: Cluster) -> None:
    root = tmp_path / "a"
    cat = make(root)
    dask_opts = ["--executor", "dask", "--scheduler", cluster.address]
    c = ["-C", str(root)]
    names = cluster.task_names(lambda: cli(*c, "migrate", "d", "--add", "h:int64=7", *dask_opts))
    assert names.count("migrate_shard") == ROWS // PER_SHARD
    result = cli(*c, "compact", "d", *dask_opts)
    assert result.exit_code == 0 and "12 -> 1 shard" in result.output
    inputs = write_inputs(tmp_path / "in")
    result = cli(*c, "append", "d", *map(str, inputs), *dask_opts)
    assert result.exit_code == 0 and result.output == "committed: d version 5: 49 records in 3 shards\n"
    result = cli(*c, "verify", "d", *dask_opts)
    assert result.exit_code == 0 and result.output.startswith("ok: ")
    got = [canon(r) for r in cat.dataset("d").read()]
    assert got[:ROWS] == [{**r, "h": 7} for r in rows()] and len(got) == ROWS + 49

    data = bytearray(Path(cat.dataset("d").shards()[0].path).read_bytes())
    data[30] ^= 1
    Path(cat.dataset("d").shards()[0].path).write_bytes(bytes(data))
    result = cli(*c, "verify", "d", *dask_opts)
    assert result.exit_code == 1 and result.output.startswith("unreadable: ")


def test_cli_takes_the_scheduler_from_the_environment(
    tmp_path: Path, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "a"
    make(root)
    monkeypatch.setenv(SCHEDULER_ENV, cluster.address)
    results: list[Any] = []
    names = cluster.task_names(lambda: results.append(cli("-C", str(root), "verify", "--executor", "dask")))
    assert "check_shards" in names  # on this cluster, not on one started for the command
    assert results[0].exit_code == 0 and results[0].output.startswith("ok: 12 shards")
    result = cli("-C", str(root), "compact", "d", "--executor", "dask", "--workers", "2")
    assert result.exit_code == 1
    assert result.output == (
        f"error: --workers sizes a cluster started here; the one at {cluster.address} has its own workers\n"
    )


def test_cli_an_unreachable_scheduler_is_one_line_and_exit_1(tmp_path: Path) -> None:
    root = tmp_path / "a"
    make(root)
    address = f"tcp://127.0.0.1:{closed_port()}"
    env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
    args = ["-C", str(root), "verify", "--executor", "dask", "--scheduler", address]
    command = [sys.executable, "-m", "catalog", *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)  # 60: a hang guard
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: cannot reach the Dask scheduler at {address}: "), lines


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--scheduler", "tcp://127.0.0.1:8786"], "error: --scheduler needs --executor dask"),
        (["--executor", "dask", "--scheduler", "no-port"], "error: cannot reach the Dask scheduler at no-port: "),
    ],
)
def test_cli_executor_refusals(tmp_path: Path, args: list[str], line: str) -> None:
    root = tmp_path / "a"
    make(root)
    result = cli("-C", str(root), "migrate", "d", "--add", "h:int64=1", *args)
    assert result.exit_code == 1 and result.output.startswith(line) and result.output.count("\n") == 1
    assert Catalog.open(root).dataset("d").schema_version == 1


def test_dask_missing_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now fails
    with pytest.raises(CatalogError) as info, open_executor("dask"):
        pass
    assert str(info.value) == DASK_EXTRA


def test_local_executor_is_the_process_pool_or_nothing() -> None:
    with open_executor("local") as none:
        assert none is None  # the library sizes its own pool to the work
    with open_executor("local", workers=2, jobs=5) as pool:
        assert pool is not None and pool.submit(os.getpid).result() != os.getpid()
    with open_executor("local", workers=2, jobs=1) as inline:
        assert inline is None
