"""Change collapse: a table's staged changes in binlog order, folded to the final state of each
primary key (window functions; key chains of MINIMAL images folded on the driver)."""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional, Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import MergeJobError
from ..iceberg_contract import DEFAULT_MAX_KEY_CHANGE_ROWS
from ..key_chains import fold_key_chains
from ..key_chains import hashable as _hashable
from ..snapshot_fold import SNAPSHOT_TXN_PREFIX
from ..schema_plan import SchemaPlan
from .column_types import spark_type
from ...staging.storage import ObjectLocation, StorageOptions, is_object_store, read_parquet_schema, staged_footer

#: Spark conf choosing how executors read staged objects: ``pyarrow`` (the default: no Hadoop
#: filesystem for the store needed) or ``spark`` (Spark's own Hadoop filesystem for the scheme,
#: where the cluster has one: EMR, Dataproc, Databricks, HDInsight; ``s3://`` is read as ``s3a://``).
STAGING_READER_CONF = "spark.binlog.staging.reader"

_ORDER_TYPE = T.StructType([T.StructField("seq", T.LongType()), T.StructField("pos", T.LongType()),
                            T.StructField("row", T.IntegerType())])


def read_staged(spark: SparkSession, path: str) -> DataFrame:
    """One staged Parquet file. It is written by pyarrow in the proleptic Gregorian calendar
    (like Iceberg), so no calendar rebasing is done on read (dates before 1582 stay exact).

    The file's schema comes from its footer, read here with pyarrow and given to the reader,
    as the types Spark 3.5 infers for it (without a Spark job for the inference); a file with
    a type outside the staging contract is left to Spark's inference."""
    footer, row_groups = staged_footer(path)
    schema = spark_schema(footer)
    if row_groups is not None:
        return read_row_file(spark, path, schema, row_groups)
    if is_object_store(path):
        how = spark.conf.get(STAGING_READER_CONF, "pyarrow") or "pyarrow"
        if how == "spark":
            return read_staged_hadoop(spark, path, schema)
        if how != "pyarrow":
            raise MergeJobError(f"{STAGING_READER_CONF}={how!r} is not a staging reader",
                                hint="set it to 'pyarrow' (the default) or 'spark'")
        return read_staged_object(spark, path, schema)
    reader = spark.read.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED")
    return (reader if schema is None else reader.schema(schema)).parquet(path)


def read_staged_hadoop(spark: SparkSession, uri: str, schema: Optional[T.StructType]) -> DataFrame:
    """A staged object read through Spark's own Hadoop filesystem for its scheme (``s3://`` as
    ``s3a://``), with the cluster's credentials for it."""
    target = "s3a://" + uri[len("s3://"):] if uri.startswith("s3://") else uri
    reader = spark.read.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED")
    try:
        return (reader if schema is None else reader.schema(schema)).parquet(target)
    except Exception as exc:  # noqa: BLE001 - Spark's reason, with the way back
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise MergeJobError(f"{target}: Spark cannot read the staged object with its own filesystem ({reason})",
                            hint=f"install the cluster's filesystem for the scheme, or unset {STAGING_READER_CONF} "
                                 f"(pyarrow then reads staging, with no Hadoop jars)") from None


def read_staged_object(spark: SparkSession, uri: str, schema: Optional[T.StructType]) -> DataFrame:
    """A staged file on an object store, read by an executor with pyarrow (``mapInArrow``):
    no Hadoop filesystem for the store is needed on the cluster, and none of its jars. The
    executor reaches the store with the staging options the driver was started with (its
    environment: endpoint, region, credentials, which travel inside the task, never on a
    command line), and for what those leave unset, its own default chain (an instance role)."""
    if schema is None:
        raise MergeJobError(f"{uri}: a staged file on an object store must hold the staging contract's types",
                            hint="dump the range again with this release")
    options = StorageOptions.from_env().for_store(ObjectLocation.parse(uri).store)

    def read(batches: Any) -> Any:
        from airflow_provider_binlog.staging.storage import read_parquet

        for _ in batches:
            yield from read_parquet(uri, options=options).to_batches()

    return spark.range(1, numPartitions=1).mapInArrow(read, schema)


def read_row_file(spark: SparkSession, uri: str, schema: Optional[T.StructType], row_groups: int) -> DataFrame:
    """A row file read as the staging contract's columns by executors with pyarrow
    (``mapInArrow``), its row groups spread over the tasks: Spark's Parquet reader would give
    the table's columns alone, without each chunk's envelope."""
    if schema is None:
        raise MergeJobError(f"{uri}: a row file must hold the staging contract's types",
                            hint="dump the range again with this release")
    options = StorageOptions.from_env().for_store(ObjectLocation.parse(uri).store) if is_object_store(uri) else None
    tasks = max(1, min(row_groups, spark.sparkContext.defaultParallelism))

    def read(batches: Any) -> Any:
        from airflow_provider_binlog.staging.storage import open_parquet

        view = open_parquet(uri, options)
        for batch in batches:
            for task in batch.column(0).to_pylist():
                for group in range(task, row_groups, tasks):
                    yield from view.read_row_group(group).to_batches()

    return spark.range(0, tasks, numPartitions=tasks).mapInArrow(read, schema)


def staged_schema(path: str) -> Optional[T.StructType]:
    """The Spark schema of a staged file from its Parquet footer; None for a type outside
    the staging contract (``staging/contract.py``)."""
    return spark_schema(read_parquet_schema(path))


def spark_schema(arrow: Any) -> Optional[T.StructType]:
    """The Spark schema of a staged file's Arrow schema; None for a type outside the contract."""
    try:
        fields = [T.StructField(f.name, _spark_type(f.type), True) for f in arrow]
    except _Unmapped:
        return None
    return T.StructType(fields)


class _Unmapped(Exception):
    pass


def _spark_type(arrow: Any) -> T.DataType:
    """The Spark type Spark 3.5 infers for a Parquet column pyarrow wrote from ``arrow``."""
    import pyarrow as pa

    simple = {pa.int8(): T.ByteType(), pa.int16(): T.ShortType(), pa.int32(): T.IntegerType(),
              pa.int64(): T.LongType(), pa.float32(): T.FloatType(), pa.float64(): T.DoubleType(),
              pa.date32(): T.DateType(), pa.string(): T.StringType(), pa.binary(): T.BinaryType(),
              pa.bool_(): T.BooleanType(), pa.timestamp("us"): T.TimestampNTZType(),
              pa.timestamp("us", tz="UTC"): T.TimestampType()}
    if arrow in simple:
        return simple[arrow]
    if pa.types.is_decimal128(arrow):
        return T.DecimalType(arrow.precision, arrow.scale)
    if pa.types.is_list(arrow):
        return T.ArrayType(_spark_type(arrow.value_type), True)
    if pa.types.is_struct(arrow):
        return T.StructType([T.StructField(arrow.field(i).name, _spark_type(arrow.field(i).type), True)
                             for i in range(arrow.num_fields)])
    raise _Unmapped(str(arrow))


def order_at_or_after(position: tuple[int, int], strict: bool = False) -> SparkColumn:
    seq, pos = position
    o = F.col("_o")
    tail = (o.getField("pos") > F.lit(pos)) if strict else (o.getField("pos") >= F.lit(pos))
    return (o.getField("seq") > F.lit(seq)) | ((o.getField("seq") == F.lit(seq)) & tail)


def order_struct() -> SparkColumn:
    return F.struct(F.col("_binlog_seq").cast("bigint").alias("seq"),
                    F.col("_binlog_pos").cast("bigint").alias("pos"),
                    F.col("_row").cast("int").alias("row"))


def flat_changes(spark: SparkSession, staged: Sequence[DataFrame], layouts: Sequence[Sequence[tuple]],
                 schema: SchemaPlan, primary_key: Sequence[str],
                 defaults: Optional[Mapping[str, str]] = None,
                 fields: Optional[Sequence[Mapping[str, str]]] = None,
                 insert_defaults: Optional[Mapping[str, str]] = None,
                 change_meta: bool = False, snapshot_reads: bool = False) -> DataFrame:
    """The staged changes of one table (``staged``: its files, read by :func:`read_staged`) as
    one frame, values cast to the target types.
    ``defaults`` (column -> SQL literal text) fills the columns added in the batch with a
    default into the changes staged before the column was (re)added, as the source did.

    Columns: ``_o`` (order struct seq/pos/row), ``_op``, ``v<i>``/``h<i>`` (after-image value
    of target column i and whether the image holds it), ``kb<j>``/``ka<j>`` (primary key
    column j of the before image, and of the row after the change: the after image's value,
    else the before image's, as MINIMAL images leave unchanged key columns out). ``fields``
    gives, per file, the staged field name of a column renamed after the file's rows.
    ``insert_defaults`` (column -> literal text) is what an INSERT that left the column out gave
    it (MINIMAL row images log only the columns the statement set). ``change_meta`` adds each
    change's ``_commit_ts``, ``_binlog_file`` and ``_gtid`` (see :func:`last_changes`);
    ``snapshot_reads`` adds ``_read``: the row is one a snapshot read (not a change)."""
    names = [n for n, _ in schema.columns]
    frames = []
    for part, (df, layout) in enumerate(zip(staged, layouts)):
        renamed = dict(fields[part]) if fields else {}
        field = lambda n: renamed.get(n, n)  # noqa: E731
        present = {n for n, _ in layout}
        absent = F.coalesce(F.col("_after_absent"), F.array().cast("array<string>"))
        select = [order_struct().alias("_o"), F.col("_op")]
        if change_meta:
            select += [F.col("_commit_ts"), F.col("_binlog_file"), F.col("_gtid")]
        if snapshot_reads:
            select.append(F.col("_txn").startswith(SNAPSHOT_TXN_PREFIX).alias("_read"))
        for i, (name, column_type) in enumerate(schema.columns):
            typ = spark_type(column_type)
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
            select.append(F.col("_before").getField(field(key)).cast(spark_type(schema.type_of(key))).alias(f"kb{j}"))
        frames.append(df.select(*select))
    flat = functools.reduce(DataFrame.unionByName, frames)
    for j, key in enumerate(primary_key):
        i = names.index(key)
        flat = flat.withColumn(f"ka{j}", F.when(F.col(f"h{i}"), F.col(f"v{i}")).otherwise(F.col(f"kb{j}")))
    return flat


def last_changes(flat: DataFrame, n_keys: int) -> DataFrame:
    """The last change of every key ``flat`` touches (``flat_changes(change_meta=True)``):
    ``k<j>`` and ``_m`` (struct ``op``, ``commit_ts``, ``binlog_file``, ``binlog_pos``,
    ``gtid``). ``op`` is what happened to the key: ``insert``, ``update`` or ``delete``; an
    update that changes the primary key deletes its old key and inserts its new one."""
    same_key = functools.reduce(lambda a, b: a & b,
                                [F.col(f"kb{j}").eqNullSafe(F.col(f"ka{j}")) for j in range(n_keys)])
    op = F.col("_op")

    def side(prefix: str, kind: SparkColumn) -> list[SparkColumn]:
        return [*[F.col(f"{prefix}{j}").alias(f"k{j}") for j in range(n_keys)], F.col("_o"),
                F.struct(kind.alias("op"), F.col("_commit_ts").alias("commit_ts"),
                         F.col("_binlog_file").alias("binlog_file"),
                         F.col("_o").getField("pos").alias("binlog_pos"), F.col("_gtid").alias("gtid")).alias("_m")]

    after = flat.filter(op != "delete").select(
        *side("ka", F.when((op == "update") & same_key, F.lit("update")).otherwise(F.lit("insert"))))
    before = flat.filter((op == "delete") | ((op == "update") & ~same_key)).select(*side("kb", F.lit("delete")))
    keys = [f"k{j}" for j in range(n_keys)]
    return after.unionByName(before).groupBy(*keys).agg(F.max_by("_m", "_o").alias("_m"))


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
            f"which is limited to {max_rows} (the merge option max_key_change_rows)")
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


def collapse_snapshot(spark: SparkSession, flat: DataFrame, n_keys: int, n_cols: int,
                      key_columns: Sequence[int], max_key_change_rows: int,
                      key_changes: Optional[bool] = None) -> tuple[DataFrame, bool]:
    """:func:`collapse_with_chains` of a snapshot's staged rows (``flat`` with ``_read``, see
    :func:`flat_changes`): only the keys some staged change touches are collapsed; the rows
    read of every other key are each key's only row (the source's primary key), so they go
    out as read, without the shuffle of the collapse. The changes' keys are few next to the
    rows read: the join that leaves them out is broadcast when they are small enough."""
    keys = [f"k{j}" for j in range(n_keys)]
    changes = flat.filter(~F.col("_read"))
    changed = changes.select(*[F.col(f"kb{j}").alias(f"k{j}") for j in range(n_keys)]).union(
        changes.select(*[F.col(f"ka{j}").alias(f"k{j}") for j in range(n_keys)])).dropna().distinct()
    reads = flat.filter(F.col("_read")).select("*", *[F.col(f"ka{j}").alias(f"k{j}") for j in range(n_keys)])
    touched = reads.join(changed, keys, "left_semi").drop(*keys).unionByName(changes)
    source, chained = collapse_with_chains(spark, touched.drop("_read"), n_keys, n_cols, key_columns,
                                           max_key_change_rows, key_changes)
    alone = reads.join(changed, keys, "left_anti").select(
        *keys, F.lit("upsert").alias("_op"), F.lit(True).alias("_fresh"), F.lit(False).alias("_self"),
        *[F.lit(None).cast(source.schema[f"k{j}"].dataType).alias(f"ok{j}") for j in range(n_keys)],
        *[c for i in range(n_cols) for c in (F.col(f"v{i}"), F.col(f"h{i}"))])
    return source.unionByName(alone), chained


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
    return collapse_with_chains(spark, flat, n_keys, n_cols, key_columns, max_key_change_rows)[0]


def collapse_with_chains(spark: SparkSession, flat: DataFrame, n_keys: int, n_cols: int,
                         key_columns: Sequence[int], max_key_change_rows: int,
                         key_changes: Optional[bool] = None) -> tuple[DataFrame, bool]:
    """:func:`collapse_changes`, and whether some keys were folded on the driver.
    ``key_changes`` False: no update changes a key (known from the staged files), so no key
    chain is looked for."""
    events = change_events(flat, n_keys, n_cols, key_columns)
    if key_changes is False or events.filter(F.col("_kind") == "arrive").limit(1).count() == 0:
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
