"""A real Airflow deployment on one machine, for ``tests/e2e/test_deployment.py`` and
``benchmarks/freshness_bench.py``: a private AIRFLOW_HOME with an SQLite metadata database,
``airflow db migrate``, then ``airflow api-server``, ``scheduler`` (LocalExecutor),
``dag-processor`` and ``triggerer`` as separate processes on loopback, driven through the REST
API with a token of the simple auth manager (DAG runs, task instances, assets, their events and
state store); :meth:`Deployment.db_rows` reads the SQLite database for what the API does not
show. A process can be stopped on purpose (:meth:`Deployment.stop_process`) and started again.

The two binlog sources of the scenario, both made by ``make_cdc_dags`` in one DAG file with the
embedded catalog and a local Spark: ``cron`` (every minute, deferrable sensor) and ``event``
(``schedule=OnNewBinlogData(poke_interval=2, min_interval=5)``), each on its own database of
one MariaDB server and its own replication connection (``AIRFLOW_CONN_<ID>``, JSON).

:class:`Writer` is a steady writer thread (inserts, updates, deletes, multi-table transactions)
that records the GTID and wall time of each commit; :func:`freshness` says when each commit
became visible in Iceberg, from the tables' snapshots (see its documentation).

Harness rules: every process writes its log under ``<home>/proc-logs/``; :meth:`Deployment.report`
gives their tails (and those of the newest task logs) for assertion messages; every wait has a
timeout; :meth:`Deployment.close` ends the process group of each process it started and then
every process that still carries the deployment's marker variable (task runners, Spark JVMs and
their Python workers).
"""
from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from airflow_provider_binlog.dags import backfill_dag_id, incremental_dag_id

#: Environment variable every process of a deployment carries (its home): how the leftovers
#: of the deployment, and only those, are found at the end.
MARKER = "BINLOG_DEPLOYMENT_HOME"
JWT_SECRET = "binlog-deployment-test-jwt-secret-0001"
SPARK_CONN_ID = "spark_deployment"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
TERMINAL_RUN_STATES = ("success", "failed")


class DeploymentError(AssertionError):
    """A wait timed out or a process died; the message ends with the processes' log tails."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40, width: int = 400) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 200_000))
            text = f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"({path}: {exc})"
    return "\n".join(line if len(line) <= width else line[:width] + " [...]" for line in text.splitlines()[-lines:])


def java17_home() -> Optional[str]:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    try:
        from airflow_provider_binlog.spark.runtime import find_java17_home

        return find_java17_home()
    except Exception:
        return None


# ---------------------------------------------------------------------------- the sources

@dataclass(frozen=True)
class Source:
    """One binlog source of the scenario: DAGs ``binlog_cdc__<source_id>`` and
    ``binlog_backfill__<source_id>``, tables ``<database>.*`` into ``lake.<namespace>``."""

    source_id: str
    database: str
    conn_id: str
    server_id: int
    schedule: str            # a Python expression in the DAG file
    options: str = ""        # more keyword arguments of make_cdc_dags, Python source
    wait: str = ""           # more fields of its WaitSettings, Python source

    @property
    def incremental(self) -> str:
        return incremental_dag_id(self.source_id)

    @property
    def backfill(self) -> str:
        return backfill_dag_id(self.source_id)

    @property
    def namespace(self) -> str:
        return f"{self.source_id}_cdc"

    @property
    def merge_app_name(self) -> str:
        return f"binlog-merge-{self.namespace}"


CRON = Source("cron", "shop_cron", "binlog_cron", 7421, '"*/1 * * * *"', "deferrable=True",
              "poke_interval=5, backfill_poke_interval=10")
EVENT = Source("event", "shop_event", "binlog_event", 7422, "OnNewBinlogData(poke_interval=2, min_interval=5)")
SOURCES = (CRON, EVENT)
TABLES = ("customers", "order_lines")

DAG_FILE = '''"""The deployment test's sources, made by the factory."""
import datetime as dt

from airflow_provider_binlog.dags import LakeSettings, OnNewBinlogData, SparkSettings, WaitSettings, make_cdc_dags
from airflow_provider_binlog.operators.verify_dag import make_verify_dag

SENSOR_TIMEOUT = {sensor_timeout}
SPARK = SparkSettings(conn_id={spark!r})
COMMON = dict(spark=SPARK, default_args={{"retries": 1, "retry_delay": dt.timedelta(seconds=5)}})
'''

DAG_SOURCE = '''
{name}_lake = LakeSettings(namespace={namespace!r}, catalog="lake", warehouse={warehouse!r})
{name}_cdc, {name}_backfill = make_cdc_dags(
    {source_id!r}, binlog_conn_id={conn_id!r}, tables=["{database}.*"], lake={name}_lake,
    staging={staging!r}, schedule={schedule}, wait=WaitSettings(timeout=SENSOR_TIMEOUT{wait}), {options}**COMMON)
{name}_verify = make_verify_dag(
    {source_id!r}, binlog_conn_id={conn_id!r}, tables=["{database}.*"], lake={name}_lake,
    staging={staging!r}, spark=SPARK, schedule=None, tries=2, merge_wait_seconds=120, poll_seconds=5)
'''


def dag_file(sources: Iterable[Source], *, warehouse: Path, staging: Path, sensor_timeout: float = 90) -> str:
    text = DAG_FILE.format(warehouse=str(warehouse), spark=SPARK_CONN_ID, sensor_timeout=sensor_timeout)
    for s in sources:
        text += DAG_SOURCE.format(name=s.source_id, source_id=s.source_id, conn_id=s.conn_id, database=s.database,
                                  namespace=s.namespace, staging=str(staging / s.source_id), schedule=s.schedule,
                                  options=f"{s.options}, " if s.options else "", warehouse=str(warehouse),
                                  wait=f", {s.wait}" if s.wait else "")
    return text


def connection_env(server, sources: Iterable[Source], store: Path, user: str, password: str) -> dict[str, str]:
    """``AIRFLOW_CONN_*`` of each source (its own replica server id, the file checkpoint store
    ``store``) and of the local Spark."""
    env = {f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}": json.dumps({"conn_type": "spark", "host": "local[2]"})}
    for s in sources:
        env[f"AIRFLOW_CONN_{s.conn_id.upper()}"] = json.dumps({
            "conn_type": "mysql_binlog", "host": server.host, "port": server.port, "login": user,
            "password": password, "extra": {"server_id": s.server_id, "flavor": "mariadb",
                                            "checkpoint_store_uri": str(store)}})
    return env


# ---------------------------------------------------------------------------- processes

@dataclass
class Proc:
    name: str
    args: list[str]
    log: Path
    popen: Optional[subprocess.Popen] = None
    starts: int = 0
    stopped: bool = False    # stopped on purpose (stop_process): not a death


class Deployment:
    """The Airflow processes of one private AIRFLOW_HOME (``home``), the DAG files
    ``dag_files`` (name -> source) in its dags folder and ``extra_env`` (connections...)."""

    SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")

    def __init__(self, home: Path, *, dag_files: dict[str, str], extra_env: dict[str, str]) -> None:
        self.home = Path(home)
        self.home.mkdir(parents=True, exist_ok=True)
        self.logs = self.home / "proc-logs"
        self.logs.mkdir(exist_ok=True)
        self.dags = self.home / "dags"
        self.dags.mkdir(exist_ok=True)
        for name, text in dag_files.items():
            (self.dags / name).write_text(text)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.airflow = str(Path(sys.executable).with_name("airflow"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET,
            "AIRFLOW__API__BASE_URL": self.base,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(self.home / "logs"),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "180",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "30",
            "AIRFLOW__BINLOG__UI_CACHE_SECONDS": "0",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            "PYTHONUNBUFFERED": "1",
            MARKER: str(self.home),
        })
        java = java17_home()
        if java:
            env["JAVA_HOME"] = java
        env.update(extra_env)
        self.env = env
        self.procs: dict[str, Proc] = {}
        self._token: Optional[str] = None
        self.events: list[str] = []   # what the harness did, with times, for the report

    # -- processes ------------------------------------------------------------------
    def note(self, text: str) -> None:
        self.events.append(f"{time.strftime('%H:%M:%S')} {text}")

    def migrate(self, timeout: float = 600) -> None:
        log = self.logs / "db-migrate.log"
        with open(log, "ab") as out:
            done = subprocess.run([self.airflow, "db", "migrate"], env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, cwd=self.home, timeout=timeout)
        if done.returncode != 0:
            raise DeploymentError(f"airflow db migrate exited with {done.returncode}:\n{tail(log, 60)}")

    def start_process(self, name: str) -> Proc:
        args = {"api-server": ["api-server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                "scheduler": ["scheduler"], "dag-processor": ["dag-processor"], "triggerer": ["triggerer"]}[name]
        proc = self.procs.get(name) or Proc(name, [self.airflow, *args], self.logs / f"{name}.log")
        with open(proc.log, "ab") as out:
            out.write(f"\n===== start {proc.starts + 1} at {time.strftime('%H:%M:%S')} =====\n".encode())
            out.flush()
            proc.popen = subprocess.Popen(proc.args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, cwd=self.home, start_new_session=True)
        proc.starts += 1
        proc.stopped = False
        self.procs[name] = proc
        self.note(f"started {name} (pid {proc.popen.pid})")
        return proc

    def stop_process(self, name: str, timeout: float = 60) -> None:
        """SIGTERM to the process group (a graceful stop), SIGKILL after ``timeout``. The
        process counts as stopped on purpose until :meth:`start_process` starts it again."""
        proc = self.procs.get(name)
        if proc is None or proc.popen is None:
            return
        proc.stopped = True
        popen = proc.popen
        if popen.poll() is None:
            _killpg(popen.pid, signal.SIGTERM)
            try:
                popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                _killpg(popen.pid, signal.SIGKILL)
                popen.wait(timeout=30)
        _killpg(popen.pid, signal.SIGKILL)  # what the leader left in its group
        self.note(f"stopped {name} (exit {popen.returncode})")

    def restart(self, name: str) -> None:
        self.stop_process(name)
        self.start_process(name)

    def check_alive(self) -> None:
        for proc in self.procs.values():
            if proc.popen is not None and not proc.stopped and proc.popen.poll() is not None:
                raise DeploymentError(f"airflow {proc.name} exited with {proc.popen.returncode}" + self.report())

    def start(self, *, timeout: float = 300) -> None:
        """Migrate, start the four services, wait until the health endpoint says all are healthy."""
        self.migrate()
        for name in self.SERVICES:
            self.start_process(name)
        self.wait_healthy(timeout=timeout)

    def wait_healthy(self, *, timeout: float = 300) -> dict:
        def healthy():
            status, body = self.request("GET", "/api/v2/monitor/health", auth=False)
            if status != 200:
                return None
            components = ("metadatabase", "scheduler", "triggerer", "dag_processor")
            ok = all((body.get(c) or {}).get("status") == "healthy" for c in components)
            return body if ok else None
        return self.wait_until("every Airflow component healthy", healthy, timeout=timeout)

    def wait_component(self, component: str, *, since: float, timeout: float = 300) -> dict:
        """Until the health endpoint says ``component`` (``triggerer``, ``scheduler``...) is
        healthy with a heartbeat after ``since`` (seconds since the epoch)."""
        def healthy():
            status, body = self.request("GET", "/api/v2/monitor/health", auth=False)
            info = ((body or {}).get(component) or {}) if status == 200 else {}
            beat = next((v for k, v in info.items() if k.endswith("heartbeat") and v), None)
            return info if info.get("status") == "healthy" and beat and epoch(beat) > since else None
        return self.wait_until(f"the {component} healthy again", healthy, timeout=timeout)

    def db_rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of a read-only query on the metadata database (SQLite), for what the REST API
        does not show (which triggerer runs a trigger)."""
        import sqlite3

        conn = sqlite3.connect(f"file:{self.home / 'airflow.db'}?mode=ro", uri=True, timeout=60)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def processes(self) -> list[int]:
        """Every process that carries this deployment's marker (its services, task runners,
        Spark JVMs and their workers), this one excluded."""
        wanted = f"{MARKER}={self.home}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if wanted in f.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def merge_drivers(self, app_name: str) -> list[int]:
        """The drivers of this deployment's merges of application ``app_name``
        (``binlog-merge-<namespace>``): spark-submit's JVM, or the job's Python process of a
        merge without Spark (whose own JVM ends with it)."""
        namespace = app_name.removeprefix("binlog-merge-")
        out = []
        for pid in self.processes():
            args = _cmdline(pid)
            if "org.apache.spark.deploy.SparkSubmit" in args and app_name in args:
                out.append(pid)
            elif "merge_cdc.py" in args and "--engine iceberg" in args and f'"namespace":"{namespace}"' in args:
                out.append(pid)
        return out

    def close(self) -> None:
        for name in reversed(list(self.procs)):
            try:
                self.stop_process(name, timeout=30)
            except Exception:  # the others must still go
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            left = self.processes()
            for pid in left:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            if left:
                time.sleep(3)

    # -- diagnostics ---------------------------------------------------------------
    def report(self, lines: int = 40) -> str:
        parts = ["", "---- harness events ----", *self.events[-30:]]
        for proc in self.procs.values():
            state = "running" if proc.popen and proc.popen.poll() is None else \
                f"exited {proc.popen.returncode if proc.popen else '?'}"
            parts += [f"---- {proc.name} ({state}) {proc.log} ----", tail(proc.log, lines)]
        task_logs = sorted((self.home / "logs").rglob("*.log"), key=lambda p: p.stat().st_mtime)[-4:] \
            if (self.home / "logs").exists() else []
        for path in task_logs:
            parts += [f"---- task log {path.relative_to(self.home)} ----", tail(path, lines)]
        return "\n".join(parts)

    def wait_until(self, what: str, predicate: Callable[[], Any], *, timeout: float, interval: float = 2.0) -> Any:
        deadline = time.monotonic() + timeout
        last_error = None
        while True:
            self.check_alive()
            try:
                value = predicate()
            except (OSError, urllib.error.URLError, ValueError) as exc:  # a service restarting
                value, last_error = None, exc
            if value:
                return value
            if time.monotonic() > deadline:
                raise DeploymentError(f"timed out after {timeout:g} s waiting for {what}"
                                      + (f" (last error: {last_error})" if last_error else "") + self.report())
            time.sleep(interval)

    # -- REST API -------------------------------------------------------------------
    def token(self, refresh: bool = False) -> str:
        """A JWT of the simple auth manager: ``GET /auth/token`` issues one without credentials
        when every user is an admin."""
        if self._token is None or refresh:
            with urllib.request.urlopen(f"{self.base}/auth/token", timeout=30) as resp:
                self._token = json.loads(resp.read())["access_token"]
        return self._token

    def request(self, method: str, path: str, body: Any = None, *, auth: bool = True,
                timeout: float = 60) -> tuple[int, Any]:
        for attempt in (1, 2):
            headers = {"Accept": "application/json"}
            if auth:
                headers["Authorization"] = f"Bearer {self.token(refresh=attempt == 2)}"
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            req = urllib.request.Request(f"{self.base}{path}", data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    status, raw = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, raw = exc.code, exc.read()
            if status == 401 and auth and attempt == 1:
                continue
            try:
                return status, json.loads(raw) if raw else None
            except ValueError:
                return status, raw.decode("utf-8", "replace")
        raise AssertionError("unreachable")

    def api(self, method: str, path: str, body: Any = None, *, expect: tuple = (200,)) -> Any:
        status, data = self.request(method, path, body)
        if status not in expect:
            raise DeploymentError(f"{method} {path} answered {status}: {str(data)[:2000]}" + self.report(20))
        return data

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns?limit=1000&order_by=run_after")["dag_runs"]

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict]:
        data = self.api("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances?limit=100")
        return {ti["task_id"]: ti for ti in data["task_instances"]}

    def tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict]:
        data = self.api("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}/tries")
        return data["task_instances"]

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self.api("PATCH", f"/api/v2/dags/{_q(dag_id)}", {"is_paused": paused})
        self.note(f"{'paused' if paused else 'unpaused'} {dag_id}")

    def trigger(self, dag_id: str, conf: Optional[dict] = None) -> str:
        data = self.api("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", {"logical_date": None, "conf": conf or {}})
        self.note(f"triggered {dag_id}: {data['dag_run_id']}")
        return data["dag_run_id"]

    def wait_dags(self, dag_ids: Iterable[str], *, timeout: float = 300) -> None:
        wanted = set(dag_ids)

        def parsed():
            errors = self.api("GET", "/api/v2/importErrors")
            if errors.get("total_entries"):
                raise DeploymentError(f"the DAG file does not import: {errors}" + self.report())
            dags = self.api("GET", "/api/v2/dags?limit=100")["dags"]
            return wanted <= {d["dag_id"] for d in dags}
        self.wait_until(f"the DAGs {sorted(wanted)} parsed", parsed, timeout=timeout)

    def wait_run(self, dag_id: str, run_id: str, *, timeout: float) -> dict:
        def ended():
            run = self.api("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
            return run if run["state"] in TERMINAL_RUN_STATES else None
        return self.wait_until(f"run {run_id} of {dag_id} to end", ended, timeout=timeout)

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self.api("GET", f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")

    def asset_id(self, uri: str) -> int:
        assets = self.api("GET", f"/api/v2/assets?limit=100&uri_pattern={_q(uri)}")["assets"]
        found = [a["id"] for a in assets if a["uri"] == uri]
        if len(found) != 1:
            raise DeploymentError(f"no single asset {uri}: {assets}")
        return found[0]

    def asset_events(self, asset_id: int) -> list[dict]:
        """The asset's events, oldest first."""
        return self.api("GET", f"/api/v2/assets/events?asset_id={asset_id}&limit=1000&order_by=timestamp")[
            "asset_events"]

    def asset_state(self, asset_id: int, key: str) -> Optional[dict]:
        """An entry of the asset's state store (``key``, ``value``, ``updated_at``,
        ``last_updated_by``), through the REST API; None when there is none."""
        status, data = self.request("GET", f"/api/v2/assets/{asset_id}/state-store/{_q(key)}")
        if status == 404:
            return None
        if status != 200:
            raise DeploymentError(f"the state store of asset {asset_id} answered {status}: {data}" + self.report(20))
        return data

    def queued_asset_events(self, dag_id: str) -> int:
        """Asset events queued for ``dag_id`` (a run the scheduler has not made yet)."""
        return self.api("GET", f"/api/v2/dags/{_q(dag_id)}/assets/queuedEvents")["total_entries"]

    def ended(self, dag_id: str) -> bool:
        return all(r["state"] in TERMINAL_RUN_STATES for r in self.dag_runs(dag_id))

    def settle(self, dag_ids: Iterable[str], *, timeout: float) -> None:
        """Pause the DAGs, each once no run of it is active. Not before: the queued runs and
        scheduled tasks of a paused DAG wait (a deferred sensor whose timeout passed is never
        resumed to be skipped). A DAG that got a new run just before it was paused is unpaused
        again until that run ends."""
        deadline = time.monotonic() + timeout
        for dag_id in dag_ids:
            while True:
                self.wait_until(f"no active run of {dag_id}", lambda: self.ended(dag_id),
                                timeout=max(deadline - time.monotonic(), 1), interval=2)
                self.set_paused(dag_id, True)
                time.sleep(5)  # a run the scheduler was making meanwhile is in the database now
                if self.ended(dag_id):
                    break
                self.set_paused(dag_id, False)


def _q(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def epoch(text: str) -> float:
    """Seconds since the epoch of a timestamp of the REST API (ISO 8601, UTC)."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------- the source data

SCHEMA = (
    "CREATE DATABASE {db}",
    "CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(60) NOT NULL, balance DECIMAL(12,2) NOT NULL, "
    "updated_at DATETIME(6) NOT NULL, note TEXT) DEFAULT CHARSET=utf8mb4",
    "CREATE TABLE {db}.order_lines (order_id BIGINT NOT NULL, line_no SMALLINT NOT NULL, sku VARCHAR(20) NOT NULL, "
    "qty INT UNSIGNED NOT NULL, price DECIMAL(8,2) NOT NULL, PRIMARY KEY (order_id, line_no))",
)
#: The schema change of the scenario, on each database, while the writer runs.
ALTER = "ALTER TABLE {db}.customers ADD COLUMN loyalty INT NOT NULL DEFAULT 5 AFTER balance"


def create_schema(server, databases: Iterable[str]) -> None:
    for db in databases:
        for statement in SCHEMA:
            server.execute(statement.format(db=db))


@dataclass
class Commit:
    """One transaction of the writer: the database, the tables it changed, its GTID sequence
    number (domain 0), the wall time COMMIT returned, rows changed."""

    database: str
    tables: tuple[str, ...]
    seq: int
    at: float
    rows: int


@dataclass
class _State:
    next_id: int = 0
    customers: set = field(default_factory=set)
    lines: set = field(default_factory=set)
    altered: bool = False


class Writer(threading.Thread):
    """Changes the tables of ``databases`` (in turn, one database per transaction) at about
    ``rows_per_second`` rows: inserts, updates and deletes of customers, orders of several lines
    that also update the customer's balance (two tables in one transaction), updates and
    deletes of lines. Records a :class:`Commit` per transaction. :meth:`alter` runs a schema
    change between two transactions; :meth:`pause`, :meth:`resume`, :meth:`stop`."""

    def __init__(self, server, databases: Iterable[str], rows_per_second: float = 30.0, seed: int = 20261127) -> None:
        super().__init__(name="binlog-deployment-writer", daemon=True)
        self.server = server
        self.databases = list(databases)
        self.rate = float(rows_per_second)
        self.rng = random.Random(seed)
        self.state = {db: _State() for db in self.databases}
        self.commits: list[Commit] = []
        self.ddl: list[tuple[str, float, int]] = []   # (statement, at, seq)
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()
        self._go = threading.Event()
        self._go.set()
        self._idle = threading.Event()
        self._pending: list[tuple[str, threading.Event]] = []
        self._mutex = threading.Lock()
        self.conn = None

    # -- control
    def pause(self, timeout: float = 30) -> None:
        self._idle.clear()
        self._go.clear()
        if self.is_alive() and not self._idle.wait(timeout):
            raise DeploymentError("the writer did not pause")

    def resume(self) -> None:
        self._go.set()

    def stop(self, timeout: float = 60) -> None:
        self._halt.set()
        self._go.set()
        self.join(timeout)
        if self.error is not None:
            raise DeploymentError(f"the writer failed: {self.error!r}")

    def commit_one(self, database: str) -> Commit:
        """One transaction on ``database`` while the writer is paused, on a connection of its
        own, recorded like the writer's."""
        if self.is_alive() and self._go.is_set():
            raise DeploymentError("commit_one needs the writer paused")
        conn = self.server.connect()
        try:
            tables, rows = self._txn(conn, database)
            commit = Commit(database, tables, self.last_seq(conn), time.time(), rows)
        finally:
            conn.close()
        self.commits.append(commit)
        return commit

    def alter(self, statement: str, timeout: float = 120) -> None:
        done = threading.Event()
        with self._mutex:
            self._pending.append((statement, done))
        if not done.wait(timeout):
            raise DeploymentError(f"the writer did not run {statement!r} in {timeout:g} s")
        if self.error is not None:
            raise DeploymentError(f"the writer failed: {self.error!r}")

    # -- the data
    def seed(self, customers: int = 200, orders: int = 150) -> None:
        """Rows before the snapshot (not recorded as commits)."""
        conn = self.server.connect()
        try:
            for db in self.databases:
                for _ in range(customers):
                    self._txn(conn, db, kind="customer_insert")
                for _ in range(orders):
                    self._txn(conn, db, kind="order")
        finally:
            conn.close()

    def _new_id(self, st: _State) -> int:
        st.next_id += 1
        return st.next_id

    def _txn(self, conn, db: str, kind: Optional[str] = None) -> tuple[tuple[str, ...], int]:
        rng, st = self.rng, self.state[db]
        now = dt.datetime.now().replace(microsecond=rng.randint(0, 999_999))
        if kind is None:
            pick = rng.random()
            kind = ("customer_insert" if pick < 0.25 or len(st.customers) < 20 else
                    "customer_update" if pick < 0.45 else
                    "customer_delete" if pick < 0.52 else
                    "order" if pick < 0.72 else
                    "line_update" if pick < 0.88 and st.lines else
                    "line_delete" if st.lines else "order")
        tables: set[str] = set()
        rows = 0
        with conn.cursor() as cur:
            conn.begin()
            if kind == "customer_insert":
                for _ in range(rng.randint(1, 2)):
                    cid = self._new_id(st)
                    cols = "id, name, balance, updated_at, note" + (", loyalty" if st.altered else "")
                    vals = [cid, f"customer {cid} {rng.choice(['Ada', 'Zoë', 'José'])}",
                            rng.randint(-10**6, 10**6) / 100, now, None if rng.random() < 0.4 else "nöte " * 3]
                    if st.altered:
                        vals.append(rng.randint(0, 9))
                    rows += cur.execute(f"INSERT INTO {db}.customers ({cols}) VALUES "
                                        f"({', '.join(['%s'] * len(vals))})", vals)
                    st.customers.add(cid)
                tables.add("customers")
            elif kind == "customer_update":
                cid = rng.choice(sorted(st.customers))
                extra = ", loyalty = loyalty + 1" if st.altered else ""
                rows += cur.execute(f"UPDATE {db}.customers SET balance = balance + 1.25, updated_at = %s, "
                                    f"name = %s{extra} WHERE id = %s", (now, f"renamed {rng.randint(1, 999)}", cid))
                tables.add("customers")
            elif kind == "customer_delete":
                cid = rng.choice(sorted(st.customers))
                rows += cur.execute(f"DELETE FROM {db}.customers WHERE id = %s", (cid,))
                st.customers.discard(cid)
                tables.add("customers")
            elif kind == "order":
                order_id = self._new_id(st)
                lines = [(order_id, n, f"sku-{rng.randint(1, 50)}", rng.randint(1, 9), rng.randint(1, 99_999) / 100)
                         for n in range(1, rng.randint(2, 4))]
                rows += cur.executemany(f"INSERT INTO {db}.order_lines (order_id, line_no, sku, qty, price) "
                                        "VALUES (%s, %s, %s, %s, %s)", lines)
                st.lines.update((o, n) for o, n, *_ in lines)
                tables.add("order_lines")
                if st.customers:
                    rows += cur.execute(f"UPDATE {db}.customers SET balance = balance - 10, updated_at = %s "
                                        "WHERE id = %s", (now, rng.choice(sorted(st.customers))))
                    tables.add("customers")
            elif kind == "line_update":
                order_id, line_no = rng.choice(sorted(st.lines))
                rows += cur.execute(f"UPDATE {db}.order_lines SET qty = qty + 1 WHERE order_id = %s AND line_no = %s",
                                    (order_id, line_no))
                tables.add("order_lines")
            else:
                key = rng.choice(sorted(st.lines))
                rows += cur.execute(f"DELETE FROM {db}.order_lines WHERE order_id = %s AND line_no = %s", key)
                st.lines.discard(key)
                tables.add("order_lines")
            conn.commit()
        return tuple(sorted(tables)), rows

    @staticmethod
    def last_seq(conn) -> int:
        with conn.cursor() as cur:
            cur.execute("SELECT @@last_gtid")
            return gtid_seq(cur.fetchone()[0])

    def run(self) -> None:
        try:
            self.conn = self.server.connect()
            began, written = time.monotonic(), 0
            turn = 0
            while not self._halt.is_set():
                if not self._go.is_set():
                    self._idle.set()
                    self._go.wait()
                    began, written = time.monotonic(), 0
                    continue
                with self._mutex:
                    pending, self._pending = self._pending, []
                for statement, done in pending:
                    with self.conn.cursor() as cur:
                        cur.execute(statement)
                    self.ddl.append((statement, time.time(), self.last_seq(self.conn)))
                    for db in self.databases:
                        if f" {db}.customers " in f" {statement} " and "ADD COLUMN loyalty" in statement:
                            self.state[db].altered = True
                    done.set()
                db = self.databases[turn % len(self.databases)]
                turn += 1
                tables, rows = self._txn(self.conn, db)
                at = time.time()
                self.commits.append(Commit(db, tables, self.last_seq(self.conn), at, rows))
                written += rows
                ahead = written / self.rate - (time.monotonic() - began)
                if ahead > 0:
                    self._halt.wait(ahead)
        except BaseException as exc:  # reported by stop()/alter()
            self.error = exc
        finally:
            self._idle.set()
            if self.conn is not None:
                self.conn.close()


def gtid_seq(gtid: str, domain: int = 0) -> int:
    """The sequence number of ``domain`` in a MariaDB GTID (position): ``0-1-57`` -> 57."""
    for part in str(gtid).split(","):
        d, _server, seq = part.strip().split("-")
        if int(d) == domain:
            return int(seq)
    raise ValueError(f"no GTID of domain {domain} in {gtid!r}")


def server_seq(server) -> int:
    return gtid_seq(server.query("SELECT @@gtid_binlog_pos")[0][0])


def stored_seq(store_uri: Path, key: str) -> Optional[int]:
    from airflow_provider_binlog.checkpoints import open_checkpoint_store

    checkpoint = open_checkpoint_store(str(store_uri)).load(key)
    return None if checkpoint is None or checkpoint.gtid is None else gtid_seq(str(checkpoint.gtid))


# ---------------------------------------------------------------------------- Iceberg

def iceberg_table(source: Source, table: str) -> str:
    return f"{source.database}__{table}"


def snapshot_checkpoints(warehouse: Path, namespace: str, table: str) -> list[tuple[int, float, str]]:
    """``(GTID sequence number, commit time in seconds, batch id)`` of every snapshot of the
    table that carries a binlog checkpoint, oldest first."""
    from airflow_provider_binlog.local.pyiceberg_check import static_table

    out = []
    for snap in static_table(warehouse, namespace, table).metadata.snapshots:
        summary = snap.summary.additional_properties if snap.summary is not None else {}
        text = summary.get("binlog.checkpoint")
        if not text:
            continue
        gtid = json.loads(text).get("gtid")
        if gtid:
            out.append((gtid_seq(gtid), snap.timestamp_ms / 1000.0, summary.get("binlog.batch_id", "")))
    return sorted(out, key=lambda s: s[1])


class Visibility:
    """When a GTID became visible in one Iceberg table: the commit time of the first snapshot
    whose checkpoint is at or after it."""

    def __init__(self, snapshots: list[tuple[int, float, str]]) -> None:
        by_seq = sorted((seq, at) for seq, at, _ in snapshots)
        self.seqs = [s for s, _ in by_seq]
        # the earliest commit time among the snapshots at or after each position
        self.first = [at for _, at in by_seq]
        for i in range(len(self.first) - 2, -1, -1):
            self.first[i] = min(self.first[i], self.first[i + 1])

    def at(self, seq: int) -> Optional[float]:
        i = bisect.bisect_left(self.seqs, seq)
        return self.first[i] if i < len(self.seqs) else None


def freshness(commits: Iterable[Commit], source: Source, warehouse: Path,
              since: float = 0.0) -> tuple[list[float], list[Commit]]:
    """Seconds from each writer commit of ``source`` (committed at ``since`` or later) until
    it was visible in Iceberg: every table it changed had a snapshot at or after its GTID
    (the commit time of that snapshot, ``timestamp-ms``, is when readers could see it). Also
    the commits never visible."""
    tables = {t: Visibility(snapshot_checkpoints(warehouse, source.namespace, iceberg_table(source, t)))
              for t in TABLES}
    out, missing = [], []
    for c in commits:
        if c.database != source.database or c.at < since:
            continue
        seen = [tables[t].at(c.seq) for t in c.tables]
        if any(s is None for s in seen):
            missing.append(c)
            continue
        out.append(max(seen) - c.at)
    return out, missing


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[k - 1]


def summary(values: list[float]) -> dict:
    return {"commits": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95),
            "max": max(values) if values else float("nan")}


def table_differences(server, warehouse: Path, source: Source) -> list[str]:
    """Each table of the source read by PyIceberg against MariaDB, every row and column."""
    from tests.all_types import normalize
    from tests.pyiceberg_reader import PyIcebergReader, plain

    reader = PyIcebergReader(warehouse=str(warehouse))
    problems = []
    for table in TABLES:
        cols = [r[0] for r in server.query(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "ORDER BY ORDINAL_POSITION", (source.database, table))]
        expected = sorted((tuple(normalize(v) for v in r) for r in server.query(
            f"SELECT {', '.join(f'`{c}`' for c in cols)} FROM {source.database}.{table}")), key=repr)
        got = sorted((tuple(normalize(plain(r[c])) for c in cols)
                      for r in reader.rows(source.namespace, iceberg_table(source, table), cols)), key=repr)
        if got != expected:
            only_src = [r for r in expected if r not in set(got)][:5]
            only_ice = [r for r in got if r not in set(expected)][:5]
            problems.append(f"{source.database}.{table}: MariaDB {len(expected)} rows, Iceberg {len(got)}; "
                            f"only in MariaDB {only_src}; only in Iceberg {only_ice}")
    return problems


# ---------------------------------------------------------------------------- the common steps

def make_deployment(home: Path, server, user: str, password: str,
                    sources: Iterable[Source] = SOURCES) -> tuple[Deployment, Path, Path]:
    """The deployment of the sources on ``server`` (not started); its warehouse and
    checkpoint store directories."""
    home = Path(home)
    warehouse, store, staging = home / "warehouse", home / "checkpoints", home / "staging"
    for d in (warehouse, store, staging):
        d.mkdir(parents=True, exist_ok=True)
    sources = list(sources)
    dep = Deployment(home / "airflow", dag_files={"binlog_deployment.py": dag_file(
        sources, warehouse=warehouse, staging=staging)},
        extra_env=connection_env(server, sources, store, user, password))
    return dep, warehouse, store


def initial_load(dep: Deployment, sources: Iterable[Source], *, timeout: float = 900) -> dict[str, str]:
    """Trigger the backfill DAGs (mode snapshot) through the REST API, wait for success."""
    sources = list(sources)
    runs = {}
    for s in sources:
        dep.set_paused(s.backfill, False)
        runs[s.source_id] = dep.trigger(s.backfill, {"mode": "snapshot"})
    for s in sources:
        run = dep.wait_run(s.backfill, runs[s.source_id], timeout=timeout)
        if run["state"] != "success":
            raise DeploymentError(f"the backfill of {s.source_id} ended {run['state']}: "
                                  f"{dep.task_instances(s.backfill, runs[s.source_id])}" + dep.report())
    return runs


def wait_loaded(dep: Deployment, sources: Iterable[Source], store: Path, final_seq: int, *,
                timeout: float = 900) -> None:
    """Until every source's stored checkpoint is at ``final_seq`` or after it."""
    for s in sources:
        dep.wait_until(f"{s.source_id} loaded up to GTID sequence {final_seq}",
                       lambda s=s: (stored_seq(store, s.source_id) or 0) >= final_seq, timeout=timeout, interval=3)
