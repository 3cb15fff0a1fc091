"""End-to-end throughput of an initial load and of large CDC batches, through the factory's DAGs,
against ``mariadb-dump --single-transaction`` of the same table in the same run (the floor).

Run from the repository root::

    .venv/bin/python benchmarks/e2e_throughput_bench.py [--rows 5000000] [--changes 1000000,5000000]
        [--snapshot-method watermark] [--keep DIR]

Setup as ``benchmarks/dag_bench.py`` (the quickstart's private Airflow home on SQLite, a private
MariaDB, the embedded local Spark ``local[2]`` and Hadoop catalog), with ``bench.items`` of
``--rows`` rows: BIGINT key, INT, VARCHAR(40), DECIMAL(12,2), DATETIME(6), from the SEQUENCE
engine. Then, timed:

1. ``mariadb-dump --single-transaction bench items`` to a file: the floor;
2. (untimed) a one-task DAG, so that ``dag.test()``'s in-process execution API has started, as a
   deployment's API server has, before the timed runs;
3. the backfill DAG in mode ``snapshot`` with ``snapshot_method`` (default ``watermark``): the
   snapshot task, the merge task, and the run end to end;
4. for each size of ``--changes``: that many changes made by set-based statements (half updates,
   a quarter inserts of new keys, a quarter deletes), then one run of the incremental DAG: its
   dump and merge tasks and the run end to end.

After the backfill and after each CDC run, the Iceberg table is compared with MariaDB by row
count and an order-free checksum (the sum of CRC32 of each row's text, computed by each side
over its own rows). Prints seconds, rows per second, rows per second per core and the ratio to
the floor, with the targets of docs/performance.md. Exits 1 when a table differs or a run
fails, 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import dag_bench as db  # noqa: E402  (the DAG benchmark's setup, runs and reports)
from airflow_provider_binlog.local import quickstart as qs  # noqa: E402

SOURCE_ID = "bench"
TABLE = "bench.items"
NAMESPACE = f"{SOURCE_ID}_cdc"
CREATE = (
    "CREATE DATABASE bench",
    "CREATE TABLE bench.items (id BIGINT NOT NULL PRIMARY KEY, account_id INT NOT NULL,"
    " name VARCHAR(40) NOT NULL, amount DECIMAL(12,2) NOT NULL, updated_at DATETIME(6) NOT NULL)",
)
ROW_TEXT = {  # each side's text of a row, alike for equal rows
    "mariadb": "CONCAT_WS('|', id, account_id, name, amount, DATE_FORMAT(updated_at, '%Y-%m-%d %H:%i:%s.%f'))",
    "spark": "concat_ws('|', id, account_id, name, cast(amount as string), "
             "date_format(updated_at, 'yyyy-MM-dd HH:mm:ss.SSSSSS'))",
}
DAG_FILE = '''"""The DAGs of the end-to-end throughput benchmark."""
from airflow.sdk import dag, task

from airflow_provider_binlog.dags import (LakeSettings, MergeSettings, SnapshotSettings, SparkSettings,
                                          WaitSettings, make_cdc_dags)

binlog_cdc, binlog_backfill = make_cdc_dags(
    {source_id!r}, binlog_conn_id={conn_id!r}, tables=[{table!r}], staging={staging!r},
    lake=LakeSettings(namespace={namespace!r}, catalog={catalog!r}, warehouse={warehouse!r}),
    spark=SparkSettings(conn_id={spark_conn_id!r}), schedule="*/15 * * * *",
    wait=WaitSettings(poke_interval=1, timeout=5, mode="poke"),
    snapshot=SnapshotSettings(method={method!r}){extra})


@dag(dag_id="bench_warmup", schedule=None)
def bench_warmup():
    """One empty task: run first, so that dag.test()'s in-process execution API is up before the
    timed runs, as a deployment's API server is."""
    @task
    def nothing() -> None:
        return None

    nothing()


warmup = bench_warmup()
'''
#: Targets on a 2-core machine (docs/performance.md).
TARGETS = {"initial load": 300_000, "cdc": 150_000}


def load_sql(first: int, last: int) -> str:
    return (f"INSERT INTO bench.items SELECT seq, seq % 10007, CONCAT('name ', seq), (seq % 1000000) / 100,"
            f" TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq * 7919) % 1000000 MICROSECOND"
            f" FROM bench.seq_{first}_to_{last}")


#: rows per statement (each statement its own transaction) when changes are made
CHANGE_ROWS = 10_000


def make_changes(server, live: tuple[int, int], changes: int) -> tuple[dict, tuple[int, int]]:
    """Half updates (the newest live keys), a quarter deletes (the oldest), a quarter inserts of
    new keys, in statements of :data:`CHANGE_ROWS` rows, each its own transaction. The live
    keys are ``range(*live)`` before and the returned range after."""
    low, high = live
    n_insert, n_delete = changes // 4, changes // 4
    n_update = changes - n_insert - n_delete
    done = {"insert": 0, "update": 0, "delete": 0}
    for at in range(high - n_update, high, CHANGE_ROWS):
        done["update"] += server.execute(
            "UPDATE bench.items SET amount = amount + 1.25, updated_at = updated_at + INTERVAL 1 SECOND "
            f"WHERE id >= {at} AND id < {min(at + CHANGE_ROWS, high)}")
    for at in range(low, low + n_delete, CHANGE_ROWS):
        done["delete"] += server.execute(f"DELETE FROM bench.items WHERE id >= {at} "
                                         f"AND id < {min(at + CHANGE_ROWS, low + n_delete)}")
    for at in range(high, high + n_insert, CHANGE_ROWS):
        done["insert"] += server.execute(load_sql(at, min(at + CHANGE_ROWS, high + n_insert) - 1))
    return done, (low + n_delete, high + n_insert)


def checksum_mariadb(server) -> tuple[int, int]:
    ((count, total),) = server.query(f"SELECT COUNT(*), COALESCE(SUM(CRC32({ROW_TEXT['mariadb']})), 0) "
                                     f"FROM {TABLE}")
    return int(count), int(total)


def checksum_iceberg(spark, name: str) -> tuple[int, int]:
    spark.sql(f"REFRESH TABLE {name}")
    row = spark.sql(f"SELECT count(*) AS n, coalesce(sum(crc32(cast({ROW_TEXT['spark']} AS binary))), 0) AS s "
                    f"FROM {name}").collect()[0]
    return int(row["n"]), int(row["s"])


_PEAKS = {"snapshot task": re.compile(r"peak RSS of this process ([0-9.]+) MiB"),
          "merge driver (Python)": re.compile(r"peak RSS of the merge driver's Python process: ([0-9.]+) MiB")}


def peaks(log_path: pathlib.Path, offset: int) -> tuple[dict[str, float], int]:
    """The peak RSS the snapshot task and the merge driver logged after ``offset`` of the log,
    and the log's size now."""
    text = log_path.read_bytes()
    found = {}
    for label, pattern in _PEAKS.items():
        values = [float(v) for v in pattern.findall(text[offset:].decode(errors="replace"))]
        if values:
            found[label] = max(values)
    return found, len(text)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--changes", default="1000000,5000000", help="sizes of the CDC batches, comma-separated")
    ap.add_argument("--snapshot-method", choices=("watermark", "consistent"), default="watermark")
    ap.add_argument("--merge-direct-max-bytes", type=int, default=None,
                    help="the direct_max_bytes of the factory's MergeSettings (0: every merge through Spark, the "
                         "snapshot's too); default: the factory's")
    ap.add_argument("--keep", metavar="DIR", help="work directory to use and keep")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.changes.split(",") if s.strip()]
    if args.rows < 4 or any(n < 4 for n in sizes) or sum(n - n // 4 for n in sizes) > args.rows:
        ap.error("--rows must exceed the updates and deletes of all --changes sizes together")
    if "airflow" in sys.modules:
        print("Airflow is imported already: run the benchmark in a new process", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, db._terminate)
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if not dump:
        print("mariadb-dump not found (Debian package mariadb-client)", file=sys.stderr)
        return 2
    workdir = pathlib.Path(args.keep).resolve() if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="e2e-bench-"))
    try:
        try:
            qs.prepare_workdir(workdir)
        except qs.QuickstartError as exc:
            print(f"cannot use {workdir}: {exc}", file=sys.stderr)
            return 2
        return run(args, sizes, dump, workdir, workdir / "e2e_bench.log")
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args, sizes: list[int], dump: str, workdir: pathlib.Path, log_path: pathlib.Path) -> int:
    dirs = db.private_environment(workdir)
    if dirs is None:
        return 2
    home, staging, warehouse, checkpoints = dirs
    java_home = os.environ["JAVA_HOME"]
    from airflow_provider_binlog.local.mariadb import MariaDBServer

    print(f"work directory {workdir} (Airflow, Spark and server output: {log_path})", flush=True)
    server = spark = None
    with qs.redirected_output(log_path) as console:
        say, fail = db.reporters(console, log_path)
        per_core = cores()
        results: list[tuple[str, int, float, float]] = []  # (step, rows, seconds, floor seconds)
        try:
            try:
                server = MariaDBServer(db.SERVER_OPTIONS)
            except Exception as exc:
                return fail(2, f"cannot start MariaDB: {exc}")
            for statement in CREATE:
                server.execute(statement)
            t0 = time.perf_counter()
            server.execute(load_sql(1, args.rows))
            say(f"{TABLE}: {args.rows:,} rows loaded in {time.perf_counter() - t0:.1f}s; {per_core} cores")

            t0 = time.perf_counter()
            subprocess.run([dump, "-h", server.host, "-P", str(server.port), "-u", server.user,
                            f"-p{server.password}", "--single-transaction", "--skip-lock-tables", "bench", "items",
                            f"--result-file={workdir / 'items.sql'}"], check=True, capture_output=True)
            floor = time.perf_counter() - t0
            (workdir / "items.sql").unlink()
            say(f"mariadb-dump --single-transaction: {floor:.2f}s ({args.rows / floor:,.0f} rows/s): the floor")

            os.environ.update(qs.connection_environment(server, checkpoints, db.REPLICA_SERVER_ID))
            try:
                qs.migrate_metadata_db(dict(os.environ), log_path)
            except qs.QuickstartError as exc:
                return fail(2, str(exc))
            dag_file = home / "dags" / "binlog_bench.py"
            dag_file.write_text(DAG_FILE.format(
                source_id=SOURCE_ID, conn_id=qs.CONN_ID, table=TABLE, staging=str(staging), namespace=NAMESPACE,
                catalog=qs.CATALOG, spark_conn_id=qs.SPARK_CONN_ID, warehouse=str(warehouse),
                method=args.snapshot_method,
                extra="" if args.merge_direct_max_bytes is None
                else f", merge=MergeSettings(direct_max_bytes={args.merge_direct_max_bytes})"))
            from airflow_provider_binlog.dags import backfill_dag_id, incremental_dag_id
            from airflow_provider_binlog.spark import local_spark_session
            from airflow_provider_binlog.common.tables import iceberg_table_name

            def load(dag_id):
                return qs.load_dags(dag_file)[dag_id]

            name = f"{qs.CATALOG}.{NAMESPACE}.{iceberg_table_name(*TABLE.split('.'))}"

            def verify(label: str) -> bool:
                nonlocal spark
                if spark is None:
                    import logging
                    logging.getLogger("py4j").setLevel(logging.WARNING)
                    spark = local_spark_session(str(warehouse), qs.CATALOG, app_name="e2e-bench-verify",
                                                java_home=java_home)
                source, lake = checksum_mariadb(server), checksum_iceberg(spark, name)
                say(f"    {label}: MariaDB {source[0]:,} rows, checksum {source[1]}; Iceberg {lake[0]:,} rows, "
                    f"checksum {lake[1]}: " + ("equal" if source == lake else "DIFFER"))
                return source == lake

            _, seconds, state = db.run_timed(load, "bench_warmup")
            say(f"warm-up: a one-task DAG in {seconds:.2f}s starts dag.test()'s in-process execution API "
                f"({state}; in a deployment the API server is already running)")
            log_at = log_path.stat().st_size
            dag_run, seconds, state = db.run_timed(load, backfill_dag_id(SOURCE_ID), {"mode": "snapshot"})
            tasks = db.describe_run(say, f"initial load ({args.snapshot_method} snapshot + merge)", dag_run, seconds)
            memory, log_at = peaks(log_path, log_at)
            say("    peak RSS: " + (", ".join(f"{k} {v:,.0f} MiB" for k, v in memory.items()) or "not logged"))
            if state != "success":
                return fail(1, f"the backfill ended {state}: {qs.task_states(dag_run)}")
            durations = {t[0]: t[2] or 0.0 for t in tasks}
            results.append(("initial load, end to end", args.rows, seconds, floor))
            results.append(("  snapshot task", args.rows, durations.get("snapshot", 0.0), floor))
            results.append(("  merge task", args.rows, durations.get("merge", 0.0), floor))
            ok = verify("after the initial load")

            live = (1, args.rows + 1)
            for size in sizes:
                t0 = time.perf_counter()
                made, live = make_changes(server, live, size)
                say(f"changes: {made} in {time.perf_counter() - t0:.1f}s")
                dag_run, seconds, state = db.run_timed(load, incremental_dag_id(SOURCE_ID))
                tasks = db.describe_run(say, f"CDC batch of {size:,} changes", dag_run, seconds)
                memory, log_at = peaks(log_path, log_at)
                say("    peak RSS: " + (", ".join(f"{k} {v:,.0f} MiB" for k, v in memory.items()) or "not logged"))
                if state != "success":
                    return fail(1, f"the incremental run ended {state}: {qs.task_states(dag_run)}")
                durations = {t[0]: t[2] or 0.0 for t in tasks}
                results.append((f"CDC {size:,} changes, end to end", size, seconds, floor * size / args.rows))
                results.append(("  dump task", size, durations.get("dump", 0.0), floor * size / args.rows))
                results.append(("  merge task", size, durations.get("merge", 0.0), floor * size / args.rows))
                ok = verify(f"after {size:,} changes") and ok

            say()
            say(f"{'step':<36} {'rows':>10} {'seconds':>8} {'rows/s':>10} {'per core':>9} {'x floor':>8}")
            for step, rows, secs, base in results:
                rate = rows / secs if secs else 0.0
                say(f"{step:<36} {rows:>10,} {secs:>8.2f} {rate:>10,.0f} {rate / per_core:>9,.0f} "
                    f"{secs / base if base else 0:>8.1f}")
            say(f"targets: initial load >= {TARGETS['initial load']:,} rows/s end to end, CDC >= {TARGETS['cdc']:,} "
                f"rows/s for 1M changes, snapshot task <= 3x the floor")
            return 0 if ok else fail(1, "an Iceberg table differs from MariaDB")
        except Exception as exc:
            import traceback
            traceback.print_exc()
            return fail(2, f"{type(exc).__name__}: {exc}")
        finally:
            qs.shut_down(spark, server)


if __name__ == "__main__":
    sys.exit(main())
