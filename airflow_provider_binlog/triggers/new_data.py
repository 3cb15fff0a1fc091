"""Event-driven runs: a trigger that watches a source's binlog for the whole life of the
triggerer and fires an asset event when there is new data after the stored checkpoint.

Attached to an asset through an :class:`~airflow.sdk.AssetWatcher`, it starts the DAG
scheduled on that asset (see :class:`~airflow_provider_binlog.dags.OnNewBinlogData`). The
decisions are in :class:`WakeupGate`, without I/O:

- one event per stored checkpoint: a run is started for new data after a checkpoint, and no
  further run until that run has advanced the checkpoint, however long it takes (no run
  storm; with the DAG's ``max_active_runs=1``, an event during a run queues exactly one run);
- when the checkpoint has not moved ``refire_after`` seconds after an event (the run failed,
  or was cleared), the event is repeated, so no wakeup is lost for good;
- ``min_interval`` seconds at least between two events;
- the thresholds (``min_bytes``, ``min_transactions``) as the sensor's, waived once new data
  has waited ``max_threshold_wait`` seconds.

The last event's checkpoint and time are kept in the watched asset's state store (which
Airflow gives event triggers), so a restarted triggerer does not fire again for them.

Binlogs purged behind the checkpoint fire an event too (with ``status: error``): the run's
sensor then fails with the remedy, visibly, instead of the watcher waiting forever. Other
errors (a server down, a bad connection, a missing checkpoint, a check that does not answer
within ``max(60, 5 * poke_interval)`` seconds) are logged and the polling goes on; the same
error failing :data:`ERROR_CHECKS` checks in a row fires an error event too (again at most once
per ``refire_after``), so that a load that cannot go on shows as a failed run.
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from ..hooks.binlog import BinlogHook, check_thresholds
from ..replica import BinlogPurgedError
from .position import error_payload

#: Checks in a row that fail with the same error before the watcher fires an error event.
ERROR_CHECKS = 3
#: The key of the watcher's state (the last event's checkpoint and time) in the watched asset's
#: state store, which Airflow gives event triggers: a restarted triggerer goes on from it.
GATE_STATE_KEY = "binlog_new_data_gate"


def check_poke_interval(value: Any) -> None:
    """Refuse a ``poke_interval`` that is not a number of seconds above 0 (the watcher's, also
    as :class:`~airflow_provider_binlog.dags.OnNewBinlogData` takes it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"poke_interval must be a number of seconds > 0, not {value!r}")


@dataclass
class WakeupGate:
    """Whether a check of the binlog fires an event; fed the checks one by one with the time
    they were made (seconds; the trigger gives wall-clock time, so that its state outlives a
    restart)."""

    min_interval: float = 10.0
    refire_after: float = 600.0
    max_threshold_wait: Optional[float] = None
    fired_for: Optional[str] = field(default=None, init=False)
    fired_at: Optional[float] = field(default=None, init=False)
    new_data_since: Optional[float] = field(default=None, init=False)

    def __post_init__(self) -> None:
        for name in ("min_interval", "refire_after", "max_threshold_wait"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or value < 0):
                raise ValueError(f"{name} must be a number of seconds >= 0, not {value!r}")

    def thresholds_waived(self, now: float) -> bool:
        """Whether new data has waited ``max_threshold_wait`` (the check about to be made
        then accepts any new data)."""
        return (self.max_threshold_wait is not None and self.new_data_since is not None
                and now - self.new_data_since >= self.max_threshold_wait)

    def observe(self, now: float, *, checkpoint: str, has_new_data: bool, ready: bool) -> bool:
        """Record one check (``checkpoint``: the stored checkpoint it compared with, as text);
        True when it fires an event."""
        if not has_new_data:
            self.new_data_since = None
            return False
        if self.new_data_since is None:
            self.new_data_since = now
        if not ready:
            return False
        if self.fired_at is not None:
            since = now - self.fired_at
            if since < self.min_interval or (checkpoint == self.fired_for and since < self.refire_after):
                return False
        self.fired_for, self.fired_at, self.new_data_since = checkpoint, now, None
        return True


class BinlogNewDataTrigger(BaseEventTrigger):
    """Watches the binlog of connection ``binlog_conn_id`` against the checkpoint stored under
    ``checkpoint_key`` (store ``checkpoint_store_uri``, default: the connection's), checking
    every ``poke_interval`` seconds, and fires ``{"status": "new_data", "target", "start",
    "lag", "reason", "checkpoint_key"}`` as :class:`WakeupGate` decides (the module
    documentation says how). For an :class:`~airflow.sdk.AssetWatcher`; it never ends by
    itself.

    :param binlog_conn_id: the connection (type ``mysql_binlog``) of the server watched.
    :param checkpoint_key: the key of the stored checkpoint (default: the connection id).
    :param checkpoint_store_uri: the checkpoint store (default: the connection's extra
        ``checkpoint_store_uri``).
    :param min_bytes: fire only once at least this many binlog bytes are new (default: any).
    :param min_transactions: fire only once at least this many transactions are new (default:
        any).
    :param max_threshold_wait: once new data has waited this many seconds, any new data is
        enough (default: never).
    :param poke_interval: seconds between checks of the binlog (default 5).
    :param min_interval: seconds at least between two events (default 10).
    :param refire_after: seconds after an event with the checkpoint not moved (the run failed
        or was cleared) after which the event is repeated (default 600).
    """

    def __init__(self, binlog_conn_id: str = BinlogHook.default_conn_name, *,
                 checkpoint_key: Optional[str] = None, checkpoint_store_uri: Optional[str] = None,
                 min_bytes: Optional[int] = None, min_transactions: Optional[int] = None,
                 max_threshold_wait: Optional[float] = None, poke_interval: float = 5.0,
                 min_interval: float = 10.0, refire_after: float = 600.0) -> None:
        super().__init__()
        check_poke_interval(poke_interval)
        check_thresholds(min_bytes, min_transactions)
        self.binlog_conn_id = binlog_conn_id
        self.checkpoint_key = checkpoint_key
        self.checkpoint_store_uri = checkpoint_store_uri
        self.min_bytes = min_bytes
        self.min_transactions = min_transactions
        self.max_threshold_wait = max_threshold_wait
        self.poke_interval = float(poke_interval)
        self.min_interval = min_interval
        self.refire_after = refire_after
        self.gate = WakeupGate(min_interval=min_interval, refire_after=refire_after,
                               max_threshold_wait=max_threshold_wait)

    def __repr__(self) -> str:  # the store's URI may hold a password: never shown
        return (f"<{type(self).__module__}.{type(self).__qualname__} conn_id={self.binlog_conn_id!r} "
                f"checkpoint_key={self.checkpoint_key!r}>")

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}", {
            "binlog_conn_id": self.binlog_conn_id,
            "checkpoint_key": self.checkpoint_key,
            "checkpoint_store_uri": self.checkpoint_store_uri,
            "min_bytes": self.min_bytes,
            "min_transactions": self.min_transactions,
            "max_threshold_wait": self.max_threshold_wait,
            "poke_interval": self.poke_interval,
            "min_interval": self.min_interval,
            "refire_after": self.refire_after,
        })

    def _check(self, hook: BinlogHook, now: float) -> Optional[dict]:
        """One check (blocking): the event's payload when it fires, else None."""
        stored = hook.stored_checkpoint(self.checkpoint_key)
        try:
            result = hook.poll_position(start=stored, checkpoint_key=self.checkpoint_key,
                                        min_bytes=self.min_bytes, min_transactions=self.min_transactions,
                                        thresholds_waived=self.gate.thresholds_waived(now), quiet=True)
        except BinlogPurgedError as exc:
            text = json.dumps(stored.to_json(), sort_keys=True)
            if self.gate.observe(now, checkpoint=text, has_new_data=True, ready=True):
                return {**error_payload(exc), "checkpoint_key": self.checkpoint_key}
            return None
        text = json.dumps(result.get("start"), sort_keys=True)
        has_new = bool(result.get("has_new_data", result["ready"]))
        if self.gate.observe(now, checkpoint=text, has_new_data=has_new, ready=bool(result.pop("ready"))):
            return {"status": "new_data", "checkpoint_key": self.checkpoint_key, **result}
        return None

    def _check_timeout(self) -> float:
        """Seconds one check may take before it counts as failed (a server that stopped
        answering must not hold the watcher)."""
        return max(60.0, 5 * self.poke_interval)

    def _failed(self, now: float, error: str, failures: int) -> Optional[dict]:
        """An error event once the same error has failed ``ERROR_CHECKS`` checks in a row (at
        most once per ``refire_after``, through the gate): a run then fails visibly instead of
        the watcher waiting in silence."""
        if failures < ERROR_CHECKS:
            return None
        if self.gate.observe(now, checkpoint=f"error: {error}", has_new_data=True, ready=True):
            return {"status": "error", "error_type": error.partition(":")[0], "message": error,
                    "hint": "the incremental run started by this event fails on the same error; its log "
                            "says what to do", "checkpoint_key": self.checkpoint_key}
        return None

    async def _restore_gate(self) -> None:
        """The last event's checkpoint and time, kept in the watched asset's state store by a
        triggerer that ran this watcher before (a restart does not fire again for it)."""
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return
        try:
            saved = await store.aget(GATE_STATE_KEY)
        except Exception as exc:  # a store that cannot be read: start afresh
            self.log.warning("the watcher's state could not be read (%s): starting afresh", exc)
            return
        if isinstance(saved, dict) and isinstance(saved.get("fired_at"), (int, float)):
            self.gate.fired_for, self.gate.fired_at = saved.get("fired_for"), float(saved["fired_at"])

    async def _save_gate(self) -> None:
        store = getattr(self, "asset_state_store", None)
        if store is None:
            return
        try:
            await store.aset(GATE_STATE_KEY, {"fired_for": self.gate.fired_for, "fired_at": self.gate.fired_at})
        except Exception as exc:
            self.log.warning("the watcher's state could not be saved (%s)", exc)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook: Optional[BinlogHook] = None
        last_error, failures = None, 0
        await self._restore_gate()
        while True:
            try:
                if hook is None:
                    connection = await BinlogHook.aget_connection(self.binlog_conn_id)
                    hook = BinlogHook(self.binlog_conn_id, connection=connection,
                                      checkpoint_store_uri=self.checkpoint_store_uri)
                # pymysql blocks: query in a thread, never in the triggerer's event loop
                payload = await asyncio.wait_for(asyncio.to_thread(self._check, hook, time.time()),
                                                 timeout=self._check_timeout())
            except Exception as exc:  # a lost server, a missing connection or checkpoint: go on
                if isinstance(exc, asyncio.TimeoutError):
                    error = f"TimeoutError: no answer in {self._check_timeout():g} s"
                else:
                    error = f"{type(exc).__name__}: {exc}"
                failures = failures + 1 if error == last_error else 1
                (self.log.debug if failures > 1 else self.log.warning)(
                    "the binlog of %s could not be checked (%s); checking again every %g s",
                    self.binlog_conn_id, error, self.poke_interval)
                hook, last_error = None, error
                payload = self._failed(time.time(), error, failures)
            else:
                last_error, failures = None, 0
            if payload is not None:
                self.log.info("binlog event for checkpoint %s of %s: %s", payload.get("start"),
                              self.checkpoint_key, payload.get("reason") or payload.get("message"))
                await self._save_gate()
                yield TriggerEvent(payload)
            await asyncio.sleep(self.poke_interval)


__all__ = ["BinlogNewDataTrigger", "WakeupGate", "check_poke_interval"]
