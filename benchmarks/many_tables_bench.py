"""The merge task of one incremental DAG run whose batch touches N tables, for several N, against
the merge of one table and against a no-op ``spark-submit`` with the same Spark configuration.

Run from the repository root::

    .venv/bin/python benchmarks/many_tables_bench.py [--tables 1,50,200] [--rows 1000]
        [--updates 100] [--parallel-tables N] [--keep DIR]

Setup (untimed), as ``benchmarks/dag_bench.py`` does it with the quickstart's functions: a
private Airflow (SQLite), a private MariaDB (FULL row images and metadata), the connections,
a file checkpoint store, staging and an Iceberg warehouse on disk, and a DAG file making the
DAGs with :func:`airflow_provider_binlog.dags.make_cdc_dags` for the tables ``many.*``
(``spark`` connection ``local[2]``, the embedded Hadoop catalog). The largest N tables
``many.t0001`` ... are created with ``--rows`` rows each (an INT key, an INT, a DECIMAL and a
VARCHAR) and loaded by the backfill DAG in mode ``snapshot``.

Timed, for each N of ``--tables`` (in the order given): ``--updates`` rows of each of the
first N tables are updated (one transaction per table), then one run of the incremental DAG
(sensor, dump, merge through ``spark-submit``) loads them; the merge task's duration comes from
its task instance. In the same process, before the first run and after the last, a no-op
application is submitted through the same ``SparkSubmitHook`` with the same Spark
configuration and environment as the merge (it starts the same embedded Spark session, lists
the catalog's namespaces and stops): the floor of any Spark application here.

With ``--snapshots 1,50`` (what ``benchmarks/snapshot_bench.py`` runs), the timed part is instead
one run of the backfill DAG in mode ``snapshot`` for the first N tables, per N (snapshot and
merge tasks), each after ``--updates`` rows of those tables changed, so that the snapshot
replaces what the Iceberg tables hold; printed: the run's seconds per N and N=50 against N=1
(target at most 2x), then every table is compared with MariaDB.

Printed: per N the merge task's seconds, its ratio to N=1 (targets: N=50 at most 2x, N=200 at
most 4x), and N=1 against the no-op ``spark-submit`` (target at most 1.5x). Afterwards every
Iceberg table is compared with its MariaDB table (row count and rows). Exit status 1 when a
run fails or a table differs, 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import signal
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from airflow_provider_binlog.local import quickstart as qs  # noqa: E402
from dag_bench import describe_run, private_environment, reporters, run_timed, task_durations  # noqa: E402

SOURCE_ID = "many"
NAMESPACE = f"{SOURCE_ID}_cdc"
REPLICA_SERVER_ID = 64021
SERVER_OPTIONS = {"binlog_row_metadata": "FULL", "binlog_row_image": "FULL", "binlog_checksum": "CRC32",
                  "innodb_buffer_pool_size": "256M", "innodb_log_file_size": "128M"}

DAG_FILE = '''"""The CDC DAGs of the many-tables benchmark (airflow_provider_binlog.dags.make_cdc_dags)."""
from airflow_provider_binlog.dags import LakeSettings, MergeSettings, SparkSettings, WaitSettings, make_cdc_dags

binlog_cdc, binlog_backfill = make_cdc_dags(
    {source_id!r},
    binlog_conn_id={conn_id!r},
    tables=["many.*"],
    staging={staging!r},
    lake=LakeSettings(namespace={namespace!r}, catalog={catalog!r}, warehouse={warehouse!r}),
    spark=SparkSettings(conn_id={spark_conn_id!r}),
    schedule=None,
    wait=WaitSettings(poke_interval=1.0, timeout=30.0, mode="poke"),
    merge=MergeSettings(parallel_tables={parallel_tables!r}),
)
'''

NOOP_APP = '''"""A no-op Spark application: the merge job's session, one catalog call, stop."""
import sys

from airflow_provider_binlog.spark.runtime import local_spark_session

spark = local_spark_session(sys.argv[1], sys.argv[2], app_name="noop")
spark.sql(f"SHOW NAMESPACES IN {sys.argv[2]}").collect()
spark.stop()
'''


def table_name(i: int) -> str:
    return f"t{i:04d}"


def create_tables(server, count: int, rows: int) -> None:
    server.execute("CREATE DATABASE many")
    for i in range(1, count + 1):
        server.execute(f"CREATE TABLE many.{table_name(i)} (id INT PRIMARY KEY, a INT NOT NULL, "
                       f"amount DECIMAL(12,2) NOT NULL, note VARCHAR(64))")
        server.execute(f"INSERT INTO many.{table_name(i)} SELECT seq, seq * 7, seq / 100, "
                       f"CONCAT('row ', seq) FROM many.seq_1_to_{rows}")


def update_tables(server, count: int, updates: int, round_no: int) -> None:
    conn = server.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for i in range(1, count + 1):
                cur.execute(f"UPDATE many.{table_name(i)} SET a = a + 1, note = %s WHERE id <= %s",
                            (f"round {round_no}", updates))
                conn.commit()
    finally:
        conn.close()


def noop_submit(warehouse: pathlib.Path, workdir: pathlib.Path) -> float:
    """Seconds of a no-op application submitted as the merge operator submits the job."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_binlog.operators.merge import BinlogMergeOperator
    from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings

    op = BinlogMergeOperator(
        task_id="noop",
        manifests=[],
        lake=LakeSettings(namespace=NAMESPACE, catalog=qs.CATALOG, warehouse=str(warehouse)),
        spark=SparkSettings(conn_id=qs.SPARK_CONN_ID),
    )
    app = workdir / "noop_app.py"
    app.write_text(NOOP_APP)
    catalog = op.iceberg_catalog()
    hook = SparkSubmitHook(conf=op._spark_conf(catalog), conn_id=qs.SPARK_CONN_ID,
                           application_args=[str(warehouse), qs.CATALOG], env_vars=op._env(catalog), name="noop")
    t0 = time.perf_counter()
    hook.submit(str(app))
    return time.perf_counter() - t0


def verifier(warehouse: pathlib.Path):
    """A local Spark session on the benchmark's warehouse."""
    from airflow_provider_binlog.spark import local_spark_session
    return local_spark_session(str(warehouse), qs.CATALOG, app_name="many-bench-verify")


def differing_tables(spark, server, count: int) -> list[str]:
    """The Iceberg tables of the first ``count`` tables whose rows differ from MariaDB's."""
    differ = []
    for i in range(1, count + 1):
        source = sorted(tuple(r) for r in server.query(f"SELECT id, a, amount, note FROM many.{table_name(i)}"))
        name = f"{qs.CATALOG}.{NAMESPACE}.many__{table_name(i)}"
        spark.sql(f"REFRESH TABLE {name}")
        lake = sorted(tuple(r) for r in spark.sql(f"SELECT id, a, amount, note FROM {name}").collect())
        if source != lake:
            differ.append(name)
    return differ


def time_snapshots(say, fail, load, server, counts: list[int], updates: int) -> int:
    """One backfill run in mode snapshot of the first N tables, per N, each after ``updates``
    rows of those tables changed (so that the snapshot replaces what the tables hold); the
    ratios to N=1."""
    from airflow_provider_binlog.dags import backfill_dag_id

    seconds_by_n: dict[int, float] = {}
    for round_no, n in enumerate(counts, 1):
        update_tables(server, n, updates, 100 + round_no)
        conf = {"mode": "snapshot", "tables": [f"many.{table_name(i)}" for i in range(1, n + 1)]}
        dag_run, seconds, state = run_timed(load, backfill_dag_id(SOURCE_ID), conf)
        tasks = describe_run(say, f"backfill snapshot of {n} table(s)", dag_run, seconds)
        if state != "success":
            return fail(1, f"the snapshot of {n} tables ended {state}: {qs.task_states(dag_run)}")
        seconds_by_n[n] = sum(t[2] or 0.0 for t in tasks if t[0] in ("snapshot", "merge"))
    say()
    say("backfill snapshot, snapshot and merge tasks:")
    for n in counts:
        say(f"    N={n:<4} {seconds_by_n[n]:7.2f}s   {seconds_by_n[n] / seconds_by_n[1]:5.2f}x N=1")
    if 50 in seconds_by_n:
        ratio = seconds_by_n[50] / seconds_by_n[1]
        say(f"target N=50 <= 2x N=1: {ratio:.2f}x {'met' if ratio <= 2 else 'NOT met'}")
    return 0


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", default="1,50,200", help="the N to measure, comma-separated (default 1,50,200)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per table (default 1000)")
    ap.add_argument("--updates", type=int, default=100, help="rows updated per table and run (default 100)")
    ap.add_argument("--parallel-tables", type=int, default=None,
                    help="the merge's parallel_tables (default: the job's default)")
    ap.add_argument("--snapshots", metavar="N,N", help="time backfill snapshots of the first N tables "
                                                        "instead of incremental runs (e.g. 1,50)")
    ap.add_argument("--keep", metavar="DIR", help="use DIR as the work directory and keep it")
    args = ap.parse_args(argv)
    counts = [int(n) for n in (args.snapshots or args.tables).split(",") if n.strip()]
    if not counts or min(counts) < 1 or args.rows < 1 or not 1 <= args.updates <= args.rows:
        ap.error("--tables must be positive numbers, --rows positive, --updates between 1 and --rows")
    if 1 not in counts:
        counts.insert(0, 1)
    if "airflow" in sys.modules:
        print("Airflow is imported already: run the benchmark in a new process", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    workdir = pathlib.Path(args.keep).resolve() if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="many-bench-"))
    try:
        try:
            qs.prepare_workdir(workdir)
        except qs.QuickstartError as exc:
            print(f"cannot use {workdir}: {exc}", file=sys.stderr)
            return 2
        log_path = workdir / "many_tables_bench.log"
        log_path.unlink(missing_ok=True)
        return run(args, counts, workdir, log_path)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args, counts: list[int], workdir: pathlib.Path, log_path: pathlib.Path) -> int:
    dirs = private_environment(workdir)
    if dirs is None:
        return 2
    home, staging, warehouse, checkpoints = dirs
    from airflow_provider_binlog.local.mariadb import MariaDBServer

    print(f"work directory {workdir} (Airflow, Spark and server output: {log_path})", flush=True)
    server = spark = None
    with qs.redirected_output(log_path) as console:
        say, fail = reporters(console, log_path)

        try:
            server = MariaDBServer(SERVER_OPTIONS)
            t0 = time.perf_counter()
            create_tables(server, max(counts), args.rows)
            say(f"MariaDB {server.version}: {max(counts)} tables of {args.rows:,} rows created in "
                f"{time.perf_counter() - t0:.0f}s")
            os.environ.update(qs.connection_environment(server, checkpoints, REPLICA_SERVER_ID))
            qs.migrate_metadata_db(dict(os.environ), log_path)
            dag_file = home / "dags" / "binlog_many.py"
            dag_file.write_text(DAG_FILE.format(
                source_id=SOURCE_ID, conn_id=qs.CONN_ID, staging=str(staging), namespace=NAMESPACE,
                catalog=qs.CATALOG, spark_conn_id=qs.SPARK_CONN_ID, warehouse=str(warehouse),
                parallel_tables=args.parallel_tables))

            from airflow_provider_binlog.dags import backfill_dag_id, incremental_dag_id

            def load(dag_id):
                return qs.load_dags(dag_file)[dag_id]

            dag_run, seconds, state = run_timed(load, backfill_dag_id(SOURCE_ID), {"mode": "snapshot"})
            if state != "success":
                return fail(2, f"the initial snapshot ended {state}: {qs.task_states(dag_run)}")
            describe_run(say, f"initial snapshot of {max(counts)} tables (not timed)", dag_run, seconds)

            if args.snapshots:
                status = time_snapshots(say, fail, load, server, counts, args.updates)
                spark = verifier(warehouse)
                differ = differing_tables(spark, server, max(counts))
                say(f"verified {max(counts)} tables: " + ("all equal" if not differ else f"{len(differ)} differ"))
                return fail(1, f"tables differ: {differ[:10]}") if differ else status
            noop = [noop_submit(warehouse, workdir)]
            say(f"no-op spark-submit (same configuration): {noop[0]:.2f}s")
            merge_seconds: dict[int, float] = {}
            for round_no, n in enumerate(counts, 1):
                update_tables(server, n, args.updates, round_no)
                dag_run, seconds, state = run_timed(load, incremental_dag_id(SOURCE_ID))
                tasks = describe_run(say, f"incremental run, {n} table(s) x {args.updates} updated rows",
                                     dag_run, seconds)
                states = {t[0]: t[1] for t in tasks}
                if state != "success" or states.get("merge") != "success":
                    return fail(1, f"the incremental run for N={n} ended {state}: {states}")
                merged = qs.run_results(dag_run).get("merge") or {}
                if merged.get("updated") != n * args.updates:
                    return fail(1, f"N={n}: the merge applied {merged.get('updated')} updates, "
                                   f"not {n * args.updates}")
                merge_seconds[n] = next(t[2] for t in task_durations(dag_run) if t[0] == "merge")
            noop.append(noop_submit(warehouse, workdir))
            say(f"no-op spark-submit (same configuration), again: {noop[1]:.2f}s")

            spark = verifier(warehouse)
            differ = differing_tables(spark, server, max(counts))

            floor = statistics.median(noop)
            say()
            say(f"merge task, one incremental run (parallel_tables "
                f"{args.parallel_tables if args.parallel_tables is not None else 'default'}):")
            for n in counts:
                say(f"    N={n:<4} {merge_seconds[n]:7.2f}s   {merge_seconds[n] / merge_seconds[1]:5.2f}x N=1")
            say(f"    no-op spark-submit {floor:7.2f}s (median of {len(noop)}); "
                f"N=1 is {merge_seconds[1] / floor:.2f}x it")
            for n, target in ((50, 2.0), (200, 4.0)):
                if n in merge_seconds:
                    ratio = merge_seconds[n] / merge_seconds[1]
                    say(f"target N={n} <= {target:g}x N=1: {ratio:.2f}x {'met' if ratio <= target else 'NOT met'}")
            ratio = merge_seconds[1] / floor
            say(f"target N=1 <= 1.5x no-op spark-submit: {ratio:.2f}x {'met' if ratio <= 1.5 else 'NOT met'}")
            say(f"verified {max(counts)} tables: " + ("all equal" if not differ else f"{len(differ)} differ"))
            return fail(1, f"tables differ: {differ[:10]}") if differ else 0
        except Exception as exc:
            import traceback
            traceback.print_exc()
            return fail(2, f"{type(exc).__name__}: {exc}")
        finally:
            qs.shut_down(spark, server)


if __name__ == "__main__":
    sys.exit(main())
