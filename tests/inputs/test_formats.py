"""catalog.inputs.formats: an input's format from its name and first bytes, and what folders and globs expand to."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from catalog.errors import AppendError
from catalog.inputs.formats import FORMATS, ROW_FORMATS, check_format, detect, expand, format_of
from catalog.tfrecord.framing import frame_header


def test_check_format_names_the_choices() -> None:
    assert check_format("csv") == "csv"
    assert FORMATS[0] == "auto" and "tfrecord" in FORMATS and "tfrecord" not in ROW_FORMATS and "csv" in ROW_FORMATS
    with pytest.raises(AppendError) as e:
        check_format("xml")
    assert str(e.value) == f"unknown input format 'xml': use one of {', '.join(FORMATS)}"


@pytest.mark.parametrize(
    ("name", "head", "fmt"),
    [
        ("a.CSV", b"", "csv"),  # the suffix decides, whatever the case
        ("a.tsv", b"", "csv"),
        ("a.ndjson", b"", "jsonl"),
        ("a.pq", b"", "parquet"),
        ("data", b"PAR1....", "parquet"),  # then the magic bytes
        ("data", b"\x93NUMPY\x01\x00", "npy"),
        ("data", b"PK\x03\x04", "npz"),
        ("data", b'{"id": 1}\n', "jsonl"),  # then the content tests, in table order
        ("data", b"id,name\n1,x\n", "csv"),
        ("data", b"\x1f\x8b\x08\x00", "tfrecord"),  # nothing claims it: the fallback
    ],
)
def test_format_of_reads_name_then_magic_then_content(name: str, head: bytes, fmt: str) -> None:
    assert format_of(Path(name), head) == fmt


def test_a_framed_record_is_tfrecord_by_content(tmp_path: Path) -> None:
    path = tmp_path / "records"
    path.write_bytes(frame_header(10) + b"x" * 10)
    assert detect(path, "auto") == "tfrecord"
    assert detect(path, "csv") == "csv"  # a named format is taken as it is


def test_expand_walks_folders_and_globs(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "2.jsonl").write_text("{}\n")
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / ".hidden").write_text("{}\n")
    np.save(tmp_path / "c.npy", np.zeros(2))
    assert expand([tmp_path], "auto") == [(tmp_path / "a.jsonl", "auto"), (tmp_path / "b" / "2.jsonl", "auto"),
                                          (tmp_path / "c.npy", "auto")]  # fmt: skip
    assert expand([tmp_path / "*.jsonl", Path("-")], "jsonl") == [(tmp_path / "a.jsonl", "jsonl"), (Path("-"), "jsonl")]
    with pytest.raises(AppendError, match=r": no file matches this pattern$"):
        expand([tmp_path / "*.csv"], "auto")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AppendError, match=r"empty: an empty folder: no input files in it$"):
        expand([tmp_path / "empty"], "auto")


def test_an_image_folder_is_one_input(tmp_path: Path) -> None:
    (tmp_path / "cat").mkdir()
    (tmp_path / "cat" / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    assert expand([tmp_path], "auto") == [(tmp_path, "images")]
    assert detect(tmp_path, "auto") == "images"
    assert expand([tmp_path], "jsonl") == [(tmp_path / "cat" / "1.png", "jsonl")]  # a format that reads no folder
