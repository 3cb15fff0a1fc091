"""What the catalog knows of a target table: whether it exists, its properties, its head
snapshot and the binlog checkpoint of its last batch (:class:`AppliedState`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Optional

from py4j.protocol import Py4JError
from pyspark.sql import SparkSession

from ...checkpoints import Checkpoint
from ...spark.iceberg_jvm import IcebergJvm, java_array, jvm_of
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
    (compaction, manual changes) are passed over.

    The walk reads the table's metadata through Iceberg's Java API on the driver (no Spark
    job); a catalog whose tables are not Iceberg ``SparkTable``s is read through the
    ``refs`` and ``snapshots`` metadata tables instead."""
    refresh(spark, table)
    head: Optional[int] = None
    for snapshot_id, cp, batch, snap_stream, micros in _main_branch(spark, table):
        head = snapshot_id if head is None else head
        if cp is not None and (stream is None or snap_stream == stream):
            try:
                checkpoint = Checkpoint.from_json(cp)
            except ValueError as exc:
                raise MergeJobError(f"{table}: snapshot {snapshot_id} has an unreadable "
                                    f"{SUMMARY_CHECKPOINT}: {exc}") from None
            return AppliedState(head, checkpoint, batch, snapshot_id, micros)
    return AppliedState(head, None, None, None, None)


def committed_batch(spark: SparkSession, table: str, batch_id: str) -> bool:
    """Whether a snapshot of the main branch of ``table`` (as far as they are kept) was
    committed by batch ``batch_id``."""
    return any(batch == batch_id for _sid, _cp, batch, _stream, _micros in _main_branch(spark, table))


_Snapshot = tuple[int, Optional[str], Optional[str], Optional[str], int]


def _main_branch(spark: SparkSession, table: str) -> Iterator[_Snapshot]:
    """The snapshots of the main branch from its head back (as far as they are kept):
    ``(snapshot id, checkpoint, batch id, stream, committed-at micros)``, read one at a time."""
    iceberg = iceberg_table(spark, table)
    if iceberg is None:
        head_rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
        if not head_rows:
            return
        rows = spark.sql(
            f"SELECT snapshot_id, parent_id, summary['{SUMMARY_CHECKPOINT}'], summary['{SUMMARY_BATCH}'], "
            f"summary['{SUMMARY_STREAM}'], unix_micros(committed_at) FROM {table}.snapshots").collect()
        by_id = {r[0]: r for r in rows}
        current = head_rows[0][0]
        while current is not None and current in by_id:
            row = by_id[current]
            yield current, row[2], row[3], row[4], row[5]
            current = row[1]
        return
    snapshot = iceberg.currentSnapshot()
    while snapshot is not None:
        summary = snapshot.summary()
        yield (int(snapshot.snapshotId()), summary.get(SUMMARY_CHECKPOINT), summary.get(SUMMARY_BATCH),
               summary.get(SUMMARY_STREAM), int(snapshot.timestampMillis()) * 1000)
        parent = snapshot.parentId()
        snapshot = None if parent is None else iceberg.snapshot(parent)  # None: expired


def _java_strings(spark: SparkSession, parts: list[str]) -> Any:
    return java_array(spark, jvm_of(spark).java.lang.String, parts)


def _spark_catalog(spark: SparkSession, catalog: str) -> Any:
    return spark._jsparkSession.sessionState().catalogManager().catalog(catalog)


def _identifier(spark: SparkSession, name: str) -> tuple[str, Any]:
    catalog, *namespace, table = name.split(".")
    jvm = spark.sparkContext._jvm
    return catalog, jvm.org.apache.spark.sql.connector.catalog.Identifier.of(_java_strings(spark, namespace), table)


def ensure_namespace(spark: SparkSession, catalog: str, namespace: str) -> None:
    """``CREATE NAMESPACE IF NOT EXISTS``, asked of the catalog directly when it can be (no SQL
    to parse and analyse in a young JVM)."""
    if isinstance(spark, IcebergJvm):
        spark.create_namespace(namespace)
        return
    try:
        names = _java_strings(spark, namespace.split("."))
        if _spark_catalog(spark, catalog).namespaceExists(names):
            return
    except Py4JError:
        pass
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")


def iceberg_table(spark: SparkSession, name: str) -> Any:
    """The ``org.apache.iceberg.Table`` behind ``catalog.namespace.table`` (through py4j), or
    None when the catalog does not give an Iceberg ``SparkTable``."""
    if isinstance(spark, IcebergJvm):
        return spark.load_table(name)
    try:
        catalog, identifier = _identifier(spark, name)
        loaded = _spark_catalog(spark, catalog).loadTable(identifier)
        if loaded.getClass().getName() != "org.apache.iceberg.spark.source.SparkTable":
            return None
        return loaded.table()
    except Py4JError:
        return None


def head_snapshot(spark: SparkSession, table: str) -> Optional[int]:
    iceberg = iceberg_table(spark, table)
    if iceberg is not None:
        iceberg.refresh()
        snapshot = iceberg.currentSnapshot()
        return None if snapshot is None else int(snapshot.snapshotId())
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return rows[0][0] if rows else None


def read_table_properties(spark: SparkSession, table: str) -> dict[str, str]:
    if isinstance(spark, IcebergJvm):  # the stored ones: no SQL
        return stored_properties(spark, table)
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def stored_properties(spark: SparkSession, table: str) -> dict[str, str]:
    """The properties stored in ``table``'s metadata (those set on it; not the ``provider``,
    ``location``, ... that ``SHOW TBLPROPERTIES`` adds), read in one call through Iceberg's
    Java API where the catalog gives an Iceberg table."""
    import json

    iceberg = iceberg_table(spark, table)
    if iceberg is None:
        return read_table_properties(spark, table)
    mapper = jvm_of(spark).org.apache.iceberg.util.JsonUtil.mapper()
    return json.loads(mapper.writeValueAsString(iceberg.properties()))


def table_exists(spark: SparkSession, name: str) -> bool:
    if isinstance(spark, IcebergJvm):
        return spark.table_exists(name)
    return spark.catalog.tableExists(name)


def refresh(spark: SparkSession, table: str) -> None:
    """Drop what this session caches of ``table`` (Iceberg's caching catalog keeps a loaded
    table for a while): what a batch is applied on must be the table as last committed,
    also when another process committed since this session loaded it."""
    if isinstance(spark, IcebergJvm):
        return  # it caches nothing: every table is loaded as last committed
    try:  # the catalog's own invalidation: no SQL to parse and analyse
        catalog, identifier = _identifier(spark, table)
        _spark_catalog(spark, catalog).invalidateTable(identifier)
        return
    except Py4JError:
        pass
    if spark.catalog.tableExists(table):
        spark.sql(f"REFRESH TABLE {table}")
