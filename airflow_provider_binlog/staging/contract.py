"""The staging contract between a dump and the merge job.

A dump publishes one directory::

    <staging_dir>/<dump_id>/
        manifest.json                       written last; its presence means "complete"
        tables/<schema>.<table>/part-00000.parquet, part-00001.parquet, ...

Each Parquet row is one row change, in binlog order within its table, with these columns:

==================  =========================  ==============================================
column              Arrow type                 meaning
==================  =========================  ==============================================
``_op``             string                     ``insert`` / ``update`` / ``delete``
``_binlog_file``    string                     binlog file of the rows event
``_binlog_seq``     int64                      numeric suffix of that file (orders files)
``_binlog_pos``     int64                      start offset of the rows event
``_row``            int32                      index of the row within the event
``_gtid``           string (nullable)          GTID of the transaction (MySQL or MariaDB form)
``_commit_ts``      timestamp[us, UTC]         commit time (event header, seconds precision)
``_txn``            string                     transaction id: its GTID, else ``file:pos`` of its start
``_before``         struct<columns>            before image (null for inserts)
``_after``          struct<columns>            after image (null for deletes)
``_before_absent``  list<string> (nullable)    columns not in the before image (MINIMAL/NOBLOB)
``_after_absent``   list<string> (nullable)    columns not in the after image
==================  =========================  ==============================================

Ordering key of a change: ``(_binlog_seq, _binlog_pos, _row)`` — never a timestamp.

The rows a snapshot reads into Arrow are staged in row files instead (``rows-*.parquet``,
``staging/row_files.py``): the table's columns alone, each chunk's envelope in the footer;
``staging.storage.read_parquet`` and ``open_parquet`` read them as the columns above.

The manifest lists each file with its ``path``, ``rows``, ``bytes``, layout ``fingerprint`` and
``sha256`` (of the whole file; the merge job refuses a file that does not match it).

Column types (MySQL -> Arrow; the merge job maps Arrow to Iceberg):

- TINYINT/SMALLINT/MEDIUMINT/INT -> int8/int16/int32/int32; UNSIGNED -> the next wider
  signed type (int16/int32/int32/int64); BIGINT -> int64; BIGINT UNSIGNED -> decimal(20,0)
- FLOAT -> float32, DOUBLE -> float64; DECIMAL(p,s) -> decimal(p,s) for p <= 38, else string
  (exact digits)
- DATE -> date32; DATETIME -> timestamp[us] (no zone); TIMESTAMP -> timestamp[us, UTC];
  zero/invalid dates ('0000-00-00') -> null, counted in the manifest as ``invalid_temporals``
- TIME -> int64 microseconds (signed, -838:59:59 .. 838:59:59); YEAR -> int16
- BIT(1..63) -> int64; BIT(64) -> decimal(20,0) (every unsigned 64-bit value, like BIGINT
  UNSIGNED)
- CHAR/VARCHAR/TEXT -> string; BINARY/VARBINARY/BLOB -> binary; ENUM/SET -> string (labels;
  the index/bitmask as text when labels are unknown); JSON -> string (MySQL's JSON text);
  GEOMETRY -> binary (SRID + WKB as stored); VECTOR -> list<float32>
- MariaDB UUID/INET6/INET4 -> string, the text the server prints (``123e4567-e89b-...``,
  ``::ffff:1.2.3.4``, ``1.2.3.4``) when the column's schema is known (``Column.data_type``),
  else binary (their 16/16/4 bytes, like BINARY(n))

docs/types.md has the whole mapping, through to the Iceberg types, with the value ranges.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

import pyarrow as pa

from ..codec import constants as C
from ..codec.events import Column
from ..codec.mariadb_text import TEXT_FORMS

MANIFEST_FORMAT = "airflow-provider-binlog/staging"
#: the newest manifest version this release reads: 2 when a batch holds row files (an older
#: release, which reads version 1 only, would not know them), else 1
MANIFEST_VERSION = 2
ROW_FILES_VERSION = 2
MANIFEST_NAME = "manifest.json"

ENVELOPE_COLUMNS = ("_op", "_binlog_file", "_binlog_seq", "_binlog_pos", "_row", "_gtid",
                    "_commit_ts", "_txn", "_before", "_after", "_before_absent", "_after_absent")
ORDER_KEY = ("_binlog_seq", "_binlog_pos", "_row")

_SIGNED = {C.MYSQL_TYPE_TINY: pa.int8(), C.MYSQL_TYPE_SHORT: pa.int16(),
           C.MYSQL_TYPE_INT24: pa.int32(), C.MYSQL_TYPE_LONG: pa.int32(),
           C.MYSQL_TYPE_LONGLONG: pa.int64()}
_UNSIGNED = {C.MYSQL_TYPE_TINY: pa.int16(), C.MYSQL_TYPE_SHORT: pa.int32(),
             C.MYSQL_TYPE_INT24: pa.int32(), C.MYSQL_TYPE_LONG: pa.int64(),
             C.MYSQL_TYPE_LONGLONG: pa.decimal128(20, 0)}
_BINARY_TYPES = frozenset({C.MYSQL_TYPE_GEOMETRY})
_TEXTLIKE = frozenset({C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING, C.MYSQL_TYPE_STRING} | C.BLOB_TYPES)


def arrow_type_for(col: Column) -> pa.DataType:
    t = col.type
    if t in _SIGNED:
        return (_UNSIGNED if col.unsigned else _SIGNED)[t]
    if t == C.MYSQL_TYPE_FLOAT:
        return pa.float32()
    if t == C.MYSQL_TYPE_DOUBLE:
        return pa.float64()
    if t in (C.MYSQL_TYPE_NEWDECIMAL, C.MYSQL_TYPE_DECIMAL):
        precision, scale = col.meta >> 8, col.meta & 0xFF
        return pa.decimal128(precision, scale) if 0 < precision <= 38 else pa.string()
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        return pa.date32()
    if t in (C.MYSQL_TYPE_DATETIME, C.MYSQL_TYPE_DATETIME2):
        return pa.timestamp("us")
    if t in (C.MYSQL_TYPE_TIMESTAMP, C.MYSQL_TYPE_TIMESTAMP2):
        return pa.timestamp("us", tz="UTC")
    if t in (C.MYSQL_TYPE_TIME, C.MYSQL_TYPE_TIME2):
        return pa.int64()
    if t == C.MYSQL_TYPE_YEAR:
        return pa.int16()
    if t == C.MYSQL_TYPE_BIT:
        return pa.decimal128(20, 0) if bit_width(col) > 63 else pa.int64()
    if t in (C.MYSQL_TYPE_ENUM, C.MYSQL_TYPE_SET, C.MYSQL_TYPE_JSON):
        return pa.string()
    if t == C.MYSQL_TYPE_VECTOR:
        return pa.list_(pa.float32())
    if t in _BINARY_TYPES:
        return pa.binary()
    if t in _TEXTLIKE:
        if col.data_type == "json" or (t == C.MYSQL_TYPE_STRING and col.data_type in TEXT_FORMS):
            return pa.string()
        return pa.binary() if col.text is False else pa.string()
    if t == C.MYSQL_TYPE_NULL:
        return pa.null()
    raise ValueError(f"column {col.name}: no staging type for MySQL type {col.type_name}")


def bit_width(col: Column) -> int:
    """n of a BIT(n) column (its TABLE_MAP metadata: whole bytes << 8 | remaining bits)."""
    return (col.meta >> 8) * 8 + (col.meta & 0xFF)


def image_type(columns: Iterable[Column]) -> pa.StructType:
    return pa.struct([pa.field(c.name, arrow_type_for(c), nullable=True) for c in columns])


def staging_schema(columns: Iterable[Column]) -> pa.Schema:
    image = image_type(columns)
    return pa.schema([
        pa.field("_op", pa.string(), nullable=False),
        pa.field("_binlog_file", pa.string(), nullable=False),
        pa.field("_binlog_seq", pa.int64(), nullable=False),
        pa.field("_binlog_pos", pa.int64(), nullable=False),
        pa.field("_row", pa.int32(), nullable=False),
        pa.field("_gtid", pa.string()),
        pa.field("_commit_ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("_txn", pa.string(), nullable=False),
        pa.field("_before", image),
        pa.field("_after", image),
        pa.field("_before_absent", pa.list_(pa.string())),
        pa.field("_after_absent", pa.list_(pa.string())),
    ])


def column_descriptions(columns: Iterable[Column]) -> list[dict[str, Any]]:
    return [{"name": c.name, "mysql_type": c.type_name, "data_type": c.data_type,
             "arrow_type": str(arrow_type_for(c)), "unsigned": c.unsigned,
             "nullable": c.nullable, "primary_key": c.primary_key,
             "fsp": c.hires_fsp or c.fsp or None,
             "precision": c.precision if c.type == C.MYSQL_TYPE_NEWDECIMAL else None,
             "scale": c.scale if c.type == C.MYSQL_TYPE_NEWDECIMAL else None,
             "enum_values": list(c.enum_values) if c.enum_values else None,
             "set_values": list(c.set_values) if c.set_values else None}
            for c in columns]


def schema_fingerprint(columns: Iterable[Column]) -> str:
    """Stable hash of the staged column layout (names, MySQL and Arrow types)."""
    text = json.dumps([(c["name"], c["mysql_type"], c["arrow_type"], c["unsigned"])
                       for c in column_descriptions(columns)], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
