"""Trigger that waits in the triggerer until a server's binlog is ahead of a checkpoint."""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Optional

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.binlog import BinlogHook, as_checkpoint

#: How the sensor and the trigger decide; the keys of a success payload besides ``status``.
REASON_THRESHOLDS = "thresholds met"
REASON_WAITED = "max_threshold_wait elapsed"


def poll_position(hook: BinlogHook, *, start: Any = None, checkpoint_key: Optional[str] = None,
                  min_bytes: Optional[int] = None, min_transactions: Optional[int] = None,
                  thresholds_waived: bool = False, retention_margin_files: int = 1) -> dict:
    """One check (blocking): the position check as JSON, with ``ready`` (whether to stop
    waiting) and ``reason``. Raises ``BinlogPurgedError`` when the checkpoint's binlogs are
    gone."""
    check = hook.check_position(start=start, checkpoint_key=checkpoint_key,
                                retention_margin_files=retention_margin_files)
    for warning in check.warnings:
        hook.log.warning("%s", warning)
    if check.has_new_data and (min_transactions or 0) > 0 and check.lag.get("transactions") is None:
        hook.log.warning("the transactions behind [%s] cannot be counted (no GTIDs): "
                         "min_transactions is not applied", check.start)
    hook.log.info("%s", check.describe())
    try:  # a metric must not fail the check
        from airflow_provider_binlog.metrics import record_lag
        record_lag(checkpoint_key or hook.binlog_conn_id, check.lag)
    except Exception:
        hook.log.debug("the lag metrics could not be sent", exc_info=True)
    out = check.to_json()
    if check.meets(min_bytes, min_transactions):
        out.update(ready=True, reason=REASON_THRESHOLDS)
    elif check.has_new_data and thresholds_waived:
        out.update(ready=True, reason=REASON_WAITED)
    else:
        out.update(ready=False, reason=None)
    return out


def error_payload(exc: BaseException) -> dict:
    """An error event's payload; the message of our errors never holds a password."""
    return {"status": "error", "error_type": type(exc).__name__, "message": str(exc),
            "hint": getattr(exc, "hint", "") or ""}


class BinlogPositionTrigger(BaseTrigger):
    """Polls the server every ``poke_interval`` seconds until its binlog position is ahead of
    the checkpoint (``start``, else the one stored under ``checkpoint_key`` in the store
    ``checkpoint_store_uri``, default: the connection's) by at least
    ``min_bytes`` / ``min_transactions``; after ``thresholds_deadline`` (epoch seconds), any
    new data is enough.

    Fires one event: ``{"status": "success", "target": ..., "lag": ..., ...}`` or
    ``{"status": "error", "error_type": ..., "message": ..., "hint": ...}``.
    """

    def __init__(self, binlog_conn_id: str = BinlogHook.default_conn_name, *, start: Any = None,
                 checkpoint_key: Optional[str] = None, min_bytes: Optional[int] = None,
                 min_transactions: Optional[int] = None, thresholds_deadline: Optional[float] = None,
                 poke_interval: float = 60.0, retention_margin_files: int = 1,
                 checkpoint_store_uri: Optional[str] = None) -> None:
        super().__init__()
        self.binlog_conn_id = binlog_conn_id
        self.checkpoint_store_uri = checkpoint_store_uri
        # kept as JSON so that the trigger serialises
        self.start = None if start is None else as_checkpoint(start, "start").to_json()
        self.checkpoint_key = checkpoint_key
        self.min_bytes = min_bytes
        self.min_transactions = min_transactions
        self.thresholds_deadline = thresholds_deadline
        self.poke_interval = float(poke_interval)
        self.retention_margin_files = retention_margin_files

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "binlog_conn_id": self.binlog_conn_id,
            "start": self.start,
            "checkpoint_key": self.checkpoint_key,
            "min_bytes": self.min_bytes,
            "min_transactions": self.min_transactions,
            "thresholds_deadline": self.thresholds_deadline,
            "poke_interval": self.poke_interval,
            "retention_margin_files": self.retention_margin_files,
            "checkpoint_store_uri": self.checkpoint_store_uri,
        })

    def _waived(self) -> bool:
        return self.thresholds_deadline is not None and time.time() >= self.thresholds_deadline

    async def _hook(self) -> BinlogHook:
        connection = await BinlogHook.aget_connection(self.binlog_conn_id)
        return BinlogHook(self.binlog_conn_id, connection=connection,
                          checkpoint_store_uri=self.checkpoint_store_uri)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            hook = await self._hook()
        except Exception as exc:
            yield TriggerEvent(error_payload(exc))
            return
        while True:
            try:
                # pymysql blocks: query in a thread, never in the triggerer's event loop
                result = await asyncio.to_thread(
                    poll_position, hook, start=self.start, checkpoint_key=self.checkpoint_key,
                    min_bytes=self.min_bytes, min_transactions=self.min_transactions,
                    thresholds_waived=self._waived(), retention_margin_files=self.retention_margin_files)
            except Exception as exc:  # BinlogPurgedError, a lost server, a bad checkpoint ...
                yield TriggerEvent(error_payload(exc))
                return
            if result.pop("ready"):
                yield TriggerEvent({"status": "success", **result})
                return
            await asyncio.sleep(self.poke_interval)


__all__ = ["BinlogPositionTrigger", "error_payload", "poll_position"]
