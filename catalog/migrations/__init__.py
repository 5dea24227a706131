"""Schema migrations: the operations scripts declare (`operations`, also importable as
`catalog.migrate`), the scripts themselves (`scripts`) and running them (`runner`)."""

from catalog.migrations.runner import (
    MigrateReport,
    MigrationResult,
    MigrationStatus,
    migrate,
    new_migration,
    quick_operations,
    status,
)
from catalog.migrations.scripts import MigrationFile, discover, load_operations, sha256_of

__all__ = [
    "MigrateReport", "MigrationFile", "MigrationResult", "MigrationStatus", "discover", "load_operations",
    "migrate", "new_migration", "quick_operations", "sha256_of", "status",
]  # fmt: skip
