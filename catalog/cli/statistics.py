"""`catalog stats`: feature statistics as tables (rich), with sparkline histograms on a terminal."""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import open_catalog, progress_bar, verb
from catalog.cli.options import AsJson, DatasetName, Version
from catalog.cli.output import Output, Rendered, counted, visible

if TYPE_CHECKING:
    from rich.table import Table

    from catalog.commit.statistics import VersionStats
    from catalog.ops.describe import Comparison, StatsReport

SPARKS = " ▁▂▃▄▅▆▇█"
DRIFT_SHOWN = 0.1  # an L-infinity distance above this is marked (TFDV's usual threshold)


COMPARE = "Compare two versions, tags or splits (SPLIT@VERSION for a split of another version)."


@verb
def stats(
    name: DatasetName,
    version: Version = None,
    split: Annotated[
        str | None, typer.Option("--split", metavar="SPLIT", help="Only this split (default: all).")
    ] = None,
    feature: Annotated[
        list[str] | None, typer.Option("--feature", "-f", metavar="NAME", help="Only this feature (repeat for more).")
    ] = None,
    compute: Annotated[
        bool, typer.Option("--compute", help="First compute the statistics of shards that have none (one read each).")
    ] = False,
    compare: Annotated[tuple[str, str] | None, typer.Option("--compare", metavar="A B", help=COMPARE)] = None,
    as_json: AsJson = False,
) -> Output:
    ds = open_catalog().dataset(name)
    done = None
    if compute:
        with progress_bar(f"stats {name}", None) as progress:  # how much lacks statistics is found as it goes
            done = ds.compute_stats(version, progress)
    note = (
        f"computed the statistics of {counted(done.computed, 'shard')} ({counted(done.records, 'record')})"
        if done
        else None
    )
    if compare is not None:
        cmp = ds.compare_stats(compare[0], compare[1], feature, version)
        return Output(text=_compare_text(cmp), json=cmp.to_json, summary=note)
    report = ds.stats(version, split, feature)
    return Output(text=_stats_text(report), json=report.to_json, summary=note)


# --------------------------------------------------------------------------- rendering


def _row(table: Table, *cells: str) -> None:
    """A row of data: its cells are text, never rich markup (a value '[/red]' is a closing
    tag to rich), and what a terminal would act on in them is escaped (output.visible)."""
    from rich.text import Text

    table.add_row(*(Text(visible(cell)) for cell in cells))


def _render(table: Table) -> Iterator[str]:
    """A rich table as lines: colours and the full width on a terminal, plain text when piped."""
    from rich.console import Console

    tty = sys.stdout.isatty()
    width = shutil.get_terminal_size((160, 24)).columns if tty else 200
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=tty, color_system="auto" if tty else None).print(table)
    yield from map(Rendered, out.getvalue().rstrip("\n").split("\n"))


def sparkline(heights: list[float]) -> str:
    top = max(heights, default=0)
    if top <= 0:
        return ""
    return "".join(SPARKS[0 if h <= 0 else max(1, round(h / top * (len(SPARKS) - 1)))] for h in heights)


def num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return f"{x:,}"
    return f"{x:.4g}"


def _stats_head(at: VersionStats) -> Iterator[str]:
    """What the statistics are of, and the shards left out of them."""
    where = f"split {at.split}" if at.split else f"splits: {', '.join(at.splits) or 'none'}"
    counts = f"{counted(at.records, 'record', grouped=True)} in {counted(at.shards, 'shard', grouped=True)}"
    yield f"dataset {at.dataset} version {at.version} ({where}): {counts}"
    if at.missing_shards:
        damaged = f", {at.damaged:,} of them damaged" if at.damaged else ""
        yield (
            f"not computed: {counted(at.missing_shards, 'shard', grouped=True)} "
            f"({counted(at.missing_records, 'record', grouped=True)}{damaged}) "
            f"{'is' if at.missing_shards == 1 else 'are'} left out; "
            f"run `catalog stats {at.dataset} --compute`"
        )


def _stats_text(report: StatsReport) -> Iterator[str]:
    from rich.table import Table

    yield from _stats_head(report.at)
    rows = report.summaries()
    tty = sys.stdout.isatty()
    numbers = [r for r in rows if "values" in r]
    texts = [r for r in rows if "value_lengths" in r]
    if numbers:
        t = Table(title="numbers", title_justify="left")
        columns = ("feature", "present", "filled", "missing", "min", "median", "mean", "std", "max", "zeros", "nan/inf")
        for col in columns:
            t.add_column(col, justify="left" if col == "feature" else "right")
        if tty:
            t.add_column("histogram")
        for r in numbers:
            v, q = r["values"], r["quantiles"] or {}
            cells = [r["feature"], num(r["present"]), num(r["filled"]), num(r["missing"]), num(v["min"]),
                     num(q.get("0.5")), num(v["mean"]), num(v["std"]), num(v["max"]), num(v["zeros"]),
                     f"{v['nans']:,}/{v['infs']:,}"]  # fmt: skip
            _row(t, *cells, *([sparkline([c for _lo, _hi, c in r["histogram"]])] if tty else []))
        yield from _render(t)
    if texts:
        t = Table(title="strings and bytes", title_justify="left")
        for col in ("feature", "kind", "present", "filled", "missing", "length min/mean/max", "distinct", "top values"):
            t.add_column(col, justify="right" if col in ("present", "filled", "missing", "distinct") else "left")
        for r in texts:
            n = r["value_lengths"]
            top = ", ".join(f"{_short(x['value'])} ({x['count']:,})" for x in r.get("top_values", [])[:5])
            lengths = f"{num(n['min'])}/{num(n['mean'])}/{num(n['max'])}"
            _row(t, r["feature"], r["kind"], num(r["present"]), num(r["filled"]), num(r["missing"]), lengths,
                      num(r.get("distinct")), top)  # fmt: skip
        yield from _render(t)
    labels = [r for r in rows if "values" in r and "top_values" in r]
    if labels:
        t = Table(title="class labels", title_justify="left")
        for col in ("feature", "distinct", "most frequent"):
            t.add_column(col, justify="right" if col == "distinct" else "left")
        for r in labels:
            top = ", ".join(f"{x['value']} ({x['count']:,})" for x in r["top_values"][:8])
            _row(t, r["feature"], num(r["distinct"]), top)
        yield from _render(t)
    lists = [r for r in rows if "list_lengths" in r]
    if lists:
        t = Table(title="values per record", title_justify="left")
        for col in ("feature", "min", "mean", "max"):
            t.add_column(col, justify="left" if col == "feature" else "right")
        for r in lists:
            n = r["list_lengths"]
            _row(t, r["feature"], num(n["min"]), num(n["mean"]), num(n["max"]))
        yield from _render(t)


def _short(text: str, most: int = 24) -> str:
    return repr(text) if len(text) <= most else repr(text[:most]) + "…"


def _compare_text(cmp: Comparison) -> Iterator[str]:
    from rich.table import Table

    def side(v: Any) -> str:
        split = f" split {v.split}" if v.split else ""
        return f"version {v.version}{split} ({counted(v.records, 'record', grouped=True)})"

    yield f"dataset {cmp.a.dataset}: A = {side(cmp.a)}, B = {side(cmp.b)}"
    t = Table(title_justify="left")
    for col in ("feature", "L-inf", "missing A→B", "min A→B", "max A→B", "mean A→B", "new values", "vanished values"):
        t.add_column(col)
    for f in cmp.features:
        if f.only_in is not None:
            _row(t, f.name, "-", f"only in {f.only_in.upper()}", "", "", "", "", "")
            continue
        distance = "-" if f.linf is None else f"{f.linf:.3f}" + (" !" if f.linf > DRIFT_SHOWN else "")
        _row(t,
            f.name, distance, f"{f.missing[0]:.2%}→{f.missing[1]:.2%}",
            f"{num(f.range[0])}→{num(f.range[2])}", f"{num(f.range[1])}→{num(f.range[3])}",
            f"{num(f.mean[0])}→{num(f.mean[1])}", ", ".join(map(_short, f.new_values[:5])),
            ", ".join(map(_short, f.vanished_values[:5])),
        )  # fmt: skip
    yield from _render(t)
    yield f"! marks an L-infinity distance above {DRIFT_SHOWN} (drift between A and B)"


@verb
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (default: this machine only; 0.0.0.0: everyone).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to listen on.")] = 8765,
) -> Output:
    try:
        from catalog.web import serve as run
    except ImportError as e:
        from catalog.errors import DependencyError

        extra = "pip install 'tfrecord-catalog[web]'"
        raise DependencyError(f"catalog serve needs the web extra: {extra} ({e.name} is missing)") from None
    root = open_catalog().root  # a missing catalog: one line, before anything listens

    def listening() -> None:  # said once the port is ours: a port in use is the one error line
        typer.echo(f"serving {root} at http://{host}:{port}/ (read only; Ctrl-C stops)", err=True)

    run(root, host, port, listening)
    return Output()
