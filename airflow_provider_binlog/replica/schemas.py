"""Table schemas from ``information_schema.COLUMNS``, for binlogs without column names."""
from __future__ import annotations

import re
from typing import Callable, Optional

from ..codec.schema import ColumnSchema, TableSchema

_ENUM_RE = re.compile(r"'((?:[^']|'')*)'")


def _labels(column_type: str) -> tuple:
    inner = column_type[column_type.index("(") + 1:column_type.rindex(")")]
    return tuple(m.group(1).replace("''", "'") for m in _ENUM_RE.finditer(inner))


def read_table_schema(conn, schema: str, table: str) -> Optional[TableSchema]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, CHARACTER_SET_NAME, COLUMN_KEY, "
            "IS_NULLABLE, DATETIME_PRECISION FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (schema, table))
        rows = cur.fetchall()
    if not rows:
        return None
    columns = []
    for name, data_type, column_type, charset, key, nullable, precision in rows:
        data_type = data_type.lower()
        column_type = column_type.lower()
        columns.append(ColumnSchema(
            name=name, data_type=data_type, unsigned="unsigned" in column_type, charset=charset,
            enum_values=_labels(column_type) if data_type == "enum" else None,
            set_values=_labels(column_type) if data_type == "set" else None,
            primary_key=key == "PRI", nullable=nullable == "YES",
            datetime_precision=int(precision) if precision else None))
    return TableSchema(schema, table, tuple(columns))


class InformationSchemaSource:
    """A ``schemas`` source for the codec: reads a table's schema once, on first sight.

    ``connect`` opens a separate (non-replication) connection when first needed.
    """

    def __init__(self, connect: Callable[[], object]) -> None:
        self._connect = connect
        self._conn = None
        self._cache: dict = {}

    def __call__(self, schema: str, table: str) -> Optional[TableSchema]:
        key = (schema, table)
        if key not in self._cache:
            if self._conn is None:
                self._conn = self._connect()
            self._cache[key] = read_table_schema(self._conn, schema, table)
        return self._cache[key]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
