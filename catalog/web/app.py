"""The viewer's web application: Starlette routes over ``pages``, Jinja2 templates (every value
escaped), and a JSON twin of every page (``?format=json``, or the same path under ``/api``).

Read-only by construction: the routes answer GET (and HEAD) alone, and each calls only the
reading functions of ``pages``; no route serves a file (pictures travel inside the pages as
data URIs, styles and charts are inline; ``/datasets/NAME/value`` serves one decoded value of
one record), so no URL can reach a file, in the catalog or outside.

Bounded in bytes: a page holds at most MOST_ROWS rows, each value whole up to VALUE_BYTES of
JSON, pictures up to IMAGE_BYTES each and PAGE_IMAGE_BYTES a page; a longer value is folded
to a preview and a link to ``/datasets/NAME/value?version=V&row=I&feature=F``; any other
text past TEXT_CHARS (a description, a commit message) is cut to its start (``pages.bounded``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from catalog.api import Catalog, Dataset
from catalog.errors import CatalogError, DatasetNotFoundError, StorageError, UsageError, VersionNotFoundError
from catalog.web import pages
from catalog.web.charts import bars, histogram
from catalog.words import counted

Build = Callable[[Request], dict[str, Any]]


def _templates() -> Environment:
    env = Environment(loader=PackageLoader("catalog.web", "templates"), autoescape=select_autoescape(["html"]))
    env.globals.update(histogram=histogram, bars=bars)
    env.filters["num"] = _num
    env.filters["counted"] = lambda n, noun: counted(n, noun, grouped=True)  # "1 record", "1,234 records"
    return env


def _num(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 18:  # (int() refuses some digits isdigit() takes)
        raise UsageError(f"?{name}= takes a whole number below 10**18, got {text[:40]!r}")
    return int(text)


def _wants_json(request: Request) -> bool:
    """A page's JSON twin: the same path under /api, or ?format=json."""
    return request.url.path.startswith("/api") or request.query_params.get("format") == "json"


def _version(request: Request) -> str | None:
    return request.query_params.get("version") or None  # digits or a tag: the catalog tells them apart


# Served on this machine only, the viewer answers requests named for this machine only: a page
# elsewhere whose name resolves here (DNS rebinding) gets 400, not the catalog's data.
LOOPBACK_NAMES = ["127.0.0.1", "localhost", "::1", "[::1]"]


def _failed(env: Environment, root: str, request: Request, e: CatalogError) -> Response:
    status = 404 if isinstance(e, (DatasetNotFoundError, VersionNotFoundError)) else 400
    if _wants_json(request):
        return JSONResponse({"error": str(e)}, status_code=status)
    return HTMLResponse(env.get_template("error.html").render(error=str(e), root=root), status_code=status)


def _value(ds: Dataset, request: Request) -> Response:
    """``/datasets/NAME/value?row=I&feature=F`` (``&version=``, ``&split=``): one value whole."""
    feature, row = request.query_params.get("feature", ""), _int(request, "row", 0)
    split = request.query_params.get("split") or None
    body, media = pages.full_value(ds, _version(request), split, row, feature)
    # nosniff: text stays text (never run as a page); sandbox: nothing served here runs script
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    if media == "application/octet-stream":
        name = f"{ds.name}-row{row}-{feature}"  # a header is latin-1: ASCII only
        safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in name)
        headers["Content-Disposition"] = f'attachment; filename="{safe}.bin"'
    return Response(body, media_type=media, headers=headers)


def create_app(root: str | Path, hosts: list[str] | None = None) -> Starlette:
    """The viewer of the catalog at ``root`` (opened once, read only); ``hosts``: the only
    Host names it answers (None: any)."""
    cat = Catalog.open(root)
    env = _templates()

    def failed(request: Request, e: CatalogError) -> Response:
        return _failed(env, str(cat.root), request, e)

    def page(template: str, build: Build) -> Callable[[Request], Any]:
        # not async: Starlette runs a plain function on its thread pool, so a slow page (rows
        # far into a compressed dataset) does not hold up every other request on the event loop
        def endpoint(request: Request) -> Response:
            try:
                data = pages.bounded(build(request))
            except CatalogError as e:
                return failed(request, e)
            if _wants_json(request):
                return JSONResponse(data)
            query = dict(request.query_params)
            context = {"data": data, "root": str(cat.root), "query": query, "path": request.url.path}
            return HTMLResponse(env.get_template(template).render(**context))

        return endpoint

    def value(request: Request) -> Response:
        """One feature of one row, whole: what a folded value links to."""
        try:
            return _value(dataset(request), request)
        except CatalogError as e:
            return failed(request, e)

    def dataset(request: Request) -> Any:
        return cat.dataset(request.path_params["name"])

    builds: list[tuple[str, str, Build]] = [
        ("/", "catalog.html", lambda r: pages.catalog_page(cat, _int(r, "page", 1))),
        ("/datasets/{name}", "dataset.html",
         lambda r: pages.dataset_page(dataset(r), _version(r), r.query_params.get("diff"), _int(r, "page", 1),
                                      _int(r, "history", 1))),
        ("/datasets/{name}/stats", "stats.html",
         lambda r: pages.stats_page(dataset(r), _version(r), r.query_params.get("split") or None)),
        ("/datasets/{name}/compare", "compare.html",
         lambda r: pages.compare_page(dataset(r), r.query_params.get("a", ""), r.query_params.get("b", ""))),
        ("/datasets/{name}/rows", "rows.html",
         lambda r: pages.rows_page(dataset(r), _version(r), r.query_params.get("split") or None, _int(r, "offset", 0),
                                   _int(r, "limit", pages.ROWS_PER_PAGE), not _wants_json(r))),
    ]  # fmt: skip
    routes = []
    for path, template, build in builds:
        routes.append(Route(path, page(template, build), methods=["GET"]))
        routes.append(Route("/api" + ("/datasets" if path == "/" else path), page(template, build), methods=["GET"]))
    routes.append(Route("/datasets/{name}/value", value, methods=["GET"]))
    routes.append(Route("/api/datasets/{name}/value", value, methods=["GET"]))
    middleware = [] if hosts is None else [Middleware(TrustedHostMiddleware, allowed_hosts=hosts)]
    app = Starlette(routes=routes, middleware=middleware)
    app.state.catalog = cat
    return app


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, or one line saying why not (a port in use, a host that
    is no address of this machine): uvicorn would log it and exit 3."""
    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as e:
        raise StorageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


def serve(
    root: str | Path, host: str = "127.0.0.1", port: int = 8765, listening: Callable[[], None] | None = None
) -> None:
    """Run the viewer until Ctrl-C (uvicorn, one process); ``listening`` runs once it listens."""
    import uvicorn

    loopback = host in LOOPBACK_NAMES or host.startswith("127.")
    app = create_app(root, [*LOOPBACK_NAMES, host] if loopback else None)
    sock = listen(host, port)
    if listening is not None:
        listening()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
