"""The migration verbs through CliRunner: JSON shapes, exit codes and exact one-line errors.

migrate (files, --to, --dry-run, quick --add/--drop/--rename), migrations new/list, restore,
compact, export and gc's retired-shard options.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, read_records
from catalog.cli import app

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

runner = CliRunner()
SMALL_HAS = "versions: 1 to 2; no tags"  # what an unknown version's error names
SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "raw": {"dtype": "bytes", "default": ""},
        "score": {"dtype": "float32", "default": 0.0},
    }
}
ROWS = 30
SHARD_RECORDS = 10
IMPORTS = "from catalog.migrate import AddField, CastField, DropField, RenameField, Transform\n\n"


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def rows(n: int = ROWS, start: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"t{i}", "raw": bytes([i % 256]), "score": i / 4} for i in range(start, start + n)]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cat"
    run("init", str(r))
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    run("-C", str(r), "register", "small", "--schema", str(tmp_path / "schema.json"))
    with Catalog.open(r) as cat:
        cat.dataset("small").append_rows(rows(), shard_records=SHARD_RECORDS)  # version 2, 3 shards
    return r


@pytest.fixture
def mdir(tmp_path: Path) -> Path:
    return tmp_path / "migrations"


def c(root: Path, *args: str, ok: bool = True) -> Any:
    return run("-C", str(root), *args, ok=ok)


def script(mdir: Path, name: str, body: str) -> Path:
    path = mdir / "small" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(IMPORTS + textwrap.dedent(body))
    return path


def show(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(c(root, "show", "small", "--json").stdout)
    return out


def cat_rows(root: Path, *args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in c(root, "cat", "small", *args).stdout.splitlines()]


def listing(root: Path, mdir: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(
        c(root, "migrations", "list", "small", "--migrations", str(mdir), "--json").stdout
    )
    return out


def one_line_error(result: Any, expected: str) -> None:
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr == expected
    assert "Traceback" not in result.output


def data_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "data" / "small").iterdir())


# --------------------------------------------------------------------------- migrate


def test_dry_run_json_shape(root: Path, mdir: Path) -> None:
    path = script(
        mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256), DropField("raw")]\n'
    )
    script(mdir, "0002_rename.py", 'operations = [RenameField("text", "caption")]\n')
    before, files = show(root), data_files(root)
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--dry-run", "--json").stdout)
    assert set(doc) == {"dataset", "dry_run", "version", "schema_version", "migrations", "duplicate"}
    assert (doc["dataset"], doc["dry_run"], doc["version"], doc["schema_version"]) == ("small", True, 2, 1)
    first, second = doc["migrations"]
    assert set(first) == {
        "id",
        "checksum",
        "operations",
        "from_schema_version",
        "to_schema_version",
        "diff",
        "shards",
        "records",
        "version",
        "seconds",
    }
    assert first["id"] == "0001_add_h" and second["id"] == "0002_rename"
    assert first["checksum"] == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert first["operations"] == ["add h (int64) = 256", "drop raw"]
    assert (first["from_schema_version"], first["to_schema_version"]) == (1, 2)
    assert (second["from_schema_version"], second["to_schema_version"]) == (2, 3)
    assert first["diff"] == {"added": ["h"], "removed": ["raw"], "changed": {}}
    assert second["diff"] == {"added": ["caption"], "removed": ["text"], "changed": {}}
    assert (first["records"], first["shards"], first["version"]) == (ROWS, 3, None)
    assert isinstance(first["seconds"], (int, float))
    # nothing written
    assert show(root) == before and data_files(root) == files
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_h", "pending"),
        ("0002_rename", "pending"),
    ]

    text = c(root, "migrate", "small", "--migrations", str(mdir), "--dry-run").stdout
    assert text == (
        "would apply 0001_add_h: schema v1 -> v2, 30 records in 3 shards\n"
        "  add h (int64) = 256\n"
        "  drop raw\n"
        "  added: h\n"
        "  removed: raw\n"
        "would apply 0002_rename: schema v2 -> v3, 30 records in 3 shards\n"
        "  rename text -> caption\n"
        "  added: caption\n"
        "  removed: text\n"
    )


def test_migrate_files_with_to(root: Path, mdir: Path) -> None:
    script(mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256)]\n')
    script(mdir, "0002_cast.py", 'operations = [CastField("score", {"dtype": "int64", "default": 0}, lossy=True)]\n')
    out = c(root, "migrate", "small", "--migrations", str(mdir), "--to", "1").stdout
    assert re.fullmatch(
        r"applied 0001_add_h: schema v1 -> v2 -> version 3, 30 records in 3 shards \(\d+\.\d\d s\)\n"
        r"  add h \(int64\) = 256\n  added: h\n",
        out,
    ), out
    got = listing(root, mdir)
    assert [(m["id"], m["status"], m["version"]) for m in got] == [
        ("0001_add_h", "applied", 3),
        ("0002_cast", "pending", None),
    ]
    assert (got[0]["from_schema_version"], got[0]["to_schema_version"], got[0]["rows"]) == (1, 2, ROWS)
    assert [r["h"] for r in cat_rows(root)] == [256] * ROWS
    assert [r["score"] for r in cat_rows(root)] == [i / 4 for i in range(ROWS)]

    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--to", "0002", "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0002_cast"]
    assert (doc["version"], doc["schema_version"], doc["dry_run"]) == (4, 3, False)
    assert doc["migrations"][0]["version"] == 4
    assert [r["score"] for r in cat_rows(root)] == [i // 4 for i in range(ROWS)]
    assert cat_rows(root, "--version", "2") == [
        {"id": i, "text": f"t{i}", "raw": base64.b64encode(bytes([i])).decode(), "score": i / 4} for i in range(ROWS)
    ]
    again = c(root, "migrate", "small", "--migrations", str(mdir))
    assert again.stdout == "small: no pending migrations (schema version 3)\n"
    hist = json.loads(c(root, "history", "small", "--json").stdout)
    assert [(h["version"], h["kind"], h["schema_version"]) for h in hist] == [
        (1, "create", 1),
        (2, "append", 1),
        (3, "migrate", 2),
        (4, "migrate", 3),
    ]
    assert json.loads(c(root, "verify", "--json").stdout)["ok"] is True


def test_quick_migrations_are_recorded(root: Path, mdir: Path) -> None:
    doc = json.loads(
        c(
            root, "migrate", "small", "--migrations", str(mdir), "--add", "h:int64=256", "--add", "w:float32=0.5",
            "--add", "label:string=hi there", "--drop", "raw", "--rename", "text:caption", "-m", "quick one",
            "--json",
        ).stdout
    )  # fmt: skip
    (m,) = doc["migrations"]
    assert m["id"] == "0001_quick" and (m["from_schema_version"], m["to_schema_version"], m["version"]) == (1, 2, 3)
    diff = m["diff"]  # names in schema order
    assert (sorted(diff["added"]), sorted(diff["removed"]), diff["changed"]) == (
        ["caption", "h", "label", "w"],
        ["raw", "text"],
        {},
    )
    got = listing(root, mdir)
    assert [(g["id"], g["status"], g["version"], g["to_schema_version"]) for g in got] == [
        ("0001_quick", "applied", 3, 2)
    ]
    assert got[0]["checksum"] == m["checksum"] and got[0]["checksum"].startswith("sha256:")
    assert cat_rows(root) == [
        {"id": i, "score": i / 4, "h": 256, "w": 0.5, "label": "hi there", "caption": f"t{i}"} for i in range(ROWS)
    ]
    hist = json.loads(c(root, "history", "small", "--json").stdout)
    assert (hist[-1]["kind"], hist[-1]["message"]) == ("migrate", "quick one")

    c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "w")
    assert [(g["id"], g["status"]) for g in listing(root, mdir)] == [
        ("0001_quick", "applied"),
        ("0002_quick", "applied"),
    ]
    text = c(root, "migrations", "list", "small", "--migrations", str(mdir)).stdout.splitlines()
    assert text[0].split() == ["MIGRATION", "STATUS", "SCHEMA", "VERSION", "CHECKSUM"]
    assert text[1].split()[:4] == ["0001_quick", "applied", "v1->v2", "3"]
    assert text[2].split()[:4] == ["0002_quick", "applied", "v2->v3", "4"]


def test_history_shows_what_each_commit_added_and_removed(root: Path, mdir: Path) -> None:
    c(root, "migrate", "small", "--add", "h:int64=1", "--migrations", str(mdir))  # v3 rewrites 3 shards
    with Catalog.open(root) as cat:
        cat.dataset("small").append_rows([{"id": 99, "text": "x", "h": 2}])  # v4: 1 shard
    c(root, "restore", "small", "--version", "2")  # v5: v2's 3 shards back, 4 shards (31 records) out
    hist = json.loads(c(root, "history", "small", "--json").stdout)
    got = [(h["kind"], h["records"], h["records_removed"], h["shard_count"], h["shards_removed"]) for h in hist]
    assert got == [
        ("create", 0, 0, 0, 0),
        ("append", ROWS, 0, 3, 0),
        ("migrate", ROWS, ROWS, 3, 3),
        ("append", 1, 0, 1, 0),
        ("restore", ROWS, ROWS + 1, 3, 4),
    ]
    assert [h["total_records"] for h in hist] == [0, ROWS, ROWS, ROWS + 1, ROWS]
    text = c(root, "history", "small").stdout.splitlines()
    assert [line[line.index("  +") + 2 :] for line in text] == [
        "+0 -0 records, +0 -0 shards",
        f"+{ROWS} -0 records, +3 -0 shards",
        f"+{ROWS} -{ROWS} records, +3 -3 shards  migration 0001_quick: add h (int64) = 1",
        "+1 -0 records, +1 -0 shards",
        f"+{ROWS} -{ROWS + 1} records, +3 -4 shards  restore version 2",
    ]
    c(root, "gc", "--keep-versions", "1", "--grace", "0")  # collected shards keep their rows: the same history
    assert json.loads(c(root, "history", "small", "--json").stdout) == hist


def test_migrations_new_numbering_and_template(root: Path, mdir: Path) -> None:
    out = c(root, "migrations", "new", "small", "add_height", "--migrations", str(mdir)).stdout
    first = mdir / "small" / "0001_add_height.py"
    assert out == f"wrote {first}; fill in `operations`, then run `catalog migrate small --dry-run`\n"
    c(root, "migrations", "new", "small", "drop-raw", "--migrations", str(mdir))
    second = mdir / "small" / "0002_drop_raw.py"
    assert sorted(p.name for p in (mdir / "small").iterdir()) == [first.name, second.name]
    source = first.read_text()
    ast.parse(source)  # valid Python
    namespace: dict[str, Any] = {}
    exec(compile(source, str(first), "exec"), namespace)
    assert namespace["operations"] == []
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_height", "pending"),
        ("0002_drop_raw", "pending"),
    ]

    # the unedited template is refused with one clear line, before anything is written
    files = data_files(root)
    result = c(root, "migrate", "small", "--migrations", str(mdir), ok=False)
    one_line_error(result, f"error: {first}: `operations` must be a non-empty list of catalog.migrate operations\n")
    # filling in the first is not enough: every pending script is loaded before any is applied
    first.write_text(
        source.replace("operations = [", 'operations = [\n    AddField("h", {"dtype": "int64"}, default=1),')
    )
    result = c(root, "migrate", "small", "--migrations", str(mdir), ok=False)
    one_line_error(result, f"error: {second}: `operations` must be a non-empty list of catalog.migrate operations\n")
    assert show(root)["version"] == 2 and data_files(root) == files

    second.unlink()
    c(root, "migrate", "small", "--migrations", str(mdir))
    first.unlink()  # an applied migration keeps its number even when its file is gone
    c(root, "migrations", "new", "small", "next", "--migrations", str(mdir))
    assert (mdir / "small" / "0002_next.py").exists()
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_height", "missing"),
        ("0002_next", "pending"),
    ]
    result = c(root, "migrations", "new", "small", "bad slug!", "--migrations", str(mdir), ok=False)
    one_line_error(result, "error: slug 'bad slug!': use letters, digits and '_' (it becomes part of a file name)\n")


def test_migrations_new_refuses_a_slug_with_a_trailing_newline(root: Path, mdir: Path) -> None:
    # 'x\n' passed `^...$` and wrote "0001_x\n.py", which every later migrate refused to read
    result = c(root, "migrations", "new", "small", "x\n", "--migrations", str(mdir), ok=False)
    one_line_error(result, "error: slug 'x\\n': use letters, digits and '_' (it becomes part of a file name)\n")
    assert not (mdir / "small").exists() or list((mdir / "small").iterdir()) == []
    c(root, "migrate", "small", "--add", "h:int64=1", "--migrations", str(mdir))  # still works
    assert show(root)["version"] == 3


def test_quick_add_keeps_a_default_ending_in_a_newline(root: Path, mdir: Path) -> None:
    # `(.*)$` stopped before a final newline: the default "a\n" became "a" without a word
    c(root, "migrate", "small", "--add", "note:string=a\n", "--migrations", str(mdir))
    assert {r["note"] for r in cat_rows(root)} == {"a\n"}


def test_default_migrations_folder(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    c(root, "migrations", "new", "small", "add_h")
    path = tmp_path / "migrations" / "small" / "0001_add_h.py"
    path.write_text(IMPORTS + 'operations = [AddField("h", {"dtype": "int64"}, default=7)]\n')
    c(root, "migrate", "small")
    assert [r["h"] for r in cat_rows(root)] == [7] * ROWS


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["migrate", "smal", "--add", "h:int64=1"], "error: no dataset named 'smal' (did you mean 'small'?)\n"),
        (["migrations", "list", "smal"], "error: no dataset named 'smal' (did you mean 'small'?)\n"),
        (
            ["migrate", "small", "--drop", "nope"],
            "error: DropField: no feature 'nope' in the schema (it has id, text, raw, score)\n",
        ),
        (
            ["migrate", "small", "--add", "h:int64"],
            "error: --add 'h:int64': a feature added without a default is refused (FEATURE:DTYPE=DEFAULT)\n",
        ),
        (["migrate", "small", "--rename", "text"], "error: --rename 'text': use OLD:NEW\n"),
        (["migrate", "small", "--rename", "text:"], "error: --rename 'text:': use OLD:NEW\n"),
        (["migrate", "small", "--rename", "text:id"], "error: RenameField: feature 'id' already exists\n"),
        (["migrate", "small", "--add", "id:int64=1"], "error: AddField: feature 'id' already exists\n"),
        (
            ["migrate", "small", "--add", "height"],
            "error: --add 'height': use FEATURE:DTYPE[=DEFAULT], e.g. height:int64=256\n",
        ),
        (
            ["migrate", "small", "--add", "h:int64=tall"],
            "error: --add 'h:int64=tall': 'tall' is not a valid int64 value\n",
        ),
        (["restore", "small", "--version", "99"], f"error: dataset 'small' has no version 99 ({SMALL_HAS})\n"),
        (["export", "small", "OUT", "--version", "9"], f"error: dataset 'small' has no version 9 ({SMALL_HAS})\n"),
    ],
)
def test_one_line_errors(root: Path, tmp_path: Path, mdir: Path, args: list[str], message: str) -> None:
    args = [str(tmp_path / "out.tfrecord") if a == "OUT" else a for a in args]
    before, files = show(root), data_files(root)
    result = c(root, *args, "--migrations", str(mdir), ok=False) if "migrate" in args else c(root, *args, ok=False)
    one_line_error(result, message)
    assert show(root) == before and data_files(root) == files
    assert not (tmp_path / "out.tfrecord").exists()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_script_errors(root: Path, mdir: Path, workers: str) -> None:
    files = data_files(root)
    raising = script(mdir, "0001_boom.py", 'raise RuntimeError("boom")\n')
    result = c(root, "migrate", "small", "--migrations", str(mdir), "--workers", workers, ok=False)
    one_line_error(result, f"error: {raising}: the migration script failed: RuntimeError: boom\n")
    raising.unlink()

    empty = script(mdir, "0001_empty.py", "x = 1\n")
    result = c(root, "migrate", "small", "--migrations", str(mdir), "--workers", workers, ok=False)
    one_line_error(result, f"error: {empty}: `operations` must be a non-empty list of catalog.migrate operations\n")
    empty.unlink()

    # a function of the script that raises on one record: named by shard and record
    script(
        mdir, "0001_div.py", 'operations = [AddField("h", {"dtype": "int64"}, fn=lambda row: 10 // (row["id"] - 14))]\n'
    )
    shard = show(root)["shards"][1]["path"]  # id 14 is the fifth record of the second shard
    result = c(root, "migrate", "small", "--migrations", str(mdir), "--workers", workers, ok=False)
    one_line_error(
        result,
        f"error: 0001_div: {shard}: record 4: the migration raised ZeroDivisionError: integer division or modulo by "
        "zero\n",
    )
    assert show(root)["version"] == 2 and data_files(root) == files
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [("0001_div", "pending")]


def test_script_error_through_the_real_command(root: Path, mdir: Path) -> None:
    """The console entry point with worker processes: one line on stderr, exit 1, no traceback."""
    script(mdir, "0001_cast.py", 'operations = [CastField("score", {"dtype": "int64"})]\n')
    shards = show(root)["shards"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "catalog",
            "-C",
            str(root),
            "migrate",
            "small",
            "--migrations",
            str(mdir),
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    # every shard holds a non-integral score (ids 1, 10, 21: 0.25, 2.5, 5.25); with two workers any can fail first
    candidates = {
        f"error: 0001_cast: {s['path']}: record {local}: feature 'score': value {value} cannot be cast to int64 "
        "without loss (CastField(..., lossy=True))\n"
        for s, local, value in zip(shards, (1, 0, 1), (0.25, 2.5, 5.25), strict=True)
    }
    assert proc.stderr in candidates, proc.stderr
    assert show(root)["version"] == 2


# --------------------------------------------------------------------------- restore, compact, export, gc


def test_restore_compact_export(root: Path, mdir: Path, tmp_path: Path) -> None:
    c(root, "migrate", "small", "--migrations", str(mdir), "--add", "h:int64=1")
    out = c(root, "restore", "small", "--version", "2").stdout
    assert out == "restored small to version 2 as version 4 (schema version 3): 30 records in 3 shards\n"
    assert cat_rows(root) == cat_rows(root, "--version", "2")
    assert listing(root, mdir) == []  # the quick migration was undone with its version
    assert json.loads(c(root, "restore", "small", "--version", "3", "--json").stdout)["kind"] == "restore"
    assert cat_rows(root) == cat_rows(root, "--version", "3")

    before = cat_rows(root)
    doc = json.loads(c(root, "compact", "small", "--target-size", "1MiB", "--json").stdout)
    assert (doc["data_change"], doc["shards_before"], doc["shards_after"], doc["groups"]) == (False, 3, 1, 1)
    assert cat_rows(root) == before and show(root)["shard_count"] == 1
    assert c(root, "compact", "small").stdout == "small: nothing to compact (1 shard)\n"

    out_file = tmp_path / "export.tfrecord.gz"
    doc = json.loads(c(root, "export", "small", str(out_file), "--compression", "gzip", "--json").stdout)
    assert (doc["records"], doc["compression"], doc["version"]) == (ROWS, "gzip", show(root)["version"])
    shards = show(root)["shards"]
    assert list(read_records(out_file)) == [r for s in shards for r in read_records(s["path"])]
    content = out_file.read_bytes()
    result = c(root, "export", "small", str(out_file), ok=False)
    one_line_error(result, f"error: {out_file}: already exists; use --force to replace it\n")
    assert out_file.read_bytes() == content
    old = tmp_path / "v2.tfrecord"
    c(root, "export", "small", str(old), "--version", "2")
    v2_shards = json.loads(c(root, "show", "small", "--json", "--version", "2").stdout)["shards"]
    assert list(read_records(old)) == [r for s in v2_shards for r in read_records(s["path"])]


@pytest.mark.parametrize(
    "args",
    [
        ["gc", "--keep-versions", "0"],
        ["gc", "--keep-versions", "-1"],
        ["gc", "--older-than", "soon"],
        ["compact", "small", "--target-size", "big"],
        ["restore", "small"],
        ["restore", "small", "--version", "0"],
        ["migrate", "small", "--workers", "0"],
        ["migrate", "small", "--to", "next"],
    ],
)
def test_usage_errors_exit_2(root: Path, args: list[str]) -> None:
    before = show(root)
    assert c(root, *args, ok=False).exit_code == 2
    assert show(root) == before


def test_cat_after_gc_collected_the_version(root: Path, mdir: Path) -> None:
    v2_rows = cat_rows(root, "--version", "2")
    c(root, "migrate", "small", "--migrations", str(mdir), "--add", "h:int64=1")
    kept = json.loads(c(root, "gc", "--keep-versions", "2", "--json").stdout)
    assert kept["retired_removed"] == [] and kept["kept_retired"] == 3
    assert cat_rows(root, "--version", "2") == v2_rows
    dry = json.loads(c(root, "gc", "--keep-versions", "1", "--dry-run", "--json").stdout)
    assert len(dry["retired_removed"]) == 3 and cat_rows(root, "--version", "2") == v2_rows
    gone = json.loads(c(root, "gc", "--keep-versions", "1", "--json").stdout)
    assert sorted(gone["retired_removed"]) == sorted(dry["retired_removed"])
    assert not any(Path(p).exists() for p in gone["retired_removed"])
    message = (
        "error: dataset 'small' version 2 is no longer readable: gc collected its retired shards "
        "(keep versions with `catalog gc --keep-versions K`)\n"
    )
    one_line_error(c(root, "cat", "small", "--version", "2", ok=False), message)
    one_line_error(c(root, "show", "small", "--version", "2", ok=False), message)
    one_line_error(c(root, "restore", "small", "--version", "2", ok=False), message)
    assert [r["h"] for r in cat_rows(root, "--version", "3")] == [1] * ROWS
    assert json.loads(c(root, "verify", "--json").stdout)["ok"] is True


def test_a_rewrite_returns_the_commit_history_shows(root: Path, mdir: Path) -> None:
    """restore and compact return (and ``--json`` prints) what their commit added and retired,
    exactly as history reports that version afterwards."""

    def same_as_history(commit: Any) -> None:
        with Catalog.open(root) as cat:
            entry = next(h for h in cat.dataset("small").history() if h.version == commit.version)
        assert commit.to_json(with_shards=False) == entry.to_json(with_shards=False)

    c(root, "migrate", "small", "--add", "h:int64=1", "--migrations", str(mdir))  # v3: 3 shards rewritten
    restored = json.loads(c(root, "restore", "small", "--version", "2", "--json").stdout)
    assert (restored["records"], restored["records_removed"]) == (ROWS, ROWS)
    assert (restored["shard_count"], restored["shards_removed"]) == (3, 3)
    with Catalog.open(root) as cat:
        ds = cat.dataset("small")
        same_as_history(ds.restore(3))
        report = ds.compact(target_size=1 << 20)
    assert report.commit is not None
    assert (report.commit.records, report.commit.records_removed, report.commit.shards_removed) == (ROWS, ROWS, 3)
    same_as_history(report.commit)


# --------------------------------------------------------------------------- numbering: files and quick ones


def test_quick_migrations_are_numbered_with_the_files(root: Path, mdir: Path) -> None:
    script(mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256)]\n')
    c(root, "migrate", "small", "--migrations", str(mdir))
    dry = json.loads(
        c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "raw", "--dry-run", "--json").stdout
    )
    assert [m["id"] for m in dry["migrations"]] == ["0002_quick"]
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "raw", "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0002_quick"]  # not quick-0003 (its schema version)
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_h", "applied"),
        ("0002_quick", "applied"),
    ]
    assert json.loads(c(root, "history", "small", "--json").stdout)[-1]["message"] == "migration 0002_quick: drop raw"
    out = c(root, "migrations", "new", "small", "next", "--migrations", str(mdir)).stdout
    assert out.startswith(f"wrote {mdir / 'small' / '0003_next.py'};")


@pytest.mark.parametrize("name", ["0002_add_w.py", "0002_quick.py"])
def test_a_file_numbered_as_an_applied_quick_migration_is_refused(root: Path, mdir: Path, name: str) -> None:
    script(mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256)]\n')
    c(root, "migrate", "small", "--migrations", str(mdir))
    c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "raw")  # 0002_quick, version 4
    path = script(mdir, name, 'operations = [AddField("w", {"dtype": "int64"}, default=1)]\n')
    result = c(root, "migrate", "small", "--migrations", str(mdir), ok=False)
    one_line_error(
        result,
        f"error: {path}: number 0002 is taken by the quick migration 0002_quick (version 4): number it after 0002\n",
    )
    assert show(root)["version"] == 4
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_h", "applied"),
        ("0002_quick", "applied"),
        (path.stem, "pending"),
    ]
    path.rename(path.with_name("0003_add_w.py"))
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0003_add_w"]


def test_a_quick_migration_after_a_pending_file_takes_the_next_number(root: Path, mdir: Path) -> None:
    pending = script(mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256)]\n')
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "raw", "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0002_quick"]  # 0001 is the file's, applied or not
    result = c(root, "migrate", "small", "--migrations", str(mdir), ok=False)
    one_line_error(result, f"error: {pending}: pending, but 0002_quick is already applied: number it after 0002\n")


def test_legacy_quick_ids_are_read_and_take_no_number(root: Path, mdir: Path) -> None:
    """Catalogs written before quick migrations shared the files' numbering hold ids named
    after the schema version (quick-0003 after 0001_add_h): read as they are, no collision."""
    from sqlalchemy import update

    from catalog.manifest import APPLIED_MIGRATIONS

    script(mdir, "0001_add_h.py", 'operations = [AddField("h", {"dtype": "int64"}, default=256)]\n')
    c(root, "migrate", "small", "--migrations", str(mdir))
    c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "raw")
    with Catalog.open(root) as cat, cat.engine.begin() as conn:
        stmt = update(APPLIED_MIGRATIONS).where(APPLIED_MIGRATIONS.c.migration_id == "0002_quick")
        assert conn.execute(stmt.values(migration_id="quick-0003")).rowcount == 1
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_h", "applied"),
        ("quick-0003", "applied"),
    ]
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--drop", "score", "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0002_quick"]
    script(mdir, "0003_add_w.py", 'operations = [AddField("w", {"dtype": "int64"}, default=1)]\n')
    doc = json.loads(c(root, "migrate", "small", "--migrations", str(mdir), "--json").stdout)
    assert [m["id"] for m in doc["migrations"]] == ["0003_add_w"]
    assert [(m["id"], m["status"]) for m in listing(root, mdir)] == [
        ("0001_add_h", "applied"),
        ("quick-0003", "applied"),
        ("0002_quick", "applied"),
        ("0003_add_w", "applied"),
    ]
