"""Iceberg table schemas (their JSON form, as Iceberg's ``SchemaParser`` writes it) as the Arrow
schemas pyarrow writes Iceberg data files with: the Arrow type of each Iceberg type and the
field ids Iceberg reads the columns by; and what converts into them exactly."""
from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

FIELD_ID = b"PARQUET:field_id"

_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_FIXED = re.compile(r"fixed\[(\d+)\]")


def arrow_type(iceberg_type: Any) -> Any:
    """The Arrow type of an Iceberg type (a JSON type: a name or a nested object); None for a
    type not written here (map, struct, uuid, nanosecond timestamps, variant, geometry...)."""
    import pyarrow as pa

    if isinstance(iceberg_type, Mapping):
        if iceberg_type.get("type") != "list":
            return None
        inner = arrow_type(iceberg_type["element"])
        if inner is None:
            return None
        return pa.list_(pa.field("element", inner, nullable=not iceberg_type.get("element-required", False),
                                 metadata={FIELD_ID: str(iceberg_type["element-id"]).encode()}))
    simple = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "date": pa.date32(), "time": pa.time64("us"),
              "timestamp": pa.timestamp("us"), "timestamptz": pa.timestamp("us", tz="UTC"),
              "string": pa.string(), "binary": pa.binary()}
    if iceberg_type in simple:
        return simple[iceberg_type]
    decimal = _DECIMAL.fullmatch(str(iceberg_type))
    if decimal:
        return pa.decimal128(int(decimal.group(1)), int(decimal.group(2)))
    fixed = _FIXED.fullmatch(str(iceberg_type))
    if fixed:
        return pa.binary(int(fixed.group(1)))
    return None


def arrow_schema(fields: Sequence[Mapping[str, Any]]) -> Any:
    """The Arrow schema, with Iceberg's field ids, of Iceberg schema ``fields`` (the ``fields``
    of a schema's JSON); None when one has no Arrow type here."""
    import pyarrow as pa

    out = []
    for f in fields:
        t = arrow_type(f["type"])
        if t is None:
            return None
        out.append(pa.field(f["name"], t, nullable=not f.get("required", False),
                            metadata={FIELD_ID: str(f["id"]).encode()}))
    return pa.schema(out)


def castable(source: Any, target: Any) -> bool:
    """Whether ``source`` values become ``target`` values exactly: the same type, or one of
    the widenings a table's schema plan makes (a wider integer or decimal, float to double)."""
    import pyarrow as pa

    if source == target or pa.types.is_null(source):
        return True
    if pa.types.is_integer(source):
        return pa.types.is_integer(target) or pa.types.is_decimal(target)
    if pa.types.is_floating(source):
        return pa.types.is_floating(target) and target.bit_width >= source.bit_width
    if pa.types.is_decimal(source):
        return pa.types.is_decimal(target) and target.scale >= source.scale \
            and target.precision - target.scale >= source.precision - source.scale
    if pa.types.is_string(source) or pa.types.is_large_string(source):
        return pa.types.is_string(target)
    if pa.types.is_binary(source) or pa.types.is_large_binary(source):
        return pa.types.is_binary(target)
    if pa.types.is_list(source) and pa.types.is_list(target):
        return castable(source.value_type, target.value_type)
    return False


def conform(data: Any, schema: Any) -> Optional[Any]:
    """``data`` (a pyarrow table holding ``schema``'s column names) in ``schema``'s types and
    column order; None when a column does not convert exactly or a required one holds a null."""
    import pyarrow as pa

    columns = []
    for field in schema:
        column = data.column(field.name)
        if not castable(column.type, field.type):
            return None
        try:
            column = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if not field.nullable and column.null_count:
            return None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)
