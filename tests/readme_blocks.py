"""README.md's fenced code blocks, found and run (tests/behaviour/test_readme.py).

A block is run by its language: ``sh`` as one bash script (``set -e``, ``pipefail``; the
``catalog`` on its PATH is this checkout's), ``python`` by ``exec`` in one namespace per
README section, ``json`` as a schema, and a block without a language is output: each of its
lines is the stderr of a hidden command. A block marked ``<!-- not run: REASON -->`` on the
line before its fence is not run; the reason stays visible in the README's source.

What a block needs and does not make itself comes from its section's `Section` in the
test: input files, hidden commands before a given line (``before``: what a reader does by
hand, such as uncommenting the line a migration template offers), a line run otherwise
(``instead``: `catalog serve` in the background, on a free port), placeholders for the
machines a block names (``swap``: a server URL, an absolute path outside the test's
directory), and names a fragment of a larger program uses (a model, a checkpoint).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
# Pages whose examples still run here, with inputs a section's `Section` prepares out of sight,
# rather than by Sybil with inputs the page makes itself (tests/doc_examples.py): each of their
# blocks carries PREPARED on the line before it, which Sybil's collector skips.
PREPARED_PAGES = [
    ROOT / "docs" / "reference" / "cli-tour.md",
    ROOT / "docs" / "reference" / "python-tour.md",
    ROOT / "docs" / "how-to" / "scale.md",
]
PREPARED = "<!-- run by tests/behaviour/test_readme.py, with inputs it prepares -->"
FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
HEADING = re.compile(r"^#{2,3} (.+?)\s*$")
NOT_RUN = re.compile(r"^\s*<!-- not run: (.+?) -->\s*$")


@dataclass(frozen=True)
class Block:
    line: int  # README.md's line of the block's first code line
    lang: str
    code: str
    section: str  # the heading (## or ###) the block is under
    not_run: str | None  # the reason a `<!-- not run: ... -->` marker gives
    page: str = "README.md"  # the file, from the repository's root


def parse(text: str, page: str = "README.md") -> list[Block]:
    """Every fenced block of ``text`` in order, with its section and marker."""
    blocks: list[Block] = []
    lines = text.splitlines()
    section = ""
    i = 0
    while i < len(lines):
        heading = HEADING.match(lines[i])
        fence = FENCE.match(lines[i])
        if heading:
            section = heading.group(1)
        elif fence:
            _indent, lang = fence.groups()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            code = textwrap.dedent("\n".join(lines[i + 1 : end])) + "\n"
            before = lines[i - 1] if i > 0 else ""
            marker = NOT_RUN.match(before)
            blocks.append(Block(i + 2, lang, code, section, marker.group(1) if marker else None, page))
            i = end
        i += 1
    return blocks


def readme_blocks() -> list[Block]:
    """The blocks of the pages whose inputs a test prepares (README's own examples make their
    inputs and run by Sybil: tests/behaviour/test_docs.py)."""
    blocks: list[Block] = []
    for page in PREPARED_PAGES:
        blocks += parse(page.read_text(encoding="utf-8"), str(page.relative_to(ROOT)))
    return blocks


# --------------------------------------------------------------------------- a section's context


@dataclass
class Section:
    """How one README section's blocks run: in ``work`` (the test's directory), one after
    another, sharing the shell's working directory and one Python namespace."""

    work: Path
    env: dict[str, str]
    before: dict[str, str] = field(default_factory=dict)  # README line text -> hidden bash run before it
    instead: dict[str, str] = field(default_factory=dict)  # README line text -> bash run in its place
    swap: dict[str, str] = field(default_factory=dict)  # placeholder in a block -> this machine's value
    names: dict[str, Any] = field(default_factory=dict)  # what a Python fragment takes from its program
    outputs: dict[int, list[str]] = field(default_factory=dict)  # output block's line -> hidden commands
    cwd: Path | None = None
    used: set[str] = field(default_factory=set)

    def run(self, blocks: list[Block]) -> int:
        """Run ``blocks`` in order; the number run. Every hook must have met its line."""
        self.cwd = self.cwd or self.work
        runners: dict[str, Callable[[Block], None]] = {
            "sh": self.run_sh, "python": self.run_python, "json": self.run_json, "": self.run_output,
        }  # fmt: skip
        for block in blocks:
            runners[block.lang](block)
        unused = [k for k in [*self.before, *self.instead] if k not in self.used]
        assert not unused, f"hooks that met no README line (the README changed?): {unused}"
        return len(blocks)

    def swapped(self, text: str) -> str:
        for placeholder, value in self.swap.items():
            text = text.replace(placeholder, value)
        return text

    def _hook(self, hooks: dict[str, str], line: str) -> str | None:
        found = [k for k in hooks if k in line]
        assert len(found) <= 1, f"{line!r} meets several hooks: {found}"
        if found:
            self.used.add(found[0])
            return hooks[found[0]]
        return None

    def script(self, block: Block) -> str:
        """The block as a bash script: each README line preceded by its line number (the
        ERR trap names it), the hooks in place, the working directory carried over."""
        out = [
            "set -eEo pipefail",
            f"trap 'echo \"{block.page}:$__line: exit $?: $BASH_COMMAND\" >&2' ERR",
            f"cd {shlex.quote(str(self.cwd))}",
        ]
        for n, line in enumerate(block.code.splitlines(), start=block.line):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            hidden = self._hook(self.before, line)
            if hidden:
                out += [f"__line={n}  # hidden, before", hidden]
            out += [f"__line={n}", self._hook(self.instead, line) or self.swapped(line)]
        out.append('pwd > "$__state"')
        return "\n".join(out) + "\n"

    def bash(self, script: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        state = self.work / ".readme-cwd"
        env = {**self.env, "__state": str(state)}
        done = subprocess.run(
            ["bash", "-c", script], cwd=self.cwd or self.work, env=env, capture_output=True, text=True, timeout=timeout
        )
        if state.exists():
            self.cwd = Path(state.read_text().strip())
            state.unlink()
        return done

    def run_sh(self, block: Block) -> None:
        done = self.bash(self.script(block))
        assert done.returncode == 0, f"{block.page}:{block.line}: the block failed\n{done.stderr[-4000:]}"

    def run_python(self, block: Block) -> None:
        """The block in pieces, cut before each line a ``before`` hook names (hidden Python
        run there); each piece keeps its README line numbers for tracebacks."""
        pieces: list[tuple[str | None, int, list[str]]] = [(None, block.line, [])]
        for n, line in enumerate(block.code.splitlines(), start=block.line):
            hidden = self._hook(self.before, line)
            if hidden is not None:
                pieces.append((hidden, n, []))
            pieces[-1][2].append(line)
        before = Path.cwd()
        os.chdir(self.cwd or self.work)
        try:
            for hidden, first, lines in pieces:
                if hidden is not None:
                    exec(hidden, self.names)
                code = "\n" * (first - 1) + self.swapped("\n".join(lines) + "\n")
                exec(compile(code, str(ROOT / block.page), "exec"), self.names)
        finally:
            os.chdir(before)

    def run_json(self, block: Block) -> None:
        from catalog import Schema

        Schema.from_json(json.loads(block.code))

    def run_output(self, block: Block) -> None:
        """Each line of an output block is the last stderr line of its hidden command."""
        commands = self.outputs.get(block.line)
        assert commands is not None, f"{block.page}:{block.line}: an output block with no commands to check it"
        expected = block.code.splitlines()
        assert len(commands) == len(expected), (
            f"{block.page}:{block.line}: {len(expected)} lines, {len(commands)} commands"
        )
        for command, line in zip(commands, expected, strict=True):
            done = self.bash(f"cd {shlex.quote(str(self.cwd))}\n{command}\n")
            got = done.stderr.strip().splitlines()
            assert done.returncode == 1 and got[-1:] == [line], (command, done.returncode, done.stderr)


def cli_env(work: Path) -> dict[str, str]:
    """A user's shell: this checkout's `catalog` first on PATH, HOME in the test's directory,
    no catalog chosen by the environment."""
    shims = work / ".bin"
    shims.mkdir(exist_ok=True)
    shim = shims / "catalog"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m catalog "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CATALOG_ROOT", "CATALOG_DB_URL", "CATALOG_DASK_SCHEDULER")}
    env.update(
        PATH=f"{shims}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(work),
        PYTHONPATH=str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
    )
    return env
