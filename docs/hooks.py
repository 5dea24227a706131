"""MkDocs hooks: pages whose text is made from the code, so they cannot drift from it.

``<!-- cli-reference -->`` becomes the reference of every command (catalog/cli/reference.py);
``<!-- error-reference -->`` the reference of every error class (the same module);
``<!-- manifest-tables -->`` the manifest's tables (catalog/manifest/reference.py);
``<!-- changelog -->`` becomes CHANGELOG.md. The schema JSON form's JSON Schema, package data,
is published beside reference/schema.md as the file the package ships.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
JSON_SCHEMA = ROOT / "catalog" / "schema" / "schema.schema.json"


def _cli() -> str:
    from catalog.cli.reference import markdown

    return markdown()


def _errors() -> str:
    from catalog.cli.reference import errors_markdown

    return errors_markdown()


def _tables() -> str:
    from catalog.manifest.reference import markdown

    return markdown()


def _changelog() -> str:
    return (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").split("\n", 1)[1]  # its own title dropped


MADE: dict[str, Callable[[], str]] = {
    "<!-- cli-reference -->": _cli,
    "<!-- error-reference -->": _errors,
    "<!-- manifest-tables -->": _tables,
    "<!-- changelog -->": _changelog,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    for marker, make in MADE.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown


def on_files(files: Any, config: Any, **_: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "reference/schema.schema.json", abs_src_path=str(JSON_SCHEMA)))
    return files
