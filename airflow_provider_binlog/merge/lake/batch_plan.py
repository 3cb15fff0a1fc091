"""Which tables a batch touches, and their plans, before anything is committed
(:func:`plan_tables`); whether the batch needs Spark (:func:`spark_reason`), decided once for
the whole batch from those plans."""

from __future__ import annotations

from typing import Any, Optional

from ...common.tables import iceberg_table_name
from ...schema_history.ops import AlterOp
from ..batches import Batch
from ..batches import binlog_point as _position
from ..ddl_plan import ddl_ops as _ddl_ops
from ..ddl_plan import reset_records as _reset_records
from ..errors import MergeJobError
from ..options import MergeOptions
from .base import Lake
from ...staging.storage import total_size
from .direct_commit import direct_candidate, fold_ahead, plan_allows_direct
from .direct_snapshot import snapshot_candidate
from .table_work import TableWork, float_key, prepare_table
from .threads import each_table


# long: the tables of a batch (its staged ones, its resets, its ALTERs, the change logs of the
# data contract), each checked for a name it shares with another, then planned at once
def plan_tables(lake: Lake, batch: Batch, options: MergeOptions) -> list[TableWork]:
    """Plan every table the batch touches (see :func:`.table_work.prepare_table`), from
    ``options.parallel_tables`` threads; nothing is committed."""
    catalog, namespace, layouts, contract = options.catalog, options.namespace, options.layouts, options.data_contract
    resets = _reset_records(batch)
    if batch.manifest.is_snapshot:
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
    # exactly-once state (a table without a primary key is a change log already)
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
        return prepare_table(lake, batch, catalog, namespace, schema_name, table_name,
                             entries.get((schema_name, table_name)),
                             resets.get(f"{schema_name}.{table_name}", []), layouts,
                             contracts[(schema_name, table_name)], change_log_of=change_log)

    items = [(pair, False) for pair in sorted(names)] + [(pair, True) for pair in logged]
    return each_table(plan, items, options.parallel_tables)


def _folded_ahead(work: list[TableWork], max_bytes: int, threads: int) -> dict[int, Optional[bool]]:
    """The tables :func:`spark_reason`'s walk folds ahead, folded from ``threads`` threads
    (:func:`.direct_commit.fold_ahead`'s result by ``id`` of the table's work): those its walk
    reaches whose plan allows a direct commit and whose staged bytes fit in what is left of
    ``max_bytes``, as if every table before takes a direct commit (the walk stops at the
    first that does not: the tables after it are then folded in vain, never more than
    ``max_bytes`` of staged changes in all)."""
    chosen, left = [], max_bytes
    for w in work:
        if w.status != "ready":
            continue
        if float_key(w) or w.statements:  # the walk stops here
            break
        if w.staged_bytes <= left and plan_allows_direct(w) and \
                total_size(w.files, w.staged_bytes) <= max_bytes:
            chosen.append(w)
            left -= w.staged_bytes
    folded = each_table(lambda w: fold_ahead(w, max_bytes), chosen, threads)
    return {id(w): result for w, result in zip(chosen, folded)}


def spark_reason(work: list[TableWork], snapshot: bool, moves: Any, max_bytes: int,
                 threads: int = 1) -> Optional[str]:
    """Why the batch needs Spark, decided before anything of it is committed (None: every table
    to write takes a direct commit as far as its plan tells). A table to create with a layout
    or to alter, a change log, key changes or partial images, a FLOAT or DOUBLE key, a rename
    between tables take Spark. The changes of tables of at most ``max_bytes`` staged, together
    at most ``max_bytes``, are folded here (from ``threads`` threads), which tells as much and
    is what their commits need."""
    if moves:
        return "a table renamed onto another"
    if max_bytes <= 0:
        return "direct commits are off (direct_max_bytes=0)"
    ahead = max_bytes
    done = {} if snapshot else _folded_ahead(work, max_bytes, threads)
    for w in work:
        if w.status != "ready":
            continue
        if float_key(w):
            return f"{w.name}: a FLOAT or DOUBLE key, whose -0 and +0 Spark's MERGE compares as one"
        if w.statements and not (snapshot and w.creation is not None):
            return f"{w.name}: {w.statements[0].split('(')[0].strip()}"
        if not snapshot and w.staged_bytes <= ahead:
            folded = done[id(w)] if id(w) in done else fold_ahead(w, max_bytes)
            if folded is False:
                return f"{w.name}: its changes need Spark's MERGE"
            if folded:
                ahead -= w.staged_bytes
                continue
        if not (snapshot_candidate(w) if snapshot else direct_candidate(w)):
            return f"{w.name}: its changes need Spark's MERGE"
    return None


__all__ = ["plan_tables", "spark_reason"]
