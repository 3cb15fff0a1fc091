"""Column types of the merge's plans, engine-neutral: Arrow types.

A staged column's Arrow type (the staging contract's, read from a staged file's footer) becomes
the Arrow type of its Iceberg column (:func:`iceberg_arrow_type`: small integers as ``int32``,
Iceberg's ``int``; unsigned 32-bit as ``int64``, Iceberg's ``long``; ...). The same types are
spelled in Spark SQL for a statement (:func:`sql_type`) and in Iceberg's schema JSON for a
table created through Iceberg's Java API (:func:`iceberg_json_type`). Which changes of a
column's type fit or widen follows Iceberg's type promotion (:func:`fits`, :func:`can_widen`).
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from .errors import SchemaEvolutionError

_DECIMAL = re.compile(r"decimal(?:128|256)?\((\d+),\s*(\d+)\)")
_TIMESTAMP = re.compile(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=(.+))?\]")
_LIST = re.compile(r"(?:large_)?list<(?:[^:<>]+:\s*)?(.+)>")


def arrow_from_text(text: str) -> Any:
    """The Arrow type of its text (``decimal128(10, 2)``, ``timestamp[us, tz=UTC]``,
    ``list<item: float>``), as a manifest's column descriptions spell them."""
    import pyarrow as pa

    t = text.strip()
    simple = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "float": pa.float32(),
              "float32": pa.float32(), "halffloat": pa.float16(), "double": pa.float64(), "float64": pa.float64(),
              "date32": pa.date32(), "date32[day]": pa.date32(), "string": pa.string(),
              "large_string": pa.large_string(), "binary": pa.binary(), "large_binary": pa.large_binary(),
              "bool": pa.bool_(), "null": pa.null()}
    if t in simple:
        return simple[t]
    m = _DECIMAL.fullmatch(t)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = _TIMESTAMP.fullmatch(t)
    if m:
        return pa.timestamp("us", tz="UTC" if m.group(2) else None)
    m = _LIST.fullmatch(t)
    if m:
        return pa.list_(arrow_from_text(m.group(1)))
    raise SchemaEvolutionError(f"no Iceberg type for staged Arrow type {text!r}")


def iceberg_arrow_type(staged: Any) -> Any:
    """The Arrow type of the Iceberg column holding a staged column of Arrow type ``staged``."""
    import pyarrow as pa

    if pa.types.is_integer(staged):  # Iceberg's int holds up to a signed 32-bit one, long the rest
        return pa.int32() if staged.bit_width < 32 or staged == pa.int32() else pa.int64()
    if pa.types.is_floating(staged):
        return pa.float64() if staged.bit_width == 64 else pa.float32()
    if pa.types.is_decimal(staged):
        return pa.decimal128(staged.precision, staged.scale)
    if pa.types.is_timestamp(staged):
        return pa.timestamp("us", tz="UTC" if staged.tz else None)
    if pa.types.is_date(staged):
        return pa.date32()
    if pa.types.is_string(staged) or pa.types.is_large_string(staged) or pa.types.is_null(staged):
        return pa.string()
    if pa.types.is_binary(staged) or pa.types.is_large_binary(staged) or pa.types.is_fixed_size_binary(staged):
        return pa.binary()
    if pa.types.is_boolean(staged):
        return pa.bool_()
    if pa.types.is_list(staged) or pa.types.is_large_list(staged):
        return pa.list_(iceberg_arrow_type(staged.value_type))
    raise SchemaEvolutionError(f"no Iceberg type for staged Arrow type {staged}")


def sql_type(column_type: Any) -> str:
    """A column's Arrow type as Spark SQL spells the Iceberg type (``int``, ``bigint``,
    ``decimal(10,2)``, ``timestamp_ntz``, ``timestamp``, ``array<float>``)."""
    import pyarrow as pa

    t = column_type
    if pa.types.is_integer(t):  # Iceberg has int (32-bit) and long
        return "int" if t.bit_width < 32 or t == pa.int32() else "bigint"
    if pa.types.is_floating(t):
        return "double" if t.bit_width == 64 else "float"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_null(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return f"array<{sql_type(t.value_type)}>"
    raise SchemaEvolutionError(f"no Iceberg type for Arrow type {t}")


def iceberg_json_type(column_type: Any, next_id: list[int]) -> Any:
    """A column's Arrow type as an Iceberg schema JSON type; a list takes its element's field id
    from ``next_id`` (which it advances)."""
    import pyarrow as pa

    t = column_type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element_id = next_id[0]
        next_id[0] += 1
        return {"type": "list", "element-id": element_id, "element": iceberg_json_type(t.value_type, next_id),
                "element-required": False}
    return {"int": "int", "bigint": "long", "tinyint": "int", "smallint": "int", "float": "float",
            "double": "double", "date": "date", "timestamp_ntz": "timestamp", "timestamp": "timestamptz",
            "string": "string", "binary": "binary", "boolean": "boolean"}.get(sql_type(t)) or \
        sql_type(t).replace(",", ", ")


def iceberg_schema_json(columns: Sequence[tuple[str, Any]]) -> dict:
    """The Iceberg schema JSON (optional fields, ids from 1) of ``columns``."""
    next_id = [len(columns) + 1]
    fields = [{"id": i, "name": name, "required": False, "type": iceberg_json_type(t, next_id)}
              for i, (name, t) in enumerate(columns, 1)]
    return {"type": "struct", "schema-id": 0, "fields": fields}


def fits(staged: Any, target: Any) -> bool:
    """Values of Arrow type ``staged`` (an Iceberg column's) go into a column of ``target`` as
    they are: the same type, an ``int`` into a ``long``, a ``float`` into a ``double``, a
    decimal of the same scale and no more digits."""
    import pyarrow as pa

    if sql_type(staged) == sql_type(target):
        return True
    if sql_type(staged) == "int" and sql_type(target) == "bigint":
        return True
    if sql_type(staged) == "float" and sql_type(target) == "double":
        return True
    if pa.types.is_decimal(staged) and pa.types.is_decimal(target):
        return staged.scale == target.scale and staged.precision <= target.precision
    return False


def can_widen(current: Any, staged: Any) -> bool:
    """Iceberg can promote a column of Arrow type ``current`` to ``staged``: ``int`` to
    ``long``, ``float`` to ``double``, a decimal to more digits of the same scale."""
    import pyarrow as pa

    if sql_type(current) == "int" and sql_type(staged) == "bigint":
        return True
    if sql_type(current) == "float" and sql_type(staged) == "double":
        return True
    if pa.types.is_decimal(current) and pa.types.is_decimal(staged):
        return current.scale == staged.scale and current.precision < staged.precision
    return False


def iceberg_type_for_arrow(arrow_type: str) -> str:
    """The Iceberg column type (Spark SQL spelling) of a staged Arrow type's text."""
    return sql_type(iceberg_arrow_type(arrow_from_text(arrow_type)))


def iceberg_schema_for(columns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``[(name, Iceberg type)]`` for the column descriptions of a manifest table entry:
    int8/int16/int32 -> int, int64 -> bigint (long), decimal(p,s) -> decimal(p,s),
    float32 -> float, float64 -> double, date32 -> date, timestamp[us] -> timestamp_ntz,
    timestamp[us, UTC] -> timestamp (with zone), binary -> binary, string -> string,
    list<float32> -> array<float>."""
    return [(c["name"], iceberg_type_for_arrow(c["arrow_type"])) for c in columns]


__all__ = ["arrow_from_text", "can_widen", "fits", "iceberg_arrow_type", "iceberg_json_type",
           "iceberg_schema_for", "iceberg_schema_json", "iceberg_type_for_arrow", "sql_type"]
