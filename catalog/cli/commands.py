"""The ``catalog`` command: every verb, in the order ``catalog --help`` lists them.

The verbs live by subject (``files``, ``datasets``, ``admin``, ``rewrites``); this table
is the one place that names them, so the help's order is read here, not pieced together
from import order.
"""

from __future__ import annotations

import typer

from catalog.cli import admin, changes, datasets, files, indexes, rewrites, rows, statistics
from catalog.cli.base import app

__all__ = ["app"]

for name, fn in [
    ("inspect", files.inspect),
    ("demo", files.demo),
    ("init", admin.init),
    ("register", datasets.register),
    ("list", datasets.list_),
    ("show", datasets.show),
    ("append", datasets.append),
    ("adopt", datasets.adopt),
    ("drop", datasets.drop),
    ("backup", admin.backup),
    ("copy-manifest", admin.copy_manifest),
    ("upgrade", admin.upgrade),
    ("cat", rows.cat),
    ("stats", statistics.stats),
    ("serve", statistics.serve),
    ("verify", admin.verify),
    ("history", datasets.history),
    ("tag", datasets.tag),
    ("tags", datasets.tags),
    ("gc", admin.gc),
    ("index", indexes.index),
    ("migrate", rewrites.migrate),
    ("restore", rewrites.restore),
    ("compact", rewrites.compact),
    ("export", rewrites.export),
    ("delete", changes.delete),
    ("update", changes.update),
    ("dedup", changes.dedup),
    ("filter", changes.filter),
    ("map", changes.map),
    ("lineage", changes.lineage),
    ("refresh", changes.refresh),
]:
    app.command(name, cls=getattr(fn, "command", None))(fn)  # a verb of catalog.cli.generated.takes: its class

migrations_app = typer.Typer(no_args_is_help=True, help="Write and list migration scripts.")
migrations_app.command("new")(rewrites.migrations_new)
migrations_app.command("list")(rewrites.migrations_list)
app.add_typer(migrations_app, name="migrations")
