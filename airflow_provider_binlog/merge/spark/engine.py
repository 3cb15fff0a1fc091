"""The ``spark`` engine: what only Spark does in a merge (:class:`SparkEngine`), given to
:func:`~..lake.batch.apply_manifests` beside the session's lake.

A table whose batch takes no direct commit is written by Spark: its schema statements, then
its ``MERGE`` (or overwrite, or change-log append) staged on a private branch made at the
snapshot the batch was planned on and published onto ``main`` by a fast-forward that Iceberg
refuses when another writer moved ``main`` meanwhile (:func:`~..lake.conflicts.staged_branch`).
Renames between tables and maintenance are Spark's too.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from pyspark import inheritable_thread_target
from pyspark.sql import SparkSession

from ..batches import Batch
from ..iceberg_contract import MODE_MERGE
from ..lake.base import Lake
from ..lake.conflicts import staged_branch
from ..lake.state import head_snapshot
from ..lake.table_work import TableWork
from ..options import MergeOptions
from .apply import apply_changelog_table, apply_merge_table, backfill_defaults
from .maintenance import run_maintenance
from .moves import apply_moves

log = logging.getLogger(__name__)


class SparkEngine:
    """The Spark work of a merge, on ``session``."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session

    def sql(self, statement: str) -> Any:
        return self.session.sql(statement)

    def thread_target(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """What a thread of the merge runs: with the caller's Spark local properties."""
        return inheritable_thread_target(fn)

    def commit_table(self, lake: Lake, work: TableWork, batch: Batch, options: MergeOptions) -> dict:
        """The table's statements, then its commit through Spark on a staged branch; the result's
        ``schema_changes``, ``snapshot_id`` and ``status`` (with what the commit reports)."""
        stream = options.ledger_stream
        info: dict[str, Any] = {}
        for statement in work.statements:
            log.info("%s", statement)
            self.session.sql(statement)
        info["schema_changes"] = work.statements_run + work.statements
        before = head_snapshot(lake, work.name)
        table = lake.load_table(work.name)
        with staged_branch(table, work.name, work.state.head, batch.batch_id) as target:
            if work.defaults and work.exists and work.state.head is not None:
                info["backfill"] = backfill_defaults(self.session, work, batch, stream, target)
            if work.mode == MODE_MERGE:
                info.update(apply_merge_table(self.session, work, batch, stream, options.max_key_change_rows,
                                              target=target))
            else:
                info.update(apply_changelog_table(self.session, work, batch, stream, target=target))
        info["snapshot_id"] = head_snapshot(lake, work.name)
        info["status"] = "committed" if info["snapshot_id"] != before else "no-change"
        return info

    def apply_moves(self, lake: Lake, batch: Batch, options: MergeOptions, moves: Any) -> list:
        return apply_moves(self.session, lake, batch, options.catalog, options.namespace, options.ledger_stream,
                           moves, options.layouts)

    def maintain(self, lake: Lake, tables: list[str], options: MergeOptions) -> list:
        return run_maintenance(self.session, lake, options.catalog, options.namespace, tables,
                               older_than_days=options.expire_older_than_days, retain_last=options.retain_last,
                               every_hours=options.maintenance_every_hours)


def merge_with_spark(session: SparkSession, manifests: Any, options: MergeOptions, *, store: Any = None) -> dict:
    """:func:`~..lake.batch.apply_manifests` by the ``spark`` engine: on the lake of the
    session's catalog ``options.catalog``, with Spark for what only Spark does."""
    from ..lake.batch import apply_manifests
    from .lake import spark_lake

    return apply_manifests(spark_lake(session, options.catalog), manifests, options, store=store,
                           spark=SparkEngine(session))


__all__ = ["SparkEngine", "merge_with_spark"]
