"""`catalog adopt` under hostile or careless use: interrupts and kills at every step, files
that change while (and after) they are adopted, hostile names and contents, concurrent
adopts, gc and compaction, malformed TFDS directories, and the CLI's one-line errors.

A test here that fails on today's code exposes a defect (its docstring says what should
happen); the others pin guarantees tests/ops/test_adopt.py and tests/inputs/test_tfds.py do not.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from probes import interruptible
from typer.testing import CliRunner

import catalog.ops.adopt as adoption
from catalog import Catalog, RecordWriter, faults
from catalog.cli import app
from catalog.errors import AppendError, CatalogError
from catalog.tfrecord.example import encode_example

SCHEMA = {"features": {"id": {"dtype": "int64"}, "x": {"dtype": "float32", "shape": [2]}}}
runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def one_line_error(result: Any) -> bool:
    """Exit 1, one stderr line starting with ``error: `` and no exception escaping the CLI."""
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    return (
        result.exit_code == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and not escaped
    )


def write_part(path: Path, ids: range, compression: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordWriter(path, compression) as w:
        for i in ids:
            w.write(encode_example({"id": [i], "x": [i / 2, -i / 4]}))
    return path


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def data_files(cat: Catalog) -> list[str]:
    root = cat.data_root
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.name != ".catalog-owner")


def listed(cat: Catalog) -> list[str]:
    return [d["name"] for d in json.loads(run("-C", cat.root, "list", "--json").stdout)]


@pytest.fixture
def ext(tmp_path: Path) -> Path:
    """Three raw shards kept by hand (ids 0..29 in order)."""
    folder = tmp_path / "ext"
    for i in range(3):
        write_part(folder / f"part-{i}.tfrecord", range(i * 10, i * 10 + 10))
    return folder


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    return cat


@pytest.fixture
def no_hook() -> Any:
    """Whatever a test installs as a fault hook is gone after it."""
    yield
    faults.install(None)


# --------------------------------------------------------------------------- a TFDS directory by hand

TENSOR = "tensorflow_datasets.core.features.tensor_feature.Tensor"
TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"


def build_toy_tfds(folder: Path, splits: dict[str, list[int]] | None = None) -> Path:
    """A TFDS prepared directory as tensorflow-datasets writes one (features.json,
    dataset_info.json, ``toy-<split>.tfrecord-0000i-of-0000n``), without TFDS: features
    ``id`` (int64 scalar) and ``x`` (float32 [2]), the schema SCHEMA describes."""
    splits = splits or {"train": [10, 10], "test": [4]}
    folder.mkdir(parents=True)
    features = {
        "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict",
        "featuresDict": {
            "features": {
                "id": {"pythonClassName": TENSOR, "tensor": {"shape": {}, "dtype": "int64", "encoding": "none"}},
                "x": {
                    "pythonClassName": TENSOR,
                    "tensor": {"shape": {"dimensions": ["2"]}, "dtype": "float32", "encoding": "none"},
                },
            }
        },
    }
    (folder / "features.json").write_text(json.dumps(features))
    entries = []
    first = 0
    for split, lengths in splits.items():
        for i, n in enumerate(lengths):
            write_part(folder / f"toy-{split}.tfrecord-{i:05d}-of-{len(lengths):05d}", range(first, first + n))
            first += n
        entries.append(
            {"name": split, "shardLengths": [str(n) for n in lengths], "filepathTemplate": TEMPLATE, "numBytes": "1"}
        )
    info = {"name": "toy", "description": "a toy", "fileFormat": "tfrecord", "splits": entries}
    (folder / "dataset_info.json").write_text(json.dumps(info))
    return folder


def edit_json(path: Path, change: Any) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


# --------------------------------------------------------------------------- a child process stopped at a point

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from catalog import faults
    import catalog.ops.adopt as adoption

    point, sig, rest = sys.argv[1], getattr(signal, sys.argv[2]), sys.argv[3:]

    def fire():
        faults.install(None)
        if os.environ.get("TO_GROUP"):  # Ctrl-C at a terminal: the whole process group
            os.killpg(os.getpgid(0), sig)
        else:
            os.kill(os.getpid(), sig)

    def hook(name, info):
        if name == point:
            fire()

    faults.install(hook)
    if point == "scan":  # the first batch of records being checked (in a pool worker too: fork)
        for seam in ("check_batch", "check_spans"):  # read record by record, or a window at a time
            def hooked(*args, checked=getattr(adoption, seam), seam=seam, **kwargs):
                setattr(adoption, seam, checked)
                fire()
                return checked(*args, **kwargs)

            setattr(adoption, seam, hooked)
    from catalog.cli import main

    sys.argv = ["catalog", *rest]
    main()
    """
)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def kill_group(pgid: int) -> None:
    """Kill what is left of a child session this test started (by id)."""
    for pid in group_members(pgid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop_at(point: str, sig: str, *args: Any, to_group: bool = False) -> tuple[int | None, str]:
    """Run ``catalog ARGS`` in a session of its own, ``sig`` sent at ``point``: (returncode, stderr)."""
    env = dict(os.environ, TO_GROUP="1" if to_group else "")
    proc = subprocess.Popen(
        [sys.executable, "-c", interruptible(CHILD), point, sig, *(str(a) for a in args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    try:
        _out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc.pid)
        if proc.returncode is None:
            proc.communicate()
    return proc.returncode, err


# =========================================================================== defects
# Each of these fails on today's code.


def test_a_failed_adoption_into_a_new_name_does_not_drop_what_another_adopt_committed(
    tmp_path: Path, ext: Path, no_hook: None
) -> None:
    """Two `catalog adopt new FILE` at once: A registers the new dataset; B, finding it there,
    adopts into it and commits version 2 (and is told so); A's commit is then refused as a
    duplicate, and A's clean-up drops the dataset, B's committed version with it. A failed
    adoption may only drop a dataset nobody else has committed to."""
    cat = Catalog.init(tmp_path / "cat")
    part = ext / "part-0.tfrecord"
    told: list[int] = []

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "commit.before" and not told:
            told.append(0)
            told[0] = Catalog.open(cat.root).adopt("new", [part]).version  # B, in between

    faults.install(hook)
    with pytest.raises(AppendError, match="already in 'new'"):
        cat.adopt("new", [part])  # A
    faults.install(None)
    assert told == [2]
    assert listed(cat) == ["new"]  # B was told version 2 is committed
    assert [r["id"] for r in Catalog.open(cat.root).dataset("new").read()] == list(range(10))


def test_ctrl_c_after_the_commit_keeps_the_new_dataset_it_reports(tmp_path: Path, ext: Path, no_hook: None) -> None:
    """Ctrl-C landing after the commit of an adoption into a new name: the CLI says "version 2
    is complete", but Catalog.adopt's clean-up drops the dataset it has just committed."""
    cat = Catalog.init(tmp_path / "cat")

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "commit.after":
            faults.install(None)
            raise KeyboardInterrupt

    faults.install(hook)
    result = run("-C", cat.root, "adopt", "new", ext)
    assert result.exit_code == 130 and "version 2 is complete" in result.stderr
    assert listed(cat) == ["new"]
    assert Catalog.open(cat.root).dataset("new").info().records == 30


def test_a_killed_adoption_into_a_new_name_leaves_no_empty_dataset(tmp_path: Path, ext: Path) -> None:
    """SIGKILL before the commit of an adoption into a new name: nothing may stay registered.
    The dataset registered first is pending on the dead process: no list or lookup shows it, the
    name is free for a retry with other files (another schema), and gc drops the leftover row."""
    cat = Catalog.init(tmp_path / "cat")
    code, _err = stop_at("commit.before", "SIGKILL", "-C", cat.root, "adopt", "new", ext)
    assert code == -signal.SIGKILL
    assert listed(cat) == []
    shown = run("-C", cat.root, "show", "new")
    assert shown.exit_code == 1 and "no dataset named 'new'" in shown.stderr
    verified = run("-C", cat.root, "verify")  # it stopped at the row: "no dataset named 'new'"
    assert verified.exit_code == 0 and "0 problems" in verified.output, verified.output
    report = cat.gc(grace=timedelta(0))
    assert report.abandoned == ["new"]
    assert cat.gc(grace=timedelta(0)).abandoned == []
    code, _err = stop_at("commit.before", "SIGKILL", "-C", cat.root, "adopt", "new", ext)
    other = tmp_path / "other.tfrecord"
    with RecordWriter(other) as w:
        w.write(encode_example({"name": [b"x"]}))
    again = run("-C", cat.root, "adopt", "new", other)  # the dead writer's dataset does not hold the name
    assert again.exit_code == 0, again.stderr
    assert cat.dataset("new").schema.to_json() == {"features": {"name": {"dtype": "string"}}}


@pytest.mark.parametrize("change", ["grow", "truncate", "append whole records"])
def test_a_file_changed_between_its_scan_and_the_commit_is_not_registered(
    cat: Catalog, ext: Path, change: str, no_hook: None
) -> None:
    """A file written to after its scan (a producer still appending, say) but before the commit
    is registered as it was read, and fails every reader and verify from its first moment. The
    scan's own "changed while being adopted: nothing registered" check must hold up to the
    commit (its size, at least, looked at again)."""
    part = ext / "part-0.tfrecord"
    size = part.stat().st_size

    def hook(name: str, info: dict[str, Any]) -> None:
        if name != "commit.before":
            return
        faults.install(None)
        with open(part, "r+b") as f:
            if change == "grow":
                f.seek(0, os.SEEK_END)
                f.write(b"\0" * 5)
            elif change == "truncate":
                f.truncate(size - 30)
            else:
                f.seek(0, os.SEEK_END)
                f.write((ext / "part-1.tfrecord").read_bytes())

    faults.install(hook)
    with pytest.raises(CatalogError, match=r"part-0\.tfrecord"):
        cat.dataset("d").adopt([part, ext / "part-2.tfrecord"])
    assert cat.dataset("d").version == 1
    assert cat.verify().ok


def on_first_check(monkeypatch: pytest.MonkeyPatch, act: Callable[[], None]) -> None:
    """``act`` once, when adopt first checks records: read record by record (check_batch), a
    window at a time (check_spans), or a window handed to the statistics helper (_Spans.offer)."""
    done: list[bool] = []
    for owner, seam in ((adoption, "check_batch"), (adoption, "check_spans"), (adoption._Spans, "offer")):
        checked = getattr(owner, seam)

        def hooked(*args: Any, checked: Any = checked, **kwargs: Any) -> Any:
            if not done:
                done.append(True)
                act()
            return checked(*args, **kwargs)

        monkeypatch.setattr(owner, seam, hooked)


@pytest.mark.parametrize("how", ["unlink", "rename"])
def test_a_file_removed_while_it_is_read_is_one_line(
    cat: Catalog, ext: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file deleted (or moved away) while its records are being checked: the scan's size
    check stats it again and FileNotFoundError escapes (a traceback from the CLI, no `error:`
    line); it should be one CatalogError line, nothing registered."""
    part = ext / "part-0.tfrecord"

    def remove() -> None:
        if part.exists():
            part.unlink() if how == "unlink" else part.rename(ext / "moved")

    on_first_check(monkeypatch, remove)
    result = run("-C", cat.root, "adopt", "d", part)
    assert one_line_error(result), (result.stderr, result.exception)
    assert "part-0.tfrecord" in result.stderr
    assert cat.dataset("d").version == 1


@pytest.mark.parametrize("how", ["twice", "folder and a file in it", "copy twice", "new name"])
def test_one_file_named_twice_in_one_adopt_is_not_registered_twice(
    tmp_path: Path, cat: Catalog, ext: Path, how: str
) -> None:
    """`catalog adopt d a.tfrecord a.tfrecord` (or a folder and a file in it) registers the file
    twice: its records read twice, without --allow-duplicate. The duplicate check keys inputs by
    their source, and both are one source; the same file must be refused (or taken once)."""
    part = ext / "part-0.tfrecord"
    if how == "twice":
        result = run("-C", cat.root, "adopt", "d", part, part)
    elif how == "folder and a file in it":
        result = run("-C", cat.root, "adopt", "d", ext, part)
    elif how == "copy twice":
        result = run("-C", cat.root, "adopt", "d", part, part, "--copy")
    else:
        result = run("-C", cat.root, "adopt", "new", part, part)
    name = "new" if how == "new name" else "d"
    if result.exit_code == 0:
        ids = [r["id"] for r in Catalog.open(cat.root).dataset(name).read()]
        assert len(ids) == len(set(ids)), f"registered twice: {len(ids)} records"
    else:
        assert one_line_error(result), result.stderr


def test_a_tfds_template_naming_one_file_for_every_shard_registers_it_once(tmp_path: Path) -> None:
    """dataset_info.json's filepathTemplate without a shard placeholder names one file for
    all of a split's shards: the file is adopted once per shard (same records, several times)."""
    folder = build_toy_tfds(tmp_path / "toy", {"train": [10, 10]})
    edit_json(
        folder / "dataset_info.json",
        lambda d: d["splits"][0].update(
            filepathTemplate="toy-train.tfrecord-00000-of-00002", shardLengths=["10", "10"]
        ),
    )
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    if result.exit_code == 0:
        ids = [r["id"] for r in Catalog.open(cat.root).dataset("t").read()]
        assert len(ids) == len(set(ids)), f"registered twice: {len(ids)} records"
    else:
        assert one_line_error(result), result.stderr


def test_empty_marker_files_of_spark_outputs_do_not_block_the_next_adopt(tmp_path: Path, cat: Catalog) -> None:
    """A Spark output folder (part files, an empty `_SUCCESS`, hidden `.crc` files): adopt
    registers `_SUCCESS` as a 0-record shard, so the next day's folder is refused ("already in
    'd': the same bytes as shard .../day1/_SUCCESS"), two folders at once are refused as twins,
    and deleting a marker breaks the dataset. An empty file holds no records: `append` makes no
    shard of it, nor should adopt."""
    for day, first in (("day1", 0), ("day2", 100)):
        write_part(tmp_path / day / "part-r-00000", range(first, first + 10))
        (tmp_path / day / "_SUCCESS").write_bytes(b"")
        (tmp_path / day / ".part-r-00000.crc").write_bytes(b"crc")
    assert run("-C", cat.root, "adopt", "d", tmp_path / "day1").exit_code == 0
    second = run("-C", cat.root, "adopt", "d", tmp_path / "day2")
    assert second.exit_code == 0, second.stderr
    ds = Catalog.open(cat.root).dataset("d")
    assert ds.info().records == 20
    assert [s.records for s in ds.shards() if s.records == 0] == []
    both = run("-C", cat.root, "adopt", "both", tmp_path / "day1", tmp_path / "day2")
    assert both.exit_code == 0, both.stderr


@pytest.mark.parametrize(
    "damage",
    [
        "splits is a number",
        "splits is null",
        "features is a list",
        "a featuresDict is a list",
        "a sequence is a string",
        "a tensor is a string",
        "dimensions are not numbers",
        "shape is a list",
        "image spec is a number",
        "labels file is not UTF-8",
    ],
)
def test_malformed_tfds_metadata_is_one_line(tmp_path: Path, damage: str) -> None:
    """A dataset_info.json or features.json of the wrong shape (hand-edited, another TFDS
    version, truncated by a sync tool) escapes as TypeError, AttributeError, ValueError or
    UnicodeDecodeError: a traceback, not `error: <file>: ...` (what a bad JSON file gives)."""
    folder = build_toy_tfds(tmp_path / "toy")
    info, feats = folder / "dataset_info.json", folder / "features.json"
    edits: dict[str, tuple[Path, Any]] = {
        "splits is a number": (info, lambda d: d.update(splits=3)),
        "splits is null": (info, lambda d: d.update(splits=None)),
        "features is a list": (feats, lambda d: d["featuresDict"].update(features=[1, 2])),
        "a featuresDict is a list": (feats, lambda d: d["featuresDict"]["features"].update(id={"featuresDict": []})),
        "a sequence is a string": (feats, lambda d: d["featuresDict"]["features"].update(id={"sequence": "int64"})),
        "a tensor is a string": (feats, lambda d: d["featuresDict"]["features"].update(id={"tensor": "int64"})),
        "dimensions are not numbers": (
            feats,
            lambda d: d["featuresDict"]["features"]["x"]["tensor"].update(shape={"dimensions": ["two"]}),
        ),
        "shape is a list": (feats, lambda d: d["featuresDict"]["features"]["x"]["tensor"].update(shape=[2])),
        "image spec is a number": (feats, lambda d: d["featuresDict"]["features"].update(id={"image": 3})),
        "labels file is not UTF-8": (
            feats,
            lambda d: d["featuresDict"]["features"].update(id={"classLabel": {"numClasses": "3"}}),
        ),
    }
    path, change = edits[damage]
    edit_json(path, change)
    if damage == "labels file is not UTF-8":
        (folder / "id.labels.txt").write_bytes(b"\xff\xfecat\n")
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result), (result.stderr, repr(result.exception))
    assert listed(cat) == []


@pytest.mark.parametrize("split", ["all", "a b", "x+y", "t[1]", "s" * 80])
def test_tfds_split_names_are_checked_like_split_names(tmp_path: Path, split: str) -> None:
    """A TFDS split name goes into the manifest unchecked (the writer validates only --split):
    "a b", "x+y" or "t[1]" are registered and then cannot be read by name, and "all" takes the
    name that means every split. It must be refused as `--split` refuses it, nothing registered."""
    folder = build_toy_tfds(tmp_path / "toy", {"train": [10], split: [4]})
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result) and "split" in result.stderr, result.stdout
    assert listed(cat) == []


def test_a_tfds_split_without_shard_counts_names_the_folder(tmp_path: Path) -> None:
    """A dataset_info.json that gives neither shardLengths nor numShards (older or hand-made)
    lists no files, and the error names nothing: "error: : no records in the input"."""
    folder = build_toy_tfds(tmp_path / "toy")
    edit_json(folder / "dataset_info.json", lambda d: [s.pop("shardLengths") for s in d["splits"]])
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result)
    assert not result.stderr.startswith("error: :") and str(folder) in result.stderr, result.stderr


def test_a_file_name_too_long_is_one_line(cat: Catalog, tmp_path: Path) -> None:
    """A name longer than the filesystem allows (ENAMETOOLONG, as EACCES on a folder would):
    OSError escapes plan()'s is_tfds_dir and the CLI's size total, a traceback and no `error:`
    line, where a missing file is "no such file"."""
    long = tmp_path / ("x" * 300 + ".tfrecord")
    result = run("-C", cat.root, "adopt", "d", long)
    assert one_line_error(result), repr(result.exception)
    with pytest.raises(CatalogError):
        cat.dataset("d").adopt([long])
    with pytest.raises(CatalogError):
        cat.adopt("new", [tmp_path / ("y" * 300) / "part.tfrecord"])


def test_gc_does_not_call_a_file_the_live_version_reads_forgotten(cat: Catalog, ext: Path) -> None:
    """adopt (v2), compact (v3), restore 2 (v4: the adopted files live again, under new names),
    gc --keep-versions 1: the v2 rows are collected and gc reports each file "forgot adopted
    file X (no kept version needs it; left in place)", inviting its deletion, while version 4
    reads it."""
    parts = [ext / "part-0.tfrecord", ext / "part-1.tfrecord"]
    cat.dataset("d").adopt(parts)
    cat.dataset("d").compact()
    assert [s.location for s in cat.dataset("d").shards()] == [None]
    cat.dataset("d").restore(2)
    assert [s.location for s in cat.dataset("d").shards()] == [str(p) for p in parts]
    report = cat.gc(keep_versions=1)
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(20))
    assert sorted(report.forgotten) == [], "files the current version reads, reported forgotten"
    text = run("-C", cat.root, "gc", "--keep-versions", "1").stdout
    assert "forgot adopted file" not in text


def test_a_file_replaced_by_another_of_the_same_size_is_not_read_silently(cat: Catalog, ext: Path) -> None:
    """A pipeline re-run rewrites part-0 (new file, same name; fixed-size records give the same
    size): the readers catch the replaced file (its fingerprint recorded at adoption, then its
    checksum), never return other data silently."""
    part = ext / "part-0.tfrecord"
    cat.dataset("d").adopt([part])
    fresh = write_part(ext / "rerun.tmp", range(100, 110))
    assert fresh.stat().st_size == part.stat().st_size
    os.replace(fresh, part)
    assert [p.problem for p in cat.verify().problems] == ["checksum"]
    with pytest.raises(CatalogError, match=r"part-0\.tfrecord"):
        list(cat.dataset("d").read())


def test_tf_dataset_refuses_an_adopted_file_replaced_by_a_symlink(
    cat: Catalog, ext: Path, tmp_path: Path, tf: Any
) -> None:
    """Every reader refuses an adopted file that became a symbolic link (open_shard never
    follows one), except tf_dataset: its size check stats through the link and TensorFlow
    opens it, so it returns the records of whatever file the link names."""
    part = ext / "part-0.tfrecord"
    cat.dataset("d").adopt([part])
    other = write_part(tmp_path / "elsewhere" / "other.tfrecord", range(100, 110))
    part.unlink()
    part.symlink_to(other)
    ds = cat.dataset("d")
    with pytest.raises(CatalogError, match="symbolic link"):
        list(ds.read())
    with pytest.raises(CatalogError, match=r"part-0\.tfrecord"):
        [b["id"].numpy().tolist() for b in ds.tf_dataset(batch_size=4)]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_sigkill_of_adopt_with_workers_leaves_no_process_behind(cat: Catalog, ext: Path) -> None:
    """`catalog adopt d DIR --workers 2` killed (SIGKILL, the OOM killer) once its jobs are done:
    the pool's worker processes outlive it, forever, blocked on a queue no one writes (and they
    hold its stdout/stderr open: a caller reading them hangs)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, "commit.before", "SIGKILL", "-C", cat.root, "adopt", "d", ext, "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.wait(timeout=60) == -signal.SIGKILL
        deadline = time.monotonic() + 3
        while group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert group_members(proc.pid) == [], "pool workers outlived the killed adopt"
    finally:
        kill_group(proc.pid)
    assert cat.dataset("d").version == 1


def test_ctrl_c_of_adopt_with_workers_is_one_line(cat: Catalog, ext: Path) -> None:
    """Ctrl-C at a terminal (SIGINT to the whole process group) during `adopt --workers 2`:
    the CLI says "interrupted: nothing was registered", after a KeyboardInterrupt traceback
    from every idle pool worker. stderr should be that one line."""
    code, err = stop_at("commit.before", "SIGINT", "-C", cat.root, "adopt", "d", ext, "--workers", "2", to_group=True)
    assert code == 130
    assert err == "interrupted: nothing was registered\n", err
    assert cat.dataset("d").version == 1


def test_a_failed_adoption_with_workers_leaves_no_index_files(tmp_path: Path) -> None:
    """A TFDS shard whose record count disagrees with dataset_info.json, adopted with
    --workers 2: nothing is registered, but the jobs' record indexes stay in the data area until
    a gc past its grace (without workers, or on a bad record, none is left)."""
    folder = build_toy_tfds(tmp_path / "toy", {"train": [10, 10, 10]})
    edit_json(folder / "dataset_info.json", lambda d: d["splits"][0].update(shardLengths=["10", "9", "11"]))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder, "--workers", "2")
    assert one_line_error(result) and "says 9" in result.stderr
    assert listed(cat) == []
    assert data_files(cat) == []


def test_a_file_in_another_catalogs_data_area_is_not_adopted_in_place(tmp_path: Path, ext: Path) -> None:
    """adopt refuses a file in its own data area (gc may delete it) but takes one in another
    catalog's: that catalog's gc deletes it once retired, and this catalog's dataset breaks.
    A data area says so with its `.catalog-owner` marker; such a file wants --copy/--link."""
    other = Catalog.init(tmp_path / "other")
    other.register("d", SCHEMA).append_files([ext / "part-0.tfrecord"])
    theirs = Path(other.dataset("d").files()[0])
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    with pytest.raises(AppendError, match="data area"):
        cat.dataset("d").adopt([theirs])


# =========================================================================== guarantees (pass today)


@pytest.mark.parametrize(
    ("point", "sig", "name"),
    [
        ("scan", "SIGINT", "d"),
        ("scan", "SIGINT", "new"),
        ("scan", "SIGKILL", "d"),
        ("commit.before", "SIGINT", "d"),
        ("commit.before", "SIGINT", "new"),
        ("intent.recorded", "SIGKILL", "d"),
    ],
)
def test_an_interrupted_or_killed_adoption_registers_nothing(
    cat: Catalog, ext: Path, point: str, sig: str, name: str
) -> None:
    """Ctrl-C or SIGKILL before the commit: nothing registered (a new name dropped again on
    Ctrl-C), one stderr line, gc (grace 0) leaves an empty data area, the originals are byte
    for byte (and inode for inode) as they were, and the same adoption then goes through."""
    before = fingerprint(ext)
    code, err = stop_at(point, sig, "-C", cat.root, "adopt", name, ext)
    if sig == "SIGINT":
        assert code == 130 and err.count("\n") == 1 and err.startswith("interrupted"), err
        assert sorted(listed(cat)) == ["d"]
    else:
        assert code == -signal.SIGKILL
    assert cat.dataset("d").version == 1
    cat.gc(grace=timedelta(0))
    assert data_files(cat) == []
    assert fingerprint(ext) == before
    assert Catalog.open(cat.root).adopt(name, [ext]).records == 30
    assert fingerprint(ext) == before


def test_a_pool_worker_killed_mid_scan_is_one_line_and_registers_nothing(cat: Catalog, ext: Path) -> None:
    before = fingerprint(ext)
    code, err = stop_at("scan", "SIGKILL", "-C", cat.root, "adopt", "d", ext, "--workers", "2")
    assert code == 1 and err.startswith("error: ") and err.count("\n") == 1, err
    assert cat.dataset("d").version == 1
    cat.gc(grace=timedelta(0))
    assert data_files(cat) == [] and fingerprint(ext) == before


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_two_adopts_of_one_file_into_one_dataset_register_it_once(cat: Catalog, ext: Path, no_hook: None) -> None:
    """The duplicate check runs inside the commit's transaction: B commits between A's scan
    and A's commit, and A is refused."""
    part = ext / "part-0.tfrecord"
    done: list[int] = []

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "commit.before":
            faults.install(None)
            done.append(Catalog.open(cat.root).dataset("d").adopt([part]).version)

    faults.install(hook)
    with pytest.raises(AppendError, match="already in 'd'"):
        cat.dataset("d").adopt([part])
    faults.install(None)
    assert done == [2]
    ds = cat.dataset("d")
    assert ds.version == 2 and [r["id"] for r in ds.read()] == list(range(10))
    cat.gc(grace=timedelta(0))
    assert len(data_files(cat)) == 1 and cat.verify().ok  # the winner's index only


def test_gc_during_an_adoption_keeps_its_indexes(cat: Catalog, ext: Path, no_hook: None) -> None:
    """gc (grace 0, and --keep-versions 1) running between an adoption's scan and its commit
    leaves the live intent's record indexes alone: random access works after the commit."""

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "commit.before":
            faults.install(None)
            other = Catalog.open(cat.root)
            other.gc(grace=timedelta(0))
            other.gc(grace=timedelta(0), keep_versions=1)

    faults.install(hook)
    cat.dataset("d").adopt([ext])
    ds = cat.dataset("d")
    assert all(s.index_checksum is not None for s in ds.shards())
    assert ds.source()[25]["id"] == 25
    report = cat.verify()
    assert report.ok and not report.not_indexed


def test_an_adoption_during_gc_is_not_collected(cat: Catalog, ext: Path, no_hook: None) -> None:
    def hook(name: str, info: dict[str, Any]) -> None:
        if name == "gc.read":
            faults.install(None)
            Catalog.open(cat.root).dataset("d").adopt([ext])

    faults.install(hook)
    cat.gc(grace=timedelta(0))
    ds = cat.dataset("d")
    assert ds.source()[29]["id"] == 29 and cat.verify().ok


@pytest.mark.parametrize("growth", ["a partial record", "whole records"])
def test_a_file_grown_while_it_is_read_is_refused_or_registered_as_read(
    cat: Catalog, ext: Path, monkeypatch: pytest.MonkeyPatch, growth: str
) -> None:
    """Written to during the scan itself: bytes that end mid-record are refused, nothing
    registered; whole records appended before the read reaches the end are read, counted and
    checksummed with the rest (what is registered is what was checked: verify agrees)."""
    big = write_part(ext / "big.tfrecord", range(5000))

    def grow() -> None:
        with open(big, "ab") as f:
            f.write(b"\0" * 10 if growth == "a partial record" else (ext / "part-0.tfrecord").read_bytes())

    on_first_check(monkeypatch, grow)
    result = run("-C", cat.root, "adopt", "d", big)
    if growth == "a partial record":
        assert one_line_error(result) and "big.tfrecord" in result.stderr
        assert cat.dataset("d").version == 1
    else:
        assert result.exit_code == 0, result.stderr
        assert cat.dataset("d").info().records == 5010 and cat.verify().ok


@pytest.mark.parametrize(
    "name", ["with space.tfrecord", "new\nline.tfrecord", "ünï©ødé.tfrecord", "-dash.tfrecord", "part[1].tfrecord"]
)
def test_hostile_names_are_adopted_at_their_real_path(cat: Catalog, tmp_path: Path, name: str) -> None:
    """Spaces, a newline, non-ASCII, a leading dash (after --), glob characters of a file that
    exists literally (taken as that file, not as a pattern: part1.tfrecord is left alone)."""
    folder = tmp_path / "odd"
    part = write_part(folder / name, range(10))
    write_part(folder / "part1.tfrecord", range(50, 60))
    result = run("-C", cat.root, "adopt", "d", "--", part)
    assert result.exit_code == 0, result.stderr
    ds = Catalog.open(cat.root).dataset("d")
    assert [s.location for s in ds.shards()] == [str(part)]
    assert [r["id"] for r in ds.read()] == list(range(10))
    assert Catalog.open(cat.root).verify().ok


def _huge_length(path: Path) -> None:
    from catalog.tfrecord.framing import masked_crc32c

    head = (1 << 60).to_bytes(8, "little")
    path.write_bytes(head + masked_crc32c(head).to_bytes(4, "little") + b"abc")


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("fifo in a folder", "not a regular file (a FIFO)"),
        ("link to /dev/zero", "not a regular file (a character device)"),
        ("symlink loop", "loop.tfrecord"),
        ("huge record length", "runs past the end of the file"),
        ("truncated gzip", "gzip stream is truncated"),
        ("zlib with trailing bytes", "trailing bytes after the end of the zlib stream"),
        ("README among the parts", "README"),
    ],
)
def test_hostile_contents_are_one_line_and_register_nothing(tmp_path: Path, ext: Path, kind: str, message: str) -> None:
    if kind == "fifo in a folder":
        os.mkfifo(ext / "part-9.tfrecord")
    elif kind == "link to /dev/zero":
        (ext / "part-9.tfrecord").symlink_to("/dev/zero")
    elif kind == "symlink loop":
        (ext / "loop.tfrecord").symlink_to(ext / "loop2.tfrecord")
        (ext / "loop2.tfrecord").symlink_to(ext / "loop.tfrecord")
    elif kind == "huge record length":
        _huge_length(ext / "part-9.tfrecord")
    elif kind == "truncated gzip":
        data = write_part(tmp_path / "g.gz", range(50), "gzip").read_bytes()
        (ext / "part-9.tfrecord.gz").write_bytes(data[: len(data) // 2])
    elif kind == "zlib with trailing bytes":
        data = write_part(tmp_path / "z.zlib", range(50), "zlib").read_bytes()
        (ext / "part-9.tfrecord.zlib").write_bytes(data + b"more")
    else:
        (ext / "README").write_text("how these were made\n")
    before = fingerprint(ext)
    for name in ("d", "new"):
        cat = Catalog.open(tmp_path / "cat") if (tmp_path / "cat").exists() else Catalog.init(tmp_path / "cat")
        if name == "d" and "d" not in listed(cat):
            cat.register("d", SCHEMA)
        result = run("-C", cat.root, "adopt", name, ext)
        assert one_line_error(result) and message in result.stderr, (name, result.stderr)
        assert sorted(listed(cat)) == ["d"] and cat.dataset("d").version == 1
        for flag in ("--copy", "--link"):
            assert one_line_error(run("-C", cat.root, "adopt", "d", ext, flag))
    assert fingerprint(ext) == before


@pytest.mark.parametrize("change", ["symlink", "directory", "fifo", "emptied", "folder removed", "folder is a file"])
def test_a_file_changed_after_adoption_is_one_line_for_every_reader(
    cat: Catalog, ext: Path, tmp_path: Path, change: str
) -> None:
    part = ext / "part-0.tfrecord"
    cat.dataset("d").adopt([part])
    if change == "symlink":
        part.rename(tmp_path / "real.tfrecord")
        part.symlink_to(tmp_path / "real.tfrecord")
    elif change == "directory":
        part.unlink()
        part.mkdir()
    elif change == "fifo":
        part.unlink()
        os.mkfifo(part)
    elif change == "emptied":
        part.write_bytes(b"")
    elif change == "folder removed":
        for p in ext.iterdir():
            p.unlink()
        ext.rmdir()
    else:
        for p in ext.iterdir():
            p.unlink()
        ext.rmdir()
        ext.write_bytes(b"x")
    ds = cat.dataset("d")
    readers = {
        "read": lambda: list(ds.read()),
        "records": lambda: list(ds.records()),
        "batches": lambda: list(ds.batches(batch_size=4)),
        "source": lambda: ds.source()[5],
        "slice": lambda: ds.source(split="train[3:]")[0],
    }
    for what, read in readers.items():
        with pytest.raises(CatalogError, match=r"part-0\.tfrecord") as e:
            read()
        assert "\n" not in str(e.value), what
    assert [p.path for p in cat.verify().problems] == [str(part)]
    for args in (("cat", "d"), ("export", "d", tmp_path / "out.tfrecord"), ("verify",)):
        result = run("-C", cat.root, *args)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1, (args, result.stderr)
    assert not (tmp_path / "out.tfrecord").exists()


def test_link_copy_and_in_place_through_compact_gc_and_restore(cat: Catalog, ext: Path) -> None:
    """One shard of each kind, compacted, collected (keep 1), restored to the adopted version,
    collected again: the records are the same at each step, export writes them, and the
    originals are never written (a hard link shares the inode, never changed)."""
    before = fingerprint(ext)
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord"], link=True)  # v2
    ds.adopt([ext / "part-1.tfrecord"], copy=True)  # v3
    ds.adopt([ext / "part-2.tfrecord"])  # v4, in place
    cat.dataset("d").compact()  # v5
    cat.gc(grace=timedelta(0))  # nothing retired is collected without keep_versions
    cat.dataset("d").restore(4)  # v6
    kinds = [s.location is not None for s in cat.dataset("d").shards()]
    assert kinds == [False, False, True]
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(30))
    cat.gc(grace=timedelta(0), keep_versions=1)
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(30))
    assert cat.verify().ok
    out = cat.root / "all.tfrecord"
    assert run("-C", cat.root, "export", "d", out).exit_code == 0
    from catalog.tfrecord.framing import read_records

    assert list(read_records(out)) == list(cat.dataset("d").records())
    assert fingerprint(ext) == before


def test_torch_and_tf_read_adopted_raw_gzip_and_zlib_shards(cat: Catalog, tmp_path: Path, tf: Any) -> None:
    torch = pytest.importorskip("torch")
    folder = tmp_path / "mixed"
    write_part(folder / "a.tfrecord", range(0, 10))
    write_part(folder / "b.tfrecord.gz", range(10, 20), "gzip")
    write_part(folder / "c.tfrecord.zlib", range(20, 30), "zlib")
    cat.dataset("d").adopt([folder])
    ds = cat.dataset("d")
    assert [s.compression for s in ds.shards()] == ["none", "gzip", "zlib"]
    got = [int(i) for b in ds.torch(batch_size=7) for i in torch.as_tensor(b["id"]).tolist()]
    assert got == list(range(30))
    assert [int(i) for b in ds.tf_dataset(batch_size=7) for i in b["id"].numpy()] == list(range(30))
    assert cat.verify().ok


@pytest.mark.parametrize("verb", ["append", "inspect", "register"])
def test_a_name_too_long_is_one_line_for_every_input_verb(cat: Catalog, tmp_path: Path, verb: str) -> None:
    """The sibling of adopt's: expand() looked at each input with an OSError let through."""
    long = str(tmp_path / ("z" * 300) / "a.csv")
    args = {
        "append": ["append", "d", long],
        "inspect": ["inspect", long],
        "register": ["register", "n", "--infer", long],
    }
    result = run("-C", cat.root, *args[verb])
    assert one_line_error(result), repr(result.exception)
    assert "File name too long" in result.stderr


def test_a_killed_register_infer_leaves_no_empty_dataset(tmp_path: Path) -> None:
    """The sibling: `register --infer` registers its dataset for the inputs it appends next."""
    cat = Catalog.init(tmp_path / "cat")
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n{"id": 2}\n')
    code, _err = stop_at("commit.before", "SIGKILL", "-C", cat.root, "register", "inferred", "--infer", rows)
    assert code == -signal.SIGKILL
    assert listed(cat) == []
    assert run("-C", cat.root, "register", "inferred", "--infer", rows).exit_code == 0
    assert [r["id"] for r in cat.dataset("inferred").read()] == [1, 2]


# --------------------------------------------------------------------------- bounded TFDS metadata (issue 30)


def run_bounded(*args: Any, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``catalog ARGS`` in a child with 4 GiB of address space at most: a hang fails at the timeout
    and an unbounded allocation as a MemoryError, neither taking the machine with it."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    return subprocess.run(
        [sys.executable, "-m", "catalog", *(str(a) for a in args)],
        capture_output=True, text=True, timeout=timeout, preexec_fn=limit, check=False,
    )  # fmt: skip


def test_a_tfds_split_claiming_a_billion_shards_is_refused_at_once(tmp_path: Path) -> None:
    """``numShards: 1000000000`` built a list of 10^9 file names before checking any: minutes,
    and gigabytes. The files that exist are looked at first."""
    folder = build_toy_tfds(tmp_path / "toy")
    edit_json(folder / "dataset_info.json", lambda d: d["splits"][0].update(numShards=10**9, shardLengths=None))
    cat = Catalog.init(tmp_path / "cat")
    result = run_bounded("-C", cat.root, "adopt", "t", folder)
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert "split 'train' lists 1000000000 shards but the folder holds 5 files" in result.stderr
    assert listed(cat) == []


def test_a_tfds_split_with_a_billion_shard_lengths_is_refused(tmp_path: Path) -> None:
    """The same claim as a list: more shardLengths than files is refused before a name is made."""
    folder = build_toy_tfds(tmp_path / "toy")
    edit_json(folder / "dataset_info.json", lambda d: d["splits"][0].update(shardLengths=["1"] * 100_000))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result), repr(result.exception)
    assert "split 'train' lists 100000 shards but the folder holds 5 files" in result.stderr


def _nested_features(depth: int, kind: str) -> str:
    """features.json text with feature ``id`` nested ``depth`` levels deep in FeaturesDicts or
    Sequences (written by hand: json.dumps itself recurses too deep for 3,000 levels)."""
    leaf = json.dumps({"pythonClassName": TENSOR, "tensor": {"shape": {}, "dtype": "int64", "encoding": "none"}})
    opening, closing = (
        ('{"featuresDict": {"features": {"x": ', "}}}") if kind == "dict" else ('{"sequence": {"feature": ', "}}")
    )
    return '{"featuresDict": {"features": {"id": ' + opening * depth + leaf + closing * depth + "}}}"


@pytest.mark.parametrize(("depth", "kind"), [(3000, "dict"), (3000, "sequence"), (100, "dict"), (100, "sequence")])
def test_tfds_features_nested_deep_are_one_line(tmp_path: Path, depth: int, kind: str) -> None:
    """features.json nested 3,000 deep gave a RecursionError traceback (the JSON parser's, or
    the mapping's at depths the parser takes)."""
    folder = build_toy_tfds(tmp_path / "toy")
    (folder / "features.json").write_text(_nested_features(depth, kind))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result), repr(result.exception)
    assert "features.json" in result.stderr and "nested" in result.stderr, result.stderr
    assert listed(cat) == []


def test_a_tfds_shard_name_too_long_for_the_filesystem_is_one_line(tmp_path: Path) -> None:
    """A dataset name of 300 characters (found by the fuzz below) made shard names the
    filesystem refuses: ENAMETOOLONG escaped ``is_file`` as an OSError traceback."""
    folder = build_toy_tfds(tmp_path / "toy")
    edit_json(folder / "dataset_info.json", lambda d: d.update(name="n" * 300))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "t", folder)
    assert one_line_error(result), repr(result.exception)
    assert "split 'train': shard 'nnnn" in result.stderr and "File name too long" in result.stderr


DEEP = "@@deep@@"  # where a value nested thousands deep goes (json.dumps cannot write one)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from([10**9, 10**18, -1, 2**70, 10**400])
    | st.floats() | st.text(max_size=8) | st.sampled_from(["-1", "1000000000", "1e9", "{SPLIT}", "../x", DEEP]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, doc: Any) -> Any:
    """``doc`` with one value somewhere replaced (or a key added) by any JSON value."""
    doc = json.loads(json.dumps(doc))
    node = doc
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        if not isinstance(node[key], (dict, list)) or draw(st.integers(0, 3)) == 0:
            node[key] = draw(JSON_VALUES)
            return doc
        node = node[key]
    if isinstance(node, dict):
        node[draw(st.text(max_size=8))] = draw(JSON_VALUES)
    else:
        node.append(draw(JSON_VALUES))
    return doc


def _fuzz_text(doc: Any, depth: int) -> str:
    text = json.dumps(doc)  # NaN and Infinity too, as Python's json writes and reads them
    return text.replace(json.dumps(DEEP), "[" * depth + "1" + "]" * depth)


TOY_DOCS: dict[str, Any] = {}


def _toy_docs(tmp: Path) -> dict[str, Any]:
    if not TOY_DOCS:
        folder = build_toy_tfds(tmp / "toy-docs")
        TOY_DOCS.update({n: json.loads((folder / n).read_text()) for n in ("features.json", "dataset_info.json")})
    return TOY_DOCS


@settings(max_examples=150, deadline=None)
@given(data=st.data(), which=st.sampled_from(["features.json", "dataset_info.json"]), depth=st.sampled_from([2, 5000]))
def test_any_tfds_metadata_adopts_or_is_one_line(data: st.DataObject, which: str, depth: int) -> None:
    """Whatever features.json or dataset_info.json holds (values of any type anywhere, huge
    numbers, NaN, deep nesting), adopt registers or refuses with a CatalogError: one line,
    never another exception."""
    with tempfile.TemporaryDirectory() as tmp:
        docs = _toy_docs(Path(tmp))
        folder = build_toy_tfds(Path(tmp) / "toy")
        (folder / which).write_text(_fuzz_text(data.draw(mutated(docs[which])), depth))
        cat = Catalog.init(Path(tmp) / "cat")
        try:
            cat.adopt("t", [folder])
        except CatalogError as e:
            assert "\n" not in str(e) and str(e), repr(e)
