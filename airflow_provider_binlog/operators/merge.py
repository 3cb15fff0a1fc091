"""``BinlogMergeOperator``: apply staged dumps to Iceberg with the merge job, via spark-submit."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk import BaseOperator

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException


def merge_application() -> str:
    """Path of the merge job shipped with the package (``spark_jobs/merge_cdc.py``)."""
    import spark_jobs.merge_cdc as job
    return job.__file__


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


def summarize(result: dict, manifests: Sequence[str]) -> dict:
    """A small XCom value: per table the rows inserted/updated/deleted and its snapshot id."""
    from airflow_provider_binlog.staging import load_manifest
    counts: dict[str, dict] = {}
    for path in manifests:
        for entry in load_manifest(path).tables:
            key = f"{entry['schema']}.{entry['table']}"
            agg = counts.setdefault(key, {"inserted": 0, "updated": 0, "deleted": 0})
            agg["inserted"] += entry["rows"].get("insert", 0)
            agg["updated"] += entry["rows"].get("update", 0)
            agg["deleted"] += entry["rows"].get("delete", 0)
    tables: dict[str, dict] = {}
    for batch in result.get("batches", []):
        for t in batch.get("tables", []):
            source = t.get("source")
            if isinstance(source, str) and source.startswith("["):
                source = json.loads(source)
            key = ".".join(source) if isinstance(source, list) else str(source or t.get("table"))
            info = tables.setdefault(key, {"iceberg_table": t.get("table"), **counts.get(key, {})})
            if t.get("snapshot_id") is not None:
                info["snapshot_id"] = t["snapshot_id"]
            info["status"] = t.get("status")
    for key, agg in counts.items():
        tables.setdefault(key, dict(agg))
    return {"tables": tables, "batches": [(b["batch_id"], b.get("status")) for b in result.get("batches", [])],
            "end_checkpoint": result.get("checkpoint"),
            "inserted": sum(t.get("inserted", 0) for t in tables.values()),
            "updated": sum(t.get("updated", 0) for t in tables.values()),
            "deleted": sum(t.get("deleted", 0) for t in tables.values())}


class BinlogMergeOperator(BaseOperator):
    """Apply staged dumps (manifests, usually the XCom of the dump task) to Iceberg tables.

    The merge job runs through ``SparkSubmitHook`` on the Spark connection ``conn_id``. With
    ``warehouse`` set, the job runs in the embedded mode: a Hadoop catalog on that path and the
    Iceberg jars shipped with the package (unless ``packages``/``jars`` are given). On a cluster,
    leave ``warehouse`` unset and configure the catalog with ``conf`` (``spark.sql.catalog.*``)
    and ``packages`` (e.g. ``org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0``).
    Returns the tables with rows inserted/updated/deleted and snapshot ids, and the end
    checkpoint.
    """

    template_fields: Sequence[str] = ("manifests", "catalog", "namespace", "checkpoint_store_uri",
                                      "checkpoint_key", "warehouse", "conf")
    ui_color = "#dfeaf7"

    def __init__(self, *, manifests: Union[str, list, dict], namespace: str, catalog: str = "lake",
                 conn_id: str = "spark_default", warehouse: Optional[str] = None,
                 checkpoint_store_uri: Optional[str] = None, checkpoint_key: Optional[str] = None,
                 conf: Optional[dict] = None, packages: Optional[str] = None,
                 jars: Optional[list] = None, maintenance: bool = False,
                 env_vars: Optional[dict] = None, application: Optional[str] = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
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
        self.maintenance = maintenance
        self.env_vars = env_vars or {}
        self.application = application
        self._hook: Optional[SparkSubmitHook] = None

    def _spark_conf(self) -> dict:
        conf = {}
        if self.warehouse:
            from airflow_provider_binlog.spark.runtime import spark_conf_for
            conf.update(spark_conf_for(self.warehouse, self.catalog, packages=self.packages, jars=self.jars))
        conf.update({str(k): str(v) for k, v in self.conf.items()})
        return conf

    def _env(self) -> dict:
        env = {"PYSPARK_PYTHON": sys.executable,
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        if "JAVA_HOME" not in self.env_vars:
            try:
                from airflow_provider_binlog.spark.runtime import find_java17_home
                env["JAVA_HOME"] = find_java17_home()
            except Exception:  # a cluster image brings its own Java
                pass
        env.update(self.env_vars)
        return env

    def execute(self, context) -> dict:
        paths = manifest_paths(self.manifests)
        if not paths:
            raise AirflowException("no manifest to merge: the dump task returned nothing")
        with tempfile.TemporaryDirectory(prefix="binlog-merge-") as tmp:
            output = Path(tmp) / "result.json"
            args: list[str] = []
            for p in paths:
                args += ["--manifest", p]
            args += ["--catalog", self.catalog, "--namespace", self.namespace,
                     "--output-json", str(output)]
            if self.warehouse:
                args += ["--warehouse", self.warehouse]
            if self.checkpoint_store_uri:
                args += ["--checkpoint-store", self.checkpoint_store_uri]
            if self.checkpoint_key:
                args += ["--checkpoint-key", self.checkpoint_key]
            if self.maintenance:
                args += ["--maintenance"]
            self._hook = SparkSubmitHook(
                conf=self._spark_conf(), conn_id=self.conn_id, application_args=args,
                packages=None if self.warehouse else self.packages,
                jars=None if self.warehouse else (",".join(self.jars) if self.jars else None),
                env_vars=self._env(), name=f"binlog-merge-{self.namespace}")
            try:
                self._hook.submit(self.application or merge_application())
            except Exception as exc:
                detail = ""
                if output.exists():
                    detail = json.loads(output.read_text()).get("error", "")
                raise AirflowException(f"the merge job failed: {detail or exc}") from None
            result = json.loads(output.read_text())
        if result.get("error"):
            raise AirflowException(f"the merge job failed: {result['error']}")
        summary = summarize(result, paths)
        self.log.info("merged %d inserted, %d updated, %d deleted rows; checkpoint %s",
                      summary["inserted"], summary["updated"], summary["deleted"],
                      summary["end_checkpoint"])
        return summary

    def on_kill(self) -> None:
        if self._hook is not None:
            self._hook.on_kill()
