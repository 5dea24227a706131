"""catalog.inputs.files: the paths a caller gave, an input's bytes, InputOptions' checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from catalog.errors import AppendError
from catalog.inputs.files import STDIN, InputOptions, given_paths, open_input


def test_given_paths_takes_one_name_or_many() -> None:
    assert given_paths("a.csv") == [Path("a.csv")]  # one string is one path, not its characters
    assert given_paths(b"b.csv") == [Path("b.csv")]
    assert given_paths([Path("x"), "y", STDIN]) == [Path("x"), Path("y"), Path("-")]
    assert given_paths([]) == []


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        (3, "inputs are files, folders or patterns, got int"),
        (["a", 3], "an input is a path, got int 3"),
        ([""], "'': an empty name names no file"),
    ],
)
def test_given_paths_refuses_what_is_no_path(paths: object, message: str) -> None:
    with pytest.raises(AppendError) as e:
        given_paths(paths)
    assert str(e.value) == message


def test_open_input_reads_regular_files_only(tmp_path: Path) -> None:
    f = tmp_path / "in.jsonl"
    f.write_bytes(b'{"a": 1}\n')
    with open_input(f) as stream:
        assert stream.read() == b'{"a": 1}\n'
    with pytest.raises(AppendError, match=r": cannot open: No such file or directory$") as e:
        open_input(tmp_path / "absent")
    assert e.value.path == str(tmp_path / "absent")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(AppendError, match="not a regular file"):  # never blocks waiting for a writer
        open_input(fifo)


def test_input_options_are_checked() -> None:
    assert InputOptions(delimiter=";").delimiter == ";"
    with pytest.raises(AppendError, match=r"^delimiter is text, got int 9$"):
        InputOptions(delimiter=9)  # type: ignore[arg-type]
    with pytest.raises(AppendError, match=r"^feature is text, got bytes b'x'$"):
        InputOptions(feature=b"x")  # type: ignore[arg-type]
