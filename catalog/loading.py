"""``catalog.load``: from a dataset's name to a training loop in one line, as ``tfds.load``
and Hugging Face's ``load_dataset`` give one.

``load("flowers", split="train[:90%]")`` finds the catalog (``root``, else $CATALOG_ROOT,
else the catalog the current folder is in, as the CLI searches up, else the user's own,
:func:`user_catalog_dir`), and returns the dataset pinned to one version (a tag or number
resolved now: later commits do not move it) and one split slice, checked now. Its readers
(``torch``, ``tf_dataset``, ``batches``, ``source``, ``read``, ``records``) take every
argument the dataset's own take but the version and the split.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from catalog import directory
from catalog.api import Catalog, Dataset
from catalog.commit.plans import plan
from catalog.commit.values import DatasetInfo
from catalog.errors import CatalogNotFoundError, DatasetNotFoundError, UsageError
from catalog.schema import Schema

USER_CATALOG = "tfrecord-catalog"  # the user's own catalog: a folder of this name under XDG's data home


def user_catalog_dir() -> Path:
    """The user's default catalog directory: ``$XDG_DATA_HOME/tfrecord-catalog``, and where
    XDG_DATA_HOME is not set, ``~/.local/share/tfrecord-catalog`` (the XDG default, used on
    every system). ``catalog init`` it to have one."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / USER_CATALOG


def find_catalog(root: str | os.PathLike[str] | None = None) -> Path:
    """The catalog :func:`load` opens (see the module's docstring for the order)."""
    if root is not None or os.environ.get("CATALOG_ROOT"):
        return directory.find_root(root)  # a catalog named but missing is an error, not a fallback
    try:
        return directory.find_root()
    except CatalogNotFoundError:
        user = user_catalog_dir()
        if (user / directory.CATALOG_FILE).is_file():
            return user.resolve()
        raise CatalogNotFoundError(
            f"no catalog found: give root=, set CATALOG_ROOT, work in a catalog's folder, "
            f"or make your own at {user} (`catalog init {user}`)"
        ) from None


def load(
    name: str,
    split: str | None = None,
    version: int | str | None = None,
    root: str | os.PathLike[str] | None = None,
    *,
    as_supervised: bool = False,
    label_key: str | None = None,
) -> Loaded:
    """Dataset ``name`` pinned to ``version`` (a number or a tag; default: the current one)
    and ``split`` (a TFDS-style spec: ``"train"``, ``"train[:90%]"``, ``"train+test"``;
    default: every record). With ``label_key`` (or ``as_supervised``: the dataset's one
    feature with class names, else its feature named ``label``) ``tf_dataset`` yields
    ``(features, label)`` pairs, as TFDS's ``as_supervised`` does. A missing name is one
    line listing the catalog's datasets."""
    cat = Catalog.open(find_catalog(root))
    try:
        ds = cat.dataset(name)
    except DatasetNotFoundError:
        known = [i.name for i in cat.list()]
        cat.close()
        raise DatasetNotFoundError(_missing(name, known, cat.root), name) from None
    read = plan(ds, version, split)  # the version resolved, the split's spec checked: now, not at a read
    schema = read.schema()
    key = label_key if label_key is not None else (_label_of(schema, name) if as_supervised else None)
    if key is not None and key not in schema.features:
        raise UsageError(f"{name}: label_key {key!r} is no feature (it has {', '.join(schema.features)})")
    return Loaded(ds, read.version, split, key, schema, read.records)


def _missing(name: str, known: list[str], root: Path) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listed = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "") if known else "no dataset"
    return f"no dataset named {name!r} in {root}{hint}: it has {listed}"


def _label_of(schema: Schema, name: str) -> str:
    """The label of ``as_supervised``: the one feature with class names, else ``label``."""
    classes = [f.name for f in schema.features.values() if f.names is not None]
    if len(classes) == 1:
        return classes[0]
    if not classes and "label" in schema.features:
        return "label"
    which = f"{len(classes)} features have class names ({', '.join(classes)})" if classes else "none is 'label'"
    raise UsageError(f"{name}: as_supervised needs a label, and {which}: give label_key=")


class Loaded:
    """A dataset pinned to one version and one split slice (:func:`load`). Its readers take
    the arguments of the dataset's own but ``version`` and ``split``."""

    def __init__(
        self, ds: Dataset, version: int, split: str | None, label_key: str | None, schema: Schema, records: int
    ) -> None:
        self.dataset, self.version, self.split, self.label_key = ds, version, split, label_key
        self.schema, self.num_records = schema, records

    @property
    def name(self) -> str:
        return self.dataset.name

    def __len__(self) -> int:
        return self.num_records

    def __repr__(self) -> str:
        split = "" if self.split is None else f", split={self.split!r}"
        return f"<catalog.load {self.name!r} version {self.version}{split}: {self.num_records:,} records>"

    def info(self) -> DatasetInfo:
        return self.dataset.info(self.version)

    def _pinned(self, kw: dict[str, Any]) -> dict[str, Any]:
        for fixed in ("version", "split"):
            if fixed in kw:
                raise UsageError(
                    f"{self.name} was loaded at version {self.version}, split {self.split!r}: "
                    f"load it again for another {fixed}"
                )
        return {**kw, "version": self.version, "split": self.split}

    def torch(self, batch_size: int | None = None, **kw: Any) -> Any:
        """``Dataset.torch`` of this version and split."""
        return self.dataset.torch(batch_size, **self._pinned(kw))

    def tf_dataset(self, batch_size: int, **kw: Any) -> Any:
        """``Dataset.tf_dataset`` of this version and split; ``(features, label)`` pairs when
        loaded with ``label_key`` or ``as_supervised`` (``label_key=None`` here: dicts)."""
        kw.setdefault("label_key", self.label_key)
        return self.dataset.tf_dataset(batch_size, **self._pinned(kw))

    def batches(self, batch_size: int, **kw: Any) -> Any:
        """``Dataset.batches`` of this version and split."""
        return self.dataset.batches(batch_size, **self._pinned(kw))

    def source(self, **kw: Any) -> Any:
        """``Dataset.source`` of this version and split."""
        return self.dataset.source(**self._pinned(kw))

    def read(self, **kw: Any) -> Any:
        """``Dataset.read`` of this version and split: its rows."""
        return self.dataset.read(**self._pinned(kw))

    def records(self, **kw: Any) -> Any:
        """``Dataset.records`` of this version and split: the serialized records."""
        return self.dataset.records(**self._pinned(kw))

    def close(self) -> None:
        """Close the catalog this dataset was loaded from."""
        self.dataset.catalog.close()
