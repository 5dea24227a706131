"""The viewer (`catalog serve`) through the ASGI test client: every page and its JSON twin,
escaping, read-only routes, no file reachable by URL, paged shards, pictures."""

from __future__ import annotations

import base64
import hashlib
import io
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the viewer needs the web extra (starlette)")
from starlette.testclient import TestClient

from catalog import Catalog
from catalog.web import create_app

NAMES_HINT = "(`catalog list` names the datasets there are)"  # a name no dataset has, where others exist

EVIL = "<script>alert(1)</script>"


def png(seed: int) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 255, (12, 10, 3)).astype(np.uint8)).save(out, "PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("web") / "cat"
    cat = Catalog.init(root)
    schema = {
        "features": {
            "image": {"dtype": "bytes", "encoding": "image", "format": "png"},
            "px": {"dtype": "uint8", "shape": [6, 5, 3], "encoding": "tensor"},
            "label": {"dtype": "int64", "names": ["cat", "dog"]},
            "text": {"dtype": "string"},
        }
    }
    ds = cat.register("pics", schema, description=EVIL)
    rows = [
        {"image": png(i), "px": np.full((6, 5, 3), i, np.uint8), "label": i % 2, "text": EVIL if i == 3 else f"t{i}"}
        for i in range(30)
    ]
    ds.append_rows(rows, message=EVIL)
    ds.append_rows(rows[:10], split="validation")
    ds.tag("v-one", version=2)
    many = cat.register("many", {"features": {"x": {"dtype": "int64"}}})
    many.append_rows([{"x": i} for i in range(250)], shard_records=1)  # 250 shards: three pages
    bare = cat.register("bare", {"features": {"x": {"dtype": "int64"}}})
    bare.append_rows([{"x": i} for i in range(30)], shard_records=10)
    cat.close()
    with sqlite3.connect(root / "catalog.db") as conn:  # shards from before record indexes (format 3)
        conn.execute("UPDATE shards SET index_checksum = NULL WHERE path LIKE 'bare/%'")
    for idx in (root / "data" / ".index").glob("bare/*"):  # (shards this small keep none)
        idx.unlink()
    return root


@pytest.fixture(scope="module")
def client(root: Path) -> Any:
    return TestClient(create_app(root))


PAGES = [
    ("/", "pics"),
    ("/datasets/pics", "History"),
    ("/datasets/pics?version=v-one", "version 2"),
    ("/datasets/pics?diff=1..3", "Schema 1 → 3"),
    ("/datasets/pics/stats", "filled (default)"),
    ("/datasets/pics/stats?split=validation", "split validation"),
    ("/datasets/pics/compare?a=train&b=validation", "L-infinity"),
    ("/datasets/pics/compare", "splits: train, validation"),
    ("/datasets/pics/rows?offset=5&limit=5", "rows 5 to 9 of 40"),  # was "5 to 10": rows 5-9 (issue 30)
]


@pytest.mark.parametrize(("url", "text"), PAGES)
def test_every_page_and_its_json_twin(client: Any, url: str, text: str) -> None:
    page = client.get(url)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert text in page.text
    sep = "&" if "?" in url else "?"
    twin = client.get(url + sep + "format=json")
    api = client.get("/api" + ("/datasets" if url == "/" else url))
    assert twin.status_code == 200 and twin.headers["content-type"] == "application/json"
    assert twin.json() == api.json()


def test_json_carries_the_figures(client: Any) -> None:
    cat = client.get("/api/datasets").json()["datasets"]
    pics = next(d for d in cat if d["name"] == "pics")
    assert pics["records"] == 40 and pics["splits"]["validation"]["records"] == 10
    assert pics["last_commit"]["version"] == 3
    stats = client.get("/api/datasets/pics/stats?split=train").json()
    label = next(f for f in stats["features"] if f["feature"] == "label")
    assert label["present"] == 30 and label["top_values"][0]["value"] in ("0 (cat)", "1 (dog)")
    rows = client.get("/api/datasets/pics/rows?offset=2&limit=3").json()
    assert [r["index"] for r in rows["rows"]] == [2, 3, 4]
    assert base64.b64decode(rows["rows"][0]["values"]["image"]) == png(2)


def test_values_are_escaped(client: Any) -> None:
    for url in ["/", "/datasets/pics", "/datasets/pics/rows?offset=0&limit=10", "/datasets/pics/stats"]:
        html = client.get(url).text
        assert EVIL not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get("/datasets/pics/rows?limit=10").text
    assert "&lt;script&gt;" in client.get("/datasets/pics").text  # the description and commit message


def test_pictures(client: Any) -> None:
    html = client.get("/datasets/pics/rows?offset=0&limit=2").text
    encoded = base64.b64encode(png(0)).decode()
    assert f'src="data:image/png;base64,{encoded}"' in html  # the stored bytes as they are
    assert html.count("<img ") == 4  # the PNG and the uint8 tensor, rendered, in each row


def test_shards_are_paged(client: Any) -> None:
    first = client.get("/api/datasets/many").json()["shards"]
    assert (first["total"], first["pages"], len(first["items"])) == (250, 3, 100)
    third = client.get("/api/datasets/many?page=3").json()["shards"]
    assert len(third["items"]) == 50 and third["items"][0]["state"] == "ok"
    every = {s["path"] for p in (1, 2, 3) for s in client.get(f"/api/datasets/many?page={p}").json()["shards"]["items"]}
    assert len(every) == 250


def test_bad_requests_are_one_line(client: Any) -> None:
    missing = client.get("/datasets/nope")
    assert missing.status_code == 404 and "no dataset" in missing.text.lower()
    assert client.get("/api/datasets/nope").json()["error"] == "no dataset named 'nope' " + NAMES_HINT
    assert client.get("/api/datasets/pics/rows?offset=x").status_code == 400
    assert client.get("/api/datasets/pics?version=99").status_code == 404
    assert client.get("/api/datasets/pics/compare?a=train&b=nope").status_code in (400, 404)


HUGE = "9" * 30


@pytest.mark.parametrize(
    "url",
    [
        f"/api/datasets/pics?page={HUGE}",
        "/api/datasets/pics?page=\u00b2",
        f"/api/datasets/pics?version={HUGE}",
        "/api/datasets/pics?version=\u00b2",
        f"/api/datasets/pics/compare?a={HUGE}&b=1",
        "/api/datasets/pics/compare?a=\u00b2&b=1",
        f"/api/datasets/pics?diff=1..{HUGE}",
        "/api/datasets/pics?diff=\u00b2..1",
        f"/api/datasets/pics/rows?offset={HUGE}",
        f"/api/datasets/pics/stats?version={HUGE}",
        "/api/datasets/pics/rows?split=train[:" + "9" * 5000 + "]",  # int() of 5,000 digits: a ValueError
        "/api/datasets/pics/rows?split=train[:\u0663]",
    ],
)
def test_odd_numbers_are_a_client_error(client: Any, url: str) -> None:
    """Numbers beyond SQLite's integers, and digits that are not ASCII (int() refuses '\u00b2'
    though str.isdigit() takes it), were a plain-text 500: now a 4xx with a JSON error."""
    answer = client.get(url)
    assert answer.status_code in (400, 404), (url, answer.status_code, answer.text[:200])
    assert answer.json()["error"]


def test_a_split_bound_of_5000_digits_is_a_400_naming_the_position(client: Any) -> None:
    """It was a 500 (a ValueError from int()): the HTML page and its twin say what is wrong."""
    spec = "train[:" + "9" * 5000 + "]"
    page = client.get("/datasets/pics/rows", params={"split": spec})
    assert page.status_code == 400 and "at character 8: a number of 5,000 digits (at most 18)" in page.text
    assert len(page.content) < 10_000  # the spec is quoted by its start, not whole
    error = client.get("/api/datasets/pics/rows", params={"split": spec}).json()["error"]
    assert error.endswith("at character 8: a number of 5,000 digits (at most 18)")


def test_read_only_and_no_files(client: Any, root: Path) -> None:
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}
    for url, _text in PAGES:
        client.get(url)
    rows = client.get("/api/datasets/bare/rows?offset=12&limit=5").json()["rows"]  # shards without an index
    assert [r["values"]["x"] for r in rows] == [12, 13, 14, 15, 16]
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/datasets/pics").status_code == 405
    hostile = ["/catalog.db", "/data/pics", "/../catalog.db", "/datasets/..%2F..%2Fcatalog.db", "/static/../../etc"]
    for url in [*hostile, "/datasets/pics/rows/../../catalog.db"]:
        answer = client.get(url)
        assert answer.status_code == 404, url
        assert b"SQLite format" not in answer.content
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()}
    assert after == before  # nothing written, not even an index


def test_serve_binds_this_machine_by_default(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    import catalog.web
    from catalog.cli import app

    seen: dict[str, Any] = {}
    monkeypatch.setattr(catalog.web, "serve", lambda where, host, port, listening: seen.update(host=host, port=port))
    result = CliRunner().invoke(app, ["-C", str(root), "serve"])
    assert result.exit_code == 0, result.output
    assert (seen["host"], seen["port"]) == ("127.0.0.1", 8765)
    CliRunner().invoke(app, ["-C", str(root), "serve", "--host", "0.0.0.0", "--port", "9000"])
    assert (seen["host"], seen["port"]) == ("0.0.0.0", 9000)


def test_serve_on_a_taken_port_is_one_line(root: Path) -> None:
    import socket

    from typer.testing import CliRunner

    from catalog.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["-C", str(root), "serve", "--port", str(port)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"]
    bad = CliRunner().invoke(app, ["-C", str(root), "serve", "--host", "999.1.1.1"])
    assert bad.exit_code == 1 and bad.stderr.splitlines()[-1].startswith("error: cannot listen on 999.1.1.1:8765")


def test_a_slow_page_does_not_hold_up_the_others(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages were built on the event loop: a rows page reading far into a compressed dataset
    (23 s) held every other request, /api/datasets too, until it was done. Here the slow page
    waits until another request has been answered: on the loop, that could never happen."""
    import threading

    import anyio
    import httpx

    import catalog.web.pages as pages

    answered = threading.Event()
    rows_page = pages.rows_page
    waited: list[bool] = []

    def slow_rows_page(*args: Any, **kwargs: Any) -> Any:
        waited.append(answered.wait(timeout=20))
        return rows_page(*args, **kwargs)

    monkeypatch.setattr(pages, "rows_page", slow_rows_page)

    async def main() -> None:
        transport = httpx.ASGITransport(app=create_app(root))
        async with httpx.AsyncClient(transport=transport, base_url="http://viewer") as client:

            async def slow() -> None:
                assert (await client.get("/api/datasets/pics/rows")).status_code == 200

            async def fast() -> None:
                assert (await client.get("/api/datasets")).status_code == 200
                answered.set()

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(slow)
                await anyio.sleep(0.1)
                tasks.start_soon(fast)

    anyio.run(main)
    assert waited == [True]


def test_served_on_this_machine_it_answers_this_machine_only(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page on another site whose name resolves to 127.0.0.1 (DNS rebinding) could read a
    local viewer: served on a loopback address, the viewer answers its own names only."""
    import catalog.web.app as web_app

    made: list[Any] = []
    monkeypatch.setattr(web_app, "listen", lambda host, port: made.append((host, port)))

    class Server:
        def __init__(self, config: Any) -> None:
            made.append(config.app)

        def run(self, sockets: Any) -> None:
            pass

    import uvicorn

    monkeypatch.setattr(uvicorn, "Server", Server)
    web_app.serve(root, "127.0.0.1", 8765)
    local = TestClient(made[-1], base_url="http://127.0.0.1:8765")
    assert local.get("/api/datasets").status_code == 200
    assert TestClient(made[-1], base_url="http://localhost:8765").get("/api/datasets").status_code == 200
    rebound = TestClient(made[-1], base_url="http://evil.example:8765")
    assert rebound.get("/api/datasets").status_code == 400
    web_app.serve(root, "0.0.0.0", 8765)  # served to everyone (--host): any name
    assert TestClient(made[-1], base_url="http://evil.example").get("/api/datasets").status_code == 200


def test_history_and_datasets_are_paged(tmp_path: Path) -> None:
    """The dataset page held its whole history on every page (3,000 commits: 426 KB), the
    catalog page every dataset with a query each; a page past the last said 'page 31 of 30'."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
    for i in range(104):  # 105 versions with the first: two pages of history
        ds.append_rows([{"x": i}])
    for i in range(101):
        cat.register(f"e{i:03d}", {"features": {"x": {"dtype": "int64"}}})
    client = TestClient(create_app(tmp_path / "cat"))
    first = client.get("/api/datasets/d").json()
    assert first["history_page"] == {"page": 1, "per_page": 100, "total": 105, "pages": 2}
    assert [c["version"] for c in first["history"]] == list(range(6, 106))  # the newest, oldest first
    older = client.get("/api/datasets/d?history=2").json()
    assert [c["version"] for c in older["history"]] == [1, 2, 3, 4, 5]
    assert client.get("/api/datasets/d?history=99").json()["history_page"]["page"] == 2  # the last
    assert "older →" in client.get("/datasets/d").text
    listed = client.get("/api/datasets").json()
    assert (len(listed["datasets"]), listed["datasets_page"]["pages"]) == (100, 2)
    rest = client.get("/api/datasets?page=2").json()["datasets"]
    assert [d["name"] for d in rest] == ["e099", "e100"]
    shards = client.get("/api/datasets/d?page=31").json()["shards"]
    assert (shards["page"], shards["pages"]) == (2, 2) and len(shards["items"]) == 4


def test_a_page_reads_its_own_commits_and_datasets_only(tmp_path: Path) -> None:
    """At 10,000 datasets and 1,000 commits a page must not read every one: the dataset page's
    history is one LIMIT query and the shard sums of its versions only; the catalog page sums
    the shards of its own datasets only (every dataset's was a pass over every shard)."""
    from sqlalchemy import Engine, event

    with Catalog.init(tmp_path / "cat") as cat:
        ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
        for i in range(3):
            ds.append_rows([{"x": i}])
        cat.register("e", {"features": {"x": {"dtype": "int64"}}})
    client = TestClient(create_app(tmp_path / "cat"))
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        sent.append(" ".join(sql.split()))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        client.get("/api/datasets/d")
        history = [s for s in sent if s.startswith("SELECT commits.id") and "ORDER BY commits.version" in s]
        sums = [s for s in sent if "GROUP BY shards.added_version" in s or "GROUP BY shards.removed_version" in s]
        sent.clear()
        client.get("/api/datasets")
        per_split = [s for s in sent if "GROUP BY shards.dataset_id, shards.split" in s]
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert history and all("LIMIT" in s for s in history), history
    assert sums and all("_version >=" in s for s in sums), sums
    assert per_split and all("shards.dataset_id IN" in s for s in per_split), per_split


# --------------------------------------------------------------------------- values as cat shows them, bounded

BIG = 8 << 20  # one value far past any page's budget (the report's was 50 MB)


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("wide") / "cat"
    cat = Catalog.init(root)
    schema = {
        "features": {
            "score": {"dtype": "float32"},
            "label": {"dtype": "int64", "names": ["airplane", "bird"]},
            "text": {"dtype": "string"},
            "blob": {"dtype": "bytes"},
            "image": {"dtype": "bytes", "encoding": "image", "format": "png"},
        }
    }
    ds = cat.register("w", schema)
    noise = np.random.default_rng(0).integers(0, 255, (600, 600, 3)).astype(np.uint8)
    out = io.BytesIO()
    from PIL import Image

    Image.fromarray(noise).save(out, "PNG")
    big_png = out.getvalue()  # about 1 MB: past an inline picture's bound
    rows = [
        {"score": 0.5048646330833435, "label": 1, "text": "short", "blob": b"\x00\x01", "image": png(0)},
        {"score": 0.25, "label": 0, "text": "x" * BIG, "blob": b"\xff" * BIG, "image": big_png},
    ]
    ds.append_rows(rows)
    cat.close()
    return TestClient(create_app(root)), big_png


def test_values_are_shown_as_cat_prints_them(wide: Any) -> None:
    """The viewer printed float64 digits (0.5048646330833435) where cat prints float32's
    (0.50486463), and a label with names as 0, not 'bird (0)'."""
    client, _ = wide
    html = client.get("/datasets/w/rows?limit=1").text
    assert "0.50486463<" in html and "0.5048646330833435" not in html
    assert "bird (1)" in html
    row = client.get("/api/datasets/w/rows?limit=1").json()["rows"][0]
    assert row["values"]["score"] == 0.50486463 and row["values"]["label"] == 1  # numbers stay numbers
    assert row["labels"] == {"label": "bird"}


def test_the_heading_names_the_rows_shown(client: Any) -> None:
    """'rows 0 to 20' headed a page of rows 0-19."""
    assert "rows 5 to 9 of 40" in client.get("/datasets/pics/rows?offset=5&limit=5").text
    assert "rows 0 to 19 of 40" in client.get("/datasets/pics/rows").text
    assert "rows 39 to 39 of 40" in client.get("/datasets/pics/rows?offset=39").text


def test_a_huge_value_is_folded_in_the_page_and_its_twin(wide: Any) -> None:
    """One 50 MB string made a 50 MB page: each value is now at most a preview and a link."""
    client, _ = wide
    page = client.get("/datasets/w/rows")
    assert page.status_code == 200 and len(page.content) < 64 << 10, len(page.content)
    twin = client.get("/api/datasets/w/rows")
    assert len(twin.content) < 64 << 10, len(twin.content)
    values = twin.json()["rows"][1]["values"]
    text = values["text"]
    assert text["folded"] is True and text["bytes"] == BIG and text["preview"].startswith("xxxx")
    assert text["href"] == "/datasets/w/value?version=2&row=1&feature=text"
    assert values["blob"]["preview"] == f"<bytes {BIG:,}: ffffffff…>"
    assert twin.json()["rows"][0]["values"]["blob"] == "AAE="  # small values stay whole
    assert 'href="/datasets/w/value?version=2&amp;row=1&amp;feature=text"' in page.text


def test_the_full_value_of_one_feature_of_one_row(wide: Any) -> None:
    client, big_png = wide
    text = client.get("/datasets/w/value?version=2&row=1&feature=text")
    assert text.status_code == 200 and text.headers["content-type"] == "text/plain; charset=utf-8"
    assert text.text == "x" * BIG
    blob = client.get("/datasets/w/value?row=1&feature=blob")
    assert blob.headers["content-type"] == "application/octet-stream" and blob.content == b"\xff" * BIG
    assert blob.headers["content-disposition"] == 'attachment; filename="w-row1-blob.bin"'
    image = client.get("/datasets/w/value?row=1&feature=image")
    assert image.headers["content-type"] == "image/png" and image.content == big_png
    assert image.headers["x-content-type-options"] == "nosniff"
    score = client.get("/datasets/w/value?row=0&feature=score")
    assert score.headers["content-type"] == "application/json" and score.json() == 0.50486463
    for url, status in [
        ("/datasets/w/value?row=2&feature=text", 400),
        ("/datasets/w/value?row=0&feature=nope", 400),
        ("/datasets/w/value?row=0", 400),
        ("/datasets/nope/value?row=0&feature=text", 404),
    ]:
        answer = client.get(url)
        assert answer.status_code == status, (url, answer.status_code)
        assert len(answer.content) < 10_000


def test_a_picture_past_its_bound_is_a_link(wide: Any) -> None:
    client, _ = wide
    html = client.get("/datasets/w/rows").text
    assert html.count("<img ") == 1  # the small PNG inline; the 1 MB one is a link
    assert 'href="/datasets/w/value?version=2&amp;row=1&amp;feature=image"' in html


def test_long_texts_are_folded_on_every_page(tmp_path: Path) -> None:
    """A description or commit message of a megabyte made every page that shows it that large."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}}, description="d" * (1 << 20))
    for i in range(3):
        ds.append_rows([{"x": i}], message="m" * (1 << 20))
    client = TestClient(create_app(tmp_path / "cat"))
    for url in ["/", "/datasets/d", "/datasets/d/stats", "/datasets/d/compare?a=1&b=4"]:
        for twin in (url, "/api" + ("/datasets" if url == "/" else url)):
            answer = client.get(twin)
            assert answer.status_code == 200 and len(answer.content) < 64 << 10, (twin, len(answer.content))
    message = client.get("/api/datasets/d").json()["history"][-1]["message"]
    assert message.startswith("mmmm") and message.endswith(f"… ({1 << 20:,} characters)")
