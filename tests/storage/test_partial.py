"""Files written outside the data area before their final name (catalog/storage/partial.py):
partial names, dead writers' leftovers cleared, a taken name never replaced but with force."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from catalog.errors import CatalogError
from catalog.storage.partial import (
    PARTIAL_PREFIX,
    check_target,
    clear_dead_partials,
    partial_path,
    publish_new,
    publish_written,
)


def test_a_partial_name_is_hidden_beside_its_target_and_names_this_process(tmp_path: Path) -> None:
    temp = partial_path(tmp_path / "out.tfrecord")
    assert temp.parent == tmp_path
    assert temp.name.startswith(PARTIAL_PREFIX) and temp.name.endswith("-out.tfrecord.tmp")
    assert f"-{os.getpid()}-" in temp.name
    assert partial_path(tmp_path / "out.tfrecord") == temp  # one name per process and target


def test_only_partials_of_dead_processes_are_cleared(tmp_path: Path) -> None:
    mine = partial_path(tmp_path / "a.bin")
    mine.write_bytes(b"mine")
    code = "import sys; from pathlib import Path; from catalog.storage.partial import partial_path; "
    code += "print(partial_path(Path(sys.argv[1])))"
    run = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "b.bin")], capture_output=True, text=True, check=True
    )
    theirs = Path(run.stdout.strip())
    theirs.write_bytes(b"dead")
    other = tmp_path / f"{PARTIAL_PREFIX}00000000-1-1-c.bin.tmp"  # another machine's: not ours to judge
    other.write_bytes(b"other")
    unrelated = tmp_path / "c.bin"
    unrelated.write_bytes(b"user")
    clear_dead_partials(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other.name, "c.bin"])
    clear_dead_partials(tmp_path / "missing")  # no directory: nothing to do, no error


def test_check_target_refuses_what_it_must_not_replace(tmp_path: Path) -> None:
    catalog_root = tmp_path / "cat"
    (catalog_root / "data").mkdir(parents=True)
    free = tmp_path / "new.bin"
    check_target(free, force=False, catalog_root=catalog_root, own=(str(catalog_root),))
    taken = tmp_path / "taken.bin"
    taken.write_bytes(b"x")
    with pytest.raises(CatalogError) as e:
        check_target(taken, force=False, catalog_root=catalog_root, own=(str(catalog_root),))
    assert str(e.value) == f"{taken}: already exists; use --force to replace it"
    check_target(taken, force=True, catalog_root=catalog_root, own=(str(catalog_root),))
    with pytest.raises(CatalogError) as e:
        check_target(catalog_root / "data", force=True, catalog_root=catalog_root, own=(str(catalog_root),))
    assert str(e.value) == f"{catalog_root / 'data'}: a directory; --force replaces only a file"
    manifest = catalog_root / "catalog.db"
    manifest.write_bytes(b"db")
    with pytest.raises(CatalogError) as e:
        check_target(manifest, force=True, catalog_root=catalog_root, own=(str(catalog_root),))
    assert str(e.value) == (
        f"{manifest}: a file of the catalog at {catalog_root}; --force replaces only files outside it"
    )


def test_publishing_takes_a_free_name_and_replaces_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    temp = partial_path(target)
    temp.write_bytes(b"first")
    publish_written(temp, target, force=False)
    assert target.read_bytes() == b"first" and not temp.exists()
    temp.write_bytes(b"second")
    with pytest.raises(CatalogError) as e:
        publish_new(temp, target)
    assert str(e.value) == f"{target}: created by someone else meanwhile; left as it is, nothing written"
    assert target.read_bytes() == b"first" and not temp.exists()
    temp.write_bytes(b"third")
    publish_written(temp, target, force=True)
    assert target.read_bytes() == b"third" and not temp.exists()
    temp.write_bytes(b"lost")
    with pytest.raises(CatalogError, match=r"cannot create: No such file or directory$"):
        publish_new(temp, tmp_path / "no" / "dir.bin")
    assert not temp.exists()
