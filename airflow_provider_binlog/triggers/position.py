"""Trigger that waits in the triggerer until a server's binlog is ahead of a checkpoint."""
from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Optional

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.binlog import BinlogHook, as_checkpoint


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

    :param binlog_conn_id: the connection (type ``mysql_binlog``) of the server polled.
    :param start: the checkpoint to compare with (JSON dict or text); default: the stored one.
    :param checkpoint_key: the key of the stored checkpoint (default: the connection id).
    :param min_bytes: fire only once at least this many binlog bytes are new (default: any).
    :param min_transactions: fire only once at least this many transactions are new (default:
        any).
    :param thresholds_deadline: epoch seconds after which any new data is enough (default:
        never).
    :param poke_interval: seconds between polls (default 60).
    :param retention_margin_files: warn when the checkpoint is fewer than this many files after
        the oldest retained binlog (default 1).
    :param checkpoint_store_uri: the checkpoint store (default: the connection's extra
        ``checkpoint_store_uri``).
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
                    hook.poll_position, start=self.start, checkpoint_key=self.checkpoint_key,
                    min_bytes=self.min_bytes, min_transactions=self.min_transactions,
                    thresholds_waived=self._waived(), retention_margin_files=self.retention_margin_files)
            except Exception as exc:  # BinlogPurgedError, a lost server, a bad checkpoint ...
                yield TriggerEvent(error_payload(exc))
                return
            if result.pop("ready"):
                yield TriggerEvent({"status": "success", **result})
                return
            await asyncio.sleep(self.poke_interval)


__all__ = ["BinlogPositionTrigger", "error_payload"]
