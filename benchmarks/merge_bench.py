"""Cost of applying one staged batch with the merge job, against the table size.

Run from the repository root::

    .venv/bin/python benchmarks/merge_bench.py [--small N] [--large N] [--changes N]
        [--repeat N] [--driver-memory 4g] [--table-property KEY=VALUE ...] [--keep DIR]

The script starts a local Spark (``airflow_provider_binlog/spark/runtime.py``, needs pyspark
3.5, the Iceberg runtime and a Java 17) with a Hadoop catalog ``lake`` over a temporary
warehouse, and creates two Iceberg tables of the same source table ``bench.items``
(``id BIGINT`` primary key, ``account_id BIGINT``, ``amount DECIMAL(12,2)``, ``score DOUBLE``,
``name VARCHAR``, nullable ``note VARCHAR``) in the namespaces ``bench_small`` and
``bench_large``, holding ``--small`` and ``--large`` rows (default 1,000,000 and 10,000,000;
even ids ``0, 2, 4, ...``).  They are created with the merge job's own statements
(``merge.schema_plan.create_table_statements``), so they have its default layout: format version 2,
``WRITE ORDERED BY id``, merge-on-read MERGE/UPDATE/DELETE with one position delete file per
write task and partition (``merge.iceberg_contract.DEFAULT_TABLE_PROPERTIES``), plus the ``binlog.*``
table properties.  They are loaded from ``spark.range`` with the rows sorted by id (one file
per 250,000 rows, each a sorted run of ids), and their load commit carries the
``binlog.checkpoint`` the batch starts at, so the batch applies without a gap.

For each table it stages, with :class:`~airflow_provider_binlog.staging.StagingWriter`, one
batch of ``--changes`` row changes (default 10,000) spread uniformly over the table's key
range (so every data file holds changed keys): 60 % updates of existing rows, 20 % deletes,
20 % inserts of new (odd) ids, in events of 20 rows in random order.  It then times:

* ``merge small``: ``apply_manifests`` of the small table's batch;
* ``merge large``: ``apply_manifests`` of the large table's batch;
* ``overwrite large``: ``INSERT OVERWRITE`` of the large table with its own rows, the cost of
  rewriting the whole table;

after an untimed warm-up merge into a table of 20,000 rows (the first MERGE of a session
pays for class loading).  The two merges run ``--repeat`` times (default 3), small and large
alternately; before each repeat the table is rolled back to its loaded snapshot and the
batch is applied as another stream of the namespace's ledger, so each repeat does the same
work.  The row counts are checked after each merge.  The script prints each merge's time,
the medians, the ratio large/small of the medians (the project aims at 1.5 or less: the cost
of a batch should follow the batch, not the table) and overwrite/merge of the large table.
The data files each commit removed and added and the delete files it added (from its
snapshot summary) are printed next to the table's file count: a merge that removes every
file rewrote the whole table; a merge-on-read merge removes none and adds one data file for
the changed rows and one delete file per write task.

``--table-property`` adds Iceberg table properties to both tables, overriding the job's
defaults (e.g. ``write.merge.mode=copy-on-write``).  The script exits with status 1 when a
row count is wrong and 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import random
import shutil
import statistics
import sys
import tempfile
import time
from decimal import Decimal

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
from airflow_provider_binlog.codec import constants as C  # noqa: E402
from airflow_provider_binlog.codec.events import Column, EventHeader, RowsEvent, TableMap  # noqa: E402
from airflow_provider_binlog.staging import StagingWriter  # noqa: E402
from airflow_provider_binlog.common.tables import iceberg_table_name  # noqa: E402

CATALOG = "lake"
SOURCE = ("bench", "items")
BINLOG_FILE = "mysql-bin.000001"
EVENT_ROWS = 20

TABLE_MAP = TableMap(1, SOURCE[0], SOURCE[1], (
    Column(0, "id", C.MYSQL_TYPE_LONGLONG, 0, nullable=False, primary_key=True),
    Column(1, "account_id", C.MYSQL_TYPE_LONGLONG, 0, nullable=False),
    Column(2, "amount", C.MYSQL_TYPE_NEWDECIMAL, (12 << 8) | 2, nullable=False),
    Column(3, "score", C.MYSQL_TYPE_DOUBLE, 8, nullable=False),
    Column(4, "name", C.MYSQL_TYPE_VARCHAR, 160, nullable=False, text=True),
    Column(5, "note", C.MYSQL_TYPE_VARCHAR, 160, text=True),
))

# The initial rows, in Spark SQL (loading) and in Python (before images): the same values.
ROW_SQL = [
    "id",
    "id % 10007 AS account_id",
    "CAST(id % 1000000 AS DECIMAL(12,2)) / 100 AS amount",
    "CAST(id AS DOUBLE) * 0.5 AS score",
    "concat('name-', CAST(id AS STRING)) AS name",
    "CASE WHEN id % 7 = 0 THEN NULL ELSE concat('note ', CAST(id % 1000 AS STRING)) END AS note",
]


def initial_row(key: int) -> tuple:
    return (key, key % 10007, Decimal(key % 1000000) / 100, key * 0.5, f"name-{key}",
            None if key % 7 == 0 else f"note {key % 1000}")


def changed_row(key: int, rng: random.Random) -> tuple:
    return (key, rng.randrange(10007), Decimal(rng.randrange(10**8)) / 100, rng.random() * 1e6,
            f"name-{key}-v2", rng.choice([None, f"changed {rng.randrange(1000)}"]))


def checkpoint_text(cp: Checkpoint) -> str:
    """As the merge job writes it into a snapshot summary."""
    return json.dumps(cp.to_json(), sort_keys=True, separators=(",", ":"))


# --------------------------------------------------------------------------- staging


def stage_batch(staging: pathlib.Path, rows: int, changes: int, seed: int, clustered: bool = False):
    """One staged batch of ``changes`` changes spread over the keys of a table of ``rows``
    rows (ids ``0, 2, ..., 2 * (rows - 1)``): updates, deletes, inserts of odd ids; with
    ``clustered``, updates and deletes of the most recent keys and inserts of new keys above
    them (an auto-increment table's usual batch). Returns the manifest and the expected row
    count after it."""
    rng = random.Random(seed)
    n_insert = changes // 5
    n_delete = changes // 5
    n_update = changes - n_insert - n_delete
    touched = min(rows, n_update + n_delete)
    existing = rng.sample(range(rows - touched, rows) if clustered else range(rows), touched)
    updated = [2 * i for i in existing[:n_update]]
    deleted = [2 * i for i in existing[n_update:]]
    inserted = ([2 * (rows + i) for i in range(n_insert)] if clustered
                else [2 * i + 1 for i in rng.sample(range(rows), min(rows, n_insert))])
    events = []
    for kind, keys in (("update", updated), ("delete", deleted), ("insert", inserted)):
        for i in range(0, len(keys), EVENT_ROWS):
            events.append((kind, keys[i:i + EVENT_ROWS]))
    rng.shuffle(events)

    writer = StagingWriter(staging)
    pos, ts = 4, 1_700_000_000
    start = Checkpoint(file=BINLOG_FILE, position=pos)
    for kind, keys in events:
        if kind == "insert":
            images = tuple(changed_row(k, rng) for k in keys)
        elif kind == "delete":
            images = tuple(initial_row(k) for k in keys)
        else:
            images = tuple((initial_row(k), changed_row(k, rng)) for k in keys)
        header = EventHeader(ts, 30, 1, 100 * len(keys), pos + 100 * len(keys), 0)
        event = RowsEvent(header, pos, kind, TABLE_MAP.table_id, TABLE_MAP, 0, images)
        writer.add_rows(event, binlog_file=BINLOG_FILE, gtid=None, txn=f"{BINLOG_FILE}:{pos}")
        pos += 100 * len(keys)
        ts += 1
    end = Checkpoint(file=BINLOG_FILE, position=pos)
    manifest = writer.publish(dump_id=f"bench-{rows}-{start.position}-{end.position}",
                              start=start.to_json(), end=end.to_json(), server={"flavor": "mysql"})
    return manifest, start, rows - len(deleted) + len(inserted)


# --------------------------------------------------------------------------- tables


def create_table(spark, namespace: str, manifest, start: Checkpoint, rows: int,
                 extra_properties: dict) -> str:
    """The Iceberg table of ``bench.items`` in ``namespace``, as the merge job creates it,
    loaded with ``rows`` rows sorted by id; the load commit holds ``start``."""
    from airflow_provider_binlog.spark.runtime import run_with_commit_properties
    from airflow_provider_binlog.merge import iceberg_contract as contract
    import pyarrow.parquet as pq

    from airflow_provider_binlog.merge.column_types import iceberg_arrow_type, sql_type
    from airflow_provider_binlog.merge.layout import TableLayout
    from airflow_provider_binlog.merge.schema_plan import create_table_statements

    name = f"{CATALOG}.{namespace}.{iceberg_table_name(*SOURCE)}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    # the columns the merge job derives from the staged files
    staged = pq.read_schema(str(manifest.files(manifest.tables[0])[0])).field("_after").type
    columns = [(f.name, iceberg_arrow_type(f.type)) for f in staged]
    for sql in create_table_statements(name, SOURCE, columns, contract.MODE_MERGE, ["id"],
                                       TableLayout(properties=extra_properties or {})):
        spark.sql(sql)
    partitions = max(1, rows // 250_000)
    data = spark.range(0, 2 * rows, 2, numPartitions=partitions).selectExpr(*ROW_SQL)
    data = data.select(*[data[n].cast(sql_type(t)).alias(n) for n, t in columns])
    # spark.range is already ordered by id across its partitions: keep that split (no
    # shuffle), one sorted run of ids per file
    summary = {contract.SUMMARY_CHECKPOINT: checkpoint_text(start),
               contract.SUMMARY_BATCH: "bench-load", contract.SUMMARY_STREAM: contract.DEFAULT_STREAM,
               "binlog.source": ".".join(SOURCE)}
    run_with_commit_properties(spark, summary, lambda: data.sortWithinPartitions("id").writeTo(name)
                               .option("distribution-mode", "none").append())
    return name


def file_count(spark, name: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {name}.files WHERE content = 0").collect()[0][0]


def head_summary(spark, name: str) -> dict:
    from airflow_provider_binlog.spark.runtime import snapshot_summary
    return snapshot_summary(spark, name)


def load_snapshot(spark, name: str) -> int:
    return spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()[0][0]


def rollback(spark, name: str, snapshot_id: int) -> None:
    """Back to the loaded table (the files of the merge stay, unreferenced)."""
    short = name.split(".", 1)[1]
    spark.sql(f"CALL {CATALOG}.system.rollback_to_snapshot(table => '{short}', "
              f"snapshot_id => {snapshot_id})")


def timed_merge(spark, manifest, namespace: str, stream: str = "default", direct_deletes: str = "position") -> float:
    from airflow_provider_binlog.merge.spark.engine import merge_with_spark as apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    t0 = time.perf_counter()
    result = apply_manifests(spark, [manifest], MergeOptions(catalog=CATALOG, namespace=namespace, stream=stream,
                                                             direct_deletes=direct_deletes))
    elapsed = time.perf_counter() - t0
    statuses = [t["status"] for b in result["batches"] for t in b["tables"]]
    if statuses != ["committed"]:
        raise RuntimeError(f"{namespace}: the batch was not committed: {result}")
    return elapsed


def merge_and_check(spark, manifest, namespace: str, name: str, label: str, files: int, expected: int,
                    times: list, **kwargs) -> bool:
    """One timed merge, appended to ``times`` and printed with what it committed; whether the
    table then holds ``expected`` rows."""
    times.append(timed_merge(spark, manifest, namespace, **kwargs))
    print(describe(f"{label} {times[-1]:.2f}s", files, head_summary(spark, name)), flush=True)
    count = spark.table(name).count()
    if count != expected:
        print(f"{name}: {count} rows after {label}, expected {expected}", file=sys.stderr)
    return count == expected


def describe(label: str, before_files: int, summary: dict) -> str:
    return (f"{label}: data files before {before_files}, removed "
            f"{summary.get('deleted-data-files', '0')}, added {summary.get('added-data-files', '0')}, "
            f"delete files added {summary.get('added-delete-files', '0')}; records written "
            f"{summary.get('added-records', '0')}")


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", type=int, default=1_000_000,
                    help="rows of the small table (default 1000000)")
    ap.add_argument("--large", type=int, default=10_000_000,
                    help="rows of the large table (default 10000000)")
    ap.add_argument("--changes", type=int, default=10_000, help="row changes per batch (default 10000)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="merges of each batch, alternating small and large (default 3)")
    ap.add_argument("--driver-memory", default="4g", help="spark.driver.memory (default 4g)")
    ap.add_argument("--table-property", action="append", default=[], metavar="KEY=VALUE",
                    help="Iceberg table property of both tables; repeatable")
    ap.add_argument("--keep", metavar="DIR", help="use DIR (created, must be empty) for the warehouse "
                                                  "and staging, and keep it")
    args = ap.parse_args(argv)
    if min(args.small, args.large, args.changes, args.repeat) <= 0:
        ap.error("--small, --large, --changes and --repeat must be positive")
    properties = {}
    for item in args.table_property:
        k, sep, v = item.partition("=")
        if not sep or not k:
            ap.error(f"--table-property wants KEY=VALUE, not {item!r}")
        properties[k] = v

    t_start = time.perf_counter()
    if args.keep:
        work = pathlib.Path(args.keep)
        work.mkdir(parents=True, exist_ok=True)
        if any(work.iterdir()):
            ap.error(f"--keep {work}: not empty")
    else:
        work = pathlib.Path(tempfile.mkdtemp(prefix="merge-bench-"))
    try:
        from airflow_provider_binlog.spark.runtime import local_spark_session
        try:
            spark = local_spark_session(str(work / "warehouse"), CATALOG, app_name="merge_bench",
                                        extra_conf={"spark.driver.memory": args.driver_memory})
        except Exception as exc:  # no pyspark, Iceberg runtime or Java 17
            print(f"cannot start Spark: {exc}", file=sys.stderr)
            return 2
        spark.sparkContext.setLogLevel("ERROR")
        try:
            return run(spark, work, args, properties, t_start)
        finally:
            spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(spark, work: pathlib.Path, args, properties: dict, t_start: float) -> int:
    tables = {}
    for label, namespace, rows, seed in (("small", "bench_small", args.small, 1),
                                         ("large", "bench_large", args.large, 2)):
        t0 = time.perf_counter()
        manifest, start, expected = stage_batch(work / "staging" / label, rows, args.changes, seed)
        t_stage = time.perf_counter() - t0
        t0 = time.perf_counter()
        name = create_table(spark, namespace, manifest, start, rows, properties)
        t_load = time.perf_counter() - t0
        files = file_count(spark, name)
        print(f"{label}: {rows:,} rows in {name} ({files} data files, loaded in {t_load:.1f}s); "
              f"batch of {sum(manifest.tables[0]['rows'].values()):,} changes "
              f"{manifest.tables[0]['rows']} staged in {t_stage:.2f}s", flush=True)
        tables[label] = (namespace, name, manifest, expected, files)
    loaded = {label: load_snapshot(spark, t[1]) for label, t in tables.items()}

    # warm-up (not timed): the first MERGE of a session pays for class loading and JIT
    manifest, start, _ = stage_batch(work / "staging" / "warmup", 20_000, min(args.changes, 2_000), 3)
    create_table(spark, "bench_warmup", manifest, start, 20_000, properties)
    timed_merge(spark, manifest, "bench_warmup")

    times: dict = {"small": [], "large": []}
    bad = False
    for repeat in range(args.repeat):
        for label in ("small", "large"):
            namespace, name, manifest, expected, files = tables[label]
            if repeat:
                rollback(spark, name, loaded[label])
            # each repeat is a stream of its own in the namespace's ledger, which has not
            # applied the batch yet; the table is back at the batch start
            bad |= not merge_and_check(spark, manifest, namespace, name, f"merge {label} #{repeat + 1}", files,
                                       expected, times.setdefault(label, []), stream=f"repeat{repeat}")

    # the cost of locating the replaced rows in the large table: the same batch with equality
    # deletes (nothing read), and a batch of as many changes clustered on the most recent keys
    namespace, large_name, manifest, expected, files = tables["large"]
    clustered, _, clustered_expected = stage_batch(work / "staging" / "clustered", args.large, args.changes, 4,
                                                   clustered=True)
    for repeat in range(args.repeat):
        for label, batch, deletes, count_after in (("equality", manifest, "equality", expected),
                                                   ("clustered", clustered, "position", clustered_expected)):
            rollback(spark, large_name, loaded["large"])
            bad |= not merge_and_check(spark, batch, namespace, large_name, f"merge large, {label} #{repeat + 1}",
                                       files, count_after, times.setdefault(label, []), stream=f"{label}{repeat}",
                                       direct_deletes=deletes)
    rollback(spark, large_name, loaded["large"])

    files = file_count(spark, large_name)
    t0 = time.perf_counter()
    spark.sql(f"INSERT OVERWRITE {large_name} SELECT * FROM {large_name}")
    times["overwrite"] = time.perf_counter() - t0
    print(describe("overwrite large", files, head_summary(spark, large_name)), flush=True)

    print(f"changes per batch: {args.changes:,}  tables: {args.small:,} and {args.large:,} rows"
          + (f"  properties: {properties}" if properties else ""))
    small, large = statistics.median(times["small"]), statistics.median(times["large"])
    runs = lambda label: ", ".join(f"{t:.2f}" for t in times[label])  # noqa: E731
    print(f"merge small:     {small:7.2f}s  (median of {runs('small')})")
    print(f"merge large:     {large:7.2f}s  (median of {runs('large')})")
    print(f"overwrite large: {times['overwrite']:7.2f}s")
    ratio = large / small
    print(f"ratio merge large/small: {ratio:.2f}  (target <= 1.5)"
          + ("" if ratio <= 1.5 else "  ABOVE TARGET"))
    print(f"ratio overwrite/merge (large): {times['overwrite'] / large:.2f}")
    equality, recent = statistics.median(times["equality"]), statistics.median(times["clustered"])
    print(f"locating the replaced rows (large, position deletes): changes spread over the keys {large:.2f}s "
          f"vs the same batch with equality deletes (nothing read) {equality:.2f}s: +{large - equality:.2f}s; "
          f"changes clustered on the most recent keys {recent:.2f}s ({recent / equality:.2f}x equality)")
    print(f"total {time.perf_counter() - t_start:.0f}s")
    if bad:
        print("ROW COUNTS WRONG", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
