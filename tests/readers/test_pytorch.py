"""catalog.readers.pytorch: TorchReader's settings, states and output, and check_state's refusals."""

from __future__ import annotations

import json
import pickle
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.commit.plans import ReadPlan, plan
from catalog.errors import CatalogError, ReaderStateError
from catalog.readers.pytorch import READ_KEYS, TorchReader, check_state, to_tensors, torch_dataset

torch = pytest.importorskip("torch", reason="torch is not installed (pip install '.[torch]')")

N = 10


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> ReadPlan:
    cat = Catalog.init(tmp_path_factory.mktemp("torch") / "cat")
    schema = {"features": {"id": {"dtype": "int64"}, "v": {"dtype": "float32", "shape": [None]},
                           "s": {"dtype": "string"}}}  # fmt: skip
    ds = cat.register("d", schema)
    ds.append_rows([{"id": i, "v": [float(i)] * (i % 3), "s": f"r{i}"} for i in range(N)], shard_records=4)
    return plan(cat.dataset("d"))


def test_settings_are_checked(pinned: ReadPlan) -> None:
    with pytest.raises(CatalogError, match=r"^give both rank= and world_size=, or neither"):
        TorchReader(pinned, rank=0)
    with pytest.raises(CatalogError, match=r"^rank must be in \[0, 2\), not 2$"):
        TorchReader(pinned, rank=2, world_size=2)
    with pytest.raises(CatalogError, match=r"^batch_size must be a whole number >= 1, not 0$"):
        TorchReader(pinned, batch_size=0)
    with pytest.raises(CatalogError, match=r"^columns: no feature 'x' in the schema"):
        TorchReader(pinned, columns=["x"])


def test_rows_batches_and_lengths(pinned: ReadPlan) -> None:
    reader = torch_dataset(pinned, batch_size=4, columns=["id", "v"])
    assert isinstance(reader, torch.utils.data.IterableDataset) and len(reader) == 3
    first = next(iter(reader))
    assert first["id"].tolist() == [0, 1, 2, 3] and [t.tolist() for t in first["v"]] == [[], [1.0], [2.0, 2.0], []]
    rows = list(TorchReader(pinned, rank=1, world_size=2))
    assert [int(r["id"]) for r in rows] == [1, 3, 5, 7, 9] and rows[0]["s"] == "r1"
    assert rows[0]["id"].dim() == 0


def test_states_round_trip_and_resume(pinned: ReadPlan) -> None:
    reader = TorchReader(pinned, batch_size=2, shuffle=True, seed=3)
    it = iter(reader)
    seen = [next(it)["id"].tolist() for _ in range(2)]
    state = json.loads(json.dumps(reader.state_dict()))  # plain values: survives JSON
    assert state["samples"] == 4 and set(READ_KEYS) <= set(state)
    resumed = TorchReader(pinned, batch_size=2, shuffle=True, seed=3)
    resumed.load_state_dict(state)
    rest = [b["id"].tolist() for b in resumed]
    full = [b["id"].tolist() for b in TorchReader(pinned, batch_size=2, shuffle=True, seed=3)]
    assert seen + rest == full
    copy = pickle.loads(pickle.dumps(resumed))
    assert copy.state_dict()["samples"] == resumed.state_dict()["samples"]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ([1], "a reader state is a dict (state_dict()'s), not list"),
        ({"epoch": 0}, "a reader state needs samples (it has epoch)"),
        ({"epoch": True, "samples": 0}, "a reader state's epoch must be a whole number, not True"),
        ({"epoch": 0, "samples": 0, "seed": 4}, "this state is of another read: seed 4 in the state, 3 in this reader"),
        (
            {"epoch": 0, "samples": 0, "shuffle": 1},
            "this state is of another read: shuffle 1 in the state, True in this reader",
        ),
        (
            {"epoch": 0, "samples": 0, "records": 11},
            "this state is of another read: records 11 in the state; "
            "this reader reads 10 (dataset 'd' version 2, split None)",
        ),
    ],
)
def test_states_of_another_read_are_refused(pinned: ReadPlan, state: Any, message: str) -> None:
    read = TorchReader(pinned, shuffle=True, seed=3)._identity()
    with pytest.raises(ReaderStateError) as e:
        check_state(state, read)
    assert str(e.value) == message


def test_to_tensors_keeps_text_and_ragged_values() -> None:
    ragged = np.empty(2, dtype=object)
    ragged[:] = [np.array([1.0], np.float32), np.array([], np.float32)]
    words = np.empty(2, dtype=object)
    words[:] = ["a", None]
    out = to_tensors({"n": np.arange(2), "r": ragged, "w": words})
    assert out["n"].tolist() == [0, 1] and [t.tolist() for t in out["r"]] == [[1.0], []] and out["w"] == ["a", None]
    readonly = np.arange(3)
    readonly.flags.writeable = False
    assert to_tensors({"x": readonly})["x"].tolist() == [0, 1, 2]  # copied: torch wants writeable memory
