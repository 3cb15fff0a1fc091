"""A batch applied exactly once: plan every table, commit each, the moves, the ledger row, then
the checkpoint store's compare-and-set (:func:`apply_batch`, :func:`apply_manifests`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from typing import Any, Iterable, Optional

from pyspark.sql import SparkSession

from ...checkpoints import ABSENT, Checkpoint, CheckpointLockedError, CheckpointStore, RunLock, open_checkpoint_store
from ...schema_history.ops import AlterOp
from ...spark.iceberg_jvm import IcebergJvm, SparkNeeded
from ...common.tables import iceberg_table_name
from ..batches import Batch, compare_checkpoints, plan_batches
from ..batches import binlog_point as _position
from ..batches import checkpoint_text as _checkpoint_text
from ..ddl_plan import ddl_ops as _ddl_ops
from ..ddl_plan import moves as _moves
from ..ddl_plan import reset_records as _reset_records
from ..errors import BatchGapError, ConcurrentRunError, MergeJobError, MergeOptionError
from ..iceberg_contract import LEDGER_TABLE, MODE_MERGE
from ..options import MergeOptions
from .apply import apply_changelog_table, apply_merge_table, backfill_defaults, commit_properties
from .catalog import applied_state, committed_batch, ensure_namespace, head_snapshot, iceberg_table, table_exists
from .conflicts import conflicts_raised_as, staged_branch
from ..byte_budget import ByteBudget
from .direct_commit import append_rows, apply_direct, direct_candidate, fold_ahead
from .direct_snapshot import apply_snapshot_direct, snapshot_candidate
from .ledger import LEDGER_SCHEMA, ensure_ledger, ledger_name
from .maintenance import maintenance_due, run_maintenance
from .moves import apply_moves
from .table_work import TableWork, float_key, prepare_table
from .threads import each_table

log = logging.getLogger(__name__)


def _describe_position(cp: Optional[Checkpoint]) -> str:
    return "nothing" if cp is None else f"[{cp}]"


def _save_checkpoint(store: CheckpointStore, key: str, batch: Batch, *, expected: Any) -> None:
    """Advance the store to the batch end, with the schema history valid there (the dump's
    manifest records it) in the same compare-and-set."""
    history = batch.manifest.schema_history_json
    if history is not None:
        store.save(key, batch.end, expected=expected, schema_history=history)
    else:
        store.save(key, batch.end, expected=expected)


def _ledger_rows(values: tuple) -> Any:
    """The ledger row ``values`` (in :data:`LEDGER_SCHEMA`'s order) as a pyarrow table."""
    import pyarrow as pa

    names = [f.name for f in LEDGER_SCHEMA.fields]
    types = [pa.string(), pa.string(), pa.string(), pa.string(), pa.list_(pa.string()), pa.int64(),
             pa.timestamp("us", tz="UTC")]
    return pa.table({n: pa.array([v], t) for n, v, t in zip(names, values, types)})


def batch_tables(batches: list[Batch], catalog: str, namespace: str) -> set[str]:
    """The Iceberg tables of the batches' staged tables."""
    return {f"{catalog}.{namespace}.{iceberg_table_name(e['schema'], e['table'])}"
            for batch in batches for e in batch.manifest.tables}


def check_direct(work: list[TableWork], snapshot: bool, moves: Any, max_bytes: int) -> None:
    """Before anything of the batch is committed without Spark: SparkNeeded unless every table
    to write takes a direct commit as far as its plan tells (a table to create or alter, a
    change log, key changes or partial images, a rename between tables take Spark). The
    changes of tables of at most ``max_bytes`` staged, together at most ``max_bytes``, are
    folded here, which tells as much and is what their commits need."""
    if moves:
        raise SparkNeeded("a table renamed onto another")
    ahead = max_bytes
    for w in work:
        if w.status != "ready":
            continue
        if float_key(w):
            raise SparkNeeded(f"{w.name}: a FLOAT or DOUBLE key, whose -0 and +0 Spark's MERGE compares as one")
        if w.statements and not (snapshot and w.creation is not None):
            raise SparkNeeded(f"{w.name}: {w.statements[0].split('(')[0].strip()}")
        if not snapshot and w.staged_bytes <= ahead:
            folded = fold_ahead(w, max_bytes)
            if folded is False:
                raise SparkNeeded(f"{w.name}: its changes need Spark's MERGE")
            if folded:
                ahead -= w.staged_bytes
                continue
        if not (snapshot_candidate(w) if snapshot else direct_candidate(w)):
            raise SparkNeeded(f"{w.name}: its changes need Spark's MERGE")


# long: the exactly-once order of one batch (ledger check, tables, commit, checkpoint) read as one
# sequence
def apply_batch(spark: SparkSession, batch: Batch, options: MergeOptions,
                store: Optional[CheckpointStore] = None, lock: Optional[RunLock] = None) -> dict:
    """Apply one batch (see :func:`apply_manifests`); ``store`` is the open checkpoint store of
    ``options``, advanced under ``options.checkpoint_key``; ``lock``, the run lock held, is
    verified before each commit phase (the tables, the ledger row, the store)."""
    lock = lock or RunLock(options.checkpoint_key or "")
    catalog, namespace, key = options.catalog, options.namespace, options.checkpoint_key
    stream, layouts, contract = options.ledger_stream, options.layouts, options.data_contract
    parallel_tables, direct_max_bytes = options.parallel_tables, options.direct_max_bytes
    ledger = ledger_name(catalog, namespace)
    ensure_ledger(spark, ledger)
    ledger_state = applied_state(spark, ledger, stream)
    stored = store.load(key) if store is not None else None
    position, source = (stored, f"checkpoint store key {key!r}") if stored is not None else \
        (ledger_state.checkpoint, f"ledger {ledger} (stream {stream!r})")
    result: dict[str, Any] = {"batch_id": batch.batch_id, "start": batch.start.to_json(),
                              "end": batch.end.to_json(), "tables": []}
    snapshot = batch.manifest.is_snapshot
    if snapshot and position is not None and compare_checkpoints(batch.end, position) == 0 \
            and committed_batch(spark, ledger, batch.batch_id):
        # a snapshot at the position the load stands at is a reload (a repair while the source
        # is idle) unless the ledger holds this very batch
        log.info("snapshot %s is already applied (%s is at %s)", batch.batch_id, source, position)
        result["status"] = "already-applied"
        return result
    if snapshot and position is not None and compare_checkpoints(batch.end, position) < 0:
        raise BatchGapError(
            f"snapshot {batch.batch_id} at [{batch.end}] is older than {source} at "
            f"{_describe_position(position)}: applying it would rewind the tables; take a new "
            f"snapshot instead")
    if not snapshot and position is not None and compare_checkpoints(batch.start, position) != 0:
        if compare_checkpoints(batch.end, position) <= 0:
            log.info("batch %s is already applied (%s is at %s)", batch.batch_id, source, position)
            result["status"] = "already-applied"
            if store is not None and key is not None and stored is None:
                _save_checkpoint(store, key, batch, expected=ABSENT)
                result["checkpoint_store"] = "advanced"
            return result
        if compare_checkpoints(batch.start, position) > 0:
            raise BatchGapError(
                f"batch {batch.batch_id} starts at [{batch.start}] but {source} is at "
                f"{_describe_position(position)}: the changes in between are missing; dump them "
                f"first (or reset the position if that is intended)")
        raise BatchGapError(
            f"batch {batch.batch_id} [{batch.start}] .. [{batch.end}] overlaps the position "
            f"{_describe_position(position)} of {source}; give batches that start there")

    # 1. plan every table, before anything is committed
    resets = _reset_records(batch)
    moves = _moves(batch)
    if snapshot:
        # an initial snapshot replaces each table's content: an implicit TRUNCATE just before
        # the snapshot's rows (a consistent snapshot's all sit at its position, start == end; a
        # watermark snapshot's chunks and changes lie between its start and end)
        seq, pos = _position(batch.start)
        for entry in batch.manifest.tables:
            resets.setdefault(f"{entry['schema']}.{entry['table']}", []).insert(
                0, {"kind": "truncate", "file": batch.start.file, "pos": pos - 1,
                    "tables": [f"{entry['schema']}.{entry['table']}"], "_position": (seq, pos - 1),
                    "_table": (entry["schema"], entry["table"])})
    entries = {(e["schema"], e["table"]): e for e in batch.manifest.tables}
    names = set(entries)
    for qualified, records in resets.items():
        # the DDL record's names apart when it has them: a schema or table name may hold dots
        pair = next((r["_table"] for r in records if r.get("_table")), None)
        names.add(tuple(pair) if pair else tuple(qualified.partition(".")[::2]))
    for _at, _record, op in _ddl_ops(batch):
        if isinstance(op, AlterOp):  # a table altered in the batch, with rows or without
            names.add(op.table)
    seen_targets: dict[str, tuple] = {}
    for schema_name, table_name in sorted(names):
        target = iceberg_table_name(schema_name, table_name)
        if target in seen_targets:  # pragma: no cover - guarded by the naming scheme
            raise MergeJobError(f"{schema_name}.{table_name} and {'.'.join(seen_targets[target])} "
                                f"map to the same table {target}")
        seen_targets[target] = (schema_name, table_name)

    contracts = {pair: contract.for_table(*pair) for pair in names}
    # the change logs of merged tables (data contract): tables of their own, each with its own
    # exactly-once state
    # (a table without a primary key is a change log already)
    logged = sorted(pair for pair in names if contracts[pair].change_log
                    and (pair not in entries or entries[pair]["primary_key"]))
    for schema_name, table_name in logged:
        target = iceberg_table_name(schema_name, table_name) + (contracts[(schema_name, table_name)].change_log or "")
        if target in seen_targets:
            raise MergeJobError(f"the change log of {schema_name}.{table_name} and the table "
                                f"{'.'.join(seen_targets[target])} map to the same table {target}; "
                                f"give the change log another suffix")
        seen_targets[target] = (schema_name, table_name)

    def plan(item: tuple) -> TableWork:
        (schema_name, table_name), change_log = item
        return prepare_table(spark, batch, catalog, namespace, schema_name, table_name,
                             entries.get((schema_name, table_name)),
                             resets.get(f"{schema_name}.{table_name}", []), layouts,
                             contracts[(schema_name, table_name)], change_log_of=change_log)

    items = [(pair, False) for pair in sorted(names)] + [(pair, True) for pair in logged]
    work = each_table(plan, items, parallel_tables)
    if isinstance(spark, IcebergJvm):
        check_direct(work, snapshot, moves, direct_max_bytes)

    lock.verify()
    # 2. schema changes and one commit per table, each carrying the batch end; the tables
    # at once (each commit is atomic and holds the batch end: a failure or a crash leaves
    # some tables at the batch end and the others before it, which a rerun completes)
    def commit(w: TableWork) -> dict[str, Any]:
        with conflicts_raised_as(w.name, batch.batch_id):  # another run's commit since the plan
            return commit_table(w)

    def commit_table(w: TableWork) -> dict[str, Any]:
        info: dict[str, Any] = {"source": w.source, "table": w.name, "mode": w.mode,
                                "staged_rows": w.staged_rows, "status": w.status}
        if w.status != "ready":
            return info
        if snapshot and w.mode == MODE_MERGE:  # an initial load or a reload, without a shuffle
            direct = apply_snapshot_direct(spark, w, batch, stream, direct_max_bytes)
            if direct is not None:
                info.update(direct)
                info["status"] = "committed" if info["snapshot_id"] != w.state.head else "no-change"
                return info
        if w.mode == MODE_MERGE:  # a direct commit has no statement or backfill to run first
            direct = apply_direct(spark, w, batch, stream, direct_max_bytes, options.direct_deletes, budget)
            if direct is not None:
                info.update(direct, schema_changes=[])
                info["status"] = "committed" if info["snapshot_id"] != w.state.head else "no-change"
                return info
        if isinstance(spark, IcebergJvm):  # Spark commits it; the others may be committed already
            return {**info, "status": "spark-needed"}
        for sql in w.statements:
            log.info("%s", sql)
            spark.sql(sql)
        info["schema_changes"] = w.statements_run + w.statements
        before = head_snapshot(spark, w.name)
        table = iceberg_table(spark, w.name)
        if table is None:
            raise MergeJobError(f"{w.name} is not an Iceberg table whose commits this job can check against "
                                f"other writers; give the merge an Iceberg catalog (SparkCatalog)")
        with staged_branch(table, w.name, w.state.head, batch.batch_id) as target:
            if w.defaults and w.exists and w.state.head is not None:
                info["backfill"] = backfill_defaults(spark, w, batch, stream, target)
            if w.mode == MODE_MERGE:
                info.update(apply_merge_table(spark, w, batch, stream, options.max_key_change_rows, target=target))
            else:
                info.update(apply_changelog_table(spark, w, batch, stream, target=target))
        info["snapshot_id"] = head_snapshot(spark, w.name)
        info["status"] = "committed" if info["snapshot_id"] != before else "no-change"
        return info

    # the direct commits running at once fold at most direct_max_bytes of staged files together
    budget = ByteBudget(direct_max_bytes) if direct_max_bytes > 0 else None
    result["tables"] = each_table(commit, work, parallel_tables)
    refused = [info["table"] for info in result["tables"] if info["status"] == "spark-needed"]
    if refused:
        raise SparkNeeded(f"the direct commit of {', '.join(refused)} was refused (see above)", partial=result)
    committed = [info["table"] for info in result["tables"] if info["status"] == "committed"]

    # 2b. renames between captured tables, at the batch end
    if moves:
        result["moves"] = apply_moves(spark, batch, catalog, namespace, stream, moves, layouts)

    # 3. the ledger row, then 4. the checkpoint store
    lock.verify()
    at_ledger = None if ledger_state.checkpoint is None else compare_checkpoints(batch.end, ledger_state.checkpoint)
    if at_ledger is None or at_ledger > 0 or (
            snapshot and at_ledger == 0 and not committed_batch(spark, ledger, batch.batch_id)):
        values = (batch.batch_id, stream, _checkpoint_text(batch.start), _checkpoint_text(batch.end),
                  committed, sum(w.staged_rows for w in work), dt.datetime.now(dt.timezone.utc))
        props = commit_properties(batch, stream, LEDGER_TABLE)
        # validated from the ledger's head when the batch began: another run's row of this
        # stream since (an overlapping run of the same batch) fails it
        with conflicts_raised_as(ledger, batch.batch_id):
            appended = append_rows(spark, ledger, _ledger_rows(values), props, planned_head=ledger_state.head,
                                   conflicts=("stream", stream))
        if not appended:
            raise MergeJobError(f"{ledger} is not an unpartitioned Iceberg table of the ledger's columns, "
                                f"which the merge appends to with validation; drop it, and the next merge "
                                f"creates it again (it then applies batches by the tables' own positions)")
        result["ledger"] = "committed"
    else:
        result["ledger"] = "already-applied"
    if store is not None and key is not None:
        lock.verify()
        _save_checkpoint(store, key, batch, expected=stored if stored is not None else ABSENT)
        result["checkpoint_store"] = "advanced"
    result["status"] = "applied"
    return result


def apply_manifests(spark: SparkSession, manifests: Iterable[Any], options: MergeOptions, *,
                    store: Optional[CheckpointStore] = None) -> dict:
    """Apply the batches of ``manifests`` (``Manifest`` objects or paths) to
    ``options.catalog``.``options.namespace``, in checkpoint order, exactly once; advance the
    checkpoint store after each batch. Returns a JSON-able summary.

    ``store`` is the checkpoint store to advance under ``options.checkpoint_key``, already open
    (default: the one ``options.checkpoint_store`` names, opened here). Each stream
    (``options.ledger_stream``) has its own position in the ledger
    ``<namespace>._binlog_batches``, which decides gaps when no checkpoint store is given.

    Tables of a batch are planned and committed ``options.parallel_tables`` at once, from that
    many driver threads. A table whose staged files hold at most ``options.direct_max_bytes``,
    and whose changes are simple (whole images, no key change, no schema change), is committed
    without Spark: its collapsed changes as a data file and a delete file, written with pyarrow
    and committed through Iceberg's Java API (``merge/spark/direct_commit.py``); the ledger row
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
    if options.maintenance and isinstance(spark, IcebergJvm):
        due = maintenance_due(spark, sorted(targets), options.maintenance_every_hours)
        if due:  # before any batch: Spark applies them and maintains the tables after
            raise SparkNeeded(f"the maintenance of {', '.join(due)} is due")
    ensure_namespace(spark, catalog, namespace)
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
                results.append(apply_batch(spark, batch, options, store, lock))
            if options.maintenance:
                # the tables of every batch given, also of those applied by an earlier run
                tables = sorted({t for t in {info["table"] for r in results for info in r["tables"]} | targets
                                 if table_exists(spark, t)})
                lock.verify()
                out["maintenance"] = run_maintenance(spark, catalog, namespace, tables,
                                                     older_than_days=options.expire_older_than_days,
                                                     retain_last=options.retain_last,
                                                     every_hours=options.maintenance_every_hours)
    except CheckpointLockedError as exc:
        raise ConcurrentRunError(str(exc)) from None
    except SparkNeeded as exc:
        # what Spark will find applied: reported as this run's (the batch refused with its
        # tables committed so far)
        exc.applied = results + ([exc.partial] if exc.partial is not None else [])
        raise
    return out
