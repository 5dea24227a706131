"""catalog.jsonform: a report's JSON from its fields, what differs declared on the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import pytest

from catalog.commit.values import Problem, ShardInfo, Tag, TagKeep
from catalog.jsonform import HIDDEN, SECONDS, JsonReport, shown
from catalog.ops.describe import ComputeReport
from catalog.ops.export import ExportReport
from catalog.ops.indexing import DaliReport, IndexReport
from catalog.ops.inspection import FileReport
from catalog.ops.migrations.runner import MigrateReport, MigrationResult, MigrationStatus
from catalog.stats.drift import Violation


@dataclass
class _Inner(JsonReport):
    n: int


@dataclass
class _Report(JsonReport):
    name: str
    secret: str = field(default="x", metadata=HIDDEN)
    took: float = field(default=0.0, metadata=SECONDS)
    count: int = field(default=0, metadata=shown("renamed"))
    where: str | None = field(default=None, metadata=shown("known", convert=lambda v: v is not None))
    inner: _Inner = field(default_factory=lambda: _Inner(1))
    inners: list[_Inner] = field(default_factory=lambda: [_Inner(2), _Inner(3)])


def test_fields_in_order_with_what_each_declares() -> None:
    got = _Report("a", took=1.23456, count=4, where="/p").to_json()
    assert json.dumps(got) == json.dumps(
        {"name": "a", "took": 1.235, "renamed": 4, "known": True, "inner": {"n": 1}, "inners": [{"n": 2}, {"n": 3}]}
    )


@pytest.mark.parametrize(
    "report",
    [
        ShardInfo,
        Tag,
        Problem,
        TagKeep,
        IndexReport,
        DaliReport,
        ExportReport,
        FileReport,
        MigrationResult,
        MigrateReport,
        MigrationStatus,
        ComputeReport,
        Violation,
    ],
)
def test_reports_take_their_json_from_their_fields(report: type) -> None:
    # A hand-written to_json restates the fields (issue 31): these say what differs on the field.
    assert issubclass(report, JsonReport)
    assert "to_json" not in vars(report)


def test_a_shard_shows_whether_it_is_adopted_not_where() -> None:
    shard = ShardInfo("/d/a", "a", 1, 2, "c", "none", 1, 1, location="/else/a")
    got = shard.to_json()
    assert "relpath" not in got and "location" not in got
    assert list(got)[-1] == "external" and got["external"] is True


def test_a_tag_shows_its_time_as_iso() -> None:
    tag = Tag("d", "t", 1, datetime(2024, 1, 2, 3, 4, 5, 678901), "me")
    assert tag.to_json()["created"] == "2024-01-02T03:04:05.678Z"
