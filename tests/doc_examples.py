"""The documentation's examples, run by pytest through Sybil (issue 35, item 3).

Why Sybil: it is a well-kept pytest plugin that parses Markdown fenced blocks and docstrings
into test items named by file and line, runs a document's examples in order in one namespace
and reports a failure at the example's line; what it lacks for this project (shell blocks,
outputs compared, a working directory per page) is three small evaluators, written here.

A page is a program, run top to bottom in a fresh temporary directory (its working directory;
``CATALOG_*`` variables cleared, this checkout's ``catalog`` first on PATH), so every input an
example needs is made by the page itself, in plain sight:

- ```` ```sh ````: run by bash (``set -eo pipefail``); it must exit 0, or with the code a
  ``# exits N`` comment on its last line names (how a page shows an error). A block starts in
  the directory the one before it ended in, as commands typed in one terminal would; Python
  blocks run there too.
- ```` ```python ````: run in the page's one namespace; what it prints (stdout) is its output.
- ```` ```output ````: what the block before it printed (stdout and stderr), compared after
  normalising: paths are relative to the page's directory, timestamps as ``<time>``; a line ``...``
  stands for any lines, and ``...`` inside a line for any text.

Any other fenced block must say why it is not run, with ``<!-- not run: REASON -->`` on the line
before it (tests/behaviour/test_docs.py checks), as must a block of those languages that is not
run. A page that needs servers (docs/how-to/scale.md: PostgreSQL, S3, Dask) names the variables
it reads; docs/conftest.py gives them to it from throwaway servers (tests/servers.py), and skips
it with the reason where those cannot run (a failure under CI=true). Docstring examples
(``>>>``) in the package are doctests, run by tests/behaviour/test_docs.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sybil import Document, Example, Region, Sybil
from sybil.parsers.abstract import AbstractCodeBlockParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

RUN = ("sh", "python", "output")
NOT_RUN = re.compile(r"^\s*<!-- not run: (.+?) -->\s*$")  # on the line before a block's fence
WORKDIR = "__workdir__"
LAST_OUTPUT = "__last_output__"
EXITS = re.compile(r"#\s*exits\s+(\d+)\s*$")
TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
BIN = str(Path(sys.executable).parent)  # this checkout's environment: its `catalog`


class Block(AbstractCodeBlockParser):
    """The fenced blocks of the class's ``language``, run by :meth:`evaluate`."""

    def __init__(self) -> None:
        lexer = FencedCodeBlockLexer(language=r".+", mapping={"language": "arguments", "source": "source"})
        super().__init__([lexer], self.language)

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in super().__call__(document):
            before = document.text[: region.start].rstrip().rpartition("\n")[2].strip()
            if NOT_RUN.match(before):
                continue  # it says why it is not run
            region.evaluator = self.evaluate
            yield region


class Shell(Block):
    language = "sh"

    def evaluate(self, example: Example) -> str | None:
        code = str(example.parsed)
        lines = code.rstrip().splitlines()
        wanted = EXITS.search(lines[-1]) if lines else None
        expected = int(wanted.group(1)) if wanted else 0
        where = Path(example.namespace[WORKDIR]) / ".cwd"
        # the directory a block ends in is where the next one starts (as in a terminal)
        script = f"trap 'pwd > {where}' EXIT\nset -eo pipefail\n{code}"
        done = subprocess.run(  # (in the page's directory and environment: setup's)
            ["bash", "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
        example.namespace[LAST_OUTPUT] = done.stdout
        if where.exists():
            os.chdir(where.read_text().strip())
            where.unlink()
        if done.returncode != expected:
            return f"exit code {done.returncode} (expected {expected}); output:\n{done.stdout}"
        return None


class Python(Block):
    language = "python"

    def evaluate(self, example: Example) -> str | None:
        printed = io.StringIO()
        code = compile(str(example.parsed), f"{example.path}:{example.line}", "exec")
        with contextlib.redirect_stdout(printed):  # (warnings, on stderr, come once a process)
            exec(code, example.namespace)  # the page's own code, as a reader would run it
        example.namespace[LAST_OUTPUT] = printed.getvalue()
        return None


class Output(Block):
    language = "output"

    def evaluate(self, example: Example) -> str | None:
        got = example.namespace.get(LAST_OUTPUT)
        if got is None:
            return "an output block with no example before it"
        actual = normalise(got, example.namespace[WORKDIR])
        if not matches(str(example.parsed), actual):
            return f"the output differs.\nshown on the page:\n{example.parsed}\nprinted:\n{actual}"
        return None


def page_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
    env.update(PATH=BIN + os.pathsep + env.get("PATH", ""), COLUMNS="100", NO_COLOR="1", TERM="dumb")
    return env


def normalise(text: str, workdir: str) -> str:
    for spelling in {workdir, os.path.realpath(workdir)}:
        text = text.replace(spelling + os.sep, "").replace(spelling, ".")
    text = TIME.sub("<time>", text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def matches(shown: str, actual: str) -> bool:
    """Whether ``actual`` is what ``shown`` shows: ``...`` alone on a line is any lines
    (none too), ``...`` in a line any text."""
    parts = []
    for line in shown.strip("\n").splitlines():
        line = line.rstrip()
        if line.strip() == "...":
            parts.append(r"(?:.*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.split("...")) + r"\n")
    return re.fullmatch("".join(parts), actual + "\n") is not None


def setup(namespace: dict[str, Any]) -> None:
    workdir = tempfile.mkdtemp(prefix="catalog-docs-")
    namespace[WORKDIR] = workdir
    namespace["__cwd__"] = os.getcwd()
    namespace["__env__"] = dict(os.environ)
    env = page_env()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(workdir)


def teardown(namespace: dict[str, Any]) -> None:
    os.chdir(namespace["__cwd__"])
    os.environ.clear()
    os.environ.update(namespace["__env__"])
    shutil.rmtree(namespace[WORKDIR], ignore_errors=True)


def pages(
    path: Path, patterns: tuple[str, ...] = ("*.md",), excludes: tuple[str, ...] = (), fixtures: tuple[str, ...] = ()
) -> Sybil:
    """The Sybil that runs the Markdown pages under ``path`` (but ``excludes``); each example
    first gets the pytest ``fixtures`` named (after the page's setup: one may add to its
    environment, which its teardown restores)."""
    return Sybil(
        parsers=[Shell(), Python(), Output()],
        patterns=list(patterns),
        excludes=list(excludes),
        path=str(path),
        setup=setup,
        teardown=teardown,
        fixtures=list(fixtures),
    )


def run_page(page: Path) -> int:
    """Run one page's examples in order as the pytest plugin would; the number run."""
    sybil = pages(page.parent, (page.name,))
    document = sybil.parse(page)
    setup(document.namespace)
    try:
        examples = list(document.examples())
        for example in examples:
            example.evaluate()
    finally:
        teardown(document.namespace)
    return len(examples)
