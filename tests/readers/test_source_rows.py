"""``src.__getitems__`` (a map-style DataLoader's fetch of one batch) parses its records as one
columnar batch and splits it: its rows must be exactly the rows ``src[i]`` gives, for every kind
of feature, column selection, absent optional values and defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from readers_data import exact

from catalog import Catalog

ZOO: dict[str, Any] = {
    "features": {
        "i": {"dtype": "int64"},
        "f": {"dtype": "float32"},
        "s": {"dtype": "string"},
        "b": {"dtype": "bytes"},
        "vi": {"dtype": "int64", "shape": [3]},
        "vs": {"dtype": "string", "shape": [2]},
        "li": {"dtype": "int64", "shape": [None]},
        "ls": {"dtype": "string", "shape": [None]},
        "lb": {"dtype": "bytes", "shape": [None]},
        "oi": {"dtype": "int64", "optional": True},
        "os": {"dtype": "string", "optional": True},
        "di": {"dtype": "int64", "default": 5},
        "dl": {"dtype": "float32", "shape": [2], "default": [0.5, 1.5]},
        "m": {"dtype": "float32", "shape": [2, 2]},
        "t": {"dtype": "uint16", "shape": [2, 3], "encoding": "tensor"},
        "tu": {"dtype": "float32", "shape": [None, 2], "encoding": "tensor"},
        "ot": {"dtype": "uint8", "shape": [2], "encoding": "tensor", "optional": True},
        "n": {"dtype": "int64", "names": ["a", "b", "c"]},
    }
}


def zoo_row(k: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "i": k - 3,
        "f": k / 3,
        "s": f"s{k} é",
        "b": bytes([k, 0]),
        "vi": [k, -k, 2**40],
        "vs": ["x", str(k)],
        "li": list(range(k % 4)),
        "ls": ["q"] * (k % 3),
        "lb": [b"\x00"] * (k % 2),
        "m": [[1, 2], [3, k]],
        "t": np.arange(6, dtype=np.uint16).reshape(2, 3) + k,
        "tu": np.full((k % 3, 2), k, np.float32),
        "n": k % 3,
    }
    if k % 2:  # the odd rows hold the optional and defaulted features; the even ones leave them out
        row |= {"oi": k, "os": "o", "ot": np.array([k, 255], np.uint8), "di": 9, "dl": [k, k]}
    return row


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    cat = Catalog.init(tmp_path_factory.mktemp("zoo") / "c")
    ds = cat.register("zoo", ZOO)
    ds.append_rows([zoo_row(k) for k in range(7)])
    ds.append_rows([zoo_row(k) for k in range(7, 12)])  # a second shard: one fetch spans both
    return cat


@pytest.mark.parametrize("columns", [None, ["tu", "i"], "s"])
def test_getitems_rows_are_exactly_src_i_rows(zoo: Catalog, columns: Any) -> None:
    src = zoo.dataset("zoo").source(columns=columns)
    picks = [11, 0, 3, 3, 8, -1, 5]
    got = src.__getitems__(picks)
    assert [exact(r) for r in got] == [exact(src[i]) for i in picks]


def test_getitems_rows_own_their_arrays(zoo: Catalog) -> None:
    """No row's array is a view into the batch (keeping it alive) or into another row: writing
    one changes nothing else."""
    src = zoo.dataset("zoo").source()
    got = src.__getitems__([1, 2, 3])
    got[0]["m"][0, 0] = 99.0
    got[0]["t"][0, 0] = 7
    assert got[1]["m"][0, 0] == 1.0 and got[1]["t"][0, 0] == 2
    arrays = [v for r in got for v in r.values() if isinstance(v, np.ndarray)]
    assert len(arrays) > 10  # (every array kind of the zoo is there)
    assert [a.base for a in arrays if a.base is not None and a.base.nbytes != a.nbytes] == []  # none keeps more alive


def test_getitems_of_sequence_examples(tmp_path: Path) -> None:
    schema = {"features": {"id": {"dtype": "int64"}}, "sequence_features": {"tok": {"dtype": "int64"}}}
    ds = Catalog.init(tmp_path / "c").register("seq", schema)
    ds.append_rows([{"id": k, "tok": list(range(k))} for k in range(5)])
    src = ds.source()
    assert [exact(r) for r in src.__getitems__([4, 1])] == [exact(src[4]), exact(src[1])]


@pytest.mark.parametrize("joined_in_c", [True, False], ids=["pread_ranges", "python-reads"])
def test_a_batch_across_shards_is_their_records_and_a_file_cut_meanwhile_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, joined_in_c: bool
) -> None:
    """A random batch over several shards is read in one call of the C extension where it is
    built, or by a read a range in Python: the same rows either way; a shard cut after it was
    opened is named with the byte where its read came back short, either way."""
    from catalog.errors import CorruptShardError
    from catalog.tfrecord import native

    if not joined_in_c:
        monkeypatch.setattr(native, "pread_ranges", lambda *_: None)
    ds = Catalog.init(tmp_path / "cat").register("z", {"features": {"i": {"dtype": "int64"}, "s": {"dtype": "string"}}})
    for part in range(3):
        ds.append_rows([{"i": part * 100 + k, "s": "x" * k} for k in range(100)])
    src = ds.source()
    picks = [250, 3, 117, 3, 299, 0, 180, 181, 182]
    assert src[picks]["i"].tolist() == picks
    assert [src[p]["s"] for p in picks] == ["x" * (p % 100) for p in picks]
    last = ds.shards()[-1]
    os.truncate(last.path, last.bytes - 50)
    with pytest.raises(CorruptShardError, match=f"{last.path}: .*came back short"):
        src[[5, 299]]
