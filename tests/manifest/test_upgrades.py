"""Format upgrades (catalog/manifest/upgrades.py): an old manifest is brought step by step to
FORMAT_VERSION, a current one is left alone, a missing step or a newer format is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from catalog.errors import CatalogError, ManifestError
from catalog.manifest.engine import make_engine
from catalog.manifest.meta import create_manifest, read_meta
from catalog.manifest.tables import DEFAULT_SPLIT, FORMAT_VERSION, META, SHARDS
from catalog.manifest.transactions import read_txn, write_txn
from catalog.manifest.upgrades import UPGRADES, upgrade

pytestmark = pytest.mark.usefixtures("sqlite_only")
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest-format1"


def _old(tmp_path: Path) -> Engine:
    shutil.copy(FIXTURE / "catalog.db", tmp_path / "old.db")
    return make_engine(f"sqlite:///{tmp_path / 'old.db'}")


def test_an_old_manifest_is_upgraded_to_the_current_format_and_its_shards_kept(tmp_path: Path) -> None:
    engine = _old(tmp_path)
    assert read_meta(engine)["format_version"] == "1"
    assert upgrade(engine) == (1, FORMAT_VERSION)
    assert read_meta(engine)["format_version"] == str(FORMAT_VERSION)
    with read_txn(engine) as conn:
        shards = conn.execute(select(SHARDS.c.split, SHARDS.c.compression, SHARDS.c.seq)).all()
    assert shards, "the fixture has shards"
    assert {s.split for s in shards} == {DEFAULT_SPLIT}  # format 4: every older shard is train's
    assert len({s.seq for s in shards}) == len(shards)  # format 2: a read order, one seq each
    assert upgrade(engine) == (FORMAT_VERSION, FORMAT_VERSION)  # once is enough


def test_a_missing_step_is_refused_and_the_steps_before_it_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _old(tmp_path)
    monkeypatch.delitem(UPGRADES, 3)  # upgrade reads the dict when it runs
    with pytest.raises(CatalogError) as e:
        upgrade(engine)
    assert str(e.value) == "no upgrade path from manifest format 3"
    assert read_meta(engine)["format_version"] == "3"  # each step commits on its own


def test_a_newer_manifest_is_refused_untouched(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    create_manifest(engine, str(tmp_path))
    with write_txn(engine) as conn:
        conn.execute(META.update().where(META.c.key == "format_version").values(value=str(FORMAT_VERSION + 1)))
    with pytest.raises(ManifestError, match=r"newer than this catalog understands"):
        upgrade(engine)
    assert read_meta(engine)["format_version"] == str(FORMAT_VERSION + 1)


def _split_plan(engine: Engine) -> str:
    """SQLite's plan for one split's live shards in read order (what a read plan of a split asks)."""
    sql = (
        "EXPLAIN QUERY PLAN SELECT * FROM shards WHERE dataset_id = 1 AND removed_version IS NULL "
        "AND split IN ('test') ORDER BY removed_version, seq"
    )
    with read_txn(engine) as conn:
        return " ".join(str(row[-1]) for row in conn.exec_driver_sql(sql))


def test_format_10_gives_an_existing_manifest_the_split_index_in_read_order(tmp_path: Path) -> None:
    """A format-9 manifest found one split's shards by reading every live shard of the dataset
    (ix_shards_live_seq, then a filter on split); the upgrade swaps format 4's per-split index for
    one ending in seq, which finds them directly, in order."""
    from probes import downgrade_to_format_9

    db = tmp_path / "m.db"
    engine = make_engine(f"sqlite:///{db}")
    create_manifest(engine, str(tmp_path))
    assert "ix_shards_split_seq (dataset_id=? AND removed_version=? AND split=?)" in _split_plan(engine)
    engine.dispose()
    downgrade_to_format_9(db)
    engine = make_engine(f"sqlite:///{db}")
    assert "ix_shards_split_seq" not in _split_plan(engine)
    assert upgrade(engine) == (9, FORMAT_VERSION)
    assert "ix_shards_split_seq (dataset_id=? AND removed_version=? AND split=?)" in _split_plan(engine)
    assert "TEMP B-TREE" not in _split_plan(engine)  # in order: no sort
    with read_txn(engine) as conn:
        names = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "ix_shards_split_totals" not in names  # replaced: no extra index for every commit to keep
