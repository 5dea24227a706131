"""Public names loaded on first use (catalog/lazy.py): a package's ``__getattr__`` imports a
name's home once, then the name is a plain attribute; an unknown name is AttributeError."""

from __future__ import annotations

import importlib
import json
import sys
import types
from collections.abc import Iterator

import pytest

from catalog.lazy import exports


@pytest.fixture
def package() -> Iterator[types.ModuleType]:
    module = types.ModuleType("lazy_probe_pkg")
    module.own = 1  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_a_name_is_imported_from_its_home_once_then_kept(
    package: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    getattr_, dir_ = exports(package.__name__, {"dumps": "json", "counted": "catalog.words"})
    calls: list[str] = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name: calls.append(name) or real(name))
    assert getattr_("dumps") is json.dumps
    assert vars(package)["dumps"] is json.dumps  # kept: the next lookup is a plain attribute
    assert calls == ["json"]
    assert dir_() == ["__doc__", "__loader__", "__name__", "__package__", "__spec__", "counted", "dumps", "own"]


def test_an_unknown_name_is_attribute_error_so_submodules_still_import(package: types.ModuleType) -> None:
    getattr_, _ = exports(package.__name__, {})
    with pytest.raises(AttributeError) as e:
        getattr_("missing")
    assert str(e.value) == "module 'lazy_probe_pkg' has no attribute 'missing'"


def test_the_packages_lazy_names_resolve_to_their_homes() -> None:
    import catalog
    from catalog.api import Catalog

    assert catalog.Catalog is Catalog
    assert "Catalog" in dir(catalog)
    with pytest.raises(AttributeError):
        catalog.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
