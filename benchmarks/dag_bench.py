"""Wall time of one run of the incremental CDC DAG (sensor -> dump -> merge) for a batch of changes.

Run from the repository root::

    .venv/bin/python benchmarks/dag_bench.py [--rows N] [--changes N] [--txn-size N]
        [--poke-interval S] [--sensor-timeout S] [--keep DIR]

The script sets up what ``python -m airflow_provider_binlog quickstart`` sets up, with the
quickstart's own functions (``airflow_provider_binlog/local/quickstart.py``): a private Airflow
(AIRFLOW_HOME with an SQLite metadata database, ``airflow db migrate``) in a work directory,
a private MariaDB server (``airflow_provider_binlog/local/mariadb.py``; CRC32 checksums, FULL
row images and row metadata), the ``mysql_binlog`` and ``spark`` (``local[2]``) connections,
a file checkpoint store, a staging directory and an Iceberg warehouse on disk.  The DAG file
in the dags folder makes the DAGs with :func:`airflow_provider_binlog.dags.make_cdc_dags`, as
``dags/binlog_cdc.py`` does (source ``bench``, table ``bench.items``, the embedded Hadoop
catalog ``lake``, namespace ``bench_cdc``), except that the sensor pokes every
``--poke-interval`` seconds (default 1) in ``poke`` mode and gives up after
``--sensor-timeout`` seconds (default 5): the example's 60 s / 600 s would make the run
without changes last ten minutes.

Untimed: the table ``bench.items`` (BIGINT key, INT, DECIMAL(12,2), DOUBLE, utf8mb4
VARCHAR with non-ASCII text, ENUM, DATETIME(6), JSON, nullable VARCHAR) is created and
loaded with ``--rows`` rows (default 100,000) from the SEQUENCE engine, and the backfill DAG
runs in mode ``snapshot`` (the initial load).  Then ``--changes`` row changes (default
10,000: 30 % inserts of new ids, 50 % updates, 20 % deletes of distinct existing rows, one
statement per row, in transactions of ``--txn-size`` statements, default 50) are made.

Timed, with ``dag.test()`` on a freshly parsed DAG (as the quickstart runs it):

* the incremental run that loads those changes: the wall time of ``dag.test()``, the DAG
  run's own start-to-end time, and each task's duration from its task instance, with what
  the tasks did not account for (``dag.test()``'s bookkeeping: DAG file sync, scheduling
  loop);
* a second incremental run with no changes in between (the sensor waits
  ``--sensor-timeout`` seconds, then the run is skipped).

Afterwards a local Spark session reads the Iceberg table and compares it with the MariaDB
table: row count, a checksum (SHA-256 of the sorted rows, each side computed from its own
rows) and the rows that differ.  The dump's and merge's counts must equal the changes made,
and the run without changes must leave the stored checkpoint where it was.  The script exits
with status 1 when a count or the comparison is wrong or the timed run fails, and 2 when the
setup fails (no MariaDB, no Spark runtime, migration or initial snapshot failing).  The
server is stopped on every exit path (also on SIGTERM; a watchdog stops it if the script is
killed).  Airflow's, Spark's and the server's output go to ``dag_bench.log`` in the work
directory (a temporary one, or ``--keep DIR``, which is kept).
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import sys
import tempfile
import time
from decimal import Decimal
from typing import Callable, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# no Airflow import before the environment is set: the quickstart module imports it lazily
from airflow_provider_binlog.local import quickstart as qs  # noqa: E402

SOURCE_ID = "bench"
TABLE = "bench.items"
NAMESPACE = f"{SOURCE_ID}_cdc"
REPLICA_SERVER_ID = 64011
SERVER_OPTIONS = {"binlog_row_metadata": "FULL", "binlog_row_image": "FULL",
                  "binlog_checksum": "CRC32", "innodb_buffer_pool_size": "256M",
                  "innodb_log_file_size": "128M"}

CREATE = (
    "CREATE DATABASE bench",
    "CREATE TABLE bench.items ("
    " id BIGINT NOT NULL PRIMARY KEY,"
    " account_id INT NOT NULL,"
    " amount DECIMAL(12,2) NOT NULL,"
    " score DOUBLE NOT NULL,"
    " name VARCHAR(100) NOT NULL,"
    " status ENUM('new','paid','shipped','cancelled') NOT NULL,"
    " updated_at DATETIME(6) NOT NULL,"
    " attrs JSON NULL,"
    " note VARCHAR(200) NULL"
    ") DEFAULT CHARSET=utf8mb4",
)
COLUMNS = ("id", "account_id", "amount", "score", "name", "status", "updated_at", "attrs", "note")
NAMES = ("Müller", "façade", "東京", "Zürich", "Δelta", "plain", "Zoë", "José")
STATUSES = ("new", "paid", "shipped", "cancelled")


def initial_load_sql(rows: int) -> str:
    return f"""
INSERT INTO bench.items
SELECT seq, seq % 10007, (seq % 1000000) / 100, seq * 0.25,
       CONCAT(ELT(1 + seq % 8, {', '.join(f"'{n}'" for n in NAMES)}), ' #', seq),
       ELT(1 + seq % 4, {', '.join(f"'{s}'" for s in STATUSES)}),
       TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq * 7919) % 1000000 MICROSECOND,
       IF(seq % 9 = 0, NULL, JSON_OBJECT('sku', seq % 1000, 'tags', JSON_ARRAY('a', seq % 7))),
       IF(seq % 3 = 0, NULL, CONCAT('note ', seq))
FROM bench.seq_1_to_{rows}
"""


DAG_FILE = '''"""The CDC DAGs of the DAG benchmark (airflow_provider_binlog.dags.make_cdc_dags)."""
from airflow_provider_binlog.dags import LakeSettings, SparkSettings, WaitSettings, make_cdc_dags

binlog_cdc, binlog_backfill = make_cdc_dags(
    {source_id!r},
    binlog_conn_id={conn_id!r},
    tables=[{table!r}],
    staging={staging!r},
    lake=LakeSettings(namespace={namespace!r}, catalog={catalog!r}, warehouse={warehouse!r}),
    spark=SparkSettings(conn_id={spark_conn_id!r}),
    schedule="*/15 * * * *",
    wait=WaitSettings(poke_interval={poke_interval!r}, timeout={sensor_timeout!r}, mode="poke"),
)
'''


# --------------------------------------------------------------------------- changes

def make_changes(server, rng: random.Random, rows: int, changes: int, txn_size: int) -> dict:
    """``changes`` row changes on the initial rows ``1..rows`` and new ids after them: 30 %
    inserts, 50 % updates, 20 % deletes (distinct rows), shuffled, one statement per row, in
    transactions of ``txn_size`` statements. Returns the affected rows by kind."""
    n_insert = changes * 3 // 10
    n_delete = changes * 2 // 10
    n_update = changes - n_insert - n_delete
    picked = rng.sample(range(1, rows + 1), n_update + n_delete)
    ops = ([("insert", rows + 1 + i) for i in range(n_insert)]
           + [("update", k) for k in picked[:n_update]] + [("delete", k) for k in picked[n_update:]])
    rng.shuffle(ops)
    done = {"insert": 0, "update": 0, "delete": 0}
    base = dt.datetime(2024, 6, 1)
    conn = server.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            for i in range(0, len(ops), txn_size):
                for kind, key in ops[i:i + txn_size]:
                    if kind == "insert":
                        attrs = None if rng.random() < 0.1 else json.dumps(
                            {"sku": rng.randrange(1000), "tags": ["b", rng.randrange(7)]})
                        done[kind] += cur.execute(
                            "INSERT INTO bench.items VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                            (key, rng.randrange(10007), Decimal(rng.randrange(10**8)) / 100,
                             rng.randrange(4_000_000) * 0.25,
                             f"{rng.choice(NAMES)} new #{key}", rng.choice(STATUSES),
                             base + dt.timedelta(seconds=rng.randrange(10**7),
                                                 microseconds=rng.randrange(10**6)),
                             attrs, None if rng.random() < 0.3 else f"inserted {key}"))
                    elif kind == "update":
                        done[kind] += cur.execute(
                            "UPDATE bench.items SET amount = amount + 1.25, status = %s, "
                            "updated_at = updated_at + INTERVAL 1 SECOND, note = %s WHERE id = %s",
                            (rng.choice(STATUSES), f"updated {key} — {rng.choice(NAMES)}", key))
                    else:
                        done[kind] += cur.execute("DELETE FROM bench.items WHERE id = %s", (key,))
                conn.commit()
    finally:
        conn.close()
    return done


# --------------------------------------------------------------------------- Airflow

def task_durations(dag_run) -> list[tuple]:
    """``(task_id, state, seconds, start, end, tries)`` of a DAG run's task instances, in the
    order they started."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_run.dag_id,
                                                 TaskInstance.run_id == dag_run.run_id).all()
        out = []
        for ti in tis:
            state = str(getattr(ti.state, "value", ti.state))
            seconds = ti.duration
            if seconds is None and ti.start_date and ti.end_date:
                seconds = (ti.end_date - ti.start_date).total_seconds()
            out.append((ti.task_id, state, seconds, ti.start_date, ti.end_date, ti.try_number))
    far = dt.datetime.max.replace(tzinfo=dt.timezone.utc)
    return sorted(out, key=lambda t: t[3] or far)


def run_timed(load, dag_id: str, conf=None) -> tuple:
    """``(dag run, wall seconds of dag.test(), run state)`` of one run of a freshly parsed DAG."""
    dag = load(dag_id)  # parsing is not timed
    t0 = time.perf_counter()
    dag_run = dag.test(run_conf=conf)
    seconds = time.perf_counter() - t0
    return dag_run, seconds, str(getattr(dag_run.state, "value", dag_run.state))


def describe_run(say, label: str, dag_run, seconds: float) -> list[tuple]:
    tasks = task_durations(dag_run)
    run_seconds = None
    if dag_run.start_date and dag_run.end_date:
        run_seconds = (dag_run.end_date - dag_run.start_date).total_seconds()
    in_tasks = sum(t[2] or 0.0 for t in tasks)
    say(f"{label}: {seconds:.2f}s (dag.test() wall time"
        + (f"; DAG run start to end {run_seconds:.2f}s" if run_seconds is not None else "") + ")")
    for task_id, state, secs, _, _, tries in tasks:
        say(f"    {task_id:<18} {state:<9} " + (f"{secs:8.2f}s" if secs is not None else "       -")
            + (f"  ({tries} tries)" if tries and tries > 1 else ""))
    say(f"    {'(outside tasks)':<18} {'':<9} {seconds - in_tasks:8.2f}s")
    return tasks


# --------------------------------------------------------------------------- comparison

def table_state(rows) -> tuple[int, str, dict]:
    """Row count, SHA-256 of the sorted rows and the rows by key."""
    rows = [tuple(r) for r in rows]
    digest = hashlib.sha256()
    for text in sorted(repr(r) for r in rows):
        digest.update(text.encode())
        digest.update(b"\n")
    return len(rows), digest.hexdigest(), {r[0]: r for r in rows}


def compare(spark, server, iceberg_table: str) -> tuple:
    schema, _, table = TABLE.partition(".")
    cols = qs.table_columns(server, schema, table)
    select = ", ".join(f"`{c}`" for c in cols)
    source = table_state(server.query(f"SELECT {select} FROM `{schema}`.`{table}`"))
    spark.sql(f"REFRESH TABLE {iceberg_table}")
    lake = table_state(spark.sql(f"SELECT {select} FROM {iceberg_table}").collect())
    differ = [(k, source[2].get(k), lake[2].get(k)) for k in set(source[2]) | set(lake[2])
              if source[2].get(k) != lake[2].get(k)]
    return source[:2], lake[:2], sorted(differ, key=repr)


# --------------------------------------------------------------------------- main

class SetupError(Exception):
    pass


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="initial rows (default 100000)")
    ap.add_argument("--changes", type=int, default=10_000, help="row changes loaded by the timed "
                                                                "run (default 10000)")
    ap.add_argument("--txn-size", type=int, default=50, help="statements per transaction (default 50)")
    ap.add_argument("--poke-interval", type=float, default=1.0, help="sensor poke interval, seconds")
    ap.add_argument("--sensor-timeout", type=float, default=5.0,
                    help="seconds the sensor waits for new data (default 5)")
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--keep", metavar="DIR", help="use DIR as the work directory (empty, or an "
                                                  "earlier quickstart's) and keep it")
    args = ap.parse_args(argv)
    if min(args.rows, args.changes, args.txn_size) < 1 or args.sensor_timeout <= 0 \
            or args.poke_interval <= 0:
        ap.error("--rows, --changes, --txn-size, --poke-interval and --sensor-timeout must be positive")
    if args.changes * 7 // 10 + 1 > args.rows:
        ap.error("--rows must exceed the updates and deletes (70 % of --changes)")
    if "airflow" in sys.modules:
        print("Airflow is imported already: run the benchmark in a new process", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)

    t_start = time.perf_counter()
    if args.keep:
        workdir = pathlib.Path(args.keep).resolve()
    else:
        workdir = pathlib.Path(tempfile.mkdtemp(prefix="dag-bench-"))
    try:
        try:
            qs.prepare_workdir(workdir)
        except qs.QuickstartError as exc:
            print(f"cannot use {workdir}: {exc}", file=sys.stderr)
            return 2
        log_path = workdir / "dag_bench.log"
        log_path.unlink(missing_ok=True)  # from an earlier run in the same --keep directory
        return run(args, workdir, log_path, t_start)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def private_environment(workdir: pathlib.Path) -> Optional[tuple[pathlib.Path, ...]]:
    """This process's environment made the quickstart's isolated one for ``workdir``, with the
    Airflow home's dags folder, the staging, warehouse and checkpoint directories and JAVA_HOME;
    ``(home, staging, warehouse, checkpoints)``, or None (said on stderr) when the local Spark
    runtime is not ready."""
    env = qs.isolated_environment(workdir)
    os.environ.clear()
    os.environ.update(env)
    home = pathlib.Path(env["AIRFLOW_HOME"])
    (home / "dags").mkdir(parents=True)
    staging, warehouse, checkpoints = (workdir / n for n in ("staging", "warehouse", "checkpoints"))
    for path in (staging, warehouse, checkpoints):
        path.mkdir()
    from airflow_provider_binlog.spark import SparkRuntimeError, find_java17_home, iceberg_runtime_jars

    try:
        os.environ["JAVA_HOME"] = find_java17_home()
        iceberg_runtime_jars()
    except SparkRuntimeError as exc:
        print(f"the local Spark runtime is not ready: {exc}", file=sys.stderr)
        return None
    # the package's byte code, as pip writes it when it installs the package: a task's own
    # processes (the merge job) import the package on every run, which PYTHONDONTWRITEBYTECODE
    # would otherwise make them compile each time
    import compileall

    compileall.compile_dir(str(ROOT / "airflow_provider_binlog"), quiet=1)
    return home, staging, warehouse, checkpoints


def reporters(console, log_path: pathlib.Path) -> tuple[Callable[..., None], Callable[[int, str], int]]:
    """``say(text)``, a line on the console, and ``fail(status, text)``, which says the error
    (status 2: setup) or failure with the last lines of the log and returns ``status``."""
    def say(text: str = "") -> None:
        console.write(text + "\n")
        console.flush()

    def fail(status: int, text: str) -> int:
        say(f"{'error' if status == 2 else 'FAILED'}: {text}\n--- last lines of {log_path} ---\n"
            f"{qs._tail(log_path, 30)}")
        return status

    return say, fail


def run(args, workdir: pathlib.Path, log_path: pathlib.Path, t_start: float) -> int:
    dirs = private_environment(workdir)
    if dirs is None:
        return 2
    home, staging, warehouse, checkpoints = dirs
    java_home = os.environ["JAVA_HOME"]

    from airflow_provider_binlog.local.mariadb import MariaDBServer

    print(f"work directory {workdir} (Airflow, Spark and server output: {log_path})", flush=True)
    server = spark = None
    with qs.redirected_output(log_path) as console:
        say, fail = reporters(console, log_path)

        try:
            try:
                server = MariaDBServer(SERVER_OPTIONS)
            except Exception as exc:
                return fail(2, f"cannot start MariaDB: {exc}")
            say(f"MariaDB {server.version} on 127.0.0.1:{server.port} "
                f"(started in {server.startup_seconds:.1f}s)")
            t0 = time.perf_counter()
            for statement in CREATE:
                server.execute(statement)
            server.execute(initial_load_sql(args.rows))
            say(f"{TABLE}: {args.rows:,} rows loaded in {time.perf_counter() - t0:.1f}s")

            os.environ.update(qs.connection_environment(server, checkpoints, REPLICA_SERVER_ID))
            t0 = time.perf_counter()
            try:
                qs.migrate_metadata_db(dict(os.environ), log_path)
            except qs.QuickstartError as exc:
                return fail(2, str(exc))
            dag_file = home / "dags" / "binlog_bench.py"
            dag_file.write_text(DAG_FILE.format(
                source_id=SOURCE_ID, conn_id=qs.CONN_ID, table=TABLE, staging=str(staging),
                namespace=NAMESPACE, catalog=qs.CATALOG, spark_conn_id=qs.SPARK_CONN_ID,
                warehouse=str(warehouse), poke_interval=args.poke_interval,
                sensor_timeout=args.sensor_timeout))

            from airflow_provider_binlog.checkpoints import FileCheckpointStore
            from airflow_provider_binlog.dags import backfill_dag_id, incremental_dag_id
            from airflow_provider_binlog.common.tables import iceberg_table_name

            def load(dag_id):
                # parsed afresh for every run, as a worker does
                return qs.load_dags(dag_file)[dag_id]

            incremental, backfill = incremental_dag_id(SOURCE_ID), backfill_dag_id(SOURCE_ID)
            load(incremental)
            say(f"Airflow metadata DB migrated in {time.perf_counter() - t0:.0f}s; DAG file {dag_file}")

            dag_run, seconds, state = run_timed(load, backfill, {"mode": "snapshot"})
            if state != "success":
                return fail(2, f"the initial snapshot ({backfill}) ended {state}: "
                               f"{qs.task_states(dag_run)}")
            describe_run(say, "initial snapshot (backfill, mode snapshot; not part of the benchmark)",
                         dag_run, seconds)

            t0 = time.perf_counter()
            made = make_changes(server, random.Random(args.seed), args.rows, args.changes,
                                args.txn_size)
            say(f"changes: {sum(made.values()):,} rows ({made['insert']:,} inserted, "
                f"{made['update']:,} updated, {made['delete']:,} deleted) in transactions of "
                f"{args.txn_size} statements, made in {time.perf_counter() - t0:.1f}s")

            say()
            dag_run, t_changes, state = run_timed(load, incremental)
            tasks = describe_run(say, f"incremental run, {sum(made.values()):,} row changes",
                                 dag_run, t_changes)
            states = {t[0]: t[1] for t in tasks}
            if state != "success" or any(states.get(t) != "success"
                                         for t in ("wait_for_changes", "dump", "merge")):
                return fail(1, f"the incremental run ended {state}: {states}")
            results = qs.run_results(dag_run)
            dumped = {"insert": 0, "update": 0, "delete": 0}
            for counts in (results.get("dump") or {}).get("rows", {}).values():
                for k in dumped:
                    dumped[k] += counts.get(k, 0)
            merged = ((results.get("merge") or {}).get("tables") or {}).get(TABLE, {})
            merged = {"insert": merged.get("inserted", 0), "update": merged.get("updated", 0),
                      "delete": merged.get("deleted", 0)}
            say(f"    dump staged {dumped}; merge applied {merged}")

            store = FileCheckpointStore(checkpoints)
            checkpoint = store.load(SOURCE_ID)
            dag_run, t_idle, state = run_timed(load, incremental)
            describe_run(say, f"incremental run, no changes (sensor timeout {args.sensor_timeout:g}s)",
                         dag_run, t_idle)
            idle_states = qs.task_states(dag_run)
            idle_ok = state == "success" and set(idle_states.values()) == {"skipped"} \
                and store.load(SOURCE_ID) == checkpoint

            import logging

            from airflow_provider_binlog.spark import local_spark_session
            logging.getLogger("py4j").setLevel(logging.WARNING)
            t0 = time.perf_counter()
            spark = local_spark_session(str(warehouse), qs.CATALOG, app_name="dag-bench-verify",
                                        java_home=java_home)
            name = f"{qs.CATALOG}.{NAMESPACE}.{iceberg_table_name(*TABLE.split('.'))}"
            (n_src, sum_src), (n_lake, sum_lake), differ = compare(spark, server, name)
            say()
            say(f"verified in {time.perf_counter() - t0:.0f}s: {TABLE} {n_src:,} rows, checksum "
                f"{sum_src[:16]}; {name} {n_lake:,} rows, checksum {sum_lake[:16]}; "
                + ("equal" if not differ and sum_src == sum_lake else f"{len(differ)} rows differ"))

            say(f"changes: {sum(made.values()):,} (rows {args.rows:,}, transactions of "
                f"{args.txn_size})")
            say(f"incremental run with changes: {t_changes:7.2f}s")
            say(f"incremental run, no changes:  {t_idle:7.2f}s  (sensor timeout {args.sensor_timeout:g}s, "
                f"poke interval {args.poke_interval:g}s)")
            say(f"total {time.perf_counter() - t_start:.0f}s")
            status = 0
            if differ or sum_src != sum_lake or n_src != n_lake:
                for key, theirs, ours in differ[:10]:
                    say(f"    id={key}: MariaDB {theirs} != Iceberg {ours}")
                status = fail(1, "the Iceberg table differs from the MariaDB table")
            if dumped != made or merged != made:
                status = fail(1, f"changes made {made}, dump staged {dumped}, merge applied {merged}")
            if not idle_ok:
                status = fail(1, f"the run without changes ended {state} with tasks {idle_states}, "
                                 f"checkpoint {checkpoint} -> {store.load(SOURCE_ID)}")
            return status
        except Exception as exc:
            import traceback
            traceback.print_exc()
            return fail(2, f"{type(exc).__name__}: {exc}")
        finally:
            qs.shut_down(spark, server)


if __name__ == "__main__":
    sys.exit(main())
