"""Staged column types (Arrow, as Spark reads them) to Iceberg column types, and which
changes of a column's type fit or can be widened."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from pyspark.sql import types as T

from ..errors import SchemaEvolutionError


def arrow_to_spark(text: str) -> T.DataType:
    t = text.strip()
    simple = {"int8": T.IntegerType(), "int16": T.IntegerType(), "int32": T.IntegerType(),
              "uint8": T.IntegerType(), "uint16": T.IntegerType(), "int64": T.LongType(),
              "uint32": T.LongType(), "float": T.FloatType(), "float32": T.FloatType(),
              "halffloat": T.FloatType(), "double": T.DoubleType(), "float64": T.DoubleType(),
              "date32": T.DateType(), "date32[day]": T.DateType(), "string": T.StringType(),
              "large_string": T.StringType(), "binary": T.BinaryType(),
              "large_binary": T.BinaryType(), "bool": T.BooleanType(), "null": T.StringType()}
    if t in simple:
        return simple[t]
    m = re.fullmatch(r"decimal(?:128|256)?\((\d+),\s*(\d+)\)", t)
    if m:
        return T.DecimalType(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"timestamp\[(s|ms|us|ns)(?:,\s*tz=(.+))?\]", t)
    if m:
        return T.TimestampType() if m.group(2) else T.TimestampNTZType()
    m = re.fullmatch(r"(?:large_)?list<(?:[^:<>]+:\s*)?(.+)>", t)
    if m:
        return T.ArrayType(arrow_to_spark(m.group(1)))
    raise SchemaEvolutionError(f"no Iceberg type for staged Arrow type {text!r}")


def iceberg_type_for_arrow(arrow_type: str) -> str:
    """The Iceberg column type (Spark SQL spelling) of a staged Arrow type string."""
    return sql_type(arrow_to_spark(arrow_type))


def iceberg_schema_for(columns: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``[(name, Iceberg type)]`` for the column descriptions of a manifest table entry:
    int8/int16/int32 -> int, int64 -> bigint (long), decimal(p,s) -> decimal(p,s),
    float32 -> float, float64 -> double, date32 -> date, timestamp[us] -> timestamp_ntz,
    timestamp[us, UTC] -> timestamp (with zone), binary -> binary, string -> string,
    list<float32> -> array<float>."""
    return [(c["name"], iceberg_type_for_arrow(c["arrow_type"])) for c in columns]


def iceberg_type_for_spark(data_type: T.DataType) -> T.DataType:
    """The Iceberg column type (as a Spark type) for a staged column read by Spark."""
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType)):
        return T.IntegerType()
    if isinstance(data_type, (T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.DateType,
                              T.TimestampType, T.TimestampNTZType, T.BinaryType, T.StringType,
                              T.BooleanType)):
        return data_type
    if isinstance(data_type, T.NullType):
        return T.StringType()
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(iceberg_type_for_spark(data_type.elementType))
    raise SchemaEvolutionError(f"no Iceberg type for staged Spark type {data_type.simpleString()}")


def sql_type(data_type: T.DataType) -> str:
    return data_type.simpleString()


def fits(staged: T.DataType, target: T.DataType) -> bool:
    """Staged values can be written to a column of ``target`` type without loss, as is."""
    if sql_type(staged) == sql_type(target):
        return True
    if isinstance(staged, T.IntegerType) and isinstance(target, T.LongType):
        return True
    if isinstance(staged, T.FloatType) and isinstance(target, T.DoubleType):
        return True
    if isinstance(staged, T.DecimalType) and isinstance(target, T.DecimalType):
        return staged.scale == target.scale and staged.precision <= target.precision
    return False


def can_widen(current: T.DataType, staged: T.DataType) -> bool:
    """Iceberg can promote a column of type ``current`` to ``staged``."""
    if isinstance(current, T.IntegerType) and isinstance(staged, T.LongType):
        return True
    if isinstance(current, T.FloatType) and isinstance(staged, T.DoubleType):
        return True
    if isinstance(current, T.DecimalType) and isinstance(staged, T.DecimalType):
        return current.scale == staged.scale and current.precision < staged.precision
    return False
