"""Option parsers of the CLI (catalog/cli/options.py): a bad size, duration, version or
--default is a usage error with the message the parser gives, before any verb runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
import typer

from catalog.cli.options import LibraryChoice, parse_bytes, parse_defaults, parse_duration, parse_version


@pytest.mark.parametrize(
    ("text", "size"), [("1", 1), (" 64 KiB ", 64 << 10), ("2m", 2 << 20), ("3GB", 3 << 30), ("5b", 5)]
)
def test_parse_bytes_takes_binary_suffixes(text: str, size: int) -> None:
    assert parse_bytes(text) == size


@pytest.mark.parametrize("text", ["0", "0k", "-1", "1.5m", "12 TB", "", "k"])
def test_parse_bytes_refuses_what_is_no_size(text: str) -> None:
    with pytest.raises(typer.BadParameter) as e:
        parse_bytes(text)
    assert str(e.value) == f"{text!r} is not a size: use an integer with an optional KiB, MiB or GiB suffix"


def test_parse_duration_takes_seconds_or_units_and_refuses_the_rest() -> None:
    assert parse_duration("90") == timedelta(seconds=90)
    assert parse_duration("1.5h") == timedelta(minutes=90)
    assert parse_duration(" 7d ") == timedelta(days=7)
    assert parse_duration(timedelta(hours=2)) == timedelta(hours=2)  # typer's default passes through
    with pytest.raises(typer.BadParameter) as e:
        parse_duration("2 weeks")
    assert str(e.value) == "'2 weeks' is not a duration: use seconds or N[smhd], e.g. 90, 15m, 2h, 7d"
    with pytest.raises(typer.BadParameter) as e:
        parse_duration("9" * 400)
    assert str(e.value) == f"{'9' * 400!r} is too long a duration: at most {timedelta.max.days}d"


def test_parse_version_takes_numbers_from_1_and_tags() -> None:
    assert parse_version(" 007 ") == "7"
    assert parse_version("+3") == "3"
    assert parse_version("run-42") == "run-42"
    for bad in ("0", "-2"):
        with pytest.raises(typer.BadParameter) as e:
            parse_version(bad)
        assert str(e.value) == f"{bad!r} is not a version: versions are numbered from 1"


def test_parse_defaults_splits_at_the_first_equals_sign() -> None:
    assert parse_defaults(None) == {}
    assert parse_defaults(["price=-1", "label=a=b", "empty="]) == {"price": "-1", "label": "a=b", "empty": ""}
    for bad in ("price", "=1"):
        with pytest.raises(typer.BadParameter) as e:
            parse_defaults([bad])
        assert e.value.message == f"{bad!r}: FEATURE=VALUE, e.g. price=-1"


def test_a_library_choice_reads_its_names_each_time() -> None:
    names = ["none", "gzip"]
    choice = LibraryChoice(lambda: names)
    assert tuple(choice.choices) == ("none", "gzip")
    names.append("zlib")
    assert tuple(choice.choices) == ("none", "gzip", "zlib")
    assert choice.convert("GZIP", None, None) == "gzip"  # case-insensitive, as a Literal option
