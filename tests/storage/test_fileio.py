"""The one IO seam (catalog.storage.fileio): fsspec imported in one module, no URL test outside
storage, and what each FileIO does; the names read_records opens go through it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import catalog
from catalog.errors import CatalogError, ObjectMissingError
from catalog.storage import FsspecFileIO, LocalFileIO, file_io
from catalog.storage.fileio import located, open_input, storage_root
from catalog.tfrecord import sources
from catalog.tfrecord.framing import RecordWriter, read_records

PACKAGE = Path(catalog.__file__).parent  # the package under test (a worktree's, on PYTHONPATH)
SEAM = "storage/fileio.py"
# Database URLs (SQLAlchemy's postgresql://, sqlite:///) are no file locations: the manifest's
# own module(s) parse them.
DATABASE_URLS = ("manifest.py", "manifest/")
# What tells a location's kind from its text: str methods given a "...://" constant.
_TEXT_TESTS = {"startswith", "endswith", "partition", "rpartition", "split", "rsplit", "find", "index", "removeprefix"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))]


def _imports_fsspec(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "fsspec" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "fsspec":
            return True
    return False


def _is_scheme(node: ast.AST) -> bool:
    """A "...://" constant that can name a file (not a database: sqlite:///, postgresql://)."""
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and "://" in node.value
        and not node.value.startswith(("sqlite:", "postgres"))
    )


def _url_tests(tree: ast.Module) -> list[str]:
    """``is_url`` named anywhere, and "...://" constants compared or given to a str method."""
    found = []
    for node in ast.walk(tree):
        if getattr(node, "id", None) == "is_url" or getattr(node, "attr", None) == "is_url":  # a Name, an Attribute
            found.append(f"line {node.lineno}: is_url")
        elif isinstance(node, ast.alias) and node.name == "is_url":
            found.append("imports is_url")
        elif isinstance(node, ast.Compare) and any(_is_scheme(n) for n in [node.left, *node.comparators]):
            found.append(f"line {node.lineno}: a comparison with a URL scheme")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _TEXT_TESTS
            and any(_is_scheme(a) for a in node.args)
        ):
            found.append(f"line {node.lineno}: .{node.func.attr}() of a URL scheme")
    return found


def test_fsspec_is_imported_in_exactly_one_module() -> None:
    importers = [name for name, tree in _modules() if _imports_fsspec(tree)]
    assert importers == [SEAM]


def test_no_url_test_outside_storage() -> None:
    """Only storage tells a URL from a path: everything else asks it (file_io, a Store, a
    PlannedShard's io)."""
    found = {
        name: tests
        for name, tree in _modules()
        if not name.startswith(("storage/", *DATABASE_URLS)) and (tests := _url_tests(tree))
    }
    assert found == {}


def test_the_scan_sees_a_url_test() -> None:
    """The scan above can fail: each kind of URL test it looks for is found."""
    code = 'from x import is_url\nis_url(a)\nif "://" in a: pass\na.startswith("s3://")\na.partition("://")\n'
    assert len(_url_tests(ast.parse(code))) == 5
    assert _imports_fsspec(ast.parse("def f():\n    import fsspec.core\n"))


def test_file_io_is_chosen_by_location(tmp_path: Path) -> None:
    assert isinstance(file_io("s3://bucket/key"), FsspecFileIO) and file_io("gs://b/k").remote
    for local in (str(tmp_path / "x"), "file:///tmp/x", "relative/path", tmp_path / "x", "odd name://x"):
        assert isinstance(file_io(local), LocalFileIO) and not file_io(local).remote
    assert located(tmp_path, "data") == tmp_path / "data"
    assert located(tmp_path, "s3://b/p") == "s3://b/p"
    assert storage_root("s3://b/p/") == "s3://b/p" and storage_root("rel") == str(Path("rel").resolve())


def _shard(path: Path, n: int = 3) -> list[bytes]:
    records = [b"r%d" % i * (i + 1) for i in range(n)]
    with RecordWriter(path) as w:
        w.write_many(records)
    return records


def test_local_file_io_reads_stats_and_refuses_links(tmp_path: Path) -> None:
    shard = tmp_path / "d" / "a.tfrecord"
    shard.parent.mkdir()
    _shard(shard)
    data = shard.read_bytes()
    io = file_io(str(shard))
    with io.open(str(shard)) as f:
        assert f.read() == data and f.name == str(shard)
    assert io.read_ranges([str(shard), str(shard)], [0, 4], [4, 10]) == [data[:4], data[4:10]]
    assert io.stat(str(shard)).st_size == len(data) == io.lstat(str(shard)).st_size  # type: ignore[union-attr]
    link = tmp_path / "d" / "link.tfrecord"
    link.symlink_to(shard)
    assert io.real(str(link)) == str(shard.resolve())
    with pytest.raises(CatalogError) as e:
        io.open(str(link))
    assert str(e.value) == f"{link}: a symbolic link; the catalog reads only regular files in its data area"
    with io.open_input(str(link)) as f:  # an input: links followed
        assert f.read() == data
    with pytest.raises(FileNotFoundError):
        io.open(str(tmp_path / "d" / "gone.tfrecord"))


def test_read_records_opens_names_through_the_seam(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The format layer opens a name (path or URL) with the opener storage registered."""
    records = _shard(tmp_path / "a.tfrecord")
    opened: list[str] = []

    def opener(name: str):  # type: ignore[no-untyped-def]
        opened.append(name)
        return open_input(name)

    monkeypatch.setattr(sources, "_OPENER", opener)
    assert list(read_records(str(tmp_path / "a.tfrecord"))) == records
    assert list(read_records(tmp_path / "a.tfrecord")) == records  # a Path is local: opened here
    assert opened == [str(tmp_path / "a.tfrecord")]


def test_read_records_loads_the_seam_itself(tmp_path: Path) -> None:
    """``catalog.tfrecord.read_records`` on a name works without storage imported first (the
    format layer loads it), and a URL without an object store says so in one line."""
    _shard(tmp_path / "a.tfrecord")
    code = (
        "import sys\nfrom catalog.tfrecord import read_records\n"
        "assert 'catalog.storage.fileio' not in sys.modules\n"
        f"print(len(list(read_records({str(tmp_path / 'a.tfrecord')!r}))))\n"
        "assert 'catalog.storage.fileio' in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert (proc.returncode, proc.stdout) == (0, "3\n"), proc.stderr


def test_fsspec_file_io_on_s3(s3_url: str, tmp_path: Path) -> None:
    import fsspec

    records = _shard(tmp_path / "a.tfrecord")
    data = (tmp_path / "a.tfrecord").read_bytes()
    url = f"{s3_url}/d/a.tfrecord"
    fsspec.filesystem("s3").pipe_file(url, data)
    io = file_io(url)
    assert io.remote and io.real(url) == url
    with io.open(url) as f:
        assert f.read() == data
    assert int(io.stat(url)["size"]) == len(data)  # type: ignore[index]
    assert io.read_ranges([url, url], [0, 5], [5, 9]) == [data[:5], data[5:9]]
    assert list(read_records(url)) == records
    with pytest.raises(ObjectMissingError) as e:
        io.stat(f"{s3_url}/d/gone")
    assert str(e.value) == f"{s3_url}/d/gone: no such object"
