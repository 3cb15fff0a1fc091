"""The plans' Arrow column types as the Spark types of their Iceberg columns (:func:`spark_type`),
for the casts and frames of the Spark engine."""

from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import types as T


def spark_type(column_type: Any) -> T.DataType:
    """The Spark type of the Iceberg column of Arrow type ``column_type`` (``int32`` as
    ``int``, ``timestamp[us]`` as ``timestamp_ntz``, ``timestamp[us, tz=UTC]`` as
    ``timestamp``, ...)."""
    import pyarrow as pa

    t = column_type
    if pa.types.is_integer(t):
        return T.IntegerType() if t.bit_width < 32 or t == pa.int32() else T.LongType()
    if pa.types.is_floating(t):
        return T.DoubleType() if t.bit_width == 64 else T.FloatType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_date(t):
        return T.DateType()
    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(spark_type(t.value_type))
    return T.StringType()  # string, large_string, null


def spark_struct(columns: Sequence[tuple[str, Any]]) -> T.StructType:
    """A Spark schema of ``columns`` (names and Arrow types)."""
    return T.StructType([T.StructField(n, spark_type(t)) for n, t in columns])


__all__ = ["spark_struct", "spark_type"]
