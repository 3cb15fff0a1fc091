"""The one reader of ``information_schema``: every question the provider asks the server about
its databases, tables, columns and keys, one SQL statement per question.

Each function takes any DB-API connection to the server (pymysql) and returns plain rows;
turning them into the codec's :class:`~airflow_provider_binlog.codec.schema.TableSchema`, a
snapshot's ``TableMap`` or a schema history's ``TableDef`` is the caller's business. Errors
are the driver's, unchanged.

- the columns of one table (or view): :func:`table_columns` (``COLUMNS``);
- the columns of every base table of some databases, with the table's collation:
  :func:`base_table_columns` (``COLUMNS`` joined with ``TABLES``);
- the primary key columns of every table of some databases: :func:`primary_key_columns`
  (``KEY_COLUMN_USAGE``);
- the unique indexes of one table: :func:`unique_indexes` (``STATISTICS``);
- the base tables a filter selects: :func:`list_tables` (``TABLES``);
- the estimated rows of tables: :func:`estimated_rows` (``TABLES``);
- the databases and their default charset and collation: :func:`schemata` (``SCHEMATA``).

:func:`enum_labels` parses the labels of an ``enum(...)``/``set(...)`` ``COLUMN_TYPE``.
"""
from __future__ import annotations

import re
from typing import NamedTuple, Optional

from ..common.tables import TableFilter

_ENUM_RE = re.compile(r"'((?:[^']|'')*)'")

_COLUMN_FIELDS = ("c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, "
                  "c.CHARACTER_SET_NAME, c.COLLATION_NAME, c.COLUMN_KEY, c.IS_NULLABLE, "
                  "c.CHARACTER_MAXIMUM_LENGTH, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, "
                  "c.DATETIME_PRECISION, c.COLUMN_DEFAULT, c.EXTRA")


class ColumnInfo(NamedTuple):
    """One row of ``information_schema.COLUMNS``, as the server returns it (not lower-cased)."""
    schema: str
    table: str
    name: str
    data_type: str                      # DATA_TYPE: "int", "varchar", "enum", ...
    column_type: str                    # COLUMN_TYPE: "int(10) unsigned", "enum('a','b')", ...
    charset: Optional[str]              # CHARACTER_SET_NAME
    collation: Optional[str]            # COLLATION_NAME
    column_key: str                     # COLUMN_KEY: "PRI", "UNI", "MUL" or ""
    is_nullable: str                    # IS_NULLABLE: "YES" or "NO"
    max_length: Optional[int]           # CHARACTER_MAXIMUM_LENGTH
    numeric_precision: Optional[int]    # NUMERIC_PRECISION
    numeric_scale: Optional[int]        # NUMERIC_SCALE
    datetime_precision: Optional[int]   # DATETIME_PRECISION
    default: Optional[str]              # COLUMN_DEFAULT (MariaDB and MySQL write it differently)
    extra: Optional[str]                # EXTRA: "auto_increment", "VIRTUAL GENERATED", ...
    #: TABLES.TABLE_COLLATION; only :func:`base_table_columns` reads it (None otherwise)
    table_collation: Optional[str] = None


def enum_labels(column_type: str) -> tuple:
    """The labels of an ENUM or SET ``COLUMN_TYPE``: ``enum('a','it''s')`` -> ``('a', "it's")``
    (information_schema doubles the quotes inside a label)."""
    inner = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return tuple(m.group(1).replace("''", "'") for m in _ENUM_RE.finditer(inner))


def table_columns(conn, schema: str, table: str) -> list[ColumnInfo]:
    """The columns of ``schema.table`` (a base table or a view) in their order; empty when the
    table does not exist (or the user may not see it)."""
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {_COLUMN_FIELDS} FROM information_schema.COLUMNS c "
            "WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
            (schema, table))
        return [ColumnInfo(*row) for row in cur.fetchall()]


def base_table_columns(conn, schemas: list[str]) -> list[ColumnInfo]:
    """The columns of every base table (no views) of the databases ``schemas``, ordered by
    database, table and position, each with its table's ``TABLE_COLLATION``."""
    if not schemas:
        return []
    marks = ", ".join(["%s"] * len(schemas))
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {_COLUMN_FIELDS}, t.TABLE_COLLATION "
            "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t "
            "ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
            f"WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA IN ({marks}) "
            "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION", tuple(schemas))
        return [ColumnInfo(*row) for row in cur.fetchall()]


def primary_key_columns(conn, schemas: list[str]) -> dict[tuple[str, str], list[str]]:
    """The primary key columns, in key order, of every table of the databases ``schemas`` that
    has one, by ``(schema, table)``."""
    if not schemas:
        return {}
    marks = ", ".join(["%s"] * len(schemas))
    keys: dict[tuple[str, str], list[str]] = {}
    with conn.cursor() as cur:
        cur.execute(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE "
            f"WHERE CONSTRAINT_NAME = 'PRIMARY' AND TABLE_SCHEMA IN ({marks}) "
            "ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION", tuple(schemas))
        for schema, table, column in cur.fetchall():
            keys.setdefault((schema, table), []).append(column)
    return keys


def unique_indexes(conn, schema: str, table: str) -> dict[str, list[str]]:
    """The unique indexes of ``schema.table`` (the primary key included, as ``PRIMARY``): their
    columns in index order, by index name."""
    indexes: dict[str, list[str]] = {}
    with conn.cursor() as cur:
        cur.execute("SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0 "
                    "ORDER BY INDEX_NAME, SEQ_IN_INDEX", (schema, table))
        for index, column in cur.fetchall():
            indexes.setdefault(index, []).append(column)
    return indexes


def list_tables(conn, table_filter: TableFilter) -> list[tuple[str, str]]:
    """The base tables (no views) ``table_filter`` selects, as ``(schema, table)``, sorted."""
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME")
        return [(s, t) for s, t in cur.fetchall() if table_filter(s, t)]


def estimated_rows(conn, tables: list[tuple[str, str]]) -> dict[str, int]:
    """The server's estimate of each table's rows (``information_schema.TABLES.TABLE_ROWS``: an
    InnoDB sample, not a count), by ``schema.table``; a base table of ``tables`` only."""
    wanted = set(tables)
    with conn.cursor() as cur:
        cur.execute("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
                    "WHERE TABLE_TYPE = 'BASE TABLE'")
        return {f"{s}.{t}": int(n or 0) for s, t, n in cur.fetchall() if (s, t) in wanted}


def schemata(conn) -> list[tuple[str, Optional[str], Optional[str]]]:
    """Every database the user sees (system ones included): ``(name, default charset, default
    collation)`` as the server writes them."""
    with conn.cursor() as cur:
        cur.execute("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                    "FROM information_schema.SCHEMATA")
        return [tuple(row) for row in cur.fetchall()]


__all__ = ["ColumnInfo", "base_table_columns", "enum_labels", "estimated_rows", "list_tables",
           "primary_key_columns", "schemata", "table_columns", "unique_indexes"]
