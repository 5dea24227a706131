"""The operations of migration scripts, under the name scripts import them by:
``from catalog.migrate import AddField, CastField, DropField, RenameField, Transform``.
They live in catalog.ops.migrations.operations; this name is kept for scripts and users."""

from catalog.errors import MigrationError
from catalog.ops.migrations.operations import (
    AddField,
    CastField,
    DropField,
    Operation,
    RenameField,
    Transform,
    check_operations,
    compile_steps,
    evolve,
    from_json,
)

__all__ = [
    "AddField", "CastField", "DropField", "MigrationError", "Operation", "RenameField", "Transform",
    "check_operations", "compile_steps", "evolve", "from_json",
]  # fmt: skip
