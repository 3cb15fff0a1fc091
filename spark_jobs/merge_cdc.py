"""Apply staged binlog changes to Apache Iceberg tables with Spark ``MERGE INTO``, exactly once.

Input: the manifests of bounded dumps (see ``airflow_provider_binlog/staging/contract.py``).
Each manifest is one *batch*; batches are applied in checkpoint order, and consecutive batches
must be contiguous (the end of one is the start of the next).

Run it with ``spark-submit`` (the Iceberg catalog comes from the Spark configuration)::

    spark-submit spark_jobs/merge_cdc.py --manifest /staging/<dump_id> --catalog lake \\
        --namespace shop_cdc [--checkpoint-store /var/lib/cdc --checkpoint-key shop]

or embedded, with a local Spark and a Hadoop catalog over ``--warehouse``::

    .venv/bin/python spark_jobs/merge_cdc.py --warehouse /data/warehouse --manifest ... \\
        --namespace shop_cdc

Semantics, per source table ``<schema>.<table>`` and batch:

- Target: ``<catalog>.<namespace>.<schema>__<table>`` (see :func:`iceberg_table_name`).
- Changes are ordered by ``(_binlog_seq, _binlog_pos, _row)``, never by time, and collapsed
  to the final state of each primary key. An update that changes the primary key deletes the
  old key and writes the new one. Deletes delete, inserts and updates upsert; columns missing
  from a MINIMAL/NOBLOB after image keep the value the row had.
- The manifest's ``ddl`` records say what each schema statement does to the captured tables
  (``ops``, written by the dump from its schema history). TRUNCATE TABLE / DROP TABLE / CREATE
  OR REPLACE empty the table at their position: the changes after the last one replace the
  table's content. A captured table renamed to a name that is not captured is emptied the
  same way; a rename that gives a captured table rows that are not in the binlog fails the
  batch before anything is committed (load that table from a new snapshot). An online schema
  change cut-over (a shadow created LIKE the table swapped in by RENAME) is a change of the
  table's columns.
- Schema changes seen in the staged files (added or dropped columns, type widening) are
  applied with ``ALTER TABLE`` before the MERGE. A change Iceberg cannot express fails the
  batch before anything is committed. A column added in the batch with a literal default (or
  the implicit default of a NOT NULL number, string or ENUM) gets it in the rows that existed
  before, as in the source (the value comes with the DDL record's ``alter`` op).
- Tables the job creates are Iceberg format v2, written in primary key order
  (``WRITE ORDERED BY``), and merge-on-read (see :data:`DEFAULT_TABLE_PROPERTIES`): a MERGE
  writes the changed rows and position delete files, not the data files the changed rows sit
  in. Its target scan reads the key columns only (and the other columns only when some image
  lacks columns that the row keeps), and drops the rows whose key is not among the changed
  keys as it reads them, so only those reach the join with the changes. ``--maintenance``
  compacts the delete files away and expires old snapshots (see :func:`run_maintenance`).
- Tables without a primary key get an append-only change log (one row per change with its
  envelope and image) instead of a MERGE.
- Every commit carries the batch's end checkpoint (``binlog.checkpoint``) and id
  (``binlog.batch_id``) in its snapshot summary. A table whose last commit already holds the
  batch end is skipped, so a rerun, or a resumed run after a crash between two tables, changes
  nothing twice. After the tables, a row is appended to ``<namespace>._binlog_batches`` (the
  ledger, which gives the stream position when no checkpoint store is used), then the
  checkpoint store is advanced with compare-and-set from the batch start to its end.
- With a checkpoint store, a run holds the key's run lock (``flock``, see
  ``FileCheckpointStore.exclusive``) while it applies batches: a second run of the same load
  fails at once with :class:`ConcurrentRunError` instead of committing the same batch again.
- Each staged file is checked against the SHA-256 its manifest records before anything is
  committed.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.storagelevel import StorageLevel

from airflow_provider_binlog.checkpoint import (ABSENT, Checkpoint, CheckpointLockedError, CheckpointStore,
                                                open_checkpoint_store)
from airflow_provider_binlog.merge.batches import Batch, binlog_point as _position, \
    checkpoint_text as _checkpoint_text, compare_checkpoints, plan_batches
from airflow_provider_binlog.merge.ddl_plan import column_defaults as _column_defaults, \
    column_renames as _column_renames, ddl_ops as _ddl_ops, insert_defaults as _insert_defaults, \
    moves as _moves, reset_records as _reset_records
from airflow_provider_binlog.merge.errors import (BatchGapError, ConcurrentRunError, MergeJobError,
                                                  SchemaEvolutionError)
from airflow_provider_binlog.merge.key_chains import fold_key_chains, hashable as _hashable
from airflow_provider_binlog.merge.sql import check_identifier as _check_identifier, literal as _lit, quote as _q
from airflow_provider_binlog.spark.runtime import local_spark_session, run_with_commit_properties
from airflow_provider_binlog.staging.contract import ENVELOPE_COLUMNS
from airflow_provider_binlog.staging.manifest import ManifestError
from airflow_provider_binlog.tables import iceberg_table_name

log = logging.getLogger("merge_cdc")

SUMMARY_CHECKPOINT = "binlog.checkpoint"
SUMMARY_BATCH = "binlog.batch_id"
SUMMARY_START = "binlog.start"
SUMMARY_STREAM = "binlog.stream"
SUMMARY_MOVE = "binlog.move"
PROP_SOURCE = "binlog.source"
PROP_MODE = "binlog.mode"
PROP_PRIMARY_KEY = "binlog.primary-key"
MODE_MERGE = "merge"
MODE_CHANGELOG = "changelog"
LEDGER_TABLE = "_binlog_batches"
DEFAULT_STREAM = "default"
DEFAULT_MAX_KEY_CHANGE_ROWS = 2_000_000
#: Most distinct key values listed in a MERGE's target filter (see :func:`_key_filter`).
DEFAULT_MAX_FILTER_KEYS = 100_000

#: Iceberg table properties of the tables the job creates; ``--table-property`` overrides them.
#: Row-level changes are merge-on-read: a MERGE (and an UPDATE or DELETE) writes the changed
#: rows and position delete files naming the rows they replace, without rewriting the data
#: files those rows sit in, so the cost of a batch follows the batch, not the table. The
#: distribution modes keep Iceberg's defaults: for merge-on-read, the changes (a few rows)
#: are clustered by the data file they touch and written by one task per partition, sorted;
#: appends and copy-on-write rewrites are range-distributed by the write order. Each write
#: task writes one delete file for all the data files of a partition
#: (``write.delete.granularity=partition``), so the files a commit adds do not grow with the
#: number of data files its changes are spread over. Maintenance (see
#: :func:`run_maintenance`) folds the delete files back into the data files.
DEFAULT_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.delete.granularity": "partition",
}

#: Envelope columns of a change-log table (tables without a primary key), before the image.
CHANGELOG_ENVELOPE = (
    ("_op", T.StringType()), ("_binlog_file", T.StringType()), ("_binlog_seq", T.LongType()),
    ("_binlog_pos", T.LongType()), ("_row", T.IntegerType()), ("_gtid", T.StringType()),
    ("_commit_ts", T.TimestampType()), ("_txn", T.StringType()), ("_batch_id", T.StringType()),
    ("_absent", T.ArrayType(T.StringType())),
)

LEDGER_SCHEMA = T.StructType([
    T.StructField("batch_id", T.StringType()), T.StructField("stream", T.StringType()),
    T.StructField("start_checkpoint", T.StringType()), T.StructField("end_checkpoint", T.StringType()),
    T.StructField("tables", T.ArrayType(T.StringType())), T.StructField("staged_rows", T.LongType()),
    T.StructField("applied_at", T.TimestampType()),
])

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ORDER_TYPE = T.StructType([T.StructField("seq", T.LongType()), T.StructField("pos", T.LongType()),
                            T.StructField("row", T.IntegerType())])


# --------------------------------------------------------------------------- names


# --------------------------------------------------------------------------- checkpoints


# --------------------------------------------------------------------------- batches


# --------------------------------------------------------------------------- types


def _arrow_to_spark(text: str) -> T.DataType:
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
        return T.ArrayType(_arrow_to_spark(m.group(1)))
    raise SchemaEvolutionError(f"no Iceberg type for staged Arrow type {text!r}")


def iceberg_type_for_arrow(arrow_type: str) -> str:
    """The Iceberg column type (Spark SQL spelling) of a staged Arrow type string."""
    return _sql_type(_arrow_to_spark(arrow_type))


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


def _sql_type(data_type: T.DataType) -> str:
    return data_type.simpleString()


def _fits(staged: T.DataType, target: T.DataType) -> bool:
    """Staged values can be written to a column of ``target`` type without loss, as is."""
    if _sql_type(staged) == _sql_type(target):
        return True
    if isinstance(staged, T.IntegerType) and isinstance(target, T.LongType):
        return True
    if isinstance(staged, T.FloatType) and isinstance(target, T.DoubleType):
        return True
    if isinstance(staged, T.DecimalType) and isinstance(target, T.DecimalType):
        return staged.scale == target.scale and staged.precision <= target.precision
    return False


def _can_widen(current: T.DataType, staged: T.DataType) -> bool:
    """Iceberg can promote a column of type ``current`` to ``staged``."""
    if isinstance(current, T.IntegerType) and isinstance(staged, T.LongType):
        return True
    if isinstance(current, T.FloatType) and isinstance(staged, T.DoubleType):
        return True
    if isinstance(current, T.DecimalType) and isinstance(staged, T.DecimalType):
        return current.scale == staged.scale and current.precision < staged.precision
    return False


# --------------------------------------------------------------------------- schema evolution


@dataclasses.dataclass
class SchemaPlan:
    """The target columns after a batch, and the ALTERs leading there.

    ``valid_from[name]`` is the index of the first staged part whose values of ``name`` belong
    to the final column (a column dropped and added again starts over)."""

    columns: list[tuple[str, T.DataType]]
    operations: list[tuple]
    valid_from: dict[str, int]

    def type_of(self, name: str) -> T.DataType:
        return dict(self.columns)[name]


def plan_schema(current: Optional[Sequence[tuple[str, T.DataType]]],
                layouts: Sequence[Sequence[tuple[str, T.DataType]]], *, table: str = "",
                drop_columns: bool = True) -> SchemaPlan:
    """Follow the staged layouts (in staging order) from the ``current`` Iceberg columns
    (None: no table yet). Operations: ``("create", columns)``, ``("add", name, type, after)``
    (``after`` None: first), ``("drop", name)``, ``("type", name, type)``."""
    ops: list[tuple] = []
    valid_from: dict[str, int] = {}
    cols: Optional[list[tuple[str, T.DataType]]] = list(current) if current is not None else None
    for i, layout in enumerate(layouts):
        staged = [(n, iceberg_type_for_spark(t)) for n, t in layout]
        if cols is None:
            cols = list(staged)
            ops.append(("create", list(cols)))
            continue
        names = {n for n, _ in staged}
        if drop_columns:
            for name, _ in list(cols):
                if name not in names:
                    ops.append(("drop", name))
                    cols = [c for c in cols if c[0] != name]
        prev = None
        for name, typ in staged:
            index = next((j for j, c in enumerate(cols) if c[0] == name), None)
            if index is None:
                ops.append(("add", name, typ, prev))
                at = 0 if prev is None else next(j for j, c in enumerate(cols) if c[0] == prev) + 1
                cols.insert(at, (name, typ))
                valid_from[name] = i
            else:
                current_type = cols[index][1]
                if not _fits(typ, current_type):
                    if not _can_widen(current_type, typ):
                        raise SchemaEvolutionError(
                            f"{table}: column {name!r} changed from {_sql_type(current_type)} to "
                            f"{_sql_type(typ)} in the staged data, which Iceberg cannot express "
                            f"(only int->bigint, float->double and decimal precision increases); "
                            f"nothing of this batch was committed. Recreate the table (or add a "
                            f"new column) and reload it from a snapshot")
                    ops.append(("type", name, typ))
                    cols[index] = (name, typ)
            prev = name
    return SchemaPlan(cols or [], ops, valid_from)


def schema_statements(table: str, operations: Sequence[tuple], properties: Mapping[str, str]) -> list[str]:
    """The Spark SQL statements of :func:`plan_schema` operations on Iceberg ``table``."""
    out = []
    for op in operations:
        if op[0] == "create":
            cols = ", ".join(f"{_q(n)} {_sql_type(t)}" for n, t in op[1])
            props = ", ".join(f"{_lit(k)}={_lit(v)}" for k, v in properties.items())
            out.append(f"CREATE TABLE {table} ({cols}) USING iceberg"
                       + (f" TBLPROPERTIES ({props})" if props else ""))
        elif op[0] == "add":
            where = " FIRST" if op[3] is None else f" AFTER {_q(op[3])}"
            out.append(f"ALTER TABLE {table} ADD COLUMN {_q(op[1])} {_sql_type(op[2])}{where}")
        elif op[0] == "drop":
            out.append(f"ALTER TABLE {table} DROP COLUMN {_q(op[1])}")
        elif op[0] == "type":
            out.append(f"ALTER TABLE {table} ALTER COLUMN {_q(op[1])} TYPE {_sql_type(op[2])}")
        elif op[0] == "order":
            out.append(f"ALTER TABLE {table} WRITE ORDERED BY {', '.join(_q(c) for c in op[1])}")
        elif op[0] == "properties":
            props = ", ".join(f"{_lit(k)}={_lit(v)}" for k, v in op[1].items())
            out.append(f"ALTER TABLE {table} SET TBLPROPERTIES ({props})")
        else:  # pragma: no cover - programming error
            raise ValueError(f"unknown schema operation {op!r}")
    return out


def create_table_statements(name: str, source: Sequence[str], columns: Sequence[tuple[str, T.DataType]],
                            mode: str, primary_key: Sequence[str],
                            table_properties: Optional[Mapping[str, str]] = None) -> list[str]:
    """The statements creating the Iceberg table ``name`` of source table ``source``
    (``(schema, table)``) with ``columns`` (the image columns; a change log gets its envelope
    columns first): the ``binlog.*`` properties, :data:`DEFAULT_TABLE_PROPERTIES` overridden
    by ``table_properties``, and for a merged table the write order of its primary key, so
    the files it writes hold sorted runs of keys."""
    props = {PROP_SOURCE: json.dumps(list(source)), PROP_MODE: mode,
             PROP_PRIMARY_KEY: json.dumps(list(primary_key)), **DEFAULT_TABLE_PROPERTIES,
             **(table_properties or {})}
    if mode == MODE_CHANGELOG:
        columns = [*CHANGELOG_ENVELOPE, *columns]
    statements = schema_statements(name, [("create", list(columns))], props)
    if mode == MODE_MERGE:
        statements += schema_statements(name, [("order", list(primary_key))], {})
    return statements


def _table_columns(spark: SparkSession, table: str) -> list[tuple[str, T.DataType]]:
    return [(f.name, f.dataType) for f in spark.table(table).schema.fields]


def evolve_schema(spark: SparkSession, table: str, staged_columns: Sequence[tuple[str, T.DataType]],
                  *, drop_columns: bool = True) -> list[str]:
    """ALTER existing Iceberg ``table`` to hold ``staged_columns`` (``[(name, Spark type)]``):
    add and drop columns, widen types; raise :class:`SchemaEvolutionError` for changes
    Iceberg cannot express. Returns the statements run."""
    plan = plan_schema(_table_columns(spark, table), [staged_columns], table=table,
                       drop_columns=drop_columns)
    statements = schema_statements(table, plan.operations, {})
    for sql in statements:
        spark.sql(sql)
    return statements


# --------------------------------------------------------------------------- snapshots


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
    _refresh(spark, table)
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


def _head(spark: SparkSession, table: str) -> Optional[int]:
    rows = spark.sql(f"SELECT snapshot_id FROM {table}.refs WHERE name = 'main'").collect()
    return rows[0][0] if rows else None


def _table_properties(spark: SparkSession, table: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


# --------------------------------------------------------------------------- change collapse


def read_staged(spark: SparkSession, path: str) -> DataFrame:
    """One staged Parquet file. It is written by pyarrow in the proleptic Gregorian calendar
    (like Iceberg), so no calendar rebasing is done on read (dates before 1582 stay exact)."""
    return spark.read.option("datetimeRebaseMode", "CORRECTED") \
        .option("int96RebaseMode", "CORRECTED").parquet(path)


def _order_at_or_after(position: tuple[int, int], strict: bool = False) -> SparkColumn:
    seq, pos = position
    o = F.col("_o")
    tail = (o.getField("pos") > F.lit(pos)) if strict else (o.getField("pos") >= F.lit(pos))
    return (o.getField("seq") > F.lit(seq)) | ((o.getField("seq") == F.lit(seq)) & tail)


def _order_struct() -> SparkColumn:
    return F.struct(F.col("_binlog_seq").cast("bigint").alias("seq"),
                    F.col("_binlog_pos").cast("bigint").alias("pos"),
                    F.col("_row").cast("int").alias("row"))


def flat_changes(spark: SparkSession, files: Sequence[str], layouts: Sequence[Sequence[tuple]],
                 schema: SchemaPlan, primary_key: Sequence[str],
                 defaults: Optional[Mapping[str, str]] = None,
                 fields: Optional[Sequence[Mapping[str, str]]] = None,
                 insert_defaults: Optional[Mapping[str, str]] = None) -> DataFrame:
    """The staged changes of one table as one frame, values cast to the target types.
    ``defaults`` (column -> SQL literal text) fills the columns added in the batch with a
    default into the changes staged before the column was (re)added, as the source did.

    Columns: ``_o`` (order struct seq/pos/row), ``_op``, ``v<i>``/``h<i>`` (after-image value
    of target column i and whether the image holds it), ``kb<j>``/``ka<j>`` (primary key
    column j of the before image, and of the row after the change: the after image's value,
    else the before image's, as MINIMAL images leave unchanged key columns out). ``fields``
    gives, per file, the staged field name of a column renamed after the file's rows.
    ``insert_defaults`` (column -> literal text) is what an INSERT that left the column out gave
    it (MINIMAL row images log only the columns the statement set)."""
    names = [n for n, _ in schema.columns]
    frames = []
    for part, (path, layout) in enumerate(zip(files, layouts)):
        df = read_staged(spark, path)
        renamed = dict(fields[part]) if fields else {}
        field = lambda n: renamed.get(n, n)  # noqa: E731
        present = {n for n, _ in layout}
        absent = F.coalesce(F.col("_after_absent"), F.array().cast("array<string>"))
        select = [_order_struct().alias("_o"), F.col("_op")]
        for i, (name, typ) in enumerate(schema.columns):
            if name in present and part >= schema.valid_from.get(name, 0):
                value = F.col("_after").getField(field(name)).cast(typ)
                has = F.col("_after").isNotNull() & ~F.array_contains(absent, field(name))
                if insert_defaults and name in insert_defaults:
                    omitted = (F.col("_op") == "insert") & F.array_contains(absent, field(name))
                    value = F.when(omitted, F.lit(insert_defaults[name]).cast(typ)).otherwise(value)
                    has = has | omitted
            elif defaults and name in defaults and part < schema.valid_from.get(name, 0):
                value, has = F.lit(defaults[name]).cast(typ), F.col("_after").isNotNull()
            else:
                value, has = F.lit(None).cast(typ), F.lit(False)
            select += [value.alias(f"v{i}"), has.alias(f"h{i}")]
        for j, key in enumerate(primary_key):
            select.append(F.col("_before").getField(field(key)).cast(schema.type_of(key)).alias(f"kb{j}"))
        frames.append(df.select(*select))
    flat = functools.reduce(DataFrame.unionByName, frames)
    for j, key in enumerate(primary_key):
        i = names.index(key)
        flat = flat.withColumn(f"ka{j}", F.when(F.col(f"h{i}"), F.col(f"v{i}")).otherwise(F.col(f"kb{j}")))
    return flat


def _key_struct(prefix: str, n: int) -> SparkColumn:
    return F.struct(*[F.col(f"{prefix}{j}").alias(f"k{j}") for j in range(n)])


def change_events(flat: DataFrame, n_keys: int, n_cols: int, key_columns: Sequence[int]) -> DataFrame:
    """One event per key a change touches: inserts and updates upsert their after key, deletes
    delete their before key, and an update that changes the key is a delete of the old key plus
    an ``insert`` of the new one (``arrive`` when its after image lacks some columns: those
    then come from the old row). Columns: ``_o``, ``_kind``, ``_side`` (``a``/``b``: the key is
    the change's after or before key), ``k<j>``, ``_org`` (old key of an arrive), ``v``/``h``."""
    before, after = _key_struct("kb", n_keys), _key_struct("ka", n_keys)
    no_key = F.when(F.lit(False), before)
    same_key = functools.reduce(lambda a, b: a & b,
                                [F.col(f"kb{j}").eqNullSafe(F.col(f"ka{j}")) for j in range(n_keys)])
    others = [i for i in range(n_cols) if i not in set(key_columns)]
    full = functools.reduce(lambda a, b: a & b, [F.col(f"h{i}") for i in others], F.lit(True))
    op = F.col("_op")

    def ev(key: SparkColumn, kind: str, side: str, origin: SparkColumn = no_key) -> SparkColumn:
        return F.struct(key.alias("k"), F.lit(kind).alias("kind"), F.lit(side).alias("side"),
                        origin.alias("org"))

    key_change = (op == "update") & ~same_key
    events = F.when(key_change & ~full, F.array(ev(before, "delete", "b"), ev(after, "arrive", "a", before))) \
        .when(key_change, F.array(ev(before, "delete", "b"), ev(after, "insert", "a"))) \
        .when(op == "delete", F.array(ev(before, "delete", "b"))) \
        .when(op == "insert", F.array(ev(after, "insert", "a"))) \
        .otherwise(F.array(ev(after, "update", "a")))
    exploded = flat.select("*", F.explode(events).alias("_ev"))
    cols = [F.col("_o"), F.col("_ev.kind").alias("_kind"), F.col("_ev.side").alias("_side"),
            *[F.col("_ev.k").getField(f"k{j}").alias(f"k{j}") for j in range(n_keys)],
            F.col("_ev.org").alias("_org")]
    for i in range(n_cols):
        cols += [F.col(f"v{i}"), F.when(F.col("_ev.kind") == "delete", F.lit(False))
                 .otherwise(F.col(f"h{i}")).alias(f"h{i}")]
    return exploded.select(*cols)


def _collapse_by_window(events: DataFrame, n_keys: int, n_cols: int) -> DataFrame:
    """Final state per key of events without key chains: the segment after the last insert or
    delete of the key decides; each column takes its value from the segment's last change
    holding it."""
    keys = [f"k{j}" for j in range(n_keys)]
    reset = F.max(F.when(F.col("_kind") != "update", F.col("_o"))).over(Window.partitionBy(*keys))
    seg = events.withColumn("_reset", reset) \
        .filter(F.col("_reset").isNull() | (F.col("_o") >= F.col("_reset")))
    aggs = [F.max_by("_kind", "_o").alias("_last"),
            F.max(F.col("_reset").isNotNull()).alias("_fresh")]
    for i in range(n_cols):
        aggs += [F.max_by(f"v{i}", F.when(F.col(f"h{i}"), F.col("_o"))).alias(f"v{i}"),
                 F.max(F.col(f"h{i}")).alias(f"h{i}")]
    out = seg.groupBy(*keys).agg(*aggs)
    return out.select(
        *keys, F.when(F.col("_last") == "delete", "delete").otherwise("upsert").alias("_op"),
        F.col("_fresh"), (~F.col("_fresh")).alias("_self"),
        *[F.lit(None).cast(out.schema[f"k{j}"].dataType).alias(f"ok{j}") for j in range(n_keys)],
        *[c for i in range(n_cols) for c in (F.col(f"v{i}"), F.col(f"h{i}"))])


def _collapse_chains(spark: SparkSession, flat: DataFrame, events: DataFrame, n_keys: int,
                     n_cols: int, max_rows: int) -> Optional[DataFrame]:
    keys = [f"k{j}" for j in range(n_keys)]
    rows = events.select("_o", "_kind", "_side", *keys, "_org",
                         F.array(*[F.col(f"h{i}") for i in range(n_cols)]).alias("_has")) \
        .limit(max_rows + 1).collect()
    if len(rows) > max_rows:
        raise MergeJobError(
            f"more than {max_rows} changes involve keys changed by updates whose after image lacks "
            f"columns (binlog_row_image MINIMAL/NOBLOB); they are resolved in order on the driver, "
            f"which is limited to {max_rows} (--max-key-change-rows)")
    folded = fold_key_chains(
        [(tuple(r["_o"]), r["_kind"], r["_side"], tuple(_hashable(r[k]) for k in keys),
          None if r["_org"] is None else tuple(_hashable(v) for v in r["_org"]), list(r["_has"]))
         for r in rows], n_cols)
    if not folded:
        return None
    schema = T.StructType([
        T.StructField("_fid", T.LongType()), T.StructField("_ko", _ORDER_TYPE),
        T.StructField("_kside", T.StringType()), T.StructField("_op", T.StringType()),
        T.StructField("_oo", _ORDER_TYPE), T.StructField("_oside", T.StringType()),
        T.StructField("_src", T.ArrayType(_ORDER_TYPE)),
    ])
    data = [(fid, key_ref[0], key_ref[1], op, origin[0] if origin else None,
             origin[1] if origin else None, src)
            for fid, (key_ref, op, origin, src) in enumerate(folded)]
    fold = spark.createDataFrame(data, schema)
    key_cols = flat.select(F.col("_o").alias("_ro"), *[F.col(f"kb{j}") for j in range(n_keys)],
                           *[F.col(f"ka{j}") for j in range(n_keys)])

    def pick(side_col: str, j: int) -> SparkColumn:
        return F.when(F.col(side_col) == "a", F.col(f"ka{j}")).otherwise(F.col(f"kb{j}"))

    with_keys = fold.join(key_cols, fold["_ko"] == key_cols["_ro"]) \
        .select("_fid", "_op", "_oo", "_oside", "_src", *[pick("_kside", j).alias(f"k{j}") for j in range(n_keys)])
    origin_cols = key_cols.select(F.col("_ro").alias("_ro2"),
                                  *[F.col(f"kb{j}").alias(f"okb{j}") for j in range(n_keys)],
                                  *[F.col(f"ka{j}").alias(f"oka{j}") for j in range(n_keys)])
    with_origin = with_keys.join(origin_cols, with_keys["_oo"] == origin_cols["_ro2"], "left").select(
        *with_keys.columns,
        *[F.when(F.col("_oside") == "a", F.col(f"oka{j}")).otherwise(F.col(f"okb{j}")).alias(f"ok{j}")
          for j in range(n_keys)])
    sources = fold.select("_fid", "_src", F.explode(F.array_distinct(
        F.filter("_src", lambda x: x.isNotNull()))).alias("_so"))
    values_src = flat.select(F.col("_o").alias("_vo"), *[F.col(f"v{i}") for i in range(n_cols)])
    values = sources.join(values_src, sources["_so"] == values_src["_vo"]).groupBy("_fid").agg(
        *[F.max_by(f"v{i}", F.when(F.col("_src")[i] == F.col("_so"), F.col("_so"))).alias(f"v{i}")
          for i in range(n_cols)])
    out = with_origin.join(values, "_fid", "left")
    return out.select(
        *keys, "_op", F.col("_oo").isNull().alias("_fresh"), F.lit(False).alias("_self"),
        *[F.col(f"ok{j}") for j in range(n_keys)],
        *[c for i in range(n_cols) for c in (
            F.col(f"v{i}"), F.col("_src")[i].isNotNull().alias(f"h{i}"))])


def collapse_changes(spark: SparkSession, flat: DataFrame, n_keys: int, n_cols: int,
                     key_columns: Sequence[int], *,
                     max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS) -> DataFrame:
    """The final state of every key touched by the changes of ``flat`` (see
    :func:`flat_changes`): ``k<j>``, ``_op`` (``delete``/``upsert``), ``_fresh`` (the row was
    created in the batch: columns it lacks are null), ``_self`` (columns it lacks keep the
    target row's value), ``ok<j>`` (else: the key of the target row they come from),
    ``v<i>``/``h<i>``.

    Keys are collapsed with window functions. Keys linked by primary-key changes whose after
    image lacks columns (MINIMAL images) are folded in order on the driver (at most
    ``max_key_change_rows`` events)."""
    return _collapse(spark, flat, n_keys, n_cols, key_columns, max_key_change_rows)[0]


def _collapse(spark: SparkSession, flat: DataFrame, n_keys: int, n_cols: int,
              key_columns: Sequence[int], max_key_change_rows: int) -> tuple[DataFrame, bool]:
    """:func:`collapse_changes`, and whether some keys were folded on the driver."""
    events = change_events(flat, n_keys, n_cols, key_columns)
    if events.filter(F.col("_kind") == "arrive").limit(1).count() == 0:
        return _collapse_by_window(events, n_keys, n_cols), False
    keys = [f"k{j}" for j in range(n_keys)]
    same_key = functools.reduce(lambda a, b: a & b,
                                [F.col(f"kb{j}").eqNullSafe(F.col(f"ka{j}")) for j in range(n_keys)])
    changed = flat.filter((F.col("_op") == "update") & ~same_key)
    chain_keys = changed.select(*[F.col(f"kb{j}").alias(f"k{j}") for j in range(n_keys)]).union(
        changed.select(*[F.col(f"ka{j}").alias(f"k{j}") for j in range(n_keys)])).distinct()
    chained = events.join(chain_keys, keys, "left_semi")
    rest = _collapse_by_window(events.join(chain_keys, keys, "left_anti"), n_keys, n_cols)
    chains = _collapse_chains(spark, flat, chained, n_keys, n_cols, max_key_change_rows)
    return (rest, False) if chains is None else (rest.unionByName(chains), True)


# --------------------------------------------------------------------------- per table work


@dataclasses.dataclass
class TableWork:
    schema: str
    table: str
    name: str                          # catalog.namespace.table
    entry: Optional[dict]              # the manifest's table entry (None: DDL only)
    files: list[str]
    layouts: list[list[tuple[str, T.DataType]]]
    mode: str
    primary_key: list[str]
    exists: bool
    properties: dict
    state: AppliedState
    since: Optional[tuple[int, int]]   # apply only changes at or after this position
    resets: list[dict]                 # TRUNCATE / DROP TABLE records to apply, in order
    plan: Optional[SchemaPlan] = None
    defaults: dict = dataclasses.field(default_factory=dict)  # columns added with a default
    fields: list = dataclasses.field(default_factory=list)    # per file: column -> its staged field name
    insert_defaults: dict = dataclasses.field(default_factory=dict)  # column -> what an INSERT leaving it out gives
    statements: list[str] = dataclasses.field(default_factory=list)
    status: str = "pending"

    @property
    def source(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def staged_rows(self) -> int:
        return sum(self.entry["rows"].values()) if self.entry else 0


def _altered_layout(batch: Batch, work: "TableWork") -> Optional[list[tuple[str, T.DataType]]]:
    """The table's columns after the batch's last ``alter`` op that lists them (the dump's
    schema history gives them), as staged types; None when the batch has none."""
    from airflow_provider_binlog.schema_history import ColumnDef
    from airflow_provider_binlog.schema_history.columns import codec_column
    from airflow_provider_binlog.staging.contract import arrow_type_for

    last = None
    for position, _record, op in _ddl_ops(batch):
        if op["op"] == "alter" and tuple(op["table"]) == (work.schema, work.table) and op.get("columns") \
                and (work.since is None or position >= work.since):
            last = op["columns"]
    if last is None:
        return None
    return [(c["name"], _arrow_to_spark(str(arrow_type_for(codec_column(ColumnDef.from_json(c))))))
            for c in last]


def _backfill_defaults(spark: SparkSession, work: "TableWork", batch: Batch, stream: str) -> str:
    """Give the rows the table held before the batch the default of the columns added in the
    batch (the source did so without row events). Idempotent: until the batch's own commit,
    no change after the ALTER is in the table."""
    sets = ", ".join(f"{_q(n)} = CAST({_lit(v)} AS {_sql_type(work.plan.type_of(n))})"
                     for n, v in sorted(work.defaults.items()))
    sql = f"UPDATE {work.name} SET {sets}"
    log.info("%s", sql)
    run_with_commit_properties(spark, {"binlog.backfill": batch.batch_id, SUMMARY_STREAM: stream,
                                       "binlog.source": work.source}, lambda: spark.sql(sql))
    return sql


def _table_exists(spark: SparkSession, name: str) -> bool:
    return spark.catalog.tableExists(name)


def _refresh(spark: SparkSession, table: str) -> None:
    """Drop what this session caches of ``table`` (Iceberg's caching catalog keeps a loaded
    table for a while): what a batch is applied on must be the table as last committed,
    also when another process committed since this session loaded it."""
    if spark.catalog.tableExists(table):
        spark.sql(f"REFRESH TABLE {table}")


def _prepare_table(spark: SparkSession, batch: Batch, catalog: str, namespace: str,
                   schema: str, table: str, entry: Optional[dict], resets: list[dict],
                   table_properties: Mapping[str, str]) -> TableWork:
    name = f"{catalog}.{namespace}.{iceberg_table_name(schema, table)}"
    exists = _table_exists(spark, name)
    properties = _table_properties(spark, name) if exists else {}
    source = json.dumps([schema, table])
    if exists and properties.get(PROP_SOURCE) not in (None, source):
        raise MergeJobError(f"{name} holds source table {properties.get(PROP_SOURCE)}, not "
                            f"{schema}.{table}; refusing to write into it")
    if exists and PROP_SOURCE not in properties:
        raise MergeJobError(f"{name} exists but was not created by the merge job (no "
                            f"{PROP_SOURCE} property); refusing to write into it")
    primary_key = list(entry["primary_key"]) if entry else json.loads(properties.get(PROP_PRIMARY_KEY, "[]"))
    mode = properties.get(PROP_MODE) or (MODE_MERGE if primary_key else MODE_CHANGELOG)
    if mode == MODE_MERGE and not primary_key:
        raise MergeJobError(f"{schema}.{table} has no primary key any more, but {name} is merged "
                            f"by key; give the table a primary key again, or rename the Iceberg "
                            f"table to start a new one (it will be a change log)")
    state = applied_state(spark, name) if exists else AppliedState(None, None, None, None, None)
    work = TableWork(schema, table, name, entry, [], [], mode, primary_key, exists, properties,
                     state, None, [])
    if state.checkpoint is not None:
        if compare_checkpoints(batch.end, state.checkpoint) <= 0:
            work.status = "already-applied"
            return work
        if compare_checkpoints(batch.start, state.checkpoint) < 0:
            # the table went further than the batch start (a batch cut differently before):
            # apply only the changes after its checkpoint
            work.since = _position(state.checkpoint)
            if work.since is None:
                raise MergeJobError(f"{name} is at [{state.checkpoint}] inside batch "
                                    f"{batch.batch_id}, which needs binlog coordinates to resume")
    work.resets = [r for r in resets if work.since is None or r["_position"] >= work.since]
    altered = _altered_layout(batch, work) if mode == MODE_MERGE else None
    if entry is None and not work.resets and not (altered and exists):
        work.status = "no-change"
        return work
    if entry is None and not exists:
        work.status = "no-change"  # a TRUNCATE of a table never loaded: nothing to empty
        return work
    renames = _column_renames(batch, work) if mode == MODE_MERGE else []
    if renames:
        renamed_to = dict(renames)
        primary_key = work.primary_key = [renamed_to.get(k, k) for k in primary_key]
    if entry is not None:
        work.files = [str(p) for p in batch.manifest.files(entry)]
        for path in work.files:
            staged = read_staged(spark, path).schema
            missing = [c for c in ENVELOPE_COLUMNS if c not in staged.names]
            if missing:
                raise MergeJobError(f"{path}: not a staged file of this format (no {', '.join(missing)})")
            image = staged["_after"].dataType
            work.layouts.append([(f.name, f.dataType) for f in image.fields])
        for old, new in renames:
            # staged rows from before the rename name the column as it was: read them under the new name
            for k, layout in enumerate(work.layouts):
                names_here = {n for n, _ in layout}
                if old in names_here and new not in names_here:
                    while len(work.fields) < len(work.layouts):
                        work.fields.append({})
                    source_field = work.fields[k].pop(old, old)
                    work.fields[k][new] = source_field
                    work.layouts[k] = [(new if n == old else n, t) for n, t in layout]
        if mode == MODE_MERGE:
            for part, layout in zip(work.files, work.layouts):
                missing = [k for k in primary_key if k not in {n for n, _ in layout}]
                if missing:
                    raise MergeJobError(f"{part}: primary key column(s) {missing} of "
                                        f"{schema}.{table} are not staged")
    if mode == MODE_CHANGELOG:
        for layout in work.layouts:
            clash = [n for n, _ in layout if n in dict(CHANGELOG_ENVELOPE)]
            if clash:
                raise MergeJobError(f"{schema}.{table}: column(s) {clash} clash with the envelope "
                                    f"columns of its change-log table")
    current = None
    if exists:
        current = _table_columns(spark, name)
        if mode == MODE_CHANGELOG:
            envelope = dict(CHANGELOG_ENVELOPE)
            current = [c for c in current if c[0] not in envelope]
    rename_statements = []
    for old, new in renames:
        if current is not None and old in dict(current) and new not in dict(current):
            rename_statements.append(f"ALTER TABLE {name} RENAME COLUMN {_q(old)} TO {_q(new)}")
            current = [(new if n == old else n, t) for n, t in current]
    # the table's columns after the batch's last ALTER (from the schema history), so that a
    # column added with a default reaches the table in the batch of its ALTER, whether or not
    # rows follow it there
    work.plan = plan_schema(current, work.layouts + ([altered] if altered and (exists or work.layouts) else []),
                            table=f"{schema}.{table}", drop_columns=mode == MODE_MERGE)
    if mode == MODE_MERGE:
        for key in primary_key:
            if key not in dict(work.plan.columns):
                raise MergeJobError(f"{schema}.{table}: primary key column {key!r} is not a column")
            if work.plan.valid_from.get(key, 0) != 0:
                raise MergeJobError(f"{schema}.{table}: primary key column {key!r} was added or "
                                    f"re-added within batch {batch.batch_id}")
    ops = list(work.plan.operations)
    if ops and ops[0][0] == "create":
        statements = create_table_statements(name, (schema, table), ops[0][1], mode, primary_key,
                                             table_properties)
        statements += schema_statements(name, ops[1:], {})
    else:
        pre = []
        if mode == MODE_MERGE and json.loads(properties.get(PROP_PRIMARY_KEY, "[]")) != primary_key:
            pre = [("order", primary_key), ("properties", {PROP_PRIMARY_KEY: json.dumps(primary_key)})]
        statements = schema_statements(name, pre + ops, {})
    if mode == MODE_CHANGELOG:  # image columns stay after the envelope
        after_envelope = f" AFTER {_q(CHANGELOG_ENVELOPE[-1][0])}"
        statements = [s[:-len(" FIRST")] + after_envelope if s.startswith("ALTER") and s.endswith(" FIRST")
                      else s for s in statements]
    work.statements = rename_statements + statements
    if mode == MODE_MERGE:
        work.defaults = _column_defaults(batch, work)
        work.insert_defaults = _insert_defaults(batch, work)
    work.status = "ready"
    return work


def _commit_properties(batch: Batch, stream: str, source: str) -> dict[str, str]:
    return {SUMMARY_CHECKPOINT: _checkpoint_text(batch.end), SUMMARY_BATCH: batch.batch_id,
            SUMMARY_START: _checkpoint_text(batch.start), SUMMARY_STREAM: stream,
            "binlog.source": source}


def merge_table(spark: SparkSession, work: TableWork, *,
                max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS) -> tuple[Optional[DataFrame], bool]:
    """The collapsed changes of one table (see :func:`collapse_changes`), the source of its
    MERGE (or of the overwrite after a TRUNCATE), and whether some rows take unchanged columns
    from another target row (``ok<j>``). ``(None, False)`` when no rows are staged."""
    plan = work.plan
    names = [n for n, _ in plan.columns]
    n_keys, n_cols = len(work.primary_key), len(names)
    key_columns = [names.index(k) for k in work.primary_key]
    reset = work.resets[-1]["_position"] if work.resets else None
    if work.files:
        flat = flat_changes(spark, work.files, work.layouts, plan, work.primary_key, work.defaults,
                            work.fields, work.insert_defaults)
        if work.since is not None:
            flat = flat.filter(_order_at_or_after(work.since))
        if reset is not None:
            flat = flat.filter(_order_at_or_after(reset, strict=True))
        return _collapse(spark, flat, n_keys, n_cols, key_columns, max_key_change_rows)
    return None, False


def _merge_statement(table: str, view: str, plan: SchemaPlan, primary_key: Sequence[str], *,
                     target_values: bool = True, key_filter: Optional[str] = None) -> str:
    """The MERGE of the collapsed changes in ``view`` into ``table``.

    ``target_values`` False: no row keeps a column of its target row (every update carries
    all columns), so the target's non-key columns are not referenced and its scan reads the
    key columns only. ``key_filter``: a condition on the target's columns that every target
    row a change applies to meets (see :func:`_key_filter`); the target rows failing it are
    dropped as they are read, before the join."""
    names = [n for n, _ in plan.columns]
    keyset = set(primary_key)
    on = " AND ".join(f"t.{_q(k)} = s.k{j}" for j, k in enumerate(primary_key))
    if key_filter:
        on += f" AND {key_filter}"
    updates, values = [], []
    for i, name in enumerate(names):
        if name in keyset:
            values.append(f"s.k{primary_key.index(name)}")
            continue
        kept = f"WHEN s._self THEN t.{_q(name)} " if target_values else ""
        updates.append(f"t.{_q(name)} = CASE WHEN s.h{i} THEN s.v{i} WHEN s._fresh THEN NULL "
                       f"{kept}ELSE s.o{i} END")
        values.append(f"CASE WHEN s.h{i} THEN s.v{i} WHEN s._fresh OR s._self THEN NULL ELSE s.o{i} END")
    matched_update = f"WHEN MATCHED THEN UPDATE SET {', '.join(updates)} " if updates else ""
    return (f"MERGE INTO {table} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s._op = 'delete' THEN DELETE "
            f"{matched_update}"
            f"WHEN NOT MATCHED AND s._op <> 'delete' THEN INSERT ({', '.join(_q(n) for n in names)}) "
            f"VALUES ({', '.join(values)})")


def _needs_target_values(source: DataFrame, work: TableWork) -> bool:
    """Some upserted row keeps a column of its own target row: its image lacks the column
    (MINIMAL/NOBLOB) and the row was not created in the batch."""
    names = [n for n, _ in work.plan.columns]
    keyset = set(work.primary_key)
    partial = [~F.col(f"h{i}") for i, n in enumerate(names) if n not in keyset]
    if not partial:
        return False
    lacks = functools.reduce(lambda a, b: a | b, partial)
    return source.filter((F.col("_op") == "upsert") & F.col("_self") & lacks).limit(1).count() > 0


_LITERAL_TYPES = (T.IntegerType, T.ShortType, T.ByteType, T.LongType, T.DecimalType, T.StringType,
                  T.DateType)


def _sql_literal(value: Any, data_type: T.DataType) -> Optional[str]:
    """``value`` of ``data_type`` as a Spark SQL literal; None for a type not listed in
    ``_LITERAL_TYPES``."""
    if isinstance(data_type, (T.IntegerType, T.ShortType, T.ByteType)):
        return str(int(value))
    if isinstance(data_type, T.LongType):
        return f"{int(value)}L"
    if isinstance(data_type, T.DecimalType):
        return f"CAST({_lit(format(value, 'f'))} AS {_sql_type(data_type)})"
    if isinstance(data_type, T.StringType):
        return _lit(value)
    if isinstance(data_type, T.DateType):
        return f"DATE {_lit(value.isoformat())}"
    return None


def _key_filter(source: DataFrame, work: TableWork, max_keys: int) -> Optional[str]:
    """``t.<first key column> IN (<its values in the changes>)``, or None when there are more
    than ``max_keys`` distinct values (or the column's type has no literal here).

    In the MERGE's join condition this filter (a hash set lookup) applies to the target rows
    as they are read: only the rows of changed keys reach the join, instead of the whole
    table being shuffled to meet a few thousand changes. Every file is still read (its key
    column only), as changes spread over the key range touch every file."""
    key, data_type = work.primary_key[0], work.plan.type_of(work.primary_key[0])
    if not isinstance(data_type, _LITERAL_TYPES):
        return None
    values = [r[0] for r in source.select("k0").where(F.col("k0").isNotNull()).distinct()
              .limit(max_keys + 1).collect()]
    if not values or len(values) > max_keys:
        return None
    return f"t.{_q(key)} IN ({', '.join(_sql_literal(v, data_type) for v in sorted(values))})"


def _with_origin_values(spark: SparkSession, work: TableWork, source: DataFrame) -> DataFrame:
    """Add ``o<i>``: the values of the target row whose key is ``ok<j>`` (before the merge)."""
    names = [n for n, _ in work.plan.columns]
    n_keys = len(work.primary_key)
    if work.exists:
        target = spark.table(work.name).select(
            *[F.col(_q(k)).alias(f"tk{j}") for j, k in enumerate(work.primary_key)],
            *[F.col(_q(n)).alias(f"o{i}") for i, n in enumerate(names)])
        # only the origin rows (few) go into the join, picked as the target is read
        origins = source.where(F.col("ok0").isNotNull()).select(
            *[F.col(f"ok{j}").alias(f"tk{j}") for j in range(n_keys)]).distinct()
        target = target.join(F.broadcast(origins), [f"tk{j}" for j in range(n_keys)], "left_semi")
        cond = functools.reduce(lambda a, b: a & b,
                                [source[f"ok{j}"] == target[f"tk{j}"] for j in range(n_keys)])
        return source.join(target, cond, "left").drop(*[f"tk{j}" for j in range(n_keys)])
    return source.select("*", *[F.lit(None).cast(t).alias(f"o{i}") for i, (_, t) in enumerate(work.plan.columns)])


def _apply_merge_table(spark: SparkSession, work: TableWork, batch: Batch, stream: str,
                       max_key_change_rows: int, max_filter_keys: int = DEFAULT_MAX_FILTER_KEYS) -> dict:
    source, chained = merge_table(spark, work, max_key_change_rows=max_key_change_rows)
    props = _commit_properties(batch, stream, work.source)
    view = f"_binlog_src_{hashlib.sha1(work.name.encode()).hexdigest()[:12]}"
    keyset = set(work.primary_key)
    empty = work.state.head is None
    if work.resets or (empty and source is not None):
        # TRUNCATE / DROP TABLE: the table's content becomes the rows upserted after it; a
        # table without data yet gets them appended (no MERGE needed)
        if source is None:
            rows = spark.createDataFrame([], T.StructType([T.StructField(n, t) for n, t in work.plan.columns]))
        else:
            live = source.filter(F.col("_op") == "upsert")
            rows = live.select(*[
                (F.col(f"k{work.primary_key.index(n)}") if n in keyset
                 else F.when(F.col(f"h{i}"), F.col(f"v{i}"))).cast(t).alias(n)
                for i, (n, t) in enumerate(work.plan.columns)])
        if work.resets:
            write = lambda: rows.writeTo(work.name).overwrite(F.lit(True))  # noqa: E731
        else:
            write = lambda: rows.writeTo(work.name).append()  # noqa: E731
        run_with_commit_properties(spark, props, write)
        return {"truncated": bool(work.resets), "key_change_chains": chained}
    if source is None:
        return {"truncated": False}
    if chained:  # some rows take the columns their image lacks from another row
        source = _with_origin_values(spark, work, source)
    else:
        source = source.select("*", *[F.lit(None).cast(t).alias(f"o{i}")
                                      for i, (_, t) in enumerate(work.plan.columns)])
    # the source is read more than once (the key filter, the MERGE's scan of files to change
    # and its write)
    source = source.persist(StorageLevel.MEMORY_AND_DISK)
    source.createOrReplaceTempView(view)
    try:
        sql = _merge_statement(work.name, view, work.plan, work.primary_key,
                               target_values=_needs_target_values(source, work),
                               key_filter=_key_filter(source, work, max_filter_keys))
        run_with_commit_properties(spark, props, lambda: spark.sql(sql))
    finally:
        spark.catalog.dropTempView(view)
        source.unpersist()
    return {"truncated": False, "key_change_chains": chained}


def _apply_changelog_table(spark: SparkSession, work: TableWork, batch: Batch, stream: str) -> dict:
    image_cols = work.plan.columns
    frames = []
    for path, layout in zip(work.files, work.layouts):
        present = {n for n, _ in layout}
        df = read_staged(spark, path)
        is_delete = F.col("_op") == "delete"
        select = [
            F.col("_op"), F.col("_binlog_file"), F.col("_binlog_seq").cast("bigint"),
            F.col("_binlog_pos").cast("bigint"), F.col("_row").cast("int"), F.col("_gtid"),
            F.col("_commit_ts"), F.col("_txn"), F.lit(batch.batch_id).alias("_batch_id"),
            F.when(is_delete, F.col("_before_absent")).otherwise(F.col("_after_absent")).alias("_absent"),
        ]
        for name, typ in image_cols:
            if name in present:
                value = F.when(is_delete, F.col("_before").getField(name)) \
                    .otherwise(F.col("_after").getField(name)).cast(typ)
            else:
                value = F.lit(None).cast(typ)
            select.append(value.alias(name))
        frame = df.select(*select)
        if work.since is not None:
            frame = frame.withColumn("_o", _order_struct()).filter(_order_at_or_after(work.since)).drop("_o")
        frames.append(frame)
    schema = T.StructType([T.StructField(n, t) for n, t in (*CHANGELOG_ENVELOPE, *image_cols)])
    rows = []
    for record in work.resets:
        ts = record.get("ts")
        when = dt.datetime.fromisoformat(ts) if ts else None
        gtid = record.get("gtid")
        rows.append(("truncate" if record["kind"] == "truncate" else "drop", record["file"],
                     record["_position"][0], record["_position"][1], 0, gtid, when,
                     gtid or f"{record['file']}:{record['pos']}", batch.batch_id, None,
                     *([None] * len(image_cols))))
    if rows:
        frames.append(spark.createDataFrame(rows, schema))
    data = functools.reduce(DataFrame.unionByName, frames) if frames else spark.createDataFrame([], schema)
    data = data.orderBy("_binlog_seq", "_binlog_pos", "_row")
    props = _commit_properties(batch, stream, work.source)
    run_with_commit_properties(spark, props, lambda: data.writeTo(work.name).append())
    return {"truncated": bool(work.resets)}


# --------------------------------------------------------------------------- batches


def _ledger_name(catalog: str, namespace: str) -> str:
    return f"{catalog}.{namespace}.{LEDGER_TABLE}"


def _ensure_ledger(spark: SparkSession, name: str) -> None:
    if not _table_exists(spark, name):
        cols = ", ".join(f"{_q(f.name)} {_sql_type(f.dataType)}" for f in LEDGER_SCHEMA.fields)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({cols}) USING iceberg "
                  f"TBLPROPERTIES ('format-version'='2')")


def _describe_position(cp: Optional[Checkpoint]) -> str:
    return "nothing" if cp is None else f"[{cp}]"


def _apply_moves(spark: SparkSession, batch: Batch, catalog: str, namespace: str, stream: str,
                 moves: list, table_properties: Mapping[str, str]) -> list[dict]:
    """Carry renames between captured tables into Iceberg at the batch end: each target gets
    the content its source had (every change before the rename is applied by then), sources
    that no name holds any more are emptied. The contents are first copied into work tables,
    so a swap (``a`` to ``tmp``, ``b`` to ``a``, ``tmp`` to ``b``) reads neither after writing it;
    each target's commit carries the batch end, so a rerun after a crash redoes only what is
    missing."""
    def iceberg(pair) -> str:
        return f"{catalog}.{namespace}.{iceberg_table_name(pair[0], pair[1])}"

    tag = hashlib.sha1(batch.batch_id.encode()).hexdigest()[:12]
    pairs = [(tuple(op["from"]), tuple(op["to"])) for _, _, op in moves]
    def moved(name: str) -> bool:  # the target's content was moved by this batch already
        if not _table_exists(spark, name):
            return False
        _refresh(spark, name)
        return spark.sql(f"SELECT 1 FROM {name}.snapshots WHERE summary['{SUMMARY_MOVE}'] = "
                         f"{_lit(batch.batch_id)} LIMIT 1").count() > 0

    done = {dst: moved(iceberg(dst)) for _src, dst in pairs}
    work_tables = {}
    for k, (src, dst) in enumerate(pairs):
        if done[dst]:
            continue
        work_table = f"{catalog}.{namespace}._binlog_move_{tag}_{k}"
        work_tables[src] = work_table
        if not _table_exists(spark, work_table) and _table_exists(spark, iceberg(src)):
            spark.sql(f"CREATE TABLE {work_table} USING iceberg AS SELECT * FROM {iceberg(src)}")
    out = []
    for src, dst in pairs:
        if done[dst]:
            out.append({"from": list(src), "to": list(dst), "status": "already-applied"})
            continue
        source_name, target = iceberg(src), iceberg(dst)
        work_table = work_tables[src]
        props = {**_commit_properties(batch, stream, f"{dst[0]}.{dst[1]}"), SUMMARY_MOVE: batch.batch_id}
        if not _table_exists(spark, work_table):
            # the source was never loaded: the target holds no rows now
            if _table_exists(spark, target):
                empty = spark.table(target).limit(0)
                run_with_commit_properties(spark, props, lambda: empty.writeTo(target).overwrite(F.lit(True)))
            out.append({"from": list(src), "to": list(dst), "status": "emptied"})
            continue
        source_props = _table_properties(spark, source_name) if _table_exists(spark, source_name) else \
            _table_properties(spark, target) if _table_exists(spark, target) else {}
        mode = source_props.get(PROP_MODE, MODE_MERGE)
        primary_key = json.loads(source_props.get(PROP_PRIMARY_KEY, "[]"))
        columns = _table_columns(spark, work_table)
        if mode == MODE_CHANGELOG:
            envelope = dict(CHANGELOG_ENVELOPE)
            columns = [c for c in columns if c[0] not in envelope]
        spark.sql(f"DROP TABLE IF EXISTS {target}")
        for sql in create_table_statements(target, dst, columns, mode, primary_key, table_properties):
            spark.sql(sql)
        rows = spark.table(work_table)
        run_with_commit_properties(spark, props, lambda: rows.writeTo(target).append())
        out.append({"from": list(src), "to": list(dst), "status": "moved"})
    targets = {dst for _, dst in pairs}
    for src, _dst in pairs:
        name = iceberg(src)
        if src not in targets and _table_exists(spark, name):
            empty = spark.table(name).limit(0)
            run_with_commit_properties(spark, _commit_properties(batch, stream, f"{src[0]}.{src[1]}"),
                                       lambda: empty.writeTo(name).overwrite(F.lit(True)))
    for work_table in work_tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {work_table}")
    return out


def _save_checkpoint(store: CheckpointStore, key: str, batch: Batch, *, expected: Any) -> None:
    """Advance the store to the batch end, with the schema history valid there (the dump's
    manifest records it) in the same compare-and-set."""
    history = batch.manifest.data.get("schema_history")
    if history is not None:
        store.save(key, batch.end, expected=expected, schema_history=history)
    else:
        store.save(key, batch.end, expected=expected)


def apply_batch(spark: SparkSession, batch: Batch, catalog: str, namespace: str,
                store: Optional[CheckpointStore] = None, key: Optional[str] = None, *,
                stream: Optional[str] = None, table_properties: Optional[Mapping[str, str]] = None,
                max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS) -> dict:
    """Apply one batch (see :func:`apply_manifests`)."""
    stream = stream or key or DEFAULT_STREAM
    ledger = _ledger_name(catalog, namespace)
    _ensure_ledger(spark, ledger)
    ledger_state = applied_state(spark, ledger, stream)
    stored = store.load(key) if store is not None else None
    position, source = (stored, f"checkpoint store key {key!r}") if stored is not None else \
        (ledger_state.checkpoint, f"ledger {ledger} (stream {stream!r})")
    result: dict[str, Any] = {"batch_id": batch.batch_id, "start": batch.start.to_json(),
                              "end": batch.end.to_json(), "tables": []}
    snapshot = batch.manifest.data.get("mode") == "snapshot"
    if snapshot and position is not None and compare_checkpoints(batch.end, position) == 0:
        log.info("snapshot %s is already applied (%s is at %s)", batch.batch_id, source, position)
        result["status"] = "already-applied"
        return result
    if snapshot and position is not None and compare_checkpoints(batch.end, position) < 0:
        raise BatchGapError(
            f"snapshot {batch.batch_id} at [{batch.end}] is older than {source} at "
            f"{_describe_position(position)}: applying it would rewind the tables; take a new "
            f"snapshot instead")
    if not snapshot and position is not None and compare_checkpoints(batch.start, position) != 0:
        if compare_checkpoints(batch.end, position) <= 0:
            log.info("batch %s is already applied (%s is at %s)", batch.batch_id, source, position)
            result["status"] = "already-applied"
            if store is not None and stored is None:
                _save_checkpoint(store, key, batch, expected=ABSENT)
                result["checkpoint_store"] = "advanced"
            return result
        if compare_checkpoints(batch.start, position) > 0:
            raise BatchGapError(
                f"batch {batch.batch_id} starts at [{batch.start}] but {source} is at "
                f"{_describe_position(position)}: the changes in between are missing; dump them "
                f"first (or reset the position if that is intended)")
        raise BatchGapError(
            f"batch {batch.batch_id} [{batch.start}] .. [{batch.end}] overlaps the position "
            f"{_describe_position(position)} of {source}; give batches that start there")

    # 1. plan every table, before anything is committed
    resets = _reset_records(batch)
    moves = _moves(batch)
    if snapshot:
        # an initial snapshot replaces each table's content: an implicit TRUNCATE just before
        # the snapshot's rows (which all sit at the snapshot position)
        seq, pos = _position(batch.end)
        for entry in batch.manifest.tables:
            resets.setdefault(f"{entry['schema']}.{entry['table']}", []).insert(
                0, {"kind": "truncate", "file": batch.end.file, "pos": pos - 1,
                    "tables": [f"{entry['schema']}.{entry['table']}"], "_position": (seq, pos - 1),
                    "_table": (entry["schema"], entry["table"])})
    entries = {(e["schema"], e["table"]): e for e in batch.manifest.tables}
    names = set(entries)
    for qualified, records in resets.items():
        # the DDL record's names apart when it has them: a schema or table name may hold dots
        pair = next((r["_table"] for r in records if r.get("_table")), None)
        names.add(tuple(pair) if pair else tuple(qualified.partition(".")[::2]))
    for _at, _record, op in _ddl_ops(batch):
        if op["op"] == "alter":  # a table altered in the batch, with rows or without
            names.add(tuple(op["table"]))
    seen_targets: dict[str, tuple] = {}
    work = []
    for schema_name, table_name in sorted(names):
        target = iceberg_table_name(schema_name, table_name)
        if target in seen_targets:  # pragma: no cover - guarded by the naming scheme
            raise MergeJobError(f"{schema_name}.{table_name} and {'.'.join(seen_targets[target])} "
                                f"map to the same table {target}")
        seen_targets[target] = (schema_name, table_name)
        work.append(_prepare_table(spark, batch, catalog, namespace, schema_name, table_name,
                                   entries.get((schema_name, table_name)),
                                   resets.get(f"{schema_name}.{table_name}", []),
                                   table_properties or {}))

    # 2. schema changes and one commit per table, each carrying the batch end
    committed = []
    for w in work:
        info: dict[str, Any] = {"source": w.source, "table": w.name, "mode": w.mode,
                                "staged_rows": w.staged_rows, "status": w.status}
        result["tables"].append(info)
        if w.status != "ready":
            continue
        for sql in w.statements:
            log.info("%s", sql)
            spark.sql(sql)
        info["schema_changes"] = w.statements
        before = _head(spark, w.name)
        if w.defaults and w.exists and w.state.head is not None:
            info["backfill"] = _backfill_defaults(spark, w, batch, stream)
        if w.mode == MODE_MERGE:
            info.update(_apply_merge_table(spark, w, batch, stream, max_key_change_rows))
        else:
            info.update(_apply_changelog_table(spark, w, batch, stream))
        info["snapshot_id"] = _head(spark, w.name)
        info["status"] = "committed" if info["snapshot_id"] != before else "no-change"
        if info["status"] == "committed":
            committed.append(w.name)

    # 2b. renames between captured tables, at the batch end
    if moves:
        result["moves"] = _apply_moves(spark, batch, catalog, namespace, stream, moves, table_properties or {})

    # 3. the ledger row, then 4. the checkpoint store
    if ledger_state.checkpoint is None or compare_checkpoints(batch.end, ledger_state.checkpoint) > 0:
        row = spark.createDataFrame([(batch.batch_id, stream, _checkpoint_text(batch.start),
                                      _checkpoint_text(batch.end), committed,
                                      sum(w.staged_rows for w in work),
                                      dt.datetime.now(dt.timezone.utc))], LEDGER_SCHEMA)
        run_with_commit_properties(spark, _commit_properties(batch, stream, LEDGER_TABLE),
                                   lambda: row.writeTo(ledger).append())
        result["ledger"] = "committed"
    else:
        result["ledger"] = "already-applied"
    if store is not None:
        _save_checkpoint(store, key, batch, expected=stored if stored is not None else ABSENT)
        result["checkpoint_store"] = "advanced"
    result["status"] = "applied"
    return result


def run_maintenance(spark: SparkSession, catalog: str, namespace: str, tables: Iterable[str], *,
                    older_than_days: float = 7.0, retain_last: int = 10) -> list[dict]:
    """Compact each table, then expire its old snapshots.

    - ``rewrite_data_files`` (sorted by the write order when there is one) rewrites the small
      data files and every data file that position delete files apply to
      (``delete-file-threshold`` 1), so the rows the merges deleted or replaced are dropped and
      the delete files with them (``remove-dangling-deletes``);
    - ``rewrite_position_delete_files`` then removes the delete files left pointing at data
      files that are gone, and compacts the others;
    - ``expire_snapshots`` expires the snapshots older than ``older_than_days`` (keeping the
      last ``retain_last``) and deletes the files only they reference.

    The newest snapshot holding a binlog checkpoint is never expired, and the compaction
    commits carry that checkpoint, so the applied position survives maintenance."""
    out = []
    cutoff = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=older_than_days)
    cutoff_micros = int(cutoff.timestamp() * 1_000_000)
    for name in tables:
        short = name.split(".", 1)[1]
        state = applied_state(spark, name)
        props = {}
        if state.checkpoint is not None:
            props = {SUMMARY_CHECKPOINT: _checkpoint_text(state.checkpoint),
                     SUMMARY_BATCH: state.batch_id or ""}
        sort = "sort" if _table_properties(spark, name).get(PROP_MODE) == MODE_MERGE else "binpack"
        rewrite = run_with_commit_properties(spark, props, lambda: spark.sql(
            f"CALL {catalog}.system.rewrite_data_files(table => {_lit(short)}, "
            f"strategy => {_lit(sort)}, options => map('delete-file-threshold', '1', "
            f"'remove-dangling-deletes', 'true'))").collect())
        deletes = run_with_commit_properties(spark, props, lambda: spark.sql(
            f"CALL {catalog}.system.rewrite_position_delete_files(table => {_lit(short)}, "
            f"options => map('rewrite-all', 'true'))").collect())
        older = cutoff_micros
        if state.committed_at_micros is not None:
            older = min(older, state.committed_at_micros)
        stamp = (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
                 + dt.timedelta(microseconds=older)).isoformat(sep=" ")
        expired = spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => {_lit(short)}, older_than => "
            f"TIMESTAMP {_lit(stamp)}, retain_last => {int(retain_last)})").collect()
        out.append({"table": name, "rewrite": rewrite[0].asDict() if rewrite else {},
                    "rewrite_deletes": deletes[0].asDict() if deletes else {},
                    "expire": expired[0].asDict() if expired else {}})
    return out


def apply_manifests(spark: SparkSession, manifests: Iterable[Any], catalog: str, namespace: str,
                    store: Optional[CheckpointStore] = None, key: Optional[str] = None, *,
                    stream: Optional[str] = None,
                    table_properties: Optional[Mapping[str, str]] = None,
                    max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS,
                    maintenance: bool = False, expire_older_than_days: float = 7.0,
                    retain_last: int = 10) -> dict:
    """Apply the batches of ``manifests`` to ``catalog.namespace``, in checkpoint order,
    exactly once; advance ``store[key]`` after each batch. Returns a JSON-able summary.

    ``stream`` (default: ``key``, else ``"default"``) names the binlog stream in the ledger
    ``<namespace>._binlog_batches``: each stream has its own position there, which decides
    gaps when no checkpoint store is given."""
    _check_identifier("catalog", catalog)
    _check_identifier("namespace", namespace, dotted=True)
    if (store is None) != (key is None):
        raise MergeJobError("a checkpoint store needs a key, and a key a store")
    stream = stream or key or DEFAULT_STREAM
    _check_identifier("stream", stream.replace("-", "_").replace(".", "_"))
    batches = plan_batches(manifests)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
    results = []
    try:
        # two runs of the same load must not both plan and commit the same batch (a fresh
        # table's first batch is an append: both would land); the store's key is the lock
        with store.exclusive(key) if store is not None else contextlib.nullcontext():
            for batch in batches:
                log.info("applying batch %s: [%s] .. [%s]", batch.batch_id, batch.start, batch.end)
                results.append(apply_batch(spark, batch, catalog, namespace, store, key, stream=stream,
                                           table_properties=table_properties,
                                           max_key_change_rows=max_key_change_rows))
    except CheckpointLockedError as exc:
        raise ConcurrentRunError(str(exc)) from None
    out: dict[str, Any] = {"catalog": catalog, "namespace": namespace,
                           "stream": stream, "batches": results,
                           "checkpoint": batches[-1].end.to_json() if batches else None}
    if maintenance:
        tables = sorted({t["table"] for r in results for t in r["tables"]
                         if _table_exists(spark, t["table"])} | {_ledger_name(catalog, namespace)})
        out["maintenance"] = run_maintenance(spark, catalog, namespace, tables,
                                             older_than_days=expire_older_than_days,
                                             retain_last=retain_last)
    return out


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="merge_cdc.py",
        description="Apply staged binlog changes (dump manifests) to Iceberg tables with Spark "
                    "MERGE, exactly once.")
    p.add_argument("--manifest", action="append", required=True, metavar="PATH",
                   help="a manifest.json or its dump directory; repeatable (applied in "
                        "checkpoint order, without gaps)")
    p.add_argument("--catalog", default="lake", help="Iceberg catalog name (default: lake)")
    p.add_argument("--namespace", required=True,
                   help="target namespace; tables are named <schema>__<table>")
    p.add_argument("--checkpoint-store", metavar="URI",
                   help="checkpoint store to advance after each batch: a directory or file:// URI, or a "
                        "SQLAlchemy URL (postgresql://..., sqlite:///...; see docs/checkpoint-stores.md)")
    p.add_argument("--checkpoint-key", metavar="KEY", help="key in the checkpoint store")
    p.add_argument("--stream", metavar="NAME",
                   help="name of the binlog stream in the namespace's ledger (default: the "
                        "checkpoint key, else 'default'); one per source and table selection")
    p.add_argument("--warehouse", metavar="PATH",
                   help="embedded local mode: start a local Spark with a Hadoop catalog here")
    p.add_argument("--output-json", metavar="PATH", help="write the result here")
    p.add_argument("--table-property", action="append", default=[], metavar="KEY=VALUE",
                   help="Iceberg table property for tables created by this run; repeatable")
    p.add_argument("--max-key-change-rows", type=int, default=DEFAULT_MAX_KEY_CHANGE_ROWS,
                   help="limit of changes on keys changed with partial (MINIMAL) images, "
                        "resolved on the driver")
    p.add_argument("--maintenance", action="store_true",
                   help="afterwards, compact data files (folding in the delete files of the "
                        "merges) and expire old snapshots")
    p.add_argument("--expire-older-than-days", type=float, default=7.0,
                   help="with --maintenance: expire snapshots older than this (default 7)")
    p.add_argument("--retain-last", type=int, default=10,
                   help="with --maintenance: always keep this many snapshots (default 10)")
    return p


def _write_json(path: Optional[str], data: Mapping[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("py4j").setLevel(logging.WARNING)
    if (args.checkpoint_store is None) != (args.checkpoint_key is None):
        _parser().error("--checkpoint-store and --checkpoint-key go together")
    properties = {}
    for item in args.table_property:
        k, sep, v = item.partition("=")
        if not sep or not k:
            _parser().error(f"--table-property wants KEY=VALUE, not {item!r}")
        properties[k] = v
    stop = False
    if args.warehouse:
        stop = SparkSession.getActiveSession() is None
        spark = local_spark_session(args.warehouse, args.catalog, app_name="merge_cdc")
    else:
        spark = SparkSession.builder.appName("merge_cdc").getOrCreate()
    try:
        store = open_checkpoint_store(args.checkpoint_store) if args.checkpoint_store else None
        result = apply_manifests(spark, args.manifest, args.catalog, args.namespace, store,
                                 args.checkpoint_key, stream=args.stream,
                                 table_properties=properties,
                                 max_key_change_rows=args.max_key_change_rows,
                                 maintenance=args.maintenance,
                                 expire_older_than_days=args.expire_older_than_days,
                                 retain_last=args.retain_last)
    except (MergeJobError, ManifestError, ValueError) as exc:
        print(f"merge_cdc: error: {exc}", file=sys.stderr)
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        return 1
    except Exception as exc:  # CheckpointConflictError and Spark errors: report, then fail
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        raise
    finally:
        if stop:
            spark.stop()
    _write_json(args.output_json, result)
    print(json.dumps({"checkpoint": result["checkpoint"],
                      "batches": [(b["batch_id"], b["status"]) for b in result["batches"]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
