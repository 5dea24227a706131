"""Where each shard came from (``source``), and inputs appended twice: manifest format 5."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.errors import AppendError

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": ""}}}
runner = CliRunner()


def run(*args: Any, input: str | None = None) -> Any:
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    return cat


def csv_file(path: Path, ids: range) -> Path:
    path.write_text("id,text\n" + "".join(f"{i},t{i}\n" for i in ids))
    return path


def sources(cat: Catalog) -> list[tuple[int, str | None]]:
    return [(s.records, s.source) for s in cat.dataset("d").shards()]


def data_files(cat: Catalog) -> set[str]:
    return {p.name for p in (cat.data_root / "d").iterdir()}


def test_each_input_has_its_own_shards_named_by_its_path(cat: Catalog, tmp_path: Path) -> None:
    a, b = csv_file(tmp_path / "a.csv", range(3)), csv_file(tmp_path / "b.csv", range(3, 5))
    (tmp_path / "c.jsonl").write_text('{"id": 9}\n')
    cat.dataset("d").append_files([a, b, tmp_path / "c.jsonl"])
    assert sources(cat) == [(3, str(a)), (2, str(b)), (1, str(tmp_path / "c.jsonl"))]
    shown = json.loads(run("-C", cat.root, "show", "d", "--json").stdout)["shards"]
    assert [s["source"] for s in shown] == [str(a), str(b), str(tmp_path / "c.jsonl")]


def test_relative_inputs_are_recorded_absolute(cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    csv_file(tmp_path / "rel.csv", range(2))
    monkeypatch.chdir(tmp_path)
    assert run("-C", cat.root, "append", "d", "rel.csv").exit_code == 0
    assert sources(cat) == [(2, str(tmp_path / "rel.csv"))]


def test_rows_stdin_and_rewrites_say_where_they_came_from(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.dataset("d")
    ds.append_rows([{"id": 1}, {"id": 2}])
    assert run("-C", cat.root, "append", "d", "-", input='{"id": 3}\n').exit_code == 0
    assert sources(cat) == [(2, "rows"), (1, "stdin")]
    ds.compact()
    assert sources(cat) == [(3, "compact of version 3")]
    ds = cat.dataset("d")
    ds.migrate(add=["h:int64=5"])
    assert sources(cat) == [(3, "migrate of version 4")]
    cat.dataset("d").restore(3)
    assert sources(cat) == [(2, "restore of version 3"), (1, "restore of version 3")]


def test_an_input_appended_twice_is_refused(cat: Catalog, tmp_path: Path) -> None:
    a = csv_file(tmp_path / "a.csv", range(3))
    first = cat.dataset("d").append_files([a])
    before = data_files(cat)
    result = run("-C", cat.root, "append", "d", a)
    assert result.exit_code == 1
    shard = first.shards[0].path
    assert result.stderr == (
        f"error: {a}: already in 'd': the same bytes as shard {shard} (version 2, from {a}); "
        "nothing was registered (--allow-duplicate to append it again)\n"
    )
    assert cat.dataset("d").version == 2 and data_files(cat) == before  # its new shard removed again
    copy = tmp_path / "copy.csv"
    copy.write_bytes(a.read_bytes())  # another name, the same bytes
    with pytest.raises(AppendError, match="already in 'd'"):
        cat.dataset("d").append_files([copy])
    assert run("-C", cat.root, "append", "d", a, "--allow-duplicate").exit_code == 0
    assert [r for _, r in sources(cat)] == [str(a), str(a)]


def test_the_same_input_twice_in_one_append(cat: Catalog, tmp_path: Path) -> None:
    a = csv_file(tmp_path / "a.csv", range(3))
    b = tmp_path / "b.csv"
    b.write_bytes(a.read_bytes())
    result = run("-C", cat.root, "append", "d", a, b)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {b}: the same bytes as {a}, in this same append: nothing was registered "
        "(--allow-duplicate to append both)\n"
    )
    assert cat.dataset("d").version == 1
    assert run("-C", cat.root, "append", "d", a, b, "--allow-duplicate").exit_code == 0


def test_rows_appended_twice_are_rows(cat: Catalog) -> None:
    ds = cat.dataset("d")
    ds.append_rows([{"id": 1}])
    ds.append_rows([{"id": 1}])  # the same rows again from Python: a choice, not an accident
    assert [r["id"] for r in cat.dataset("d").read()] == [1, 1]


def test_concurrent_appends_of_one_input_register_it_once(cat: Catalog, tmp_path: Path) -> None:
    a = csv_file(tmp_path / "a.csv", range(100))
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def append() -> None:
        with Catalog.open(cat.root) as mine:
            start.wait()
            try:
                mine.dataset("d").append_files([a])
            except AppendError as e:
                errors.append(e)

    threads = [threading.Thread(target=append) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(errors) == 2 and all("already in 'd'" in str(e) for e in errors)
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(100))


@pytest.mark.sqlite_only
def test_a_format_4_catalog_upgrades_with_unknown_sources(tmp_path: Path) -> None:
    from probes import downgrade_to_format_4

    from catalog import manifest as mf

    root = tmp_path / "old"
    with Catalog.init(root) as cat:
        cat.register("d", SCHEMA).append_rows([{"id": 1}])
    downgrade_to_format_4(root / "catalog.db")
    result = run("-C", root, "show", "d")
    assert result.exit_code == 1
    assert result.stderr == f"error: the manifest has format 4, older than {mf.FORMAT_VERSION}: run `catalog upgrade`\n"
    assert run("-C", root, "upgrade").stdout == f"manifest format 4 -> {mf.FORMAT_VERSION}\n"
    with Catalog.open(root) as cat:
        assert sources(cat) == [(1, None)]
        cat.dataset("d").append_rows([{"id": 2}])
        assert sources(cat) == [(1, None), (1, "rows")]


def test_link_says_which_inputs_it_linked_and_which_it_copied(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno
    import os

    from catalog import RecordWriter
    from catalog.tfrecord.example import encode_example

    raw, gz = tmp_path / "raw.tfrecord", tmp_path / "in.gz"
    for path, compression in ((raw, None), (gz, "gzip")):
        with RecordWriter(path, compression) as w:
            w.write(encode_example({"id": 1 if compression else 2}))
    (tmp_path / "r.jsonl").write_text('{"id": 3}\n')
    out = json.loads(run("-C", cat.root, "append", "d", raw, gz, tmp_path / "r.jsonl", "--link", "--json").stdout)
    assert (out["linked"], out["copied"]) == ([str(raw)], [str(gz), str(tmp_path / "r.jsonl")])
    assert os.path.samefile(out["shards"][0]["path"], raw)
    real_link = os.link

    def cross_device(src: Any, dst: Any, **kwargs: Any) -> None:
        if str(src) == str(raw):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", cross_device)
    result = run("-C", cat.root, "append", "d", raw, "--link", "--allow-duplicate")
    assert result.stdout.splitlines()[1:] == [
        "linked 0 inputs (no bytes copied)",
        "copied 1 input that could not be linked (another filesystem, compressed unlike the dataset, or not "
        f"TFRecord): {raw}",
    ]
    plain = json.loads(run("-C", cat.root, "append", "d", tmp_path / "r.jsonl", "--allow-duplicate", "--json").stdout)
    assert "linked" not in plain and "copied" not in plain  # not asked: not said


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--delimiter", ";"], "--delimiter applies to CSV inputs, and none is given"),
        (["--feature", "id"], "--feature applies to .npy inputs, and none is given"),
        (["--image-shape", "2,2,3"], "--image-shape applies to image folder inputs, and none is given"),
    ],
)
def test_an_option_no_input_takes_is_an_error(cat: Catalog, tmp_path: Path, option: list[str], said: str) -> None:
    (tmp_path / "r.jsonl").write_text('{"id": 1}\n')
    result = run("-C", cat.root, "append", "d", tmp_path / "r.jsonl", *option)
    assert (result.exit_code, result.stderr) == (1, f"error: {said}\n")
    assert cat.dataset("d").version == 1


def test_an_input_sharing_some_records_is_new_data(cat: Catalog, tmp_path: Path) -> None:
    first = csv_file(tmp_path / "one.csv", range(1))
    more = csv_file(tmp_path / "more.csv", range(2))  # the same first record, and one more
    cat.dataset("d").append_files([first])
    cat.dataset("d").append_files([more], shard_records=1)  # its first shard equals one.csv's: new data all the same
    assert [r["id"] for r in cat.dataset("d").read()] == [0, 0, 1]
    result = run("-C", cat.root, "append", "d", more, "--shard-records", "1")
    assert result.exit_code == 1
    own = next(s.path for s in cat.dataset("d").shards() if s.source == str(more))
    assert f"the same bytes as shard {own} (version 3, from {more})" in result.stderr  # its own shard named
