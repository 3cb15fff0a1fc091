"""``python -m airflow_provider_binlog quickstart``: the whole load, end to end, on one machine.

It starts a private MariaDB (:class:`~airflow_provider_binlog.local.mariadb.MariaDBServer`),
creates a small ``shop`` schema with sample rows, and runs the example DAGs
(``dags/binlog_cdc.py`` of the source checkout, or :mod:`.quickstart_dag` of the installed
package; made by :func:`airflow_provider_binlog.dags.make_cdc_dags`) with
``dag.test()`` on an SQLite metadata database: the backfill DAG in mode ``snapshot``, then
rounds of random changes each followed by a run of the incremental DAG. The merges go into an
Iceberg warehouse on disk, with the Spark connection's ``local[2]`` master: on Iceberg's Java API
first, and through ``spark-submit`` with a local Spark for a batch that needs Spark. At the end
it reads the Iceberg tables with Spark and compares them, row by row and column by column, with
the MariaDB tables.

Everything lives under the work directory (``.work/quickstart`` by default): ``airflow/``
(AIRFLOW_HOME: ``airflow.db``, the DAG file, task logs), ``staging/``, ``warehouse/``,
``checkpoints/`` and ``quickstart.log`` (the Airflow, Spark and server output). A rerun
starts afresh. Airflow settings of the calling environment are not used.

This module imports Airflow only once the environment is set up: call :func:`run` in a
process that has not imported Airflow yet.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Iterator, Optional, TextIO

from ..errors import ProviderError
from ..codec.gtid import Flavor
from . import pyiceberg_check

SOURCE_ID = "shop"
CONN_ID = "mysql_binlog_default"
SPARK_CONN_ID = "spark_default"
CATALOG = "lake"
NAMESPACE = f"{SOURCE_ID}_cdc"
TABLES = ("shop.customers", "shop.orders")
MARKER = ".binlog-quickstart"
MANAGED = ("airflow", "staging", "warehouse", "checkpoints", "quickstart.log")
REPLICA_SERVER_ID = 64001
DEFAULT_WORKDIR = Path(".work") / "quickstart"

SCHEMA = (
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers ("
    " id INT AUTO_INCREMENT PRIMARY KEY,"
    " name VARCHAR(80) NOT NULL,"
    " email VARCHAR(120),"
    " tier ENUM('bronze','silver','gold') NOT NULL DEFAULT 'bronze',"
    " balance DECIMAL(12,2) NOT NULL DEFAULT 0,"
    " signed_up DATETIME(3) NOT NULL,"
    " profile JSON"
    ") DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE shop.orders ("
    " id BIGINT AUTO_INCREMENT PRIMARY KEY,"
    " customer_id INT NOT NULL,"
    " status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',"
    " total DECIMAL(10,2) NOT NULL,"
    " placed_at DATETIME(6) NOT NULL,"
    " items JSON"
    ") DEFAULT CHARSET=utf8mb4",
)
NAMES = ("Ada", "Grace", "Linus", "Margaret", "Dennis", "Barbara", "Ken", "Frances", "José", "Zoë",
         "Björn", "Ngozi", "Hiroshi", "Ana María")
PRODUCTS = ("kettle", "teapot", "mug", "grinder", "filter", "scale", "tin")


class QuickstartError(ProviderError):
    """A step of the quickstart failed; the message says which and why."""


# ----------------------------------------------------------------------------- sample data

def _customer(rng: random.Random) -> tuple:
    name = f"{rng.choice(NAMES)} {rng.choice('ABCDEFGHKLMNPRSTW')}."
    email = None if rng.random() < 0.1 else f"{name.split()[0].lower()}{rng.randint(1, 9999)}@example.com"
    signed_up = dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 86400 * 365),
                                                      milliseconds=rng.randint(0, 999))
    profile = json.dumps({"newsletter": rng.random() < 0.5, "tags": rng.sample(PRODUCTS, 2)})
    return (name, email, rng.choice(("bronze", "silver", "gold")),
            Decimal(rng.randint(0, 500_000)) / 100, signed_up, profile)


def _order(rng: random.Random, customer_ids: list) -> tuple:
    items = [{"sku": rng.choice(PRODUCTS), "qty": rng.randint(1, 4)} for _ in range(rng.randint(1, 3))]
    placed_at = dt.datetime(2024, 6, 1) + dt.timedelta(seconds=rng.randint(0, 86400 * 180),
                                                      microseconds=rng.randint(0, 999_999))
    return (rng.choice(customer_ids), rng.choice(("new", "paid", "shipped")),
            Decimal(rng.randint(100, 99_999)) / 100, placed_at, json.dumps(items))


def _insert_customers(cur, rng: random.Random, n: int) -> None:
    cur.executemany("INSERT INTO shop.customers (name, email, tier, balance, signed_up, profile) "
                    "VALUES (%s, %s, %s, %s, %s, %s)", [_customer(rng) for _ in range(n)])


def _insert_orders(cur, rng: random.Random, n: int) -> None:
    cur.execute("SELECT id FROM shop.customers")
    ids = [r[0] for r in cur.fetchall()]
    if ids:
        cur.executemany("INSERT INTO shop.orders (customer_id, status, total, placed_at, items) "
                        "VALUES (%s, %s, %s, %s, %s)", [_order(rng, ids) for _ in range(n)])


def load_sample_data(server, rows: int, rng: random.Random) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for statement in SCHEMA:
                cur.execute(statement)
            _insert_customers(cur, rng, rows)
            _insert_orders(cur, rng, rows * 2)
    finally:
        conn.close()


def apply_changes(server, rng: random.Random, n: int) -> None:
    """Random inserts, updates and deletes on both tables, some in multi-statement
    transactions."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for _ in range(n):
                cur.execute("SELECT id FROM shop.customers")
                customers = [r[0] for r in cur.fetchall()]
                cur.execute("SELECT id FROM shop.orders")
                orders = [r[0] for r in cur.fetchall()]
                op = rng.random()
                if op < 0.2 or not customers:
                    _insert_customers(cur, rng, rng.randint(1, 3))
                elif op < 0.45:
                    _insert_orders(cur, rng, rng.randint(1, 4))
                elif op < 0.6:
                    cur.execute("UPDATE shop.customers SET balance = balance + %s, tier = %s, "
                                "profile = JSON_SET(COALESCE(profile, '{}'), '$.visits', %s) WHERE id = %s",
                                (Decimal(rng.randint(-5000, 5000)) / 100, rng.choice(("bronze", "silver", "gold")),
                                 rng.randint(1, 99), rng.choice(customers)))
                elif op < 0.8 and orders:
                    cur.execute("UPDATE shop.orders SET status = %s, total = total + 1 WHERE id = %s",
                                (rng.choice(("paid", "shipped", "cancelled")), rng.choice(orders)))
                elif op < 0.9 and orders:
                    cur.execute("DELETE FROM shop.orders WHERE id = %s", (rng.choice(orders),))
                else:
                    # a transaction over both tables: a customer leaves with their orders
                    victim = rng.choice(customers)
                    cur.execute("BEGIN")
                    cur.execute("DELETE FROM shop.orders WHERE customer_id = %s", (victim,))
                    cur.execute("DELETE FROM shop.customers WHERE id = %s", (victim,))
                    cur.execute("COMMIT")
    finally:
        conn.close()


# ----------------------------------------------------------------------------- environment

def prepare_workdir(workdir: Path) -> None:
    """Create the work directory, or clear what an earlier quickstart left in it. Refuses a
    non-empty directory that is not a quickstart's."""
    if workdir.exists():
        if not workdir.is_dir():
            raise QuickstartError(f"{workdir} is not a directory")
        if any(workdir.iterdir()) and not (workdir / MARKER).exists():
            raise QuickstartError(f"{workdir} is not empty and was not made by the quickstart: "
                                  "give another --workdir")
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / MARKER).write_text("made by python -m airflow_provider_binlog quickstart\n")
    for name in MANAGED:
        path = workdir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def isolated_environment(workdir: Path) -> dict:
    """Environment variables for a private Airflow under ``workdir`` (the caller's Airflow
    settings, connections and ``BINLOG_*`` variables are dropped)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_", "BINLOG_"))}
    home = workdir / "airflow"
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
    })
    return env


#: The DAG file of the installed package (see :func:`dag_file_source`).
PACKAGED_DAG_FILE = Path(__file__).resolve().parent / "quickstart_dag.py"


def example_dag_file() -> Optional[Path]:
    """``dags/binlog_cdc.py`` of the source checkout, when there is one."""
    path = Path(__file__).resolve().parents[2] / "dags" / "binlog_cdc.py"
    return path if path.is_file() else None


def dag_file_source() -> Path:
    """The DAG file the quickstart copies into its dags folder: the source checkout's example,
    or else :data:`PACKAGED_DAG_FILE`."""
    return example_dag_file() or PACKAGED_DAG_FILE


@contextlib.contextmanager
def redirected_output(log_path: Path) -> Iterator[TextIO]:
    """Send everything written to file descriptors 1 and 2 (Airflow's and Spark's logs, child
    processes) to ``log_path``; yield a stream on the original standard output."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    console = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    try:
        yield console
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
        os.close(saved_out)
        os.close(saved_err)
        console.flush()
        console.close()


def connection_environment(server, checkpoints: Path, server_id: int) -> dict[str, str]:
    """The ``AIRFLOW_CONN_*`` variables of the binlog connection to the private ``server``
    (replica ``server_id``, the file checkpoint store in ``checkpoints``) and of the Spark
    connection (``local[2]``)."""
    return {
        f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps({
            "conn_type": "mysql_binlog", "host": server.host, "port": server.port,
            "login": server.repl_user, "password": server.repl_password,
            "extra": {"server_id": server_id, "flavor": Flavor.MARIADB, "checkpoint_store_uri": str(checkpoints)}}),
        f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}": json.dumps({"conn_type": "spark", "host": "local[2]"}),
    }


def shut_down(spark, server) -> None:
    """Stop the local Spark session and the private server, whichever were started."""
    if spark is not None:
        try:
            spark.stop()
        except Exception:  # a session that failed half-way: the server is what must stop
            pass
    if server is not None:
        server.stop()


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# ----------------------------------------------------------------------------- Airflow

def migrate_metadata_db(env: dict, log_path: Path) -> None:
    with open(log_path, "ab") as log:
        done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env,
                              stdout=log, stderr=subprocess.STDOUT, timeout=600)
    if done.returncode != 0:
        raise QuickstartError(f"airflow db migrate failed (exit {done.returncode}); see {log_path}")


def load_dags(dag_file: Path) -> dict:
    """The DAGs a DAG file defines, by id."""
    import importlib.util

    from airflow.sdk import DAG

    spec = importlib.util.spec_from_file_location(f"binlog_quickstart_{dag_file.stem}", dag_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {v.dag_id: v for v in vars(module).values() if isinstance(v, DAG)}


def run_results(dag_run) -> dict:
    """The XCom return values of a DAG run's tasks, by task id."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id,
                                                  key="return_value")).all()
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}


def task_states(dag_run) -> dict:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_run.dag_id,
                                                 TaskInstance.run_id == dag_run.run_id).all()
        return {ti.task_id: (str(ti.state.value) if hasattr(ti.state, "value") else str(ti.state))
                for ti in tis}


def asset_events(dag_run) -> list[dict]:
    """The asset events a DAG run emitted: ``{"uri", "extra"}``."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    with create_session() as session:
        events = session.query(AssetEvent).filter(AssetEvent.source_dag_id == dag_run.dag_id,
                                                  AssetEvent.source_run_id == dag_run.run_id).all()
        return [{"uri": e.asset.uri, "extra": dict(e.extra or {})} for e in events]


def run_dag(dag, run_conf: Optional[dict] = None):
    """One ``dag.test()`` run; raises :class:`QuickstartError` unless it succeeded."""
    dag_run = dag.test(run_conf=run_conf)
    state = str(getattr(dag_run.state, "value", dag_run.state))
    if state != "success":
        raise QuickstartError(f"{dag.dag_id} run {dag_run.run_id} ended {state}; tasks: "
                              f"{task_states(dag_run)}")
    return dag_run


# ----------------------------------------------------------------------------- comparison

def table_columns(server, schema: str, table: str) -> list[str]:
    return [r[0] for r in server.query(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "ORDER BY ORDINAL_POSITION", (schema, table))]


def source_rows(server, source: str) -> tuple[list[str], dict]:
    """The columns of table ``source`` and its rows by key (the first column)."""
    schema, _, table = source.partition(".")
    cols = table_columns(server, schema, table)
    select = ", ".join(f"`{c}`" for c in cols)
    return cols, {row[0]: tuple(row) for row in server.query(f"SELECT {select} FROM `{schema}`.`{table}`")}


def compare_table(spark, source: str, cols: list[str], expected: dict,
                  iceberg_table: str) -> tuple[int, list[str]]:
    """``(Iceberg rows, differences)`` of a table with a primary key, whose source ``cols`` and
    rows by key are ``expected``, as Spark reads it."""
    select = ", ".join(f"`{c}`" for c in cols)
    spark.sql(f"REFRESH TABLE {iceberg_table}")
    got_rows = [tuple(r) for r in spark.sql(f"SELECT {select} FROM {iceberg_table}").collect()]
    return len(got_rows), pyiceberg_check.row_differences(source, expected, got_rows, "Iceberg")


# ----------------------------------------------------------------------------- report

def _checkpoint_text(cp: Optional[dict]) -> str:
    if not cp:
        return "-"
    parts = []
    if cp.get("file"):
        parts.append(f"{cp['file']}:{cp.get('pos')}")
    if cp.get("gtid"):
        parts.append(f"gtid {cp['gtid']}")
    return ", ".join(parts) or json.dumps(cp)


def _report_run(console: TextIO, number: int, label: str, dag_run, seconds: float) -> dict:
    results = run_results(dag_run)
    merge = results.get("merge") or {}
    console.write(f"run {number}: {label}  ({dag_run.dag_id}, {seconds:.0f} s)\n")
    for source in TABLES:
        info = (merge.get("tables") or {}).get(source) or {}
        console.write(f"    {source:<16} {info.get('inserted', 0):>6} inserted {info.get('updated', 0):>6} updated "
                      f"{info.get('deleted', 0):>6} deleted   -> {info.get('iceberg_table', '-')}\n")
    console.write(f"    end checkpoint: {_checkpoint_text(merge.get('end_checkpoint'))}\n")
    if merge.get("engine"):  # which engine committed: iceberg-java (no Spark application), spark, or both
        console.write(f"    merge engine: {merge['engine']}\n")
    events = asset_events(dag_run)
    if events:
        console.write(f"    asset events: {', '.join(sorted(e['uri'] for e in events))}\n")
    return merge


# long: the quickstart's script, step by step in the order the README tells it
def run(workdir: Path, rows: int, rounds: int, seed: int) -> int:
    workdir = workdir.resolve()
    prepare_workdir(workdir)
    log_path = workdir / "quickstart.log"
    log_path.touch()
    if "airflow" in sys.modules:
        raise QuickstartError("Airflow is already imported in this process: run the quickstart "
                              "in a new process (python -m airflow_provider_binlog quickstart)")
    env = isolated_environment(workdir)
    os.environ.clear()
    os.environ.update(env)
    home = Path(env["AIRFLOW_HOME"])
    (home / "dags").mkdir(parents=True)
    staging, warehouse, checkpoints = (workdir / n for n in ("staging", "warehouse", "checkpoints"))
    for path in (staging, warehouse, checkpoints):
        path.mkdir()

    from ..spark import SparkRuntimeError, find_java17_home, iceberg_runtime_jars
    from .mariadb import MariaDBServer
    from .mariadb_command import mariadb_binaries

    mariadbd, install_db = mariadb_binaries()
    if not (mariadbd and install_db):
        raise QuickstartError("the MariaDB server binaries (mariadbd, mariadb-install-db) are not "
                              "installed: run bash .ci/run (Debian package mariadb-server)")
    try:
        java_home = find_java17_home()
        iceberg_runtime_jars()
    except SparkRuntimeError as exc:
        raise QuickstartError(f"the local Spark runtime is not ready: {exc}") from None
    os.environ["JAVA_HOME"] = java_home

    started = time.monotonic()
    rng = random.Random(seed)
    out = sys.stdout
    out.write(f"airflow-provider-binlog quickstart in {workdir}\n"
              f"  (Airflow, Spark and server output: {log_path})\n")
    out.flush()
    server = None
    spark = None
    with redirected_output(log_path) as console:
        try:
            server = MariaDBServer({"binlog_row_metadata": "FULL", "binlog_row_image": "FULL",
                                    "binlog_checksum": "CRC32"})
            console.write(f"MariaDB {server.version} (private server) on 127.0.0.1:{server.port}\n")
            load_sample_data(server, rows, rng)
            counts = {t: server.query(f"SELECT COUNT(*) FROM {t}")[0][0] for t in TABLES}
            console.write("sample data: " + ", ".join(f"{t} {n} rows" for t, n in counts.items()) + "\n")

            os.environ.update({
                **connection_environment(server, checkpoints, REPLICA_SERVER_ID),
                "BINLOG_SOURCE_ID": SOURCE_ID,
                "BINLOG_CONN_ID": CONN_ID,
                "BINLOG_TABLES": ",".join(TABLES),
                "BINLOG_STAGING_DIR": str(staging),
                "BINLOG_WAREHOUSE": str(warehouse),
            })
            t0 = time.monotonic()
            migrate_metadata_db(dict(os.environ), log_path)
            dag_file = home / "dags" / "binlog_cdc.py"
            shutil.copyfile(dag_file_source(), dag_file)
            from ..dags import backfill_dag_id, incremental_dag_id

            def dag(dag_id):
                # parsed afresh for every run, as a worker does: dag.test() runs the tasks in
                # this process, and operator objects would carry state from run to run
                return load_dags(dag_file)[dag_id]

            incremental, backfill = incremental_dag_id(SOURCE_ID), backfill_dag_id(SOURCE_ID)
            dag(incremental), dag(backfill)
            console.write(f"Airflow metadata DB {home / 'airflow.db'} ({time.monotonic() - t0:.0f} s), "
                          f"DAG file {dag_file}\n"
                          f"Iceberg warehouse {warehouse}: tables {CATALOG}.{NAMESPACE}.*\n\n")

            t0 = time.monotonic()
            dag_run = run_dag(dag(backfill), {"mode": "snapshot"})
            _report_run(console, 1, "initial snapshot (backfill, mode snapshot)", dag_run, time.monotonic() - t0)
            for n in range(rounds):
                changes = max(10, rows // 4)
                apply_changes(server, rng, changes)
                t0 = time.monotonic()
                dag_run = run_dag(dag(incremental))
                states = task_states(dag_run)
                if states.get("merge") != "success":
                    raise QuickstartError(f"{incremental}: the merge did not run ({states})")
                _report_run(console, n + 2, f"{changes} random changes, then an incremental load",
                            dag_run, time.monotonic() - t0)

            import logging

            from ..spark import local_spark_session
            logging.getLogger("py4j").setLevel(logging.WARNING)  # quiet at interpreter exit too
            spark = local_spark_session(str(warehouse), CATALOG, app_name="quickstart-verify",
                                        java_home=java_home)
            console.write("\nIceberg tables vs MariaDB tables:\n")
            problems = []
            from ..common.tables import iceberg_table_name
            sources = {source: source_rows(server, source) for source in TABLES}
            for source, (cols, expected) in sources.items():
                schema, _, table = source.partition(".")
                name = f"{CATALOG}.{NAMESPACE}.{iceberg_table_name(schema, table)}"
                got, diff = compare_table(spark, source, cols, expected, name)
                problems += diff
                console.write(f"    {name:<32} {got:>6} rows   {source:<16} {len(expected):>6} rows   "
                              f"{'equal' if not diff else f'{len(diff)} differences'}\n")
            if pyiceberg_check.available():
                console.write("\nThe same tables read by PyIceberg (no JVM; what Polars and Daft read through):\n")
                for source, (cols, expected) in sources.items():
                    schema, _, table = source.partition(".")
                    got, diff = pyiceberg_check.compare(expected, warehouse, NAMESPACE,
                                                        iceberg_table_name(schema, table), cols)
                    problems += diff
                    console.write(f"    {NAMESPACE + '.' + iceberg_table_name(schema, table):<32} {got:>6} rows   "
                                  f"{'equal' if not diff else f'{len(diff)} differences'}\n")
            else:
                console.write("\nPyIceberg is not installed (pip install pyiceberg): its reading is not checked\n")
            if problems:
                for line in problems[:20]:
                    console.write(f"    {line}\n")
                console.write("FAILED: the Iceberg tables differ from the MariaDB tables\n")
                return 1
            console.write(f"OK: Iceberg tables equal the MariaDB tables "
                          f"({time.monotonic() - started:.0f} s)\n")
            return 0
        except QuickstartError as exc:
            console.write(f"error: {exc}\n--- last lines of {log_path} ---\n{_tail(log_path)}\n")
            return 1
        except Exception as exc:  # report, with the log's tail, rather than a bare traceback
            import traceback
            traceback.print_exc()
            console.write(f"error: {type(exc).__name__}: {exc}\n--- last lines of {log_path} ---\n"
                          f"{_tail(log_path)}\n")
            return 1
        finally:
            shut_down(spark, server)


def command(args) -> int:
    try:
        return run(Path(args.workdir), rows=args.rows, rounds=args.rounds, seed=args.seed)
    except QuickstartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
