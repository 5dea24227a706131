"""The catalog verbs through CliRunner: JSON shapes, exit codes and exact error lines."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, Schema, encode_example, read_records
from catalog.cli import app
from catalog.demo import DEMO_SCHEMA, demo_rows

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

runner = CliRunner()
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest-format1"
SMALL_SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "raw": {"dtype": "bytes", "default": ""},
        "score": {"dtype": "float32", "default": 0.0},
        "m": {"dtype": "float32", "shape": [2, 2], "default": 0.0},
    }
}


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cat"
    run("init", str(r))
    (tmp_path / "schema.json").write_text(json.dumps(SMALL_SCHEMA))
    run("-C", str(r), "register", "small", "--schema", str(tmp_path / "schema.json"))
    return r


def write_tfrecord(path: Path, rows: list[dict[str, Any]], compression: str | None = None) -> list[bytes]:
    records = [encode_example(r) for r in rows]
    with RecordWriter(path, compression) as w:
        w.write_many(records)
    return records


def small_rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"id": i, "text": f"t{i}", "raw": bytes([i % 256]), "score": i / 2, "m": [1.0, 2.0, 3.0, 4.0]}
        for i in range(start, start + n)
    ]


def test_full_json_contract(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.tfrecord.gz"
    records = write_tfrecord(src, small_rows(250), "gzip")
    doc = json.loads(run("-C", str(root), "append", "small", str(src), "--shard-records", "100", "--json").stdout)
    assert doc["version"] == 2 and doc["records"] == 250
    assert isinstance(doc["shards"], list) and len(doc["shards"]) == 3
    assert [s["records"] for s in doc["shards"]] == [100, 100, 50]

    listing = json.loads(run("-C", str(root), "list", "--json").stdout)
    assert listing == [listing[0]] and listing[0]["name"] == "small"
    for key, value in {"version": 2, "schema_version": 1, "shard_count": 3, "records": 250}.items():
        assert listing[0][key] == value
    assert listing[0]["bytes"] == sum(s["bytes"] for s in doc["shards"])

    show = json.loads(run("-C", str(root), "show", "small", "--json").stdout)
    assert show["schema"] == Schema.from_json(SMALL_SCHEMA).to_json()
    assert (show["version"], show["schema_version"], show["shard_count"], show["records"]) == (2, 1, 3, 250)
    for s in show["shards"]:
        assert os.path.isabs(s["path"]) and os.path.getsize(s["path"]) == s["bytes"]
        assert re.fullmatch(r"crc32c:[0-9a-f]{8}", s["checksum"])
        assert s["compression"] == "none" and s["schema_version"] == 1
    # records keep their exact bytes and order across shards
    assert [r for s in show["shards"] for r in read_records(s["path"])] == records
    assert "shards" not in json.loads(run("-C", str(root), "show", "small", "--json", "--no-shards").stdout)

    hist = json.loads(run("-C", str(root), "history", "small", "--json").stdout)
    assert [(c["version"], c["kind"], c["schema_version"]) for c in hist] == [(1, "create", 1), (2, "append", 1)]
    assert all(isinstance(c["time"], str) and "message" in c for c in hist)

    ver = json.loads(run("-C", str(root), "verify", "--json").stdout)
    assert ver["ok"] is True and ver["problems"] == []
    gc = json.loads(run("-C", str(root), "gc", "--json").stdout)
    assert gc["ok"] is True and gc["removed"] == []


def test_cat_renders_per_schema(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    rows = [
        {
            "id": 1,
            "text": "héllo",
            "raw": base64.b64encode(b"\x00\xff").decode(),
            "score": "NaN",
            "m": [[0.1, 2], [3, 4]],
        },
        {"id": 2, "text": "x", "score": "-Infinity"},
    ]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run("-C", str(root), "append", "small", str(src))
    lines = run("-C", str(root), "cat", "small").stdout.splitlines()
    first, second = (json.loads(line) for line in lines)
    assert first == {"id": 1, "text": "héllo", "raw": "AP8=", "score": "NaN", "m": [[0.1, 2.0], [3.0, 4.0]]}
    assert second["score"] == "-Infinity" and second["raw"] == "" and second["m"] == [[0.0, 0.0], [0.0, 0.0]]
    assert len(run("-C", str(root), "cat", "small", "--limit", "1").stdout.splitlines()) == 1
    # cat output is valid JSON Lines input again: the very same records, so the same shard
    # bytes, which an append refuses as a duplicate unless told
    again = tmp_path / "again.jsonl"
    again.write_text("\n".join(lines) + "\n")
    assert "already in 'small'" in run("-C", str(root), "append", "small", str(again), ok=False).stderr
    run("-C", str(root), "append", "small", str(again), "--allow-duplicate")
    assert run("-C", str(root), "cat", "small").stdout.splitlines()[2:] == lines


def test_cat_version_time_travel(root: Path, tmp_path: Path) -> None:
    for start in (0, 10):
        src = tmp_path / f"in{start}.tfrecord"
        write_tfrecord(src, small_rows(10, start))
        run("-C", str(root), "append", "small", str(src))
    assert len(run("-C", str(root), "cat", "small", "--version", "2").stdout.splitlines()) == 10
    assert len(run("-C", str(root), "cat", "small").stdout.splitlines()) == 20
    assert json.loads(run("-C", str(root), "show", "small", "--json", "--version", "2").stdout)["records"] == 10
    bad = run("-C", str(root), "show", "small", "--version", "9", ok=False)
    assert bad.exit_code == 1 and bad.stderr == "error: dataset 'small' has no version 9 (versions: 1 to 3; no tags)\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "nope"], "error: no dataset named 'nope' (`catalog list` names the datasets there are)\n"),
        (["show", "smal"], "error: no dataset named 'smal' (did you mean 'small'?)\n"),
        (
            ["cat", "../evil"],
            "error: invalid dataset name '../evil': use letters, digits, '.', '_' and '-', "
            "not starting with '.', at most 128 characters\n",
        ),
        (["show", ".hidden"], "error: invalid dataset name '.hidden'"),
        (["show", "a" * 129], "error: invalid dataset name"),
        (["history", "a/b"], "error: invalid dataset name 'a/b'"),
    ],
)
def test_name_errors(root: Path, args: list[str], message: str) -> None:
    result = run("-C", str(root), *args, ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def test_a_name_with_a_trailing_newline_is_refused(root: Path, tmp_path: Path) -> None:
    # `$` matches before a final newline: 'nl\n' was registered and broke `list`
    result = run("-C", str(root), "register", "nl\n", "--schema", str(tmp_path / "schema.json"), ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "error: invalid dataset name 'nl\\n': use letters, digits, '.', '_' and '-', not starting with '.', "
        "at most 128 characters\n",
    )
    assert [d["name"] for d in json.loads(run("-C", str(root), "list", "--json").stdout)] == ["small"]


def test_duplicate_register_and_bad_schema(root: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(json.dumps({"features": {"x": {"dtype": "int32"}}}))
    result = run("-C", str(root), "register", "small", "--schema", str(tmp_path / "bad.json"), ok=False)
    assert result.stderr.startswith(f"error: {tmp_path / 'bad.json'}: feature 'x': unknown dtype 'int32'")
    (tmp_path / "good.json").write_text(json.dumps(SMALL_SCHEMA))
    result = run("-C", str(root), "register", "small", "--schema", str(tmp_path / "good.json"), ok=False)
    assert (result.exit_code, result.stderr) == (1, "error: dataset 'small' already exists\n")


def test_missing_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CATALOG_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    result = run("list", ok=False)
    assert result.exit_code == 1
    assert result.stderr == "error: no catalog found: pass --catalog DIR, set CATALOG_ROOT, or run `catalog init DIR`\n"
    result = run("-C", str(tmp_path / "nowhere"), "list", ok=False)
    assert result.stderr.startswith(f"error: {tmp_path / 'nowhere'}: not a catalog")


def test_catalog_discovery(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CATALOG_ROOT", raising=False)
    deep = root / "data" / "small"
    deep.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(deep)
    assert json.loads(run("list", "--json").stdout)[0]["name"] == "small"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CATALOG_ROOT", str(root))
    assert json.loads(run("list", "--json").stdout)[0]["name"] == "small"


def test_bad_inputs_register_nothing(root: Path, tmp_path: Path) -> None:
    good = tmp_path / "good.tfrecord"
    write_tfrecord(good, small_rows(5))
    bad_rows = small_rows(5)
    bad_rows[3]["id"] = 1.5  # stored as a float list: breaks the int64 schema
    bad = tmp_path / "bad.tfrecord"
    write_tfrecord(bad, bad_rows)
    result = run("-C", str(root), "append", "small", str(good), str(bad), ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {bad}: record 3: feature 'id': stored as float_list, the schema wants int64_list (int64)\n"
    )
    corrupt = tmp_path / "corrupt.tfrecord"
    data = bytearray(good.read_bytes())
    data[30] ^= 1
    corrupt.write_bytes(bytes(data))
    result = run("-C", str(root), "append", "small", str(corrupt), ok=False)
    assert result.stderr == f"error: {corrupt}: byte 0: corrupt record: data CRC mismatch\n"
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"id": 1, "text": "a"}\n\n{"id": "two", "text": "b"}\n')
    result = run("-C", str(root), "append", "small", str(jsonl), ok=False)
    assert result.stderr == f"error: {jsonl}: record 1 (line 3): feature 'id': expected int64, got str 'two'\n"
    result = run("-C", str(root), "append", "small", str(tmp_path / "missing.tfrecord"), ok=False)
    assert result.stderr == f"error: {tmp_path / 'missing.tfrecord'}: no such file\n"
    show = json.loads(run("-C", str(root), "show", "small", "--json").stdout)
    assert (show["version"], show["records"], show["shards"]) == (1, 0, [])
    assert list((root / "data").rglob("*.tfrecord*")) == []


def test_append_on_a_pool_keeps_input_order_all_or_nothing(root: Path, tmp_path: Path) -> None:
    inputs = [tmp_path / f"in{k}.tfrecord" for k in range(3)]
    for k, path in enumerate(inputs):
        write_tfrecord(path, small_rows(10, start=10 * k))
    args = ["-C", str(root), "append", "small", *map(str, inputs), "--workers", "2", "--json"]
    doc = json.loads(run(*args).stdout)
    assert [s["records"] for s in doc["shards"]] == [10, 10, 10] and doc["version"] == 2
    with Catalog.open(root) as cat:
        assert [r["id"] for r in cat.dataset("small").read()] == list(range(30))  # input order
    bad_rows = small_rows(5)
    bad_rows[3]["id"] = 1.5
    bad = tmp_path / "bad.tfrecord"
    write_tfrecord(bad, bad_rows)
    result = run("-C", str(root), "append", "small", str(inputs[0]), str(bad), "--workers", "2", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {bad}: record 3: feature 'id': stored as float_list, the schema wants int64_list (int64)\n"
    )
    with Catalog.open(root) as cat:
        assert cat.dataset("small").info().version == 2  # nothing registered
        assert len(list((root / "data" / "small").iterdir())) == 3  # and no file left behind


@pytest.mark.parametrize(
    "args",
    [
        ["append", "small", "x", "--shard-size", "lots"],
        ["append", "small", "x", "--shard-size", "0"],
        ["gc", "--grace", "soon"],
        ["gc", "--grace", "5w"],
        ["gc", "--grace", "99999999999999999d"],  # beyond what a timedelta holds: was OverflowError
        ["gc", "--older-than", "9" * 400],
        ["show"],
    ],
)
def test_usage_errors_exit_2(root: Path, args: list[str]) -> None:
    assert run("-C", str(root), *args, ok=False).exit_code == 2


def test_sizes_and_rolling(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(300))
    doc = json.loads(run("-C", str(root), "append", "small", str(src), "--shard-size", "4KiB", "--json").stdout)
    assert len(doc["shards"]) > 3
    assert all(s["bytes"] <= 4096 for s in doc["shards"])
    assert sum(s["records"] for s in doc["shards"]) == 300


def test_token_retry_is_noop(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(7))
    first = json.loads(run("-C", str(root), "append", "small", str(src), "--token", "T1", "-m", "hi", "--json").stdout)
    again = run("-C", str(root), "append", "small", str(src), "--token", "T1")
    assert "already committed" in again.stdout and f"version {first['version']}" in again.stdout
    show = json.loads(run("-C", str(root), "show", "small", "--json").stdout)
    assert show["records"] == 7 and show["version"] == 2
    hist = json.loads(run("-C", str(root), "history", "small", "--json").stdout)
    assert hist[-1]["message"] == "hi"


def test_link_adopts_by_hard_link_and_verify_catches_edits(root: Path, tmp_path: Path) -> None:
    src = root.parent / "linked.tfrecord"  # same filesystem as the catalog
    write_tfrecord(src, small_rows(20))
    doc = json.loads(run("-C", str(root), "append", "small", str(src), "--link", "--json").stdout)
    shard = Path(doc["shards"][0]["path"])
    assert os.stat(shard).st_ino == os.stat(src).st_ino and doc["shards"][0]["records"] == 20
    with open(src, "r+b") as f:  # edit through the other name
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0xFF]))
    result = run("-C", str(root), "verify", ok=False)
    assert result.exit_code == 1
    assert result.stdout.startswith(f"unreadable: {shard}: checksum crc32c:")
    assert result.stderr.startswith("FAILED: 1 shard, ")


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in-process", "pool"])
def test_verify_reports_every_problem(root: Path, tmp_path: Path, workers: list[str]) -> None:
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(40))
    doc = json.loads(run("-C", str(root), "append", "small", str(src), "--shard-records", "10", "--json").stdout)
    paths = [Path(s["path"]) for s in doc["shards"]]
    paths[0].unlink()
    with open(paths[1], "ab") as f:
        f.write(b"x")
    data = bytearray(paths[2].read_bytes())
    data[-1] ^= 1  # the last data CRC: the file still frames, but the checksum differs
    paths[2].write_bytes(bytes(data))
    stray = root / "data" / "small" / "0123456789abcdef0123456789ab-00000.tfrecord"  # named as the catalog names shards
    stray.write_bytes(b"")
    result = run("-C", str(root), "verify", "--json", *workers, ok=False)
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    kinds = {(p["problem"], p["path"]) for p in doc["problems"]}
    assert ("missing", str(paths[0])) in kinds
    assert ("size", str(paths[1])) in kinds
    assert ("unreadable", str(paths[2])) in kinds
    assert ("unregistered", str(stray)) in kinds
    assert doc["ok"] is False
    assert (
        result.stderr == "FAILED: 4 shards, 1.4 KiB checked: 3 problems, 1 unregistered file\n"
        or result.stderr.startswith("FAILED: 4 shards")
    )


def test_unregistered_alone_is_not_a_failure_and_gc_grace(root: Path) -> None:
    stray = root / "data" / "small" / "0123456789abcdef0123456789ab-00000.tfrecord"  # named as the catalog names shards
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"abc")
    result = run("-C", str(root), "verify")
    assert result.stdout.startswith("unregistered: ")
    assert result.stderr.startswith("ok: 0 shards")
    kept = json.loads(run("-C", str(root), "gc", "--json").stdout)
    assert kept["removed"] == [] and stray.exists()
    dry = json.loads(run("-C", str(root), "gc", "--grace", "0", "--dry-run", "--json").stdout)
    assert dry["removed"] == [str(stray)] and stray.exists()
    gone = json.loads(run("-C", str(root), "gc", "--grace", "0s", "--json").stdout)
    assert gone["removed"] == [str(stray)] and not stray.exists()


def test_drop_then_gc(root: Path, tmp_path: Path) -> None:
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(3))
    doc = json.loads(run("-C", str(root), "append", "small", str(src), "--json").stdout)
    run("-C", str(root), "drop", "small")
    assert json.loads(run("-C", str(root), "list", "--json").stdout) == []
    assert run("-C", str(root), "show", "small", ok=False).exit_code == 1
    removed = json.loads(run("-C", str(root), "gc", "--grace", "0", "--json").stdout)["removed"]
    assert removed == [doc["shards"][0]["path"]]
    assert not (root / "data" / "small").exists()


def test_gc_older_than_before_any_date_keeps_every_retired_shard(root: Path, tmp_path: Path) -> None:
    # 999999 days before now is before year 1: `now - older_than` was OverflowError
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(4))
    run("-C", str(root), "append", "small", str(src), "--shard-records", "2")
    run("-C", str(root), "compact", "small")
    doc = json.loads(run("-C", str(root), "gc", "--older-than", "999999d", "--grace", "0", "--json").stdout)
    assert (doc["removed"], doc["kept_retired"]) == ([], 2)


def test_a_bad_port_is_one_line(tmp_path: Path) -> None:
    result = run("init", str(tmp_path / "c"), "--db-url", "postgresql://u:pw-x7@h:notaport/db", ok=False)
    assert (result.exit_code, result.stderr) == (1, "error: bad database URL: its port 'notaport' is not a number\n")
    assert not (tmp_path / "c").exists()


def test_backup_into_a_missing_directory_is_one_line(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "nowhere" / "x.db"
    result = run("-C", str(root), "backup", str(out), ok=False)
    assert (result.exit_code, result.stderr) == (1, f"error: {out}: cannot write there: no such directory\n")
    assert not out.parent.exists()


@pytest.mark.sqlite_only
def test_backup_is_a_consistent_sqlite_copy(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "backup.db"
    run("-C", str(root), "backup", str(out))
    with sqlite3.connect(out) as db:
        assert db.execute("select name, version from datasets").fetchall() == [("small", 1)]
    result = run("-C", str(root), "backup", str(out), ok=False)
    assert result.stderr == f"error: {out}: already exists; use --force to replace it\n"


@pytest.mark.sqlite_only
def test_catalog_files_are_not_writable_by_others_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        root = tmp_path / "c"
        run("init", str(root))
        run("-C", str(root), "copy-manifest", f"sqlite:///{tmp_path / 'copy.db'}", "--no-switch")
        run("-C", str(root), "backup", str(tmp_path / "backup.db"))
        run("-C", str(root), "copy-manifest", f"sqlite:///{tmp_path / 'moved.db'}")  # rewrites catalog.json
        with Catalog.open(root) as cat:  # the WAL and its index exist while a connection is open
            cat.register("d", {"features": {"x": {"dtype": "int64"}}})
            files = [root / "catalog.json", root / "catalog.db", tmp_path / "copy.db", tmp_path / "backup.db"]
            files += [tmp_path / "moved.db", tmp_path / "moved.db-wal", tmp_path / "moved.db-shm"]
            modes = {p.name: oct(p.stat().st_mode & 0o777) for p in files}
    finally:
        os.umask(old)
    assert modes == {p.name: "0o644" for p in files}


# --------------------------------------------------------------------------- a damaged manifest
# Real catalog.db files with bytes flipped in the page holding a row: found by dbstat, or by
# a marker string stored in the row (its integers follow the text columns in the record).


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    """A closed catalog: dataset 'd' (description DESCMARK), one append of 100 records (token
    TOKENMARK, message MSGMARK) in one 3000-byte shard."""
    root = tmp_path / "m"
    with Catalog.init(root) as cat:
        ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}}, description="DESCMARK")
        ds.append_rows([{"x": i} for i in range(100)], token="TOKENMARK", message="MSGMARK")
        assert ds.info().bytes == 3000  # stored as 2 bytes (0x0bb8) after the 1-byte records
    assert not (root / "catalog.db-wal").exists()  # all of it in the file
    return root


def flip(root: Path, marker: bytes, offset: int, mask: int) -> None:
    """XOR ``mask`` into the byte ``offset`` bytes past ``marker`` in catalog.db."""
    path = root / "catalog.db"
    data = bytearray(path.read_bytes())
    data[data.index(marker) + len(marker) + offset] ^= mask
    path.write_bytes(bytes(data))


def break_page(root: Path, table: str) -> None:
    """Give the b-tree leaf page of ``table`` a page type no page has."""
    path = root / "catalog.db"
    with sqlite3.connect(path) as db:
        (page,) = db.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf'", (table,)).fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    data[(page - 1) * size] = 0x00
    path.write_bytes(bytes(data))


def damaged_line(root: Path, detail: str) -> str:
    hint = "(`catalog verify` checks all of it)"
    return f"error: sqlite:///{root / 'catalog.db'}: the manifest is damaged: {detail} {hint}\n"


@pytest.mark.sqlite_only
def test_a_malformed_manifest_page_is_one_line_and_verify_reports_it(marked: Path, tmp_path: Path) -> None:
    break_page(marked, "commits")
    line = f"error: manifest database error in sqlite:///{marked / 'catalog.db'}: database disk image is malformed\n"
    for args in (["history", "d"], ["show", "d"], ["cat", "d"], ["list"]):
        result = run("-C", str(marked), *args, ok=False)
        assert (result.exit_code, result.stderr) == (1, line), args
    src = tmp_path / "in.jsonl"
    src.write_text('{"x": 1}\n')
    result = run("-C", str(marked), "append", "d", str(src), ok=False)  # the commit's write fails
    assert (result.exit_code, result.stderr) == (1, line)
    assert len(list((marked / "data" / "d").iterdir())) == 1  # the new shard went with it
    result = run("-C", str(marked), "verify", ok=False)
    assert result.exit_code == 1
    assert result.stdout == f"manifest: sqlite:///{marked / 'catalog.db'}: database disk image is malformed\n"
    assert result.stderr == "FAILED: 0 shards, 0 B checked: 1 problem\n"


@pytest.mark.sqlite_only
def test_a_mangled_date_is_one_line(marked: Path) -> None:
    flip(marked, b"append", 5, 0x40)  # the commit's created_at, "2026-1..." -> "2026-q..."
    result = run("-C", str(marked), "history", "d", ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"error: manifest database error in sqlite:///{marked / 'catalog.db'}: Invalid isoformat string: '2026-q"
    )
    assert result.stderr.count("\n") == 1
    result = run("-C", str(marked), "verify", "--json", ok=False)
    (problem,) = json.loads(result.stdout)["problems"]
    assert (problem["dataset"], problem["problem"]) == ("d", "manifest")
    assert "Invalid isoformat string" in problem["detail"]


CHAIN = "dataset 'd' version 2: its totals say {}, its shards hold 100 records, 3000 bytes in 1 shard"
ROW = "dataset 'd' version 2: the dataset row says {}, its commit {}"
GOOD = "100 records, 3000 bytes in 1 shard"


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("marker", "offset", "mask", "expected"),
    [
        (  # the commit's records_added: 100 -> 116; its totals still hold
            b"TOKENMARK", 0, 0x10,
            {"history": "dataset 'd' version 2: it says it added 116 records in 1 shard, its shards hold " + GOOD},
        ),
        (  # the commit's total records: 100 -> 116
            b"TOKENMARK", 1, 0x10,
            {
                "history": CHAIN.format("116 records, 3000 bytes in 1 shard"),
                "show": ROW.format(GOOD, "116 records, 3000 bytes in 1 shard"),
                "list": ROW.format(GOOD, "116 records, 3000 bytes in 1 shard"),
            },
        ),
        (  # the commit's total bytes: 3000 -> -29768 (the sign bit of its first byte)
            b"TOKENMARK", 2, 0x80,
            {
                "history": CHAIN.format("100 records, -29768 bytes in 1 shard"),
                "show": "dataset 'd' version 2: its commit says 100 records, -29768 bytes in 1 shard",
            },
        ),
        (  # the dataset row's records, after its created_at (26 characters) and version: 100 -> 36
            b"DESCMARK", 27, 0x40,
            dict.fromkeys(["show", "list"], ROW.format("36 records, 3000 bytes in 1 shard", GOOD)),
        ),
    ],
)  # fmt: skip
def test_flipped_totals_are_caught_not_shown(
    marked: Path, marker: bytes, offset: int, mask: int, expected: dict[str, str]
) -> None:
    flip(marked, marker, offset, mask)
    for command, detail in expected.items():
        args = [command] if command == "list" else [command, "d"]
        result = run("-C", str(marked), *args, ok=False)
        assert (result.exit_code, result.stderr) == (1, damaged_line(marked, detail)), command
    result = run("-C", str(marked), "verify", ok=False)
    assert result.exit_code == 1
    first = next(iter(expected.values())) if "history" in expected else expected["show"]
    assert result.stdout.startswith(f"manifest: sqlite:///{marked / 'catalog.db'}: the manifest is damaged: {first}\n")


@pytest.mark.sqlite_only  # the fixture is a SQLite file
def test_first_format_fixture_and_upgrade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from catalog import manifest

    root = tmp_path / "old"
    shutil.copytree(FIXTURE, root)
    result = run("-C", str(root), "list", ok=False)
    assert (
        result.stderr
        == f"error: the manifest has format 1, older than {manifest.FORMAT_VERSION}: run `catalog upgrade`\n"
    )
    assert run("-C", str(root), "upgrade").stdout == f"manifest format 1 -> {manifest.FORMAT_VERSION}\n"
    listing = json.loads(run("-C", str(root), "list", "--json").stdout)
    assert [(d["name"], d["version"], d["records"]) for d in listing] == [("legacy", 3, 15)]
    rows = [json.loads(line) for line in run("-C", str(root), "cat", "legacy").stdout.splitlines()]
    assert [r["id"] for r in rows] == list(range(15)) and rows[12]["w"] == 1.0  # format 1's order kept
    assert json.loads(run("-C", str(root), "verify", "--json").stdout)["ok"] is True
    assert run("-C", str(root), "upgrade").stdout == f"manifest already at format {manifest.FORMAT_VERSION}\n"
    # an upgraded manifest takes appends and reads them after the old shards
    run("-C", str(root), "append", "legacy", str(_jsonl(tmp_path, [{"id": 15, "name": "new", "w": 2.0}])))
    rows = [json.loads(line) for line in run("-C", str(root), "cat", "legacy").stdout.splitlines()]
    assert [r["id"] for r in rows] == list(range(16))

    with sqlite3.connect(root / "catalog.db") as db:
        db.execute(
            "update catalog_meta set value = ? where key = 'format_version'", (str(manifest.FORMAT_VERSION - 1),)
        )
    calls: list[int] = []
    monkeypatch.setitem(manifest.UPGRADES, manifest.FORMAT_VERSION - 1, lambda conn: calls.append(0))
    assert run("-C", str(root), "upgrade").stdout == (
        f"manifest format {manifest.FORMAT_VERSION - 1} -> {manifest.FORMAT_VERSION}\n"
    )
    assert calls == [0]
    assert json.loads(run("-C", str(root), "list", "--json").stdout)[0]["records"] == 16

    with sqlite3.connect(root / "catalog.db") as db:
        db.execute("update catalog_meta set value = '99' where key = 'format_version'")
    result = run("-C", str(root), "list", ok=False)
    assert result.stderr.startswith("error: the manifest has format 99, newer than this catalog understands")


def _jsonl(tmp_path: Path, rows: list[dict[str, Any]]) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_python_api_round_trip(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "c")
    ds = cat.register("demo", DEMO_SCHEMA, description="d")
    rows = demo_rows(30)
    commit = ds.append_rows(rows[:20], message="m", shard_records=8)
    assert (commit.version, commit.records, len(commit.shards)) == (2, 20, 3)
    with ds.writer(message="w") as w:
        for r in rows[20:]:
            w.write(r)
    assert w.commit is not None and w.commit.version == 3
    got = list(ds.read())
    assert [r["id"] for r in got] == list(range(30))
    assert [r["id"] for r in ds.read(version=2)] == list(range(20))
    batches = list(ds.batches(12))
    assert [len(b["id"]) for b in batches] == [12, 12, 6]
    assert batches[0]["image"].shape == (12, 4, 4, 3)
    assert len(ds.files()) == 4 and all(os.path.isabs(p) for p in ds.files())
    assert [c.kind for c in ds.history()] == ["create", "append", "append"]
    assert ds.verify().ok
    assert [i.name for i in Catalog.open(tmp_path / "c").list()] == ["demo"]


def test_verify_counts_retired_shards_apart(root: Path, tmp_path: Path) -> None:
    """A 4-shard version whose first version's 4 shards were retired by a migration: verify
    checks all 8 (time travel reads the retired ones) but says which are which."""
    src = tmp_path / "in.tfrecord"
    write_tfrecord(src, small_rows(40))
    run("-C", str(root), "append", "small", str(src), "--shard-records", "10")
    run("-C", str(root), "migrate", "small", "--add", "h:int64=0")
    (tmp_path / "other.json").write_text(json.dumps({"features": {"x": {"dtype": "int64"}}}))
    run("-C", str(root), "register", "other", "--schema", str(tmp_path / "other.json"))
    src2 = tmp_path / "x.jsonl"
    src2.write_text('{"x": 1}\n')
    run("-C", str(root), "append", "other", str(src2))
    size = sum(p.stat().st_size for p in (root / "data" / "small").iterdir())
    result = run("-C", str(root), "verify", "small")
    assert result.stderr == f"ok: 4 shards and 4 retired shards, {size / 1024:.1f} KiB checked: 0 problems\n"
    doc = json.loads(run("-C", str(root), "verify", "small", "--json").stdout)
    assert (doc["shards"], doc["retired"], doc["checked"]) == (4, 4, 8)
    assert doc["datasets"] == {"small": {"shards": 4, "retired": 4}}
    everything = json.loads(run("-C", str(root), "verify", "--json").stdout)
    assert (everything["shards"], everything["retired"], everything["checked"]) == (5, 4, 9)
    assert everything["datasets"] == {"small": {"shards": 4, "retired": 4}, "other": {"shards": 1, "retired": 0}}
    assert run("-C", str(root), "verify", "other").stderr.startswith("ok: 1 shard, ")
    report = Catalog.open(root).verify(["small"])
    assert (report.shards, report.retired, report.checked) == (4, 4, 8)
