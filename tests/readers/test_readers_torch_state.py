"""``ds.torch()``'s ``load_state_dict`` refuses a state of another read (issue 30): a state
carries what identifies the read it was saved from (dataset, version, split, shuffle, seed,
columns, record count), and a reader whose read differs refuses it in one line naming the
field, instead of resuming into an epoch that repeats some records and never delivers others.
World size and worker count may change: that is the elastic promise."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from readers_data import N, epoch_order, interleave, make_dataset, rank_share

from catalog.api import Dataset
from catalog.errors import CatalogError, ReaderStateError

ANOTHER = "this state is of another read: "
torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[test]')")


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("state") / "c")


def ids(tds: Any) -> list[int]:
    return [int(i) for item in tds for i in item["id"].reshape(-1).tolist()]


def saved(tds: Any, steps: int) -> dict[str, Any]:
    """The state after ``steps`` batches of this process's iteration."""
    it = iter(tds)
    for _ in range(steps):
        next(it)
    return tds.state_dict()


def test_a_shuffled_state_is_refused_by_a_reader_in_dataset_order(ds: Dataset) -> None:
    state = saved(ds.torch(batch_size=4, shuffle=True, seed=2), 2)
    plain = ds.torch(batch_size=4, seed=2)
    with pytest.raises(ReaderStateError) as e:
        plain.load_state_dict(state)
    assert str(e.value) == "this state is of another read: shuffle True in the state, False in this reader"
    assert isinstance(e.value, CatalogError) and isinstance(e.value, ValueError)
    assert plain.samples == 0 and ids(plain) == list(range(N))  # nothing of the state was taken


def test_a_state_of_another_dataset_with_as_many_records_is_refused(ds: Dataset, tmp_path: Path) -> None:
    other = make_dataset(tmp_path / "c", name="other")  # 101 records too
    state = saved(other.torch(batch_size=4, shuffle=True, seed=2), 2)
    assert state["records"] == N
    line = r"^this state is of another read: dataset 'other' in the state, 'd' in this reader$"
    with pytest.raises(ReaderStateError, match=line):
        ds.torch(batch_size=4, shuffle=True, seed=2).load_state_dict(state)


@pytest.mark.parametrize(
    ("field", "made", "line"),
    [
        ("seed", {"shuffle": True, "seed": 3}, "seed 2 in the state, 3"),
        ("split", {"shuffle": True, "seed": 2, "split": "train[:101]"}, "split None in the state, 'train[:101]'"),
        ("columns", {"shuffle": True, "seed": 2, "columns": ["id"]}, "columns None in the state, ['id']"),
    ],
)
def test_each_field_of_the_read_is_checked(ds: Dataset, field: str, made: dict[str, Any], line: str) -> None:
    state = saved(ds.torch(batch_size=4, shuffle=True, seed=2), 2)
    assert field in state
    with pytest.raises(ReaderStateError) as e:
        ds.torch(batch_size=4, **made).load_state_dict(state)
    assert str(e.value) == f"this state is of another read: {line} in this reader"


def test_another_version_is_refused(ds: Dataset, tmp_path: Path) -> None:
    grown = make_dataset(tmp_path / "c")
    state = saved(grown.torch(batch_size=4), 1)
    v = state["version"]
    grown.compact()  # the next version: the same records, other shards
    line = f"^this state is of another read: version {v} in the state, {v + 1} in this reader$"
    with pytest.raises(ReaderStateError, match=line):
        grown.torch(batch_size=4).load_state_dict(state)
    grown.torch(batch_size=4, version=v).load_state_dict(state)  # the version it was saved from: accepted


def test_records_still_named_when_they_differ(ds: Dataset) -> None:
    state = {**saved(ds.torch(batch_size=4), 1), "records": 50}
    line = r"^this state is of another read: records 50 in the state; this reader reads 101 "
    line += r"\(dataset 'd' version \d+, split None\)$"
    with pytest.raises(ReaderStateError, match=line):
        ds.torch(batch_size=4).load_state_dict(state)


def test_world_size_and_workers_may_change_and_a_checkpoint_survives_json(ds: Dataset) -> None:
    tds = ds.torch(batch_size=5, shuffle=True, seed=6, columns=["id", "vec"])
    state = json.loads(json.dumps(saved(tds, 3)))  # a checkpoint written as JSON: lists, not tuples
    assert state["samples"] == 15 and state["world_size"] == 1 and state["columns"] == ["id", "vec"]
    order = epoch_order(N, True, 6, 0)
    shares = []
    for rank in range(3):
        resumed = ds.torch(batch_size=2, shuffle=True, seed=6, columns=("id", "vec"), rank=rank, world_size=3)
        resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
        loader = torch.utils.data.DataLoader(resumed, batch_size=None, num_workers=2, multiprocessing_context="fork")
        shares.append(ids(loader))
    assert shares == [rank_share(order, 3, r, start=15) for r in range(3)]
    assert interleave(shares)[: N - 15] == order[15:]


def test_a_hand_made_checkpoint_of_epoch_and_samples_is_trusted(ds: Dataset) -> None:
    """The README's checkpoint, {"epoch", "samples"} from the trainer's step count: the fields a
    state leaves out are not checked (the reader's own settings are the read)."""
    tds = ds.torch(batch_size=4, shuffle=True, seed=5)
    tds.load_state_dict({"epoch": 2, "samples": 40})
    assert ids(tds) == epoch_order(N, True, 5, 2)[40:]


@pytest.mark.parametrize(
    ("state", "line"),
    [
        ([("epoch", 0)], "a reader state is a dict (state_dict()'s), not list"),
        ({"epoch": "one", "samples": 3}, "a reader state's epoch must be a whole number, not 'one'"),
        ({"epoch": 0, "samples": 2.5}, "a reader state's samples must be a whole number >= 0, not 2.5"),
        ({"epoch": 0, "samples": True}, "a reader state's samples must be a whole number >= 0, not True"),
        ({"epoch": 0, "samples": 0, "seed": "x"}, f"{ANOTHER}seed 'x' in the state, 0 in this reader"),
        ({"epoch": 0, "samples": 0, "columns": 7}, f"{ANOTHER}columns 7 in the state, None in this reader"),
    ],
)
def test_malformed_states_fail_in_one_line(ds: Dataset, state: Any, line: str) -> None:
    with pytest.raises(CatalogError) as e:
        ds.torch(batch_size=4).load_state_dict(state)
    assert str(e.value) == line


def test_batches_refuses_samples_past_the_epoch(ds: Dataset) -> None:
    """ds.batches(samples=) trusts its caller for the read (its own arguments are the read) but
    refuses a position no read of these records has, as load_state_dict does."""
    with pytest.raises(CatalogError, match=r"^samples must be in \[0, 101\], not 102$"):
        ds.batches(4, shuffle=True, samples=N + 1)
    with pytest.raises(CatalogError, match=r"^samples must be a whole number >= 0, not 2.5$"):
        ds.batches(4, samples=2.5)  # type: ignore[arg-type]
