"""Database URLs (catalog/manifest/urls.py): psycopg 3 for ``postgresql://``, passwords never
printed, a port that is not a number said in one line."""

from __future__ import annotations

import pytest

from catalog.errors import ManifestError
from catalog.manifest.urls import check_port, has_password, normalize_url, redact, safe_url


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgres://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),  # a driver named stays
        ("sqlite:///x.db", "sqlite:///x.db"),
    ],
)
def test_normalize_url_picks_psycopg3_for_plain_postgresql(url: str, normal: str) -> None:
    assert normalize_url(url) == normal


def test_safe_url_drops_the_password_in_either_place_and_keeps_the_rest() -> None:
    assert safe_url("postgresql+psycopg://me:s3cret@host:5432/db") == "postgresql+psycopg://me@host:5432/db"
    assert safe_url("postgresql+psycopg://me@host/db?password=s3cret&sslmode=require") == (
        "postgresql+psycopg://me@host/db?sslmode=require"
    )
    assert safe_url("postgresql://me@host:notaport/db") == "<unparsable database URL>"


def test_has_password_sees_the_user_part_and_the_query() -> None:
    assert has_password("postgres://me:pw@h/db")
    assert has_password("postgresql://me@h/db?password=pw")
    assert not has_password("postgresql://me@h/db")
    assert not has_password("sqlite:///catalog.db")
    assert not has_password("::not a url::")


def test_redact_masks_the_passwords_this_process_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CATALOG_DB_URL", "postgresql://me:hunter2@h/db?password=swordfish")
    monkeypatch.setenv("PGPASSWORD", "pgsecret")
    text = "auth failed for hunter2 / swordfish / pgsecret"
    assert redact(text) == "auth failed for *** / *** / ***"
    monkeypatch.delenv("CATALOG_DB_URL")
    monkeypatch.delenv("PGPASSWORD")
    assert redact(text) == text


def test_check_port_names_the_bad_port_never_the_password() -> None:
    check_port("postgresql+psycopg://me:pw@host:5432/db")  # a good port: nothing to say
    check_port("not a url at all")  # create_engine's own words for that
    with pytest.raises(ManifestError) as e:
        check_port("postgresql+psycopg://me:pw:x@host:54x2/db")
    assert str(e.value) == "bad database URL: its port '54x2' is not a number"
