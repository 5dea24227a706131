"""CLI start-up: `catalog --help`, `catalog list` and `catalog inspect FILE` as new processes,
as a user runs them (interpreter start and imports included), median of interleaved rounds
beside a bare `python -c pass`, and the heaviest imports of `catalog list` (`-X importtime`).

With `--compare DIR` (a checkout of other code, e.g. `git worktree add /tmp/before REV`), the
same commands also run with that code first on the path, in the same rounds: before/after
side by side. Targets (issue 12): `--help` <= 0.2 s, `list` <= 0.35 s."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import harness as h

TARGETS = {"--help": 0.2, "list": 0.35}
ENTRY = "import sys\nfrom catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"


@dataclass
class Config:
    rounds: int
    compare: str | None


# Each side makes its own catalog: the manifest format may differ between the two codes.
MAKE = (
    "import sys\nfrom catalog import Catalog\nfrom catalog.demo import write_demo\nfrom pathlib import Path\n"
    "cat = Catalog.init(Path(sys.argv[1]) / 'cat')\n"
    "for name in ('events', 'images', 'logs'):\n"
    "    cat.register(name, {'features': {'x': {'dtype': 'int64'}}})\n"
    "cat.close()\nwrite_demo(Path(sys.argv[1]), n=10)\n"
)


def _commands(root: Path, demo: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": ["-c", "pass"],
        "--help": ["-c", ENTRY, "--help"],
        "list": ["-c", ENTRY, "-C", str(root), "list"],
        "inspect": ["-c", ENTRY, "inspect", str(demo)],
    }


def _run(argv: list[str], path: str | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if path is not None:
        env["PYTHONPATH"] = path
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True)
    elapsed = time.perf_counter() - t0
    h.check(proc.returncode == 0, f"{argv[-1]}: {proc.stderr.decode()[-300:]}")
    return elapsed


def measure(cfg: Config, tmp: Path) -> dict[str, list[float]]:
    """Round times per (side, command), sides and commands rotated round by round."""
    sides = {"this code": str(Path(__file__).resolve().parents[1])}
    if cfg.compare:
        sides["compared"] = os.pathsep.join(str(Path(p).resolve()) for p in cfg.compare.split(os.pathsep))
    runs = []
    for side, path in sides.items():
        work = tmp / side.replace(" ", "-")
        work.mkdir()
        _run(["-c", MAKE, str(work)], path)
        runs += [(side, name, argv) for name, argv in _commands(work / "cat", work / "demo.tfrecord").items()]
    times: dict[str, list[float]] = {f"{side}: {name}": [] for side, name, _ in runs}
    labels = [str(i) for i in range(len(runs))]
    for rnd in range(cfg.rounds + 1):  # round 0 warms the page cache
        for i in h.rotation(labels, rnd):
            side, name, argv = runs[int(i)]
            dt = _run(argv, sides[side])
            if rnd:
                times[f"{side}: {name}"].append(dt)
    return times


def heaviest_imports(tmp: Path, top: int = 8) -> list[str]:
    """The modules with the largest cumulative import time in one `catalog list` of this code."""
    root = tmp / "this-code" / "cat"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", ENTRY, "-C", str(root), "list"], capture_output=True, text=True
    )
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].strip()))
    return [f"{name} {us / 1000:.0f} ms" for us, name in sorted(rows, reverse=True)[:top]]


def table(times: dict[str, list[float]]) -> list[dict[str, object]]:
    print("| command | median | min | target | met? |\n|---|---:|---:|---:|:---:|")
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


def main() -> None:
    parser = h.arg_parser(__doc__, "5 rounds instead of 15")
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="a checkout of other code (or several paths joined by os.pathsep) to run side by side",
    )
    args = parser.parse_args()
    cfg = Config(rounds=5 if args.quick else 15, compare=args.compare)
    info = h.machine_header()
    h.print_header("CLI start-up", info, f"{cfg.rounds} interleaved rounds after a warm-up round")
    with tempfile.TemporaryDirectory() as tmp:
        times = measure(cfg, Path(tmp))
        results = table(times)
        print("\nheaviest imports of `catalog list` (cumulative): " + "; ".join(heaviest_imports(Path(tmp))))
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, results)


if __name__ == "__main__":
    main()
