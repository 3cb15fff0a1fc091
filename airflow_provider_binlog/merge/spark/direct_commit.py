"""Direct commits: a table's collapsed changes (:mod:`..direct_changes`) written as a Parquet data
file and an equality-delete file by pyarrow and committed through Iceberg's Java API, with no
Spark job and no query planning; the ledger row appended the same way.

Iceberg applies an equality delete to the data files of earlier commits only, so one row
delta holding the touched keys' deletes and their new rows replaces those rows atomically, as
the MERGE would. The commit carries the batch's summary properties like every other commit of
a batch, goes through :func:`...spark.runtime.run_with_commit_properties`, and is validated
from the snapshot the table was planned on: a commit of another writer in between fails it
instead of being overwritten. Tables this cannot write (partitioned, format v1, a column type
without an exact Arrow form, a catalog that does not give an Iceberg table) return None and go
through Spark.
"""
from __future__ import annotations

import io
import uuid
from typing import Any, Mapping, Optional, Sequence

from pyspark.sql import SparkSession

from ...spark import runtime
from ..batches import Batch
from ..direct_changes import DirectChanges, collapse_staged
from ..iceberg_contract import MODE_MERGE
from .apply import commit_properties
from . import catalog
from .table_work import TableWork

_WRITE_CHUNK = 4 * 1024 * 1024
_FIELD_ID = b"PARQUET:field_id"


def _arrow_type(t: Any) -> Any:
    """The Arrow type pyarrow writes as Iceberg type ``t`` (a Java ``Type``); None for a type
    kept to Spark."""
    import pyarrow as pa

    kind = t.typeId().toString()
    simple = {"BOOLEAN": pa.bool_(), "INTEGER": pa.int32(), "LONG": pa.int64(), "FLOAT": pa.float32(),
              "DOUBLE": pa.float64(), "DATE": pa.date32(), "TIME": pa.time64("us"), "STRING": pa.string(),
              "BINARY": pa.binary()}
    if kind in simple:
        return simple[kind]
    if kind == "DECIMAL":
        return pa.decimal128(t.precision(), t.scale())
    if kind == "TIMESTAMP":
        return pa.timestamp("us", tz="UTC" if t.shouldAdjustToUTC() else None)
    if kind == "FIXED":
        return pa.binary(t.length())
    if kind == "LIST":
        element = t.fields()[0]
        inner = _arrow_type(element.type())
        if inner is None:
            return None
        return pa.list_(pa.field("element", inner, nullable=element.isOptional(),
                                 metadata={_FIELD_ID: str(element.fieldId()).encode()}))
    return None


def arrow_schema(fields: Sequence[Any]) -> Any:
    """The Arrow schema, with Iceberg's field ids, of Iceberg ``fields`` (Java
    ``NestedField``s); None when one has no Arrow form here."""
    import pyarrow as pa

    out = []
    for f in fields:
        t = _arrow_type(f.type())
        if t is None:
            return None
        out.append(pa.field(f.name(), t, nullable=f.isOptional(), metadata={_FIELD_ID: str(f.fieldId()).encode()}))
    return pa.schema(out)


def _castable(source: Any, target: Any) -> bool:
    """Whether ``source`` values become ``target`` values exactly (the widenings a table's
    schema plan makes, and no others)."""
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
        return _castable(source.value_type, target.value_type)
    return False


def conform(data: Any, schema: Any) -> Any:
    """``data`` (a pyarrow table with ``schema``'s column names) in ``schema``'s types; None
    when a column does not convert exactly or a required column holds a null."""
    import pyarrow as pa

    columns = []
    for field in schema:
        column = data.column(field.name)
        if not _castable(column.type, field.type):
            return None
        try:
            column = column.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if not field.nullable and column.null_count:
            return None
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


def _write(spark: SparkSession, table: Any, data: Any, kind: str) -> tuple[str, int, Any]:
    """Write ``data`` as a Parquet file in ``table``'s data location through its FileIO (any
    storage the catalog reaches); its path, size and Iceberg metrics."""
    import pyarrow.parquet as pq

    jvm = spark.sparkContext._jvm
    buffer = io.BytesIO()
    pq.write_table(data, buffer, compression="zstd")
    payload = buffer.getvalue()
    path = table.locationProvider().newDataLocation(f"binlog-{kind}-{uuid.uuid4().hex}.parquet")
    out = table.io().newOutputFile(path).create()
    try:
        for at in range(0, len(payload), _WRITE_CHUNK):
            out.write(payload[at:at + _WRITE_CHUNK])
    finally:
        out.close()
    metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
        table.io().newInputFile(path), jvm.org.apache.iceberg.MetricsConfig.forTable(table))
    return path, len(payload), metrics


def _data_file(spark: SparkSession, table: Any, data: Any) -> Any:
    jvm = spark.sparkContext._jvm
    path, size, metrics = _write(spark, table, data, "data")
    return (jvm.org.apache.iceberg.DataFiles.builder(table.spec()).withPath(path)
            .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET).withFileSizeInBytes(size)
            .withMetrics(metrics).build())


def _equality_delete_file(spark: SparkSession, table: Any, keys: Any, field_ids: Sequence[int]) -> Any:
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    path, size, metrics = _write(spark, table, keys, "eq-deletes")
    ids = gateway.new_array(jvm.int, len(field_ids))
    for i, field_id in enumerate(field_ids):
        ids[i] = field_id
    return (jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec()).ofEqualityDeletes(ids)
            .withPath(path).withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
            .withFileSizeInBytes(size).withMetrics(metrics).build())


def _writable(table: Any, deletes: bool = False) -> bool:
    """Whether this module writes ``table``: unpartitioned, and for ``deletes`` (a row delta)
    of format 2 and merged on read (a table set to copy-on-write gets no delete files)."""
    try:
        if not table.spec().isUnpartitioned():
            return False
        return not deletes or (int(table.operations().current().formatVersion()) >= 2
                               and table.properties().get("write.merge.mode") == "merge-on-read")
    except Exception:  # noqa: BLE001 - not a BaseTable: Spark writes it
        return False


def _commit(spark: SparkSession, update: Any, props: Mapping[str, str]) -> None:
    for key, value in props.items():
        update = update.set(str(key), str(value))
    runtime.run_with_commit_properties(spark, props, update.commit)


def commit_changes(spark: SparkSession, name: str, changes: DirectChanges, primary_key: Sequence[str],
                   props: Mapping[str, str], *, planned_head: Optional[int], replace: bool) -> bool:
    """Commit ``changes`` to Iceberg table ``name``, planned on snapshot ``planned_head``:
    ``replace`` (after a TRUNCATE) makes the new rows the table's whole content, otherwise
    the touched keys' rows are replaced. False (nothing written) when the table is not
    one this module writes; then Spark does."""
    table = catalog.iceberg_table(spark, name)
    if table is None:
        return False
    table.refresh()
    if not _writable(table, deletes=not replace):
        return False
    fields = list(table.schema().columns())
    if sorted(f.name() for f in fields) != sorted(changes.rows.column_names):
        return False
    schema = arrow_schema(fields)
    if schema is None:
        return False
    rows = conform(changes.rows.select(schema.names), schema)
    key_schema = arrow_schema([table.schema().findField(k) for k in primary_key])
    keys = conform(changes.keys, key_schema) if key_schema is not None else None
    if rows is None or keys is None:
        return False
    jvm = spark.sparkContext._jvm
    expressions = jvm.org.apache.iceberg.expressions.Expressions
    if replace:
        update = table.newOverwrite().overwriteByRowFilter(expressions.alwaysTrue())
        if rows.num_rows:
            update = update.addFile(_data_file(spark, table, rows))
        if planned_head is not None:
            update = (update.validateFromSnapshot(planned_head).conflictDetectionFilter(expressions.alwaysTrue())
                      .validateNoConflictingData().validateNoConflictingDeletes())
    else:
        if not rows.num_rows and (not keys.num_rows or planned_head is None):
            return True  # nothing to change
        update = table.newRowDelta()
        if rows.num_rows:
            update = update.addRows(_data_file(spark, table, rows))
        if keys.num_rows and planned_head is not None:  # an empty table has no rows to replace
            update = update.addDeletes(_equality_delete_file(
                spark, table, keys, [table.schema().findField(k).fieldId() for k in primary_key]))
        if planned_head is not None:
            update = (update.validateFromSnapshot(planned_head).conflictDetectionFilter(expressions.alwaysTrue())
                      .validateNoConflictingDataFiles().validateNoConflictingDeleteFiles())
    _commit(spark, update, props)
    return True


def append_rows(spark: SparkSession, name: str, rows: Any, props: Mapping[str, str]) -> bool:
    """Append ``rows`` (a pyarrow table with the table's column names) to Iceberg table
    ``name`` in one commit; False (nothing written) when this module does not write it."""
    table = catalog.iceberg_table(spark, name)
    if table is None:
        return False
    table.refresh()
    if not _writable(table):
        return False
    fields = list(table.schema().columns())
    schema = arrow_schema(fields)
    if schema is None or sorted(schema.names) != sorted(rows.column_names):
        return False
    data = conform(rows.select(schema.names), schema)
    if data is None:
        return False
    _commit(spark, table.newAppend().appendFile(_data_file(spark, table, data)), props)
    return True


def direct_candidate(work: TableWork) -> bool:
    """Whether the table's batch is simple enough for a direct commit: merged by key into a
    table that exists, no schema statement, default backfill, renamed column or data-contract
    column, and staged changes known (read without Spark) to change no key and to hold whole
    images."""
    facts = work.facts
    return (work.mode == MODE_MERGE and work.exists and bool(work.files) and not work.statements
            and not work.defaults and not work.insert_defaults and not any(work.fields)
            and not work.contract_columns and facts is not None and not facts.key_changes
            and not facts.partial_updates)


def apply_direct(spark: SparkSession, work: TableWork, batch: Batch, stream: str, max_bytes: int) -> Optional[dict]:
    """The table's batch committed directly (see the module's docstring); None when it is
    not a candidate, and nothing was written."""
    if max_bytes <= 0 or not direct_candidate(work):
        return None
    reset = work.resets[-1]["_position"] if work.resets else None
    changes = collapse_staged(work.files, work.primary_key, [n for n, _ in work.plan.columns],
                              since=work.since, reset=reset, max_bytes=max_bytes)
    if changes is None:
        return None
    props = commit_properties(batch, stream, work.source)
    if not commit_changes(spark, work.name, changes, work.primary_key, props,
                          planned_head=work.state.head, replace=bool(work.resets)):
        return None
    return {"truncated": bool(work.resets), "key_change_chains": False, "direct": True}
