"""Shards on object storage: a real S3 API (moto's server on loopback), reached through
s3fs with the credentials in the standard AWS environment variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, encode_example, read_records
from catalog.cli import app
from catalog.errors import ValidationError

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}


def cli(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def objects(url: str) -> set[str]:
    """Every key under ``url`` (s3://bucket/prefix), as "<dataset>/<file>" (not the owner marker,
    nor the record indexes' tree ".index/<dataset>/<file>.idx": test_index checks those)."""
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False)
    base = url[len("s3://") :]
    keys = {k[len(base) + 1 :] for k in fs.find(base)} - {".catalog-owner"}
    return {k for k in keys if not k.startswith(".index/")}


def rows(ids: range) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"t{i}"} for i in ids]


@pytest.mark.usefixtures("backend")  # the manifest beside the S3 data area: SQLite, or PostgreSQL (both swaps)
def test_every_verb_works_with_shards_on_s3(s3_url: str, tmp_path: Path) -> None:
    root = tmp_path / "c"
    out = cli("init", str(root), "--storage", s3_url).stdout
    assert f"data area {s3_url}" in out
    text = (root / "catalog.json").read_text()
    assert "catalog-test-secret" not in text and "catalog-test-key" not in text  # no credentials recorded
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    cli("-C", str(root), "register", "ev", "--schema", str(tmp_path / "s.json"))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows(range(50))))
    cli("-C", str(root), "append", "ev", str(src), "--shard-records", "20")
    with Catalog.open(root) as cat:
        ds = cat.dataset("ev")
        ds.append_rows(rows(range(50, 80)), shard_records=7)
        files = ds.files()
        assert all(f.startswith(s3_url + "/ev/") for f in files) and len(files) == 3 + 5
        assert objects(s3_url) == {f[len(s3_url) + 1 :] for f in files}  # nothing else was uploaded
        assert [r["id"] for r in ds.read()] == list(range(80))
        assert sum(1 for f in files for _ in read_records(f)) == 80  # our own readers stream the URLs

    cat_out = cli("-C", str(root), "cat", "ev", "--limit", "3").stdout.splitlines()
    assert [json.loads(line)["id"] for line in cat_out] == [0, 1, 2]
    assert json.loads(cli("-C", str(root), "verify", "--json").stdout)["ok"] is True
    cli("-C", str(root), "migrate", "ev", "--add", "h:int64=7")
    cli("-C", str(root), "compact", "ev")
    exported = tmp_path / "all.tfrecord"
    cli("-C", str(root), "export", "ev", str(exported))
    gc = json.loads(cli("-C", str(root), "gc", "--keep-versions", "1", "--grace", "0s", "--json").stdout)
    with Catalog.open(root) as cat:
        ds = cat.dataset("ev")
        got = list(ds.read())
        assert [r["id"] for r in got] == list(range(80)) and {r["h"] for r in got} == {7}
        assert len(ds.files()) == 1  # compacted
        assert objects(s3_url) == {f[len(s3_url) + 1 :] for f in ds.files()}  # gc took the retired objects
        assert len(gc["retired_removed"]) == 8 + 8  # the appended shards and the migrated ones
        assert list(read_records(exported)) == list(ds.records())
        assert cat.verify().ok


def test_a_failed_append_leaves_no_object_and_gc_takes_strays_after_grace(s3_url: str, tmp_path: Path) -> None:
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        ds = cat.register("ev", SCHEMA)
        ds.append_rows(rows(range(10)))
        before = objects(s3_url)
        with pytest.raises(ValidationError):
            ds.append_rows([*rows(range(10, 40)), {"id": "not a number", "text": "x"}], shard_records=5)
        assert objects(s3_url) == before  # uploaded shards of the failed append were deleted
        assert cat.dataset("ev").version == 2

        # An upload whose writer died before committing: unregistered, no live intent.
        import fsspec

        stray = f"{s3_url}/ev/0123456789abcdef0123456789ab-00000.tfrecord"
        with fsspec.open(stray, "wb") as f:
            f.write(encode_example({"id": 1}))
        young = cat.gc(grace=timedelta(hours=1))
        assert young.removed == [] and young.kept_young == 1
        assert "ev/0123456789abcdef0123456789ab-00000.tfrecord" in objects(s3_url)
        assert [p.problem for p in cat.verify().problems] == ["unregistered"]
        old = cat.gc(grace=timedelta(0))
        assert old.removed == [stray]
        assert objects(s3_url) == before
        assert [r["id"] for r in cat.dataset("ev").read()] == list(range(10))


CRASHING_WRITER = """
import os, sys
from catalog import Catalog
with Catalog.open(sys.argv[1]) as cat:
    w = cat.dataset("ev").writer().__enter__()
    for i in range(100):
        w.write({"id": i, "text": "spooled, never uploaded"})
    print(w.intent_id, flush=True)
    os._exit(9)  # killed before the shard is uploaded: its spool file stays behind
"""


def test_gc_takes_the_spool_file_of_a_writer_killed_before_its_upload(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "tmp"
    spool.mkdir()
    monkeypatch.setenv("TMPDIR", str(spool))  # the child's temp dir, and ours:
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        cat.register("ev", SCHEMA).append_rows(rows(range(3)))
        before = objects(s3_url)
        child = subprocess.run(
            [sys.executable, "-c", CRASHING_WRITER, str(tmp_path / "c")], capture_output=True, text=True, timeout=120
        )
        assert child.returncode == 9, child.stderr
        intent = child.stdout.strip()
        left = [p for p in spool.iterdir() if intent in p.name]
        assert len(left) == 1
        other = spool / "catalog-spool-0123456789ab-0123456789abcdef0123456789ab-00000.tfrecord.x.tmp"
        other.write_bytes(b"another data area's spool file")  # not this catalog's to take
        os.utime(other, (0, 0))

        with cat.engine.begin() as conn:  # as a writer on another machine: only the heartbeat tells
            conn.exec_driver_sql("UPDATE write_intents SET process = NULL")
        assert cat.gc(grace=timedelta(0)).kept_live == 1  # its intent has not gone stale yet
        assert left[0].exists()
        with cat.engine.begin() as conn:  # as if INTENT_STALE had passed since its last beat
            conn.exec_driver_sql("UPDATE write_intents SET heartbeat_at = '2000-01-01 00:00:00'")
        report = cat.gc(grace=timedelta(0))
        assert report.removed == [str(left[0])]
        assert not left[0].exists() and other.exists()
        assert objects(s3_url) == before and cat.verify().ok
        assert [r["id"] for r in cat.dataset("ev").read()] == [0, 1, 2]


def test_verify_on_s3_tells_a_missing_object_from_a_damaged_one(s3_url: str, tmp_path: Path) -> None:
    import fsspec

    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        ds = cat.register("ev", SCHEMA)
        ds.append_rows(rows(range(30)), shard_records=10)
        gone, damaged, fine = ds.files()
        fsspec.filesystem("s3").rm_file(gone)
        data = bytearray(fsspec.filesystem("s3").cat_file(damaged))
        data[-1] ^= 1  # the last data CRC
        with fsspec.open(damaged, "wb") as f:
            f.write(bytes(data))
        problems = {(p.problem, p.path) for p in cat.verify().problems}
        assert problems == {("missing", gone), ("unreadable", damaged)}
        assert fine not in {p for _k, p in problems}


def test_an_object_store_gone_down_is_one_line_and_registers_nothing(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import s3fs
    from servers import free_port

    root = tmp_path / "c"
    with Catalog.init(root, storage=s3_url) as cat:
        cat.register("ev", SCHEMA).append_rows(rows(range(5)))
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps(r) + "\n" for r in rows(range(5, 10))))
    with monkeypatch.context() as down:  # the endpoint stops answering: nothing listens there
        down.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
        down.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's own retries, or the test takes a minute
        s3fs.S3FileSystem.clear_instance_cache()  # fsspec would reuse the client of the live endpoint
        try:
            for args, what in [
                (["append", "ev", str(more)], "upload failed"),
                (["cat", "ev"], "cannot open"),
                (["verify"], "cannot list"),
                (["gc", "--grace", "0s"], "cannot read"),  # the owner marker, read first
            ]:
                result = cli("-C", str(root), *args, ok=False)
                lines = result.stderr.splitlines()
                assert result.exit_code == 1 and result.stdout == "", (args, result.output, result.exception)
                assert len(lines) == 1 and lines[0].startswith("error: s3://") and f": {what}: " in lines[0], lines
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
    s3fs.S3FileSystem.clear_instance_cache()  # and back to the live endpoint
    with Catalog.open(root) as cat:
        assert cat.dataset("ev").version == 2 and cat.verify().ok
        assert [r["id"] for r in cat.dataset("ev").read()] == list(range(5))


def test_two_machines_share_postgres_and_s3(pg_url: str, s3_url: str, tmp_path: Path) -> None:
    """Both swaps: the second directory attaches and finds the S3 data area in the manifest."""
    with Catalog.init(tmp_path / "a", pg_url, storage=s3_url) as a:
        a.register("ev", SCHEMA).append_rows(rows(range(5)))
    with Catalog.init(tmp_path / "b", pg_url) as b:
        assert b.store.root == s3_url
        ds = b.dataset("ev")
        ds.append_rows(rows(range(5, 9)))
        assert Counter(r["id"] for r in ds.read()) == Counter(range(9))
        assert b.verify().ok


def test_unreachable_bucket_is_one_line(s3_url: str, tmp_path: Path) -> None:
    result = cli("init", str(tmp_path / "c"), "--storage", "s3://no-such-bucket-here/data", ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: s3://no-such-bucket-here/data: ") and result.stderr.count("\n") == 1
    assert not (tmp_path / "c" / "catalog.json").exists()


def test_an_object_store_data_area_is_owned(s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A marker object names the catalog: a second catalog on the prefix is refused, and gc
    refuses a prefix whose marker names another catalog."""
    import fsspec

    monkeypatch.delenv("CATALOG_DB_URL", raising=False)
    with Catalog.init(tmp_path / "a", storage=s3_url) as cat:
        cat.register("ev", SCHEMA).append_rows(rows(range(5)))
        cid = cat.catalog_id
    result = cli("init", str(tmp_path / "b"), "--storage", s3_url, ok=False)
    assert result.stderr == f"error: {s3_url}: already the data area of catalog {cid}; each catalog needs its own\n"
    assert not (tmp_path / "b").exists()
    fs = fsspec.filesystem("s3", use_listings_cache=False)
    fs.pipe_file(f"{s3_url}/.catalog-owner", b"someone-else\n")
    stray = f"{s3_url}/ev/0123456789abcdef0123456789ab-00000.tfrecord"
    fs.pipe_file(stray, b"x")
    result = cli("-C", str(tmp_path / "a"), "gc", "--grace", "0s", ok=False)
    assert result.stderr == (
        f"error: {s3_url}: the data area of catalog someone-else, not of this one ({cid}); gc deletes only in its "
        "own data area\n"
    )
    assert fs.exists(stray)
