"""``BinlogMergeOperator``: apply staged dumps to Iceberg with the merge job, via spark-submit or
first on Iceberg's Java API on the worker (``merge_engine``)."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

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
from airflow_provider_binlog.operators.settings import (
    LakeSettings,
    MergeSettings,
    SettingsOperator,
    SparkSettings,
    settings_of,
)
from airflow_provider_binlog.spark.class_archive import with_archive
from airflow_provider_binlog.staging.ref import StagingRef
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


class BinlogMergeOperator(SettingsOperator):
    """Apply staged dumps (usually the dump task's XCom) to Iceberg with the merge job: through
    ``spark-submit`` (``SparkSubmitHook``), or first on Iceberg's Java API on the worker, as
    ``merge_engine`` chooses. Returns per table the rows inserted/updated/deleted and snapshot id,
    the end checkpoint and the ``engine`` that ran.

    The Iceberg catalog (named ``catalog`` in the job's SQL) comes from the ``lake``'s
    ``warehouse``, ``catalog_conn_id`` or ``catalog_settings`` (at most one), else from the
    ``spark.sql.catalog.<catalog>.*`` settings in the ``spark``'s ``conf``. Catalog secrets (``jdbc.password``,
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
    :param lake: the Iceberg side, a :class:`~airflow_provider_binlog.operators.settings.LakeSettings`:
        namespace, catalog (``warehouse``, ``catalog_conn_id`` or ``catalog_settings``), table layout,
        properties and data contract. Its ``namespace``, ``catalog``, ``warehouse`` and
        ``catalog_conn_id`` are templated.
    :param spark: how ``spark-submit`` runs the job, a
        :class:`~airflow_provider_binlog.operators.settings.SparkSettings` (default: its defaults):
        the Spark connection, deploy mode, ``conf``, ``packages``, ``jars``, Iceberg runtime,
        environment and entry point (``conf``, ``packages``, ``jars``, ``env_vars`` and
        ``application`` templated).
    :param merge: how the batches are committed and the tables maintained, a
        :class:`~airflow_provider_binlog.operators.settings.MergeSettings` (default: the job's defaults).
    :param merge_engine: which engine merges (templated; default: ``[binlog] merge_engine``, ``auto``):
        ``auto`` runs Iceberg's Java API in a bare JVM on the worker first only with a ``local``
        master (Spark would run on the worker anyway) and ``spark-submit`` with any cluster
        master; ``spark`` always ``spark-submit``; ``iceberg-java`` the Java API first wherever
        it can see what the Spark driver would (warned once on a cluster master). A batch the
        Java engine cannot commit goes to ``spark-submit``; the XCom's ``engine`` then says
        ``iceberg-java+spark`` (docs/configuration.md, "Which engine runs my merge").
    :param staging: the staging the dumps are in, a
        :class:`~airflow_provider_binlog.staging.ref.StagingRef` (templated): its ``conn_id`` (an
        ``aws``, ``google_cloud_platform`` or ``wasb`` connection) gives the job the credentials of
        a staging on S3, GCS or Azure, through the driver's environment. Default: none, the
        driver's and executors' own credential chain.
    :param binlog_conn_id: a connection whose extra ``checkpoint_store_uri`` is the store to advance
        and whose id is the default ``checkpoint_key``, as for the dump and the sensor. Default: none.
    :param checkpoint_store_uri: the checkpoint store to advance, given with ``checkpoint_key`` or
        with ``binlog_conn_id`` (it then overrides that connection's store). Default: none.
    :param checkpoint_key: the key in that store (with ``binlog_conn_id``, default: the connection id).
    :param stream: the stream's name in the ledger (default: the checkpoint key, else ``"default"``).
    :param advance_checkpoint: false (also ``"false"``, ``"0"``, ...: templated) reads and writes no
        checkpoint store, for a snapshot of some tables only: each Iceberg table records the position
        it holds and the next incremental batch applies to it only the later changes. Default ``True``.
    :param openlineage_inject_parent_job_info: as in ``SparkSubmitOperator``, put this task's
        OpenLineage parent job into the job's ``spark.openlineage.*`` properties (unless ``conf``
        sets them), so that a listener on the cluster links its events to this task. Default: the
        setting ``[openlineage] spark_inject_parent_job_info`` (else ``False``).
    :param openlineage_inject_transport_info: likewise the OpenLineage HTTP transport. Default:
        ``[openlineage] spark_inject_transport_info`` (else ``False``).
    :param yield_to_dag_id: a DAG whose running runs take precedence (the factory passes the
        source's backfill DAG to the incremental merge): while one runs, this task is skipped
        before it reads anything; the next run dumps the same changes again from the stored checkpoint.
    """

    operator_extra_links = (BinlogCdcViewLink(), SparkApplicationLink())
    template_fields: Sequence[str] = ("manifests", "lake", "spark", "staging", "checkpoint_store_uri",
                                      "checkpoint_key", "binlog_conn_id", "stream", "advance_checkpoint",
                                      "merge_engine")
    ui_color = "#dfeaf7"

    def __init__(self, *, manifests: Union[str, list, dict], lake: LakeSettings,
                 spark: Optional[SparkSettings] = None, merge: Optional[MergeSettings] = None,
                 merge_engine: Optional[str] = None, staging: Union[StagingRef, str, None] = None,
                 binlog_conn_id: Optional[str] = None, checkpoint_store_uri: Optional[str] = None,
                 checkpoint_key: Optional[str] = None, stream: Optional[str] = None,
                 advance_checkpoint: Any = True, openlineage_inject_parent_job_info: Optional[bool] = None,
                 openlineage_inject_transport_info: Optional[bool] = None,
                 yield_to_dag_id: Optional[str] = None, **kwargs) -> None:
        super().__init__(**kwargs)
        if not isinstance(lake, LakeSettings):
            raise TypeError(f"lake must be a LakeSettings(namespace=...), not {type(lake).__name__}")
        self.lake: LakeSettings = lake
        self.spark: SparkSettings = settings_of(SparkSettings, spark, "spark")
        self.merge: MergeSettings = settings_of(MergeSettings, merge, "merge")
        self.staging: Optional[StagingRef] = None if staging is None else StagingRef.of(staging)
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
        self.binlog_conn_id = binlog_conn_id
        self.stream = stream
        self.advance_checkpoint = advance_checkpoint
        self.manifests = manifests
        self.checkpoint_store_uri = checkpoint_store_uri
        self.checkpoint_key = checkpoint_key
        self._hook: Optional[KillableSparkSubmitHook] = None
        self._job: Optional[JobWithoutSpark] = None
        self._killed = False
        #: where the Spark application of the last run can be seen (the "Spark application" link)
        self.spark_application_url = ""

    @property
    def staging_conn_id(self) -> Optional[str]:
        """The connection of the staging's credentials (None: the default chain)."""
        return self.staging.conn_id if self.staging is not None else None

    def iceberg_catalog(self):
        """The :class:`~airflow_provider_binlog.spark.catalogs.IcebergCatalog` this merge writes
        to, or ``None`` when ``conf`` configures it."""
        from airflow_provider_binlog.spark.catalogs import IcebergCatalog, catalog_from_settings
        if self.lake.warehouse:
            return IcebergCatalog(self.lake.catalog, "hadoop", warehouse=self.lake.warehouse)
        if self.lake.catalog_conn_id:
            from airflow_provider_binlog.hooks.iceberg_catalog import IcebergCatalogHook
            return IcebergCatalogHook(self.lake.catalog_conn_id).get_catalog(self.lake.catalog)
        if self.lake.catalog_settings:
            return catalog_from_settings(self.lake.catalog, self.lake.catalog_settings)
        return None

    def _spark_conf(self, catalog, master: str = "") -> dict:
        conf = {}
        if catalog is not None:
            from airflow_provider_binlog.spark.runtime import catalog_spark_conf
            local = bool(self.lake.warehouse) or not master or master.startswith("local")
            conf.update(catalog_spark_conf(catalog, packages=self.spark.packages, jars=self.spark.jars,
                                           runtime=self.spark.iceberg_runtime, local=local))
        conf.update({str(k): str(v) for k, v in self.spark.conf.items()})
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
            conn = BaseHook.get_connection(self.spark.conn_id)
        except AirflowNotFoundException:
            return "yarn", self.spark.deploy_mode or "client"
        if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
            master = conn.host
        else:
            master = f"{conn.conn_type}://{conn.host or ''}"
        master = f"{master}:{conn.port}" if conn.port else master
        extra = conn.extra_dejson or {}
        return master, self.spark.deploy_mode or extra.get("deploy-mode") or "client"

    def _env(self, catalog=None, *, cluster: bool = False, master: str = "", staging=None) -> dict:
        env: dict = {}
        if not cluster:  # the driver runs here: its Python workers use this interpreter
            env = {"PYSPARK_PYTHON": sys.executable,
                   "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        if self.lake.warehouse:  # the embedded local Spark listens on loopback only
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
        if "JAVA_HOME" not in self.spark.env_vars and not cluster:  # a cluster brings its own Java
            try:
                from airflow_provider_binlog.spark.runtime import find_java17_home
                env["JAVA_HOME"] = find_java17_home()
            except Exception:  # a cluster image brings its own Java
                pass
        env.update(self.spark.env_vars)
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
                jars = [] if catalog is not None else list(self.spark.jars or ())
                result, applied = self._job.run(merge_application(), job_args, conf, self.lake.catalog, env,
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
            record_merge(key or self.stream or self.lake.namespace, summary, time.monotonic() - began)
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

        packages = None if catalog is not None else self.spark.packages
        spark_only = "application" if self.spark.application else ("packages" if packages else None)
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
            conf=with_archive(conf, archive), conn_id=self.spark.conn_id,
            application_args=[*job_args, "--output-json", output],
            packages=None if catalog is not None else self.spark.packages,
            jars=None if catalog is not None else (",".join(self.spark.jars) if self.spark.jars else None),
            env_vars=env, name=f"binlog-merge-{self.lake.namespace}", deploy_mode=self.spark.deploy_mode)
        self._hook.killed = self._killed
        try:
            try:
                self._hook.submit(self.spark.application or merge_application())
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
        warehouse = catalog.warehouse if catalog is not None else self.spark.conf.get(
            f"spark.sql.catalog.{self.lake.catalog}.warehouse")
        return lineage.operator_lineage(
            lineage.source_datasets(paths, staging),
            lineage.iceberg_datasets(paths, catalog=self.lake.catalog, namespace=self.lake.namespace,
                                     warehouse=warehouse, options=staging))

    def merge_options(self, store: Optional[str] = None, key: Optional[str] = None) -> "MergeOptions":
        """The :class:`~airflow_provider_binlog.merge.options.MergeOptions` the job gets: this
        operator's (rendered) arguments, with the checkpoint store ``store`` and ``key``."""
        from airflow_provider_binlog.merge.options import MergeOptions

        return MergeOptions(namespace=self.lake.namespace, catalog=self.lake.catalog,
                            warehouse=self.lake.warehouse or None, checkpoint_store=store, checkpoint_key=key,
                            stream=self.stream or None, **self.lake.job_options(), **self.merge.job_options())

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
            outlet_events[outlet].extra = asset_extra(uri, summary, self.lake.catalog, self.lake.namespace)

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
