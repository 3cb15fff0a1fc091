"""Table schemas supplied by the caller when the binlog carries no column names.

With ``binlog_row_metadata=MINIMAL`` (the server default) a TABLE_MAP has column types but no
names, and may lack ENUM/SET labels. A caller that knows the table (for example from
``information_schema.COLUMNS``) passes a :class:`TableSchema`; the codec checks it against the
TABLE_MAP and raises :class:`SchemaMismatchError` when the table has drifted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from . import constants as C


@dataclass(frozen=True)
class ColumnSchema:
    name: str
    data_type: str                  # information_schema DATA_TYPE: "int", "varchar", "enum", ...
    unsigned: bool = False
    charset: Optional[str] = None   # CHARACTER_SET_NAME; None for non-text columns
    enum_values: Optional[tuple[str, ...]] = None
    set_values: Optional[tuple[str, ...]] = None
    primary_key: bool = False
    nullable: bool = True
    datetime_precision: Optional[int] = None  # fractional digits of TIME/DATETIME/TIMESTAMP


@dataclass(frozen=True)
class TableSchema:
    schema: str
    table: str
    columns: tuple[ColumnSchema, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


# a mapping is keyed by (schema, table) or "schema.table"
SchemaSource = Union[None, Callable[[str, str], Optional[TableSchema]], Mapping[Any, TableSchema]]

_BLOBS = {C.MYSQL_TYPE_BLOB, C.MYSQL_TYPE_TINY_BLOB, C.MYSQL_TYPE_MEDIUM_BLOB, C.MYSQL_TYPE_LONG_BLOB}
_VARLEN = {C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING}
_CHAR = {C.MYSQL_TYPE_STRING}

# information_schema DATA_TYPE -> binlog type codes it may be logged as
COMPATIBLE_TYPES: dict[str, frozenset[int]] = {
    "tinyint": frozenset({C.MYSQL_TYPE_TINY}),
    "bool": frozenset({C.MYSQL_TYPE_TINY}),
    "boolean": frozenset({C.MYSQL_TYPE_TINY}),
    "smallint": frozenset({C.MYSQL_TYPE_SHORT}),
    "mediumint": frozenset({C.MYSQL_TYPE_INT24}),
    "int": frozenset({C.MYSQL_TYPE_LONG}),
    "integer": frozenset({C.MYSQL_TYPE_LONG}),
    "bigint": frozenset({C.MYSQL_TYPE_LONGLONG}),
    "float": frozenset({C.MYSQL_TYPE_FLOAT}),
    "double": frozenset({C.MYSQL_TYPE_DOUBLE}),
    "real": frozenset({C.MYSQL_TYPE_DOUBLE}),
    "decimal": frozenset({C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL}),
    "numeric": frozenset({C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL}),
    "date": frozenset({C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE}),
    "time": frozenset({C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2}),
    "datetime": frozenset({C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_DATETIME2}),
    "timestamp": frozenset({C.MYSQL_TYPE_TIMESTAMP, C.MYSQL_TYPE_TIMESTAMP2}),
    "year": frozenset({C.MYSQL_TYPE_YEAR}),
    "char": frozenset(_CHAR),
    "binary": frozenset(_CHAR),
    "varchar": frozenset(_VARLEN),
    "varbinary": frozenset(_VARLEN),
    "tinytext": frozenset(_BLOBS), "text": frozenset(_BLOBS),
    "mediumtext": frozenset(_BLOBS), "longtext": frozenset(_BLOBS),
    "tinyblob": frozenset(_BLOBS), "blob": frozenset(_BLOBS),
    "mediumblob": frozenset(_BLOBS), "longblob": frozenset(_BLOBS),
    "json": frozenset({C.MYSQL_TYPE_JSON} | _BLOBS),
    "enum": frozenset({C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_STRING}),
    "set": frozenset({C.MYSQL_TYPE_SET, C.MYSQL_TYPE_STRING}),
    "bit": frozenset({C.MYSQL_TYPE_BIT}),
    "vector": frozenset({C.MYSQL_TYPE_VECTOR} | _VARLEN | _CHAR | _BLOBS),
    "inet4": frozenset(_CHAR), "inet6": frozenset(_CHAR), "uuid": frozenset(_CHAR),
}
for _geo in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection"):
    COMPATIBLE_TYPES[_geo] = frozenset({C.MYSQL_TYPE_GEOMETRY})


def lookup_schema(source: SchemaSource, schema: str, table: str) -> Optional[TableSchema]:
    if source is None:
        return None
    if callable(source):
        return source(schema, table)
    found = source.get((schema, table))
    if found is None:
        found = source.get(f"{schema}.{table}")
    return found


def type_compatible(data_type: str, binlog_type: int) -> bool:
    allowed = COMPATIBLE_TYPES.get(data_type.lower())
    return allowed is None or binlog_type in allowed
