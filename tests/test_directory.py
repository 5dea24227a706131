"""A catalog directory (catalog/directory.py): found as git finds .git, its catalog.json read
defensively, its manifest's URL, a moved manifest refused in one line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from catalog import Catalog
from catalog import manifest as mf
from catalog.directory import (
    CATALOG_FILE,
    DEFAULT_DB_FILE,
    MAX_CATALOG_FILE,
    connect,
    default_url,
    find_root,
    locate,
    runtime_url,
    write_atomically,
)
from catalog.errors import CatalogNotFoundError, ManifestError


def _catalog(root: Path, doc: object = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / CATALOG_FILE).write_text(json.dumps({"format": 1} if doc is None else doc))
    return root


def test_the_catalog_is_found_from_an_argument_the_environment_or_upwards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _catalog(tmp_path / "cat")
    (root / "deep" / "er").mkdir(parents=True)
    assert find_root(root) == root.resolve()
    monkeypatch.delenv("CATALOG_ROOT", raising=False)
    monkeypatch.chdir(root / "deep" / "er")
    assert find_root() == root.resolve()
    monkeypatch.setenv("CATALOG_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    assert find_root() == root.resolve()
    with pytest.raises(CatalogNotFoundError) as e:
        find_root(tmp_path / "none")
    assert str(e.value) == f"{tmp_path / 'none'}: not a catalog (no catalog.json; create one with `catalog init`)"
    monkeypatch.delenv("CATALOG_ROOT")
    with pytest.raises(CatalogNotFoundError, match=r"^no catalog found: pass --catalog DIR"):
        find_root()


def test_locate_gives_the_manifest_url_or_says_what_is_wrong_with_catalog_json(tmp_path: Path) -> None:
    root = _catalog(tmp_path / "cat")
    with pytest.raises(ManifestError) as e:
        locate(root)
    assert str(e.value) == f"{root.resolve()}: the manifest {DEFAULT_DB_FILE} is missing"
    (root / DEFAULT_DB_FILE).touch()
    assert locate(root) == (root.resolve(), default_url(root))
    assert default_url(root) == f"sqlite:///{root.resolve() / DEFAULT_DB_FILE}"
    cases = {
        "[1, 2]": "not a JSON object",
        "{": "unreadable: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        '{"db_url": 5}': "db_url is not a string: 5",
        "[" * 100_000: "unreadable: not valid JSON: nested too deeply",
    }
    for text, message in cases.items():
        (root / CATALOG_FILE).write_text(text)
        with pytest.raises(ManifestError) as e:
            locate(root)
        assert str(e.value) == f"{root.resolve() / CATALOG_FILE}: {message}", text[:20]
    (root / CATALOG_FILE).write_bytes(b" " * (MAX_CATALOG_FILE + 1))
    with pytest.raises(ManifestError, match=r"unreadable: larger than 1 MiB$"):
        locate(root)


def test_connect_reads_the_data_root_and_refuses_a_moved_manifest(tmp_path: Path) -> None:
    root = _catalog(tmp_path / "cat")
    url = default_url(root)
    engine = mf.make_engine(url)
    mf.create_manifest(engine, "elsewhere", catalog_id="abc")
    _, data_root, catalog_id = connect(root, url, check=True)
    assert (data_root, catalog_id) == ("elsewhere", "abc")
    with mf.write_txn(engine, moved_ok=True) as conn:
        conn.execute(mf.META.insert().values(key=mf.MOVED_TO, value="sqlite:////new.db"))
    with pytest.raises(ManifestError) as e:
        connect(root, url, check=True)
    assert str(e.value) == (
        f"{root}: its manifest was moved to sqlite:////new.db by copy-manifest; use the copy "
        "(catalog init DIR --db-url sqlite:////new.db)"
    )


def test_runtime_url_takes_the_environments_password_only_for_the_same_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = "postgresql+psycopg://me@db.example/cat"
    monkeypatch.setenv("CATALOG_DB_URL", "postgresql://me:pw@db.example/cat")
    assert runtime_url(recorded) == "postgresql://me:pw@db.example/cat"
    monkeypatch.setenv("CATALOG_DB_URL", "postgresql://me:pw@other.example/cat")
    assert runtime_url(recorded) == recorded
    monkeypatch.delenv("CATALOG_DB_URL")
    assert runtime_url(recorded) == recorded


def test_write_atomically_replaces_the_file_whole_and_owner_writable_only(tmp_path: Path) -> None:
    path = tmp_path / CATALOG_FILE
    (tmp_path / f".{CATALOG_FILE}.tmp").write_text("a killed writer's leftover")
    old = os.umask(0)
    try:
        write_atomically(path, '{"format": 1}')
    finally:
        os.umask(old)
    assert path.read_text() == '{"format": 1}'
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == [CATALOG_FILE]


def test_catalog_json_names_the_manifest_and_not_its_format(tmp_path: Path) -> None:
    """The format lives in the manifest (its meta row), which `upgrade` moves for every directory
    attached to it; a copy in catalog.json went stale at the first upgrade."""
    cat = Catalog.init(tmp_path / "c")
    cat.close()
    assert json.loads((tmp_path / "c" / CATALOG_FILE).read_text()) == {"db_url": None}
    with Catalog.open(tmp_path / "c") as cat:
        cat.copy_manifest(f"sqlite:///{tmp_path / 'moved.db'}")
    assert json.loads((tmp_path / "c" / CATALOG_FILE).read_text()) == {"db_url": f"sqlite:///{tmp_path / 'moved.db'}"}
