"""CLI start-up: commands as new processes, as a user runs them (interpreter start and imports
included), in interleaved rounds, beside the peers that say what they could cost.

Issue 12 (medians): `catalog --help` <= 0.2 s, `catalog list` <= 0.35 s, beside `python -c pass`.
Issue 34 (the minimum of the rounds, each against its peer in the same rounds): `catalog --help`
<= 1.2x the `--help` of a bare typer app with as many commands as `catalog` has (trivial bodies,
one option and a help string each); `catalog list`, `show NAME`, `tags NAME` and `history NAME`
on a catalog of 100 datasets (a few versions each, made untimed) <= 2x
`python -c "import sqlite3, sqlalchemy"`. Then the heaviest imports of `catalog list` and
`catalog show NAME` (`-X importtime`).

With `--compare DIR` (a checkout of other code, e.g. `git worktree add /tmp/before REV`), the
catalog's commands also run with that code first on the path, in the same rounds: before/after
side by side (the peers run once a round: they are the same for both)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import harness as h

TARGETS = {"--help": 0.2, "list": 0.35}  # issue 12: seconds, medians
ENTRY = "import sys\nfrom catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"
BARE = "peer: bare typer app --help"
IMPORTS = 'peer: python -c "import sqlite3, sqlalchemy"'
SHOWN = "ds050"  # the dataset show, tags and history name: tagged, four versions
# Issue 34: a command's minimum over its peer's, at most this.
RATIO_TARGETS = {
    "--help": (BARE, 1.2),
    "list (100)": (IMPORTS, 2.0),
    "show NAME": (IMPORTS, 2.0),
    "tags NAME": (IMPORTS, 2.0),
    "history NAME": (IMPORTS, 2.0),
}


@dataclass
class Config:
    rounds: int
    compare: str | None


# Each side makes its own catalogs: the manifest format may differ between the two codes.
MAKE = (
    "import sys\nfrom catalog import Catalog\nfrom catalog.demo import write_demo\nfrom pathlib import Path\n"
    "cat = Catalog.init(Path(sys.argv[1]) / 'cat')\n"
    "for name in ('events', 'images', 'logs'):\n"
    "    cat.register(name, {'features': {'x': {'dtype': 'int64'}}})\n"
    "cat.close()\nwrite_demo(Path(sys.argv[1]), n=10)\n"
    # 100 datasets of four versions (a register, three appends of 10 rows), every tenth tagged
    "cat = Catalog.init(Path(sys.argv[1]) / 'many')\n"
    "for i in range(100):\n"
    "    ds = cat.register(f'ds{i:03d}', {'features': {'x': {'dtype': 'int64'}, 's': {'dtype': 'string'}}})\n"
    "    for v in range(3):\n"
    "        ds.append_rows([{'x': j, 's': f'row {j}'} for j in range(10)], message=f'batch {v}')\n"
    "    if i % 10 == 0:\n"
    "        ds.tag('first', 2)\n"
    "        ds.tag('latest', 4)\n"
    "cat.close()\n"
)


def _commands(work: Path) -> dict[str, list[str]]:
    root, many = str(work / "cat"), str(work / "many")
    return {
        "--help": ["-c", ENTRY, "--help"],
        "list": ["-c", ENTRY, "-C", root, "list"],
        "inspect": ["-c", ENTRY, "inspect", str(work / "demo.tfrecord")],
        "list (100)": ["-c", ENTRY, "-C", many, "list"],
        "show NAME": ["-c", ENTRY, "-C", many, "show", SHOWN],
        "tags NAME": ["-c", ENTRY, "-C", many, "tags", SHOWN],
        "history NAME": ["-c", ENTRY, "-C", many, "history", SHOWN],
    }


def bare_app(commands: int) -> str:
    """A typer app's source with ``commands`` verbs that do nothing but print their one option,
    set up as `catalog`'s app is (no completion, no pretty exceptions, help when bare)."""
    lines = [
        "from typing import Annotated",
        "import typer",
        "app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,",
        "                  help='A bare app: as many verbs as catalog, nothing in them.')",
    ]
    for i in range(commands):
        lines += [
            f"@app.command('verb-{i:02d}')",
            f"def verb_{i:02d}(value: Annotated[int, typer.Option('--value', help='A number.')] = 0) -> None:",
            f"    '''Verb {i}: print a number, the command's one option.'''",
            "    print(value)",
        ]
    return "\n".join([*lines, "app()", ""])


def catalog_commands() -> int:
    """How many commands `catalog --help` lists (the verbs and the `migrations` group)."""
    import typer.main

    from catalog.cli import app

    group = typer.main.get_command(app)
    return len(group.commands)  # type: ignore[attr-defined]


def _peers(tmp: Path) -> dict[str, list[str]]:
    script = tmp / "bare_app.py"
    script.write_text(bare_app(catalog_commands()))
    return {
        "peer: python -c pass": ["-c", "pass"],
        BARE: [str(script), "--help"],
        IMPORTS: ["-c", "import sqlite3, sqlalchemy"],
    }


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(argv: list[str], path: str | None, cpu: list[float] | None = None) -> float:
    """Wall seconds of one run; its CPU seconds (user + system) appended to ``cpu``: on a
    shared box the wall time waits for a core, the CPU time much less (the context rows)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = path
    c0 = _children_cpu()
    t0 = time.perf_counter()
    # Run from / : `python -c` puts its working directory first on the path, where a checkout's
    # catalog/ would shadow the side's PYTHONPATH (--compare from the repository ran this code twice).
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True, cwd=os.sep)
    elapsed = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(_children_cpu() - c0)
    h.check(proc.returncode == 0, f"{argv[-1]}: {proc.stderr.decode()[-300:]}")
    return elapsed


def sides(cfg: Config) -> dict[str, str]:
    """The code on each side's path: this checkout, and the compared one if any."""
    found = {"this code": str(h.REPO)}
    if cfg.compare:
        found["compared"] = os.pathsep.join(str(Path(p).resolve()) for p in cfg.compare.split(os.pathsep))
    return found


def measure(cfg: Config, tmp: Path) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Round times per label (``side: command``, or a peer's), rotated round by round, and
    their CPU times."""
    paths = sides(cfg)
    runs: list[tuple[str, str | None, list[str]]] = [(name, None, argv) for name, argv in _peers(tmp).items()]
    for side, path in paths.items():
        work = tmp / side.replace(" ", "-")
        work.mkdir()
        _run(["-c", MAKE, str(work)], path)
        runs += [(f"{side}: {name}", path, argv) for name, argv in _commands(work).items()]
    times: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    cpu: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    order = [str(i) for i in range(len(runs))]
    for rnd in range(cfg.rounds + 1):  # round 0 warms the page cache
        for i in h.rotation(order, rnd):
            label, code, argv = runs[int(i)]
            dt = _run(argv, code, cpu[label] if rnd else None)
            if rnd:
                times[label].append(dt)
    return times, cpu


def heaviest_imports(tmp: Path, *command: str, top: int = 8) -> list[str]:
    """The modules with the largest cumulative import time in one run of ``command`` (this code)."""
    argv = [sys.executable, "-X", "importtime", "-c", ENTRY, "-C", str(tmp / "this-code" / "many"), *command]
    proc = subprocess.run(argv, capture_output=True, text=True)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return [f"{name} {us / 1000:.0f} ms" for us, name in sorted(rows, reverse=True)[:top]]


def table(times: dict[str, list[float]]) -> list[dict[str, object]]:
    """Every label's median and minimum, with issue 12's targets (medians)."""
    print("| command | median | min | target (median) | met? |\n|---|---:|---:|---:|:---:|")
    out: list[dict[str, object]] = []
    for label, values in times.items():
        med = statistics.median(values)
        target = TARGETS.get(label.split(": ", 1)[1]) if label.startswith("this code") else None
        met = "—" if target is None else ("yes" if med <= target else "**NO**")
        print(
            f"| {label} | {h.ms(med)} | {h.ms(min(values))} | {'—' if target is None else f'<= {target} s'} | {met} |"
        )
        out.append({"command": label, "median": med, "times": values, "target": target})
    return out


def cpu_ratios(cpu: dict[str, list[float]]) -> None:
    """Context: each command's least CPU time (user + system) over its peer's, same rounds."""
    print("\n## Context: least CPU time of the rounds (user + system) against the peer's\n")
    for label, values in cpu.items():
        side, _, command = label.partition(": ")
        if command in RATIO_TARGETS and side != "peer":
            peer = cpu[RATIO_TARGETS[command][0]]
            print(f"- {label}: {min(values) / min(peer):.2f}x ({h.ms(min(values))} / {h.ms(min(peer))})")


def ratios(times: dict[str, list[float]], report: h.Report) -> None:
    """Issue 34's rows: each command's minimum over its peer's, for every side."""
    for label, values in times.items():
        side, _, command = label.partition(": ")
        if command not in RATIO_TARGETS or side == "peer":
            continue
        peer, most = RATIO_TARGETS[command]
        ratio = min(values) / min(times[peer])
        median = statistics.median(values) / statistics.median(times[peer])
        report.add(
            h.Result(
                side,
                f"`catalog {command}` / {peer.removeprefix('peer: ')}",
                f"{ratio:.2f}x ({h.ms(min(values))} / {h.ms(min(times[peer]))})",
                f"<= {most}x",
                ratio <= most,
                f"medians {median:.2f}x",
            )
        )


def main() -> None:
    parser = h.arg_parser(__doc__, "5 rounds instead of 10")
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="a checkout of other code (or several paths joined by os.pathsep) to run side by side",
    )
    args = parser.parse_args()
    cfg = Config(rounds=5 if args.quick else 10, compare=args.compare)
    info = h.machine_header(sqlalchemy=h.dist_version("sqlalchemy"), typer=h.dist_version("typer"))
    h.print_header("CLI start-up", info, f"{cfg.rounds} interleaved rounds after a warm-up round")
    started = time.perf_counter()
    report = h.Report()
    with tempfile.TemporaryDirectory() as tmp:
        times, cpu = measure(cfg, Path(tmp))
        results = table(times)
        print("\n## Issue 34: minimum of the rounds against the peer\n")
        ratios(times, report)
        cpu_ratios(cpu)
        report.summary(started, f"; load average at the end {' '.join(map(str, h.loadavg()))}")
        for command in (["list"], ["show", SHOWN]):
            heaviest = heaviest_imports(Path(tmp), *command)
            print(f"\nheaviest imports of `catalog {' '.join(command)}` (cumulative): " + "; ".join(heaviest))
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, results, ratios=[vars(r) for r in report.results], cpu=cpu)


if __name__ == "__main__":
    main()
