"""Initial snapshot: a consistent copy at known binlog coordinates, after which incremental
dumps continue with no gap and no duplicate."""
from __future__ import annotations

import random
import threading

from airflow_provider_binlog.staging.storage import read_parquet

from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.capture.snapshot import take_snapshot
from airflow_provider_binlog.common.tables import TableFilter
from tests.integration.test_dump_live import replay, replica, source_rows, table, workload  # noqa: F401


def test_snapshot_then_dump_reproduces_the_table_exactly(mariadb, table, tmp_path):  # noqa: F811
    rng = random.Random(11)
    workload(mariadb, table, rng, 200)
    stop_writer = threading.Event()

    def writer():  # changes keep arriving while the snapshot runs
        wrng = random.Random(12)
        while not stop_writer.is_set():
            workload(mariadb, table, wrng, 5)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        snap = take_snapshot(lambda: mariadb.connect(), staging_dir=tmp_path, flavor="mariadb",
                             tables=TableFilter([f"dumpdb.{table}"]),
                             server={"server_id": mariadb.server_id}, chunk_rows=7)
    finally:
        stop_writer.set()
        thread.join()
    workload(mariadb, table, rng, 100)
    assert snap.is_snapshot and snap.start == snap.end
    (entry,) = snap.tables
    staged = [r for p in snap.files(entry) for r in read_parquet(p).to_pylist()]
    assert {r["_op"] for r in staged} == {"insert"}
    assert len({r["_row"] for r in staged}) == len(staged)
    rc = replica(mariadb)
    rest = run_dump(rc, staging_dir=tmp_path, start=snap.end,
                    tables=TableFilter([f"dumpdb.{table}"]))
    rc.close()
    assert replay([snap, rest.manifest], table) == source_rows(mariadb, table)
