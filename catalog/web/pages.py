"""What each page of the viewer shows, as plain data: the JSON twin is exactly this, and the
HTML page is a template over it. Reads only: every function here opens nothing for writing."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from catalog.api import Catalog, Dataset
from catalog.commit.listing import list_datasets
from catalog.commit.plans import plan
from catalog.commit.values import Commit, VersionRef, iso
from catalog.errors import CatalogError, FeatureNotFoundError, UsageError
from catalog.readers.picking import rows_at
from catalog.schema import Schema, class_name, row_to_json
from catalog.storage import location_size
from catalog.web.images import PREVIEW, Budget, json_size, preview, shown_value, sniff, value_bytes
from catalog.words import counted

SHARDS_PER_PAGE = 100
HISTORY_PER_PAGE = 100
DATASETS_PER_PAGE = 100
ROWS_PER_PAGE = 20
MOST_ROWS = 200


TEXT_CHARS = 4096  # a text (description, commit message, name) shown whole on a page; longer: its start


def bounded(data: Any) -> Any:
    """A page's data with every text longer than TEXT_CHARS cut to its first PREVIEW characters
    and its length: a megabyte's commit message would be a megabyte on every page showing it."""
    if isinstance(data, str):
        return data if len(data) <= TEXT_CHARS else f"{data[:PREVIEW]}… ({len(data):,} characters)"
    if isinstance(data, dict):
        return {k: bounded(v) for k, v in data.items()}
    if isinstance(data, list):
        return [bounded(v) for v in data]
    return data


def _commit(c: Commit) -> dict[str, Any]:
    return {
        "version": c.version, "kind": c.kind, "time": iso(c.time), "author": c.author, "message": c.message,
        "records_added": c.records, "records_removed": c.records_removed, "total_records": c.total_records,
        "total_bytes": c.total_bytes, "schema_version": c.schema_version, "tags": list(c.tags),
    }  # fmt: skip


def paged(total: int, page: int, per_page: int) -> dict[str, int]:
    """Where page ``page`` (from 1; past the last: the last) of ``total`` items lies."""
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    return {"page": page, "per_page": per_page, "total": total, "pages": pages, "offset": (page - 1) * per_page}


def catalog_page(cat: Catalog, page: int = 1) -> dict[str, Any]:
    """The datasets, a page of DATASETS_PER_PAGE: versions, splits, records, bytes, last commit."""
    names = [i.name for i in list_datasets(cat.engine, schemas=False)]  # no schemas, no shards: the count
    at = paged(len(names), page, DATASETS_PER_PAGE)
    after = names[at["offset"] - 1] if at["offset"] else None
    # totals per split for the page's datasets only (every one's would be a pass over every shard)
    infos = list_datasets(cat.engine, splits=True, limit=DATASETS_PER_PAGE, after=after)
    out = []
    for info in infos:  # a query each: a page's only
        last = cat.dataset(info.name).last_commit()
        out.append({**info.to_json(), "schema": None, "last_commit": _commit(last)})
    return {"root": str(cat.root), "datasets": out, "datasets_page": at}


def dataset_page(
    ds: Dataset, version: VersionRef, diff: str | None, page: int, history_page: int = 1
) -> dict[str, Any]:
    """A page of history (newest first), schema at ``version`` (and a diff ``A..B``), splits,
    one page of shards."""
    info = ds.info(version)
    at = paged(info.shard_count, page, SHARDS_PER_PAGE)
    shards = ds.shard_page(info.version, at.pop("offset"), SHARDS_PER_PAGE)
    items = [{**s.to_json(), "relpath": s.relpath, "state": _state(ds, s.relpath, s.location, s.bytes)} for s in shards]
    # Versions are gapless from 1: the handle's version (current when it was looked up) counts
    # the commits, and one page of them is read, not the whole history.
    newest = paged(ds.version, history_page, HISTORY_PER_PAGE)  # page 1: the newest commits
    commits = ds.history(HISTORY_PER_PAGE, skip=newest.pop("offset"))
    return {
        "dataset": info.to_json(),
        "history": [_commit(c) for c in commits],  # oldest first
        "history_page": newest,
        "diff": _diff(ds, diff) if diff else None,
        "shards": {**at, "items": items},
        "lineage": [{**e.to_json(), "text": e.describe()} for e in ds.lineage()],  # derived: back to its sources
    }


def _diff(ds: Dataset, spec: str) -> dict[str, Any]:
    """``A..B``: the schemas of versions (or tags) A and B compared."""
    a, sep, b = spec.partition("..")
    if not sep or not a or not b:
        raise UsageError(f"bad diff {spec!r}: two versions or tags as A..B, e.g. 1..3")
    left, right = ds.schema_at(_ref(a)), ds.schema_at(_ref(b))
    return {"a": a, "b": b, **left.diff(right).to_json()}


def _ref(text: str) -> VersionRef:
    return text  # digits or a tag: the catalog tells them apart (and refuses numbers it cannot hold)


def _state(ds: Dataset, rel: str, location: str | None, registered: int) -> str:
    """A shard's file as a stat sees it (the CRCs are `catalog verify`'s): ok, missing, or its size."""
    try:
        size = location_size(ds.catalog.store.shard_url(rel, location))
    except (OSError, CatalogError):
        return "unreadable"
    if size is None:
        return "missing"
    if size < 0:
        return "not checked (object store)"
    return "ok" if size == registered else f"{counted(size, 'byte')}, {registered} registered"


def stats_page(ds: Dataset, version: VersionRef, split: str | None) -> dict[str, Any]:
    return ds.stats(version, split).to_json()


def compare_page(ds: Dataset, a: str, b: str) -> dict[str, Any]:
    """Two versions, tags or splits compared; without both, what there is to choose from."""
    info = ds.info()
    choices = {"splits": sorted(info.splits or {}), "versions": list(range(1, info.version + 1))}
    comparison = ds.compare_stats(a, b).to_json() if a and b else None
    return {"dataset": ds.name, "a": a, "b": b, **choices, "comparison": comparison}


def rows_page(
    ds: Dataset, version: VersionRef, split: str | None, offset: int, limit: int, html: bool
) -> dict[str, Any]:
    """Rows ``offset`` to ``offset + limit`` as JSON, as `cat` prints them (bytes base64,
    float32's digits), each value whole up to VALUE_BYTES, else folded: ``{"folded": true,
    "bytes": N, "preview": ..., "href": its full value}``; a label's class name in ``labels``.
    For the HTML page each value also gets its shown form (a picture, or a text)."""
    limit = min(max(1, limit), MOST_ROWS)
    offset = max(0, offset)
    selected = plan(ds, version, split)
    schema = selected.schema()
    found = rows_at(ds, selected, None, None, offset, limit)
    link = f"/datasets/{quote(ds.name, safe='')}/value?version={selected.version}"
    if split:
        link += "&split=" + quote(split, safe="")
    budget = Budget()
    rows = [_row(schema, row, offset + i, link, budget if html else None) for i, row in enumerate(found)]
    return {
        "dataset": ds.name, "version": selected.version, "split": split, "offset": offset, "limit": limit,
        "total": selected.records, "rows": rows,
    }  # fmt: skip


def _row(schema: Schema, row: dict[str, Any], index: int, link: str, budget: Budget | None) -> dict[str, Any]:
    feats = schema.all_features
    as_json = row_to_json(schema, row)
    values: dict[str, Any] = {}
    labels: dict[str, str] = {}
    shown: dict[str, Any] = {}
    for name, value in row.items():
        href = f"{link}&row={index}&feature={quote(name, safe='')}"
        if json_size(value, as_json[name]) is None:
            size = value_bytes(value, as_json[name])
            values[name] = {"folded": True, "bytes": size, "preview": preview(value, as_json[name]), "href": href}
        else:
            values[name] = as_json[name]
        label = class_name(feats[name], as_json[name])
        if label is not None:
            labels[name] = label
        if budget is not None:
            shown[name] = shown_value(feats[name], value, as_json[name], href, budget)
    out: dict[str, Any] = {"index": index, "values": values}
    if labels:
        out["labels"] = labels
    if budget is not None:
        out["shown"] = shown
    return out


def full_value(ds: Dataset, version: VersionRef, split: str | None, index: int, feature: str) -> tuple[bytes, str]:
    """One feature of row ``index`` whole, as served: its bytes and their media type (encoded
    pictures as their type, other bytes as a download, text as text, any other value as JSON)."""
    selected = plan(ds, version, split)
    schema = selected.schema()
    if not feature or feature not in schema.all_features:
        have = ", ".join(schema.all_features)
        raise FeatureNotFoundError(f"dataset {ds.name!r} has no feature {feature!r} (features: {have})")
    if index >= selected.records:
        where = f"version {selected.version}" + (f", split {split}," if split else "")
        raise UsageError(f"no row {index:,}: {where} has {selected.records:,} rows")
    row = next(iter(rows_at(ds, selected, [feature], None, index, 1)))
    value = row[feature]
    if isinstance(value, bytes):
        return value, sniff(value) or "application/octet-stream"
    as_json = row_to_json(schema, row)[feature]
    if isinstance(as_json, str) and isinstance(value, str):
        return value.encode("utf-8", "surrogatepass"), "text/plain; charset=utf-8"
    return json.dumps(as_json, ensure_ascii=False).encode(), "application/json"
