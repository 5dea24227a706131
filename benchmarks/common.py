"""Helpers shared by the benchmark scripts: machine facts, a quiet TensorFlow import, page cache."""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import importlib.metadata
import io
import json
import os
import platform
import pstats
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# TF 2.21 prints these through absl before TF_CPP_MIN_LOG_LEVEL applies.
TF_IMPORT_NOISE = ("All log messages before absl::InitializeLog()", "oneDNN custom operations are on")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 0


def import_tensorflow() -> Any:
    """Import TensorFlow with fd 2 captured; pass through everything but its import notices."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines():
                if line.strip() and not any(noise in line for noise in TF_IMPORT_NOISE):
                    print(line, file=sys.stderr)
    return tf


def page_cache(path: str | Path) -> int:
    """Read a file once so later reads are served from the page cache; returns its size."""
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(16 << 20):
            n += len(chunk)
    return n


@dataclass
class Timing:
    """One contender's round times (seconds)."""

    name: str
    times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def dist_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def filesystem_of(path: str) -> str:
    """The mount (device, type) holding ``path``, from /proc/mounts."""
    best = ("?", "?", "")
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                dev, mnt, fstype = line.split()[:3]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                    best = (dev, fstype, mnt)
    except OSError:
        pass
    return f"{best[0]} ({best[1]}) mounted on {best[2] or '?'}"


def profile_text(fn: Callable[[], object], top: int = 25) -> str:
    """cProfile of one call of ``fn``: the top ``top`` by cumulative time, then the top 15 by own time."""
    prof = cProfile.Profile()
    gc.collect()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(15)
    # Keep the tables, drop pstats' preamble lines about ordering and restriction.
    lines = [
        line.rstrip()
        for line in out.getvalue().splitlines()
        if line.strip() and not line.lstrip().startswith(("Ordered by", "List reduced"))
    ]
    return "\n".join(lines)


def arg_parser(doc: str | None, quick: str, repeats: str | None = None) -> argparse.ArgumentParser:
    """The options every benchmark has: --quick (its meaning in ``quick``), --json PATH, and,
    with ``repeats``, --repeats N."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", metavar="PATH", help="also write every result and timing as JSON to PATH")
    if repeats is not None:
        parser.add_argument("--repeats", type=int, help=repeats)
    return parser


def machine_header(**versions: Any) -> dict[str, Any]:
    """What every report starts with: date, CPUs, platform, Python, then ``versions`` (the
    packages that benchmark depends on), /tmp's filesystem and the load at the start."""
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": usable_cpus(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **versions,
        "tmp_fs": filesystem_of("/tmp"),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


def write_report(
    path: str, machine: dict[str, Any], quick: bool, config: Any, results: list[Any], **extra: Any
) -> None:
    """The run's JSON report (``--json PATH``): the machine, the mode, the config (a
    dataclass), the results (JSON-ready), then what else that benchmark keeps."""
    doc = {"machine": machine, "mode": "quick" if quick else "full", "config": asdict(config), "results": results}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**doc, **extra}, f, indent=1)
        f.write("\n")
    print(f"results written to {path}", file=sys.stderr)
