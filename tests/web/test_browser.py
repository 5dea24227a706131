"""The viewer in a real browser: Debian's chromium, headless, driven by playwright (no browser
download: the system's chromium). It loads the catalog, dataset, statistics and rows pages
of the demo catalog, finds their text and their pictures decoded, and no console error.
Screenshots go to $CATALOG_TEST_ARTIFACTS (default: test-artifacts/browser)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog.cli import app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(os.environ.get("CATALOG_TEST_ARTIFACTS", "test-artifacts")) / "browser"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo-out"
    result = CliRunner().invoke(app, ["demo", str(out), "--records", "200"])
    assert result.exit_code == 0, result.output
    assert "catalog -C" in result.stdout and " serve" in result.stdout  # the demo says how to look at it
    return out / "catalog"


@pytest.fixture(scope="module")
def server(demo: Path) -> Iterator[str]:
    uvicorn = pytest.importorskip("uvicorn", reason="the viewer needs the web extra (uvicorn)")
    from catalog.web import create_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(demo), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the viewer did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium; CI installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[test]')")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


PAGES = [
    ("catalog", "/", ["Datasets", "demo"]),
    ("dataset", "/datasets/demo", ["History", "Shards", "Schema"]),
    ("statistics", "/datasets/demo/stats", ["statistics, version", "filled (default)"]),
    ("rows", "/datasets/demo/rows", ["rows 0 to 19"]),  # was "0 to 20" for rows 0-19 (issue 30)
]


@pytest.mark.parametrize(("name", "path", "texts"), PAGES)
def test_pages_in_a_real_browser(browser: Any, server: str, name: str, path: str, texts: list[str]) -> None:
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    response = page.goto(server + path, wait_until="load")
    assert response is not None and response.status == 200
    body = page.inner_text("body")
    for text in texts:
        assert text in body, (name, text)
    images = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth])")
    assert all(done and width > 0 for done, width in images), images
    if name == "rows":
        assert len(images) >= 20  # the demo's image tensor, rendered to PNG, on every row
    if name == "statistics":
        assert page.locator("svg.hist rect").count() > 0
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert problems == []
    page.close()
