"""What the catalog knows of a target table: whether it exists, its properties, its head
snapshot and the binlog checkpoint of its last batch (:class:`AppliedState`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from pyspark.sql import SparkSession

from ...checkpoint import Checkpoint
from ..errors import MergeJobError
from ..iceberg_contract import SUMMARY_BATCH, SUMMARY_CHECKPOINT, SUMMARY_STREAM


@dataclasses.dataclass(frozen=True)
class AppliedState:
    """What the main branch of an Iceberg table records about the binlog."""

    head: Optional[int]                 # current snapshot id
    checkpoint: Optional[Checkpoint]    # end checkpoint of the last batch committed
    batch_id: Optional[str]
    snapshot_id: Optional[int]          # the snapshot holding that checkpoint
    committed_at_micros: Optional[int]


def applied_state(spark: SparkSession, table: str, stream: Optional[str] = None) -> AppliedState:
    """Walk the main branch of ``table`` from its head to the newest snapshot whose summary
    holds a ``binlog.checkpoint`` (of ``stream``, when given). Snapshots of other commits
    (compaction, manual changes) are passed over."""
    refresh(spark, table)
    head_rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    if not head_rows:
        return AppliedState(None, None, None, None, None)
    head = head_rows[0][0]
    rows = spark.sql(
        f"SELECT snapshot_id, parent_id, summary['{SUMMARY_CHECKPOINT}'], summary['{SUMMARY_BATCH}'], "
        f"summary['{SUMMARY_STREAM}'], unix_micros(committed_at) FROM {table}.snapshots").collect()
    by_id = {r[0]: r for r in rows}
    current = head
    while current is not None and current in by_id:
        _, parent, cp, batch, snap_stream, micros = by_id[current]
        if cp is not None and (stream is None or snap_stream == stream):
            try:
                checkpoint = Checkpoint.from_json(cp)
            except ValueError as exc:
                raise MergeJobError(f"{table}: snapshot {current} has an unreadable "
                                    f"{SUMMARY_CHECKPOINT}: {exc}") from None
            return AppliedState(head, checkpoint, batch, current, micros)
        current = parent
    return AppliedState(head, None, None, None, None)


def head_snapshot(spark: SparkSession, table: str) -> Optional[int]:
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return rows[0][0] if rows else None


def read_table_properties(spark: SparkSession, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def table_exists(spark: SparkSession, name: str) -> bool:
    return spark.catalog.tableExists(name)


def refresh(spark: SparkSession, table: str) -> None:
    """Drop what this session caches of ``table`` (Iceberg's caching catalog keeps a loaded
    table for a while): what a batch is applied on must be the table as last committed,
    also when another process committed since this session loaded it."""
    if spark.catalog.tableExists(table):
        spark.sql(f"REFRESH TABLE {table}")
