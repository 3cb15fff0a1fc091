"""The ledger ``<namespace>._binlog_batches``: one row per applied batch and stream."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ...spark.iceberg_jvm import IcebergJvm
from ..iceberg_contract import LEDGER_TABLE
from ..sql import quote as _q
from .catalog import table_exists
from .column_types import sql_type
from .conflicts import is_conflict

LEDGER_SCHEMA = T.StructType([
    T.StructField("batch_id", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("start_checkpoint", T.StringType()), T.StructField("end_checkpoint", T.StringType()),
    T.StructField("tables", T.ArrayType(T.StringType())), T.StructField("staged_rows", T.LongType()),
    T.StructField("applied_at", T.TimestampType()),
])


def ledger_name(catalog: str, namespace: str) -> str:
    return f"{catalog}.{namespace}.{LEDGER_TABLE}"


def ensure_ledger(spark: SparkSession, name: str) -> None:
    """Create the ledger ``name`` when it does not exist (also when another run creates it at
    the same time)."""
    if table_exists(spark, name):
        return
    if isinstance(spark, IcebergJvm):
        try:
            spark.create_table(name, LEDGER_SCHEMA, {"format-version": "2"})
        except Exception as exc:
            if not (is_conflict(exc) and table_exists(spark, name)):
                raise
    else:
        cols = ", ".join(f"{_q(f.name)} {sql_type(f.dataType)}" for f in LEDGER_SCHEMA.fields)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({cols}) USING iceberg "
                  f"TBLPROPERTIES ('format-version'='2')")
