"""The suite passes whatever SIGINT disposition it is started with (issue 30): a shell that
ignores SIGINT (a background job, nohup, some CI runners) hands SIG_IGN down to every process
it starts, through pytest to the children the interrupt tests send a SIGINT to, which then
went on as if nothing happened. Each such child restores Ctrl-C itself (probes.interruptible),
and the product keeps the disposition it was given (a pool worker of a process that ignores
SIGINT ignores it too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# One test of each way the suite sends a SIGINT: raised in a child by a hook (the commit-path
# sweep, an import finder), sent by the child to itself or to its process group (adopt), sent
# by the test to a child (the writers' queue).
REPRESENTATIVES = [
    "tests/behaviour/test_interrupts.py::test_sigint_at_every_io_call_of_the_commit_path[sqlite-append-c_call]",
    "tests/cli/test_cli_startup.py::test_ctrl_c_while_the_command_loads[typer-interrupted: nothing was done]",
    "tests/ops/test_adopt_adversarial.py::test_an_interrupted_or_killed_adoption_registers_nothing[scan-SIGINT-d]",
    "tests/ops/test_adopt_adversarial.py::test_ctrl_c_of_adopt_with_workers_is_one_line",
    "tests/manifest/test_write_queue.py::test_a_writer_killed_awaiting_its_turn_blocks_nobody[2]",
    "tests/cli/test_cli_dedup.py::test_a_kill_or_ctrl_c_anywhere_leaves_the_old_version_or_the_new_one[commit.before-interrupt]",
]

IGNORING = (
    "import signal, sys\n"
    "import pytest\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)  # as nohup, a background job or a CI runner start it\n"
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', *sys.argv[1:]]))\n"
)


def test_the_interrupt_tests_pass_when_the_suite_is_started_ignoring_sigint() -> None:
    res = subprocess.run(
        [sys.executable, "-c", IGNORING, *REPRESENTATIVES], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stdout[-3000:]
    assert f"{len(REPRESENTATIVES)} passed" in res.stdout, res.stdout[-3000:]
