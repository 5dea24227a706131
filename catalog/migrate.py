"""The operations of migration scripts, under the name scripts import them by:
``from catalog.migrate import AddField, CastField, DropField, RenameField, Transform``.
They live in catalog.ops.migrations.operations; this name is kept for scripts and users."""

from catalog.errors import MigrationError
from catalog.ops.migrations import operations as _operations
from catalog.ops.migrations.operations import AddField, CastField, DropField, Operation, RenameField, Transform

# Not what scripts declare but what the runner does with it (check, compile, evolve a schema,
# read stored operations back): kept under this name for callers that import them from it.
check_operations, compile_steps = _operations.check_operations, _operations.compile_steps
evolve, from_json = _operations.evolve, _operations.from_json

__all__ = [
    "AddField", "CastField", "DropField", "MigrationError", "Operation", "RenameField", "Transform",
    "check_operations", "compile_steps", "evolve", "from_json",
]  # fmt: skip
