"""Sensor that waits until a server's binlog holds changes after the load's checkpoint."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Callable, Optional, Sequence, Union

from airflow.sdk import BaseSensorOperator, PokeReturnValue, conf
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout, AirflowSkipException

from ..hooks.binlog import BinlogHook, check_thresholds
from ..replica import BinlogPurgedError, ReplicaError
from ..triggers.position import BinlogPositionTrigger


class BinlogPurgedFailure(BinlogPurgedError, AirflowFailException):
    """The checkpoint's binlogs were purged: the task fails without retrying (a retry cannot
    bring them back); the remedy is a new snapshot."""


class BinlogPositionSensor(BaseSensorOperator):
    """Waits until the server's binlog is ahead of the load's checkpoint.

    Each poke reads the server's position (``SHOW BINARY LOG STATUS``, or ``SHOW MASTER
    STATUS``; ``gtid_binlog_pos`` on MariaDB) and compares it with the checkpoint. It succeeds
    when there are new transactions (new binlog bytes when they cannot be counted) meeting
    ``min_bytes`` and ``min_transactions``. The XCom value is the position check: ``target``
    (the server's position at that poke, a checkpoint JSON the dump can stop at exactly),
    ``start``, ``lag`` (``bytes``, ``files``, ``transactions``, ``gtids`` and ``seconds``: the
    source time the load is behind, the server's clock less the binlog timestamp of the oldest
    change not loaded, 0 with nothing to load), ``oldest_binlog``, ``files_of_headroom``,
    ``warnings`` and ``reason``. When binlogs the checkpoint needs are gone it fails, without
    retrying, with :class:`BinlogPurgedFailure` (the remedy is a new snapshot).

    :param binlog_conn_id: the connection (type ``mysql_binlog``; default
        ``"mysql_binlog_default"``).
    :param checkpoint_key: the key the checkpoint is stored under in the connection's checkpoint
        store (default: the connection id); not read when ``start`` is given.
    :param start: the checkpoint to compare with (JSON dict or text); default: the stored one.
    :param min_bytes: succeed only once at least this many binlog bytes are new (default: any).
    :param min_transactions: succeed only once at least this many transactions are new (default:
        any); not applied, with a warning, when they cannot be counted (no GTIDs).
    :param max_threshold_wait: once this long (a timedelta or seconds) has passed since the first
        poke (of the first try in reschedule mode), any new data is enough; default: never.
    :param retention_margin_files: warn when the checkpoint is fewer than this many files after the
        oldest retained binlog (default 1).
    :param checkpoint_store_uri: the checkpoint store, overriding the connection's extra
        ``checkpoint_store_uri`` (default: none).
    :param skip_on_timeout: a sensor that times out without new data is skipped (and with it the
        tasks after it) instead of failing: a scheduled load that found nothing to do. Unlike
        ``soft_fail``, purged binlogs and errors still fail the task. Default ``False``.
    :param max_lag_seconds: a check that finds the load more than this many seconds of source time
        behind (``lag["seconds"]``) logs a warning, calls ``lag_notifier`` and then acts as
        ``on_max_lag`` says (default: no limit).
    :param on_max_lag: ``"notify"`` (the default: the load goes on) or ``"fail"`` (the task fails,
        without retrying: the incremental runs then stop loading until the threshold is raised or
        a backfill, mode ``from_position`` at the stored checkpoint, catches up).
    :param lag_notifier: an Airflow notifier or any callable taking the context, which then also
        holds ``binlog_lag``; its errors are logged, never raised (default: none).
    :param deferrable: after a first poke, wait in the triggerer
        (:class:`~airflow_provider_binlog.triggers.position.BinlogPositionTrigger`); default: the
        setting ``[operators] default_deferrable`` (else ``False``).
    """

    template_fields: Sequence[str] = ("binlog_conn_id", "checkpoint_key", "start", "checkpoint_store_uri")
    ui_color = "#d6e4f0"

    def __init__(self, *, binlog_conn_id: str = BinlogHook.default_conn_name,
                 checkpoint_key: Optional[str] = None, start: Any = None,
                 min_bytes: Optional[int] = None, min_transactions: Optional[int] = None,
                 max_threshold_wait: Union[dt.timedelta, float, None] = None,
                 retention_margin_files: int = 1, checkpoint_store_uri: Optional[str] = None,
                 skip_on_timeout: bool = False, max_lag_seconds: Optional[float] = None,
                 on_max_lag: str = "notify", lag_notifier: Optional[Callable[[Any], Any]] = None,
                 deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 **kwargs) -> None:
        super().__init__(**kwargs)
        check_thresholds(min_bytes, min_transactions)
        if isinstance(max_threshold_wait, dt.timedelta):
            max_threshold_wait = max_threshold_wait.total_seconds()
        if max_threshold_wait is not None and max_threshold_wait < 0:
            raise ValueError("max_threshold_wait must not be negative")
        if max_lag_seconds is not None and (isinstance(max_lag_seconds, bool) or max_lag_seconds <= 0):
            raise ValueError(f"max_lag_seconds must be a number of seconds > 0, not {max_lag_seconds!r}")
        if on_max_lag not in ("fail", "notify"):
            raise ValueError(f"on_max_lag is 'fail' or 'notify', not {on_max_lag!r}")
        self.max_lag_seconds = max_lag_seconds
        self.on_max_lag = on_max_lag
        self.lag_notifier = lag_notifier
        self.binlog_conn_id = binlog_conn_id
        self.checkpoint_key = checkpoint_key
        self.start = start
        self.min_bytes = min_bytes
        self.min_transactions = min_transactions
        self.max_threshold_wait = max_threshold_wait
        self.retention_margin_files = retention_margin_files
        self.checkpoint_store_uri = checkpoint_store_uri
        self.skip_on_timeout = skip_on_timeout
        self.deferrable = deferrable
        self._first_poke: Optional[float] = None

    # ------------------------------------------------------------------ timing
    def _started_at(self, context) -> float:
        """Epoch seconds of the first poke (of the first try in reschedule mode)."""
        if self.reschedule:
            ti = context.get("ti") if hasattr(context, "get") else None
            try:
                first = ti.get_first_reschedule_date(context) if ti is not None else None
            except Exception:
                first = None
            if first is not None:
                return first.timestamp()
        if self._first_poke is None:
            self._first_poke = time.time()
        return self._first_poke

    def _deadline(self, context) -> Optional[float]:
        if self.max_threshold_wait is None:
            return None
        return self._started_at(context) + self.max_threshold_wait

    # ------------------------------------------------------------------ poke
    def _hook(self) -> BinlogHook:
        return BinlogHook(self.binlog_conn_id, checkpoint_store_uri=self.checkpoint_store_uri)

    def _check(self, context) -> dict:
        deadline = self._deadline(context)
        try:
            return self._hook().poll_position(
                start=self.start, checkpoint_key=self.checkpoint_key, min_bytes=self.min_bytes,
                min_transactions=self.min_transactions,
                thresholds_waived=deadline is not None and time.time() >= deadline,
                retention_margin_files=self.retention_margin_files)
        except BinlogPurgedFailure:
            raise
        except BinlogPurgedError as exc:
            raise BinlogPurgedFailure(exc.message, exc.hint) from None

    def _check_lag(self, context, result: dict) -> None:
        """Notify, then fail unless told to go on, when the lag passes ``max_lag_seconds``."""
        seconds = (result.get("lag") or {}).get("seconds")
        if self.max_lag_seconds is None or seconds is None or seconds <= self.max_lag_seconds:
            return
        start = _checkpoint_text(result.get("start") or {})
        message = (f"the load is {seconds:.0f} s of source time behind the server, more than "
                   f"max_lag_seconds={self.max_lag_seconds:g} (checkpoint [{start}])")
        self.log.warning("%s", message)
        if self.lag_notifier is not None:
            if hasattr(context, "__setitem__"):
                context["binlog_lag"] = result.get("lag")
            try:
                self.lag_notifier(context)
            except Exception:  # an alert must not stop the load
                self.log.exception("the lag notifier failed")
        if self.on_max_lag == "fail":
            raise AirflowFailException(message)

    def poke(self, context) -> PokeReturnValue:
        result = self._check(context)
        self._check_lag(context, result)
        ready = result.pop("ready")
        if ready:
            self.log.info("new binlog data (%s); the dump can stop at [%s]", result["reason"],
                          _checkpoint_text(result["target"]))
        return PokeReturnValue(is_done=ready, xcom_value=result if ready else None)

    # ------------------------------------------------------------------ deferrable
    def _idle(self, exc: BaseException):
        if self.skip_on_timeout:
            return AirflowSkipException(f"no new binlog data before the timeout ({exc}); nothing to load")
        return exc

    def execute(self, context) -> Any:
        if not self.deferrable:
            try:
                return super().execute(context)
            except AirflowSensorTimeout as exc:
                raise self._idle(exc) from None
        first = self.poke(context)
        if first.is_done:
            return first.xcom_value
        self.defer(
            trigger=BinlogPositionTrigger(
                self.binlog_conn_id, start=self.start, checkpoint_key=self.checkpoint_key,
                min_bytes=self.min_bytes, min_transactions=self.min_transactions,
                thresholds_deadline=self._deadline(context), poke_interval=self.poke_interval,
                retention_margin_files=self.retention_margin_files,
                checkpoint_store_uri=self.checkpoint_store_uri),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=self.timeout),
        )

    def resume_execution(self, next_method: str, next_kwargs: Optional[dict], context) -> Any:
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except AirflowSensorTimeout as exc:  # the trigger's wait ran out
            raise self._idle(exc) from None

    def execute_complete(self, context, event: Optional[dict] = None) -> dict:
        if not isinstance(event, dict) or event.get("status") not in ("success", "error"):
            raise ReplicaError(f"unexpected event from the binlog position trigger: {event!r}")
        if event["status"] == "error":
            if event.get("error_type") == "BinlogPurgedError":
                raise BinlogPurgedFailure(event.get("message", ""))
            raise ReplicaError(f"{event.get('error_type', 'error')}: {event.get('message', '')}")
        result = {k: v for k, v in event.items() if k != "status"}
        self._check_lag(context, result)
        for warning in result.get("warnings") or ():
            self.log.warning("%s", warning)
        self.log.info("new binlog data (%s), lag %s; the dump can stop at [%s]", result.get("reason"),
                      result.get("lag"), _checkpoint_text(result.get("target") or {}))
        return result


def _checkpoint_text(data: dict) -> str:
    parts = []
    if data.get("file"):
        parts.append(f"{data['file']}:{data.get('pos')}")
    if data.get("gtid"):
        parts.append(f"gtid={data['gtid']}")
    return " ".join(parts)


__all__ = ["BinlogPositionSensor", "BinlogPurgedFailure"]
