"""The names of TFRecord compressions, in one place: the library's checks (``framing``,
``export``), the manifest's values and the CLI's ``--compression`` choices are these.
The standard library only: the CLI reads them without loading the format layer."""

from __future__ import annotations

NONE = "none"  # raw framing; the manifest's value for it
COMPRESSIONS = (NONE, "gzip", "zlib")  # as the manifest stores them and --compression takes them
AUTO = "auto"  # reading only: told from a file's first bytes
SPELLED = f"{', '.join(COMPRESSIONS[:-1])} or {COMPRESSIONS[-1]}"  # "none, gzip or zlib", for messages
