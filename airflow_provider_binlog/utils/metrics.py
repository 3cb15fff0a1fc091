"""Metrics of the loads through Airflow's own ``Stats``: StatsD, DogStatsD or OpenTelemetry, as
the ``[metrics]`` section of Airflow's configuration says; nothing when metrics are off.

Every metric is sent under its name with the tags ``source`` (the checkpoint key; a snapshot's
connection id) and, per table, ``table`` (``schema.table``) and ``op`` (``insert``, ``update``,
``delete``), for the backends that keep tags (DogStatsD, OpenTelemetry, StatsD with InfluxDB tags). Plain StatsD drops
tags, so each is also sent under a name that holds them:
``<name>.<source>`` and ``<name>.<source>.<schema>__<table>.<op>`` (characters other than
letters, digits, ``_``, ``-`` made ``_``).

=====================================  ==========  =================================================
name                                   kind        what
=====================================  ==========  =================================================
``binlog.dump.rows``                   counter     row changes staged, per table and operation
``binlog.dump.transactions``           counter     transactions read
``binlog.dump.bytes``                  counter     binlog bytes read
``binlog.dump.duration``               timer       seconds of the dump task's work
``binlog.snapshot.rows``               counter     rows copied by a snapshot, per table, chunk by chunk
``binlog.snapshot.rows_read``          gauge       rows of a table read so far by a running snapshot
``binlog.snapshot.duration``           timer       seconds of the snapshot
``binlog.merge.rows``                  counter     rows applied to Iceberg, per table and operation
``binlog.merge.duration``              timer       seconds of the merge (spark-submit included)
``binlog.lag.bytes``                   gauge       binlog bytes between the checkpoint and the server
``binlog.lag.transactions``            gauge       transactions after the checkpoint (GTID servers)
``binlog.lag.seconds``                 gauge       source time the load is behind the server
=====================================  ==========  =================================================
"""
from __future__ import annotations

import datetime as dt
import logging
import re
from typing import Any, Mapping, Optional

log = logging.getLogger(__name__)

PREFIX = "binlog"
OPS = ("insert", "update", "delete")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
#: The summary keys of the merge operator, by operation.
_MERGE_KEYS = {"insert": "inserted", "update": "updated", "delete": "deleted"}


def _part(value: str) -> str:
    return _UNSAFE.sub("_", str(value).replace(".", "__")) or "_"


def _stats():
    try:
        from airflow.sdk.observability import stats
    except ImportError:  # pragma: no cover - an Airflow without the Task SDK's stats
        from airflow.stats import Stats as stats  # type: ignore[no-redef]
    return stats


def _send(kind: str, name: str, value: Any, tags: Mapping[str, str]) -> None:
    """One metric under its tagged name and under the name holding its tags; a failing
    backend is logged, never raised (a metric must not fail a load)."""
    stats = _stats()
    legacy = ".".join([f"{PREFIX}.{name}", *(_part(tags[k]) for k in ("source", "table", "op") if k in tags)])
    try:
        for stat, stat_tags in ((f"{PREFIX}.{name}", dict(tags)), (legacy, None)):
            if kind == "incr":
                stats.incr(stat, count=int(value), tags=stat_tags)
            elif kind == "gauge":
                stats.gauge(stat, value, tags=stat_tags)
            else:
                stats.timing(stat, dt.timedelta(seconds=float(value)), tags=stat_tags)
    except Exception as exc:
        log.warning("could not send metric %s.%s: %s", PREFIX, name, exc)


def record_dump(source: str, result: Mapping[str, Any], seconds: float, binlog_bytes: Optional[int]) -> None:
    """A dump's result (:meth:`DumpResult.to_json`)."""
    for table, rows in (result.get("rows") or {}).items():
        for op in OPS:
            if rows.get(op):
                _send("incr", "dump.rows", rows[op], {"source": source, "table": table, "op": op})
    _send("incr", "dump.transactions", result.get("transactions") or 0, {"source": source})
    if binlog_bytes is not None:
        _send("incr", "dump.bytes", binlog_bytes, {"source": source})
    _send("timing", "dump.duration", seconds, {"source": source})


def record_snapshot_progress(source: str, table: str, new_rows: int, rows_read: int) -> None:
    """A chunk of a snapshot: ``new_rows`` more rows of ``table``, ``rows_read`` so far."""
    _send("incr", "snapshot.rows", new_rows, {"source": source, "table": table})
    _send("gauge", "snapshot.rows_read", rows_read, {"source": source, "table": table})


def record_snapshot(source: str, seconds: float) -> None:
    _send("timing", "snapshot.duration", seconds, {"source": source})


def record_merge(source: str, summary: Mapping[str, Any], seconds: float) -> None:
    """A merge's summary (:func:`~airflow_provider_binlog.operators.merge_job.summarize`),
    tagged with the engines that ran it (``iceberg-java``, ``spark`` or ``iceberg-java+spark``)."""
    engine = str(summary.get("engine") or "spark")
    for table, info in (summary.get("tables") or {}).items():
        for op, key in _MERGE_KEYS.items():
            if info.get(key):
                _send("incr", "merge.rows", info[key], {"source": source, "table": table, "op": op, "engine": engine})
    _send("timing", "merge.duration", seconds, {"source": source, "engine": engine})


def record_lag(source: str, lag: Mapping[str, Any]) -> None:
    """The lag the sensor measured (``bytes``, ``transactions``; unknown ones are not sent)."""
    for key in ("bytes", "transactions", "seconds"):
        if lag.get(key) is not None:
            _send("gauge", f"lag.{key}", lag[key], {"source": source})


__all__ = ["PREFIX", "record_dump", "record_lag", "record_merge", "record_snapshot", "record_snapshot_progress"]
