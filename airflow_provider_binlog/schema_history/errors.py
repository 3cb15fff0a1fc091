"""Errors of the schema history."""
from __future__ import annotations

from ..errors import ProviderError


class SchemaHistoryError(ProviderError):
    """The schema history cannot follow the binlog here."""

    default_hint = ("take a new snapshot of the source (backfill mode 'snapshot'), which seeds the "
                    "schema history again at a consistent point")


class DdlSyntaxError(SchemaHistoryError):
    """A DDL statement on a captured schema that the parser cannot follow: the history would be
    a guess from here on, so the dump stops before anything is staged."""


class SchemaDivergenceError(SchemaHistoryError):
    """A TABLE_MAP event does not match the table's schema in the history."""


class SeedConflictError(SchemaHistoryError):
    """The history was read from information_schema after a schema change that the binlog
    still has to replay, and rows of the table were decoded with the newer schema."""

    default_hint = ("start from a snapshot (backfill mode 'snapshot'), or from a position after "
                    "the schema change; the dump published nothing")


__all__ = ["DdlSyntaxError", "SchemaDivergenceError", "SchemaHistoryError", "SeedConflictError"]
