"""The one IO seam (catalog.storage.fileio): fsspec imported in one module, no URL test outside
storage, and what each FileIO does; the names read_records opens go through it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

import catalog
from catalog.errors import CatalogError, ObjectMissingError
from catalog.storage import FileIO, FsspecFileIO, LocalFileIO, file_io
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


# ---- the data area's operations, for each kind: a local directory, fsspec's memory
# filesystem, and S3 (moto's server)
STORE_MODULES = ("storage/base.py", "storage/local.py", "storage/remote.py", "storage/factory.py")
# fsspec filesystem methods: only fileio calls them. Those named as no str, Path or set method is...
_FSSPEC_CALLS = {
    "cat_file", "pipe_file", "put_file", "get_file", "rm_file", "cat_ranges", "invalidate_cache",
    "_strip_protocol", "url_to_fs", "ls", "rm", "put", "pipe", "cat",
}  # fmt: skip
# ...and those that are also other things' (str.find, set.copy, Store.exists): none in a store
# but its FileIO's (``self.io.exists``).
_FSSPEC_GENERIC = {"find", "exists", "copy", "info", "open"}
# The file operations a store leaves to its FileIO.
_OS_CALLS = {"unlink", "link", "scandir", "listdir", "rename", "replace", "rmdir", "makedirs", "fsync", "remove"}


def _direct_calls(tree: ast.Module, store: bool = True) -> list[str]:
    """Calls of fsspec's filesystem methods, and the filesystem object (``filesystem()``, an
    ``fs`` attribute) named; in a ``store``, os's file operations too: what it leaves to its FileIO."""
    methods = _FSSPEC_CALLS | _FSSPEC_GENERIC if store else _FSSPEC_CALLS
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("fs", "_fs"):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.alias) and node.name == "filesystem":
            found.append("imports filesystem")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id == "os":
                if store and node.func.attr in _OS_CALLS:
                    found.append(f"line {node.lineno}: os.{node.func.attr}()")
            elif node.func.attr in methods and not (isinstance(owner, ast.Attribute) and owner.attr == "io"):
                found.append(f"line {node.lineno}: .{node.func.attr}()")
    return found


def test_stores_go_through_their_file_io() -> None:
    """A store is its area's layout on top of one FileIO: no fsspec filesystem method and no
    os file operation is called in it (nor in any storage module but fileio, for fsspec's)."""
    modules = dict(_modules())
    assert {name: calls for name in STORE_MODULES if (calls := _direct_calls(modules[name]))} == {}
    others = {
        name: calls
        for name, tree in modules.items()
        if name.startswith("storage/") and name != SEAM and (calls := _direct_calls(tree, store=False))
    }
    assert others == {}


def test_the_store_scan_sees_direct_calls() -> None:
    code = "self.fs.rm_file(u)\nfs.exists(r)\nos.unlink(p)\nx.put_file(a, b)\nself.io.exists(u)\n"
    code += "from m import filesystem\n"
    loose = ["line 1: .rm_file()", "line 1: .fs", "line 4: .put_file()", "imports filesystem"]
    assert sorted(_direct_calls(ast.parse(code), store=False)) == sorted(loose)
    assert sorted(_direct_calls(ast.parse(code))) == [
        "imports filesystem",
        "line 1: .fs",
        "line 1: .rm_file()",
        "line 2: .exists()",
        "line 3: os.unlink()",
        "line 4: .put_file()",
    ]


@pytest.fixture(params=["local", "memory", "s3"])
def area(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[FileIO, str]:
    """A FileIO and a folder (or prefix) of its own to write in."""
    if request.param == "local":
        return LocalFileIO(), str(tmp_path / "area")
    if request.param == "memory":
        pytest.importorskip("fsspec")
        root = f"memory://fileio-test-{tmp_path.name}/area"
        return FsspecFileIO(root), root
    return FsspecFileIO(), request.getfixturevalue("s3_url")


def _spool(io: FileIO, location: str, tmp_path: Path, data: bytes) -> tuple[Path, IO[bytes]]:
    """A temporary file holding ``data`` as a store writes one: beside its name, or in a spool."""
    temp = Path(location + ".tmp") if not io.remote else tmp_path / "spool.tmp"
    f = open(temp, "wb")  # noqa: SIM115  # publish closes it
    f.write(data)
    return temp, f


def test_file_io_writes_lists_links_and_deletes(area: tuple[FileIO, str], tmp_path: Path) -> None:
    io, root = area
    shard, other = f"{root}/d/a.tfrecord", f"{root}/d/b.tfrecord"
    assert io.is_empty(root) and io.list(root, depth=2) == [] and not io.exists(shard)
    io.make_folder(f"{root}/d")
    temp, f = _spool(io, shard, tmp_path, b"abc")
    io.publish(f, temp, shard)
    io.sync_folder(f"{root}/d")
    assert f.closed and not temp.exists() and io.exists(shard) and io.read(shard) == b"abc"
    assert io.read(shard, 2) == b"ab"
    assert io.write_new(f"{root}/owner", b"one\n") and io.read(f"{root}/owner") == b"one\n"
    assert io.link(shard, other) and io.read(other) == b"abc"
    found = io.list(root, depth=2)
    assert [(e.path, e.size, e.link) for e in found] == [
        ("d/a.tfrecord", 3, False),
        ("d/b.tfrecord", 3, False),
        ("owner", 4, False),
    ]
    assert [e.path for e in io.list(root)] == ["owner"]  # depth 1: the top only
    assert [e.path for e in io.list(root, depth=2, descend=lambda folder: folder != "d")] == ["owner"]
    assert [e.path for e in io.list(root, "d/", depth=1)] == ["d/a.tfrecord", "d/b.tfrecord"]
    assert [e.path for e in io.list(root, "d/b", depth=1)] == ["d/b.tfrecord"]  # the start of a name
    assert [e.path for e in io.list(root, "own")] == ["owner"]
    assert io.list(f"{root}/none", depth=2) == [] and io.is_empty(f"{root}/none") and not io.is_empty(root)
    assert io.delete(shard) and not io.exists(shard) and not io.delete(shard)  # gone already: False
    assert io.delete(other) and io.delete(f"{root}/owner")
    if not io.remote:
        os.mkdir(f"{root}/kept")
        assert not io.is_empty(root)  # the emptied folder "d", and "kept"
    io.remove_empty_folders(root, keep=lambda name: name == "kept")
    assert io.list(root, depth=2) == []
    assert io.remote or os.listdir(root) == ["kept"]
    with pytest.raises(FileNotFoundError):
        io.read(shard)


def test_local_file_io_lists_no_link_and_publishes_durably(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    io = LocalFileIO()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"xy")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_bytes(b"s")
    (tmp_path / "d" / "link").symlink_to(tmp_path / "d" / "a")
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
    found = io.list(str(tmp_path), depth=2, descend=lambda folder: folder != "elsewhere")
    assert [(e.path, e.size, e.link) for e in found] == [("d/a", 2, False), ("d/link", 0, True), ("linked", 0, True)]
    assert found[0].mtime == (tmp_path / "d" / "a").stat().st_mtime
    assert io.list(str(tmp_path), "linked/", depth=1) == []  # a linked folder below the location: not followed
    assert [e.path for e in io.list(str(tmp_path / "linked"))] == ["secret"]  # the location itself: the user's
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    for sync, calls in ((True, 1), (False, 0)):
        temp = tmp_path / "d" / f".tmp-{sync}"
        f = open(temp, "wb")  # noqa: SIM115  # publish closes it
        synced.clear()
        io.publish(f, temp, str(tmp_path / "d" / f"final-{sync}"), sync)
        assert len(synced) == calls and (tmp_path / "d" / f"final-{sync}").exists() and not temp.exists()
    synced.clear()
    assert not io.write_new(str(tmp_path / "d" / "a"), b"other")  # never replaces
    assert (tmp_path / "d" / "a").read_bytes() == b"xy" and len(synced) == 1  # the new file fsynced, no folder
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["a", "final-False", "final-True", "link"]
    assert io.write_new(str(tmp_path / "new" / "m"), b"m") and len(synced) == 3  # the file, then its folder
    with pytest.raises(CatalogError) as e:
        io.read(str(tmp_path / "d" / "link"))
    assert str(e.value).endswith("a symbolic link; the catalog reads only regular files in its data area")


def test_fsspec_file_io_on_a_missing_bucket(s3_url: str) -> None:
    io = FsspecFileIO()
    io.reach(s3_url)
    gone = "s3://no-such-bucket-fileio/data"
    with pytest.raises(CatalogError) as e:
        io.reach(gone)
    assert str(e.value) == f"{gone}: no such bucket (create it first)"
    assert io.list(gone, depth=2) == [] and io.is_empty(gone) and not io.delete(f"{gone}/x")
    io.write_new(f"{s3_url}/d/x", b"x")
    assert io.list(s3_url, depth=2)[0].mtime > 0  # S3's LastModified
