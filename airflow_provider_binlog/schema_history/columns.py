"""A history column as the codec's :class:`~airflow_provider_binlog.codec.events.Column` (the
binlog type code and metadata the server logs for it), so that a column known only from DDL
maps to the same staged type as one read from the binlog."""
from __future__ import annotations

from ..codec import constants as C
from ..codec.events import Column
from .model import ColumnDef

_TYPES = {
    "tinyint": C.MYSQL_TYPE_TINY, "smallint": C.MYSQL_TYPE_SHORT, "mediumint": C.MYSQL_TYPE_INT24,
    "int": C.MYSQL_TYPE_LONG, "bigint": C.MYSQL_TYPE_LONGLONG, "float": C.MYSQL_TYPE_FLOAT,
    "double": C.MYSQL_TYPE_DOUBLE, "decimal": C.MYSQL_TYPE_NEWDECIMAL, "date": C.MYSQL_TYPE_DATE,
    "datetime": C.MYSQL_TYPE_DATETIME2, "timestamp": C.MYSQL_TYPE_TIMESTAMP2,
    "time": C.MYSQL_TYPE_TIME2, "year": C.MYSQL_TYPE_YEAR, "char": C.MYSQL_TYPE_STRING,
    "binary": C.MYSQL_TYPE_STRING, "inet4": C.MYSQL_TYPE_STRING, "inet6": C.MYSQL_TYPE_STRING,
    "uuid": C.MYSQL_TYPE_STRING, "varchar": C.MYSQL_TYPE_VARCHAR, "varbinary": C.MYSQL_TYPE_VARCHAR,
    "enum": C.MYSQL_TYPE_ENUM, "set": C.MYSQL_TYPE_SET, "bit": C.MYSQL_TYPE_BIT,
    "json": C.MYSQL_TYPE_JSON, "vector": C.MYSQL_TYPE_VECTOR,
}
_BLOBS = ("tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob")
_GEOMETRY = ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection")


def codec_column(cdef: ColumnDef, index: int = 0, primary_key: bool = False) -> Column:
    if cdef.data_type in _BLOBS:
        t = C.MYSQL_TYPE_BLOB
    elif cdef.data_type in _GEOMETRY:
        t = C.MYSQL_TYPE_GEOMETRY
    else:
        t = _TYPES.get(cdef.data_type)
        if t is None:
            raise ValueError(f"column {cdef.name}: no binlog type for {cdef.data_type!r}")
    meta = 0
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        meta = ((cdef.precision or 10) << 8) | (cdef.scale or 0)
    elif t in (C.MYSQL_TYPE_DATETIME2, C.MYSQL_TYPE_TIMESTAMP2, C.MYSQL_TYPE_TIME2):
        meta = cdef.fsp or 0
    elif t == C.MYSQL_TYPE_BIT:
        width = cdef.length or 1
        meta = (width // 8) << 8 | width % 8
    stringy = t in (C.MYSQL_TYPE_STRING, C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_BLOB)
    text = (cdef.charset is not None) if stringy else None
    return Column(index=index, name=cdef.name, type=t, meta=meta, nullable=cdef.nullable,
                  unsigned=cdef.unsigned, codec="utf-8" if text else None, text=text,
                  enum_values=cdef.enum_values, set_values=cdef.set_values,
                  primary_key=primary_key, data_type=cdef.data_type)


__all__ = ["codec_column"]
