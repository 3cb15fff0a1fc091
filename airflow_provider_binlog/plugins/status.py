"""What the Binlog CDC view shows about each source, gathered without Airflow's web layer.

The sources (connections of type ``mysql_binlog`` and their optional configuration) are found
by :mod:`.sources`.

Per source this reads, each step on its own so one failing step leaves the others shown:

- the checkpoint store of the connection (extra ``checkpoint_store_uri``): the stored
  checkpoint and its last saves (each save is a merge that advanced it, or a snapshot);
- the server, through a short-lived read-only session (``SHOW``/``SELECT`` only; 3 s connect,
  read and write timeouts): flavor, version, current position, retained binlogs,
  ``gtid_purged``, and the lag of the checkpoint (bytes, files, transactions); not with
  ``[binlog] ui_probe_sources = False`` (nor, then, the stalled state, which needs the lag);
- the manifests of the last dumps in the staging directories (rows per operation, tables,
  duration, binlog bytes read): the lag history and the rows per run;
- optionally, task instances of ``BinlogDumpOperator``, ``BinlogSnapshotOperator`` and
  ``BinlogMergeOperator`` with their returned XCom (durations, Airflow runs, Iceberg snapshot
  ids), read through Airflow's REST API with the user's token by
  :func:`.task_runs.airflow_task_runs` (the last 14 days, at most once a minute per user;
  ``[binlog] ui_task_runs = False`` turns it off).

Nothing here writes anywhere. Every string of a result goes through :func:`redact` with the
connection's password and secret-looking extras, and no extra is ever put in a result.
"""
from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from .verified import read_verified
from .ttl_cache import TtlCache
from ..checkpoints import Checkpoint, FileCheckpointStore, SavedCheckpoint, open_checkpoint_store
from ..replica.position import PositionCheck, check_position, read_server_state
from ..utils.settings import bool_setting, env_name
from ..replica import BinlogPurgedError, ReplicaConnection, ReplicaError
from .api import AirflowApi
from .batches import DEFAULT_HISTORY, OPS, read_manifests
from .sources import SourceConfig, default_stall_seconds, discover_sources
from .task_runs import airflow_task_runs, running_snapshots, snapshot_progress
from .values import iso, short_error, utc

log = logging.getLogger(__name__)

TASK_RUNS_ENV = env_name("ui_task_runs")
PROBE_ENV = env_name("ui_probe_sources")
SERVER_TIMEOUT = 3

#: States drawn red, and the order in which a worse state wins.
RED_STATES = ("error", "purged", "stalled")
_SEVERITY = {"ok": 0, "unknown": 1, "warning": 2, "stalled": 3, "purged": 4, "error": 5}

#: Extras that hold no secret (their values may show, e.g. the flavor); every other extra's
#: value is scrubbed from what the view shows.
_PLAIN_EXTRAS = frozenset({"server_id", "flavor", "ssl", "ssl_verify", "heartbeat_seconds",
                           "connect_timeout"})
REDACTED = "***"


# ------------------------------------------------------------------------------------ redaction

def secret_values(conn) -> list[str]:
    """The password and the values of the connection's extras that may be secret (paths of
    keys and stores, anything unknown); longest first."""
    values: set[str] = set()
    password = getattr(conn, "password", None)
    if password:
        values.add(str(password))
    try:
        extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else json.loads(conn.extra or "{}")
    except Exception:
        extra = {}
        raw = getattr(conn, "extra", None)
        if raw:
            values.add(str(raw))
    if isinstance(extra, dict):
        stack = [v for k, v in extra.items() if k not in _PLAIN_EXTRAS]
        while stack:
            value = stack.pop()
            if isinstance(value, dict):
                stack.extend(value.values())
            elif isinstance(value, (list, tuple)):
                stack.extend(value)
            elif isinstance(value, str) and value:
                values.add(value)
                if value.startswith("file://"):
                    try:
                        store = open_checkpoint_store(value)
                        if isinstance(store, FileCheckpointStore):
                            values.add(store.root)
                    except Exception:
                        pass
    return sorted((v for v in values if len(v) >= 4), key=len, reverse=True)


def redact(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` with every occurrence of a secret in its strings replaced by ``***``."""
    secrets = [s for s in secrets if s]
    if not secrets:
        return value

    def walk(v):
        if isinstance(v, str):
            for s in secrets:
                if s in v:
                    v = v.replace(s, REDACTED)
            return v
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


# ------------------------------------------------------------------------------------ helpers

def checkpoint_point(value: Any) -> Optional[tuple]:
    """A comparable identity of a checkpoint (its JSON, text or object): coordinates when it
    has them, else its GTID state; None when unreadable."""
    if value is None:
        return None
    try:
        if isinstance(value, Checkpoint):
            cp = value
        elif isinstance(value, Mapping):
            cp = Checkpoint.from_json({k: v for k, v in value.items() if k in
                                       ("file", "pos", "position", "gtid", "flavor", "server_id", "server_uuid")})
        else:
            cp = Checkpoint.parse(str(value))
    except (TypeError, ValueError):
        return None
    return cp.point


def _airflow_tables(value: Mapping) -> dict:
    """``{source table: {"iceberg_table", "snapshot_id"}}`` of a merge task's XCom."""
    out = {}
    tables = value.get("tables") if isinstance(value, Mapping) else None
    if isinstance(tables, Mapping):
        for name, info in tables.items():
            if isinstance(info, Mapping):
                out[str(name)] = {"iceberg_table": info.get("iceberg_table"), "snapshot_id": info.get("snapshot_id")}
    return out


def _age(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"


human_age = _age


# ------------------------------------------------------------------------------------ one source

@dataclass
class _Status:
    data: dict = field(default_factory=dict)

    def worse(self, state: str, message: Optional[str] = None) -> None:
        if _SEVERITY[state] > _SEVERITY[self.data["state"]]:
            self.data["state"] = state
        if message:
            self.data["problems"].append({"state": state, "message": message})


def collect_source(config: SourceConfig, conn: Any, *, now: Optional[dt.datetime] = None,
                   history_limit: int = DEFAULT_HISTORY, timeout: float = SERVER_TIMEOUT,
                   stall_after_seconds: Optional[float] = None, airflow_runs: Iterable[dict] = (),
                   snapshots: Iterable[dict] = (), probe: bool = True,
                   probe_cache: Optional["TtlCache"] = None) -> dict:
    """The status of one source as a JSON-able dict. Never raises: a failing step shows as
    the source's ``error`` state and a problem message. Without ``probe``, the server is not
    queried (no position, lag, retention, nor stalled state). With ``probe_cache``, what was
    read of the source (checkpoint store, server, staging) is shared with the other users'
    pages for ``[binlog] ui_cache_seconds``."""
    now = utc(now) or dt.datetime.now(dt.timezone.utc)
    stall = config.stall_after_seconds or stall_after_seconds or default_stall_seconds()
    st = _Status({
        "conn_id": config.conn_id, "checkpoint_key": config.key, "state": "ok", "problems": [],
        "warnings": [], "server": None, "position": None, "checkpoint": None, "lag": None,
        "retention": None, "last_advance": None, "last_dump": None, "last_merge": None,
        "dumps": [], "advances": [], "tables": [], "lag_history": [], "stall_after_seconds": stall,
        "checked_at": now.isoformat(), "staging_configured": bool(config.staging_dirs),
        "found_by": config.origin, "snapshots": snapshot_progress(config.conn_id, snapshots),
        "probed": bool(probe),
    })
    secrets: list[str] = []
    try:
        if isinstance(conn, BaseException) or conn is None:
            st.worse("error", f"connection {config.conn_id!r} not found: "
                              f"{short_error(conn) if conn else 'no such connection'}")
            return st.data
        secrets = secret_values(conn)
        if config.checkpoint_store_uri:
            secrets = sorted({*secrets, config.checkpoint_store_uri}, key=len, reverse=True)
        _collect(config, conn, st, now=now, history_limit=history_limit, timeout=timeout, stall=stall,
                 airflow_runs=list(airflow_runs), probe=probe, probe_cache=probe_cache)
    except Exception as exc:  # the page must render: show it as this source's failure
        log.warning("binlog status of %s failed", config.conn_id, exc_info=True)
        st.worse("error", f"status failed: {short_error(exc)}")
    finally:
        st.data = redact(st.data, secrets)
    return st.data


def _collect(config: SourceConfig, conn: Any, st: _Status, *, now: dt.datetime, history_limit: int,
             timeout: float, stall: float, airflow_runs: list[dict], probe: bool = True,
             probe_cache: Optional["TtlCache"] = None) -> None:
    from ..hooks.binlog import BinlogHook

    data = st.data
    hook = BinlogHook(config.conn_id, connection=conn)
    data["server"] = {"host": conn.host, "port": int(conn.port) if conn.port else 3306}

    def read() -> tuple:
        """What is read of the source itself, the same for every user (on a scratch status)."""
        scratch = _Status({k: copy.deepcopy(data[k]) for k in _PROBED_KEYS})
        checkpoint, history = _read_checkpoint(hook, config, scratch, history_limit)
        check = _read_server(hook, checkpoint, scratch, timeout) if probe else None
        return scratch.data, checkpoint, history, check, _read_dumps(config, scratch, history_limit)

    key = (config.conn_id, config.key, tuple(config.staging_dirs), config.checkpoint_store_uri,
           conn.conn_type, conn.host, conn.port, conn.schema, conn.login, str(conn.extra or ""),
           bool(probe), history_limit, timeout)
    probed, checkpoint, history, check, dumps = probe_cache.get(key, read) if probe_cache else read()
    data.update(copy.deepcopy(probed))
    dumps = copy.deepcopy(dumps)  # linked below to this user's Airflow runs
    merge_runs, dump_runs = _runs_by_identity(airflow_runs)
    by_end = _link_dumps(dumps, history, dump_runs)
    data["dumps"] = dumps
    advances = _advances(history, by_end, merge_runs)
    data["advances"] = advances
    data["last_dump"] = dumps[0] if dumps else None
    data["last_merge"] = advances[0] if advances else None
    data["tables"] = _table_totals(dumps, advances)
    data["lag_history"] = _lag_history(dumps, data["lag"], now)
    data["verified"] = read_verified(config.staging_dirs, config.key)  # the last verification (verified.py)
    _check_stalled(st, check, history, now, stall)


def _read_checkpoint(hook: Any, config: SourceConfig, st: _Status, history_limit: int
                     ) -> tuple[Optional[Checkpoint], list[SavedCheckpoint]]:
    """The checkpoint store: the stored checkpoint and its last saves, newest first."""
    data = st.data
    checkpoint, history = None, []
    try:
        store = (open_checkpoint_store(config.checkpoint_store_uri) if config.checkpoint_store_uri
                 else hook.checkpoint_store())
        checkpoint = store.load(config.key)
        history = store.history(config.key, history_limit)
    except Exception as exc:
        st.worse("error", f"checkpoint store: {short_error(exc)}")
        store = None
    if store is not None and checkpoint is None:
        st.worse("warning", f"no checkpoint stored under {config.key!r} yet: run an initial snapshot "
                            "(backfill mode 'snapshot') or a first load")
    if checkpoint is not None:
        data["checkpoint"] = {**checkpoint.to_json(), "text": str(checkpoint),
                              "saved_at": iso(history[0].saved_at) if history else None}
    if history:
        data["last_advance"] = iso(history[0].saved_at)
    return checkpoint, history


def _read_server(hook: Any, checkpoint: Optional[Checkpoint], st: _Status, timeout: float
                 ) -> Optional[PositionCheck]:
    """The server, through a read-only session with short timeouts: its position, retained
    binlogs and the lag of the checkpoint (None when that could not be compared)."""
    data = st.data
    check = None
    try:
        kwargs = hook.replica_kwargs()
        kwargs.update(connect_timeout=max(1, int(timeout)), read_timeout=timeout, write_timeout=timeout,
                      init_command="SET SESSION TRANSACTION READ ONLY")
        with ReplicaConnection(**kwargs) as replica:
            info = replica.info
            data["server"].update(flavor=info.flavor, version=info.version, server_id=info.server_id)
            state = read_server_state(replica)
            data["position"] = {**state.target.to_json(), "text": str(state.target)}
            data["retention"] = {"oldest_binlog": state.oldest_file, "binlog_files": len(state.binlogs),
                                 "retained_bytes": sum(size for _, size in state.binlogs),
                                 "gtid_purged": state.gtid_purged or None, "files_of_headroom": None}
            if checkpoint is not None:
                try:
                    check = check_position(replica, checkpoint, state=state)
                except BinlogPurgedError as exc:
                    st.worse("purged", _replica_message(exc))
                except ReplicaError as exc:
                    st.worse("error", "checkpoint: " + _replica_message(exc))
    except ReplicaError as exc:
        st.worse("error", "server: " + _replica_message(exc))
    except Exception as exc:
        st.worse("error", f"server: {short_error(exc)}")
    if check is not None:
        lag = {k: check.lag.get(k) for k in ("bytes", "files", "transactions", "gtids", "seconds")}
        lag["has_new_data"] = check.has_new_data
        data["lag"] = lag
        data["retention"]["files_of_headroom"] = check.files_of_headroom
        for warning in check.warnings:
            st.worse("warning", warning)
    return check


def _read_dumps(config: SourceConfig, st: _Status, history_limit: int) -> list[dict]:
    """Summaries of the source's last staged dumps, newest first (their warnings go to the
    source's warnings)."""
    dumps, warnings = read_manifests(config.staging_dirs, history_limit)
    st.data["warnings"].extend(warnings)
    return dumps


def _runs_by_identity(airflow_runs: Iterable[dict]) -> tuple[dict, dict]:
    """The newest merge run per end checkpoint and the newest dump run per dump id."""
    merge_runs: dict = {}
    dump_runs: dict = {}
    for run in airflow_runs:  # newest first: keep the newest per identity
        value = run.get("value") if isinstance(run.get("value"), Mapping) else {}
        if run.get("kind") == "merge":
            point = checkpoint_point(value.get("end_checkpoint"))
            if point is not None:
                merge_runs.setdefault(point, run)
        elif run.get("kind") == "dump" and value.get("dump_id"):
            dump_runs.setdefault(value["dump_id"], run)
    return merge_runs, dump_runs


def _link_dumps(dumps: list[dict], history: list[SavedCheckpoint], dump_runs: Mapping) -> dict:
    """Mark each dump empty or merged (when its end checkpoint was first saved) and add its
    Airflow run; return the non-empty dumps by end checkpoint (the newest of each)."""
    saves: dict = {}
    for saved in reversed(history):  # the first save of each checkpoint
        saves.setdefault(checkpoint_point(saved.checkpoint), saved.saved_at)
    by_end: dict = {}
    for d in dumps:  # newest first
        end_point = checkpoint_point(d["end"])
        d["empty"] = d["kind"] != "snapshot" and end_point == checkpoint_point(d["start"])
        d["merged_at"] = None if d["empty"] else iso(saves.get(end_point))
        run = dump_runs.get(d["dump_id"])
        if run is not None:
            d["airflow"] = _run_ref(run)
            if d["duration_seconds"] is None and run.get("duration"):
                d["duration_seconds"] = round(float(run["duration"]), 3)
                if d["duration_seconds"]:
                    d["rows_per_second"] = round(d["total_rows"] / d["duration_seconds"], 1)
        if not d["empty"]:
            by_end.setdefault(end_point, d)
    return by_end


def _advances(history: list[SavedCheckpoint], by_end: Mapping, merge_runs: Mapping) -> list[dict]:
    """The checkpoint advances (merges), newest first, with their rows and Airflow runs when
    known."""
    advances = []
    for saved in history:
        point = checkpoint_point(saved.checkpoint)
        dump = by_end.get(point)
        entry = {"at": iso(saved.saved_at), "checkpoint": str(saved.checkpoint),
                 "dump_id": dump["dump_id"] if dump else None,
                 "rows": dict(dump["rows"]) if dump else None,
                 "total_rows": dump["total_rows"] if dump else None,
                 "duration_seconds": None, "rows_per_second": None, "snapshot_ids": {}}
        run = merge_runs.get(point)
        if run is not None:
            entry["airflow"] = _run_ref(run)
            if run.get("duration"):
                entry["duration_seconds"] = round(float(run["duration"]), 3)
                if entry["total_rows"] is not None and entry["duration_seconds"]:
                    entry["rows_per_second"] = round(entry["total_rows"] / entry["duration_seconds"], 1)
            entry["snapshot_ids"] = {k: v for k, v in _airflow_tables(run.get("value") or {}).items()}
            entry["engine"] = (run.get("value") or {}).get("engine")
        advances.append(entry)
    return advances


def _table_totals(dumps: list[dict], advances: list[dict]) -> list[dict]:
    """Per table: the changes over the dumps shown, and the newest Iceberg snapshot known."""
    tables: dict = {}
    for d in reversed(dumps):  # oldest first: the newest values win
        for name, counts in d["tables"].items():
            t = tables.setdefault(name, {"table": name, **dict.fromkeys(OPS, 0), "total": 0, "dumps": 0,
                                         "last_change": None, "iceberg_table": None, "snapshot_id": None})
            for op in OPS:
                t[op] += counts[op]
            t["total"] += sum(counts.values())
            t["dumps"] += 1
            t["last_change"] = d["created_at"]
    for entry in reversed(advances):
        for name, snap in entry["snapshot_ids"].items():
            t = tables.setdefault(name, {"table": name, **dict.fromkeys(OPS, 0), "total": 0, "dumps": 0,
                                         "last_change": None, "iceberg_table": None, "snapshot_id": None})
            if snap.get("iceberg_table"):
                t["iceberg_table"] = snap["iceberg_table"]
            if snap.get("snapshot_id") is not None:
                t["snapshot_id"] = snap["snapshot_id"]
    return [tables[k] for k in sorted(tables)]


def _lag_history(dumps: list[dict], lag: Optional[dict], now: dt.datetime) -> list[dict]:
    """The binlog bytes each dump had to read (checkpoint -> server position when it ran),
    oldest first, then the lag now."""
    points = [{"at": d["created_at"], "bytes": d["binlog_bytes"], "transactions": d["transactions"]}
              for d in reversed(dumps) if d["kind"] != "snapshot" and d["binlog_bytes"] is not None]
    if lag is not None and lag["bytes"] is not None:
        points.append({"at": now.isoformat(), "bytes": lag["bytes"],
                       "transactions": lag["transactions"], "now": True})
    return points


def _check_stalled(st: _Status, check: Optional[PositionCheck], history: list[SavedCheckpoint],
                   now: dt.datetime, stall: float) -> None:
    """Stalled: behind, and the checkpoint has not moved for more than ``stall`` seconds."""
    if check is not None and check.has_new_data and history:
        idle = (now - utc(history[0].saved_at)).total_seconds()
        if idle > stall:
            st.worse("stalled", f"the checkpoint has not advanced for {_age(idle)} (threshold "
                                f"{_age(stall)}) while the source is {_lag_text(st.data['lag'])} behind")


def _replica_message(exc: ReplicaError) -> str:
    message = getattr(exc, "message", None) or (exc.args[0] if exc.args else type(exc).__name__)
    hint = getattr(exc, "hint", "")
    return f"{message} — {hint}" if hint else str(message)


def _lag_text(lag: Optional[dict]) -> str:
    if not lag:
        return "unknown"
    parts = []
    if lag.get("bytes") is not None:
        parts.append(f"{lag['bytes']} bytes")
    if lag.get("transactions") is not None:
        parts.append(f"{lag['transactions']} transactions")
    if lag.get("seconds") is not None:
        parts.append(f"{_age(lag['seconds'])} of source time")
    return ", ".join(parts) or "some"


def _run_ref(run: Mapping) -> dict:
    return {k: (iso(run.get(k)) if k in ("start_date", "end_date") else run.get(k))
            for k in ("dag_id", "run_id", "task_id", "state", "start_date", "end_date", "duration")}


class _TTLCache:
    """One value per key (the user whose token read it), recomputed when older than ``ttl``
    seconds (the task runs of the last days and their XCom: not at every page view); at most
    ``size`` keys."""

    def __init__(self, ttl: float, size: int = 64) -> None:
        self.ttl = ttl
        self.size = size
        self._lock = threading.Lock()
        self._values: dict = {}

    def get(self, compute, key: str = ""):
        with self._lock:
            at, value = self._values.get(key, (0.0, None))
            if value is None or time.monotonic() - at >= self.ttl:
                value = compute()
                self._values.pop(key, None)
                self._values[key] = (time.monotonic(), value)
                while len(self._values) > self.size:
                    self._values.pop(next(iter(self._values)))
            return value


_task_runs_cache = _TTLCache(60.0)

#: The fields of a source's status that what is read of the source itself sets.
_PROBED_KEYS = ("server", "position", "retention", "lag", "checkpoint", "last_advance", "state", "problems",
                "warnings")


probe_cache = TtlCache(size=256)


# ------------------------------------------------------------------------------------ all sources

def collect_all(sources: list[tuple[SourceConfig, Any]], *, now: Optional[dt.datetime] = None,
                history_limit: int = DEFAULT_HISTORY, timeout: float = SERVER_TIMEOUT,
                airflow_runs: Iterable[dict] = (), max_workers: int = 8,
                snapshots: Iterable[dict] = (), probe: bool = True,
                probe_cache: Optional[TtlCache] = None) -> list[dict]:
    """The status of every source, read concurrently (one slow server delays only itself)."""
    runs, snaps = list(airflow_runs), list(snapshots)
    if not sources:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(sources))),
                            thread_name_prefix="binlog-ui") as pool:
        futures = [pool.submit(collect_source, config, conn, now=now, history_limit=history_limit,
                               timeout=timeout, airflow_runs=runs, snapshots=snaps, probe=probe,
                               probe_cache=probe_cache)
                   for config, conn in sources]
        return [f.result() for f in futures]


def gather(environ: Optional[Mapping[str, str]] = None, *, api: Optional[AirflowApi] = None,
           use_variable: bool = True, history_limit: int = DEFAULT_HISTORY, timeout: float = SERVER_TIMEOUT,
           now: Optional[dt.datetime] = None) -> dict:
    """Everything the view shows: ``{"generated_at", "sources": [...], "warnings": [...]}``;
    what Airflow knows (DAGs, connections, task runs) through ``api``, the REST API with the
    user's token (without it, only the configuration and the environment)."""
    now = utc(now) or dt.datetime.now(dt.timezone.utc)
    sources, warnings = discover_sources(environ, api=api, use_variable=use_variable)
    runs: list = []
    snapshots: list = []
    if api is not None and bool_setting("ui_task_runs"):
        try:
            runs = _task_runs_cache.get(lambda: airflow_task_runs(api), key=api.identity)
            snapshots = running_snapshots(api)  # not cached: it is what moves while the page is watched
        except Exception as exc:
            log.warning("cannot read the dump and merge task instances: %s", exc)
            warnings.append("cannot read dump and merge task runs through Airflow's REST API: "
                            + short_error(exc, 160))
    statuses = collect_all(sources, now=now, history_limit=history_limit, timeout=timeout, airflow_runs=runs,
                           snapshots=snapshots, probe=bool_setting("ui_probe_sources"), probe_cache=probe_cache)
    return {"generated_at": now.isoformat(), "sources": statuses, "warnings": warnings,
            "summary": {state: sum(1 for s in statuses if s["state"] == state) for state in _SEVERITY}}


__all__ = ["PROBE_ENV", "RED_STATES", "human_age", "TASK_RUNS_ENV", "checkpoint_point", "collect_all",
           "collect_source", "gather", "redact", "secret_values"]
