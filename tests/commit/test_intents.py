"""catalog/commit/intents.py: a rewrite's intent is settled whatever stops it, from the
moment it may be recorded: a Ctrl-C right after the intent's transaction (before the
``with`` body runs) is Interrupted, nothing registered, and the intent row is gone at once
rather than left for gc."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from catalog import Catalog, faults
from catalog import manifest as mf
from catalog.errors import Interrupted
from catalog.manifest.tables import INTENTS

SCHEMA = {"features": {"id": {"dtype": "int64"}}}


@pytest.fixture
def ds(tmp_path: Path) -> Iterator[Any]:
    with Catalog.init(tmp_path / "cat") as cat:
        d = cat.register("d", SCHEMA)
        for lo in (0, 5):
            d.append_rows([{"id": i} for i in range(lo, lo + 5)])
        yield d


def ctrl_c_at(name: str) -> Callable[[str, dict[str, Any]], None]:
    def hook(point: str, info: dict[str, Any]) -> None:
        if point == name:
            raise KeyboardInterrupt

    return hook


def intents(ds: Any) -> int:
    with mf.read_txn(ds.catalog.engine) as conn:
        return int(conn.execute(select(func.count()).select_from(INTENTS)).scalar_one())


@pytest.mark.parametrize(
    "run",
    [
        lambda d: d.compact(1 << 20, workers=1),
        lambda d: d.delete("id = 3", workers=1),
        lambda d: d.filter("id > 2", into="e", workers=1),
    ],
    ids=["compact", "delete", "filter"],
)
def test_a_ctrl_c_once_the_intent_is_recorded_is_settled(ds: Any, run: Callable[[Any], Any]) -> None:
    before = ds.info().version
    previous = faults.install(ctrl_c_at("intent.recorded"))
    try:
        run(ds)
    except Interrupted as e:  # (a bare KeyboardInterrupt would stop pytest itself: caught below)
        assert str(e) == "interrupted: nothing was registered"
    except KeyboardInterrupt:
        pytest.fail("a bare KeyboardInterrupt: the intent was not settled")
    else:
        pytest.fail("not interrupted")
    finally:
        faults.install(previous)
    assert intents(ds) == 0  # released now, not left for gc
    assert ds.catalog.dataset("d").info().version == before
    assert [r["id"] for r in ds.catalog.dataset("d").read()] == list(range(10))
