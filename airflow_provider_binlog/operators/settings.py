"""The settings of a load, in groups: typed, frozen values checked when they are made and
handed whole to :func:`~airflow_provider_binlog.dags.make_cdc_dags` and the operators.

- :class:`LakeSettings`: the Iceberg side (namespace, catalog, table layout and contract).
- :class:`SparkSettings`: how ``spark-submit`` runs the merge job.
- :class:`MergeSettings`: how the merge commits and maintains the tables.
- :class:`SnapshotSettings`: how a snapshot reads the tables.
- :class:`BatchLimits`: where an incremental dump stops early.
- :class:`WaitSettings`: how the incremental DAG waits for new data and the backfill for its turn.

The staging location and its connection travel as one
:class:`~airflow_provider_binlog.staging.ref.StagingRef`. A group whose ``template_fields``
name members may hold Jinja templates there: the operator taking it renders them when the task
runs (:class:`SettingsOperator`) and checks the rendered values again.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Optional, Sequence, Union

from airflow.sdk import BaseOperator

from ..errors import ProviderError
from ..staging.ref import StagingRef


class SettingsError(ProviderError, ValueError):
    """A setting of a group has a value the load does not take; the message names it and says
    what to give."""


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _text(owner: str, name: str, value: Any, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{owner}.{name} must be a non-empty string{' or None' if optional else ''}, "
                            f"not {value!r}")


def _mapping(owner: str, name: str, value: Any) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{owner}.{name} must be a mapping (a dict), not {type(value).__name__}")
    return dict(value)


def _set(instance: Any, name: str, value: Any) -> None:
    object.__setattr__(instance, name, value)


class _Shown:
    """A group Airflow shows among a task's rendered fields by its fields (``serialize``)."""

    def serialize(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class LakeSettings(_Shown):
    """Where and how the merge writes the Iceberg tables.

    :param namespace: the Iceberg namespace of the tables (``<catalog>.<namespace>.<schema>__<table>``).
    :param catalog: the Iceberg catalog's name in Spark.
    :param warehouse: the embedded mode: a Hadoop catalog on this path and a local Spark the job starts.
    :param catalog_conn_id: instead, an Airflow connection of type ``iceberg_catalog`` (JDBC on
        PostgreSQL, REST, Hive, Glue, Nessie; docs/catalogs.md).
    :param catalog_settings: instead, the catalog as a dict: ``type``, ``uri``, ``warehouse``,
        ``properties``, ``jars``. With none of the three, the ``spark.sql.catalog.<catalog>.*``
        settings of :attr:`SparkSettings.conf` configure it.
    :param table_layout: partition spec, sort order and properties of the tables the job creates,
        for all tables and per ``schema.table`` (docs/merge.md).
    :param table_properties: Iceberg properties of every table the job creates (the layout's take
        precedence).
    :param data_contract: change columns, soft deletes and change logs of the merged tables, for
        all tables and per ``schema.table`` (docs/data-contract.md).

    ``namespace``, ``catalog``, ``warehouse`` and ``catalog_conn_id`` may be Jinja templates.
    """

    namespace: str
    catalog: str = "lake"
    warehouse: Optional[str] = None
    catalog_conn_id: Optional[str] = None
    catalog_settings: Optional[Mapping[str, Any]] = None
    table_layout: Union[Mapping[str, Any], str, None] = None
    table_properties: Optional[Mapping[str, str]] = None
    data_contract: Union[Mapping[str, Any], str, None] = None

    template_fields: ClassVar[tuple[str, ...]] = ("namespace", "catalog", "warehouse", "catalog_conn_id")

    def __post_init__(self) -> None:
        from ..merge.contract import DataContract
        from ..merge.errors import MergeJobError
        from ..merge.layout import TableLayouts
        from ..merge.sql import check_identifier

        for name, dotted in (("namespace", True), ("catalog", False)):
            value = getattr(self, name)
            _text("LakeSettings", name, value, optional=False)
            if not _is_template(value):
                try:
                    check_identifier(name, value, dotted=dotted)
                except MergeJobError as exc:
                    raise SettingsError(f"LakeSettings.{exc.message}") from None
        _text("LakeSettings", "warehouse", self.warehouse)
        _text("LakeSettings", "catalog_conn_id", self.catalog_conn_id)
        given = [name for name in ("warehouse", "catalog_conn_id", "catalog_settings") if getattr(self, name)]
        if len(given) > 1:
            raise SettingsError(f"LakeSettings takes one Iceberg catalog, not {' and '.join(given)}: give "
                                "warehouse (embedded), catalog_conn_id or catalog_settings")
        if self.catalog_settings is not None:
            _set(self, "catalog_settings", _mapping("LakeSettings", "catalog_settings", self.catalog_settings))
            if not _is_template(self.catalog):
                from ..spark.catalogs import catalog_from_settings
                catalog_from_settings(self.catalog, self.catalog_settings)  # checked now, not at run time
        properties = _mapping("LakeSettings", "table_properties", self.table_properties)
        _set(self, "table_properties", {str(k): str(v) for k, v in properties.items()} or None)
        # parsed here: a bad layout or contract fails when the DAG is parsed, not in the merge job
        if self.table_layout:
            _set(self, "table_layout", TableLayouts.parse(self.table_layout).to_json())
        if self.data_contract:
            _set(self, "data_contract", DataContract.parse(self.data_contract).to_json())

    def job_options(self) -> dict[str, Any]:
        """What the merge job's :class:`~airflow_provider_binlog.merge.options.MergeOptions` take
        of these settings (the catalog and namespace aside)."""
        from ..merge.contract import DataContract
        from ..merge.layout import TableLayouts

        return {"table_properties": dict(self.table_properties or {}),
                "table_layout": TableLayouts.parse(self.table_layout),
                "data_contract": DataContract.parse(self.data_contract)}


@dataclass(frozen=True)
class SparkSettings(_Shown):
    """How the merge job runs on Spark (``spark-submit``, through the Spark provider's hook).

    :param conn_id: the Spark connection of ``spark-submit``.
    :param deploy_mode: ``"client"`` or ``"cluster"`` (default: the connection's ``deploy-mode``,
        else client). In cluster mode no local interpreter or Java is forced on the driver and
        executors, the job's result is written next to the first manifest, on the staging path all
        parties read, and a standalone ``spark://`` master is refused.
    :param conf: Spark properties, set over those the operator derives.
    :param packages: Maven coordinates for ``spark-submit``; with a catalog of
        :class:`LakeSettings` they name the Iceberg runtime, e.g.
        ``"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"``.
    :param jars: jars for ``spark-submit``; with such a catalog likewise the Iceberg runtime
        (``[]``: the cluster's Spark has Iceberg).
    :param iceberg_runtime: with such a catalog and neither ``packages`` nor ``jars``: ``"maven"``
        (Spark fetches the stock ``iceberg-spark-runtime-3.5_2.12``), ``"provided"`` (the cluster
        has it) or ``"embedded"`` (the jar of the ``spark`` extra, for an offline local Spark).
        Default: ``"embedded"`` for a local Spark where that jar is installed, else ``"maven"``.
    :param env_vars: environment variables for ``spark-submit``, set over the operator's.
    :param application: the merge job's entry point (default: the package's).

    ``conf``, ``packages``, ``jars``, ``env_vars`` and ``application`` may hold Jinja templates.
    """

    conn_id: str = "spark_default"
    deploy_mode: Optional[str] = None
    conf: Optional[Mapping[str, Any]] = None
    packages: Optional[str] = None
    jars: Optional[Sequence[str]] = None
    iceberg_runtime: Optional[str] = None
    env_vars: Optional[Mapping[str, str]] = None
    application: Optional[str] = None

    template_fields: ClassVar[tuple[str, ...]] = ("conf", "packages", "jars", "env_vars", "application")

    def __post_init__(self) -> None:
        _text("SparkSettings", "conn_id", self.conn_id, optional=False)
        if self.deploy_mode not in (None, "client", "cluster"):
            raise SettingsError(f"SparkSettings.deploy_mode is 'client' or 'cluster' (or None: the "
                                f"connection's), not {self.deploy_mode!r}")
        _set(self, "conf", _mapping("SparkSettings", "conf", self.conf))
        _set(self, "env_vars", _mapping("SparkSettings", "env_vars", self.env_vars))
        _text("SparkSettings", "packages", self.packages)
        _text("SparkSettings", "application", self.application)
        if isinstance(self.jars, str):
            _set(self, "jars", [j.strip() for j in self.jars.split(",") if j.strip()])
        elif self.jars is not None:
            if not all(isinstance(j, str) and j for j in self.jars):
                raise TypeError(f"SparkSettings.jars must be a list of jar paths or URLs, not {self.jars!r}")
            _set(self, "jars", list(self.jars))
        if self.iceberg_runtime is not None:
            from ..spark.runtime import ICEBERG_RUNTIMES
            if self.iceberg_runtime not in ICEBERG_RUNTIMES:
                raise SettingsError(f"SparkSettings.iceberg_runtime is one of {', '.join(ICEBERG_RUNTIMES)} "
                                    f"(or None: chosen by the master), not {self.iceberg_runtime!r}")


@dataclass(frozen=True)
class MergeSettings:
    """How the merge commits the batches and maintains the tables. None: the merge job's default.

    :param parallel_tables: tables of a batch the job plans and commits at once, from that many
        driver threads (default 8).
    :param direct_max_bytes: staged bytes a direct commit folds at once: a table with simple
        changes is committed without a Spark job in key ranges of at most this size, up to 32 of
        them (docs/merge.md, "Direct commits"); default 32 MiB; 0 turns direct commits off.
    :param direct_deletes: how direct commits drop the rows they replace: ``"position"`` deletes,
        which every Iceberg reader applies (the default), or ``"equality"`` deletes on the primary
        key, which only JVM engines (Spark, Trino, Flink) read.
    :param maintenance: compact the tables and expire their old snapshots after each merge.
    :param maintenance_every: with ``maintenance``, maintain only tables last maintained longer ago
        than this (a timedelta or hours); default: every run.
    :param expire_older_than_days: maintenance expires snapshots older than this many days (default 7).
    :param retain_last: maintenance keeps at least this many snapshots (default 10).

    Each field is an option of the merge job's
    :class:`~airflow_provider_binlog.merge.options.MergeOptions` of the same name (``maintenance_every``
    becomes ``maintenance_every_hours``), checked by it when the settings are made and handed to it
    whole. Adding a merge option is three edits: its field and check in ``MergeOptions``
    (``merge/options.py``), its field and ``:param`` line here, and the code of the job that uses it;
    the factory and the operator hand the settings on as they are.
    """

    parallel_tables: Optional[int] = None
    direct_max_bytes: Optional[int] = None
    direct_deletes: Optional[str] = None
    maintenance: bool = False
    maintenance_every: Union[dt.timedelta, float, None] = None
    expire_older_than_days: Optional[float] = None
    retain_last: Optional[int] = None

    def __post_init__(self) -> None:
        from ..merge.options import MergeOptions

        if self.maintenance_every is not None and (
                isinstance(self.maintenance_every, bool)
                or not isinstance(self.maintenance_every, (dt.timedelta, int, float))):
            raise TypeError(f"MergeSettings.maintenance_every must be a timedelta or a number of hours, "
                            f"not {self.maintenance_every!r}")
        try:
            MergeOptions.check(**self.job_options())
        except ValueError as exc:
            raise SettingsError(f"MergeSettings: {exc}") from None

    def job_options(self) -> dict[str, Any]:
        """The merge job's options of these settings: those given, by their
        :class:`~airflow_provider_binlog.merge.options.MergeOptions` names."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if getattr(self, f.name) is not None}
        every = out.pop("maintenance_every", None)
        if every is not None:
            out["maintenance_every_hours"] = every.total_seconds() / 3600 if isinstance(every, dt.timedelta) \
                else every
        return out


@dataclass(frozen=True)
class SnapshotSettings:
    """How a snapshot reads the tables (docs/snapshots.md).

    :param method: ``"watermark"`` (key chunks between binlog watermarks, no lock, no long
        transaction; a table without a usable key is read in one consistent transaction, with a log
        line saying so) or ``"consistent"`` (one transaction over every table; on MySQL a short
        ``FLUSH TABLES WITH READ LOCK``, which managed servers refuse).
    :param chunk_rows: rows read per query (tables with a primary key are read in key order, in
        chunks of this size); default 10,000, and 50,000 for a watermark snapshot's table read
        straight into Arrow.
    :param read_connections: the watermark method's connection budget: a chunk of a table keyed by
        one integer column is read over that many connections at once.
    :param reader: how the watermark method reads its chunks: ``"auto"`` (straight into Arrow with
        connectorx where it can, else with pymysql), ``"arrow"`` or ``"pymysql"``.
    """

    method: str = "watermark"
    chunk_rows: Optional[int] = None
    read_connections: int = 1
    reader: str = "auto"

    def __post_init__(self) -> None:
        from ..capture.options import SnapshotOptions

        try:
            SnapshotOptions.check(method=self.method, reader=self.reader, chunk_rows=self.chunk_rows,
                                  read_connections=self.read_connections)
        except ValueError as exc:
            raise SettingsError(f"SnapshotSettings: {exc}") from None


@dataclass(frozen=True)
class BatchLimits:
    """Where an incremental dump stops early: at the first transaction boundary at or after any of
    these (None: no limit); the next run continues where it stopped.

    :param max_rows: rows staged.
    :param max_bytes: bytes of binlog read.
    :param max_seconds: seconds of dumping.
    """

    max_rows: Optional[int] = None
    max_bytes: Optional[int] = None
    max_seconds: Optional[float] = None

    def __post_init__(self) -> None:
        from ..capture.options import DumpOptions

        try:
            DumpOptions.check(max_rows=self.max_rows, max_bytes=self.max_bytes, max_seconds=self.max_seconds)
        except ValueError as exc:
            raise SettingsError(f"BatchLimits: {exc}") from None


@dataclass(frozen=True)
class WaitSettings:
    """How the incremental DAG waits for new binlog data (its ``wait_for_changes`` sensor) and the
    backfill DAG for its turn (``wait_for_incremental``).

    :param min_bytes: bytes of new binlog the sensor waits for (None: any).
    :param min_transactions: transactions of new binlog the sensor waits for (None: any).
    :param max_threshold_wait: below the thresholds, the sensor succeeds anyway once new data has
        waited this long (a timedelta or seconds).
    :param poke_interval: seconds between the sensor's checks.
    :param timeout: seconds the sensor waits for new data.
    :param mode: ``"reschedule"`` (frees the worker slot between checks) or ``"poke"``.
    :param skip_when_idle: skip the run (instead of failing it) when the sensor times out.
    :param max_lag_seconds: when the load is further behind in source time, the sensor calls
        ``lag_notifier`` and goes on (``on_max_lag="notify"``) or fails (``"fail"``).
    :param on_max_lag: ``"notify"`` or ``"fail"``.
    :param lag_notifier: called with the task's context when the lag is over ``max_lag_seconds``.
    :param backfill_poke_interval: seconds between the backfill's checks that no incremental run
        is loading; while the backfill runs, incremental runs skip their dump.
    :param backfill_timeout: seconds the backfill waits for its turn.
    """

    min_bytes: Optional[int] = None
    min_transactions: Optional[int] = None
    max_threshold_wait: Union[dt.timedelta, float, None] = None
    poke_interval: float = 60.0
    timeout: float = 600.0
    mode: str = "reschedule"
    skip_when_idle: bool = True
    max_lag_seconds: Optional[float] = None
    on_max_lag: str = "notify"
    lag_notifier: Optional[Callable[[Any], Any]] = None
    backfill_poke_interval: float = 30.0
    backfill_timeout: float = 6 * 3600.0

    def __post_init__(self) -> None:
        from ..hooks.binlog import check_thresholds

        try:
            check_thresholds(self.min_bytes, self.min_transactions)
        except ValueError as exc:
            raise SettingsError(f"WaitSettings.{exc}") from None
        for name in ("poke_interval", "timeout", "backfill_poke_interval", "backfill_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise SettingsError(f"WaitSettings.{name} must be a number of seconds above 0, not {value!r}")
        for name in ("max_threshold_wait", "max_lag_seconds"):
            value = getattr(self, name)
            seconds = value.total_seconds() if isinstance(value, dt.timedelta) else value
            if value is not None and (isinstance(value, bool) or not isinstance(seconds, (int, float))
                                      or seconds <= 0):
                raise SettingsError(f"WaitSettings.{name} must be a positive number of seconds"
                                    f"{' or a timedelta' if name == 'max_threshold_wait' else ''} (or None), "
                                    f"not {value!r}")
        if self.mode not in ("reschedule", "poke"):
            raise SettingsError(f"WaitSettings.mode is 'reschedule' or 'poke', not {self.mode!r}")
        if self.on_max_lag not in ("notify", "fail"):
            raise SettingsError(f"WaitSettings.on_max_lag is 'notify' or 'fail', not {self.on_max_lag!r}")
        if self.lag_notifier is not None and not callable(self.lag_notifier):
            raise TypeError(f"WaitSettings.lag_notifier must be a callable or None, not {self.lag_notifier!r}")
        if not isinstance(self.skip_when_idle, bool):
            raise TypeError(f"WaitSettings.skip_when_idle must be True or False, not {self.skip_when_idle!r}")

    @property
    def max_threshold_wait_seconds(self) -> Optional[float]:
        value = self.max_threshold_wait
        return value.total_seconds() if isinstance(value, dt.timedelta) else value


def settings_of(kind: type, value: Any, name: str) -> Any:
    """``value`` as a ``kind`` group: the group itself, None as the group's defaults; anything
    else is a ``TypeError`` saying what to give."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}(...), not {type(value).__name__}")
    return value


class SettingsOperator(BaseOperator):
    """An operator whose ``template_fields`` may name frozen settings groups (a
    :class:`LakeSettings`, :class:`SparkSettings`, a
    :class:`~airflow_provider_binlog.staging.ref.StagingRef`): their own ``template_fields`` are
    rendered and the group replaced by one made of the rendered values (so checked again)."""

    def _do_render_template_fields(self, parent: Any, template_fields: Any, context: Any, jinja_env: Any,
                                   seen_oids: set) -> None:
        plain = []
        for name in template_fields:
            value = getattr(parent, name, None)
            if dataclasses.is_dataclass(value) and not isinstance(value, type) \
                    and getattr(value, "template_fields", None) is not None:
                rendered = {field: self.render_template(getattr(value, field), context, jinja_env, seen_oids)
                            for field in value.template_fields}
                setattr(parent, name, dataclasses.replace(value, **rendered))
            else:
                plain.append(name)
        super()._do_render_template_fields(parent, plain, context, jinja_env, seen_oids)


__all__ = ["BatchLimits", "LakeSettings", "MergeSettings", "SettingsError", "SettingsOperator", "SnapshotSettings",
           "SparkSettings", "StagingRef", "WaitSettings", "settings_of"]
