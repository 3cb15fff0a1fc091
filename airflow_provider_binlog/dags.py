"""DAG factory: the scheduled incremental load and the manually triggered backfill of one
binlog source.

``make_cdc_dags("shop", binlog_conn_id=..., tables=["shop.*"], staging=..., lake=LakeSettings(namespace=...))``
returns two DAGs:

``binlog_cdc__<source_id>`` (on ``schedule``, one run at a time, no catchup)
    ``wait_for_changes`` (:class:`~.sensors.position.BinlogPositionSensor`: the server's
    binlog is ahead of the stored checkpoint) -> ``dump``
    (:class:`~.operators.dump.BinlogDumpOperator` from the stored checkpoint to the position
    the sensor saw) -> ``merge`` (:class:`~.operators.merge.BinlogMergeOperator`: the batch
    committed to Iceberg, then the checkpoint store is advanced; with
    ``MergeSettings(maintenance=True)`` a Spark job then compacts the tables and expires old
    snapshots). A run that sees no new data before the ``wait``'s ``timeout`` is skipped (its
    ``skip_when_idle``).

``binlog_backfill__<source_id>`` (no schedule; triggered with parameters)
    ``plan`` checks the parameters -> ``choose`` -> ``snapshot``
    (:class:`~.operators.snapshot.BinlogSnapshotOperator`) or ``dump`` -> ``merge``.

    - ``mode=snapshot``: a consistent read of the tables at the server's current position,
      merged as an overwrite of each table; the checkpoint store is set to the snapshot's
      position, so the incremental DAG continues from there. This is the initial load. With a
      ``tables`` list narrower than the source's, only those tables are replaced and the
      stored checkpoint is left alone: each Iceberg table records the position it holds, and
      the next incremental merge applies to it only the changes after that position.
    - ``mode=from_position`` / ``from_gtid``: a dump from ``from_position`` (``file:pos``) or
      ``from_gtid`` to ``stop`` (``file:pos``, default ``current``), merged like an
      incremental batch. Unlike a snapshot, the batch must start where the checkpoint store
      is (or the store must have no checkpoint for the key yet, e.g. after loading the tables
      another way): the merge refuses a gap or an overlap. These modes load the source's
      whole table selection.

The merge task of both DAGs has the lakehouse tables as outlets: with an explicit table
list, one :class:`~airflow.sdk.Asset` per table (``iceberg://<catalog>/<namespace>/<table>``,
the table named like the merge job names it); with wildcard patterns, one asset for the
source (``binlog://<source_id>``) and an :class:`~airflow.sdk.AssetAlias`
``binlog_tables__<source_id>`` through which each merged table gets an event on its own
``iceberg://`` asset. Each run's asset events carry in ``extra`` the rows
inserted/updated/deleted and the end checkpoint (see
:func:`~.operators.merge.asset_extra`).

The incremental and the backfill DAG of a source share the checkpoint (store and key), so
they take turns: the backfill's first task (``wait_for_incremental``) waits until no
incremental run is dumping or merging, and while a backfill runs, the incremental runs skip
their dump and merge (``yield_to_dag_id``). Neither DAG needs pausing.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from dataclasses import dataclass
from urllib.parse import urlsplit
from typing import Any, Mapping, Optional, Sequence, Union

from airflow.sdk import DAG, Asset, AssetAlias, AssetWatcher, Param, PokeReturnValue, TriggerRule, task

from .checkpoints import Checkpoint
from .errors import ProviderError
from .hooks.binlog import BinlogHook
from .operators.dump import BinlogDumpOperator
from .operators.merge import BinlogMergeOperator, iceberg_asset_uri
from .operators.retention import BinlogStagingRetentionOperator
from .operators.settings import (
    BatchLimits,
    LakeSettings,
    MergeSettings,
    SnapshotSettings,
    SparkSettings,
    WaitSettings,
    settings_of,
)
from .operators.snapshot import BinlogSnapshotOperator
from .sensors.position import BinlogPositionSensor
from .common.tables import TableFilter, iceberg_table_name
from .staging.ref import StagingRef
from .triggers.new_data import BinlogNewDataTrigger, WakeupGate, check_poke_interval

BACKFILL_MODES = ("snapshot", "from_position", "from_gtid")
DEFAULT_SCHEDULE = "*/15 * * * *"
DEFAULT_START_DATE = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
_SOURCE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_WILDCARDS = ("*", "?", "[")


class BackfillParamsError(ProviderError, ValueError):
    """The parameters of a backfill run do not make a valid load; the message says why."""


@dataclass(frozen=True)
class OnNewBinlogData:
    """``schedule=`` of :func:`make_cdc_dags` for event-driven runs: the incremental DAG starts
    when the source's binlog has new data after the stored checkpoint, instead of on a cron.

    A :class:`~.triggers.new_data.BinlogNewDataTrigger` watches the binlog in the triggerer
    (every ``poke_interval`` seconds) through an :class:`~airflow.sdk.AssetWatcher` on the asset
    ``binlog://<source_id>/changes``, with the thresholds ``min_bytes``, ``min_transactions``
    and ``max_threshold_wait`` of the ``wait`` settings. It fires once per checkpoint, at least
    ``min_interval`` seconds apart, again after ``refire_after`` seconds when no run advanced
    the checkpoint. Needs a running triggerer."""

    poke_interval: float = 5.0
    min_interval: float = 10.0
    refire_after: float = 600.0

    def __post_init__(self) -> None:
        check_poke_interval(self.poke_interval)
        WakeupGate(min_interval=self.min_interval, refire_after=self.refire_after)  # checks them


def tables_alias_name(source_id: str) -> str:
    """The asset alias through which the merge of a source named by patterns emits one event
    per Iceberg table."""
    return f"binlog_tables__{source_id}"


def changes_asset_uri(source_id: str) -> str:
    """The asset whose watcher starts the event-driven runs of a source."""
    return f"binlog://{source_id}/changes"


def incremental_dag_id(source_id: str) -> str:
    return f"binlog_cdc__{source_id}"


def backfill_dag_id(source_id: str) -> str:
    return f"binlog_backfill__{source_id}"


def is_explicit(pattern: str) -> bool:
    """Whether a table pattern names exactly one table (no wildcard)."""
    return not any(c in pattern for c in _WILDCARDS)


def source_registration(*, binlog_conn_id: str, checkpoint_key: str, staging_dir: str,
                        checkpoint_store_uri: Optional[str] = None) -> dict:
    """What the factory tells about a source in its assets' ``extra``, so that the Binlog CDC
    view finds it through Airflow's REST API: the connection, the checkpoint key, the staging
    directory and the checkpoint store (left out when its URI holds a password)."""
    out = {"binlog_conn_id": binlog_conn_id, "checkpoint_key": checkpoint_key, "staging_dir": staging_dir}
    if checkpoint_store_uri:
        parts = urlsplit(str(checkpoint_store_uri))
        secret_query = any(word in parts.query.lower() for word in ("pass", "secret", "token", "key"))
        if parts.password is None and not secret_query:
            out["checkpoint_store_uri"] = str(checkpoint_store_uri)
    return out


def cdc_assets(source_id: str, tables: Sequence[str], *, catalog: str, namespace: str,
               registration: Optional[Mapping[str, Any]] = None) -> list[Asset]:
    """The outlets of the merge: one asset per Iceberg table when every pattern names one
    table, else one asset for the source; ``registration`` (:func:`source_registration`) is
    added to their ``extra``."""
    known = dict(registration or {})
    if tables and all(is_explicit(p) for p in tables):
        assets = []
        for pattern in dict.fromkeys(tables):
            schema, _, table = pattern.partition(".")
            assets.append(Asset(uri=iceberg_asset_uri(catalog, namespace, iceberg_table_name(schema, table)),
                                extra={"source_id": source_id, "source_table": pattern, **known}))
        return assets
    return [Asset(uri=f"binlog://{source_id}", extra={"source_id": source_id, "tables": list(tables), **known})]


#: Task instance states of a run that has not finished with a task.
UNFINISHED_STATES = ["scheduled", "queued", "running", "restarting", "up_for_retry", "up_for_reschedule",
                     "deferred"]
#: The incremental DAG's tasks that load: while one of them is unfinished, a backfill waits.
LOADING_TASKS = ["dump", "merge"]


def incremental_loading(ti: Any, source_id: str) -> int:
    """How many runs of the source's incremental DAG are loading: running, with their dump not
    finished, or their dump succeeded and their merge not finished (which has no state yet in
    the moment between the dump's end and the merge's start); the backfill's guard waits for 0.
    A run that has ended never counts, even one marked failed with tasks left without a state."""
    dag_id = incremental_dag_id(source_id)
    if not ti.get_dr_count(dag_id=dag_id, states=["running"]):
        return 0
    candidates = [run_id for run_id, tasks in ti.get_task_states(dag_id=dag_id, task_ids=LOADING_TASKS).items()
                  if _run_loading(tasks)]
    return sum(1 for run_id in candidates
               if _state_text(ti.get_dagrun_state(dag_id=dag_id, run_id=run_id)) == "running")


def _state_text(state: Any) -> Optional[str]:
    return None if state is None else str(getattr(state, "value", state))


def _run_loading(tasks: Mapping[str, Any]) -> bool:
    """Whether a run whose loading tasks have these states is dumping or between its dump and
    the end of its merge."""
    dump, merge = _state_text(tasks.get("dump")), _state_text(tasks.get("merge"))
    return dump in UNFINISHED_STATES or (dump == "success" and (merge is None or merge in UNFINISHED_STATES))


def plan_backfill(params: Mapping[str, Any], *, source_tables: Sequence[str],
                  checkpoint_key: str) -> dict:
    """Check a backfill run's parameters; return what the tasks need: ``mode``, ``branch``
    (the task to run: ``snapshot`` or ``dump``), ``tables``, ``start`` and ``stop`` (of a
    dump), ``advance_checkpoint`` and ``stream`` (of the merge). Raises
    :class:`BackfillParamsError` with every problem found."""
    errors = []
    mode = str(params.get("mode") or "snapshot").strip()
    if mode not in BACKFILL_MODES:
        errors.append(f"mode must be one of {', '.join(BACKFILL_MODES)}, not {mode!r}")
    given = params.get("tables")
    if isinstance(given, str):
        given = [p for p in re.split(r"[,\s]+", given) if p]
    tables = [str(p).strip() for p in (given or source_tables) if str(p).strip()]
    try:
        TableFilter(tables)
    except ValueError as exc:
        errors.append(str(exc))
    full = set(tables) == set(source_tables)
    from_position = str(params.get("from_position") or "").strip()
    from_gtid = str(params.get("from_gtid") or "").strip()
    stop_text = str(params.get("stop") or "current").strip()
    start = None
    stop: Any = "current"
    if mode == "snapshot":
        if from_position or from_gtid:
            errors.append("a snapshot is read at the server's current position: leave from_position "
                          "and from_gtid empty (or choose mode from_position / from_gtid)")
        if stop_text != "current":
            errors.append("a snapshot has no stop position: leave stop at 'current'")
    elif mode in BACKFILL_MODES:
        own, other = ("from_position", "from_gtid") if mode == "from_position" else ("from_gtid", "from_position")
        text = from_position if mode == "from_position" else from_gtid
        if not text:
            example = "mysql-bin.000042:4" if mode == "from_position" else \
                "a MariaDB GTID position (0-1-100) or a MySQL GTID set (uuid:1-100)"
            errors.append(f"mode {mode} needs the parameter {own}: {example}")
        if (from_gtid if mode == "from_position" else from_position):
            errors.append(f"mode {mode} takes {own}, not {other}")
        if text:
            try:
                checkpoint = Checkpoint.parse(text)
            except ValueError as exc:
                errors.append(f"{own}: {exc}")
            else:
                if mode == "from_position" and not checkpoint.has_coordinates:
                    errors.append(f"from_position must be binlog file:position, not {text!r}")
                elif mode == "from_gtid" and (checkpoint.gtid is None or checkpoint.has_coordinates):
                    errors.append(f"from_gtid must be a GTID set or position, not {text!r}")
                else:
                    start = checkpoint.to_json()
        if not full:
            errors.append(f"mode {mode} loads the source's whole table selection "
                          f"({', '.join(source_tables)}): a narrower one would move the checkpoint past "
                          "the other tables' changes; re-load some tables with mode snapshot instead")
        if stop_text != "current":
            try:
                stop_checkpoint = Checkpoint.parse(stop_text)
            except ValueError as exc:
                errors.append(f"stop: {exc}")
            else:
                if not stop_checkpoint.has_coordinates:
                    errors.append(f"stop must be 'current' or binlog file:position, not {stop_text!r}")
                stop = stop_checkpoint.to_json()
    if errors:
        raise BackfillParamsError("invalid backfill parameters: " + "; ".join(errors))
    return {"mode": mode, "branch": "snapshot" if mode == "snapshot" else "dump", "tables": tables,
            "start": start, "stop": stop, "advance_checkpoint": full,
            "stream": None if full else f"{checkpoint_key}.partial"}


# long: the factory's keyword arguments and the wiring of its DAGs; the tasks' work lives in the
# operators
def make_cdc_dags(
    source_id: str,
    *,
    binlog_conn_id: str = BinlogHook.default_conn_name,
    tables: Sequence[str],
    exclude: Optional[Sequence[str]] = None,
    staging: Union[StagingRef, str],
    staging_retention: Union[dt.timedelta, float, None] = None,
    staging_consumers: Optional[Sequence[str]] = None,
    lake: LakeSettings,
    spark: Optional[SparkSettings] = None,
    merge: Optional[MergeSettings] = None,
    merge_engine: Optional[str] = None,
    snapshot: Optional[SnapshotSettings] = None,
    limits: Optional[BatchLimits] = None,
    wait: Optional[WaitSettings] = None,
    masking: Union[Mapping[str, Any], str, None] = None,
    masking_secret_conn_id: Optional[str] = None,
    checkpoint_store_uri: Optional[str] = None,
    checkpoint_key: Optional[str] = None,
    schedule: Any = DEFAULT_SCHEDULE,
    start_date: Optional[dt.datetime] = None,
    deferrable: Optional[bool] = None,
    default_args: Optional[Mapping[str, Any]] = None,
    tags: Optional[Sequence[str]] = None,
) -> tuple[DAG, DAG]:
    """The incremental DAG ``binlog_cdc__<source_id>`` and the backfill DAG
    ``binlog_backfill__<source_id>`` of one source (see the module documentation).

    :param source_id: names the DAGs, the source asset and (by default) the checkpoint key:
        letters, digits, ``_``, ``.``, ``-``, starting with a letter or ``_``.
    :param binlog_conn_id: the ``mysql_binlog`` connection of the server.
    :param tables: ``schema.table`` include patterns (``shop.*``); explicit names give one
        asset per table.
    :param exclude: ``schema.table`` patterns to leave out.
    :param staging: where dumps and snapshots are staged (shared with Spark): a location, or a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` of a location on S3, GCS or Azure
        and the ``aws``, ``google_cloud_platform`` or ``wasb`` connection with its credentials, for
        the dump, the snapshot and the merge (without one: each machine's credential chain;
        docs/configuration.md).
    :param staging_retention: remove staged batches once merged: the minimum age of a removed
        batch (``timedelta`` or seconds; a day keeps what a retried reload needs). After each
        merge, the task ``remove_merged_batches`` removes the batches every load reading
        ``staging`` is past; default None: staged batches are kept (docs/configuration.md).
    :param staging_consumers: the checkpoint keys of the other loads merging from ``staging``
        (same checkpoint store), whose batches retention keeps until they too are past them.
    :param lake: the Iceberg side, a :class:`~airflow_provider_binlog.operators.settings.LakeSettings`:
        the namespace of the tables (``<schema>__<table>``), the catalog (``warehouse`` for the
        embedded mode, ``catalog_conn_id`` or ``catalog_settings``; docs/catalogs.md; with none of
        them, the ``spark``'s ``conf`` configures it), ``table_layout``, ``table_properties`` and
        ``data_contract`` (docs/merge.md, docs/data-contract.md).
    :param spark: how ``spark-submit`` runs the merge, a
        :class:`~airflow_provider_binlog.operators.settings.SparkSettings`: the Spark connection,
        deploy mode, ``conf``, ``packages``, ``jars`` and ``iceberg_runtime`` (default: its defaults).
    :param merge: how the merges commit and maintain the tables, a
        :class:`~airflow_provider_binlog.operators.settings.MergeSettings`: ``parallel_tables``,
        ``direct_max_bytes``, ``direct_deletes`` and, for the incremental merges, ``maintenance``
        (compact and expire snapshots after each merge; ``maintenance_every``,
        ``expire_older_than_days``, ``retain_last``).
    :param merge_engine: ``auto``, ``spark`` or ``iceberg-java``, the merge operators'
        ``merge_engine`` (default: ``[binlog] merge_engine``, ``auto``: Iceberg's Java API first
        with a ``local`` master, ``spark-submit`` with any cluster master).
    :param snapshot: how the backfill's snapshot reads the tables, a
        :class:`~airflow_provider_binlog.operators.settings.SnapshotSettings`: ``method``
        ``watermark`` (the default: key chunks between binlog watermarks, no lock) or
        ``consistent`` (docs/snapshots.md), ``chunk_rows``, ``read_connections``.
    :param limits: the cap of one incremental dump, a
        :class:`~airflow_provider_binlog.operators.settings.BatchLimits` (``max_rows``,
        ``max_bytes``, ``max_seconds``); the next run continues where it stopped.
    :param wait: how the incremental DAG waits for new data and the backfill for its turn, a
        :class:`~airflow_provider_binlog.operators.settings.WaitSettings`: the sensor's thresholds
        (``min_bytes``, ``min_transactions``, ``max_threshold_wait``), ``poke_interval``,
        ``timeout``, ``mode``, ``skip_when_idle`` (skip the run instead of failing it when the
        sensor times out), the lag alarm (``max_lag_seconds``, ``on_max_lag``, ``lag_notifier``)
        and the backfill's ``wait_for_incremental`` (``backfill_poke_interval``,
        ``backfill_timeout``); while the backfill runs, incremental runs skip their dump.
    :param masking: columns to exclude, hash (HMAC-SHA256 keyed by the password of connection
        ``masking_secret_conn_id``) or truncate in the dump and the snapshot, before anything
        is staged (docs/data-contract.md).
    :param checkpoint_store_uri: the checkpoint store; default: the connection's extra
        ``checkpoint_store_uri``.
    :param checkpoint_key: the key of this source's checkpoint in the store (default:
        ``source_id``).
    :param schedule: of the incremental DAG (cron, timedelta, timetable or ``None``), or
        :class:`OnNewBinlogData` to start a run when the binlog has new data (event-driven).
    :param deferrable: the sensor waits in the triggerer instead; default: Airflow's
        ``[operators] default_deferrable``.
    :param default_args: for the tasks of both DAGs (``retries``, ...).
    """
    if not isinstance(source_id, str) or not _SOURCE_ID.fullmatch(source_id):
        raise ValueError(f"source_id must be letters, digits, '_', '.', '-' starting with a letter "
                         f"or '_', not {source_id!r}")
    if isinstance(tables, str):
        tables = [p for p in re.split(r"[,\s]+", tables) if p]
    tables = [p.strip() for p in tables or () if p.strip()]
    exclude = [p.strip() for p in exclude or () if p.strip()]
    if not tables:
        raise ValueError("tables needs at least one schema.table pattern (e.g. shop.*)")
    TableFilter(tables, exclude)  # checks the patterns
    key = checkpoint_key or source_id
    start = start_date or DEFAULT_START_DATE
    staging = StagingRef.of(staging)
    if not isinstance(lake, LakeSettings):
        raise TypeError(f"lake must be a LakeSettings(namespace=...), not {type(lake).__name__}")
    spark = settings_of(SparkSettings, spark, "spark")
    merge = settings_of(MergeSettings, merge, "merge")
    snapshot = settings_of(SnapshotSettings, snapshot, "snapshot")
    limits = settings_of(BatchLimits, limits, "limits")
    wait = settings_of(WaitSettings, wait, "wait")
    catalog, namespace = lake.catalog, lake.namespace
    registration = source_registration(binlog_conn_id=binlog_conn_id, checkpoint_key=key,
                                       staging_dir=staging.location, checkpoint_store_uri=checkpoint_store_uri)
    assets = cdc_assets(source_id, tables, catalog=catalog, namespace=namespace, registration=registration)
    tag_list = list(tags) if tags is not None else ["binlog", "cdc", source_id]
    # what both merges take; only the incremental one maintains the tables
    merged = {"lake": lake, "spark": spark, "merge_engine": merge_engine, "staging": staging,
              "binlog_conn_id": binlog_conn_id, "checkpoint_store_uri": checkpoint_store_uri, "checkpoint_key": key}
    backfill_merge = dataclasses.replace(merge, maintenance=False)
    masked = {"masking": dict(masking) if isinstance(masking, Mapping) else masking,
              "masking_secret_conn_id": masking_secret_conn_id, "staging": staging}
    asset_text = ", ".join(f"`{a.uri}`" for a in assets)
    if not all(is_explicit(p) for p in tables):  # each table's own asset, through an alias
        aliases = [AssetAlias(name=tables_alias_name(source_id))]
        asset_text += f" and, through the alias `{aliases[0].name}`, one asset per table"
    else:
        aliases = []

    sensor_thresholds: dict[str, Any] = {"min_bytes": wait.min_bytes, "min_transactions": wait.min_transactions,
                                         "max_threshold_wait": wait.max_threshold_wait}
    poke_interval, sensor_timeout, skip_when_idle = wait.poke_interval, wait.timeout, wait.skip_when_idle
    if isinstance(schedule, OnNewBinlogData):
        watcher = AssetWatcher(name=f"binlog_new_data__{source_id}", trigger=BinlogNewDataTrigger(
            binlog_conn_id, checkpoint_key=key, checkpoint_store_uri=checkpoint_store_uri,
            min_bytes=wait.min_bytes, min_transactions=wait.min_transactions,
            max_threshold_wait=wait.max_threshold_wait_seconds,
            poke_interval=schedule.poke_interval, min_interval=schedule.min_interval,
            refire_after=schedule.refire_after))
        schedule = [Asset(name=f"binlog_changes__{source_id}", uri=changes_asset_uri(source_id),
                          extra={"source_id": source_id, **registration}, watchers=[watcher])]
        # the watcher applied the thresholds: the run loads whatever is there, and a run that
        # finds nothing (its data loaded by the run before) is skipped within a minute
        sensor_thresholds = {"min_bytes": None, "min_transactions": None, "max_threshold_wait": None}
        poke_interval, sensor_timeout = watcher.trigger.poke_interval, min(sensor_timeout, 60.0)
        skip_when_idle = True  # a run started for data another run loaded is skipped, not failed

    # both DAGs: one run at a time, no catch-up
    shared_dag_args = dict(start_date=start, catchup=False, max_active_runs=1, tags=tag_list)
    with DAG(
        dag_id=incremental_dag_id(source_id),
        schedule=schedule,
        default_args=dict(default_args or {}),
        **shared_dag_args,
        description=f"Incremental binlog load of {source_id} ({', '.join(tables)}) into "
                    f"{catalog}.{namespace}",
        doc_md=f"Waits for new binlog data after the checkpoint `{key}`, dumps it up to the "
               f"position seen, merges it into `{catalog}.{namespace}` and advances the checkpoint. "
               f"Tables: {', '.join(tables)}" + (f" except {', '.join(exclude)}" if exclude else "")
               + f". Assets: {asset_text}. Run `{backfill_dag_id(source_id)}` in mode `snapshot` "
               "first.",
    ) as incremental:
        if deferrable is None:
            from airflow.configuration import conf

            deferrable = conf.getboolean("operators", "default_deferrable", fallback=False)
        sensor = BinlogPositionSensor(
            task_id="wait_for_changes", binlog_conn_id=binlog_conn_id, checkpoint_key=key,
            checkpoint_store_uri=checkpoint_store_uri, **sensor_thresholds,
            poke_interval=poke_interval, timeout=sensor_timeout, mode=wait.mode,
            deferrable=deferrable, skip_on_timeout=skip_when_idle, max_lag_seconds=wait.max_lag_seconds,
            on_max_lag=wait.on_max_lag, lag_notifier=wait.lag_notifier)
        dump = BinlogDumpOperator(
            task_id="dump", binlog_conn_id=binlog_conn_id, stop=sensor.output,
            yield_to_dag_id=backfill_dag_id(source_id), tables=tables, exclude=exclude or None, limits=limits,
            checkpoint_key=key, checkpoint_store_uri=checkpoint_store_uri, **masked)
        merge_task = BinlogMergeOperator(
            task_id="merge", manifests=dump.output, merge=merge, outlets=[*assets, *aliases],
            yield_to_dag_id=backfill_dag_id(source_id), **merged)
        if staging_retention is not None:
            merge_task >> BinlogStagingRetentionOperator(
                task_id="remove_merged_batches", staging=staging,
                checkpoint_keys=[key, *[k for k in staging_consumers or () if k != key]],
                binlog_conn_id=binlog_conn_id, checkpoint_store_uri=checkpoint_store_uri,
                min_age=staging_retention)

    with DAG(
        dag_id=backfill_dag_id(source_id),
        schedule=None,
        default_args=dict(default_args or {}),
        **shared_dag_args,
        description=f"Snapshot or replay of {source_id} into {catalog}.{namespace}",
        doc_md=f"Triggered by hand. `snapshot`: a consistent copy of the tables at the server's "
               f"current position replaces the Iceberg tables and sets the checkpoint `{key}` "
               f"(the initial load). `from_position` / `from_gtid`: a dump from there to `stop`, "
               f"merged like an incremental batch (the checkpoint store must be at that start or "
               f"have no checkpoint yet). Assets: {asset_text}.",
        params={
            "mode": Param("snapshot", type="string", enum=list(BACKFILL_MODES), title="Mode",
                          description="snapshot: copy the tables at the current position (initial "
                                      "load, or to repair tables); from_position / from_gtid: "
                                      "replay the binlog from a position"),
            "tables": Param(list(tables), type="array", minItems=1,
                            items={"type": "string", "pattern": r"^[^.\s]+\.\S+$"}, title="Tables",
                            description="schema.table patterns; default: the source's. A snapshot "
                                        "of fewer tables replaces only those."),
            "from_position": Param(None, type=["null", "string"], pattern=r"^\s*\S+:\d+\s*$",
                                   title="From position",
                                   description="binlog file:position, e.g. mysql-bin.000042:4 "
                                               "(required with mode from_position)"),
            "from_gtid": Param(None, type=["null", "string"], title="From GTID",
                               description="a MariaDB GTID position (0-1-100) or a MySQL GTID set "
                                           "(uuid:1-100) (required with mode from_gtid)"),
            "stop": Param("current", type="string", pattern=r"^\s*(current|\S+:\d+)\s*$", title="Stop",
                          description="where a from_* replay ends: 'current' (the server's position "
                                      "when the dump starts) or file:position"),
        },
    ) as backfill:
        source_tables = list(tables)

        @task(task_id="plan", multiple_outputs=True)
        def plan(params=None) -> dict:
            from airflow.sdk.exceptions import AirflowFailException

            try:
                return plan_backfill(params or {}, source_tables=source_tables, checkpoint_key=key)
            except BackfillParamsError as exc:
                raise AirflowFailException(str(exc)) from None

        @task.branch(task_id="choose")
        def choose(branch: str) -> str:
            return branch

        @task.sensor(task_id="wait_for_incremental", poke_interval=wait.backfill_poke_interval,
                     timeout=wait.backfill_timeout, mode="reschedule")
        def wait_for_incremental() -> PokeReturnValue:
            """Waits until no incremental run of the source is loading; from then on those runs
            skip their dump while this run lasts (``yield_to_dag_id``)."""
            from airflow.sdk import get_current_context

            loading = incremental_loading(get_current_context()["ti"], source_id)
            if loading:
                logging.getLogger(__name__).info("waiting for %d task(s) of %s to finish loading", loading,
                                                 incremental_dag_id(source_id))
            return PokeReturnValue(is_done=loading == 0)

        planned = plan()
        wait_for_incremental() >> planned
        branch = choose(planned["branch"])
        read = BinlogSnapshotOperator(
            task_id="snapshot", binlog_conn_id=binlog_conn_id, tables=planned["tables"], exclude=exclude or None,
            snapshot=snapshot, **masked)
        replay = BinlogDumpOperator(
            task_id="dump", binlog_conn_id=binlog_conn_id,
            start=planned["start"], stop=planned["stop"], tables=planned["tables"],
            exclude=exclude or None, checkpoint_key=key, checkpoint_store_uri=checkpoint_store_uri, **masked)
        branch >> [read, replay]
        BinlogMergeOperator(
            task_id="merge", manifests=[read.output, replay.output], merge=backfill_merge,
            advance_checkpoint=planned["advance_checkpoint"], stream=planned["stream"],
            trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS, outlets=[*assets, *aliases], **merged)

    return incremental, backfill


__all__ = ["BACKFILL_MODES", "BackfillParamsError", "BatchLimits", "LakeSettings", "MergeSettings", "OnNewBinlogData",
           "SnapshotSettings", "SparkSettings", "StagingRef", "WaitSettings", "backfill_dag_id", "cdc_assets",
           "changes_asset_uri", "incremental_dag_id", "incremental_loading", "is_explicit", "make_cdc_dags",
           "plan_backfill", "source_registration", "tables_alias_name"]
