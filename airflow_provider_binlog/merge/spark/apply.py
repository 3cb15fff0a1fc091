"""One table's commit of a batch: the MERGE of its collapsed changes (or the overwrite after a
TRUNCATE), or the append to its change log; every commit carries the batch end."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import logging
from typing import Any, Mapping, Optional, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.storagelevel import StorageLevel

from ...spark import runtime
from ..batches import Batch
from ..column_types import sql_type
from ..iceberg_contract import DEFAULT_MAX_FILTER_KEYS, DEFAULT_MAX_KEY_CHANGE_ROWS, SUMMARY_STREAM
from ..lake.commits import commit_properties
from ..lake.table_work import TableWork
from ..schema_plan import SchemaPlan, changelog_envelope
from ..sql import literal as _lit
from ..sql import quote as _q
from .collapse import (collapse_snapshot, collapse_with_chains, flat_changes, last_changes, order_at_or_after,
                       order_struct, read_staged)
from .column_types import spark_struct, spark_type

log = logging.getLogger(__name__)


def staged_frames(spark: SparkSession, work: TableWork) -> list[DataFrame]:
    """The table's staged files as Spark reads them, made on first use (a direct commit needs none)."""
    if len(work.frames_read) < len(work.files):
        work.frames_read = [read_staged(spark, path) for path in work.files]
    return work.frames_read


def backfill_defaults(spark: SparkSession, work: "TableWork", batch: Batch, stream: str,
                      target: Optional[str] = None) -> str:
    """Give the rows the table held before the batch the default of the columns added in the
    batch (the source did so without row events), in ``target`` (the table, or the branch its
    commit is staged on). Idempotent: until the batch's own commit, no change after the ALTER
    is in the table."""
    sets = ", ".join(f"{_q(n)} = CAST({_lit(v)} AS {sql_type(work.plan.type_of(n))})"
                     for n, v in sorted(work.defaults.items()))
    sql = f"UPDATE {target or work.name} SET {sets}"
    log.info("%s", sql)
    runtime.run_with_commit_properties(spark, {"binlog.backfill": batch.batch_id, SUMMARY_STREAM: stream,
                                       "binlog.source": work.source}, lambda: spark.sql(sql))
    return sql


def merge_table(spark: SparkSession, work: TableWork, *,
                max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS,
                snapshot: bool = False) -> tuple[Optional[DataFrame], bool]:
    """The collapsed changes of one table (see :func:`collapse_changes`), the source of its
    MERGE (or of the overwrite after a TRUNCATE), and whether some rows take unchanged columns
    from another target row (``ok<j>``). ``(None, False)`` when no rows are staged. Of a
    ``snapshot``'s rows only those of keys a staged change touches are collapsed
    (:func:`collapse_snapshot`)."""
    plan = work.plan
    names = [n for n, _ in plan.columns]
    n_keys, n_cols = len(work.primary_key), len(names)
    key_columns = [names.index(k) for k in work.primary_key]
    reset = work.resets[-1]["_position"] if work.resets else None
    if work.files:
        meta = bool(work.contract_columns)
        reads = snapshot and not meta and work.reads_distinct
        flat = flat_changes(spark, staged_frames(spark, work), work.layouts, plan, work.primary_key, work.defaults,
                            work.fields, work.insert_defaults, change_meta=meta, snapshot_reads=reads)
        if work.since is not None:
            flat = flat.filter(order_at_or_after(work.since))
        if reset is not None:
            flat = flat.filter(order_at_or_after(reset, strict=True))
        collapse = collapse_snapshot if reads else collapse_with_chains
        source, chained = collapse(spark, flat, n_keys, n_cols, key_columns, max_key_change_rows,
                                   None if work.facts is None else work.facts.key_changes)
        if meta:  # each key's last change, for the change columns and soft deletes
            source = source.join(last_changes(flat, n_keys), [f"k{j}" for j in range(n_keys)], "left")
        return source, chained
    return None, False


def contract_values(work: TableWork, batch_id: str) -> tuple[dict[str, str], dict[str, str]]:
    """The SQL values (over the MERGE source ``s``) of the data-contract columns: for a row
    inserted or updated, and for a row deleted when deletes are soft (``{}`` otherwise)."""
    upsert: dict[str, str] = {}
    change = work.contract.change_columns or {}
    for key, column in change.items():
        upsert[column] = _lit(batch_id) if key == "batch_id" else f"s._m.{key}"
    soft = work.contract.soft_delete
    if not soft:
        return upsert, {}
    delete = {**upsert, soft["flag"]: "true", soft["at"]: "s._m.commit_ts"}
    upsert.update({soft["flag"]: "false", soft["at"]: "CAST(NULL AS TIMESTAMP)"})
    return upsert, delete


def merge_statement(table: str, view: str, plan: SchemaPlan, primary_key: Sequence[str], *,
                     target_values: bool = True, key_filter: Optional[str] = None,
                     extra: Optional[Mapping[str, str]] = None,
                     soft_delete: Optional[Mapping[str, str]] = None) -> str:
    """The MERGE of the collapsed changes in ``view`` into ``table``.

    ``target_values`` False: no row keeps a column of its target row (every update carries
    all columns), so the target's non-key columns are not referenced and its scan reads the
    key columns only. ``key_filter``: a condition on the target's columns that every target
    row a change applies to meets (see :func:`key_filter`); the target rows failing it are
    dropped as they are read, before the join. ``extra`` (column -> SQL value) sets the
    data-contract columns of rows inserted or updated; ``soft_delete`` (column -> SQL value),
    when given, updates a deleted row with these instead of deleting it."""
    names = [n for n, _ in plan.columns]
    extra = dict(extra or {})
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
    updates += [f"t.{_q(n)} = {v}" for n, v in extra.items()]
    matched_update = f"WHEN MATCHED THEN UPDATE SET {', '.join(updates)} " if updates else ""
    on_delete = ("UPDATE SET " + ", ".join(f"t.{_q(n)} = {v}" for n, v in soft_delete.items())
                 if soft_delete else "DELETE")
    columns = [*names, *extra]
    return (f"MERGE INTO {table} t USING {view} s ON {on} "
            f"WHEN MATCHED AND s._op = 'delete' THEN {on_delete} "
            f"{matched_update}"
            f"WHEN NOT MATCHED AND s._op <> 'delete' THEN INSERT ({', '.join(_q(n) for n in columns)}) "
            f"VALUES ({', '.join([*values, *extra.values()])})")


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


def sql_literal(value: Any, column_type: Any) -> Optional[str]:
    """``value`` of a column of Arrow type ``column_type`` as a Spark SQL literal; None for a
    type without one here (only integers, decimals, text and dates have)."""
    kind = sql_type(column_type)
    if kind == "int":
        return str(int(value))
    if kind == "bigint":
        return f"{int(value)}L"
    if kind.startswith("decimal("):
        return f"CAST({_lit(format(value, 'f'))} AS {kind})"
    if kind == "string":
        return _lit(value)
    if kind == "date":
        return f"DATE {_lit(value.isoformat())}"
    return None


def key_filter(source: DataFrame, work: TableWork, max_keys: int) -> Optional[str]:
    """``t.<first key column> IN (<its values in the changes>)``, or None when there are more
    than ``max_keys`` distinct values (or the column's type has no literal here).

    In the MERGE's join condition this filter (a hash set lookup) applies to the target rows
    as they are read: only the rows of changed keys reach the join, instead of the whole
    table being shuffled to meet a few thousand changes. Every file is still read (its key
    column only), as changes spread over the key range touch every file."""
    key, data_type = work.primary_key[0], work.plan.type_of(work.primary_key[0])
    kind = sql_type(data_type)
    if kind not in ("int", "bigint", "string", "date") and not kind.startswith("decimal("):
        return None  # (a type without a literal in sql_literal)
    if work.facts is not None:  # the staged values: a superset of the changed keys
        values = work.facts.first_key_values[:max_keys + 1]
    else:
        values = [r[0] for r in source.select("k0").where(F.col("k0").isNotNull()).distinct()
                  .limit(max_keys + 1).collect()]
    if not values or len(values) > max_keys:
        return None
    return f"t.{_q(key)} IN ({', '.join(sql_literal(v, data_type) for v in sorted(values))})"


def _with_origin_values(spark: SparkSession, work: TableWork, source: DataFrame, target_name: str) -> DataFrame:
    """Add ``o<i>``: the values of the target row whose key is ``ok<j>`` (before the merge)."""
    names = [n for n, _ in work.plan.columns]
    n_keys = len(work.primary_key)
    if work.exists:
        target = spark.table(target_name).select(
            *[F.col(_q(k)).alias(f"tk{j}") for j, k in enumerate(work.primary_key)],
            *[F.col(_q(n)).alias(f"o{i}") for i, n in enumerate(names)])
        # only the origin rows (few) go into the join, picked as the target is read
        origins = source.where(F.col("ok0").isNotNull()).select(
            *[F.col(f"ok{j}").alias(f"tk{j}") for j in range(n_keys)]).distinct()
        target = target.join(F.broadcast(origins), [f"tk{j}" for j in range(n_keys)], "left_semi")
        cond = functools.reduce(lambda a, b: a & b,
                                [source[f"ok{j}"] == target[f"tk{j}"] for j in range(n_keys)])
        return source.join(target, cond, "left").drop(*[f"tk{j}" for j in range(n_keys)])
    return source.select("*", *[F.lit(None).cast(spark_type(t)).alias(f"o{i}")
                                for i, (_, t) in enumerate(work.plan.columns)])


def apply_merge_table(spark: SparkSession, work: TableWork, batch: Batch, stream: str,
                      max_key_change_rows: int, max_filter_keys: int = DEFAULT_MAX_FILTER_KEYS,
                      target: Optional[str] = None) -> dict:
    """The table's MERGE (or its overwrite, or its first rows) into ``target``: the table, or
    the branch its commit is staged on (:func:`.conflicts.staged_branch`)."""
    target = target or work.name
    source, chained = merge_table(spark, work, max_key_change_rows=max_key_change_rows,
                                  snapshot=batch.manifest.is_snapshot)
    props = commit_properties(batch, stream, work.source)
    view = f"_binlog_src_{hashlib.sha1(work.name.encode()).hexdigest()[:12]}"
    keyset = set(work.primary_key)
    empty = work.state.head is None
    if work.resets or (empty and source is not None):
        # TRUNCATE / DROP TABLE: the table's content becomes the rows upserted after it; a
        # table without data yet gets them appended (no MERGE needed)
        if source is None:
            rows = spark.createDataFrame([], spark_struct([*work.plan.columns, *work.contract_columns]))
        else:
            live = source.filter(F.col("_op") == "upsert")
            upsert, _ = contract_values(work, batch.batch_id)
            types = {n: spark_type(t) for n, t in work.contract_columns}
            rows = live.select(*[
                (F.col(f"k{work.primary_key.index(n)}") if n in keyset
                 else F.when(F.col(f"h{i}"), F.col(f"v{i}"))).cast(spark_type(t)).alias(n)
                for i, (n, t) in enumerate(work.plan.columns)],
                *[F.expr(v.replace("s._m.", "_m.")).cast(types[n]).alias(n) for n, v in upsert.items()])
        if work.resets:
            write = lambda: rows.writeTo(target).overwrite(F.lit(True))  # noqa: E731
        else:
            write = lambda: rows.writeTo(target).append()  # noqa: E731
        runtime.run_with_commit_properties(spark, props, write)
        return {"truncated": bool(work.resets), "key_change_chains": chained}
    if source is None:
        return {"truncated": False}
    if chained:  # some rows take the columns their image lacks from another row
        source = _with_origin_values(spark, work, source, target)
    else:
        source = source.select("*", *[F.lit(None).cast(spark_type(t)).alias(f"o{i}")
                                      for i, (_, t) in enumerate(work.plan.columns)])
    # the source is read more than once (the key filter, the MERGE's scan of files to change
    # and its write)
    source = source.persist(StorageLevel.MEMORY_AND_DISK)
    source.createOrReplaceTempView(view)
    upsert, soft = contract_values(work, batch.batch_id)
    try:
        sql = merge_statement(target, view, work.plan, work.primary_key,
                               target_values=(work.facts is None or work.facts.partial_updates)
                               and _needs_target_values(source, work),
                               key_filter=key_filter(source, work, max_filter_keys),
                               extra=upsert, soft_delete=soft or None)
        runtime.run_with_commit_properties(spark, props, lambda: spark.sql(sql))
    finally:
        spark.catalog.dropTempView(view)
        source.unpersist()
    return {"truncated": False, "key_change_chains": chained}


def apply_changelog_table(spark: SparkSession, work: TableWork, batch: Batch, stream: str,
                          target: Optional[str] = None) -> dict:
    """The table's change-log rows appended to ``target`` (the table, or the branch its commit
    is staged on)."""
    image_cols = work.plan.columns
    frames = []
    for df, layout in zip(staged_frames(spark, work), work.layouts):
        present = {n for n, _ in layout}
        is_delete = F.col("_op") == "delete"
        select = [
            F.col("_op"), F.col("_binlog_file"), F.col("_binlog_seq").cast("bigint"),
            F.col("_binlog_pos").cast("bigint"), F.col("_row").cast("int"), F.col("_gtid"),
            F.col("_commit_ts"), F.col("_txn"), F.lit(batch.batch_id).alias("_batch_id"),
            F.when(is_delete, F.col("_before_absent")).otherwise(F.col("_after_absent")).alias("_absent"),
        ]
        for name, column_type in image_cols:
            typ = spark_type(column_type)
            if name in present:
                value = F.when(is_delete, F.col("_before").getField(name)) \
                    .otherwise(F.col("_after").getField(name)).cast(typ)
            else:
                value = F.lit(None).cast(typ)
            select.append(value.alias(name))
        frame = df.select(*select)
        if work.since is not None:
            frame = frame.withColumn("_o", order_struct()).filter(order_at_or_after(work.since)).drop("_o")
        if work.logged_to is not None:  # a snapshot's rows, and its changes not logged yet
            frame = frame.withColumn("_o", order_struct()).filter(
                F.col("_txn").startswith("snapshot:") | order_at_or_after(work.logged_to)).drop("_o")
        frames.append(frame)
    schema = spark_struct([*changelog_envelope(), *image_cols])
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
    props = commit_properties(batch, stream, work.source)
    runtime.run_with_commit_properties(spark, props, lambda: data.writeTo(target or work.name).append())
    return {"truncated": bool(work.resets)}
