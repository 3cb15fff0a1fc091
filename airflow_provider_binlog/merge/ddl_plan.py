"""What the batch's schema statements ask of each table: the dump writes, with each DDL
record, the operations its schema history derived (see
``airflow_provider_binlog/schema_history/apply.py``); these helpers read them per table. The
job never reads SQL.

``work`` arguments are the job's per-table work (``schema``, ``table``, ``since`` and ``plan``
with its ``columns``).
"""
from __future__ import annotations

from typing import Any, Optional

from ..codec.positions import split_binlog_file_name
from ..schema_history.ops import AlterOp, DdlOp, DdlOpError, MoveOp, RefuseOp, ResetOp
from .batches import Batch
from .errors import MergeJobError, SchemaEvolutionError


def ddl_ops(batch: Batch) -> list[tuple[tuple[int, int], dict, DdlOp]]:
    """``(position, record, op)`` of the batch's DDL records, in binlog order. The dump says
    what each statement means for the captured tables (see
    ``airflow_provider_binlog/schema_history/ops.py``); the job does not read SQL. An
    operation this release does not know fails the batch (:class:`MergeJobError`)."""
    out = []
    for record in batch.manifest.ddl:
        if "ops" not in record:
            raise MergeJobError(f"{batch.manifest.path}: the DDL record at {record.get('file')}:"
                                f"{record.get('pos')} was written by an older release (no 'ops'); "
                                f"dump that range again with this release")
        try:
            position = (split_binlog_file_name(record["file"])[1], int(record["pos"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MergeJobError(f"{batch.manifest.path}: DDL record without a usable "
                                f"position: {record!r} ({exc})") from None
        for raw in record["ops"]:
            try:
                op = DdlOp.from_json(raw, position=f"{record['file']}:{record['pos']}")
            except DdlOpError as exc:
                raise MergeJobError(f"{batch.manifest.path}: {exc.message}", position=exc.position,
                                    hint=exc.hint) from None
            out.append((position, record, op))
    out.sort(key=lambda item: item[0])
    return out


def reset_records(batch: Batch) -> dict[str, list[dict]]:
    """The points where a captured table's content ends (TRUNCATE, DROP TABLE, CREATE OR
    REPLACE, a rename away), per ``schema.table``, in binlog order. A statement that gives a
    captured table rows that are not in the binlog fails the batch before anything is
    committed."""
    out: dict[str, list[dict]] = {}
    for position, record, op in ddl_ops(batch):
        where = f"{record['file']}:{record['pos']}"
        if isinstance(op, ResetOp):
            schema, table = op.table
            out.setdefault(f"{schema}.{table}", []).append(
                {**record, "_position": position, "_table": (schema, table)})
        elif isinstance(op, RefuseOp):
            schema, table = op.table
            raise SchemaEvolutionError(
                f"{batch.manifest.path}: {record.get('query')!r} at {where}: {op.reason}. "
                f"Nothing of this batch was committed. Load {schema}.{table} from a new snapshot "
                f"(backfill mode 'snapshot')")
    return out


def column_defaults(batch: Batch, work: Any) -> dict[str, str]:
    """Columns of the table added in this batch (after the table's own checkpoint) with the
    value the source gave the rows that existed (no row event carries it)."""
    found: dict[str, Optional[str]] = {}
    for position, _record, op in ddl_ops(batch):
        if not isinstance(op, AlterOp) or op.table != (work.schema, work.table):
            continue
        if work.since is not None and position < work.since:
            continue
        for added in op.added:
            found[added.name] = added.value
    columns = {n for n, _ in work.plan.columns} if work.plan else set()
    return {n: v for n, v in found.items() if v is not None and n in columns}


def insert_defaults(batch: Batch, work: Any) -> dict[str, str]:
    """Per column, the literal default an INSERT that leaves it out gives it, from the schema
    history at the batch end (none without a history)."""
    history = batch.manifest.schema_history
    if history is None:
        return {}
    tdef = history.get(work.schema, work.table)
    if tdef is None:
        return {}
    columns = {n for n, _ in work.plan.columns} if work.plan else set()
    out = {c.name: v for c in tdef.columns
           for v in [c.value_for_omitted()] if v is not None and c.name in columns}
    entry = getattr(work, "entry", None) or {}
    for name in entry.get("masked") or {}:  # masked in the dump: its masked value, never the raw one
        out.pop(name, None)
        value = (entry.get("omitted_values") or {}).get(name)
        if value is not None and name in columns:
            out[name] = value
    return out


def column_renames(batch: Batch, work: Any) -> list[tuple[str, str]]:
    """``(old, new)`` column renames of the table in this batch, in binlog order."""
    out = []
    for position, _record, op in ddl_ops(batch):
        if isinstance(op, AlterOp) and op.table == (work.schema, work.table) \
                and (work.since is None or position >= work.since):
            out += list(op.renamed)
    return out


def moves(batch: Batch) -> list[tuple[tuple[int, int], dict, MoveOp]]:
    """The batch's renames between captured tables. The dump ends a batch right after such a
    statement, so they are its last change: refuse a batch that goes on after one."""
    moves = [(at, record, op) for at, record, op in ddl_ops(batch) if isinstance(op, MoveOp)]
    if not moves:
        return []
    at = max(position for position, _, _ in moves)
    later = [r for r in batch.manifest.ddl
             if (split_binlog_file_name(r["file"])[1], int(r["pos"])) > at]
    if later or any(position != at for position, _, _ in moves):
        raise MergeJobError(f"{batch.manifest.path}: the batch goes on after a rename between captured "
                            f"tables at {moves[0][1]['file']}:{moves[0][1]['pos']}; dump the range "
                            f"again with this release, which ends a batch there")
    return moves


__all__ = ["column_defaults", "column_renames", "ddl_ops", "insert_defaults", "moves", "reset_records"]
