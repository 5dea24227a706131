"""How DataLoader workers' batches reach the trainer (catalog/readers/carry.py): large ones
through a ring of reused shared-memory slots per worker, freed as the trainer takes each
batch, with a batch of its own whenever the ring cannot take one; ring files gone with their
workers, a killed worker's with the next ring made, and nothing else touched."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from readers_data import N, make_dataset

from catalog.api import Dataset
from catalog.errors import CatalogError

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[test]')")
from torch.utils.data import DataLoader  # noqa: E402

from catalog.readers import carry  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
PAD = 300_000  # bytes: a batch with this much padding is above carry.INLINE


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("carry") / "c")


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Rings made in a folder of the test's (forked workers inherit it), by a fresh process state."""
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setattr(carry, "SHM", folder)
    monkeypatch.setattr(carry, "_WORKER", carry._WorkerRings())
    return folder


def padded(batch: dict[str, Any]) -> dict[str, Any]:
    """A transform that makes a batch large (module level: spawned workers import it)."""
    return {**batch, "pad": torch.full((PAD,), int(batch["id"][0]) % 251, dtype=torch.uint8)}


def rings(folder: Path) -> set[str]:
    return {p.name for p in folder.glob(f"{carry.RING}*")}


def counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ring names of the batches the trainer takes out of slots."""
    seen: list[str] = []
    real = carry._attach

    def spy(name: str) -> Any:
        seen.append(name)
        return real(name)

    monkeypatch.setattr(carry, "_attach", spy)  # not unpack_slot: pickles name it, a spy cannot be pickled
    return seen


def test_forked_workers_batches_ride_their_rings(ds: Dataset, shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch equal to the trainer's own reading, each through a slot of its worker's one
    ring (slots reused: more batches than slots); each ring's file gone once the trainer has
    it, its map once the worker has ended and the next loader's rings come."""
    mine = list(DataLoader(ds.torch(batch_size=7, shuffle=True, transform=padded), batch_size=None))
    seen = counting(monkeypatch)
    loader = DataLoader(
        ds.torch(batch_size=7, shuffle=True, transform=padded),
        batch_size=None,
        num_workers=2,
        multiprocessing_context="fork",
    )
    theirs = []
    for batch in loader:
        theirs.append(batch)
        assert not any((shm / name).exists() for name in seen)  # a ring taken is a file gone
    assert len(theirs) == len(mine) == -(-N // 7) > 2 * carry.SLOTS
    for a, b in zip(mine, theirs, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in ("id", "img", "pad"))
        assert a["name"] == b["name"]
    first = set(seen)
    assert len(seen) == len(theirs) and len(first) == 2
    assert rings(shm) == set() and first <= set(carry._attached)
    assert sorted(i for batch in loader for i in batch["id"].tolist()) == list(range(N))  # new workers
    second = set(seen) - first  # (other tests' loaders may still have live workers: their rings stay)
    assert len(second) == 2 and second <= set(carry._attached) and not first & set(carry._attached)
    assert rings(shm) == set()


def test_spawned_workers_leave_no_ring(ds: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    """Spawned workers make their rings in /dev/shm, and take them along when they end."""
    if not carry.SHM.is_dir():
        pytest.skip("no /dev/shm: batches take a segment each (tested above)")
    before = rings(carry.SHM)
    seen = counting(monkeypatch)
    loader = DataLoader(
        ds.torch(batch_size=9, transform=padded), batch_size=None, num_workers=2, multiprocessing_context="spawn"
    )
    ids = [i for batch in loader for i in batch["id"].tolist()]
    assert sorted(ids) == list(range(N)) and len(set(seen)) == 2
    assert rings(carry.SHM) - before == set()


def value(i: int) -> dict[str, Any]:
    return {"x": torch.full((PAD,), i, dtype=torch.uint8), "i": torch.tensor([i]), "s": [f"t{i}"]}


def arrived(data: bytes, i: int) -> None:
    back = pickle.loads(data)
    assert type(back) is dict and torch.equal(back["x"], value(i)["x"]) and back["s"] == [f"t{i}"]


def ride(data: bytes) -> bool:
    """Whether a pickled batch names a ring slot (rather than carrying a segment)."""
    return b"unpack_slot" in data


def test_slots_are_freed_as_the_trainer_takes_batches(shm: Path) -> None:
    """A ring never waits for the trainer: with every slot taken, or a batch larger than a slot,
    the batch takes a segment of its own; a slot is free again once its batch is unpickled."""
    sent = [ForkingPickler.dumps(carry.Carried(value(i))).tobytes() for i in range(carry.SLOTS + 1)]
    assert [ride(d) for d in sent] == [True] * carry.SLOTS + [False]
    arrived(sent[1], 1)
    again = ForkingPickler.dumps(carry.Carried(value(9))).tobytes()
    assert ride(again)
    for i, data in enumerate(sent):
        if i != 1:
            arrived(data, i)
    arrived(again, 9)
    huge = {"x": torch.ones(carry._WORKER.ring.slot + 1, dtype=torch.uint8)}  # type: ignore[union-attr]
    data = ForkingPickler.dumps(carry.Carried(huge)).tobytes()
    assert not ride(data) and torch.equal(pickle.loads(data)["x"], huge["x"])
    assert rings(shm) == set()  # the one ring, taken: its file gone


def test_no_room_for_a_ring_is_no_ring(shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full /dev/shm (Docker's is 64 MB) fails where the ring is made, never with a SIGBUS
    when a slot is written: batches take segments, and no file is left."""

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    data = ForkingPickler.dumps(carry.Carried(value(3))).tobytes()
    assert not ride(data) and rings(shm) == set()
    arrived(data, 3)


def test_a_taken_ring_leaves_no_file(shm: Path) -> None:
    """Once the trainer has mapped a ring its file is gone (a worker killed from then on
    leaves nothing), and the ring goes on carrying batches, its slots reused."""
    first = ForkingPickler.dumps(carry.Carried(value(0))).tobytes()
    assert ride(first) and len(rings(shm)) == 1
    arrived(first, 0)
    assert rings(shm) == set()
    for i in range(1, 3 * carry.SLOTS):
        data = ForkingPickler.dumps(carry.Carried(value(i))).tobytes()
        assert ride(data)
        arrived(data, i)


def test_a_ring_the_sweep_cannot_remove_is_no_harm(shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another user's abandoned ring in the sticky /dev/shm cannot be removed: the sweep
    leaves it, and this process still makes and uses its own."""
    foreign = shm / f"{carry.RING}foreign"
    foreign.write_bytes(b"")
    os.utime(foreign, (time.time() - 60, time.time() - 60))
    unlink = Path.unlink

    def refuse(path: Path, missing_ok: bool = False) -> None:
        if path.name.endswith("foreign"):
            raise PermissionError(1, "Operation not permitted", str(path))
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refuse)
    data = ForkingPickler.dumps(carry.Carried(value(4))).tobytes()
    assert ride(data) and foreign.exists()
    arrived(data, 4)


def test_other_pickles_hold_the_bytes(shm: Path) -> None:
    """Only multiprocessing's pickler (the DataLoader's queue) puts a batch in a slot, which
    one unpickling frees: a batch pickled otherwise (torch.save, a cache) holds its bytes,
    loads any number of times, and claims no slot."""
    data = pickle.dumps(carry.Carried(value(6)))
    assert not ride(data) and rings(shm) == set() and carry._WORKER.ring is None
    for _ in range(2):
        arrived(data, 6)


def test_a_ring_takes_a_small_share_of_dev_shm(shm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ring may take an eighth of /dev/shm's free space (Docker's is 64 MB): the rest stays
    for the segments that carry what the ring cannot."""
    monkeypatch.setattr(carry, "_free_shm", lambda: 8 * (carry.HEAD + carry.SLOTS * (1 << 20)) - 1)
    data = ForkingPickler.dumps(carry.Carried(value(2))).tobytes()
    assert not ride(data) and rings(shm) == set()
    arrived(data, 2)


def test_a_child_forked_while_a_batch_is_packed_packs_its_own(shm: Path) -> None:
    """A fork while the Queue's feeder thread holds the ring's lock (packing a batch): the
    child gets a lock of its own, not one held forever."""
    arrived(ForkingPickler.dumps(carry.Carried(value(1))).tobytes(), 1)
    with carry._WORKER.lock:
        child = multiprocessing.get_context("fork").Process(target=_pack_one)
        child.start()
        child.join(60)
    assert child.exitcode == 0


def _pack_one() -> None:
    torch.set_num_threads(1)  # as DataLoader workers do: the parent's OpenMP threads did not fork
    arrived(ForkingPickler.dumps(carry.Carried(value(3))).tobytes(), 3)


def test_a_lost_ring_is_one_line(shm: Path) -> None:
    with pytest.raises(CatalogError, match=r"worker's batch is lost: its shared memory .*catalog-ring-gone is gone"):
        carry.unpack_slot("catalog-ring-gone", 0, 10, {}, 0)


def test_a_killed_workers_ring_goes_with_the_next_ring(shm: Path, tmp_path: Path) -> None:
    """SIGKILL runs no finalizer: the next ring made removes the rings whose lock no process
    holds, and nothing else (a live worker's ring, a link, a fifo, a folder of that name)."""
    ctx = multiprocessing.get_context("fork")
    children = []
    for _ in range(2):
        ready = ctx.Event()
        children.append(ctx.Process(target=_ring_and_wait, args=(ready,)))
        children[-1].start()
        assert ready.wait(60)
    killed, alive = children
    os.kill(killed.pid, 9)  # type: ignore[arg-type]
    killed.join()
    made = rings(shm)
    assert len(made) == 2
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (shm / f"{carry.RING}link").symlink_to(victim)
    os.mkfifo(shm / f"{carry.RING}fifo")
    (shm / f"{carry.RING}dir").mkdir()
    old = time.time() - 60  # past the settling time
    for path in [*(shm / n for n in made), victim, shm / f"{carry.RING}fifo"]:
        os.utime(path, (old, old))
    arrived(ForkingPickler.dumps(carry.Carried(value(5))).tobytes(), 5)  # this process's first ring
    left = rings(shm)
    assert len(made - left) == 1 and {f"{carry.RING}link", f"{carry.RING}fifo", f"{carry.RING}dir"} <= left
    assert victim.read_bytes() == b"keep" and len(left) == 4  # the live child's and the three (this one's taken)
    os.kill(alive.pid, 9)  # type: ignore[arg-type]
    alive.join()


def _ring_and_wait(ready: Any) -> None:
    torch.set_num_threads(1)  # as DataLoader workers do: the parent's OpenMP threads did not fork
    ForkingPickler.dumps(carry.Carried(value(1)))
    ready.set()
    time.sleep(600)


def test_rings_hold_any_tensor_layout(shm: Path) -> None:
    """Through a slot as through a segment: dtypes, strides, views, nesting, the small part
    a copy of its own."""
    base = torch.arange(24, dtype=torch.float64).reshape(4, 6)
    big = torch.from_numpy(np.arange(PAD, dtype=np.int32).reshape(-1, 100))
    sent = {"strided": base[:, ::2], "bf16": torch.tensor([1.5], dtype=torch.bfloat16), "nested": [big.T, None]}
    data = ForkingPickler.dumps(carry.Carried(sent)).tobytes()
    assert ride(data)
    back = pickle.loads(data)
    assert torch.equal(back["strided"], sent["strided"]) and torch.equal(back["nested"][0], big.T)
    assert back["bf16"].dtype == torch.bfloat16 and back["nested"][1] is None
    assert back["strided"].untyped_storage().nbytes() < carry.LARGE
