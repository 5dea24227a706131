"""demo migration 0001: add source.

Every existing record gets source = "demo". A constant AddField never decodes a record:
the new feature's serialized map entry is spliced into each Example's bytes. The default
also goes into the schema, so rows appended later may leave `source` out.
"""

from catalog.migrate import AddField

operations = [
    AddField("source", {"dtype": "string", "description": "where the record came from"}, default="demo"),
]
