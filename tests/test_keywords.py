"""catalog/keywords.py: a method taking a keyword set (``**kw: Unpack[...]``) refuses a
keyword the set does not name, as Python refuses one a signature lacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

from catalog import Catalog
from catalog.keywords import check_keywords


class Pair(TypedDict, total=False):
    a: int
    b: str


class Wider(Pair, total=False):
    c: float


def test_named_keywords_pass_and_others_are_refused() -> None:
    check_keywords("f", {"a": 1, "b": "x"}, Pair)
    check_keywords("f", {}, Pair)
    check_keywords("f", {"a": 1, "c": 2.0}, Wider)  # a base's keys count
    with pytest.raises(TypeError, match=r"^f\(\) got an unexpected keyword argument 'c'$"):
        check_keywords("f", {"c": 2.0}, Pair)


@pytest.fixture
def ds(tmp_path: Path) -> Any:
    cat = Catalog.init(tmp_path / "cat")
    d = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
    d.append_rows([{"x": 1}, {"x": 2}])
    return d


@pytest.mark.parametrize(
    ("call", "verb"),
    [
        (lambda d: list(d.read(cache_dri="/tmp/c")), "read"),
        (lambda d: list(d.records(cach_limit=1)), "records"),
        (lambda d: d.source(cache="/tmp/c"), "source"),
        (lambda d: list(d.batches(2, decode_image=True)), "batches"),
        (lambda d: d.torch(chanels=3), "torch"),
        (lambda d: d.delete("x = 1", wrokers=2), "delete"),
        (lambda d: d.update("x = 1", set={"x": 3}, mesage="m"), "update"),
        (lambda d: d.dedup("x", tokn="t"), "dedup"),
        (lambda d: d.filter("x = 1", into="e", author_="me"), "filter"),
        (lambda d: d.compact(worker=1), "compact"),
        (lambda d: d.migrate(add=["y:int64=0"], executors=None), "migrate"),
        (lambda d: d.adopt([], cpy=True), "adopt"),
    ],
)
def test_a_mistyped_keyword_of_a_method_is_a_type_error(ds: Any, call: Any, verb: str) -> None:
    before = ds.catalog.dataset("d").version
    with pytest.raises(TypeError, match=rf"^{verb}\(\) got an unexpected keyword argument"):
        call(ds)
    assert ds.catalog.dataset("d").version == before  # nothing done
    assert "e" not in {i.name for i in ds.catalog.list()}
