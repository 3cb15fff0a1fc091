"""The verify DAG of a source: ``binlog_verify__<source_id>``, a third DAG beside the
incremental and the backfill DAG of :func:`~airflow_provider_binlog.dags.make_cdc_dags`, on a
schedule of its own (daily by default), triggered by hand with ``mode=repair`` to repair.

``verify`` (:class:`~.verify.BinlogVerifyOperator`) compares each table with its Iceberg table;
in mode ``repair`` a difference does not fail it: ``plan_repair`` takes the tables that differ,
``snapshot`` reloads them through the watermark snapshot, ``merge`` replaces them in Iceberg
through the reload stream ``<checkpoint_key>.partial`` (the stored checkpoint stays; the
incremental DAG goes on, as for a backfill of some tables), and ``verify_after`` verifies them
again (it fails on a difference). Why a DAG of its own: ``docs/verify.md``."""
from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Optional, Sequence, Union

from airflow.sdk import DAG, Param, task

from ..hooks.binlog import BinlogHook
from ..staging.ref import StagingRef
from .merge import BinlogMergeOperator
from .settings import LakeSettings, SparkSettings
from .snapshot import BinlogSnapshotOperator
from .verify import BinlogVerifyOperator

VERIFY_MODES = ("verify", "repair")
DEFAULT_VERIFY_SCHEDULE = "@daily"


def verify_dag_id(source_id: str) -> str:
    return f"binlog_verify__{source_id}"


def differing_tables(report: Optional[Mapping[str, Any]]) -> list[str]:
    """The tables a verification found differing (``schema.table``), in order."""
    tables = (report or {}).get("tables") or {}
    return sorted(name for name, t in tables.items() if t.get("differing"))


# long: the factory's keyword arguments (those of the load it verifies) and the wiring of its tasks
def make_verify_dag(
    source_id: str,
    *,
    binlog_conn_id: str = BinlogHook.default_conn_name,
    tables: Sequence[str],
    exclude: Optional[Sequence[str]] = None,
    staging: Union[StagingRef, str],
    lake: LakeSettings,
    spark: Optional[SparkSettings] = None,
    masking: Any = None,
    masking_secret_conn_id: Optional[str] = None,
    compare_hashed: bool = True,
    checkpoint_store_uri: Optional[str] = None,
    checkpoint_key: Optional[str] = None,
    schedule: Any = DEFAULT_VERIFY_SCHEDULE,
    start_date: Optional[dt.datetime] = None,
    on_difference: str = "fail",
    chunk_rows: int = 50_000,
    tries: int = 3,
    merge_wait_seconds: float = 1800.0,
    poll_seconds: float = 30.0,
    default_args: Optional[Mapping[str, Any]] = None,
    tags: Optional[Sequence[str]] = None,
) -> DAG:
    """The verify DAG ``binlog_verify__<source_id>`` of a source loaded by
    :func:`~airflow_provider_binlog.dags.make_cdc_dags` (give it the same source, staging,
    catalog, masking and data-contract arguments: its ``staging``, ``lake`` and ``spark``).

    :param schedule: when it verifies (default daily; ``None``: by hand only).
    :param on_difference: ``fail`` (the default) or ``report``, for scheduled runs; in mode
        ``repair`` a difference is repaired instead, and the verification after the repair fails
        on a difference.
    :param chunk_rows: keys per compared range; ``tries`` passes in all (keys changed during a
        pass are checked again after the next incremental merge, waited for up to
        ``merge_wait_seconds``, polled every ``poll_seconds``).
    :param compare_hashed: compare columns hashed by masking (the server computes the same
        HMAC); False leaves them out.
    """
    from airflow.sdk import TriggerRule

    key = checkpoint_key or source_id
    staging = StagingRef.of(staging)
    if not isinstance(lake, LakeSettings):
        raise TypeError(f"lake must be a LakeSettings(namespace=...), not {type(lake).__name__}")
    catalog, namespace = lake.catalog, lake.namespace
    common = dict(binlog_conn_id=binlog_conn_id, namespace=namespace, catalog=catalog, warehouse=lake.warehouse,
                  catalog_conn_id=lake.catalog_conn_id, catalog_settings=lake.catalog_settings,
                  masking=masking, masking_secret_conn_id=masking_secret_conn_id, compare_hashed=compare_hashed,
                  data_contract=lake.data_contract, chunk_rows=chunk_rows, tries=tries,
                  merge_wait_seconds=merge_wait_seconds, poll_seconds=poll_seconds, staging_dir=staging.location,
                  checkpoint_key=key)
    with DAG(
        dag_id=verify_dag_id(source_id),
        schedule=schedule,
        start_date=start_date or dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
        catchup=False,
        max_active_runs=1,
        default_args=dict(default_args or {}),
        tags=list(tags) if tags is not None else ["binlog", "verify", source_id],
        description=f"Verify the Iceberg tables of {source_id} in {catalog}.{namespace} against the source",
        doc_md=f"Compares each table of {', '.join(tables)} with its Iceberg table key range by key range at a "
               f"common binlog position (docs/verify.md). Mode `repair` reloads the tables that differ "
               f"through the watermark snapshot and verifies them again.",
        params={"mode": Param("verify", type="string", enum=list(VERIFY_MODES), title="Mode",
                              description="verify: compare and report; repair: also reload the tables that "
                                          "differ and verify them again")},
    ) as dag:
        verify = BinlogVerifyOperator(
            task_id="verify", tables=list(tables), exclude=list(exclude) if exclude else None,
            on_difference="{{ 'report' if params.mode == 'repair' else '" + on_difference + "' }}", **common)

        @task.short_circuit(task_id="plan_repair")
        def plan_repair(report: Any = None, params: Any = None) -> Any:
            """The tables to reload: in mode repair, those that differ (none: the rest is skipped)."""
            if (params or {}).get("mode") != "repair":
                return False
            return differing_tables(report) or False

        planned = plan_repair(verify.output)
        snapshot = BinlogSnapshotOperator(
            task_id="snapshot", binlog_conn_id=binlog_conn_id, staging=staging, tables=planned,
            masking=masking, masking_secret_conn_id=masking_secret_conn_id)
        merge = BinlogMergeOperator(
            task_id="merge", manifests=snapshot.output, lake=lake, spark=spark, staging=staging,
            binlog_conn_id=binlog_conn_id, checkpoint_store_uri=checkpoint_store_uri, checkpoint_key=key,
            advance_checkpoint=False, stream=f"{key}.partial")
        after = BinlogVerifyOperator(task_id="verify_after", tables=planned, on_difference="fail",
                                     trigger_rule=TriggerRule.ALL_SUCCESS, **common)
        planned >> snapshot >> merge >> after
    return dag


__all__ = ["DEFAULT_VERIFY_SCHEDULE", "VERIFY_MODES", "differing_tables", "make_verify_dag", "verify_dag_id"]
