"""`catalog serve`: a read-only web viewer over a catalog (the `web` extra: Starlette, Jinja2,
uvicorn). See ``app`` for the routes and their JSON twins."""

from catalog.web.app import create_app, serve

__all__ = ["create_app", "serve"]
