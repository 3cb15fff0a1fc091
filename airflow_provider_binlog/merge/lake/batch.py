"""A batch applied exactly once: plan every table, commit each, the moves, the ledger row, then
the checkpoint store's compare-and-set (:func:`apply_batch`, :func:`apply_manifests`).

The order and the checks are the same whatever runs the merge. The tables' state, plans,
direct commits and the ledger go through the :class:`~.base.Lake`; what only Spark does (a
table's ``MERGE`` or change-log append, a schema statement, a rename, maintenance) goes to the
Spark engine when there is one (:class:`SparkWork`). Without one (the ``iceberg-java`` engine)
a batch that needs Spark is refused before anything of it is committed
(:class:`~..errors.SparkNeeded`), with the batches applied before reported.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from typing import Any, Callable, Iterable, Optional, Protocol

from ...checkpoints import ABSENT, CheckpointLockedError, CheckpointStore, RunLock, open_checkpoint_store
from ...common.tables import iceberg_table_name
from ..batches import Batch, compare_checkpoints, plan_batches
from ..batches import checkpoint_text as _checkpoint_text
from ..byte_budget import ByteBudget
from ..ddl_plan import moves as _moves
from ..errors import ConcurrentRunError, MergeJobError, MergeOptionError, SparkNeeded
from ..exactly_once import batch_gate
from ..iceberg_contract import LEDGER_TABLE, MODE_MERGE
from ..options import MergeOptions
from .base import Lake
from .batch_plan import plan_tables, spark_reason
from .commits import commit_properties
from .conflicts import conflicts_raised_as
from .direct_commit import append_rows, apply_direct
from .direct_snapshot import apply_snapshot_direct
from .cadence import maintenance_due, not_due
from .ledger import ensure_ledger, ledger_name, ledger_rows
from .state import applied_state, committed_batch
from .table_work import TableWork
from .threads import each_table

log = logging.getLogger(__name__)


class SparkWork(Protocol):
    """What only Spark does in a merge (the ``spark`` engine, ``merge/spark/engine.py``)."""

    def sql(self, statement: str) -> Any: ...

    def thread_target(self, fn: Callable[..., Any]) -> Callable[..., Any]: ...

    def commit_table(self, lake: Lake, work: TableWork, batch: Batch, options: MergeOptions) -> dict: ...

    def apply_moves(self, lake: Lake, batch: Batch, options: MergeOptions, moves: Any) -> list: ...

    def maintain(self, lake: Lake, tables: list[str], options: MergeOptions) -> list: ...


def _save_checkpoint(store: CheckpointStore, key: str, batch: Batch, *, expected: Any) -> None:
    """Advance the store to the batch end, with the schema history valid there (the dump's
    manifest records it) in the same compare-and-set."""
    history = batch.manifest.schema_history_json
    if history is not None:
        store.save(key, batch.end, expected=expected, schema_history=history)
    else:
        store.save(key, batch.end, expected=expected)


def batch_tables(batches: list[Batch], catalog: str, namespace: str) -> set[str]:
    """The Iceberg tables of the batches' staged tables."""
    return {f"{catalog}.{namespace}.{iceberg_table_name(e['schema'], e['table'])}"
            for batch in batches for e in batch.manifest.tables}


# long: the exactly-once order of one batch (gate, plans, tables, ledger, store) read as one sequence
def apply_batch(lake: Lake, batch: Batch, options: MergeOptions, store: Optional[CheckpointStore] = None,
                lock: Optional[RunLock] = None, spark: Optional[SparkWork] = None) -> dict:
    """Apply one batch (see :func:`apply_manifests`); ``store`` is the open checkpoint store of
    ``options``, advanced under ``options.checkpoint_key``; ``lock``, the run lock held, is
    verified before each commit phase (the tables, the ledger row, the store)."""
    lock = lock or RunLock(options.checkpoint_key or "")
    key, stream = options.checkpoint_key, options.ledger_stream
    ledger = ledger_name(options.catalog, options.namespace)
    ensure_ledger(lake, ledger)
    ledger_state = applied_state(lake, ledger, stream)
    stored = store.load(key) if store is not None and key is not None else None
    position, source = (stored, f"checkpoint store key {key!r}") if stored is not None else \
        (ledger_state.checkpoint, f"ledger {ledger} (stream {stream!r})")
    result: dict[str, Any] = {"batch_id": batch.batch_id, "start": batch.start.to_json(),
                              "end": batch.end.to_json(), "tables": []}
    snapshot = batch.manifest.is_snapshot
    if batch_gate(batch.batch_id, batch.start, batch.end, snapshot, position, source,
                  lambda: committed_batch(lake, ledger, batch.batch_id)):
        log.info("batch %s is already applied (%s is at %s)", batch.batch_id, source, position)
        result["status"] = "already-applied"
        if not snapshot and store is not None and key is not None and stored is None:
            _save_checkpoint(store, key, batch, expected=ABSENT)
            result["checkpoint_store"] = "advanced"
        return result

    # 1. plan every table, and decide whether the batch needs Spark, before anything is committed
    work = plan_tables(lake, batch, options)
    moves = _moves(batch)
    if spark is None:
        reason = spark_reason(work, snapshot, moves, options.direct_max_bytes, options.parallel_tables)
        if reason is not None:
            raise SparkNeeded(reason)

    lock.verify()
    # 2. one commit per table, each carrying the batch end; the tables at once (each commit is
    # atomic and holds the batch end: a failure or a crash leaves some tables at the batch end
    # and the others before it, which a rerun completes)
    max_bytes = options.direct_max_bytes
    budget = ByteBudget(max_bytes) if max_bytes > 0 else None  # direct folds running at once

    def commit(w: TableWork) -> dict[str, Any]:
        info: dict[str, Any] = {"source": w.source, "table": w.name, "mode": w.mode,
                                "staged_rows": w.staged_rows, "status": w.status}
        if w.status != "ready":
            return info
        sql = spark.sql if spark is not None else None
        with conflicts_raised_as(w.name, batch.batch_id):  # another run's commit since the plan
            if w.mode == MODE_MERGE:
                direct = apply_snapshot_direct(lake, w, batch, stream, max_bytes, sql) if snapshot else \
                    apply_direct(lake, w, batch, stream, max_bytes, options.direct_deletes, budget)
                if direct is not None:
                    info.update(direct)
                    info.setdefault("schema_changes", [])
                    info["status"] = "committed" if info["snapshot_id"] != w.state.head else "no-change"
                    return info
            if spark is None:  # found at its commit; the tables before it may be committed already
                return {**info, "status": "spark-needed"}
            return {**info, **spark.commit_table(lake, w, batch, options)}

    result["tables"] = each_table(commit, work, options.parallel_tables,
                                  spark.thread_target if spark is not None else None)
    refused = [info["table"] for info in result["tables"] if info["status"] == "spark-needed"]
    if refused:
        raise SparkNeeded(f"the direct commit of {', '.join(refused)} was refused (see above)", partial=result)
    committed = [info["table"] for info in result["tables"] if info["status"] == "committed"]
    if moves:  # 2b. renames between captured tables, at the batch end (Spark: spark_reason says so)
        assert spark is not None
        result["moves"] = spark.apply_moves(lake, batch, options, moves)

    # 3. the ledger row, validated against rows of its stream since the batch began, then 4. the store
    lock.verify()
    at_ledger = None if ledger_state.checkpoint is None else compare_checkpoints(batch.end, ledger_state.checkpoint)
    if at_ledger is None or at_ledger > 0 or (
            snapshot and at_ledger == 0 and not committed_batch(lake, ledger, batch.batch_id)):
        values = (batch.batch_id, stream, _checkpoint_text(batch.start), _checkpoint_text(batch.end),
                  committed, sum(w.staged_rows for w in work), dt.datetime.now(dt.timezone.utc))
        with conflicts_raised_as(ledger, batch.batch_id):
            appended = append_rows(lake, ledger, ledger_rows(values), commit_properties(batch, stream, LEDGER_TABLE),
                                   planned_head=ledger_state.head, conflicts=("stream", stream))
        if not appended:
            raise MergeJobError(f"{ledger} is not an unpartitioned Iceberg table of the ledger's columns, which "
                                f"the merge appends to with validation; drop it, and the next merge creates it again")
        result["ledger"] = "committed"
    else:
        result["ledger"] = "already-applied"
    if store is not None and key is not None:
        lock.verify()
        _save_checkpoint(store, key, batch, expected=stored if stored is not None else ABSENT)
        result["checkpoint_store"] = "advanced"
    result["status"] = "applied"
    return result


# long: the run as one sequence: the lock, the batches in order, the maintenance under the lock
def apply_manifests(lake: Lake, manifests: Iterable[Any], options: MergeOptions, *,
                    store: Optional[CheckpointStore] = None, spark: Optional[SparkWork] = None) -> dict:
    """Apply the batches of ``manifests`` (``Manifest`` objects or paths) to
    ``options.catalog``.``options.namespace`` through ``lake``, in checkpoint order, exactly
    once; advance the checkpoint store after each batch. Returns a JSON-able summary.

    ``spark`` is the Spark engine, for what only Spark does; without it (the ``iceberg-java``
    engine) a batch that needs Spark raises :class:`~..errors.SparkNeeded` before anything of
    it is committed, with the batches applied before in its ``applied``.

    ``store`` is the checkpoint store to advance under ``options.checkpoint_key``, already open
    (default: the one ``options.checkpoint_store`` names, opened here). Each stream
    (``options.ledger_stream``) has its own position in the ledger
    ``<namespace>._binlog_batches``, which decides gaps when no checkpoint store is given.

    Tables of a batch are planned and committed ``options.parallel_tables`` at once, from that
    many threads. A table whose staged files hold at most ``options.direct_max_bytes``, and
    whose changes are simple (whole images, no key change, no schema change), is committed
    without Spark: its collapsed changes as a data file and a delete file, written with pyarrow
    and committed through Iceberg's Java API (``merge/lake/direct_commit.py``); the ledger row
    too. ``options.direct_deletes`` is how those commits drop the rows they replace. The tables
    the job creates get ``options.layouts``; ``options.data_contract`` gives merged tables
    change columns, soft deletes and change logs. See :class:`~..options.MergeOptions`."""
    if store is not None and options.checkpoint_key is None:
        raise MergeOptionError("a checkpoint store is given without checkpoint_key in the merge options",
                               hint="give checkpoint_store and checkpoint_key in the options")
    if store is None and options.checkpoint_store is not None:
        store = open_checkpoint_store(options.checkpoint_store)
    catalog, namespace, key = options.catalog, options.namespace, options.checkpoint_key
    batches = plan_batches(manifests)
    targets = batch_tables(batches, catalog, namespace) | {ledger_name(catalog, namespace)}
    if options.maintenance and spark is None:
        due = maintenance_due(lake, sorted(targets), options.maintenance_every_hours)
        if due:  # before any batch: Spark applies them and maintains the tables after
            raise SparkNeeded(f"the maintenance of {', '.join(due)} is due")
    lake.create_namespace(namespace)
    results: list[dict] = []
    out: dict[str, Any] = {"catalog": catalog, "namespace": namespace, "stream": options.ledger_stream,
                           "batches": results, "checkpoint": batches[-1].end.to_json() if batches else None}
    # two runs of the same load must not both plan and commit the same batch (each table's
    # commit is checked against the head it was planned on besides); the store's key is the
    # lock, held through the maintenance too, whose commits must not pass a batch's
    held = store.exclusive(key) if store is not None and key is not None else contextlib.nullcontext(RunLock(""))
    try:
        with held as lock:
            for batch in batches:
                log.info("applying batch %s: [%s] .. [%s]", batch.batch_id, batch.start, batch.end)
                results.append(apply_batch(lake, batch, options, store, lock, spark))
            if options.maintenance:
                # the tables of every batch given, also of those applied by an earlier run
                tables = sorted({t for t in {info["table"] for r in results for info in r["tables"]} | targets
                                 if lake.table_exists(t)})
                if spark is None:
                    due = maintenance_due(lake, tables, options.maintenance_every_hours)
                    if due:  # tables created by these batches, say: Spark maintains them
                        raise SparkNeeded(f"the maintenance of {', '.join(due)} is due")
                    out["maintenance"] = not_due(lake, tables)
                else:
                    lock.verify()
                    out["maintenance"] = spark.maintain(lake, tables, options)
    except CheckpointLockedError as exc:
        raise ConcurrentRunError(str(exc)) from None
    except SparkNeeded as exc:
        # what Spark will find applied: reported as this run's (the batch refused with its
        # tables committed so far)
        exc.applied = results + ([exc.partial] if exc.partial is not None else [])
        raise
    return out


__all__ = ["SparkWork", "apply_batch", "apply_manifests", "batch_tables"]
