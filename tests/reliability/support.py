"""Shared pieces of the reliability suite: a source schema and workload, the source and the
staged / Iceberg state compared value by value, child processes that kill themselves at a
chosen point, and a restart of a private MariaDB that keeps its data directory."""
from __future__ import annotations

import collections
import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable, Optional

from airflow_provider_binlog.staging.storage import read_parquet

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.replica import ReplicaConnection

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

#: ``BINLOG_RELIABILITY_TRIALS=N`` runs the full randomized set with N trials per fault;
#: unset (or 0), a representative subset runs with a fixed seed.
TRIALS = int(os.environ.get("BINLOG_RELIABILITY_TRIALS", "0") or 0)
FULL = TRIALS > 0
SEED = int(os.environ.get("BINLOG_RELIABILITY_SEED", "20240611"))


def trials(default: int = 1) -> int:
    """Trials of one randomized fault: ``BINLOG_RELIABILITY_TRIALS`` in the full set."""
    return TRIALS if FULL else default


def rng_for(name: str, trial: int = 0) -> random.Random:
    return random.Random(f"{SEED}:{name}:{trial}")


# --------------------------------------------------------------------------- source schema

#: Tables of the workload: two with a primary key (one composite), one without (a change log).
TABLES = {
    "items": ("CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(12,2), "
              "qty BIGINT, seen DATETIME(6), note MEDIUMTEXT, raw VARBINARY(64)) DEFAULT CHARSET=utf8mb4"),
    "pairs": ("CREATE TABLE {db}.pairs (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)) "
              "DEFAULT CHARSET=utf8mb4"),
    "events": "CREATE TABLE {db}.events (k INT, v VARCHAR(20)) DEFAULT CHARSET=utf8mb4",
}
KEYS = {"items": ("id",), "pairs": ("a", "b"), "events": ()}


def create_tables(server, db: str, tables: Iterable[str] = TABLES) -> None:
    server.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
    for name in tables:
        server.execute(f"DROP TABLE IF EXISTS {db}.{name}")
        server.execute(TABLES[name].format(db=db))


def _item(rng: random.Random, key: int) -> tuple:
    return (key, f"n{rng.randint(0, 999)}é", Decimal(rng.randint(-99999999, 99999999)) / 100,
            rng.randint(-2**63, 2**63 - 1), dt.datetime(2024, 1, 1) + dt.timedelta(
                seconds=rng.randint(0, 10**8), microseconds=rng.randint(0, 999999)),
            rng.choice([None, "", "x" * rng.randint(1, 300)]),
            bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64))))


def workload(server, db: str, rng: random.Random, transactions: int, *, tables=("items", "pairs", "events"),
             max_statements: int = 4) -> None:
    """``transactions`` random transactions of 1..``max_statements`` statements: inserts,
    updates (some changing the primary key), deletes, over ``tables``."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for _ in range(transactions):
                conn.begin()
                for _ in range(rng.randint(1, max_statements)):
                    table = rng.choice(tables)
                    r = rng.random()
                    if table == "items":
                        key = rng.randint(1, 200)
                        if r < 0.45:
                            cur.execute(f"REPLACE INTO {db}.items (id, name, amount, qty, seen, note, raw) "
                                        f"VALUES (%s, %s, %s, %s, %s, %s, %s)", _item(rng, key))
                        elif r < 0.55:
                            cur.execute(f"UPDATE IGNORE {db}.items SET id = id + 1000 WHERE id = %s", (key,))
                        elif r < 0.85:
                            cur.execute(f"UPDATE {db}.items SET amount = amount + 1, name = %s, note = NULL "
                                        f"WHERE id BETWEEN %s AND %s", (f"u{rng.randint(0, 99)}", key, key + 3))
                        else:
                            cur.execute(f"DELETE FROM {db}.items WHERE id = %s OR id = %s", (key, key + 1000))
                    elif table == "pairs":
                        a, b = rng.randint(1, 30), rng.choice(["x", "y", "z", "ñ"])
                        if r < 0.5:
                            cur.execute(f"INSERT INTO {db}.pairs VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE v = v + 1",
                                        (a, b, rng.randint(0, 100)))
                        elif r < 0.6:
                            cur.execute(f"UPDATE IGNORE {db}.pairs SET b = 'w' WHERE a = %s AND b = %s", (a, b))
                        elif r < 0.8:
                            cur.execute(f"UPDATE {db}.pairs SET v = v * 2 WHERE a = %s", (a,))
                        else:
                            cur.execute(f"DELETE FROM {db}.pairs WHERE a = %s", (a,))
                    else:
                        k = rng.randint(1, 20)
                        if r < 0.6:
                            cur.execute(f"INSERT INTO {db}.events VALUES (%s, %s)", (k, f"e{rng.randint(0, 9)}"))
                        elif r < 0.8:
                            cur.execute(f"UPDATE {db}.events SET v = CONCAT(v, '+') WHERE k = %s LIMIT 2", (k,))
                        else:
                            cur.execute(f"DELETE FROM {db}.events WHERE k = %s LIMIT 1", (k,))
                conn.commit()
    finally:
        conn.close()


def norm(value: Any) -> Any:
    """Hashable, comparable values: binary as bytes (Spark gives bytearray)."""
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def _row(values: Iterable[Any]) -> tuple:
    return tuple(norm(v) for v in values)


def source_state(server, db: str, tables: Iterable[str] = TABLES) -> dict:
    """``{table: {key: row}}`` for tables with a primary key, ``{table: Counter(rows)}``
    without; column values normalised (see :func:`norm`)."""
    out = {}
    for table in tables:
        cols = [r[0] for r in server.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))]
        keys = [r[0] for r in server.query(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND "
            "TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION", (db, table))]
        rows = server.query(f"SELECT {', '.join(quote(c) for c in cols)} FROM {quote(db)}.{quote(table)}")
        out[table] = _keyed(cols, keys, [dict(zip(cols, r)) for r in rows])
    return out


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _keyed(cols, keys, rows: list[dict]):
    if keys:
        keyed = {}
        for r in rows:
            key = tuple(norm(r[k]) for k in keys)
            assert key not in keyed, f"duplicate key {key}"
            keyed[key] = _row(r.get(c) for c in cols)
        return keyed
    return collections.Counter(_row(r.get(c) for c in cols) for r in rows)


# --------------------------------------------------------------------------- staged state


def staged_changes(manifests) -> dict:
    """``{table: [rows of the staged files]}`` in binlog order, and checks that no change is
    staged twice (the order key ``(_binlog_seq, _binlog_pos, _row)`` is unique)."""
    out: dict = collections.defaultdict(list)
    for manifest in manifests:
        for entry in manifest.tables:
            for path in manifest.files(entry):
                out[(entry["schema"], entry["table"])] += read_parquet(path).to_pylist()
    for table, rows in out.items():
        keys = [(r["_binlog_seq"], r["_binlog_pos"], r["_row"]) for r in rows]
        assert len(keys) == len(set(keys)), f"{table}: a change is staged twice"
        rows.sort(key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row"]))
    return out


def replay(manifests, db: str, tables: Iterable[str] = TABLES, columns: Optional[dict] = None) -> dict:
    """The staged changes of ``manifests`` applied in binlog order to empty tables: the state
    the source had at the end of the last manifest (same shape as :func:`source_state`)."""
    changes = staged_changes(manifests)
    out = {}
    for table in tables:
        keys = KEYS.get(table, ())
        if columns and table in columns:
            keys = columns[table][1]
        if keys:
            model: dict = {}
            for r in changes.get((db, table), []):
                if r["_op"] in ("update", "delete"):
                    model.pop(tuple(norm(r["_before"][k]) for k in keys), None)
                if r["_op"] in ("insert", "update"):
                    model[tuple(norm(r["_after"][k]) for k in keys)] = r["_after"]
            cols = columns[table][0] if columns and table in columns else None
            out[table] = {k: _row(v.get(c) for c in (cols or v)) for k, v in model.items()}
        else:
            bag: collections.Counter = collections.Counter()
            for r in changes.get((db, table), []):
                if r["_op"] in ("update", "delete"):
                    before = _row(r["_before"].values())
                    assert bag[before] > 0, f"{table}: delete of a row that is not there"
                    bag[before] -= 1
                    if not bag[before]:
                        del bag[before]
                if r["_op"] in ("insert", "update"):
                    bag[_row(r["_after"].values())] += 1
            out[table] = bag
    return out


# --------------------------------------------------------------------------- Iceberg state


def iceberg_state(spark, namespace: str, db: str, tables: Iterable[str] = TABLES, *, catalog: str = "lake",
                  refresh: bool = False) -> dict:
    """The Iceberg tables of ``db`` in ``namespace``, like :func:`source_state`. A table without
    a primary key is a change log: it is replayed (inserts and deletes) into a multiset."""
    from airflow_provider_binlog.common.tables import iceberg_table_name

    out = {}
    for table in tables:
        name = f"{catalog}.{namespace}.{iceberg_table_name(db, table)}"
        if not spark.catalog.tableExists(name):  # none yet: every merge so far was killed or refused
            out[table] = {} if KEYS.get(table) else collections.Counter()
            continue
        if refresh:
            spark.sql(f"REFRESH TABLE {name}")
        df = spark.table(name)
        fields = [f.name for f in df.schema.fields]
        rows = [r.asDict() for r in df.collect()]
        if "_op" in fields:  # change log
            ordered = sorted(rows, key=lambda r: (r["_binlog_seq"], r["_binlog_pos"], r["_row"]))
            keys = [(r["_binlog_seq"], r["_binlog_pos"], r["_row"]) for r in ordered]
            assert len(keys) == len(set(keys)), f"{name}: a change is applied twice"
            out[table] = ordered
            continue
        keys = list(KEYS[table])
        out[table] = _keyed(fields, keys, rows)
    return out


def changelog_matches(log_rows: list[dict], manifests, db: str, table: str) -> None:
    """A change-log table holds each staged change once, with the staged after (before, for
    deletes) image."""
    staged = staged_changes(manifests).get((db, table), [])
    assert len(log_rows) == len(staged), f"{table}: {len(log_rows)} changes in Iceberg, {len(staged)} staged"
    for got, want in zip(log_rows, staged):
        assert (got["_binlog_seq"], got["_binlog_pos"], got["_row"], got["_op"]) == \
            (want["_binlog_seq"], want["_binlog_pos"], want["_row"], want["_op"])
        image = want["_before"] if want["_op"] == "delete" else want["_after"]
        assert _row(got[c] for c in image) == _row(image.values())


def snapshot_ids(spark, namespace: str, db: str, tables: Iterable[str] = TABLES, catalog: str = "lake") -> dict:
    """Current snapshot id of each Iceberg table of ``db`` and of the ledger (None: no table)."""
    from airflow_provider_binlog.merge.iceberg_contract import LEDGER_TABLE
    from airflow_provider_binlog.common.tables import iceberg_table_name

    out = {}
    for name in [iceberg_table_name(db, t) for t in tables] + [LEDGER_TABLE]:
        full = f"{catalog}.{namespace}.{name}"
        if not spark.catalog.tableExists(full):
            out[name] = None
            continue
        rows = spark.sql(f"SELECT snapshot_id FROM {full}.refs WHERE name = 'main'").collect()
        out[name] = rows[0][0] if rows else None
    return out


# --------------------------------------------------------------------------- processes


def replica(server, server_id: int = 5151, **kwargs) -> ReplicaConnection:
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=server_id, **kwargs)
    rc.connect()
    return rc


def here(server) -> Checkpoint:
    file, pos = server.master_status()
    return Checkpoint(file=file, position=pos, flavor="mariadb")


def server_spec(server, **extra) -> dict:
    return {"host": server.host, "port": server.port, "user": server.user, "password": server.password, **extra}


class ChildResult:
    def __init__(self, returncode: int, stdout: str, stderr: str, result: Optional[dict], seconds: float):
        self.returncode, self.stdout, self.stderr, self.result, self.seconds = \
            returncode, stdout, stderr, result, seconds

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def __repr__(self) -> str:
        return (f"ChildResult(rc={self.returncode}, {self.seconds:.1f}s, result={self.result}, "
                f"stderr tail={self.stderr[-2000:]!r})")


#: A short-lived Spark JVM starts faster with the C1 compiler only and the serial collector.
FAST_JVM = {"JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}


def run_child(script: str, spec: dict, *, timeout: float = 600, env: Optional[dict] = None) -> ChildResult:
    """Run ``tests/reliability/<script>`` with ``spec`` (JSON) in its own process group; wait
    until every process of the group (a Spark JVM too) is gone."""
    out_path = Path(spec["out"])
    if out_path.exists():
        out_path.unlink()
    env = {**os.environ, **(env or {}),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(HERE / script), json.dumps(spec)], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        raise AssertionError(f"{script} did not finish in {timeout}s:\n{stderr[-3000:]}")
    finally:
        wait_group_gone(proc.pid)
    result = json.loads(out_path.read_text()) if out_path.exists() else None
    return ChildResult(proc.returncode, stdout, stderr, result, time.monotonic() - started)


def wait_group_gone(pgid: int, timeout: float = 60) -> None:
    """Wait until no process of group ``pgid`` is left (SIGKILL them after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        except PermissionError:
            return
        if time.monotonic() > deadline:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 10
        time.sleep(0.05)


# --------------------------------------------------------------------------- server restart


def stop_server_keeping_data(server, *, crash: bool = False) -> None:
    """Stop ``server``'s mariadbd (SIGTERM, or SIGKILL with ``crash``) but keep its data
    directory, port and binlogs, unlike :meth:`MariaDBServer.stop`."""
    server.halt(crash=crash, timeout=60)


def start_server_again(server) -> None:
    """Start a server stopped by :func:`stop_server_keeping_data` on the same port and data."""
    server.start()


def restart_server(server, *, down_seconds: float = 0.0, crash: bool = False) -> None:
    stop_server_keeping_data(server, crash=crash)
    time.sleep(down_seconds)
    start_server_again(server)


def purge_to(server, name: str) -> None:
    """PURGE BINARY LOGS TO ``name``, retried until InnoDB let go of the older files."""
    deadline = time.monotonic() + 30
    while True:
        server.execute(f"PURGE BINARY LOGS TO '{name}'")
        if server.binlog_files()[0] == name:
            return
        assert time.monotonic() < deadline, f"the server kept {server.binlog_files()}"
        time.sleep(0.1)
