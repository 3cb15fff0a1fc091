"""Operator that removes the staged batches every merge reading a staging location is past."""
from __future__ import annotations

import datetime as dt
from typing import Any, Optional, Sequence, Union

from ..hooks.binlog import BinlogHook
from ..staging.ref import StagingRef
from .settings import SettingsOperator

#: the default minimum age of a removed batch: a day, so that a retry of a reload (whose
#: snapshot batch the incremental load may already be past) still finds its batch
DEFAULT_MIN_AGE = dt.timedelta(days=1)


def min_age_seconds(value: Union[dt.timedelta, float, int, None]) -> float:
    """``value`` (a ``timedelta`` or seconds; None: :data:`DEFAULT_MIN_AGE`) in seconds;
    a ``ValueError`` for a negative or non-numeric one."""
    if value is None:
        return DEFAULT_MIN_AGE.total_seconds()
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ValueError(f"staging_retention is a timedelta or seconds (the minimum age of a removed "
                         f"batch), not {value!r}")
    if seconds < 0:
        raise ValueError(f"staging_retention must not be negative, not {value!r}")
    return seconds


class BinlogStagingRetentionOperator(SettingsOperator):
    """Removes the published batches of the ``staging`` location that every load reading it has merged:
    a batch goes when its end is at or before the checkpoint of each key of
    ``checkpoint_keys`` (all in one checkpoint store) and its manifest is at least ``min_age``
    old (:func:`~airflow_provider_binlog.staging.retention.remove_merged_batches`: the
    location is listed one name per batch, each manifest is read before anything of its batch
    goes, ``.resumable/`` and names that are not batches are never touched, and an object store
    without the staging marker is left alone). Returns the names removed (XCom).

    A key without a checkpoint yet removes nothing: that load has merged nothing.

    :param staging: the staging location (a directory or an object store URI), or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` of it and the connection with
        its credentials.
    :param checkpoint_keys: the checkpoint key of every load that merges from this location.
    :param binlog_conn_id: the connection whose extra names the checkpoint store.
    :param checkpoint_store_uri: the checkpoint store; default: the connection's extra.
    :param min_age: the minimum age of a removed batch (``timedelta`` or seconds; default a day).
    """

    template_fields: Sequence[str] = ("staging", "checkpoint_keys", "binlog_conn_id", "checkpoint_store_uri")
    ui_color = "#e8e8e8"

    def __init__(self, *, staging: Union[StagingRef, str], checkpoint_keys: Sequence[str],
                 binlog_conn_id: str = BinlogHook.default_conn_name, checkpoint_store_uri: Optional[str] = None,
                 min_age: Union[dt.timedelta, float, None] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(checkpoint_keys, str) or not checkpoint_keys:
            raise ValueError("checkpoint_keys is a list of the checkpoint keys of every load merging from "
                             f"{staging!r}, not {checkpoint_keys!r}")
        self.staging = StagingRef.of(staging)
        self.checkpoint_keys = list(checkpoint_keys)
        self.binlog_conn_id = binlog_conn_id
        self.checkpoint_store_uri = checkpoint_store_uri
        self.min_age = min_age_seconds(min_age)

    def execute(self, context: Any) -> list[str]:
        from ..hooks.staging_storage import staging_storage_options
        from ..staging.retention import remove_merged_batches

        store = BinlogHook(self.binlog_conn_id, checkpoint_store_uri=self.checkpoint_store_uri) \
            .checkpoint_ref(self.checkpoint_keys[0]).open()
        checkpoints = []
        for key in self.checkpoint_keys:
            checkpoint = store.load(key)
            if checkpoint is None:
                self.log.info("the load %r has merged nothing yet: no staged batch is removed", key)
                return []
            checkpoints.append(checkpoint)
        removed = remove_merged_batches(self.staging.location, checkpoints, min_age=self.min_age,
                                        options=staging_storage_options(self.staging.conn_id))
        self.log.info("removed %d merged batch(es) from %s", len(removed), self.staging.location)
        return removed


__all__ = ["DEFAULT_MIN_AGE", "BinlogStagingRetentionOperator", "min_age_seconds"]
