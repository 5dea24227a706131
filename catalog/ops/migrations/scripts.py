"""Migration scripts: ``<dir>/<dataset>/NNNN_slug.py`` files declaring ``operations = [...]``
(see catalog.migrate): finding them in order, loading one (the very bytes whose sha256 was
checked), writing the template of the next, and the CLI's quick forms as operation data."""

from __future__ import annotations

import hashlib
import re
import sys
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.errors import CatalogError, MigrationError
from catalog.ops.migrations.operations import Operation, check_operations
from catalog.tfrecord.sources import open_regular

# Names are checked with fullmatch: `$` also matches before a final newline.
FILE_RE = re.compile(r"(\d{4,})_([A-Za-z0-9_]+)\.py")
DEFAULT_DIR = "migrations"

TEMPLATE = '''"""{dataset} migration {number:04d}: {slug}.

Applied in order by `catalog migrate {dataset}`; once applied, this file must not change
(a new migration corrects an old one). Operations run in order on every record:

    AddField(name, spec, default=...)      # or fn=lambda row: ... (computed from the row)
    DropField(name)
    RenameField(old, new)
    CastField(name, spec, lossy=False)     # int64 <-> float32, string <-> bytes, shapes
    Transform(fn, schema={{...}})            # any row -> row function, with the target schema

`spec` is a feature's JSON form, as in a schema file: {{"dtype": "int64"}}.
"""

from catalog.migrate import AddField, CastField, DropField, RenameField, Transform  # noqa: F401

operations = [
    # AddField("height", {{"dtype": "int64"}}, default=256),
]
'''


# --------------------------------------------------------------------------- scripts


@dataclass(frozen=True)
class MigrationFile:
    id: str  # the file's stem, e.g. "0001_add_height"
    number: int
    path: Path
    checksum: str  # "sha256:" + hex of the file's bytes

    @classmethod
    def read(cls, path: Path) -> MigrationFile:
        m = FILE_RE.fullmatch(path.name)
        if m is None:
            raise MigrationError(f"{path}: not a migration file name (NNNN_slug.py, e.g. 0001_add_height.py)")
        try:
            with open_regular(path) as f:  # a FIFO would block, a directory is no script
                data = f.read()
        except CatalogError as e:
            raise MigrationError(str(e)) from e
        return cls(path.stem, int(m.group(1)), path, sha256_of(data))


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def discover(directory: Path, dataset: str) -> list[MigrationFile]:
    """The dataset's migration files, in order (none when its folder does not exist)."""
    folder = directory / dataset
    if not folder.is_dir():
        return []
    files = [MigrationFile.read(p) for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]
    files.sort(key=lambda f: (f.number, f.id))
    seen: dict[int, MigrationFile] = {}
    for f in files:
        if f.number in seen:
            raise MigrationError(f"{f.path}: number {f.number:04d} is taken by {seen[f.number].path.name} too")
        seen[f.number] = f
    return files


def file_numbers(directory: Path, dataset: str) -> list[int]:
    """The numbers of the dataset's migration files, read from their names alone (a quick
    migration numbers itself after them without loading, or judging, any file)."""
    folder = directory / dataset
    if not folder.is_dir():
        return []
    return [int(m.group(1)) for p in folder.glob("*.py") if (m := FILE_RE.fullmatch(p.name))]


_LOADED: dict[tuple[str, str], list[Operation]] = {}


def load_operations(path: str | Path, checksum: str) -> list[Operation]:
    """Run a migration script (the very bytes whose sha256 is ``checksum``) and return its operations.

    Workers call this too: they import the script themselves, so functions in it (lambdas
    included) never cross a process boundary.
    """
    key = (str(path), checksum)
    if key in _LOADED:
        return _LOADED[key]
    try:
        with open_regular(path, "cannot read migration") as f:
            source = f.read()
    except CatalogError as e:
        raise MigrationError(str(e)) from e
    except OSError as e:
        raise MigrationError(f"{path}: cannot read migration: {e.strerror or e}") from e
    if sha256_of(source) != checksum:
        raise MigrationError(f"{path}: the migration changed while it was being applied; run `catalog migrate` again")
    name = f"_catalog_migration_{checksum[7:23]}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module  # dataclasses and pickling look functions' modules up here
    try:
        exec(compile(source, str(path), "exec"), module.__dict__)
    except CatalogError as e:
        raise MigrationError(f"{path}: {e}") from e
    except Exception as e:  # the script's own bug: one line naming the file
        raise MigrationError(f"{path}: the migration script failed: {type(e).__name__}: {e}") from e
    ops = check_operations(getattr(module, "operations", None), str(path))
    _LOADED[key] = ops
    return ops


SLUG_RE = re.compile(r"[A-Za-z0-9_]+")


def quick_operations(add: Sequence[str], drop: Sequence[str], rename: Sequence[str]) -> list[dict[str, Any]]:
    """``--add FEATURE:DTYPE[=DEFAULT]`` (or ``FEATURE:sequence:DTYPE``, a feature list with no
    steps in existing records), ``--drop FEATURE``, ``--rename OLD:NEW`` as operation data."""
    ops: list[dict[str, Any]] = []
    for text in add:
        seq = re.fullmatch(r"([^:=]+):sequence:([A-Za-z0-9]+)", text)
        if seq is not None:
            ops.append({"op": "add", "name": seq.group(1), "spec": {"dtype": seq.group(2), "sequence": True}})
            continue
        m = re.fullmatch(r"([^:=]+):([A-Za-z0-9]+)(?:=(.*))?", text, re.DOTALL)  # the default as given, newlines too
        if m is None:
            raise MigrationError(f"--add {text!r}: use FEATURE:DTYPE[=DEFAULT], e.g. height:int64=256")
        name, dtype, raw = m.groups()
        if raw is None:
            raise MigrationError(
                f"--add {text!r}: a feature added without a default is refused (FEATURE:DTYPE=DEFAULT)"
            )
        ops.append({"op": "add", "name": name, "spec": {"dtype": dtype}, "default": _parse_default(text, dtype, raw)})
    ops += [{"op": "drop", "name": name} for name in drop]
    for text in rename:
        old, sep, new = text.partition(":")
        if not sep or not old or not new:
            raise MigrationError(f"--rename {text!r}: use OLD:NEW")
        ops.append({"op": "rename", "old": old, "new": new})
    return ops


def _parse_default(text: str, dtype: str, raw: str) -> Any:
    try:
        if dtype == "int64":
            return int(raw)
        if dtype == "float32":
            return float(raw)
    except ValueError:
        raise MigrationError(f"--add {text!r}: {raw!r} is not a valid {dtype} value") from None
    if dtype in ("string", "bytes"):
        return raw
    raise MigrationError(f"--add {text!r}: dtype {dtype!r} is not int64, float32, string or bytes (use a file)")
