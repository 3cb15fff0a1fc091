"""The loads' metrics reach a StatsD listener on loopback through Airflow's own Stats: a sensor
check, a dump, a snapshot and a merge summary run in a process whose Airflow sends StatsD (``[metrics]
statsd_on``, as a task runner initializes it), against a live MariaDB."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading

import pytest

pytest.importorskip("airflow")
pytest.importorskip("statsd")

from airflow_provider_binlog.checkpoints import ABSENT, Checkpoint, FileCheckpointStore  # noqa: E402

SCRIPT = textwrap.dedent("""
    import sys
    from airflow.sdk.observability import stats
    from airflow.sdk.observability.metrics import stats_utils

    stats.initialize(factory=stats_utils.get_stats_factory(), export_legacy_names=True)
    from airflow_provider_binlog.utils.metrics import record_merge
    from airflow_provider_binlog.operators.dump import BinlogDumpOperator
    from airflow_provider_binlog.operators.snapshot import BinlogSnapshotOperator
    from airflow_provider_binlog.operators.settings import SnapshotSettings
    from airflow_provider_binlog.sensors.position import BinlogPositionSensor

    staging = sys.argv[1]
    BinlogPositionSensor(task_id="wait", binlog_conn_id="metrics_db", checkpoint_key="shop").poke(context={})
    BinlogDumpOperator(task_id="dump", binlog_conn_id="metrics_db", staging=staging,
                       checkpoint_key="shop", tables=["metricsdb.*"]).execute(context={})
    BinlogSnapshotOperator(task_id="snap", binlog_conn_id="metrics_db", staging=staging + "-snapshot",
                           tables=["metricsdb.*"], snapshot=SnapshotSettings(chunk_rows=2)).execute(context={})
    record_merge("shop", {"tables": {"metricsdb.orders": {"inserted": 3, "updated": 2, "deleted": 0}}}, 1.5)
""")


class Listener:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            self.lines += data.decode().splitlines()

    def close(self) -> dict[str, list[str]]:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()
        out: dict[str, list[str]] = {}
        for line in self.lines:  # name:value|type
            name, _, rest = line.partition(":")
            out.setdefault(name, []).append(rest)
        return out


def test_sensor_dump_and_merge_send_their_metrics_to_statsd(mariadb, tmp_path):
    mariadb.execute("CREATE DATABASE IF NOT EXISTS metricsdb")
    mariadb.execute("DROP TABLE IF EXISTS metricsdb.orders")
    mariadb.execute("CREATE TABLE metricsdb.orders (id INT PRIMARY KEY, qty INT)")
    file, pos = mariadb.master_status()
    store = FileCheckpointStore(tmp_path / "store")
    store.save("shop", Checkpoint(file=file, position=pos, flavor="mariadb"), expected=ABSENT)
    mariadb.execute("INSERT INTO metricsdb.orders VALUES (1, 1), (2, 2), (3, 3), (4, 4)")
    mariadb.execute("UPDATE metricsdb.orders SET qty = qty + 1 WHERE id <= 2")
    mariadb.execute("DELETE FROM metricsdb.orders WHERE id = 4")
    listener = Listener()
    env = {**os.environ,
           "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
           "AIRFLOW__METRICS__STATSD_PORT": str(listener.port), "AIRFLOW__METRICS__STATSD_PREFIX": "airflow",
           "AIRFLOW_CONN_METRICS_DB": json.dumps({
               "conn_type": "mysql_binlog", "host": mariadb.host, "port": mariadb.port, "login": mariadb.user,
               "password": mariadb.password, "extra": {"server_id": 7392, "checkpoint_store_uri": str(store.root)}})}
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "staging")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        metrics = listener.close()
    # the dump: rows per table and operation, under the name that holds the tags
    assert metrics["airflow.binlog.dump.rows.shop.metricsdb__orders.insert"] == ["4|c"]
    assert metrics["airflow.binlog.dump.rows.shop.metricsdb__orders.update"] == ["2|c"]
    assert metrics["airflow.binlog.dump.rows.shop.metricsdb__orders.delete"] == ["1|c"]
    assert sorted(metrics["airflow.binlog.dump.rows"]) == ["1|c", "2|c", "4|c"]   # the tagged name
    assert metrics["airflow.binlog.dump.transactions.shop"] == ["3|c"]
    assert int(metrics["airflow.binlog.dump.bytes.shop"][0].split("|")[0]) > 0
    assert metrics["airflow.binlog.dump.duration.shop"][0].endswith("|ms")
    # the sensor: the lag it saw
    assert int(metrics["airflow.binlog.lag.bytes.shop"][0].split("|")[0]) > 0
    assert metrics["airflow.binlog.lag.bytes.shop"][0].endswith("|g")
    assert metrics["airflow.binlog.lag.transactions.shop"] == ["3|g"]
    assert 0 <= float(metrics["airflow.binlog.lag.seconds.shop"][0].split("|")[0]) < 60
    # the snapshot, chunk by chunk (3 rows in chunks of 2), under the connection id
    assert metrics["airflow.binlog.snapshot.rows.metrics_db.metricsdb__orders"] == ["2|c", "1|c"]
    assert metrics["airflow.binlog.snapshot.rows_read.metrics_db.metricsdb__orders"] == ["2|g", "3|g"]
    assert metrics["airflow.binlog.snapshot.duration.metrics_db"][0].endswith("|ms")
    # the merge
    assert metrics["airflow.binlog.merge.rows.shop.metricsdb__orders.insert"] == ["3|c"]
    assert metrics["airflow.binlog.merge.rows.shop.metricsdb__orders.update"] == ["2|c"]
    assert "airflow.binlog.merge.rows.shop.metricsdb__orders.delete" not in metrics   # nothing deleted
    assert [float(v.split("|")[0]) for v in metrics["airflow.binlog.merge.duration.shop"]] == [1500.0]
