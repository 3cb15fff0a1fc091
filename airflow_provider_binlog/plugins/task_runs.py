"""The task instances of the provider's operators, read through Airflow's REST API with the
user's token: finished dump, snapshot and merge runs with their returned XCom, and running
snapshots with their published progress."""
from __future__ import annotations

import datetime as dt
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Mapping, Optional

from .api import AirflowApi, ApiError, Memo, segment
from .values import as_int, iso, utc

log = logging.getLogger(__name__)

#: The operators whose runs the view shows, and what each run is to it.
KINDS = {"BinlogMergeOperator": "merge", "BinlogDumpOperator": "dump", "BinlogSnapshotOperator": "dump"}
ALL_TASK_INSTANCES = "/dags/~/dagRuns/~/taskInstances"
#: XCom requests at once.
XCOM_WORKERS = 8

#: The returned XCom of finished task tries: they do not change (per user, who may read them).
_xcom_memo = Memo()


def _z(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def airflow_task_runs(api: AirflowApi, limit: int = 200, days: float = 14,
                      now: Optional[dt.datetime] = None) -> list[dict]:
    """The newest task instances of the dump, snapshot and merge operators with their returned
    XCom, newest first, through the REST API (``taskInstances``, ``xcomEntries``). A merge run
    is matched to a source by its end checkpoint (a save of the source's checkpoint store), a
    dump run by its dump id."""
    since = (utc(now) or dt.datetime.now(dt.timezone.utc)) - dt.timedelta(days=days)
    tis = api.pages(ALL_TASK_INSTANCES, "task_instances",
                    {"operator": list(KINDS), "end_date_gte": _z(since), "order_by": "-end_date"}, max_items=limit)
    finished = [ti for ti in tis if isinstance(ti, Mapping) and ti.get("state") == "success"]
    values = xcom_values(api, finished, "return_value", memo=True)
    out = []
    for ti in tis:
        if not isinstance(ti, Mapping):
            continue
        out.append({"kind": KINDS.get(str(ti.get("operator"))), "dag_id": ti.get("dag_id"),
                    "run_id": ti.get("dag_run_id"), "task_id": ti.get("task_id"), "state": ti.get("state"),
                    "start_date": utc(ti.get("start_date")), "end_date": utc(ti.get("end_date")),
                    "duration": ti.get("duration"), "value": values.get(_ti_key(ti))})
    return out


def running_snapshots(api: AirflowApi) -> list[dict]:
    """The snapshot task instances running now with the progress they last published (XCom
    ``snapshot_progress``: rows read and estimated rows per table)."""
    tis = api.pages(ALL_TASK_INSTANCES, "task_instances",
                    {"operator": ["BinlogSnapshotOperator"], "state": ["running"]}, max_items=100)
    tis = [ti for ti in tis if isinstance(ti, Mapping)]
    values = xcom_values(api, tis, "snapshot_progress")
    out = []
    for ti in tis:
        value = values.get(_ti_key(ti))
        if value is not None:
            out.append({"dag_id": ti.get("dag_id"), "run_id": ti.get("dag_run_id"), "task_id": ti.get("task_id"),
                        "start_date": utc(ti.get("start_date")), "progress": value})
    return out


def _ti_key(ti: Mapping) -> tuple:
    return (ti.get("dag_id"), ti.get("dag_run_id"), ti.get("task_id"), ti.get("map_index", -1))


def xcom_values(api: AirflowApi, tis: list, key: str, *, memo: bool = False) -> dict[tuple, Optional[Mapping]]:
    """The XCom ``key`` of each task instance (a mapping, else None), read concurrently; with
    ``memo``, each finished try is read once per user."""

    def one(ti: Mapping) -> Optional[Mapping]:
        memo_key = (api.identity, *_ti_key(ti), ti.get("try_number"), ti.get("end_date"), key)
        if memo and memo_key in _xcom_memo:
            return _xcom_memo.get(memo_key)
        path = (f"/dags/{segment(ti.get('dag_id'))}/dagRuns/{segment(ti.get('dag_run_id'))}/taskInstances/"
                f"{segment(ti.get('task_id'))}/xcomEntries/{segment(key)}")
        try:
            value = xcom_mapping(api.get(path, {"map_index": ti.get("map_index", -1)}).get("value"))
        except ApiError as exc:
            if exc.status != 404:  # no such XCom: None; anything else: not known now, not remembered
                log.debug("cannot read the XCom %s of %s: %s", key, _ti_key(ti), exc)
                return None
            value = None
        if memo:
            _xcom_memo.put(memo_key, value)
        return value

    if not tis:
        return {}
    with ThreadPoolExecutor(max_workers=min(XCOM_WORKERS, len(tis)), thread_name_prefix="binlog-ui-xcom") as pool:
        return dict(zip([_ti_key(ti) for ti in tis], pool.map(one, tis)))


def xcom_mapping(stored: Any) -> Optional[Mapping]:
    """An XCom value as the REST API gives it (its stored JSON: a value, or JSON text), when it
    is a mapping (else None); Airflow's encoding of tuples and sets becomes lists."""
    if isinstance(stored, (str, bytes)):
        try:
            stored = json.loads(stored)
        except ValueError:
            return None
    value = _plain_json(stored)
    return value if isinstance(value, Mapping) else None


def _plain_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        if "__classname__" in value and "__data__" in value:  # airflow.serialization.serde's encoding
            data = _plain_json(value["__data__"])
            return data if str(value["__classname__"]).startswith("builtins.") else value
        return {k: _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    return value


def snapshot_progress(conn_id: str, snapshots: Iterable[dict]) -> list[dict]:
    """The running snapshots of a source, each with its tables' rows read, estimated rows and
    percent done (the estimate is the server's sample: a table may pass 100 %)."""
    out = []
    for snap in snapshots:
        progress = snap.get("progress") or {}
        if progress.get("conn_id") != conn_id:
            continue
        tables = []
        for name, entry in sorted((progress.get("tables") or {}).items()):
            read, estimated = as_int(entry.get("rows_read")), entry.get("estimated_rows")
            percent = round(100.0 * read / estimated, 1) if isinstance(estimated, int) and estimated > 0 else None
            tables.append({"table": name, "rows_read": read, "estimated_rows": estimated, "percent": percent})
        out.append({"dag_id": snap.get("dag_id"), "run_id": snap.get("run_id"), "task_id": snap.get("task_id"),
                    "start_date": iso(utc(snap.get("start_date"))), "method": progress.get("method"),
                    "updated_at": progress.get("updated_at"), "tables": tables})
    return out


__all__ = ["KINDS", "airflow_task_runs", "running_snapshots", "snapshot_progress", "xcom_mapping", "xcom_values"]
