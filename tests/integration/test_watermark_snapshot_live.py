"""The watermark snapshot against a live MariaDB while writers insert, update, delete and change
primary keys inside the chunk ranges: replaying its batch (then an incremental dump from its end)
gives the source tables exactly, in Python and through the merge into Iceberg; no transaction is
held; a table without a usable key is read in one consistent transaction; schema changes
during the snapshot are refused."""
from __future__ import annotations

import os
import random
import threading
import time

from airflow_provider_binlog.staging.storage import read_parquet
import pymysql
import pytest

from airflow_provider_binlog.capture.arrow_reader import ArrowChunkReader
from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import ReplicaConnection
from airflow_provider_binlog.schema_history import SchemaHistory
from airflow_provider_binlog.capture.snapshot import SnapshotError
from airflow_provider_binlog.common.tables import TableFilter
from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot
from tests.s3_server import s3_server  # noqa: F401

DB = "wsnap"
N = 3000


def arrow_url(server) -> str:
    return ArrowChunkReader.url_for(server.host, server.port, server.user, server.password, "information_schema")


def replica_factory(server):
    return lambda: ReplicaConnection(server.host, server.port, server.user, server.password, server_id=4343)


def create(server):
    server.execute(f"DROP DATABASE IF EXISTS {DB}")
    server.execute(f"CREATE DATABASE {DB}")
    server.execute(f"CREATE TABLE {DB}.items (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    server.execute(f"CREATE TABLE {DB}.pairs (a INT, b INT, n INT, PRIMARY KEY (a, b))")
    server.execute(f"CREATE TABLE {DB}.coded (code INT NOT NULL, x INT, UNIQUE KEY u (code))")
    conn = server.connect()
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {DB}.items VALUES (%s, %s, %s)", [(i, i, f"s{i}") for i in range(1, N + 1)])
        cur.executemany(f"INSERT INTO {DB}.pairs VALUES (%s, %s, %s)",
                        [(a, b, a * b) for a in range(1, 31) for b in range(1, 21)])
        cur.executemany(f"INSERT INTO {DB}.coded VALUES (%s, %s)", [(c, c) for c in range(1, 801)])
    conn.close()


def write(server, stop: threading.Event, seed: int, counts: dict, pause: float = 0.0) -> None:
    rng = random.Random(seed)
    conn = server.connect()
    try:
        while not stop.is_set():
            time.sleep(pause)
            try:
                one_write(conn, rng)
            except pymysql.err.OperationalError as exc:  # two writers deadlocked: one goes on
                if exc.args[0] not in (1213, 1205):
                    raise
                conn.rollback()
            counts["writes"] += 1
    except BaseException as exc:
        counts["error"] = repr(exc)
        raise
    finally:
        conn.close()


def one_write(conn, rng) -> None:
    k = rng.randint(1, N + 200)
    op = rng.random()
    with conn.cursor() as cur:
        if op < 0.25:
            cur.execute(f"INSERT INTO {DB}.items VALUES (%s, %s, 'new') ON DUPLICATE KEY UPDATE v = v + 1",
                        (k, -k))
        elif op < 0.5:
            cur.execute(f"UPDATE {DB}.items SET v = v + 1, s = %s WHERE id = %s", (f"u{rng.random():.4f}", k))
        elif op < 0.65:
            cur.execute(f"DELETE FROM {DB}.items WHERE id = %s", (k,))
        elif op < 0.75:  # a primary key change, across chunk ranges
            cur.execute(f"UPDATE IGNORE {DB}.items SET id = %s WHERE id = %s", (rng.randint(1, N + 200), k))
        elif op < 0.85:  # a transaction over many keys of two tables
            cur.execute("BEGIN")
            cur.execute(f"UPDATE {DB}.items SET v = v + 3 WHERE id BETWEEN %s AND %s", (k, k + 40))
            a = rng.randint(1, 35)
            cur.execute(f"DELETE FROM {DB}.pairs WHERE a = %s AND b < 5", (a,))
            cur.execute(f"INSERT IGNORE INTO {DB}.pairs VALUES (%s, %s, 0)", (a, rng.randint(1, 25)))
            cur.execute("COMMIT")
        else:
            c = rng.randint(1, 900)
            cur.execute(f"INSERT INTO {DB}.coded VALUES (%s, 1) ON DUPLICATE KEY UPDATE x = x + 1", (c,))
            cur.execute(f"DELETE FROM {DB}.coded WHERE code = %s", (rng.randint(1, 900),))


def replay(manifests, table: str, key, columns) -> dict:
    """The staged rows of ``table`` applied in binlog order (across files) to a dict by key."""
    model: dict = {}
    for manifest in manifests:
        rows = []
        for entry in manifest.tables:
            if entry["table"] == table:
                for path in manifest.files(entry):
                    rows += read_parquet(path).to_pylist()
        rows.sort(key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row"]))
        for r in rows:
            if r["_op"] in ("update", "delete"):
                model.pop(key(r["_before"]), None)
            if r["_op"] in ("insert", "update"):
                model[key(r["_after"])] = tuple(r["_after"][c] for c in columns)
    return model


def source(server, table, key_len, columns) -> dict:
    return {tuple(r[:key_len]) if key_len > 1 else r[0]: tuple(r)
            for r in server.query(f"SELECT {', '.join(columns)} FROM {DB}.{table}")}


@pytest.mark.parametrize("reader, connections", [("pymysql", 1), ("arrow", 2)])
def test_a_watermark_snapshot_under_concurrent_writers_equals_the_source(mariadb, spark, spark_warehouse, tmp_path,
                                                                         reader, connections):
    create(mariadb)
    tables = TableFilter([f"{DB}.*"])
    stop, counts = threading.Event(), {"writes": 0}
    writers = [threading.Thread(target=write, args=(mariadb, stop, seed, counts)) for seed in (1, 2)]
    for w in writers:
        w.start()
    seen = []

    def progress(table, new_rows, rows_read):  # give the writers time between chunks too
        seen.append((table, rows_read))
        time.sleep(0.01)

    try:
        time.sleep(0.2)
        snap = take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb),
                                       staging_dir=tmp_path / "staging", tables=tables, flavor="mariadb",
                                       server={"server_id": mariadb.server_id}, chunk_rows=97, progress=progress,
                                       reader=reader, read_connections=connections, arrow_url=arrow_url(mariadb))
        time.sleep(0.2)
    finally:
        stop.set()
        for w in writers:
            w.join()
    stats = snap.data["snapshot_stats"]
    assert stats["chunks"] >= N // 97 and stats["changes"] > 0, stats   # changes were made mid-snapshot
    assert snap.is_snapshot and snap.start != snap.end
    # every chunk read the chosen way (no fallback)
    assert stats["arrow_chunks"] == (stats["chunks"] if reader == "arrow" else 0), stats
    # the GTID state at the end, followed from the start's, is the server's own for that position
    end = snap.end
    assert str(end.gtid) == mariadb.query("SELECT BINLOG_GTID_POS(%s, %s)", (end.file, end.position))[0][0]
    assert {t for t, _ in seen} == {f"{DB}.items", f"{DB}.pairs", f"{DB}.coded"}
    rc = replica_factory(mariadb)()
    rc.connect()
    try:
        inc = run_dump(rc, staging_dir=tmp_path / "staging", start=snap.end, tables=tables,
                       history=SchemaHistory.from_json(snap.schema_history_json))
    finally:
        rc.close()
    manifests = [snap, inc.manifest]
    assert counts["writes"] > 50 and "error" not in counts, counts
    assert replay(manifests, "items", lambda r: r["id"], ("id", "v", "s")) == \
        source(mariadb, "items", 1, ("id", "v", "s"))
    assert replay(manifests, "pairs", lambda r: (r["a"], r["b"]), ("a", "b", "n")) == \
        source(mariadb, "pairs", 2, ("a", "b", "n"))
    assert replay(manifests, "coded", lambda r: r["code"], ("code", "x")) == source(mariadb, "coded", 1, ("code", "x"))

    # the merge: the snapshot replaces the tables from its start, the dump continues at its end
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions

    namespace = f"wsnap_{reader}"
    # the snapshot alone first: committed directly (no Spark job), the changes made while it ran
    # folded in, equal to the staged rows replayed, and readable by PyIceberg
    loaded = apply_manifests(spark, [snap.directory], MergeOptions(namespace=namespace))["batches"][0]["tables"]
    assert {(t["source"], t.get("direct"), t["status"]) for t in loaded} == {
        (f"{DB}.{name}", True, "committed") for name in ("items", "pairs", "coded")}
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT id, v, s FROM lake.{namespace}.wsnap__items").collect()}
    assert got == replay([snap], "items", lambda r: r["id"], ("id", "v", "s"))
    from airflow_provider_binlog.local.pyiceberg_check import read_rows

    assert {r[0]: tuple(r) for r in read_rows(spark_warehouse, namespace, "wsnap__items", ["id", "v", "s"])} == got
    apply_manifests(spark, [snap.directory, inc.manifest.directory], MergeOptions(namespace=namespace))
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT id, v, s FROM lake.{namespace}.wsnap__items").collect()}
    assert got == source(mariadb, "items", 1, ("id", "v", "s"))
    got = {(r[0], r[1]): tuple(r) for r in spark.sql(f"SELECT a, b, n FROM lake.{namespace}.wsnap__pairs").collect()}
    assert got == source(mariadb, "pairs", 2, ("a", "b", "n"))


def test_a_table_without_a_usable_key_is_read_consistently_and_its_later_changes_staged(mariadb, tmp_path,
                                                                                       caplog):
    import collections
    import logging

    mariadb.execute("DROP DATABASE IF EXISTS wsnap_nokey")
    mariadb.execute("CREATE DATABASE wsnap_nokey")
    mariadb.execute("CREATE TABLE wsnap_nokey.z_loose (x INT, y INT NULL, UNIQUE KEY u (y))")  # a nullable unique key
    mariadb.execute("CREATE TABLE wsnap_nokey.a_keyed (id INT PRIMARY KEY, v INT)")
    mariadb.execute("CREATE TABLE wsnap_nokey.m_empty (x INT)")  # keyless and empty: staged, so a reload empties it
    mariadb.execute("INSERT INTO wsnap_nokey.z_loose VALUES " + ", ".join(f"({i % 7}, {i})" for i in range(1, 301)))
    mariadb.execute("INSERT INTO wsnap_nokey.z_loose VALUES (1, NULL), (1, NULL)")  # the same row twice
    mariadb.execute("INSERT INTO wsnap_nokey.a_keyed VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 101)))
    writes = {
        # during the keyed table's chunks, before the keyless table's read (which holds them)
        "a_keyed": ["INSERT INTO wsnap_nokey.z_loose VALUES (9, 1000), (1, NULL)",
                    "DELETE FROM wsnap_nokey.z_loose WHERE y = 5",
                    "UPDATE wsnap_nokey.a_keyed SET v = -v WHERE id = 3",
                    "UPDATE wsnap_nokey.z_loose SET x = 41 WHERE y = 7"],
        # during the keyless table's read, after its position: staged as changes
        "m_empty": [],
        "z_loose": ["UPDATE wsnap_nokey.z_loose SET x = 42 WHERE y = 6",
                    "DELETE FROM wsnap_nokey.z_loose WHERE y IS NULL LIMIT 1",
                    "INSERT INTO wsnap_nokey.z_loose VALUES (8, NULL)"],
    }

    def progress(table, new_rows, rows_read):
        pending = writes[table.split(".")[1]]
        if pending:
            mariadb.execute(pending.pop(0))

    with caplog.at_level(logging.INFO, logger="airflow_provider_binlog"):
        snap = take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb),
                                       staging_dir=tmp_path / "s", tables=TableFilter(["wsnap_nokey.*"]),
                                       flavor="mariadb", server={"server_id": mariadb.server_id}, chunk_rows=20,
                                       reader="pymysql", progress=progress)
    assert writes == {"a_keyed": [], "m_empty": [], "z_loose": []}  # every write ran when meant to
    empty = next(e for e in snap.tables if e["table"] == "m_empty")
    assert empty["primary_key"] == [] and sum(empty["rows"].values()) == 0
    assert "wsnap_nokey.z_loose has no usable key" in caplog.text
    assert "read in one consistent transaction" in caplog.text
    entry = next(e for e in snap.tables if e["table"] == "z_loose")
    assert entry["primary_key"] == []
    staged = sorted((r for path in snap.files(entry) for r in read_parquet(path).to_pylist()),
                    key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row"]))
    model: collections.Counter = collections.Counter()
    for r in staged:  # replayed as a multiset: a keyless table may hold a row twice
        if r["_op"] in ("update", "delete"):
            model[(r["_before"]["x"], r["_before"]["y"])] -= 1
        if r["_op"] in ("insert", "update"):
            model[(r["_after"]["x"], r["_after"]["y"])] += 1
    assert +model == collections.Counter(tuple(r) for r in mariadb.query("SELECT x, y FROM wsnap_nokey.z_loose"))
    assert model[(1, None)] == 2 and model[(8, None)] == 1 and model[(42, 6)] == 1 and model[(41, 7)] == 1
    assert (5, 5) not in +model
    assert any(r["_op"] == "delete" for r in staged) and sum(r["_txn"].startswith("snapshot:") for r in staged) >= 302
    assert replay([snap], "a_keyed", lambda r: r["id"], ("id", "v")) == \
        {r[0]: tuple(r) for r in mariadb.query("SELECT id, v FROM wsnap_nokey.a_keyed")}


def test_a_schema_change_during_the_snapshot_stops_it(mariadb, tmp_path):
    mariadb.execute("DROP DATABASE IF EXISTS wsnap_ddl")
    mariadb.execute("CREATE DATABASE wsnap_ddl")
    mariadb.execute("CREATE TABLE wsnap_ddl.t (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO wsnap_ddl.t VALUES " + ", ".join(f"({i}, {i})" for i in range(1, 51)))

    def progress(table, new_rows, rows_read):
        if rows_read == 10:
            mariadb.execute("ALTER TABLE wsnap_ddl.t ADD COLUMN w INT")

    with pytest.raises(SnapshotError, match="a schema statement on a captured table ran during the snapshot .*"
                                            "ALTER TABLE wsnap_ddl.t ADD COLUMN w INT.*take the snapshot again"):
        take_watermark_snapshot(lambda: mariadb.connect(), replica_factory(mariadb), staging_dir=tmp_path / "s",
                                tables=TableFilter(["wsnap_ddl.*"]), flavor="mariadb",
                                server={"server_id": mariadb.server_id}, chunk_rows=10, progress=progress)


def snapshot_manifest(root, tm, rows, at: Checkpoint, name: str):
    """A snapshot batch of ``rows`` of one table taken at ``at`` (start == end)."""
    import datetime as dt

    from airflow_provider_binlog.staging import StagingWriter

    writer = StagingWriter(root / "staging")
    writer.add_snapshot_rows(tm, rows, binlog_file=at.file, position=at.position, gtid=None,
                             taken_at=dt.datetime.now(dt.timezone.utc), first_index=0)
    return writer.publish(dump_id=name, start=at.to_json(), end=at.to_json(), server={"flavor": "mysql"},
                          extra={"mode": "snapshot"})


def test_a_reload_of_some_tables_applies_unless_the_incremental_load_went_past_it(spark, tmp_path):
    """A snapshot of some tables (its own ledger stream, no checkpoint store) replaces them even
    at the table's own position (a repair while the source is idle); merged after the incremental
    load went past its end it is refused, not skipped; merged again after it applied, nothing."""
    from airflow_provider_binlog.codec import constants as C
    from airflow_provider_binlog.merge.errors import MergeJobError
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions
    from tests.integration.test_merge_job import Binlog, col, table_map

    tm = table_map("s", "re", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True), col(1, "v", C.MYSQL_TYPE_LONG)])
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1), (2, 2)])
    first = log.publish()
    name = "lake.wsnap_re.s__re"
    apply_manifests(spark, [first], MergeOptions(namespace="wsnap_re"))
    spark.sql(f"DELETE FROM {name} WHERE id = 2")  # the table went wrong
    repair = snapshot_manifest(tmp_path / "r", tm, [(1, 1), (2, 2)], log.here(), "repair")
    result = apply_manifests(spark, [repair], MergeOptions(namespace="wsnap_re", stream="re.partial"))
    assert result["batches"][0]["tables"][0]["status"] == "committed"
    assert sorted(r[0] for r in spark.table(name).collect()) == [1, 2]
    again = apply_manifests(spark, [repair], MergeOptions(namespace="wsnap_re", stream="re.partial"))
    assert again["batches"][0]["status"] == "already-applied"

    stale = snapshot_manifest(tmp_path / "s", tm, [(1, 1), (2, 2)], log.here(), "stale")
    log.begin()
    log.rows(tm, "update", [((1, 1), (1, 10))])
    second = log.publish()
    apply_manifests(spark, [second], MergeOptions(namespace="wsnap_re"))
    with pytest.raises(MergeJobError, match="past the end of snapshot stale .* Take the snapshot again"):
        apply_manifests(spark, [stale], MergeOptions(namespace="wsnap_re", stream="re.partial2"))
    assert {r[0]: r[1] for r in spark.table(name).collect()} == {1: 10, 2: 2}
    # the repair, merged again after the incremental load went on: it applied, nothing happens
    again = apply_manifests(spark, [repair], MergeOptions(namespace="wsnap_re", stream="re.partial"))
    assert again["batches"][0]["status"] == "already-applied"


@pytest.mark.parametrize("staged_on", ["local", "s3"])
def test_a_killed_watermark_snapshot_resumes_at_its_last_sealed_chunk(mariadb, spark, tmp_path, staged_on,
                                                                      request, monkeypatch):
    """SIGKILL just before the 5th chunk is sealed, writers writing all along; the rerun with the
    same key continues after the 4th chunk: the rows read twice are the one chunk being read at
    the kill, and the merged Iceberg tables equal MariaDB. Staged on S3, the rerun runs as on
    another machine (another local work area): it resumes from the sealed work kept on the store."""
    import json
    import subprocess
    import sys

    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions
    from airflow_provider_binlog.staging.manifest import load_manifest

    create(mariadb)
    log = tmp_path / "child.log"
    staging, other_machine, first_machine = str(tmp_path / "staging"), {}, {}
    if staged_on == "s3":
        s3 = request.getfixturevalue("s3_server")
        for key, value in s3.env().items():
            monkeypatch.setenv(key, value)
        bucket = s3.create_bucket()
        staging = f"s3://{bucket}/snap"
        (tmp_path / "other-machine").mkdir()
        (tmp_path / "first-machine").mkdir()
        other_machine = {"TMPDIR": str(tmp_path / "other-machine")}
        first_machine = {"TMPDIR": str(tmp_path / "first-machine")}
    spec = {"host": mariadb.host, "port": mariadb.port, "user": mariadb.user, "password": mariadb.password,
            "staging": staging, "tables": [f"{DB}.*"], "chunk_rows": 97,
            "resume_key": "dag/run/snapshot", "kill_at_seal": 5, "log": str(log)}
    stop, counts = threading.Event(), {"writes": 0}
    # about a thousand writes a second at most: the snapshot, in another process, must be able
    # to follow them (a source writing faster than the binlog is followed never lets it finish)
    writer = threading.Thread(target=write, args=(mariadb, stop, 7, counts, 0.001))
    writer.start()
    try:
        killed = subprocess.run([sys.executable, "tests/integration/_watermark_child.py", json.dumps(spec)],
                                capture_output=True, text=True, timeout=300, env={**os.environ, **first_machine})
        assert killed.returncode == -9, killed.stderr[-2000:]
        first = log.read_text().split("\n")
        # what the killed run read after its last seal: the chunk being sealed when it died
        last_seal = max(i for i, line in enumerate(first) if line == "seal")
        read_twice = sum(int(line.split()[1]) for line in first[last_seal + 1:] if line.startswith("select"))
        assert first.count("seal") == 4 and 0 < read_twice <= 97, first
        log.write_text("")
        again = subprocess.run([sys.executable, "tests/integration/_watermark_child.py",
                                json.dumps({**spec, "kill_at_seal": 0})], capture_output=True, text=True, timeout=280,
                               env={**os.environ, **other_machine})
        assert again.returncode == 0, again.stderr[-3000:]
        time.sleep(0.2)
    finally:
        stop.set()
        writer.join()
    assert "error" not in counts, counts
    second = log.read_text().split("\n")
    published = next(line.split(" ", 1)[1] for line in second if line.startswith("published"))
    snap = load_manifest(published)
    # the resumed run went on after the 4 chunks sealed (of 97 rows: the first table, coded, has 800)
    assert snap.data["snapshot_stats"]["resumed"] is True
    assert snap.data["snapshot_stats"]["resumed_after_rows"] == 4 * 97
    if staged_on == "local":
        assert not list((tmp_path / "staging").glob(".incomplete-*"))  # nothing left behind
    else:  # the sealed work kept on the store goes once the batch is published
        keys = [o["Key"] for o in s3.client().list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert keys and not [k for k in keys if k.startswith("snap/.resumable/")], keys
        assert not list((tmp_path / "other-machine").glob("*/.incomplete-*"))
    rc = replica_factory(mariadb)()
    rc.connect()
    try:
        inc = run_dump(rc, staging_dir=tmp_path / "staging", start=snap.end,
                       tables=TableFilter([f"{DB}.*"]), history=SchemaHistory.from_json(snap.schema_history_json))
    finally:
        rc.close()
    namespace = f"wsnap_kill_{staged_on}"
    apply_manifests(spark, [snap.ref, inc.manifest.directory], MergeOptions(namespace=namespace))
    got = {r[0]: tuple(r) for r in spark.sql(f"SELECT id, v, s FROM lake.{namespace}.wsnap__items").collect()}
    assert got == source(mariadb, "items", 1, ("id", "v", "s"))
    got = {(r[0], r[1]): tuple(r) for r in spark.sql(f"SELECT a, b, n FROM lake.{namespace}.wsnap__pairs").collect()}
    assert got == source(mariadb, "pairs", 2, ("a", "b", "n"))


def test_a_change_log_reloaded_after_the_incremental_load_logged_part_of_the_snapshot_holds_each_change_once(
        spark, tmp_path):
    """A keyless table (a change log): the incremental load logs the changes up to 204; a
    watermark snapshot from 104 to 304 is merged after it: its rows go in, its changes before 204
    (logged already) do not, those after do."""
    import datetime as dt

    from airflow_provider_binlog.codec import constants as C
    from tests.merging import apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions
    from tests.integration.test_merge_job import Binlog, col, table_map

    tm = table_map("s", "log", [col(0, "k", C.MYSQL_TYPE_LONG), col(1, "v", C.MYSQL_TYPE_LONG)])
    log = Binlog(tmp_path).begin()
    log.rows(tm, "insert", [(1, 1)])                                   # at 4
    first = log.publish()                                              # 4 .. 104
    log.begin()
    log.rows(tm, "insert", [(2, 2)])                                   # at 104
    second = log.publish()                                             # 104 .. 204
    apply_manifests(spark, [first, second], MergeOptions(namespace="wsnap_log"))
    snap = Binlog(tmp_path / "snap").begin()
    snap.pos = 104
    start = snap.here()
    snap.rows(tm, "insert", [(2, 2)])                                  # at 104: logged already
    snap.writer.add_snapshot_rows(tm, [(1, 1), (2, 2)], binlog_file=snap.file, position=250, gtid=None,
                                  taken_at=dt.datetime.now(dt.timezone.utc), first_index=-(2 ** 31))
    snap.pos = 260
    snap.rows(tm, "insert", [(3, 3)])                                  # at 260: new
    snap.pos = 304
    manifest = snap.writer.publish(dump_id="wsnap-log", start=start.to_json(), end=snap.here().to_json(),
                                   server={"flavor": "mysql"}, extra={"mode": "snapshot"})
    apply_manifests(spark, [manifest], MergeOptions(namespace="wsnap_log", stream="log.partial"))
    rows = spark.sql("SELECT _op, _binlog_pos, k FROM lake.wsnap_log.s__log "
                     "ORDER BY _binlog_seq, _binlog_pos, _row").collect()
    assert [tuple(r) for r in rows] == [("insert", 4, 1), ("truncate", 103, None), ("insert", 104, 2),
                                       ("insert", 250, 1), ("insert", 250, 2), ("insert", 260, 3)]
