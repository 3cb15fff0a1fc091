"""One source of a thousand tables: parsing its DAG file, its initial snapshot within the
connection budget, and an incremental batch touching some of its tables against one table.

Run from the repository root::

    .venv/bin/python benchmarks/thousand_tables_bench.py [--tables 1000] [--touched 200]
        [--rows 1000] [--updates 100] [--read-connections 4] [--parse-repeats 5]
        [--skip parse,load] [--keep DIR]

Setup (untimed), as ``benchmarks/many_tables_bench.py`` does it: a private Airflow (SQLite), a
private MariaDB, the connections, staging and an Iceberg warehouse on disk, ``--tables`` tables
``many.t0001`` ... of ``--rows`` rows (an INT key, an INT, a DECIMAL and a VARCHAR), and a DAG
file making the DAGs with :func:`airflow_provider_binlog.dags.make_cdc_dags` for ``many.*``
(``snapshot_read_connections`` ``--read-connections``, the ``spark`` connection ``local[2]``,
the merge engine ``auto``).

Measured, in this order:

1. DAG parsing, each file ``--parse-repeats`` times in a fresh interpreter (interleaved, medians;
   ``benchmarks/_dag_parse.py``): the DAG file for ``many.*``, the same with the thousand
   tables named one by one (an asset per table), and the floor: a file of two DAGs of
   ``EmptyOperator`` tasks, as many per DAG as the factory's two DAGs have. Each figure is the
   file's parse as the DAG processor's ``DagBag`` records it, plus the DAGs' serialization.
2. The initial snapshot: one run of the backfill DAG in mode ``snapshot`` over every table
   (snapshot task, then the merge creating and loading every Iceberg table), with the source
   user's connections sampled every 20 ms from ``information_schema.PROCESSLIST``
   (``benchmarks/_processlist.py``). Printed: the tasks' seconds, and the peak of the user's
   connections: the replication stream (``Binlog Dump``) apart from the sessions, which are the
   snapshot's own session plus its reads; the reads' peak (sessions less one) must be at most
   ``--read-connections``. The peer: ``mariadb-dump --single-transaction`` of the database to a
   file, in the same run.
3. Incremental runs (sensor, dump, merge): ``--updates`` rows of the first table updated, one
   run; then of each of the first ``--touched`` tables (one transaction per table), one run.
   Printed: the merge tasks' seconds and their ratio (target: at most 3x).

Afterwards the touched tables are compared row by row with MariaDB, and every table's row
count. Exit status 1 when a run fails, a target is missed or a table differs; 2 when the
setup fails.
"""
from __future__ import annotations

import argparse
import os
import pathlib
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

from airflow_provider_binlog.local import quickstart as qs  # noqa: E402
from _dag_parse import floor_file, median_parses  # noqa: E402
from _processlist import ConnectionSampler, wait_for_no_connections  # noqa: E402
from dag_bench import describe_run, private_environment, reporters, run_timed, task_durations  # noqa: E402
from many_tables_bench import (  # noqa: E402
    NAMESPACE, REPLICA_SERVER_ID, SERVER_OPTIONS, SOURCE_ID, create_tables, differing_tables, table_name,
    update_tables, verifier,
)

DAG_FILE = '''"""The CDC DAGs of a source of many tables (airflow_provider_binlog.dags.make_cdc_dags)."""
from airflow_provider_binlog.dags import make_cdc_dags

binlog_cdc, binlog_backfill = make_cdc_dags(
    {source_id!r},
    binlog_conn_id={conn_id!r},
    tables={tables},
    staging_dir={staging!r},
    namespace={namespace!r},
    catalog={catalog!r},
    spark_conn_id={spark_conn_id!r},
    warehouse={warehouse!r},
    schedule=None,
    poke_interval=1.0,
    sensor_timeout=30.0,
    sensor_mode="poke",
    snapshot_read_connections={read_connections!r},
)
'''

TARGET_MERGE_RATIO = 3.0


def write_dag_file(path: pathlib.Path, tables: str, read_connections: int, staging, warehouse) -> pathlib.Path:
    path.write_text(DAG_FILE.format(
        source_id=SOURCE_ID, conn_id=qs.CONN_ID, tables=tables, staging=str(staging), namespace=NAMESPACE,
        catalog=qs.CATALOG, spark_conn_id=qs.SPARK_CONN_ID, warehouse=str(warehouse),
        read_connections=read_connections))
    return path


def measure_parsing(say, dag_file: pathlib.Path, count: int, args, staging, warehouse, workdir) -> None:
    """Step 1: the DAG file, the same naming every table, and the floor, parsed."""
    parse_dir = workdir / "parse"
    parse_dir.mkdir(exist_ok=True)
    named = write_dag_file(parse_dir / "binlog_many_named.py",
                           repr([f"many.{table_name(i)}" for i in range(1, count + 1)]),
                           args.read_connections, staging, warehouse)
    pattern = parse_dir / "binlog_many.py"
    shutil.copy(dag_file, pattern)
    shape = median_parses({"pattern": pattern}, os.environ, 1)["pattern"]["tasks"]
    floor = floor_file(parse_dir / "floor_empty.py", shape)
    parsed = median_parses({"pattern": pattern, "named": named, "floor": floor}, os.environ, args.parse_repeats)
    floor_total = parsed["floor"]["file_seconds"] + parsed["floor"]["serialize_seconds"]
    say()
    say(f"DAG parsing (median of {args.parse_repeats}, each in a new interpreter; tasks per DAG {shape}):")
    for name, label in (("pattern", "make_cdc_dags, tables ['many.*']"),
                        ("named", f"make_cdc_dags, the {count} tables named"),
                        ("floor", "floor: EmptyOperator DAGs of the same tasks")):
        p = parsed[name]
        total = p["file_seconds"] + p["serialize_seconds"]
        say(f"    {label:<48} parse {p['file_seconds']:6.3f}s  serialize {p['serialize_seconds']:6.3f}s  "
            f"total {total:6.3f}s  {total / floor_total:5.2f}x floor")


def dump_peer(server, workdir: pathlib.Path) -> float:
    """Seconds of ``mariadb-dump --single-transaction many`` to a file."""
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump is None:
        raise RuntimeError("mariadb-dump not found (Debian package mariadb-client)")
    t0 = time.perf_counter()
    subprocess.run([dump, "-h", server.host, "-P", str(server.port), "-u", server.user, f"-p{server.password}",
                    "--single-transaction", "--skip-lock-tables", "many", f"--result-file={workdir / 'many.sql'}"],
                   check=True, capture_output=True)
    seconds = time.perf_counter() - t0
    (workdir / "many.sql").unlink()
    return seconds


def measure_snapshot(say, fail, load, server, count: int, args, workdir) -> int:
    """Step 2: the initial snapshot of every table, the connections sampled."""
    from airflow_provider_binlog.dags import backfill_dag_id

    peer = dump_peer(server, workdir)
    wait_for_no_connections(server, server.repl_user)
    with ConnectionSampler(server, server.repl_user) as sampled:
        dag_run, seconds, state = run_timed(load, backfill_dag_id(SOURCE_ID), {"mode": "snapshot"})
    tasks = describe_run(say, f"initial snapshot of {count} tables", dag_run, seconds)
    if state != "success":
        return fail(2, f"the initial snapshot ended {state}: {qs.task_states(dag_run)}")
    by_task = {t[0]: t[2] or 0.0 for t in tasks}
    reads = sampled.peak_sessions - 1  # the snapshot's own session holds the watermarks
    say()
    say(f"initial snapshot of {count} tables of {args.rows:,} rows (snapshot_read_connections "
        f"{args.read_connections}):")
    say(f"    snapshot task {by_task.get('snapshot', 0):7.2f}s   merge task {by_task.get('merge', 0):7.2f}s   "
        f"run {seconds:7.2f}s")
    say(f"    mariadb-dump --single-transaction of the database: {peer:.2f}s "
        f"(snapshot task {by_task.get('snapshot', 0) / peer:.2f}x)")
    say(f"    connections of {server.repl_user!r}, peak over {sampled.samples} samples: {sampled.peak} "
        f"({sampled.peak_streams} replication stream, {sampled.peak_sessions} sessions: the snapshot's own "
        f"and {reads} reads)")
    for row in sampled.peak_rows:
        say(f"        at the peak: id {row[0]} {row[1]} {row[2]} ms {row[3] or ''} {row[4] or ''}")
    within = reads <= args.read_connections
    say(f"target reads <= budget {args.read_connections}: {reads} {'met' if within else 'NOT met'}")
    return 0 if within else 1


def measure_incremental(say, fail, load, server, args) -> int:
    """Step 3: one table, then ``--touched`` tables, each one incremental run."""
    from airflow_provider_binlog.dags import incremental_dag_id

    merge_seconds: dict[int, float] = {}
    for round_no, n in enumerate((1, args.touched), 1):
        update_tables(server, n, args.updates, round_no)
        dag_run, seconds, state = run_timed(load, incremental_dag_id(SOURCE_ID))
        tasks = describe_run(say, f"incremental run, {n} table(s) x {args.updates} updated rows", dag_run, seconds)
        states = {t[0]: t[1] for t in tasks}
        if state != "success" or states.get("merge") != "success":
            return fail(1, f"the incremental run for N={n} ended {state}: {states}")
        merged = qs.run_results(dag_run).get("merge") or {}
        if merged.get("updated") != n * args.updates:
            return fail(1, f"N={n}: the merge applied {merged.get('updated')} updates, not {n * args.updates}")
        merge_seconds[n] = next(t[2] for t in task_durations(dag_run) if t[0] == "merge")
        say(f"    engine {merged.get('engine')}")
    ratio = merge_seconds[args.touched] / merge_seconds[1]
    say()
    say(f"merge task, one incremental run: N=1 {merge_seconds[1]:.2f}s, N={args.touched} "
        f"{merge_seconds[args.touched]:.2f}s: {ratio:.2f}x N=1")
    met = ratio <= TARGET_MERGE_RATIO
    say(f"target N={args.touched} <= {TARGET_MERGE_RATIO:g}x N=1: {ratio:.2f}x {'met' if met else 'NOT met'}")
    return 0 if met else 1


def verify(say, server, warehouse, count: int, touched: int):
    """The touched tables row by row, every table's row count; the names of those that differ,
    and the Spark session."""
    spark = verifier(warehouse)
    differ = differing_tables(spark, server, touched)
    for i in range(touched + 1, count + 1):
        name = f"{qs.CATALOG}.{NAMESPACE}.many__{table_name(i)}"
        source = server.query(f"SELECT COUNT(*) FROM many.{table_name(i)}")[0][0]
        if spark.sql(f"SELECT COUNT(*) FROM {name}").collect()[0][0] != source:
            differ.append(name)
    say(f"verified {count} tables ({touched} row by row, the others' row counts): "
        + ("all equal" if not differ else f"{len(differ)} differ"))
    return differ, spark


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=1000, help="tables of the source (default 1000)")
    ap.add_argument("--touched", type=int, default=200, help="tables the incremental batch touches (default 200)")
    ap.add_argument("--rows", type=int, default=1000, help="rows per table (default 1000)")
    ap.add_argument("--updates", type=int, default=100, help="rows updated per touched table (default 100)")
    ap.add_argument("--read-connections", type=int, default=4, help="snapshot_read_connections (default 4)")
    ap.add_argument("--parse-repeats", type=int, default=5, help="parses of each DAG file (default 5)")
    ap.add_argument("--skip", default="", help="steps to leave out, comma-separated: 'parse' (the DAG "
                                               "parsing), 'load' (the snapshot and the incremental runs)")
    ap.add_argument("--keep", metavar="DIR", help="use DIR as the work directory and keep it")
    args = ap.parse_args(argv)
    if not 1 <= args.touched <= args.tables or args.rows < 1 or not 1 <= args.updates <= args.rows \
            or args.read_connections < 1 or args.parse_repeats < 1:
        ap.error("--touched between 1 and --tables, --updates between 1 and --rows, the others positive")
    if "airflow" in sys.modules:
        print("Airflow is imported already: run the benchmark in a new process", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    workdir = pathlib.Path(args.keep).resolve() if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="k-tables-"))
    try:
        try:
            qs.prepare_workdir(workdir)
        except qs.QuickstartError as exc:
            print(f"cannot use {workdir}: {exc}", file=sys.stderr)
            return 2
        log_path = workdir / "thousand_tables_bench.log"
        log_path.unlink(missing_ok=True)
        return run(args, workdir, log_path)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args, workdir: pathlib.Path, log_path: pathlib.Path) -> int:
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
            server = MariaDBServer({**SERVER_OPTIONS, "max_connections": "400"})
            t0 = time.perf_counter()
            if "load" not in args.skip:
                create_tables(server, args.tables, args.rows)
                say(f"MariaDB {server.version}: {args.tables} tables of {args.rows:,} rows created in "
                    f"{time.perf_counter() - t0:.0f}s; 2 cores shared with other work")
            os.environ.update(qs.connection_environment(server, checkpoints, REPLICA_SERVER_ID))
            qs.migrate_metadata_db(dict(os.environ), log_path)
            dag_file = write_dag_file(home / "dags" / "binlog_many.py", repr(["many.*"]), args.read_connections,
                                      staging, warehouse)
            if "parse" not in args.skip:
                measure_parsing(say, dag_file, args.tables, args, staging, warehouse, workdir)
            if "load" in args.skip:
                return 0

            def load(dag_id):
                return qs.load_dags(dag_file)[dag_id]

            status = measure_snapshot(say, fail, load, server, args.tables, args, workdir)
            if status > 1:
                return status
            status = max(status, measure_incremental(say, fail, load, server, args))
            differ, spark = verify(say, server, warehouse, args.tables, args.touched)
            return fail(1, f"tables differ: {differ[:10]}") if differ else status
        except Exception as exc:
            import traceback
            traceback.print_exc()
            return fail(2, f"{type(exc).__name__}: {exc}")
        finally:
            qs.shut_down(spark, server)


if __name__ == "__main__":
    sys.exit(main())
