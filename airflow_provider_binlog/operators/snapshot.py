"""Operator that takes an initial snapshot of the selected tables into Parquet staging."""
from __future__ import annotations

import datetime as dt
import time
from typing import Any, Optional, Sequence, Union

from ..hooks.binlog import BinlogHook
from ..capture.options import SnapshotOptions
from ..utils.metrics import record_snapshot, record_snapshot_progress
from ..common.process_memory import current_rss_mib, peak_rss_mib
from ..staging.ref import StagingRef
from .links import BinlogCdcViewLink
from .settings import SettingsOperator, SnapshotSettings, settings_of

#: the XCom key of a running snapshot's progress, which the Binlog CDC view shows
PROGRESS_KEY = "snapshot_progress"
#: seconds between progress reports (task log and XCom)
PROGRESS_SECONDS = 10.0


class SnapshotProgress:
    """A running snapshot's rows read and estimated rows per table: in the task log and the
    StatsD metrics, and as the XCom ``snapshot_progress`` the Binlog CDC view shows, at most
    every :data:`PROGRESS_SECONDS`."""

    def __init__(self, conn_id: str, method: str, ti: Any, log: Any) -> None:
        self.conn_id, self.ti, self.log = conn_id, ti, log
        self.state: dict[str, Any] = {"conn_id": conn_id, "method": method, "tables": {}, "finished": False,
                                      "updated_at": None}
        self._last = 0.0

    def estimates(self, values: dict) -> None:
        for table, rows in values.items():
            self.state["tables"].setdefault(table, {"rows_read": 0, "estimated_rows": None})["estimated_rows"] = rows
        self.publish()

    def progress(self, table: str, new_rows: int, rows_read: int) -> None:
        try:  # a metric must not fail the snapshot
            record_snapshot_progress(self.conn_id, table, new_rows, rows_read)
        except Exception:
            self.log.debug("the snapshot's metrics could not be sent", exc_info=True)
        entry = self.state["tables"].setdefault(table, {"rows_read": 0, "estimated_rows": None})
        entry["rows_read"] = rows_read
        if time.monotonic() - self._last >= PROGRESS_SECONDS:
            estimated = entry["estimated_rows"]
            self.log.info("snapshot of %s: %d rows read%s", table, rows_read,
                          f" of about {estimated}" if estimated else "")
            self.publish()

    def publish(self, *, finished: bool = False) -> None:
        self._last = time.monotonic()
        self.state["finished"] = finished
        self.state["updated_at"] = dt.datetime.now(dt.timezone.utc).isoformat()
        if self.ti is None:
            return
        try:  # progress must not fail the snapshot
            self.ti.xcom_push(key=PROGRESS_KEY, value=self.state)
        except Exception:
            self.log.debug("the snapshot's progress could not be published", exc_info=True)


class BinlogSnapshotOperator(SettingsOperator):
    """Reads the selected tables consistently, with the binlog coordinates of that exact
    point, and stages them like a dump (``"mode": "snapshot"`` in the manifest). Returns the
    result (manifest path, dump id, start and end checkpoints, which are equal, and row
    counts) as its XCom value, in the form :class:`~.merge.BinlogMergeOperator` takes.

    The merge applies a snapshot as an overwrite of each table it holds and sets the stored
    checkpoint to the snapshot's position; the incremental loads continue from there with no
    gap and no duplicate. This operator never moves the stored checkpoint itself.

    :param binlog_conn_id: the connection (type ``mysql_binlog``); its user needs SELECT on
        the tables (and RELOAD on MySQL).
    :param staging: where the snapshot directory with its manifest is published: a location, or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` of a location on S3, GCS or Azure
        and the ``aws``, ``google_cloud_platform`` or ``wasb`` connection with its credentials
        (without one, the environment's credential chain). Templated.
    :param tables: ``schema.table`` patterns to include (default: all but system schemas).
    :param exclude: ``schema.table`` patterns to leave out.
    :param snapshot: how the tables are read, a
        :class:`~airflow_provider_binlog.operators.settings.SnapshotSettings`: the method
        (``watermark``, the default, or ``consistent``; docs/snapshots.md), rows per chunk, the
        reader and the connection budget.
    :param masking: columns to exclude, hash or truncate as rows are staged (see
        :class:`~.dump.BinlogDumpOperator`); default: none.
    :param masking_secret_conn_id: the connection whose password is the key of the hashes
        (hash rules need it).
    """

    operator_extra_links = (BinlogCdcViewLink(),)
    template_fields: Sequence[str] = ("binlog_conn_id", "staging", "tables", "exclude")
    ui_color = "#c9dcef"

    def __init__(self, *, staging: Union[StagingRef, str], binlog_conn_id: str = BinlogHook.default_conn_name,
                 tables: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None,
                 snapshot: Optional[SnapshotSettings] = None, masking: Any = None,
                 masking_secret_conn_id: Optional[str] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.staging = StagingRef.of(staging)
        self.snapshot: SnapshotSettings = settings_of(SnapshotSettings, snapshot, "snapshot")
        # the options that are not templated are checked now, when the DAG is parsed, by the
        # checks SnapshotOptions makes; the others when execute() makes the options
        checked = SnapshotOptions.check(masking=masking, masking_secret_conn_id=masking_secret_conn_id)
        self.masking = checked["masking"]
        self.masking_secret_conn_id = masking_secret_conn_id
        self.binlog_conn_id = binlog_conn_id
        self.tables = tables
        self.exclude = exclude

    def execute(self, context) -> dict:
        hook = BinlogHook(self.binlog_conn_id)
        began = time.monotonic()
        rss_before = current_rss_mib()
        report = SnapshotProgress(self.binlog_conn_id, self.snapshot.method,
                                  context.get("ti") if hasattr(context, "get") else None, self.log)
        try:
            result = hook.snapshot(self.staging, options=self.snapshot_options(),
                                   progress=report.progress, resume_key=self._resume_key(context),
                                   estimates=report.estimates)
        finally:
            report.publish(finished=True)
        try:
            record_snapshot(self.binlog_conn_id, time.monotonic() - began)
        except Exception:
            self.log.warning("the snapshot's metrics could not be sent", exc_info=True)
        self._manifest = result["manifest"]
        self.log.info("snapshot taken in %.1f s; peak RSS of this process %.1f MiB (%s MiB when the task started)",
                      time.monotonic() - began, peak_rss_mib(), "?" if rss_before is None else f"{rss_before:.1f}")
        return result

    def snapshot_options(self) -> SnapshotOptions:
        """The :class:`~airflow_provider_binlog.capture.options.SnapshotOptions` of this task (its
        templated fields rendered)."""
        return SnapshotOptions(method=self.snapshot.method, reader=self.snapshot.reader,
                               chunk_rows=self.snapshot.chunk_rows, read_connections=self.snapshot.read_connections,
                               tables=self.tables or None, exclude=self.exclude or None, masking=self.masking,
                               masking_secret_conn_id=self.masking_secret_conn_id)

    @staticmethod
    def _resume_key(context) -> Optional[str]:
        """The task of this DAG run: a retry after a lost worker continues the watermark snapshot
        its earlier try sealed (docs/snapshots.md)."""
        ti = context.get("ti") if hasattr(context, "get") else None
        if ti is None:
            return None
        return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{getattr(ti, 'map_index', -1)}"

    def get_openlineage_facets_on_complete(self, task_instance) -> Any:
        """OpenLineage: the source tables in, their staged copies out (see :mod:`..utils.lineage`)."""
        from airflow_provider_binlog.utils.lineage import capture_lineage

        return capture_lineage(getattr(self, "_manifest", None), self.staging.conn_id)


__all__ = ["BinlogSnapshotOperator", "PROGRESS_KEY", "SnapshotProgress"]
