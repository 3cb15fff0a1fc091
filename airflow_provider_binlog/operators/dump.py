"""Operator that dumps a bounded binlog range into Parquet staging."""
from __future__ import annotations

import time

from typing import Any, Optional, Sequence, Union

from ..hooks.binlog import BinlogHook
from .links import BinlogCdcViewLink
from .turns import yield_to_running_runs
from ..capture.options import DumpOptions
from ..staging.ref import StagingRef
from ..utils.metrics import record_dump
from .settings import BatchLimits, SettingsOperator, settings_of


class BinlogDumpOperator(SettingsOperator):
    """Dumps the binlog from the load's checkpoint to a stop point into the ``staging`` and
    returns the result (manifest path, dump id, start and end checkpoints, row counts) as its
    XCom value. It never advances the stored checkpoint: the merge does, once the data is
    committed.

    :param binlog_conn_id: the connection (type ``mysql_binlog``).
    :param staging: where the dump directory with its manifest is published: a location, or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` of a location on an object store
        and the ``aws`` (S3), ``google_cloud_platform`` (GCS) or ``wasb`` (Azure) connection with
        its credentials, read as those providers read them
        (:mod:`airflow_provider_binlog.hooks.staging_storage`); without one, the environment's
        credential chain. Templated.
    :param start: a checkpoint (JSON dict or text); default: the one stored under
        ``checkpoint_key`` (default: the connection id).
    :param stop: ``"current"`` (the server's position when the dump starts), a checkpoint, or
        a :class:`~airflow_provider_binlog.sensors.position.BinlogPositionSensor`'s output
        (``stop=sensor.output``) to stop exactly at the position the sensor saw.
    :param tables: ``schema.table`` patterns to include (default: all but system schemas).
    :param exclude: ``schema.table`` patterns to leave out.
    :param limits: where the dump stops early, a
        :class:`~airflow_provider_binlog.operators.settings.BatchLimits` (``max_rows``,
        ``max_bytes``, ``max_seconds``; default: no limit).
    :param checkpoint_key: the key the checkpoint is stored under (default: the connection id).
    :param checkpoint_store_uri: the checkpoint store to read ``start`` from; default: the
        connection's extra ``checkpoint_store_uri``.
    :param masking: columns to exclude, hash or truncate as rows are staged (see
        :mod:`airflow_provider_binlog.staging.masking`); default: none.
    :param masking_secret_conn_id: the connection whose password is the key of the hashes
        (hash rules need it).
    :param yield_to_dag_id: a DAG whose running runs take precedence (the factory passes the
        source's backfill DAG): while one of them runs, this task is skipped before it reads
        anything, so that the two never load the same checkpoint at once.
    """

    operator_extra_links = (BinlogCdcViewLink(),)
    template_fields: Sequence[str] = ("binlog_conn_id", "staging", "start", "stop", "tables", "exclude",
                                      "checkpoint_key", "checkpoint_store_uri")
    ui_color = "#d6e4f0"

    def __init__(self, *, staging: Union[StagingRef, str], binlog_conn_id: str = BinlogHook.default_conn_name,
                 start: Any = None, stop: Any = "current", tables: Optional[Sequence[str]] = None,
                 exclude: Optional[Sequence[str]] = None, limits: Optional[BatchLimits] = None,
                 checkpoint_key: Optional[str] = None, checkpoint_store_uri: Optional[str] = None,
                 masking: Any = None, masking_secret_conn_id: Optional[str] = None,
                 yield_to_dag_id: Optional[str] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.yield_to_dag_id = yield_to_dag_id
        self.staging = StagingRef.of(staging)
        self.limits: BatchLimits = settings_of(BatchLimits, limits, "limits")
        # the options that are not templated are checked now, when the DAG is parsed, by the
        # checks DumpOptions makes; the others when execute() makes the options
        checked = DumpOptions.check(masking=masking, masking_secret_conn_id=masking_secret_conn_id)
        self.masking = checked["masking"]
        self.masking_secret_conn_id = masking_secret_conn_id
        self.binlog_conn_id = binlog_conn_id
        self.start = start
        self.stop = stop
        self.tables = tables
        self.exclude = exclude
        self.checkpoint_key = checkpoint_key
        self.checkpoint_store_uri = checkpoint_store_uri

    def execute(self, context) -> dict:
        yield_to_running_runs(context, self.yield_to_dag_id, "dump")
        hook = BinlogHook(self.binlog_conn_id, checkpoint_store_uri=self.checkpoint_store_uri)
        began = time.monotonic()
        result = hook.dump(staging=self.staging, start=self.start or None, stop=self.stop or "current",
                           options=self.dump_options())
        try:  # a metric must not fail a staged dump
            from airflow_provider_binlog.hooks.staging_storage import staging_storage_options
            from airflow_provider_binlog.staging import load_manifest
            binlog_bytes = load_manifest(result["manifest"], options=staging_storage_options(
                self.staging.conn_id)).binlog_bytes
            record_dump(self.checkpoint_key or self.binlog_conn_id, result, time.monotonic() - began,
                        binlog_bytes)
        except Exception:
            self.log.warning("the dump's metrics could not be sent", exc_info=True)
        self._manifest = result["manifest"]
        return result

    def dump_options(self) -> DumpOptions:
        """The :class:`~airflow_provider_binlog.capture.options.DumpOptions` of this task (its
        templated fields rendered)."""
        return DumpOptions(tables=self.tables, exclude=self.exclude, max_rows=self.limits.max_rows,
                           max_bytes=self.limits.max_bytes, max_seconds=self.limits.max_seconds,
                           checkpoint_key=self.checkpoint_key or None, masking=self.masking,
                           masking_secret_conn_id=self.masking_secret_conn_id)

    def get_openlineage_facets_on_complete(self, task_instance) -> Any:
        """OpenLineage: the source tables in, their staged files out (see :mod:`..utils.lineage`)."""
        from airflow_provider_binlog.utils.lineage import capture_lineage

        return capture_lineage(getattr(self, "_manifest", None), self.staging.conn_id)


__all__ = ["BinlogDumpOperator"]
