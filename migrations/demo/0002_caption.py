"""demo migration 0002: rename text to caption, drop tags.

Both work on the bytes too: renaming rewrites one map entry's key, dropping leaves the
entry out. Readers of versions before this one still see `text` and `tags`.
"""

from catalog.migrate import DropField, RenameField

operations = [
    RenameField("text", "caption"),
    DropField("tags"),
]
