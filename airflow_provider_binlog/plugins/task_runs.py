"""The task instances of the provider's operators, read from Airflow's metadata database:
finished dump, snapshot and merge runs with their returned XCom, and running snapshots with
their published progress."""
from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping, Optional

from .values import as_int, iso, utc


def airflow_task_runs(limit: int = 200, days: float = 14) -> list[dict]:
    """The newest task instances of the dump, snapshot and merge operators with their returned
    XCom, newest first, from the metadata database. A merge run is matched to a source by its
    end checkpoint (a save of the source's checkpoint store), a dump run by its dump id."""

    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=days)
    kinds = {"BinlogMergeOperator": "merge", "BinlogDumpOperator": "dump", "BinlogSnapshotOperator": "dump"}
    query = (
        select(TI.dag_id, TI.run_id, TI.task_id, TI.map_index, TI.state, TI.start_date, TI.end_date,
               TI.duration, TI.operator, XComModel.value)
        .outerjoin(XComModel, and_(XComModel.dag_id == TI.dag_id, XComModel.run_id == TI.run_id,
                                   XComModel.task_id == TI.task_id, XComModel.map_index == TI.map_index,
                                   XComModel.key == "return_value"))
        .where(TI.operator.in_(list(kinds)))
        .where(TI.end_date >= since)
        .order_by(TI.end_date.desc())
        .limit(limit)
    )
    out = []
    with create_session() as session:
        for row in session.execute(query):
            out.append({"kind": kinds.get(row.operator), "dag_id": row.dag_id, "run_id": row.run_id,
                        "task_id": row.task_id, "state": str(row.state) if row.state else None,
                        "start_date": row.start_date, "end_date": row.end_date, "duration": row.duration,
                        "value": _xcom_mapping(row.value)})
    return out


def running_snapshots() -> list[dict]:
    """The snapshot task instances running now with the progress they last published (XCom
    ``snapshot_progress``: rows read and estimated rows per table)."""

    from airflow.models.taskinstance import TaskInstance as TI
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, select

    query = (
        select(TI.dag_id, TI.run_id, TI.task_id, TI.map_index, TI.start_date, XComModel.value)
        .join(XComModel, and_(XComModel.dag_id == TI.dag_id, XComModel.run_id == TI.run_id,
                              XComModel.task_id == TI.task_id, XComModel.map_index == TI.map_index,
                              XComModel.key == "snapshot_progress"))
        .where(TI.operator == "BinlogSnapshotOperator")
        .where(TI.state == "running")
    )
    out = []
    with create_session() as session:
        for row in session.execute(query):
            value = _xcom_mapping(row.value)
            if value is not None:
                out.append({"dag_id": row.dag_id, "run_id": row.run_id, "task_id": row.task_id,
                            "start_date": row.start_date, "progress": value})
    return out


def _xcom_mapping(stored: Any) -> Optional[Mapping]:
    """A stored XCom value, deserialized, when it is a mapping (else None)."""
    from types import SimpleNamespace

    from airflow.models.xcom import XComModel

    if stored is None:
        return None
    try:
        value = XComModel.deserialize_value(SimpleNamespace(value=stored))
    except Exception:
        return None
    return value if isinstance(value, Mapping) else None


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
