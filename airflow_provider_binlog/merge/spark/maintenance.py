"""Table maintenance after the merges: compaction that folds delete files in, snapshot expiry
that keeps the applied checkpoint."""

from __future__ import annotations

import datetime as dt
from typing import Iterable, Optional

from pyspark.sql import SparkSession

from ...spark import runtime
from ..iceberg_contract import MODE_MERGE, PROP_MAINTAINED_AT, PROP_MODE
from ..sql import literal as _lit
from ..lake.base import Lake
from ..lake.cadence import is_due
from ..lake.conflicts import remove_stale_branches
from ..lake.state import applied_state

#: A staging branch older than this is one a killed merge left (a live one lives for one commit).
STALE_BRANCH_SECONDS = 24 * 3600.0


def _has_equality_deletes(lake: Lake, name: str) -> bool:
    """Whether the table's current snapshot counts equality deletes (its summary's total)."""
    table = lake.load_table(name)
    snapshot = None if table is None else table.currentSnapshot()
    return snapshot is not None and int(snapshot.summary().get("total-equality-deletes") or 0) > 0


def run_maintenance(spark: SparkSession, lake: Lake, catalog: str, namespace: str, tables: Iterable[str], *,
                    older_than_days: float = 7.0, retain_last: int = 10,
                    stale_branch_seconds: float = STALE_BRANCH_SECONDS,
                    every_hours: Optional[float] = None) -> list[dict]:
    """Compact each table, then expire its old snapshots.

    - the staging branches a killed merge left (``binlog_stage_*``, older than
      ``stale_branch_seconds``, a day by default) are removed first;
    - ``rewrite_data_files`` (sorted by the write order when there is one) rewrites the small
      data files and every data file that position delete files apply to
      (``delete-file-threshold`` 1), so the rows the merges deleted or replaced are dropped and
      the delete files with them (``remove-dangling-deletes``); when the table has equality
      deletes (direct commits), every data file, as an equality delete goes only once no
      data file is older than it;
    - ``rewrite_position_delete_files`` then removes the delete files left pointing at data
      files that are gone, and compacts the others;
    - ``expire_snapshots`` expires the snapshots older than ``older_than_days`` (keeping the
      last ``retain_last``) and deletes the files only they reference.

    The newest snapshot holding a binlog checkpoint is never expired, so the applied position
    survives maintenance: the compaction commits carry none (a checkpoint read before they
    commit could be older than a batch committed meanwhile), and the walk of
    :func:`..lake.state.applied_state` passes over them. The merge runs it under its run lock.

    With ``every_hours``, a table maintained less than that long ago (its property
    ``binlog.maintained-at``) is left for a later run."""
    out: list[dict] = []
    now = dt.datetime.now(dt.timezone.utc)
    cutoff = now - dt.timedelta(days=older_than_days)
    cutoff_micros = int(cutoff.timestamp() * 1_000_000)
    for name in tables:
        short = name.split(".", 1)[1]
        table_props = lake.properties(name)
        if not is_due(table_props.get(PROP_MAINTAINED_AT), now, every_hours):
            out.append({"table": name, "skipped": f"maintained at {table_props[PROP_MAINTAINED_AT]}"})
            continue
        loaded = lake.load_table(name)
        stale = [] if loaded is None else remove_stale_branches(loaded, stale_branch_seconds)
        state = applied_state(lake, name)
        props = {PROP_MAINTAINED_AT: now.isoformat()}
        sort = "sort" if table_props.get(PROP_MODE) == MODE_MERGE else "binpack"
        # equality deletes (direct commits) go only once no data file is older than them: every
        # data file is rewritten then, not only those whose key range meets a delete
        every = ", 'rewrite-all', 'true'" if _has_equality_deletes(lake, name) else ""
        rewrite = runtime.run_with_commit_properties(spark, props, lambda: spark.sql(
            f"CALL {catalog}.system.rewrite_data_files(table => {_lit(short)}, "
            f"strategy => {_lit(sort)}, options => map('delete-file-threshold', '1', "
            f"'remove-dangling-deletes', 'true'{every}))").collect())
        deletes = runtime.run_with_commit_properties(spark, props, lambda: spark.sql(
            f"CALL {catalog}.system.rewrite_position_delete_files(table => {_lit(short)}, "
            f"options => map('rewrite-all', 'true'))").collect())
        older = cutoff_micros
        if state.committed_at_micros is not None:
            older = min(older, state.committed_at_micros)
        stamp = (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
                 + dt.timedelta(microseconds=older)).isoformat(sep=" ")
        expired = spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => {_lit(short)}, older_than => "
            f"TIMESTAMP {_lit(stamp)}, retain_last => {int(retain_last)})").collect()
        spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ({_lit(PROP_MAINTAINED_AT)}={_lit(now.isoformat())})")
        out.append({"table": name, "stale_branches_removed": stale, "rewrite": rewrite[0].asDict() if rewrite else {},
                    "rewrite_deletes": deletes[0].asDict() if deletes else {},
                    "expire": expired[0].asDict() if expired else {}})
    return out
