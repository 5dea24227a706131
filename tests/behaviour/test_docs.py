"""The documentation (issue 35): the site builds strictly, every block on its pages runs or says
why not, the collector fails a false example, the references name every public API name,
command and environment variable, and the help users see first has an example per command."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from doc_examples import NOT_RUN, RUN, matches, normalise, run_page
from doc_examples import pages as page_examples
from sybil.example import SybilFailure
from typer.testing import CliRunner

import catalog
from catalog.cli.commands import VERBS, Group, Verb, app, built
from catalog.manifest.tables import FORMAT_VERSION

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^\s*```(\S*)")
# Blocks that say why they are not run (pictures, installs, the whole suite, a server run until
# Ctrl-C, a sketch): few, and a new one is a decision to take here, not in passing.
MOST_NOT_RUN = 10  # the tenth: the TFRecord framing drawn as a table (concepts/tensorflow-compatibility.md)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_every_block_on_the_site_runs_or_says_why_not() -> None:
    found, unmarked, marked = 0, [], []
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        inside = False
        for i, line in enumerate(lines):
            fence = FENCE.match(line)
            if not fence:
                continue
            if not inside:
                found += 1
                lang = fence.group(1)
                before = lines[i - 1].strip() if i > 0 else ""
                if NOT_RUN.match(before):
                    marked.append(f"{page.relative_to(ROOT)}:{i + 1}")
                elif lang not in RUN:
                    unmarked.append(f"{page.relative_to(ROOT)}:{i + 1} ({lang or 'no language'})")
            inside = not inside
    assert found >= 20, found
    assert not unmarked, f"blocks that neither run (sh, python, output) nor say why not: {unmarked}"
    assert len(marked) <= MOST_NOT_RUN, f"more blocks not run than before: {marked}"


def test_a_block_marked_not_run_is_not_run_and_a_failure_names_its_page_and_line(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text(
        "# A page\n\n<!-- not run: it would fail -->\n```sh\nfalse\n```\n\n```sh\necho one\nfalse\n```\n"
    )
    document = page_examples(tmp_path).parse(tmp_path / "page.md")
    examples = list(document.examples())
    assert [e.line for e in examples] == [8]  # the marked block is no example; the other one is
    with pytest.raises(SybilFailure) as failure:
        run_page(tmp_path / "page.md")
    assert "page.md, line 8" in str(failure.value) and "exit code 1 (expected 0)" in str(failure.value), failure.value


FALSE_PAGES = {
    "an output that is not what the command prints": "```sh\necho hello\n```\n\n```output\ngoodbye\n```\n",
    "a command that fails": "```sh\nfalse\n```\n",
    "a command that should fail but does not": "```sh\ntrue   # exits 1\n```\n",
    "Python that raises": "```python\nraise ValueError('no')\n```\n",
    "a Python output that differs": "```python\nprint(1 + 1)\n```\n\n```output\n3\n```\n",
}


@pytest.mark.parametrize("what", FALSE_PAGES)
def test_a_false_example_fails_the_suite(tmp_path: Path, what: str) -> None:
    """Any page with a false example makes pytest (so CI) fail; the same page made true passes."""
    tests = ROOT / "tests"
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tests)!r})\nfrom pathlib import Path\n"
        "from doc_examples import pages\npytest_collect_file = pages(Path(__file__).parent).pytest()\n"
    )
    (tmp_path / "page.md").write_text("# A page\n\n" + FALSE_PAGES[what])
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)]
    failed = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert failed.returncode == 1 and "1 failed" in failed.stdout, failed.stdout[-2000:]
    (tmp_path / "page.md").write_text("# A page\n\n```sh\necho hello\n```\n\n```output\nhello\n```\n")
    passed = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert passed.returncode == 0 and "2 passed" in passed.stdout, passed.stdout[-2000:]


def test_the_readme_runs() -> None:
    """README's tour, run as the site's pages are (its blocks make their own inputs)."""
    assert run_page(ROOT / "README.md") >= 8


def test_the_readmes_two_commands_are_the_documented_ones() -> None:
    """Set up and run the demo; set up and run the tests (issue 35: exactly as before), the
    second being what CI runs, and the first the demo a test runs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    demo = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/catalog demo demo-out"
    suite = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
    commands = [b.strip() for b in re.findall(r"^\s*```sh\n\s*(python3 -m venv[^\n]*)\n\s*```", readme, re.M)]
    assert commands == [demo, suite]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "export CI=true" in ci and suite.replace("pip install -e", "pip install -q -e") in ci
    assert "def test_demo_command(" in (ROOT / "tests" / "cli" / "test_cli.py").read_text(encoding="utf-8")


SCALE_UNAVAILABLE = """
import sys
sys.path.insert(0, {tests!r})
import servers


def _unavailable():
    raise servers.Unavailable("no PostgreSQL here (a test says so)")


servers.start_scale = _unavailable
"""


@pytest.mark.parametrize("ci", ["", "true"])
def test_the_scale_page_skips_with_the_reason_without_its_servers_and_fails_under_ci(tmp_path: Path, ci: str) -> None:
    (tmp_path / "unavailable.py").write_text(SCALE_UNAVAILABLE.format(tests=str(ROOT / "tests")))
    env = {**os.environ, "CI": ci, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    run = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "unavailable"]
    done = subprocess.run(
        [*run, "docs/how-to/scale.md"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    if ci:
        assert done.returncode == 1 and "under CI=true this page must run" in done.stdout, done.stdout[-2000:]
        assert " passed" not in done.stdout and " skipped" not in done.stdout, done.stdout[-2000:]
    else:
        assert done.returncode == 0 and "needs PostgreSQL, S3 (moto) and Dask" in done.stdout, done.stdout[-2000:]
        assert "no PostgreSQL here (a test says so)" in done.stdout and " passed" not in done.stdout


def test_python_tests_servers_py_starts_what_the_scale_page_reads_and_stops_on_sigterm() -> None:
    """The page's documented way to get its servers: `python tests/servers.py` prints the
    variables the page reads (working ones), then serves until a SIGTERM stops it."""
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "servers.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert server.stdout is not None and server.stderr is not None
    exports = []
    for line in server.stdout:
        if line == "# serving until Ctrl-C\n":
            break
        exports.append(line)
    else:
        server.wait(timeout=60)
        pytest.skip(f"no servers here: {server.stderr.read()[-500:]}")
    try:
        env = dict(shlex.split(line.removeprefix("export "))[0].split("=", 1) for line in exports)
        read = set(re.findall(r"\$\{?(SCALE_\w+|AWS_\w+)", (DOCS / "how-to" / "scale.md").read_text()))
        assert read and read <= set(env), (read, env)
        import sqlalchemy as sa

        for url in (env["SCALE_DB_URL"], env["SCALE_DB_URL_2"]):
            engine = sa.create_engine(url)
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar() == 1
            engine.dispose()
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=120) == 0, server.stderr.read()[-2000:]


def test_outputs_are_compared_after_normalising_paths_and_times() -> None:
    printed = "made /tmp/w/cat/data at 2026-12-06 20:51:28  \nnext\n"
    assert normalise(printed, "/tmp/w") == "made cat/data at <time>\nnext"
    assert matches("made cat/data at <time>\nnext\n", "made cat/data at <time>\nnext")
    assert matches("made ... at <time>\n...\n", "made cat/data at <time>\nnext\nand more")
    assert not matches("made cat/data\n", "made cat/data at <time>")
    assert not matches("next\n", "made cat/data at <time>\nnext")


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    pytest.importorskip("mkdocstrings", reason="the docs extra (mkdocstrings) is not installed")
    built_site = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )
    assert built_site.returncode == 0, built_site.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for entry in VERBS:
        assert f"catalog {entry.name}" in cli, entry.name
    api = (tmp_path / "site" / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    for name in catalog.__all__:
        assert name in api, name


def test_the_python_reference_names_every_public_name_where_it_is_defined() -> None:
    text = (DOCS / "reference" / "python.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^::: ([\w.]+)$", text, re.M))
    expected = {f"{getattr(catalog, n).__module__}.{n}" for n in catalog.__all__}
    assert documented == expected, (expected - documented, documented - expected)


def test_every_environment_variable_read_is_documented() -> None:
    text = (DOCS / "reference" / "environment.md").read_text(encoding="utf-8")
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "catalog").rglob("*.py"))
    read = set(re.findall(r"environ\.get\(\s*\"(\w+)\"", source))
    read |= set(re.findall(r"_ENV = \"(\w+)\"", source))  # a variable named once, read by its constant
    assert {"CATALOG_ROOT", "CATALOG_DB_URL", "CATALOG_STATS_HELPER", "CATALOG_DASK_SCHEDULER"} <= read
    missing = [v for v in read if f"`{v}`" not in text]
    assert not missing, missing


def verbs() -> list[tuple[str, Verb]]:
    out: list[tuple[str, Verb]] = []
    for entry in VERBS:
        if isinstance(entry, Group):
            out += [(f"{entry.name} {v.name}", v) for v in entry.verbs]
        else:
            out.append((entry.name, entry))
    return out


@pytest.mark.parametrize(("name", "verb"), verbs(), ids=[n for n, _ in verbs()])
def test_every_command_says_what_it_does_in_one_line_and_shows_an_example(name: str, verb: Verb) -> None:
    assert "\n" not in verb.help and verb.help.endswith("."), verb.help
    words = shlex.split(verb.example)
    assert words[: 1 + len(name.split())] == ["catalog", *name.split()], verb.example
    entry = next(e for e in VERBS if e.name == name.split()[0])
    command = built(entry)
    if isinstance(entry, Group):
        command = command.commands[verb.name]  # type: ignore[attr-defined]
    # the example parses: every option it names exists and takes what it is given
    command.make_context(f"catalog {name}", words[1 + len(name.split()) :]).close()
    shown = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and f"Example: {verb.example}" in shown.stdout, shown.stdout[-600:]


def test_version_names_the_package_and_the_manifest_format() -> None:
    shown = CliRunner().invoke(app, ["--version"])
    assert shown.exit_code == 0
    assert shown.stdout == f"catalog {catalog.__version__} (tfrecord-catalog), manifest format {FORMAT_VERSION}\n"
    assert catalog.__version__ == importlib.metadata.version("tfrecord-catalog")


def test_a_dataset_name_that_matches_nothing_says_what_to_do_next(tmp_path: Path) -> None:
    runner = CliRunner()
    root = str(tmp_path / "cat")
    assert runner.invoke(app, ["init", root]).exit_code == 0
    empty = runner.invoke(app, ["-C", root, "show", "things"])
    assert empty.exit_code == 1
    assert empty.stderr == textwrap.dedent("""\
        error: no dataset named 'things' (the catalog has none yet: `catalog register NAME --schema FILE` makes one)
    """)
    schema = tmp_path / "schema.json"
    schema.write_text('{"features": {"id": {"dtype": "int64"}}}')
    assert runner.invoke(app, ["-C", root, "register", "things", "--schema", str(schema)]).exit_code == 0
    far = runner.invoke(app, ["-C", root, "show", "zzz"])
    assert far.stderr == "error: no dataset named 'zzz' (`catalog list` names the datasets there are)\n"
    close = runner.invoke(app, ["-C", root, "show", "thing"])
    assert close.stderr == "error: no dataset named 'thing' (did you mean 'things'?)\n"


def test_docstring_examples_of_the_public_api_run() -> None:
    """Every ``>>>`` example in a docstring of the package is a doctest, and passes."""
    import doctest
    import importlib
    import pkgutil

    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    examples = 0
    for info in pkgutil.walk_packages(catalog.__path__, "catalog."):
        if info.name == "catalog.__main__":
            continue  # importing it runs the CLI
        module = importlib.import_module(info.name)
        for test in finder.find(module, info.name, globs=dict(vars(module))):
            examples += len(test.examples)
            runner.run(test)
    assert examples >= 5, examples
    assert runner.failures == 0, f"{runner.failures} docstring examples failed (printed above)"


def made_page(relative: str) -> str:
    """A page as the site shows it: its markers replaced by what docs/hooks.py makes from the code."""
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return str(hooks.on_page_markdown((DOCS / relative).read_text(encoding="utf-8")))


def test_the_error_reference_has_every_class_of_the_tree() -> None:
    from catalog import errors
    from catalog.cli.reference import error_classes, exit_code

    defined = {
        v for v in vars(errors).values()
        if isinstance(v, type) and issubclass(v, BaseException) and v.__module__ == errors.__name__
    }  # fmt: skip
    assert set(error_classes()) == defined
    page = made_page("reference/errors.md")
    for cls in error_classes():
        assert "__doc__" in vars(cls) and cls.__doc__, f"{cls.__name__} has no docstring of its own"
        section = page.split(f"\n## {cls.__name__}\n", 1)[1].split("\n## ", 1)[0]
        assert f"exits with {exit_code(cls)}." in section, cls.__name__
        assert " ".join(cls.__doc__.split()[:4]) in " ".join(section.split()), cls.__name__


def test_a_command_meeting_each_error_exits_with_the_code_its_reference_gives() -> None:
    from typer import Exit

    from catalog.cli.base import verb
    from catalog.cli.reference import error_classes, exit_code

    for cls in error_classes():
        error = cls.__new__(cls)
        BaseException.__init__(error, "a message")  # (whatever the class's own arguments are)

        def fails(error: BaseException = error) -> None:
            raise error

        with pytest.raises(Exit) as ended:
            verb(fails)()
        assert ended.value.exit_code == exit_code(cls), cls.__name__


def test_the_manifest_tables_page_has_every_table() -> None:
    from catalog.manifest.tables import METADATA

    page = made_page("reference/manifest-tables.md")
    for name in METADATA.tables:
        assert f"\n## {name}\n" in page, name


def test_the_tensorflow_page_names_every_compatibility_test() -> None:
    """docs/concepts/tensorflow-compatibility.md says how the suite proves compatibility: a test
    added to tests/behaviour/test_tf_compat.py is named there too."""
    page = (DOCS / "concepts" / "tensorflow-compatibility.md").read_text(encoding="utf-8")
    source = (ROOT / "tests" / "behaviour" / "test_tf_compat.py").read_text(encoding="utf-8")
    tests = re.findall(r"^def (test_\w+)", source, re.M)
    assert len(tests) >= 15
    assert not [t for t in tests if f"`{t}`" not in page]
