"""Start-up: what `import catalog` and each kind of command load, Ctrl-C while they load,
and the catalog a command opens being closed after its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from probes import interruptible
from typer.testing import CliRunner

import catalog
from catalog import Catalog
from catalog.cli import app
from catalog.commit.handles import CatalogHandle
from catalog.demo import write_demo

runner = CliRunner()
# The console script pip writes for `catalog = "catalog.cli:main"`, and a report of the modules it loaded.
CONSOLE_SCRIPT = "import sys\nfrom catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"
LOADED = "import atexit, sys\natexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(sys.modules) + '\\n'))\n"


def loaded(*args: str, code: str = CONSOLE_SCRIPT) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run([sys.executable, "-c", LOADED + code, *args], capture_output=True, text=True, timeout=120)
    return proc, set(proc.stderr.rpartition("LOADED ")[2].split())


def heavy(modules: set[str]) -> set[str]:
    """SQLAlchemy, NumPy and protobuf: what a command that needs no manifest and decodes nothing must not load."""
    return {m for m in modules if m.split(".")[0] in ("sqlalchemy", "numpy") or m.startswith("google.protobuf")}


def test_import_catalog_loads_nothing_heavy() -> None:
    proc, modules = loaded(code="import catalog\n")
    assert proc.returncode == 0, proc.stderr
    assert not heavy(modules)
    assert {m for m in modules if m.startswith("catalog.")} <= {"catalog.lazy"}  # stdlib only


def test_public_names_resolve_lazily() -> None:
    for name in catalog.__all__:
        assert getattr(catalog, name) is not None, name
    assert set(catalog.__all__) <= set(dir(catalog))
    namespace: dict[str, Any] = {}
    exec("from catalog import *", namespace)
    assert namespace["Catalog"] is Catalog
    with pytest.raises(AttributeError, match="no_such_name"):
        catalog.no_such_name  # noqa: B018


def test_help_loads_no_library() -> None:
    proc, modules = loaded("--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage: catalog" in proc.stdout
    assert not heavy(modules)
    library = {m for m in modules if m.startswith("catalog.") and not m.startswith("catalog.cli")}
    assert library <= {"catalog.errors", "catalog.lazy", "catalog.words"}  # the base layer: stdlib only


def test_list_loads_only_sql_core(tmp_path: Path) -> None:
    """`list` reads the manifest alone: SQLAlchemy's Core, never its ORM, never pydantic (typer
    0.29 coerces every argument through pydantic), nothing that decodes records."""
    Catalog.init(tmp_path / "cat").register("events", {"features": {"x": {"dtype": "int64"}}})
    proc, modules = loaded("-C", str(tmp_path / "cat"), "list")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[1].split()[0] == "events"
    assert "sqlalchemy.engine" in modules  # the check below looks at a run that really read the manifest
    assert not {m for m in modules if m.startswith(("sqlalchemy.orm", "pydantic", "numpy", "google.protobuf"))}
    decoding = ("catalog.schema", "catalog.storage", "catalog.tfrecord.framing", "catalog.tfrecord.example")
    assert not {m for m in modules if m.startswith(decoding)}


def test_verify_loads_no_writer_reader_or_other_operation(tmp_path: Path) -> None:
    """verify's start-up counts in its GB/s (a new process per command): it opens the commit
    layer's handle and runs maintenance's check, never catalog.api and all it binds, nor the
    commit protocol (gc's, to drop abandoned datasets)."""
    root = tmp_path / "cat"
    Catalog.init(root).register("events", {"features": {"x": {"dtype": "int64"}}}).append_rows([{"x": 1}])
    proc, modules = loaded("-C", str(root), "verify")
    assert proc.returncode == 0, proc.stderr
    assert "ok: 1 shard, " in proc.stderr
    assert "catalog.ops.maintenance" in modules  # the run really checked
    others = ("catalog.api", "catalog.ops.writer", "catalog.ops.ingest", "catalog.ops.adopt", "catalog.ops.derive")
    others += ("catalog.commit.protocol", "catalog.commit.changes")
    assert not {m for m in modules if m.startswith((*others, "catalog.readers", "catalog.inputs"))}
    # No statistics: the pool's workers turn their helper off without loading it.
    assert not under(modules, "catalog.stats", "rich")
    # A shard's check reads its bytes and its index where they are: no shard cache.
    assert not under(modules, "catalog.storage.cache")


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("3", "3")])
def test_verify_loads_numpy_with_one_blas_thread(tmp_path: Path, given: str | None, seen: str) -> None:
    """NumPy's OpenBLAS starts a thread per core as it loads, which verify's start-up paid for
    and never used: verify loads it with one, unless the user said otherwise."""
    root = tmp_path / "cat"
    Catalog.init(root).register("events", {"features": {"x": {"dtype": "int64"}}}).append_rows([{"x": 1}])
    report = (
        "import atexit, os, sys\n"
        "blas = lambda: os.environ.get('OPENBLAS_NUM_THREADS')\n"
        "atexit.register(lambda: print('BLAS', blas(), 'numpy' in sys.modules, file=sys.stderr))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env.update({"OPENBLAS_NUM_THREADS": given} if given else {})
    proc = subprocess.run(
        [sys.executable, "-c", report + CONSOLE_SCRIPT, "-C", str(root), "verify"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.rpartition("BLAS ")[2].split() == [seen, "True"]


def test_verify_closes_its_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[Path] = []
    close = CatalogHandle.close

    def counting_close(self: CatalogHandle) -> None:
        closed.append(self.root)
        close(self)

    monkeypatch.setattr(CatalogHandle, "close", counting_close)
    Catalog.init(tmp_path / "cat").close()
    closed.clear()
    for args in (["verify"], ["verify", "nope"]):  # an error closes it too
        runner.invoke(app, ["-C", str(tmp_path / "cat"), *args])
    assert closed == [(tmp_path / "cat").resolve()] * 2


# Issue 34: a command imports what it uses. None of the verbs below reads records, so none loads
# the operations, the readers, the public API over them (catalog.api), the inputs or statistics,
# the libraries of training and columnar inputs; only the CLI's module of its verb.
NEVER = (
    *("catalog.api", "catalog.ops", "catalog.readers", "catalog.inputs", "catalog.stats"),
    *("torch", "tensorflow", "pyarrow", "pandas", "PIL", "pydantic"),
)
VERB_MODULES = ("admin", "changes", "datasets", "files", "indexes", "rewrites", "rows", "statistics")
# A parsed schema (NumPy, protobuf, the schema codec's modules) and what reads records (their
# framing): none of the read verbs loads them.
DECODING = (
    *("numpy", "google.protobuf", "catalog.schema.model", "catalog.schema.features", "catalog.schema.codec"),
    *("catalog.tfrecord.framing", "catalog.tfrecord.example", "catalog.tfrecord.proto"),
)


def under(modules: set[str], *prefixes: str) -> set[str]:
    """The modules that are one of ``prefixes`` or inside one."""
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}


def test_help_lists_the_verbs_from_their_table_alone() -> None:
    """`catalog --help` imports no verb's module and nothing of the library but the base layer
    (the verbs are listed from catalog/cli/commands.py's table); rich is typer's, for the help."""
    proc, modules = loaded("--help")
    assert proc.returncode == 0, proc.stderr
    assert "show           Show a dataset: version, schema, totals and shards." in proc.stdout
    assert not under(modules, *(f"catalog.cli.{m}" for m in VERB_MODULES), "catalog.cli.generated")
    assert not under(modules, *NEVER, *DECODING, "sqlalchemy", "catalog.manifest", "catalog.commit")
    # nor the verbs' options and output (and json): the help is typer's, from the table
    assert under(modules, "catalog.cli") == {"catalog.cli", "catalog.cli.base", "catalog.cli.commands"}


@pytest.mark.parametrize("args", [["list"], ["tags", "events"], ["history", "events"], ["show", "events"]])
def test_read_verbs_import_only_what_they_use(tmp_path: Path, args: list[str]) -> None:
    """list, tags, history and show read the manifest through the commit layer alone. None
    parses a schema or reads a shard file: show prints the schema's stored JSON, which its
    fingerprint vouches for (commit.handles.schema_doc), and names the shards' places."""
    Catalog.init(tmp_path / "cat").register("events", {"features": {"x": {"dtype": "int64"}}}).tag("first")
    proc, modules = loaded("-C", str(tmp_path / "cat"), *args)
    assert proc.returncode == 0, proc.stderr
    assert "events" in proc.stdout or "first" in proc.stdout
    assert "sqlalchemy.engine" in modules  # the checks below look at a run that really read the manifest
    assert under(modules, *(f"catalog.cli.{m}" for m in VERB_MODULES)) == {"catalog.cli.datasets"}
    assert not under(modules, *NEVER, *DECODING, "rich", "sqlalchemy.orm")
    if args[0] == "show":
        assert "x: int64" in proc.stdout and "catalog.storage.local" in modules  # the schema and the shards shown


def test_inspect_loads_no_manifest(tmp_path: Path) -> None:
    write_demo(tmp_path, n=5)
    proc, modules = loaded("inspect", str(tmp_path / "demo.tfrecord"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["records"] == 5
    assert not {m for m in modules if m.startswith("sqlalchemy")}
    assert "catalog.manifest" not in modules
    proc, modules = loaded("inspect", str(tmp_path / "schema.json"))  # its error line too
    message = proc.stderr.partition("LOADED")[0]
    assert proc.returncode == 1 and message.startswith("error: ") and "holds one JSON document" in message, message
    assert not {m for m in modules if m.startswith("sqlalchemy")}


# typer, then the verbs, are imported by the entry point (before any verb: "nothing was done");
# SQLAlchemy by the verb as it runs (`list` writes nothing, so it just says it was interrupted).
@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("typer", "interrupted: nothing was done"),
        ("catalog.cli.commands", "interrupted: nothing was done"),
        ("catalog.cli.datasets", "interrupted: nothing was done"),
        ("sqlalchemy", "interrupted"),
    ],
)
def test_ctrl_c_while_the_command_loads(module: str, said: str) -> None:
    """A real SIGINT, raised while Python imports ``module`` (a finder ahead of the others
    sees the import first): one line, exit 130, no traceback."""
    hook = (
        "import signal, sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r}:\n"
        "            signal.raise_signal(signal.SIGINT)\n"
        "sys.meta_path.insert(0, Interrupt())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", interruptible(hook + CONSOLE_SCRIPT), "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (130, "", said + "\n")


def test_commands_close_their_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[Path] = []
    close = CatalogHandle.close  # (Catalog's; the read verbs open the handle alone)

    def counting_close(self: CatalogHandle) -> None:
        closed.append(self.root)
        close(self)

    monkeypatch.setattr(CatalogHandle, "close", counting_close)
    root = tmp_path / "cat"
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"features": {"id": {"dtype": "int64"}}}))
    commands = [
        ["init", str(root)],
        ["-C", str(root), "register", "d", "--schema", str(schema)],
        ["-C", str(root), "show", "d", "--json"],
        ["-C", str(root), "show", "nope"],  # an error closes it too
        ["-C", str(root), "upgrade"],
    ]
    for n, args in enumerate(commands, 1):
        runner.invoke(app, args)
        assert closed == [root.resolve()] * n, args
