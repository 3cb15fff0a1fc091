"""``BinlogMergeOperator``: apply staged dumps to Iceberg with the merge job, via spark-submit or
first on Iceberg's Java API on the worker (``merge_engine``)."""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

from airflow.sdk import BaseOperator

from airflow_provider_binlog.hooks.staging_storage import staging_storage_options
from airflow_provider_binlog.staging.storage import SECRET_ENV, delete_file
from airflow_provider_binlog.operators.links import BinlogCdcViewLink, SparkApplicationLink, spark_application_url
from airflow_provider_binlog.merge.options import STORE_ENV, store_without_password
from airflow_provider_binlog.operators.merge_events import asset_extra, iceberg_asset_uri
from airflow_provider_binlog.operators.engine_choice import (
    ICEBERG_JAVA,
    EngineChoiceError,
    choose_engine,
    engines_used,
)
from airflow_provider_binlog.operators.merge_job import (
    JobWithoutSpark,
    KillableSparkSubmitHook,
    driver_class_archive,
    merge_application,
    merged_results,
    read_result,
    summarize,
)
from airflow_provider_binlog.spark.class_archive import with_archive
from airflow_provider_binlog.utils.settings import setting

if TYPE_CHECKING:
    from airflow_provider_binlog.merge.options import MergeOptions

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException


def manifest_paths(value: Any) -> list[str]:
    """Manifest paths from what a task may hand over: a path, a list of paths, a dump result
    dict (``{"manifest": ...}``) or a list of those. Empty dumps are kept: they advance the
    checkpoint."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        text = str(value).strip()
        if text.startswith("[") or text.startswith("{"):
            return manifest_paths(json.loads(text))
        return [text]
    if isinstance(value, dict):
        if "manifest" not in value:
            raise ValueError(f"not a dump result: {sorted(value)} (expected a 'manifest' key)")
        return [str(value["manifest"])]
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in manifest_paths(item)]
    raise ValueError(f"cannot read manifest paths from {type(value).__name__}")


def _staging_root(manifest: str) -> str:
    """The staging directory (or object store prefix) holding a dump, given as its directory
    or its manifest.json."""
    base = manifest.rstrip("/")
    if base.rsplit("/", 1)[-1] == "manifest.json":
        base = base.rsplit("/", 1)[0]
    return base.rsplit("/", 1)[0]


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "no", "off", "none")
    return bool(value)


class BinlogMergeOperator(BaseOperator):
    """Apply staged dumps (usually the dump task's XCom) to Iceberg with the merge job: through
    ``spark-submit`` (``SparkSubmitHook``), or first on Iceberg's Java API on the worker, as
    ``merge_engine`` chooses. Returns per table the rows inserted/updated/deleted and snapshot id,
    the end checkpoint and the ``engine`` that ran.

    The Iceberg catalog (named ``catalog`` in the job's SQL) comes from ``warehouse``,
    ``catalog_conn_id`` or ``catalog_settings`` (at most one), else from the
    ``spark.sql.catalog.<catalog>.*`` settings in ``conf``. Catalog secrets (``jdbc.password``,
    tokens) and staging credentials reach the job in its environment, never on the command line (on
    a YARN or Kubernetes master, where that environment becomes ``--conf`` options, the task fails).

    After the commit the checkpoint store is advanced with compare-and-set. A batch must start at the
    stored checkpoint (without a store: at its stream's position in the ledger) or end at or before it
    (already applied: nothing is committed); a gap or an overlap is refused. A snapshot replaces its
    tables' content and sets the checkpoint to its position, anywhere after the stored one. Each asset
    among the ``outlets`` gets an event saying what the run loaded (:func:`asset_extra`); an
    :class:`~airflow.sdk.AssetAlias` one per merged table, on ``iceberg://<catalog>/<namespace>/<table>``.

    :param manifests: the dumps to apply: a manifest path (or its dump directory), a dump or
        snapshot result (``{"manifest": ...}``), a list of those, or their JSON text. Empty dumps
        are applied too (they advance the checkpoint); no manifest at all fails the task.
    :param namespace: the Iceberg namespace of the tables (``<catalog>.<namespace>.<schema>__<table>``).
    :param catalog: the Iceberg catalog's name in Spark (default ``"lake"``).
    :param conn_id: the Spark connection of spark-submit (default ``"spark_default"``).
    :param warehouse: the embedded mode: a Hadoop catalog on this path and a local Spark the job starts.
    :param checkpoint_store_uri: the checkpoint store to advance, given with ``checkpoint_key`` or
        with ``binlog_conn_id`` (it then overrides that connection's store). Default: none.
    :param checkpoint_key: the key in that store (with ``binlog_conn_id``, default: the connection id).
    :param conf: Spark properties, set over those the operator derives (default: none).
    :param packages: Maven coordinates for spark-submit; with ``warehouse``, ``catalog_conn_id`` or
        ``catalog_settings`` they name the Iceberg runtime, e.g.
        ``"org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"``. Default: none.
    :param jars: jars for spark-submit; with those catalogs likewise the Iceberg runtime (``[]``:
        the cluster's Spark has Iceberg). Default: none.
    :param iceberg_runtime: with those catalogs and neither ``packages`` nor ``jars``: ``"maven"``
        (Spark fetches the stock runtime), ``"provided"`` (the cluster has it) or ``"embedded"`` (the
        jar of the ``spark`` extra, for an offline local Spark). Default: ``"embedded"`` for a local
        Spark where that jar is installed, else ``"maven"``.
    :param maintenance: compact the tables and expire their old snapshots (default ``False``).
    :param env_vars: environment variables for spark-submit, set over the operator's (default: none).
    :param application: the merge job's entry point (default: the package's, :func:`merge_application`).
    :param binlog_conn_id: a connection whose extra ``checkpoint_store_uri`` is the store to advance
        and whose id is the default ``checkpoint_key``, as for the dump and the sensor. Default: none.
    :param stream: the stream's name in the ledger (default: the checkpoint key, else ``"default"``).
    :param advance_checkpoint: false (also ``"false"``, ``"0"``, ...: templated) reads and writes no
        checkpoint store, for a snapshot of some tables only: each Iceberg table records the position
        it holds and the next incremental batch applies to it only the later changes. Default ``True``.
    :param parallel_tables: how many tables of a batch the job plans and commits at once, from that
        many driver threads of its Spark application (default 8).
    :param direct_max_bytes: staged bytes a direct commit folds at once: a table with simple changes
        is committed without a Spark job in key ranges of at most this size, up to 32 of them
        (docs/merge.md, "Direct commits"); default 32 MiB; 0 turns direct commits off.
    :param direct_deletes: how direct commits drop the rows they replace: ``"position"`` deletes,
        which every Iceberg reader applies (the default), or ``"equality"`` deletes on the primary
        key, which only JVM engines (Spark, Trino, Flink) read.
    :param catalog_conn_id: an Airflow connection of type ``iceberg_catalog`` (JDBC on PostgreSQL,
        REST, Hive, Glue, Nessie: :mod:`airflow_provider_binlog.hooks.iceberg_catalog`).
    :param catalog_settings: a catalog as a dict: ``type``, ``uri``, ``warehouse``, ``properties``, ``jars``.
    :param deploy_mode: ``"client"`` or ``"cluster"`` (default: the connection's ``deploy-mode``, else
        client). In cluster mode no local interpreter or Java is forced on the driver and executors,
        the job's result is written next to the first manifest, on the staging path all parties
        read, and a standalone ``spark://`` master is refused.
    :param table_layout: partition spec, sort order and properties of the tables the job creates,
        for all tables and per ``schema.table`` (:mod:`airflow_provider_binlog.merge.layout`).
    :param table_properties: Iceberg properties of the tables the job creates (the layout's take precedence).
    :param maintenance_every: with ``maintenance``, maintain only tables last maintained longer ago
        than this (a timedelta or hours); default: every run.
    :param expire_older_than_days: maintenance expires snapshots older than this many days (default 7).
    :param retain_last: maintenance keeps at least this many snapshots (default 10).
    :param data_contract: change columns, soft deletes and change logs of the merged tables, for all
        tables and per ``schema.table`` (:mod:`airflow_provider_binlog.merge.contract`).
    :param staging_conn_id: an ``aws``, ``google_cloud_platform`` or ``wasb`` connection giving the
        job the credentials of a staging on S3, GCS or Azure, through the driver's environment;
        default: the driver's and executors' own credential chain.
    :param openlineage_inject_parent_job_info: as in ``SparkSubmitOperator``, put this task's
        OpenLineage parent job into the job's ``spark.openlineage.*`` properties (unless ``conf``
        sets them), so that a listener on the cluster links its events to this task. Default: the
        setting ``[openlineage] spark_inject_parent_job_info`` (else ``False``).
    :param openlineage_inject_transport_info: likewise the OpenLineage HTTP transport. Default:
        ``[openlineage] spark_inject_transport_info`` (else ``False``).
    :param yield_to_dag_id: a DAG whose running runs take precedence (the factory passes the
        source's backfill DAG to the incremental merge): while one runs, this task is skipped
        before it reads anything; the next run dumps the same changes again from the stored checkpoint.
    :param merge_engine: which engine merges (templated; default: ``[binlog] merge_engine``, ``auto``):
        ``auto`` runs Iceberg's Java API in a bare JVM on the worker first only with a ``local``
        master (Spark would run on the worker anyway) and ``spark-submit`` with any cluster
        master; ``spark`` always ``spark-submit``; ``iceberg-java`` the Java API first wherever
        it can see what the Spark driver would (warned once on a cluster master). A batch the
        Java engine cannot commit goes to ``spark-submit``; the XCom's ``engine`` then says
        ``iceberg-java+spark`` (docs/configuration.md, "Which engine runs my merge").
    """

    operator_extra_links = (BinlogCdcViewLink(), SparkApplicationLink())
    template_fields: Sequence[str] = ("manifests", "catalog", "namespace", "checkpoint_store_uri",
                                      "checkpoint_key", "warehouse", "conf", "binlog_conn_id", "stream",
                                      "catalog_conn_id", "advance_checkpoint", "staging_conn_id", "env_vars",
                                      "packages", "jars", "application", "merge_engine")
    ui_color = "#dfeaf7"

    # long: the operator's keyword arguments, taken one by one as the Spark provider's operators
    # take theirs
    def __init__(self, *, manifests: Union[str, list, dict], namespace: str, catalog: str = "lake",
                 conn_id: str = "spark_default", warehouse: Optional[str] = None,
                 checkpoint_store_uri: Optional[str] = None, checkpoint_key: Optional[str] = None,
                 conf: Optional[dict] = None, packages: Optional[str] = None,
                 jars: Optional[list] = None, iceberg_runtime: Optional[str] = None, maintenance: bool = False,
                 env_vars: Optional[dict] = None, application: Optional[str] = None,
                 binlog_conn_id: Optional[str] = None, stream: Optional[str] = None,
                 advance_checkpoint: Any = True, parallel_tables: Optional[int] = None,
                 direct_max_bytes: Optional[int] = None, direct_deletes: Optional[str] = None,
                 catalog_conn_id: Optional[str] = None, catalog_settings: Optional[dict] = None,
                 deploy_mode: Optional[str] = None, table_layout: Union[dict, str, None] = None,
                 table_properties: Optional[dict] = None,
                 maintenance_every: Union[dt.timedelta, float, None] = None,
                 expire_older_than_days: Optional[float] = None, retain_last: Optional[int] = None,
                 data_contract: Union[dict, str, None] = None,
                 staging_conn_id: Optional[str] = None,
                 openlineage_inject_parent_job_info: Optional[bool] = None,
                 openlineage_inject_transport_info: Optional[bool] = None,
                 yield_to_dag_id: Optional[str] = None, merge_engine: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        #: auto, spark or iceberg-java; None: ``[binlog] merge_engine`` (see :mod:`.engine_choice`)
        self.merge_engine = merge_engine
        self.yield_to_dag_id = yield_to_dag_id
        from airflow.sdk import conf as airflow_conf

        self.openlineage_inject_parent_job_info = airflow_conf.getboolean(
            "openlineage", "spark_inject_parent_job_info", fallback=False) \
            if openlineage_inject_parent_job_info is None else bool(openlineage_inject_parent_job_info)
        self.openlineage_inject_transport_info = airflow_conf.getboolean(
            "openlineage", "spark_inject_transport_info", fallback=False) \
            if openlineage_inject_transport_info is None else bool(openlineage_inject_transport_info)
        self.staging_conn_id = staging_conn_id
        from airflow_provider_binlog.merge.contract import DataContract
        from airflow_provider_binlog.merge.layout import TableLayouts
        self.table_layout = TableLayouts.parse(table_layout).to_json() if table_layout else None
        # parsed here: bad options fail when the DAG is parsed, not in the merge job
        self.data_contract = DataContract.parse(data_contract).to_json() if data_contract else None
        self.table_properties = {str(k): str(v) for k, v in (table_properties or {}).items()}
        if isinstance(maintenance_every, dt.timedelta):
            maintenance_every = maintenance_every.total_seconds() / 3600
        self.maintenance_every_hours = maintenance_every
        self.expire_older_than_days = expire_older_than_days
        self.retain_last = retain_last
        self.parallel_tables = parallel_tables
        self.direct_max_bytes = direct_max_bytes
        self.direct_deletes = direct_deletes
        given = [name for name, value in (("warehouse", warehouse), ("catalog_conn_id", catalog_conn_id),
                                          ("catalog_settings", catalog_settings)) if value]
        if len(given) > 1:
            raise ValueError(f"give one Iceberg catalog, not {' and '.join(given)}")
        if deploy_mode not in (None, "client", "cluster"):
            raise ValueError(f"deploy_mode is client or cluster, not {deploy_mode!r}")
        if catalog_settings:
            from airflow_provider_binlog.spark.catalogs import catalog_from_settings
            catalog_from_settings(catalog, catalog_settings)  # checked now, not at run time
        self.catalog_conn_id = catalog_conn_id
        self.catalog_settings = catalog_settings
        self.deploy_mode = deploy_mode
        self.binlog_conn_id = binlog_conn_id
        self.stream = stream
        self.advance_checkpoint = advance_checkpoint
        self.manifests = manifests
        self.namespace = namespace
        self.catalog = catalog
        self.conn_id = conn_id
        self.warehouse = warehouse
        self.checkpoint_store_uri = checkpoint_store_uri
        self.checkpoint_key = checkpoint_key
        self.conf = conf or {}
        self.packages = packages
        self.jars = jars
        if iceberg_runtime is not None:
            from airflow_provider_binlog.spark.runtime import choose_iceberg_runtime
            choose_iceberg_runtime(iceberg_runtime)  # refused here, not at run time
        self.iceberg_runtime = iceberg_runtime
        self.maintenance = maintenance
        self.env_vars = env_vars or {}
        self.application = application
        self._hook: Optional[KillableSparkSubmitHook] = None
        self._job: Optional[JobWithoutSpark] = None
        self._killed = False
        #: where the Spark application of the last run can be seen (the "Spark application" link)
        self.spark_application_url = ""
        # the merge options that are not templates are checked now (a DAG with a bad one does not
        # load), by the checks MergeOptions makes; the others when execute() makes the options
        from airflow_provider_binlog.merge.options import MergeOptions
        MergeOptions.check(**self._job_settings())

    def iceberg_catalog(self):
        """The :class:`~airflow_provider_binlog.spark.catalogs.IcebergCatalog` this merge writes
        to, or ``None`` when ``conf`` configures it."""
        from airflow_provider_binlog.spark.catalogs import IcebergCatalog, catalog_from_settings
        if self.warehouse:
            return IcebergCatalog(self.catalog, "hadoop", warehouse=self.warehouse)
        if self.catalog_conn_id:
            from airflow_provider_binlog.hooks.iceberg_catalog import IcebergCatalogHook
            return IcebergCatalogHook(self.catalog_conn_id).get_catalog(self.catalog)
        if self.catalog_settings:
            return catalog_from_settings(self.catalog, self.catalog_settings)
        return None

    def _spark_conf(self, catalog, master: str = "") -> dict:
        conf = {}
        if catalog is not None:
            from airflow_provider_binlog.spark.runtime import catalog_spark_conf
            local = bool(self.warehouse) or not master or master.startswith("local")
            conf.update(catalog_spark_conf(catalog, packages=self.packages, jars=self.jars,
                                           runtime=self.iceberg_runtime, local=local))
        conf.update({str(k): str(v) for k, v in self.conf.items()})
        return conf

    def _with_openlineage(self, conf: dict, context) -> dict:
        """``conf`` with the OpenLineage parent job and transport properties asked for."""
        from airflow_provider_binlog.utils.lineage import with_openlineage

        return with_openlineage(conf, context, parent=self.openlineage_inject_parent_job_info,
                                transport=self.openlineage_inject_transport_info, log=self.log)

    def _submit_target(self) -> tuple[str, str]:
        """``(master, deploy mode)``: this operator's deploy mode, else the Spark connection's. The
        master is read from the connection as the Spark provider documents it (a ``spark``
        connection's host holding the master URL, else ``<conn type>://host``, with the port);
        ``yarn`` without a connection."""
        from airflow.exceptions import AirflowNotFoundException
        from airflow.sdk import BaseHook

        try:
            conn = BaseHook.get_connection(self.conn_id)
        except AirflowNotFoundException:
            return "yarn", self.deploy_mode or "client"
        if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
            master = conn.host
        else:
            master = f"{conn.conn_type}://{conn.host or ''}"
        master = f"{master}:{conn.port}" if conn.port else master
        extra = conn.extra_dejson or {}
        return master, self.deploy_mode or extra.get("deploy-mode") or "client"

    def _env(self, catalog=None, *, cluster: bool = False, master: str = "", staging=None) -> dict:
        env: dict = {}
        if not cluster:  # the driver runs here: its Python workers use this interpreter
            env = {"PYSPARK_PYTHON": sys.executable,
                   "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        if self.warehouse:  # the embedded local Spark listens on loopback only
            env["SPARK_LOCAL_IP"] = "127.0.0.1"
        secrets = catalog.secret_conf() if catalog is not None else {}
        if secrets:
            from airflow_provider_binlog.spark.catalogs import SECRET_CONF_ENV
            if "yarn" in master or "k8s" in master:
                # the Spark provider hands a YARN or Kubernetes driver its environment as
                # --conf options: a secret would be on the command line and in the log
                raise AirflowException(
                    f"the catalog's secret settings ({', '.join(sorted(secrets))}) cannot reach a {master} "
                    f"driver without appearing on the spark-submit command line: give the driver the "
                    f"environment variable {SECRET_CONF_ENV} (a JSON object of those settings) through the "
                    f"cluster, e.g. conf spark.kubernetes.driver.secretKeyRef.{SECRET_CONF_ENV}=<secret>:<key>, "
                    "and leave the password out of the catalog connection")
            try:
                from airflow.sdk.log import mask_secret
                for value in secrets.values():
                    mask_secret(value)
            except ImportError:  # pragma: no cover - an Airflow without the Task SDK's masker
                pass
            env[SECRET_CONF_ENV] = json.dumps(secrets)
        if staging is not None:
            staged_env = staging.to_env()
            secret = [k for k in SECRET_ENV if k in staged_env]
            if secret and ("yarn" in master or "k8s" in master):
                raise AirflowException(
                    f"the staging connection's credentials cannot reach a {master} driver without appearing "
                    f"on the spark-submit command line: give the driver and executors a role (an instance "
                    f"profile, IRSA, workload identity) and leave the keys out of {self.staging_conn_id!r}")
            env.update(staged_env)
        if "JAVA_HOME" not in self.env_vars and not cluster:  # a cluster brings its own Java
            try:
                from airflow_provider_binlog.spark.runtime import find_java17_home
                env["JAVA_HOME"] = find_java17_home()
            except Exception:  # a cluster image brings its own Java
                pass
        env.update(self.env_vars)
        return env

    def _store_env(self, url: Optional[str], master: str) -> dict:
        """The checkpoint store's URL for the job's environment when it holds a password (never
        on a command line)."""
        if not url:
            return {}
        if "yarn" in master or "k8s" in master:
            raise AirflowException(
                f"the checkpoint store's password cannot reach a {master} driver without appearing on the "
                f"spark-submit command line: leave it out of the URL and give it to the driver as the "
                f"PostgreSQL client reads it (PGPASSWORD, a .pgpass file; docs/checkpoint-stores.md)")
        try:
            from urllib.parse import urlsplit

            from airflow.sdk.log import mask_secret
            mask_secret(urlsplit(url).password or "")
        except ImportError:  # pragma: no cover - an Airflow without the Task SDK's masker
            pass
        return {STORE_ENV: url}

    def execute(self, context) -> dict:
        from .turns import yield_to_running_runs

        yield_to_running_runs(context, self.yield_to_dag_id, "merge")
        paths = manifest_paths(self.manifests)
        if not paths:
            raise AirflowException("no manifest to merge: the dump task returned nothing")
        began = time.monotonic()
        catalog = self.iceberg_catalog()
        staging = staging_storage_options(self.staging_conn_id)  # for the job and the task's own reads
        master, mode = self._submit_target()
        cluster = mode == "cluster"
        if cluster and master.startswith("spark://"):
            raise AirflowException(f"Spark's standalone master {master} runs no Python application in "
                                   "cluster deploy mode: use client mode there")
        if catalog is not None:
            self.log.info("Iceberg catalog %s", catalog.describe())
        with tempfile.TemporaryDirectory(prefix="binlog-merge-") as tmp:
            # in cluster mode the driver runs elsewhere: the result goes to the staging path
            output = (f"{_staging_root(paths[0])}/.merge-result-{uuid.uuid4().hex}.json" if cluster
                      else str(Path(tmp) / "result.json"))
            store, key = self._checkpoint_store()
            public_store, secret_store = store_without_password(store)
            options = self.merge_options(public_store, key)
            job_args: list[str] = []
            for p in paths:
                job_args += ["--manifest", p]
            job_args += ["--options", options.to_json_text()]
            env = {**self._env(catalog, cluster=cluster, master=master, staging=staging),
                   **self._store_env(secret_store, master)}
            conf = self._with_openlineage(self._spark_conf(catalog, master), context)
            result, applied = None, []
            choice = self._engine_choice(master, cluster, conf, catalog, options.direct_max_bytes)
            if choice.first == ICEBERG_JAVA:
                self._job = JobWithoutSpark(self.log)
                self._job.killed = self._killed
                jars = [] if catalog is not None else list(self.jars or ())
                result, applied = self._job.run(merge_application(), job_args, conf, self.catalog, env,
                                                str(Path(tmp) / "result-iceberg.json"), jars)
            if result is None:
                if self._killed:
                    raise AirflowException("the merge task was killed")
                result = merged_results(self._spark_submit(job_args, output, conf, env, cluster, catalog,
                                                           staging), applied)
            result["engine"] = engines_used(self._job is not None, self._hook is not None)
            if self._job is not None and self._hook is not None:
                self.log.info("the merge used both engines: iceberg-java, then spark for what it refused")
        if result.get("error"):
            raise AirflowException(f"the merge job failed: {result['error']}")
        self.spark_application_url = spark_application_url(result, master, setting("spark_history_url"))
        summary = summarize(result, paths, staging)
        try:  # a metric must not fail a committed merge
            from airflow_provider_binlog.utils.metrics import record_merge
            record_merge(key or self.stream or self.namespace, summary, time.monotonic() - began)
        except Exception:
            self.log.warning("the merge's metrics could not be sent", exc_info=True)
        self.log.info("merged %d inserted, %d updated, %d deleted rows; checkpoint %s",
                      summary["inserted"], summary["updated"], summary["deleted"],
                      summary["end_checkpoint"])
        self._emit_asset_events(context, summary)
        self._lineage = (paths, catalog)
        return summary

    def _engine_choice(self, master: str, cluster: bool, conf: dict, catalog: Any, direct_max_bytes: int) -> Any:
        """Which engine runs first (:func:`.engine_choice.choose_engine`), logged with why."""
        import importlib.util

        packages = None if catalog is not None else self.packages
        spark_only = "application" if self.application else ("packages" if packages else None)
        try:
            choice = choose_engine(self.merge_engine or setting("merge_engine"), master=master, cluster=cluster,
                                   conf=conf, spark_only=spark_only, direct_max_bytes=direct_max_bytes,
                                   pyspark_installed=importlib.util.find_spec("pyspark") is not None)
        except EngineChoiceError as exc:
            raise AirflowException(str(exc)) from None
        self.log.info("merge engine %s first: %s", choice.first, choice.reason)
        if choice.warning:
            self.log.warning("%s", choice.warning)
        return choice

    def _spark_submit(self, job_args: list[str], output: str, conf: dict, env: dict, cluster: bool,
                      catalog: Any, staging: Any) -> dict:
        """The merge job through ``spark-submit``; its result."""
        archive = None if cluster else driver_class_archive(conf, env.get("JAVA_HOME"))
        self._hook = KillableSparkSubmitHook(
            conf=with_archive(conf, archive), conn_id=self.conn_id,
            application_args=[*job_args, "--output-json", output],
            packages=None if catalog is not None else self.packages,
            jars=None if catalog is not None else (",".join(self.jars) if self.jars else None),
            env_vars=env, name=f"binlog-merge-{self.namespace}", deploy_mode=self.deploy_mode)
        self._hook.killed = self._killed
        try:
            try:
                self._hook.submit(self.application or merge_application())
                if archive is not None:
                    archive.finish(succeeded=True)
            except Exception as exc:
                if archive is not None:
                    archive.finish(succeeded=False)
                if self._killed:
                    raise AirflowException(f"the merge task was killed ({exc})") from None
                detail = (read_result(output, staging) or {}).get("error", "")
                raise AirflowException(f"the merge job failed: {detail or exc}") from None
            if self._killed:
                raise AirflowException("the merge task was killed")
            written = read_result(output, staging)
            if written is None:
                raise AirflowException(f"the merge job ended without writing a whole result {output}")
            return written
        finally:
            if cluster:
                delete_file(output, staging)

    def get_openlineage_facets_on_complete(self, task_instance) -> Any:
        """OpenLineage: the source tables of the merged dumps in, their Iceberg tables out
        (see :mod:`..utils.lineage`)."""
        from airflow_provider_binlog.utils import lineage

        paths, catalog = getattr(self, "_lineage", ([], None))
        if not paths:
            return lineage.operator_lineage([], [])
        staging = staging_storage_options(self.staging_conn_id)
        warehouse = catalog.warehouse if catalog is not None else self.conf.get(
            f"spark.sql.catalog.{self.catalog}.warehouse")
        return lineage.operator_lineage(
            lineage.source_datasets(paths, staging),
            lineage.iceberg_datasets(paths, catalog=self.catalog, namespace=self.namespace, warehouse=warehouse,
                                     options=staging))

    def _job_settings(self) -> dict[str, Any]:
        """The merge options of this operator's arguments that are not templates, those given."""
        from airflow_provider_binlog.merge.contract import DataContract
        from airflow_provider_binlog.merge.layout import TableLayouts

        given = {"parallel_tables": self.parallel_tables, "direct_max_bytes": self.direct_max_bytes,
                 "direct_deletes": self.direct_deletes, "maintenance_every_hours": self.maintenance_every_hours,
                 "expire_older_than_days": self.expire_older_than_days, "retain_last": self.retain_last}
        out: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        out.update(maintenance=bool(self.maintenance), table_properties=self.table_properties,
                   table_layout=TableLayouts.parse(self.table_layout),
                   data_contract=DataContract.parse(self.data_contract))
        return out

    def merge_options(self, store: Optional[str] = None, key: Optional[str] = None) -> "MergeOptions":
        """The :class:`~airflow_provider_binlog.merge.options.MergeOptions` the job gets: this
        operator's (rendered) arguments, with the checkpoint store ``store`` and ``key``."""
        from airflow_provider_binlog.merge.options import MergeOptions

        return MergeOptions(namespace=self.namespace, catalog=self.catalog, warehouse=self.warehouse or None,
                            checkpoint_store=store, checkpoint_key=key, stream=self.stream or None,
                            **self._job_settings())

    def _checkpoint_store(self) -> tuple[Optional[str], Optional[str]]:
        """The checkpoint store URI and key the merge job advances (``(None, None)``: none)."""
        if not _truthy(self.advance_checkpoint):
            return None, None
        store, key = self.checkpoint_store_uri or None, self.checkpoint_key or None
        if self.binlog_conn_id:
            from airflow_provider_binlog.hooks.binlog import BinlogHook
            ref = BinlogHook(self.binlog_conn_id, checkpoint_store_uri=store).checkpoint_ref(key)
            store, key = ref.store_uri, ref.key
            if not store:
                raise AirflowException(
                    f"connection {self.binlog_conn_id!r} has no extra 'checkpoint_store_uri' and "
                    "the merge was given no checkpoint_store_uri")
        return store, key

    def _emit_asset_events(self, context, summary: dict) -> None:
        """Put what this run loaded into the asset events of the outlets."""
        outlet_events = context.get("outlet_events") if hasattr(context, "get") else None
        if outlet_events is None:
            return
        for outlet in self.outlets or ():
            kind = type(outlet).__name__
            if kind == "AssetAlias":
                self._emit_table_events(outlet_events[outlet], summary)
                continue
            uri = getattr(outlet, "uri", None)
            if uri is None or kind != "Asset":
                continue
            outlet_events[outlet].extra = asset_extra(uri, summary, self.catalog, self.namespace)

    def _emit_table_events(self, alias_events, summary: dict) -> None:
        """Through an asset alias: one event per Iceberg table the run merged, on the table's
        own asset ``iceberg://<catalog>/<namespace>/<table>``."""
        from airflow.sdk import Asset

        for source, info in sorted((summary.get("tables") or {}).items()):
            name = str(info.get("iceberg_table") or "")
            catalog, _, rest = name.partition(".")
            namespace, _, table = rest.rpartition(".")
            if not (catalog and namespace and table):
                continue
            uri = iceberg_asset_uri(catalog, namespace, table)
            alias_events.add(Asset(uri=uri, extra={"source_table": source}),
                             extra=asset_extra(uri, summary, catalog, namespace))

    def on_kill(self) -> None:
        self._killed = True  # checked where the merge hands over to a process not started yet
        if self._job is not None:
            self._job.kill()
        if self._hook is not None:
            self._hook.on_kill()
