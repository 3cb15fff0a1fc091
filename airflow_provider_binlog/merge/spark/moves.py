"""Renames between captured tables, carried into Iceberg at the batch end through work tables."""

from __future__ import annotations

import hashlib
import json

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ...schema_history.ops import MoveOp
from ...spark import runtime
from ...common.tables import iceberg_table_name
from ..layout import TableLayouts
from ..batches import Batch
from ..iceberg_contract import (
    MODE_CHANGELOG,
    MODE_MERGE,
    PROP_CONTRACT_COLUMNS,
    PROP_MODE,
    PROP_PRIMARY_KEY,
    SUMMARY_MOVE,
)
from ..lake.base import Lake
from ..lake.commits import commit_properties
from ..schema_plan import CHANGELOG_ENVELOPE_NAMES, create_table_statements
from ..sql import literal as _lit


# long: the renames of one batch in their order: work tables first, then each target, then the
# sources no name holds any more
def apply_moves(spark: SparkSession, lake: Lake, batch: Batch, catalog: str, namespace: str, stream: str,
                moves: list[tuple[tuple[int, int], dict, MoveOp]], layouts: TableLayouts) -> list[dict]:
    """Carry renames between captured tables into Iceberg at the batch end: each target gets
    the content its source had (every change before the rename is applied by then), sources
    that no name holds any more are emptied. The contents are first copied into work tables,
    so a swap (``a`` to ``tmp``, ``b`` to ``a``, ``tmp`` to ``b``) reads neither after writing it;
    each target's commit carries the batch end, so a rerun after a crash redoes only what is
    missing."""
    def iceberg(pair) -> str:
        return f"{catalog}.{namespace}.{iceberg_table_name(pair[0], pair[1])}"

    tag = hashlib.sha1(batch.batch_id.encode()).hexdigest()[:12]
    pairs = [(op.source, op.target) for _, _, op in moves]
    def moved(name: str) -> bool:  # the target's content was moved by this batch already
        if not lake.table_exists(name):
            return False
        lake.refresh(name)
        return spark.sql(f"SELECT 1 FROM {name}.snapshots WHERE summary['{SUMMARY_MOVE}'] = "
                         f"{_lit(batch.batch_id)} LIMIT 1").count() > 0

    done = {dst: moved(iceberg(dst)) for _src, dst in pairs}
    work_tables = {}
    for k, (src, dst) in enumerate(pairs):
        if done[dst]:
            continue
        work_table = f"{catalog}.{namespace}._binlog_move_{tag}_{k}"
        work_tables[src] = work_table
        if not lake.table_exists(work_table) and lake.table_exists(iceberg(src)):
            spark.sql(f"CREATE TABLE {work_table} USING iceberg AS SELECT * FROM {iceberg(src)}")
    out = []
    for src, dst in pairs:
        if done[dst]:
            out.append({"from": list(src), "to": list(dst), "status": "already-applied"})
            continue
        source_name, target = iceberg(src), iceberg(dst)
        work_table = work_tables[src]
        props = {**commit_properties(batch, stream, f"{dst[0]}.{dst[1]}"), SUMMARY_MOVE: batch.batch_id}
        if not lake.table_exists(work_table):
            # the source was never loaded: the target holds no rows now
            if lake.table_exists(target):
                empty = spark.table(target).limit(0)
                runtime.run_with_commit_properties(spark, props, lambda: empty.writeTo(target).overwrite(F.lit(True)))
            out.append({"from": list(src), "to": list(dst), "status": "emptied"})
            continue
        source_props = lake.properties(source_name) or lake.properties(target)
        mode = source_props.get(PROP_MODE, MODE_MERGE)
        primary_key = json.loads(source_props.get(PROP_PRIMARY_KEY, "[]"))
        columns = lake.columns(work_table)
        if mode == MODE_CHANGELOG:
            columns = [c for c in columns if c[0] not in CHANGELOG_ENVELOPE_NAMES]
        # the statements first: a layout that does not fit fails before the target is dropped
        statements = create_table_statements(target, dst, columns, mode, primary_key, layouts.for_table(*dst))
        if PROP_CONTRACT_COLUMNS in source_props:  # the data-contract columns stay theirs
            statements.append(f"ALTER TABLE {target} SET TBLPROPERTIES ({_lit(PROP_CONTRACT_COLUMNS)}="
                              f"{_lit(source_props[PROP_CONTRACT_COLUMNS])})")
        spark.sql(f"DROP TABLE IF EXISTS {target}")
        for sql in statements:
            spark.sql(sql)
        rows = spark.table(work_table)
        runtime.run_with_commit_properties(spark, props, lambda: rows.writeTo(target).append())
        out.append({"from": list(src), "to": list(dst), "status": "moved"})
    targets = {dst for _, dst in pairs}
    for src, _dst in pairs:
        name = iceberg(src)
        if src not in targets and lake.table_exists(name):
            empty = spark.table(name).limit(0)
            runtime.run_with_commit_properties(spark, commit_properties(batch, stream, f"{src[0]}.{src[1]}"),
                                       lambda: empty.writeTo(name).overwrite(F.lit(True)))
    for work_table in work_tables.values():
        spark.sql(f"DROP TABLE IF EXISTS {work_table}")
    return out
