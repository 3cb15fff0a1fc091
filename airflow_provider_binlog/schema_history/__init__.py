"""The schema of every captured table at every binlog position: seeded from
information_schema at a consistent point, then following the DDL in the binlog.

Modules: :mod:`.model` (the history and its JSON form), :mod:`.ddl` (the DDL parser, with
:mod:`.ddl_model` its statements, :mod:`.ddl_tokens` its tokenizer, :mod:`.ddl_columns`
column definitions),
:mod:`.apply` (applying statements, and what they mean for the Iceberg tables),
:mod:`.check` (TABLE_MAP events against the history), :mod:`.seed` (reading
information_schema), :mod:`.errors`.
"""
from .apply import HistoryFollower
from .check import check_table_map
from .errors import DdlSyntaxError, SchemaDivergenceError, SchemaHistoryError, SeedConflictError
from .model import ColumnDef, SchemaHistory, TableDef
from .seed import seed_history

__all__ = ["ColumnDef", "DdlSyntaxError", "HistoryFollower", "SchemaDivergenceError",
           "SchemaHistory", "SchemaHistoryError", "SeedConflictError", "TableDef",
           "check_table_map", "seed_history"]
