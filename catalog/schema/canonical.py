"""A schema's fingerprint from its JSON form alone (the standard library only): the manifest
keeps it beside the stored JSON, so a reader that only shows a schema (``catalog show``) can
tell that text is still what a parsed :class:`~catalog.schema.model.Schema` wrote without
loading NumPy and the codec to parse it again."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def fingerprint(doc: Any) -> str:
    """sha256 of ``doc``'s canonical JSON text (keys sorted, no spaces)."""
    canon = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()
