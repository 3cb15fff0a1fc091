"""The DAGs of the factory end to end with ``dag.test()``: a live MariaDB, an initial snapshot
through the backfill DAG, three rounds of random changes each loaded by a run of the
incremental DAG, then Iceberg equals MariaDB (every row and column; the table without a
primary key through its change log), the asset events carry the counts, and reruns change
nothing. Schema changes run inside a round's batch (columns added with defaults, the
same-type drop and add, a widening), alone between two runs (an added column, a column
rename), and as an online schema change cut-over (a shadow swapped in by RENAME). All of it
under two server configurations and two topologies: FULL row metadata loaded in the embedded
mode (local Spark, a Hadoop catalog, the file checkpoint store), and the MINIMAL row metadata
and row image defaults with compressed events and no checksums loaded as in production: the
merge submitted to a live Spark standalone cluster (a master and two workers on loopback,
executors in their own JVMs), an Iceberg JDBC catalog on a private PostgreSQL given by an
``iceberg_catalog`` connection, and the SQL checkpoint store on that PostgreSQL.

Airflow runs on an SQLite metadata database in the test session's private AIRFLOW_HOME
(``airflow db migrate`` once); the DAG file, made with the factory, sits in its dags folder.
The merges run through spark-submit; the ``spark`` fixture's session reads the tables (the
JDBC catalog registered in it under the same name).
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import random
import subprocess
import sys
from collections import Counter
from decimal import Decimal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint, open_checkpoint_store  # noqa: E402
from airflow_provider_binlog.spark.catalogs import IcebergCatalog  # noqa: E402
from airflow_provider_binlog.local.quickstart import asset_events, run_results, task_states  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings, WaitSettings  # noqa: E402
from tests.airflow_conn import create_user, set_connection  # noqa: E402
from tests.all_types import ALL_TYPES, ALL_TYPES_COLUMNS, all_types_row, normalize  # noqa: E402
from tests.postgres import postgres_server  # noqa: E402,F401
from tests.pyiceberg_reader import PyIcebergReader, assert_every_table_reads_as_in_spark, plain  # noqa: E402
from tests.s3_server import s3_server  # noqa: E402,F401
from tests.spark_cluster import spark_cluster  # noqa: E402,F401

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SOURCE_ID = "e2e"
CONN_ID = "binlog_e2e"
NAMESPACE = "e2e_cdc"
KEYED = {"customers": ("id",), "order_lines": ("order_id", "line_no"), "all_types": ("id",)}
TABLES = ["shop.customers", "shop.order_lines", "shop.events", "shop.all_types"]
SCHEMA = (
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(60) NOT NULL, email VARCHAR(100), "
    "tier ENUM('bronze','silver','gold') NOT NULL, balance DECIMAL(12,2) NOT NULL, signed_up DATETIME(6), "
    "profile JSON, note TEXT) DEFAULT CHARSET=utf8mb4",
    # a composite primary key
    "CREATE TABLE shop.order_lines (order_id BIGINT NOT NULL, line_no SMALLINT NOT NULL, sku VARCHAR(20) NOT NULL, "
    "qty INT UNSIGNED NOT NULL, price DECIMAL(8,2) NOT NULL, shipped DATETIME, PRIMARY KEY (order_id, line_no))",
    # no primary key: an append-only change log in Iceberg
    "CREATE TABLE shop.events (kind VARCHAR(20) NOT NULL, ref INT, payload VARCHAR(100), at DATETIME(6) NOT NULL) "
    "DEFAULT CHARSET=utf8mb4",
    # every column type, near each type's limits
    f"CREATE TABLE shop.all_types ({ALL_TYPES}) DEFAULT CHARSET=utf8mb4",
)


# ---------------------------------------------------------------------------- Airflow setup

@pytest.fixture(scope="module")
def dags_folder() -> Path:
    """The metadata DB of the session's AIRFLOW_HOME, migrated; its (empty) dags folder."""
    from airflow.configuration import conf

    done = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    folder = Path(conf.get("core", "dags_folder"))
    assert folder.is_relative_to(Path(os.environ["AIRFLOW_HOME"]))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


#: The binlog settings the load runs under: the tool's recommended ones, and a server's
#: defaults of the other kind (no column names, minimal row images) with compressed events
#: and no checksums.
SERVER_CONFIGS = {
    "full-metadata": {"binlog_row_metadata": "FULL"},
    "minimal-metadata-minimal-image-compressed": {
        "binlog_row_metadata": "MINIMAL", "binlog_row_image": "MINIMAL", "binlog_checksum": "NONE",
        "log_bin_compress": "ON", "log_bin_compress_min_len": "10"},
}


#: Where each server configuration is loaded: ``embedded`` (local Spark, Hadoop catalog,
#: file store, staging in a directory) or ``cluster`` (standalone Spark cluster, JDBC catalog and
#: SQL store on PostgreSQL, staging on an S3-API server).
TOPOLOGY = {"full-metadata": "embedded", "minimal-metadata-minimal-image-compressed": "cluster"}


#: On the cluster, retention is on: the checkpoint key of another load reading the location, and
#: objects of other applications (at the bucket's root and under the staging prefix) it must keep.
AUDIT_KEY = "e2e_audit"
FOREIGN = ("1/0123456789abcdef0123456789abcdef/artifacts/model.pkl",
           "e2e/mlruns/0123456789abcdef0123456789abcdef/artifacts/model.pkl", "e2e/notes.txt")

#: The cluster topology is a long run (BINLOG_LONG_TESTS=1).
@pytest.fixture(scope="module", params=[
    pytest.param(name, marks=[pytest.mark.long] if TOPOLOGY[name] == "cluster" else [])
    for name in sorted(SERVER_CONFIGS)])
def server(request, mariadb_factory):
    """A server of its own (nothing else writes to its binlog)."""
    srv = mariadb_factory(max_allowed_packet="33554432", **SERVER_CONFIGS[request.param])
    for statement in SCHEMA:
        srv.execute(statement)
    create_user(srv)
    return srv


@dataclass
class Load:
    load: Any              # name -> a DAG freshly parsed from the file
    store: Any             # the checkpoint store
    store_uri: str
    catalog: str
    job_options: dict      # the merge job's catalog options, for a rerun in this process
    cluster: Any = None
    reader: Any = None     # the same catalog read by PyIceberg, without a JVM
    s3: Any = None         # the S3-API server of the staging (cluster)
    staging_dir: str = ""


@pytest.fixture()
def dags(request, dags_folder, server, spark, spark_warehouse, tmp_path, monkeypatch):
    topology = TOPOLOGY[request.node.callspec.params["server"]]
    kwargs = dict(binlog_conn_id=CONN_ID, tables=TABLES, staging=str(tmp_path / "staging"),
                  wait=WaitSettings(poke_interval=1, timeout=4, mode="poke"))
    cluster = None
    if topology == "cluster":
        # staging on an S3-API server on loopback: no staging path is shared with Spark
        s3 = request.getfixturevalue("s3_server")
        for key, value in s3.env().items():
            monkeypatch.setenv(key, value)
        bucket = s3.create_bucket()
        kwargs["staging"] = f"s3://{bucket}/e2e"
        # retention on, for this load and another that reads the location (its checkpoint set
        # by the test at the end); another application's objects in the bucket and the prefix
        kwargs.update(staging_retention=0, staging_consumers=[AUDIT_KEY])
        for key in FOREIGN:
            s3.client().put_object(Bucket=bucket, Key=key, Body=b"not staging")
    if topology == "embedded":
        store_uri, catalog = str(tmp_path / "store"), "lake"
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_E2E", json.dumps({"conn_type": "spark", "host": "local[2]"}))
        kwargs.update(lake=LakeSettings(namespace=NAMESPACE, catalog=catalog, warehouse=spark_warehouse),
                      spark=SparkSettings(conn_id="spark_e2e"))
        job_options = {"warehouse": spark_warehouse, "catalog": catalog}
        reader = PyIcebergReader(warehouse=spark_warehouse)
    else:
        pg = request.getfixturevalue("postgres_server")
        cluster = request.getfixturevalue("spark_cluster")
        store_uri = pg.url(pg.create_database("e2e_state"))
        catalog = "pglake"
        # the catalog: a connection of type iceberg_catalog (a password, unused by trust
        # authentication, so that it travels the way a real one does)
        warehouse = str(tmp_path / "pg-warehouse")
        monkeypatch.setenv("AIRFLOW_CONN_E2E_CATALOG", json.dumps({
            "conn_type": "iceberg_catalog", "host": pg.host, "port": pg.port,
            "schema": pg.create_database("e2e_iceberg"), "login": pg.user, "password": "unused-secret",
            "extra": {"type": "jdbc", "warehouse": warehouse}}))
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_E2E", json.dumps({
            "conn_type": "spark", "host": cluster.master_url, "extra": {"deploy-mode": "client"}}))
        # the cluster cannot reach Maven here: the runtime jar of the spark extra, chosen explicitly
        kwargs.update(lake=LakeSettings(namespace=NAMESPACE, catalog=catalog, catalog_conn_id="e2e_catalog"),
                      spark=SparkSettings(conn_id="spark_e2e", iceberg_runtime="embedded",
                                          conf={"spark.driver.host": "127.0.0.1",
                                                "spark.driver.bindAddress": "127.0.0.1",
                                                "spark.executor.memory": "512m", "spark.cores.max": "2",
                                                "spark.sql.shuffle.partitions": "4"}))
        # the test session reads the same catalog under the same name
        same = IcebergCatalog(catalog, "jdbc", uri=pg.jdbc_url("e2e_iceberg"), warehouse=warehouse,
                              properties={"jdbc.user": pg.user})
        for key, value in same.spark_conf().items():
            spark.conf.set(key, value)
        job_options = {"catalog": catalog}
        reader = PyIcebergReader(sql_uri=pg.url("e2e_iceberg"), catalog_name=catalog)
    set_connection(monkeypatch, server, conn_id=CONN_ID,
                   extra={"server_id": 7390, "flavor": "mariadb", "checkpoint_store_uri": store_uri})
    path = dags_folder / "binlog_e2e.py"
    path.write_text("from airflow_provider_binlog.dags import (LakeSettings, SparkSettings, WaitSettings,\n"
                    "    make_cdc_dags)\n\n"
                    f"binlog_cdc, binlog_backfill = make_cdc_dags({SOURCE_ID!r}, **{kwargs!r})\n")

    def load(name: str):
        """A DAG freshly parsed from the file, as a worker would: ``dag.test()`` runs the tasks
        in this process and leaves a run's parameters on the task objects."""
        spec = importlib.util.spec_from_file_location("binlog_e2e_dags", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    yield Load(load, open_checkpoint_store(store_uri), store_uri, catalog, job_options, cluster, reader,
               s3 if topology == "cluster" else None, kwargs["staging"])
    path.unlink()


def run(load, name, conf=None):
    dag_run = load(name).test(run_conf=conf)
    return dag_run, str(getattr(dag_run.state, "value", dag_run.state)), task_states(dag_run)


# ---------------------------------------------------------------------------- workload

class Workload:
    """Random changes with exact row counts per table (every UPDATE changes its rows)."""

    def __init__(self, server, seed: int) -> None:
        self.server = server
        self.rng = random.Random(seed)
        self.next_id = 0
        self.note = "note"  # the column's name (a test renames it)
        self.all_types_ids = iter(range(1, 100))

    def keys(self, table: str) -> list[tuple]:
        return self.server.query(f"SELECT {', '.join(KEYED[table])} FROM shop.{table}")

    def new_id(self) -> int:
        self.next_id += self.rng.randint(1, 3)
        return self.next_id

    def customer(self) -> tuple:
        rng = self.rng
        return (self.new_id(), f"{rng.choice(['Ada', 'Zoë', 'José', 'Linus'])} {rng.randint(1, 999)}",
                None if rng.random() < 0.2 else f"u{rng.randint(1, 9999)}@example.com",
                rng.choice(["bronze", "silver", "gold"]), Decimal(rng.randint(-10**6, 10**6)) / 100,
                None if rng.random() < 0.1 else dt.datetime(2024, 1, 1) + dt.timedelta(
                    seconds=rng.randint(0, 10**7), microseconds=rng.randint(0, 999_999)),
                None if rng.random() < 0.2 else json.dumps({"n": rng.randint(0, 99),
                                                            "tags": ["a", "b"][:rng.randint(0, 2)]}),
                None if rng.random() < 0.5 else "note " * rng.randint(1, 5))

    def line(self, order_id: int, line_no: int) -> tuple:
        rng = self.rng
        return (order_id, line_no, f"sku-{rng.randint(1, 50)}", rng.randint(1, 9),
                Decimal(rng.randint(1, 99_999)) / 100,
                None if rng.random() < 0.5 else dt.datetime(2024, 6, 1) + dt.timedelta(seconds=rng.randint(0, 10**7)))

    def event(self) -> tuple:
        rng = self.rng
        return (rng.choice(["login", "view", "buy"]), rng.randint(1, 5), rng.choice([None, "x", "päyload"]),
                dt.datetime(2024, 1, 1, 0, 0, rng.randint(0, 59), rng.randint(0, 3) * 1000))

    def run(self, n: int) -> dict:
        rng = self.rng
        counts = {t: Counter() for t in TABLES}
        conn = self.server.connect()
        try:
            with conn.cursor() as cur:
                def do(table, op, sql, args=None, many=False):
                    changed = cur.executemany(sql, args) if many else cur.execute(sql, args)
                    counts[f"shop.{table}"][op] += changed

                for _ in range(n):
                    customers, lines = [k[0] for k in self.keys("customers")], self.keys("order_lines")
                    pick = rng.random()
                    if pick < 0.2 or not customers:
                        do("customers", "insert", "INSERT INTO shop.customers (id, name, email, tier, balance, "
                           f"signed_up, profile, {self.note}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                           [self.customer() for _ in range(rng.randint(1, 3))], many=True)
                    elif pick < 0.35:
                        # an order: its lines and the customer's balance, in one transaction
                        cur.execute("BEGIN")
                        order_id = self.new_id()
                        do("order_lines", "insert", "INSERT INTO shop.order_lines (order_id, line_no, sku, qty, "
                           "price, shipped) VALUES (%s, %s, %s, %s, %s, %s)",
                           [self.line(order_id, i) for i in range(1, rng.randint(2, 5))], many=True)
                        do("customers", "update", "UPDATE shop.customers SET balance = balance - 10 WHERE id = %s",
                           (rng.choice(customers),))
                        cur.execute("COMMIT")
                    elif pick < 0.5:
                        do("customers", "update", "UPDATE shop.customers SET balance = balance + 1.25, tier = %s, "
                           f"profile = JSON_OBJECT('v', %s), {self.note} = NULL WHERE id = %s",
                           (rng.choice(["bronze", "silver", "gold"]), rng.randint(100, 999), rng.choice(customers)))
                    elif pick < 0.6 and lines:
                        do("order_lines", "update", "UPDATE shop.order_lines SET qty = qty + 1, shipped = NOW() "
                           "WHERE order_id = %s AND line_no = %s", rng.choice(lines))
                    elif pick < 0.65 and lines:
                        # the primary key changes
                        do("order_lines", "update", "UPDATE shop.order_lines SET line_no = line_no + 100 "
                           "WHERE order_id = %s AND line_no = %s", rng.choice(lines))
                    elif pick < 0.72 and lines:
                        do("order_lines", "delete", "DELETE FROM shop.order_lines WHERE order_id = %s AND line_no = %s",
                           rng.choice(lines))
                    elif pick < 0.78 and len(customers) > 3:
                        do("customers", "delete", "DELETE FROM shop.customers WHERE id = %s", (rng.choice(customers),))
                    elif pick < 0.93:
                        do("events", "insert", "INSERT INTO shop.events VALUES (%s, %s, %s, %s)",
                           [self.event() for _ in range(rng.randint(1, 4))], many=True)
                    else:
                        # one of possibly identical rows of the table without a key
                        do("events", "delete", "DELETE FROM shop.events WHERE kind = %s LIMIT 1",
                           (rng.choice(["login", "view", "buy"]),))
                # every column type: inserts, an update of several types, a delete
                columns = ", ".join(ALL_TYPES_COLUMNS)
                for _ in range(2):
                    do("all_types", "insert", f"INSERT INTO shop.all_types ({columns}) VALUES "
                       f"({', '.join(['%s'] * len(ALL_TYPES_COLUMNS))})", all_types_row(next(self.all_types_ids)))
                present = [r[0] for r in self.server.query("SELECT id FROM shop.all_types ORDER BY id")]
                do("all_types", "update", "UPDATE shop.all_types SET tx = %s, bl = %s, st = 'x,y,z', bt = 1, "
                   "dt = '1000-01-01 00:00:00', tm = '-838:59:59', u = UUID() WHERE id = %s",
                   (f"round {rng.random()}", bytes([rng.randint(0, 255)]), rng.choice(present)))
                if len(present) > 3:
                    do("all_types", "delete", "DELETE FROM shop.all_types WHERE id = %s", (present[0],))
        finally:
            conn.close()
        return {t: {"inserted": c["insert"], "updated": c["update"], "deleted": c["delete"]} for t, c in counts.items()}


# ---------------------------------------------------------------------------- comparison

def iceberg(table: str, catalog: str = "lake") -> str:
    return f"{catalog}.{NAMESPACE}.shop__{table}"


def columns(server, table: str) -> list[str]:
    return [r[0] for r in server.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'shop' "
                                       "AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (table,))]


def assert_iceberg_equals_mariadb(spark, server, catalog: str, reader=None) -> None:
    """Spark reads every table equal to MariaDB; so does PyIceberg (``reader``), which also
    finds no equality-delete file in any table of the namespace."""
    for table in KEYED:
        cols = columns(server, table)
        bits = {r[0] for r in server.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "
                                           "TABLE_SCHEMA = 'shop' AND TABLE_NAME = %s AND DATA_TYPE = 'bit'", (table,))}
        source = ", ".join(f"CAST(`{c}` AS UNSIGNED)" if c in bits else f"`{c}`" for c in cols)
        expected = sorted((tuple(normalize(v) for v in r) for r in server.query(f"SELECT {source} FROM shop.{table}")),
                          key=repr)
        spark.sql(f"REFRESH TABLE {iceberg(table, catalog)}")
        select = ", ".join(f"`{c}`" for c in cols)
        rows = spark.sql(f"SELECT {select} FROM {iceberg(table, catalog)}").collect()
        got = sorted((tuple(normalize(v) for v in r) for r in rows), key=repr)
        assert got == expected, f"shop.{table} differs"
        if reader is not None:
            read = reader.rows(NAMESPACE, f"shop__{table}", cols)
            got = sorted((tuple(normalize(plain(r[c])) for c in cols) for r in read), key=repr)
            assert got == expected, f"shop.{table} differs as PyIceberg reads it"
    # the table without a primary key: its change log replayed in binlog order
    cols = columns(server, "events")
    spark.sql(f"REFRESH TABLE {iceberg('events', catalog)}")
    log = spark.sql(f"SELECT _op, {', '.join(cols)} FROM {iceberg('events', catalog)} "
                    "ORDER BY _binlog_seq, _binlog_pos, _row").collect()
    rows: Counter = Counter()
    for record in log:
        op, image = record[0], tuple(record[1:])
        if op in ("truncate", "drop"):
            rows.clear()
        elif op == "insert":
            rows[image] += 1
        elif op == "delete":
            assert rows[image] > 0, f"delete of a row that is not there: {image}"
            rows[image] -= 1
        else:
            raise AssertionError(f"unexpected change {op}")
    expected = Counter(tuple(r) for r in server.query(f"SELECT {', '.join(cols)} FROM shop.events"))
    assert +rows == expected, "shop.events differs"
    if reader is not None:
        assert_every_table_reads_as_in_spark(spark, reader, catalog, NAMESPACE)


def assert_staged_where_configured(dags, manifest: str) -> None:
    """On the cluster, batches are staged on S3 only: the manifest is an s3:// URI and names
    only objects under it, so no local staging path can reach Spark."""
    if dags.cluster is None:
        assert not manifest.startswith("s3://")
        return
    from airflow_provider_binlog.staging import load_manifest

    assert manifest.startswith("s3://")
    published = load_manifest(manifest, verify=True)
    files = [str(f) for t in published.tables for f in published.files(t)]
    assert files and all(f.startswith(manifest.rsplit("/", 1)[0] + "/") for f in files)


def retained(dags, state: str) -> dict:
    """The retention task's state in an incremental run: on the cluster only."""
    return {"remove_merged_batches": state} if dags.cluster is not None else {}


def staged_batches(dags) -> list[str]:
    """The names of the batches published under the staging prefix (cluster: on S3)."""
    from airflow_provider_binlog.staging.confine import is_batch_name
    from airflow_provider_binlog.staging.storage import ObjectStaging

    return sorted(n for n in ObjectStaging(dags.staging_dir).children() if is_batch_name(n))


def assert_retention_keeps_what_another_load_needs_and_other_objects(dags, server, load) -> None:
    """While the other load has merged nothing, every batch stays; once it is where this load is,
    the next run removes every merged batch (the snapshot's too), and nothing of another
    application's."""
    bucket = dags.staging_dir.split("/")[2]
    staged = staged_batches(dags)
    assert len(staged) >= 5, staged  # the snapshot and the incremental batches, all kept so far
    dags.store.save(AUDIT_KEY, dags.store.load(SOURCE_ID))
    server.execute("UPDATE shop.customers SET tier = IF(tier = 'gold', 'silver', 'gold') ORDER BY id LIMIT 3")
    dag_run, state, states = run(load, "binlog_cdc")
    assert state == "success" and states["remove_merged_batches"] == "success", states
    removed = run_results(dag_run)["remove_merged_batches"]
    assert sorted(removed) == staged, (removed, staged)  # this run's batch is past the other load's checkpoint
    assert staged_batches(dags) == [run_results(dag_run)["dump"]["dump_id"]]
    client = dags.s3.client()
    for key in FOREIGN:
        assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == b"not staging", key


def heads(spark, catalog: str) -> dict:
    out = {}
    for table in [*KEYED, "events", "_binlog_batches"]:
        name = iceberg(table, catalog) if not table.startswith("_") else f"{catalog}.{NAMESPACE}.{table}"
        spark.sql(f"REFRESH TABLE {name}")
        out[table] = spark.sql(f"SELECT snapshot_id FROM {name}.refs WHERE name = 'main'").collect()[0][0]
    return out


def events_by_table(dag_run, catalog: str) -> dict:
    out = {}
    for event in asset_events(dag_run):
        assert event["uri"].startswith(f"iceberg://{catalog}/{NAMESPACE}/shop__")
        out["shop." + event["uri"].rsplit("/", 1)[1][len("shop__"):]] = event["extra"]
    return out


# ---------------------------------------------------------------------------- the test

def test_snapshot_then_incremental_runs_keep_iceberg_equal_to_mariadb(dags, server, spark, spark_warehouse,
                                                                    monkeypatch):
    load, store, catalog = dags.load, dags.store, dags.catalog
    incremental, backfill = "binlog_cdc", "binlog_backfill"
    # the tables of a load under another server configuration go first
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{NAMESPACE}")
    for row in spark.sql(f"SHOW TABLES IN {catalog}.{NAMESPACE}").collect():
        spark.sql(f"DROP TABLE {catalog}.{NAMESPACE}.{row.tableName}")
    work = Workload(server, seed=20240611)
    work.run(60)                                       # the tables' content before the snapshot

    # 1. the initial load: backfill in mode snapshot
    dag_run, state, states = run(load, backfill, {"mode": "snapshot"})
    assert state == "success", states
    assert states == {"wait_for_incremental": "success", "plan": "success", "choose": "success",
                      "snapshot": "success", "dump": "skipped", "merge": "success"}
    results = run_results(dag_run)
    engines = [results["merge"]["engine"]]  # which merges ran through spark-submit
    snapshot_end = Checkpoint.from_json(results["snapshot"]["end"])
    assert_staged_where_configured(dags, results["snapshot"]["manifest"])
    assert store.load(SOURCE_ID) == snapshot_end
    events = events_by_table(dag_run, catalog)
    assert set(events) == set(TABLES)
    for table in TABLES:
        n = server.query(f"SELECT COUNT(*) FROM {table}")[0][0]
        assert (events[table]["inserted"], events[table]["updated"], events[table]["deleted"]) == (n, 0, 0)
        assert events[table]["mode"] == "snapshot"
        assert Checkpoint.from_json(events[table]["end_checkpoint"]) == snapshot_end
    assert_iceberg_equals_mariadb(spark, server, catalog, dags.reader)

    # 2. three rounds of changes, each loaded by the incremental DAG; schema changes inside the
    # second round's batch (columns added with defaults, the same-type drop and add, a widening)
    last_dump = None
    totals = {t: Counter() for t in TABLES}
    for round_no in range(3):
        expected = work.run(40)
        if round_no == 0:
            server.execute("ALTER TABLE shop.order_lines ADD COLUMN c1 INT")
        if round_no == 1:
            server.execute("ALTER TABLE shop.customers ADD COLUMN loyalty INT NOT NULL DEFAULT 5 AFTER tier, "
                           "ADD COLUMN code VARCHAR(8) NOT NULL DEFAULT 'n/a'")
            server.execute("ALTER TABLE shop.order_lines DROP COLUMN c1, ADD COLUMN c2 INT DEFAULT 2")
            server.execute("ALTER TABLE shop.order_lines MODIFY COLUMN price DECIMAL(12,2) NOT NULL")
            server.execute("ALTER TABLE shop.all_types ADD COLUMN added DECIMAL(5,2) NOT NULL DEFAULT 1.50 AFTER ti, "
                           "MODIFY COLUMN mi INT")
            more = work.run(40)
            for table, counts in more.items():
                for k, v in counts.items():
                    expected[table][k] += v
        if round_no == 2:
            # an online schema change cut-over (gh-ost style): a shadow created LIKE the table,
            # altered, filled by INSERT ... SELECT, swapped in by one RENAME, the old table dropped
            server.execute("CREATE TABLE shop._order_lines_gho LIKE shop.order_lines")
            server.execute("ALTER TABLE shop._order_lines_gho ADD COLUMN gift TINYINT NOT NULL DEFAULT 0")
            server.execute("INSERT INTO shop._order_lines_gho (order_id, line_no, sku, qty, price, shipped, c2) "
                           "SELECT order_id, line_no, sku, qty, price, shipped, c2 FROM shop.order_lines")
            server.execute("RENAME TABLE shop.order_lines TO shop._order_lines_del, "
                           "shop._order_lines_gho TO shop.order_lines")
            server.execute("DROP TABLE shop._order_lines_del")
        for table, counts in expected.items():
            totals[table].update(counts)
        dag_run, state, states = run(load, incremental)
        assert state == "success" and states == {"wait_for_changes": "success", "dump": "success",
                                                 "merge": "success", **retained(dags, "success")}, states
        results = run_results(dag_run)
        engines.append(results["merge"]["engine"])
        last_dump = results["dump"]
        assert_staged_where_configured(dags, last_dump["manifest"])
        end = store.load(SOURCE_ID)
        assert end == Checkpoint.from_json(last_dump["end"])
        events = events_by_table(dag_run, catalog)
        assert set(events) == set(TABLES)
        for table in TABLES:
            got = {k: events[table][k] for k in ("inserted", "updated", "deleted")}
            assert got == expected[table], f"round {round_no + 1}, {table}"
            assert Checkpoint.from_json(events[table]["end_checkpoint"]) == end
            assert results["merge"]["tables"].get(table, {}).get("inserted", 0) == expected[table]["inserted"]
        assert_iceberg_equals_mariadb(spark, server, catalog, dags.reader)
        if round_no == 1:
            # a schema change alone between two runs: the rows there get the default at once
            server.execute("ALTER TABLE shop.customers ADD COLUMN region CHAR(2) NOT NULL DEFAULT 'eu', "
                           "RENAME COLUMN note TO remark")
            work.note = "remark"
            dag_run, state, states = run(load, incremental)
            assert state == "success" and states["merge"] == "success", states
            engines.append(run_results(dag_run)["merge"]["engine"])
            assert_iceberg_equals_mariadb(spark, server, catalog, dags.reader)
    for table in TABLES:  # the workload did every kind of change
        kinds = ("inserted", "deleted") if table == "shop.events" else ("inserted", "updated", "deleted")
        assert all(totals[table][k] > 0 for k in kinds), (table, totals[table])

    # 3. a run with no new data is skipped and changes nothing
    before, checkpoint = heads(spark, catalog), store.load(SOURCE_ID)
    dag_run, state, states = run(load, incremental)
    assert state == "success"
    assert states == {"wait_for_changes": "skipped", "dump": "skipped", "merge": "skipped",
                      **retained(dags, "skipped")}
    assert asset_events(dag_run) == []
    assert heads(spark, catalog) == before and store.load(SOURCE_ID) == checkpoint

    # 4. the last merge run again with the same manifest: already applied, nothing changes
    from airflow_provider_binlog.merge.options import MergeOptions
    from airflow_provider_binlog.merge.spark import job as merge_job
    out = Path(spark_warehouse).parent / "e2e-rerun.json"
    options = MergeOptions(**dags.job_options, namespace=NAMESPACE, checkpoint_store=dags.store_uri,
                           checkpoint_key=SOURCE_ID)
    argv = ["--options", options.to_json_text(), "--manifest", last_dump["manifest"], "--output-json", str(out)]
    assert merge_job.main(argv) == 0
    assert [b["status"] for b in json.loads(out.read_text())["batches"]] == ["already-applied"]
    assert heads(spark, catalog) == before and store.load(SOURCE_ID) == checkpoint

    # 5. a replay must start where the checkpoint is: one that would leave a gap is refused
    work.run(5)
    file, pos = server.master_status()
    dag_run, state, states = run(load, backfill, {"mode": "from_position", "from_position": f"{file}:{pos}"})
    assert state == "failed" and states["dump"] == "success" and states["merge"] == "failed", states
    assert heads(spark, catalog) == before and store.load(SOURCE_ID) == checkpoint
    # and the parameters are checked before anything runs
    dag_run, state, states = run(load, backfill, {"mode": "from_position"})
    assert state == "failed" and states["plan"] == "failed" and states.get("dump") in (None, "upstream_failed")
    # every batch has a change log's rows (shop.events has no primary key) or a schema change:
    # with a local master the Java engine refuses each before committing anything and Spark
    # applies it; a cluster master gets spark-submit at once
    assert engines == ["spark" if dags.cluster is not None else "iceberg-java+spark"] * 5, engines
    if dags.cluster is not None:  # the merges through spark-submit ran as applications of the cluster
        # and so does the refused replay, whose gap the job finds (reruns and skips submit nothing)
        merges = [a["name"] for a in dags.cluster.completed_apps()]
        assert merges == [f"binlog-merge-{NAMESPACE}"] * 6, (merges, engines)
        # 6. a batch that needs no Spark (keyed rows only): by default still an application of
        # the cluster; with merge_engine iceberg-java none, the merge on the worker
        for engine, applications in (("auto", 7), ("iceberg-java", 7)):
            monkeypatch.setenv("AIRFLOW__BINLOG__MERGE_ENGINE", engine)
            # deletes: their key is the whole image a direct commit needs, even with MINIMAL
            # images (an update's or an insert's partial image takes Spark)
            server.execute("DELETE FROM shop.customers ORDER BY id DESC LIMIT 2")
            dag_run, state, states = run(load, incremental)
            assert state == "success" and states["merge"] == "success", states
            assert run_results(dag_run)["merge"]["engine"] == ("spark" if engine == "auto" else "iceberg-java")
            assert len(dags.cluster.completed_apps()) == applications
            assert_iceberg_equals_mariadb(spark, server, catalog, dags.reader)
        # 7. retention: kept while another load reading the location has merged nothing
        assert_retention_keeps_what_another_load_needs_and_other_objects(dags, server, load)
