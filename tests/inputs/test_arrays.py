"""catalog.inputs.arrays: .npy and .npz rows along the first axis, and files whose headers lie or hold pickles."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from catalog.errors import AppendError
from catalog.inputs.arrays import CHUNK, NpyRows, NpzRows, infer_npy
from catalog.inputs.files import InputOptions
from catalog.schema.inference import RowInference
from catalog.schema.model import Schema

SCHEMA = Schema.from_json({"features": {"x": {"dtype": "float32", "shape": [2]}, "y": {"dtype": "int64"}}})


def test_npy_rows_fill_the_named_feature_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    data = np.arange((CHUNK + 3) * 2, dtype=np.float32).reshape(-1, 2)
    np.save(path, data)
    one = Schema.from_json({"features": {"x": {"dtype": "float32", "shape": [2]}}})
    rows = list(NpyRows(path, one, None))
    assert len(rows) == CHUNK + 3 and rows[-1][0] == CHUNK + 2
    assert rows[CHUNK][1]["x"].tolist() == data[CHUNK].tolist()
    with pytest.raises(
        AppendError, match=r"x.npy: a .npy file fills one feature: name it with --feature \(one of x, y\)$"
    ):
        NpyRows(path, SCHEMA, None)
    with pytest.raises(AppendError, match=r"x.npy: --feature 'z' is not a feature of the schema \(x, y\)$"):
        NpyRows(path, SCHEMA, "z")
    with pytest.raises(AppendError, match=r"x.npy: no array for feature 'y', and the feature has no default$"):
        NpyRows(path, SCHEMA, "x")


def test_npz_rows_and_their_checks(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    np.savez(path, x=np.zeros((2, 2), np.float32), y=np.array([5, 6]))
    assert [(i, row["y"]) for i, row in NpzRows(path, SCHEMA)] == [(0, 5), (1, 6)]
    np.savez(path, x=np.zeros((2, 2), np.float32), y=np.array([5, 6, 7]))
    with pytest.raises(AppendError, match=r"d.npz: arrays of different lengths: x 2, y 3$"):
        list(NpzRows(path, SCHEMA))
    np.savez(path, x=np.zeros((1, 2), np.float32), y=np.array(5))
    with pytest.raises(AppendError, match=r"d.npz: array 'y' is 0-dimensional: rows are along the first axis$"):
        list(NpzRows(path, SCHEMA))
    np.savez(path, x=np.zeros((1, 2)), y=np.zeros(1), z=np.zeros(1))
    with pytest.raises(AppendError, match=r"d.npz: array 'z' is not a feature of the schema$"):
        list(NpzRows(path, SCHEMA))
    np.save(tmp_path / "one.npy", np.zeros(2))
    with pytest.raises(AppendError, match=r"one.npy: holds one array, not an .npz archive of one array per feature$"):
        list(NpzRows(tmp_path / "one.npy", SCHEMA))


def test_a_header_that_claims_more_than_the_file_holds(tmp_path: Path) -> None:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10**12, 10**6)})
    path = tmp_path / "huge.npy"
    path.write_bytes(buf.getvalue() + bytes(16))
    with pytest.raises(AppendError) as e:
        list(NpyRows(path, None, "x"))
    assert str(e.value) == (
        f"{path}: its header claims shape (1000000000000, 1000000) of float64: 8,000,000,000,000,000,000 bytes, "
        "the file holds 16 after its header"
    )


def test_pickled_arrays_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "objects.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(AppendError, match=r"objects.npy: not a NumPy array file numpy can read without pickle: "):
        list(NpyRows(path, None, "x"))


def test_inference_names_the_feature_after_the_file(tmp_path: Path) -> None:
    np.save(tmp_path / "vec.npy", np.zeros((3, 4), np.float32))
    tally = RowInference()
    infer_npy(tmp_path / "vec.npy", InputOptions(), tally)
    [feat] = tally.features()
    assert (feat.name, feat.dtype, feat.shape) == ("vec", "float32", (4,))
