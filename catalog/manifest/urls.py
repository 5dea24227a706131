"""Database URLs: ``postgresql://`` means psycopg 3, and the forms of a URL that may be printed
or recorded (never a password). Strings only: no engine, no connection.
"""

from __future__ import annotations

import os

from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError

from catalog.errors import ManifestError


def normalize_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (SQLAlchemy alone would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


# libpq (and so psycopg) also takes the password as a query parameter: ...?password=...
PASSWORD_QUERY_KEY = "password"


def safe_url(url: str) -> str:
    """``url`` without its password (``user:pw@`` or ``?password=``): the form that may be
    recorded or printed."""
    try:
        bare = make_url(url)._replace(password=None).difference_update_query([PASSWORD_QUERY_KEY])
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return "<unparsable database URL>"
    return bare.render_as_string(hide_password=False)


def _passwords(url: str) -> list[str]:
    """Every password ``url`` carries, in its user part or its query."""
    try:
        u = make_url(normalize_url(url))
    except (ArgumentError, ValueError):
        return []
    query = u.query.get(PASSWORD_QUERY_KEY, ())
    return [p for p in [u.password, *([query] if isinstance(query, str) else query)] if p]


def has_password(url: str) -> bool:
    return bool(_passwords(url))


def redact(text: str) -> str:
    """``text`` with any password this process was given (in $CATALOG_DB_URL or $PGPASSWORD)
    masked: a last line of defence for messages that quote a driver's words."""
    secrets = [os.environ.get("PGPASSWORD"), *_passwords(os.environ.get("CATALOG_DB_URL") or "sqlite://")]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def check_port(url: str) -> None:
    """SQLAlchemy parses a URL's port with a bare int(): a ValueError that would name no URL."""
    try:
        make_url(url)
    except ArgumentError:  # create_engine says so in its own words
        pass
    except ValueError:
        netloc = url.partition("://")[2].split("/")[0].split("?")[0]
        port = netloc.rpartition("@")[2].rpartition(":")[2]  # never the user:password part
        raise ManifestError(f"bad database URL: its port {port!r} is not a number") from None
