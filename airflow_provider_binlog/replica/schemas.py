"""Table schemas from ``information_schema.COLUMNS``, for binlogs without column names."""
from __future__ import annotations

from typing import Callable, Optional

from ..codec.schema import ColumnSchema, TableSchema
from .information_schema import enum_labels, table_columns


def read_table_schema(conn, schema: str, table: str) -> Optional[TableSchema]:
    """The codec's schema of ``schema.table`` as information_schema describes it now; None when
    the server has no such table."""
    rows = table_columns(conn, schema, table)
    if not rows:
        return None
    columns = []
    for c in rows:
        data_type = c.data_type.lower()
        column_type = c.column_type.lower()
        columns.append(ColumnSchema(
            name=c.name, data_type=data_type, unsigned="unsigned" in column_type, charset=c.charset,
            enum_values=enum_labels(column_type) if data_type == "enum" else None,
            set_values=enum_labels(column_type) if data_type == "set" else None,
            primary_key=c.column_key == "PRI", nullable=c.is_nullable == "YES",
            datetime_precision=int(c.datetime_precision) if c.datetime_precision else None))
    return TableSchema(schema, table, tuple(columns))


class InformationSchemaSource:
    """The ``schemas=`` source of :func:`~airflow_provider_binlog.capture.dump.run_dump` (and
    of the codec): the schema of each table read from ``information_schema`` once, on first
    sight, with :func:`read_table_schema` — for a server logging
    ``binlog_row_metadata=MINIMAL`` when no schema history is kept.

    ``connect`` opens a separate (non-replication) connection when first needed; :meth:`close`
    closes it. Tables the server does not know give None. Example::

        source = InformationSchemaSource(lambda: pymysql.connect(host=..., user=..., password=...))
        try:
            result = run_dump(replica, staging_dir=path, start=checkpoint,
                              tables=TableFilter(["shop.*"]), schemas=source)
        finally:
            source.close()

    Beware: it reads the schema as it is when first asked, not as it was at the event's
    position; a load that follows DDL keeps a schema history instead (``history=``).
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
