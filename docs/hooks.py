"""MkDocs hooks: pages whose text is made from the code, so they cannot drift from it.

``<!-- cli-reference -->`` becomes the reference of every command (catalog/cli/reference.py);
``<!-- changelog -->`` becomes CHANGELOG.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def on_page_markdown(markdown: str, **_: Any) -> str:
    if "<!-- cli-reference -->" in markdown:
        from catalog.cli.reference import markdown as cli_reference

        markdown = markdown.replace("<!-- cli-reference -->", cli_reference())
    if "<!-- changelog -->" in markdown:
        changes = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
        markdown = markdown.replace("<!-- changelog -->", changes.split("\n", 1)[1])  # its own title dropped
    return markdown
