"""Bounded dumps from a live MariaDB into Parquet staging: replaying the staged changes
reproduces the source table, consecutive dumps cover every change exactly once."""
from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import textwrap
from decimal import Decimal

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import ReplicaConnection
from airflow_provider_binlog.staging import load_manifest
from airflow_provider_binlog.common.tables import TableFilter

COLUMNS = ("id", "name", "price", "qty", "seen", "flag", "doc", "big")


def replica(server):
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=4242)
    rc.connect()
    return rc


def replay(manifests, table, model=None):
    """Apply staged changes to a dict keyed by primary key, in binlog order."""
    model = dict(model or {})
    for manifest in manifests:
        for entry in manifest.tables:
            if entry["table"] != table:
                continue
            for path in manifest.files(entry):
                rows = read_parquet(path).to_pylist()
                rows.sort(key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row"]))
                for r in rows:
                    if r["_op"] in ("update", "delete"):
                        model.pop(r["_before"]["id"], None)
                    if r["_op"] in ("insert", "update"):
                        model[r["_after"]["id"]] = tuple(r["_after"][c] for c in COLUMNS)
    return model


def source_rows(server, table, database="dumpdb"):
    rows = server.query(f"SELECT {', '.join(COLUMNS)} FROM {database}.{table}")
    out = {}
    for r in rows:
        r = list(r)
        r[4] = r[4]  # DATETIME(6) naive, same as staged
        out[r[0]] = tuple(r)
    return out


def workload(server, table, rng, n, database="dumpdb"):
    for _ in range(n):
        op = rng.random()
        key = rng.randint(1, 60)
        if op < 0.5:
            server.execute(
                f"INSERT INTO {database}.{table} VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                "ON DUPLICATE KEY UPDATE name = VALUES(name), qty = qty + 1",
                (key, f"n{rng.randint(0, 999)}é", Decimal(rng.randint(-99999, 99999)) / 100,
                 rng.randint(0, 2**32 - 1), dt.datetime(2024, 1, 1, 0, 0, 0, rng.randint(0, 999999)),
                 rng.choice(["a", "b", "c"]), '{"k": %d}' % key, rng.randint(0, 2**64 - 1)))
        elif op < 0.8:
            server.execute(f"UPDATE {database}.{table} SET id = id + 100 WHERE id = %s", (key,)) \
                if rng.random() < 0.1 else \
                server.execute(f"UPDATE {database}.{table} SET price = price + 1, flag = 'b' WHERE id = %s", (key,))
        else:
            server.execute(f"DELETE FROM {database}.{table} WHERE id = %s", (key,))


@pytest.fixture()
def table(mariadb, request):
    name = request.node.name.split("[")[0][5:40]
    mariadb.execute("CREATE DATABASE IF NOT EXISTS dumpdb")
    mariadb.execute(f"DROP TABLE IF EXISTS dumpdb.{name}")
    mariadb.execute(f"CREATE TABLE dumpdb.{name} (id INT PRIMARY KEY, name VARCHAR(40), "
                    "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                    "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
    return name


def here(server):
    file, pos = server.master_status()
    return Checkpoint(file=file, position=pos, flavor="mariadb")


def test_staged_changes_replay_to_the_source_table(mariadb, table, tmp_path):
    start = here(mariadb)
    workload(mariadb, table, random.Random(1), 300)
    rc = replica(mariadb)
    result = run_dump(rc, staging_dir=tmp_path, start=start, tables=TableFilter([f"dumpdb.{table}"]))
    rc.close()
    manifest = load_manifest(result.manifest.path)
    assert replay([manifest], table) == source_rows(mariadb, table)
    (entry,) = manifest.tables
    assert entry["primary_key"] == ["id"]
    assert all(entry["rows"][op] > 10 for op in ("insert", "update", "delete"))
    assert result.end.file == mariadb.master_status()[0] and result.end.position == mariadb.master_status()[1]
    assert oct(os.stat(manifest.files(entry)[0]).st_mode & 0o777) == "0o600"


def test_two_consecutive_dumps_cover_every_change_exactly_once(mariadb, table, tmp_path):
    start = here(mariadb)
    rng = random.Random(2)
    workload(mariadb, table, rng, 150)
    rc = replica(mariadb)
    first = run_dump(rc, staging_dir=tmp_path, start=start, tables=TableFilter([f"dumpdb.{table}"]))
    workload(mariadb, table, rng, 150)
    mariadb.flush_binary_logs()          # the second window spans two files
    workload(mariadb, table, rng, 50)
    second = run_dump(rc, staging_dir=tmp_path, start=first.end, tables=TableFilter([f"dumpdb.{table}"]))
    rc.close()
    assert second.start == first.end
    model = replay([first.manifest, second.manifest], table)
    assert model == source_rows(mariadb, table)
    positions = []
    for m in (first.manifest, second.manifest):
        for entry in m.tables:
            for path in m.files(entry):
                t = read_parquet(path, columns=["_binlog_seq", "_binlog_pos", "_row"]).to_pylist()
                positions += [(r["_binlog_seq"], r["_binlog_pos"], r["_row"]) for r in t]
    assert len(positions) == len(set(positions))


def test_row_limit_cuts_on_a_transaction_boundary(mariadb, table, tmp_path):
    start = here(mariadb)
    mariadb.execute(f"INSERT INTO dumpdb.{table} (id) VALUES " + ",".join(f"({i})" for i in range(1, 41)))
    mariadb.execute(f"INSERT INTO dumpdb.{table} (id) VALUES " + ",".join(f"({i})" for i in range(41, 81)))
    rc = replica(mariadb)
    result = run_dump(rc, staging_dir=tmp_path, start=start, max_rows=10,
                      tables=TableFilter([f"dumpdb.{table}"]))
    rest = run_dump(rc, staging_dir=tmp_path, start=result.end, tables=TableFilter([f"dumpdb.{table}"]))
    rc.close()
    # the first transaction holds 40 rows: the dump finishes it and stops there
    assert result.rows[f"dumpdb.{table}"]["insert"] == 40
    assert rest.rows[f"dumpdb.{table}"]["insert"] == 40
    assert result.end < rest.end


def test_dump_from_gtid_equals_dump_from_file_position(mariadb, table, tmp_path):
    start = here(mariadb)
    gtid_before = mariadb.query("SELECT @@gtid_binlog_pos")[0][0]
    workload(mariadb, table, random.Random(3), 60)
    rc = replica(mariadb)
    by_pos = run_dump(rc, staging_dir=tmp_path / "a", start=start, tables=TableFilter([f"dumpdb.{table}"]))
    by_gtid = run_dump(rc, staging_dir=tmp_path / "b", tables=TableFilter([f"dumpdb.{table}"]),
                       start=Checkpoint(gtid=MariadbGtidPosition.parse(gtid_before), flavor="mariadb"))
    rc.close()
    assert replay([by_gtid.manifest], table) == replay([by_pos.manifest], table)
    assert by_gtid.end.position == by_pos.end.position and by_gtid.end.file == by_pos.end.file
    assert str(by_gtid.end.gtid) == str(by_pos.end.gtid) == mariadb.query("SELECT @@gtid_binlog_pos")[0][0]


def test_killed_dump_publishes_nothing_and_a_rerun_succeeds(mariadb, table, tmp_path):
    start = here(mariadb)
    mariadb.execute(f"INSERT INTO dumpdb.{table} (id, name) VALUES " +
                    ",".join(f"({i}, '{'x' * 30}')" for i in range(1, 20001)))
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from airflow_provider_binlog import staging
        from airflow_provider_binlog.staging import parts
        original = parts.PartFile.append_event
        count = [0]
        def slow(self, *a, **kw):
            result = original(self, *a, **kw)
            count[0] += 1
            if count[0] == 20:  # some rows staged, some row groups maybe flushed
                # one write: the two staging workers may both get here
                sys.stdout.write("mid-dump\\n")
                sys.stdout.flush()
                time.sleep(60)
            return result
        parts.PartFile.append_event = slow
        from airflow_provider_binlog.checkpoints import Checkpoint
        from airflow_provider_binlog.capture.dump import run_dump
        from airflow_provider_binlog.replica import ReplicaConnection
        rc = ReplicaConnection({mariadb.host!r}, {mariadb.port}, {mariadb.user!r}, {mariadb.password!r}, server_id=4343)
        rc.connect()
        run_dump(rc, staging_dir={str(tmp_path)!r}, start=Checkpoint(file={start.file!r}, position={start.position}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "mid-dump"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not list(tmp_path.glob("*/manifest.json"))
    rc = replica(mariadb)
    result = run_dump(rc, staging_dir=tmp_path, start=start, tables=TableFilter([f"dumpdb.{table}"]))
    rc.close()
    assert result.rows[f"dumpdb.{table}"]["insert"] == 20000
    assert len(list(tmp_path.glob("*/manifest.json"))) == 1


def test_connection_cut_mid_event_resumes_without_loss_or_duplicates(mariadb, table, tmp_path):
    from tests.cutting_proxy import CuttingProxy
    start = here(mariadb)
    workload(mariadb, table, random.Random(7), 400)
    # cut the replication stream twice, well inside the binlog data
    proxy = CuttingProxy(mariadb.host, mariadb.port, cut_after=30_000, cuts=2)
    rc = ReplicaConnection("127.0.0.1", proxy.port, mariadb.user, mariadb.password, server_id=4444)
    rc.connect()
    stop = here(mariadb)
    try:
        result = run_dump(rc, staging_dir=tmp_path, start=start, stop=stop, backoff_seconds=0.05,
                          tables=TableFilter([f"dumpdb.{table}"]))
    finally:
        rc.close()
        proxy.close()
    assert proxy.cuts_done == 2
    assert (result.end.file, result.end.position) == (stop.file, stop.position)
    assert replay([result.manifest], table) == source_rows(mariadb, table)
    positions = []
    for entry in result.manifest.tables:
        for path in result.manifest.files(entry):
            t = read_parquet(path, columns=["_binlog_seq", "_binlog_pos", "_row"]).to_pylist()
            positions += [(r["_binlog_seq"], r["_binlog_pos"], r["_row"]) for r in t]
    assert len(positions) == len(set(positions))


def test_ddl_on_captured_tables_is_recorded_with_positions(mariadb, table, tmp_path):
    start = here(mariadb)
    mariadb.execute(f"INSERT INTO dumpdb.{table} (id) VALUES (1), (2)")
    mariadb.execute(f"ALTER TABLE dumpdb.{table} ADD COLUMN extra INT")
    mariadb.execute(f"TRUNCATE TABLE dumpdb.{table}")
    mariadb.execute(f"INSERT INTO dumpdb.{table} (id) VALUES (3)")
    mariadb.execute(f"RENAME TABLE dumpdb.{table} TO dumpdb.{table}_r")
    mariadb.execute("CREATE TABLE IF NOT EXISTS dumpdb.other_tbl (id INT PRIMARY KEY)")
    rc = replica(mariadb)
    result = run_dump(rc, staging_dir=tmp_path, start=start, tables=TableFilter([f"dumpdb.{table}*"]))
    rc.close()
    mariadb.execute(f"DROP TABLE dumpdb.{table}_r")
    ddl = result.manifest.data["ddl"]
    assert [d["kind"] for d in ddl] == ["alter", "truncate", "rename"]
    assert ddl[0]["tables"] == [f"dumpdb.{table}"]
    assert ddl[2]["tables"] == [f"dumpdb.{table}", f"dumpdb.{table}_r"]
    assert ddl[0]["pos"] < ddl[1]["pos"] < ddl[2]["pos"]
    (entry,) = result.manifest.tables
    # the insert after TRUNCATE lies between the truncate and the rename
    rows = read_parquet(result.manifest.files(entry)[-1]).to_pylist()
    assert ddl[1]["pos"] < rows[-1]["_binlog_pos"] < ddl[2]["pos"]
    assert len({f["fingerprint"] for f in entry["files"]}) == 2  # ADD COLUMN: a new file layout
