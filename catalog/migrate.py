"""The operations of migration scripts, under the name scripts import them by:
``from catalog.migrate import AddField, CastField, DropField, RenameField, Transform``.
They live in catalog.migrations.operations."""

from catalog.migrations.operations import AddField, CastField, DropField, Operation, RenameField, Transform

__all__ = ["AddField", "CastField", "DropField", "Operation", "RenameField", "Transform"]
