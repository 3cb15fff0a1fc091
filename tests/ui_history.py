"""A small load history of a live MariaDB source, made with the project's own code, for the
tests of the Binlog CDC view: a checkpoint store whose history holds an initial checkpoint
and the advances of a few merged dumps, the staged manifests of those dumps, one more dump
staged but not merged, and changes after it, so the source is behind.

The merges are simulated by advancing the checkpoint store the way the merge job does
(compare-and-set to the dump's end): the view reads the store and the manifests, not Iceberg.
The runs are spread over the last hour (the store's clock and the manifests' times) so the
charts have a time axis worth looking at.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_binlog.checkpoints import ABSENT, Checkpoint, FileCheckpointStore
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import ReplicaConnection
from airflow_provider_binlog.common.tables import TableFilter
from tests.airflow_conn import SECRET, USER, create_user

UTC = dt.timezone.utc


@dataclass
class LoadHistory:
    conn_id: str
    key: str
    store_dir: Path
    staging_dir: Path
    database: str
    dumps: list = field(default_factory=list)       # DumpResult.to_json() of each dump, oldest first
    merged: int = 0                                 # how many of them advanced the checkpoint
    dump_times: list = field(default_factory=list)

    def connection(self, server, **extra) -> dict:
        """The ``AIRFLOW_CONN_<ID>`` JSON document of the source."""
        return {"conn_type": "mysql_binlog", "host": server.host, "port": server.port, "login": USER,
                "password": SECRET,
                "extra": {"server_id": 7311, "checkpoint_store_uri": str(self.store_dir), **extra}}

    def ui_source(self) -> dict:
        """The source's entry of ``[binlog] ui_sources``."""
        return {"conn_id": self.conn_id, "checkpoint_key": self.key, "staging_dir": str(self.staging_dir)}


def _workload(server, db: str, rng: random.Random, run: int, next_id: list) -> None:
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            n = 30 + 25 * run
            rows = [(next_id[0] + i, f"customer {next_id[0] + i}", round(rng.uniform(5, 500), 2))
                    for i in range(n)]
            next_id[0] += n
            cur.executemany("INSERT INTO orders (id, customer, amount) VALUES (%s, %s, %s)", rows)
            cur.executemany("INSERT INTO customers (id, name) VALUES (%s, %s)",
                            [(r[0], r[1]) for r in rows[: n // 3]])
            cur.execute("UPDATE orders SET amount = amount + 1 WHERE id %% 4 = %s", (run % 4,))
            cur.execute("DELETE FROM orders WHERE id %% 9 = %s", (run % 9,))
    finally:
        conn.close()


def _rewrite_times(manifest_path: str, created_at: dt.datetime) -> None:
    path = Path(manifest_path)
    data = json.loads(path.read_text())
    duration = float(data.get("duration_seconds") or 0)
    data["created_at"] = created_at.isoformat()
    data["started_at"] = (created_at - dt.timedelta(seconds=duration)).isoformat()
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def build_history(server, root: Path, *, conn_id: str = "shop_db", runs: int = 4, pending: bool = True,
                  now: dt.datetime | None = None, key: str | None = None) -> LoadHistory:
    """Make the history under ``root`` (see the module docstring); the last of ``runs`` dumps is
    left unmerged when ``pending``. The checkpoint is stored under ``key`` (default: the
    connection id)."""
    key = key or conn_id
    create_user(server)
    db = f"ui_{uuid.uuid4().hex[:8]}"
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(9,2))")
    server.execute(f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(40))")
    now = now or dt.datetime.now(UTC)
    base = now - dt.timedelta(minutes=15 * runs + 5)
    clock = [base]
    store_dir, staging_dir = root / "checkpoints", root / "staging"
    store = FileCheckpointStore(store_dir, clock=lambda: clock[0])
    history = LoadHistory(conn_id, key, store_dir, staging_dir, db)
    file, pos = server.master_status()
    store.save(key, Checkpoint(file=file, position=pos, flavor="mariadb"), expected=ABSENT)
    rng = random.Random(11)
    next_id = [1]
    for run in range(runs):
        _workload(server, db, rng, run, next_id)
        start = store.load(key)
        replica = ReplicaConnection(server.host, server.port, USER, SECRET, server_id=7312)
        try:
            result = run_dump(replica, staging_dir=staging_dir, start=start, tables=TableFilter([f"{db}.*"]))
        finally:
            replica.close()
        at = base + dt.timedelta(minutes=15 * run + 10)
        _rewrite_times(str(result.manifest.path), at)
        history.dumps.append(result.to_json())
        history.dump_times.append(at)
        if pending and run == runs - 1:
            continue
        clock[0] = at + dt.timedelta(minutes=2)
        store.save(key, result.end, expected=start)  # what the merge job does once committed
        history.merged += 1
    _workload(server, db, rng, runs, next_id)  # changes not dumped yet: the source is behind
    return history


def in_process_api():
    """The Binlog CDC view's REST client on Airflow's own API app in this process (its metadata
    database, a token of an admin of the simple auth manager), for tests that run DAGs with
    ``dag.test()`` and no API server; ``close()`` it after use."""
    from fastapi.testclient import TestClient

    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow_provider_binlog.plugins.api import AirflowApi

    client = TestClient(create_app(apps="core"))
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="ADMIN"))
    api = AirflowApi(token=token, identity="test-admin", client=client)
    api._own_client = True  # closed with the API client
    return api


__all__ = ["LoadHistory", "build_history", "in_process_api"]
