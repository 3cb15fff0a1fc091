"""How the merge task starts the merge job and reads its result: its entry point, the Spark
driver's class archive, the first try without Spark (``[binlog] merge_engine``,
:class:`JobWithoutSpark`) and the task's summary of the result (:func:`summarize`).

A merge whose tables all take direct commits needs no Spark application: the job runs on the
worker with ``--engine iceberg`` (Iceberg's Java API in a bare JVM, started in about a second
instead of four). When a batch needs Spark (a table to create or alter, key changes, partial
images, maintenance that is due) the job says so before it commits anything of that batch, and
the task runs ``spark-submit`` as it always did; the batches applied until then are found
applied and reported as this run's.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from typing import Any, Mapping, Optional, Sequence

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from airflow_provider_binlog.spark.class_archive import DRIVER_OPTIONS, prepare_archive, with_archive
from airflow_provider_binlog.staging.storage import read_bytes
from airflow_provider_binlog.utils.settings import setting

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException

#: The job's exit status when the merge needs Spark (``merge/spark/job.py``).
EXIT_SPARK_NEEDED = 3
#: The environment variable handing the job its Spark settings (``merge/spark/job.py``).
JVM_CONF_ENV = "BINLOG_JVM_SPARK_CONF"
#: The settings the JVM without Spark reads: the catalog's, its jars, Hadoop's, the memory.
_JVM_SETTINGS = ("spark.jars", "spark.jars.packages", "spark.driver.extraClassPath", "spark.driver.memory",
                 DRIVER_OPTIONS)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def merge_application() -> str:
    """Path of the merge job's entry point shipped with the package
    (``airflow_provider_binlog/merge/submit/merge_cdc.py``)."""
    import importlib.util

    # located, not imported: importing it would import pyspark
    spec = importlib.util.find_spec("airflow_provider_binlog.merge.submit.merge_cdc")
    if spec is None or spec.origin is None:  # pragma: no cover - a broken install
        raise AirflowException("the merge job's entry point airflow_provider_binlog/merge/submit/merge_cdc.py "
                               "is not installed with airflow-provider-binlog")
    return spec.origin


def driver_class_archive(conf: Mapping[str, str], java_home: Optional[str], prefix: str = "spark-driver-") -> Any:
    """The class archive of a JVM started here (:mod:`..spark.class_archive`): the Spark
    driver's, or with ``prefix="iceberg-jvm-"`` the merge's without Spark; None when
    ``[binlog] spark_class_archive`` is off."""
    if not _truthy(setting("spark_class_archive")):
        return None
    from airflow_provider_binlog.spark.runtime import cache_dir
    spark_home = (shutil.which("spark-submit") or "") if prefix == "spark-driver-" else ""
    return prepare_archive(conf, java_home, cache_dir(), spark_home=spark_home, prefix=prefix)


def spark_defaults(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings of ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``),
    which ``spark-submit`` would apply under the task's own."""
    from airflow_provider_binlog.merge.lake.java_settings import spark_conf_dir

    directory = spark_conf_dir(environ)
    path = os.path.join(directory, "spark-defaults.conf") if directory else ""
    out: dict[str, str] = {}
    if not path or not os.path.isfile(path):
        return out
    with open(path, encoding="utf-8") as f:  # Java properties: key value, key=value or key: value
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                match = re.match(r"([^\s=:]+)\s*[\s=:]\s*(.*)$", line)
                if match:
                    out[match.group(1)] = match.group(2).strip()
    return out


def jvm_settings(conf: Mapping[str, str], catalog: str) -> dict[str, str]:
    """The Spark settings the merge without Spark needs: the catalog ``catalog``'s, the jars,
    Hadoop's and the driver's memory and Java options."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {k: str(v) for k, v in conf.items()
            if k in _JVM_SETTINGS or k == prefix or k.startswith(prefix + ".") or k.startswith("spark.hadoop.")}


def merged_results(result: dict, applied: list) -> dict:
    """The Spark run's result with what the run without Spark applied before it (which Spark
    found applied) reported as applied by this task: whole batches, and the tables committed of
    the batch it refused."""
    done = {b["batch_id"]: b for b in applied}
    batches = []
    for batch in result.get("batches", []):
        mine = done.get(batch["batch_id"])
        if mine is not None and mine.get("status") == "applied" and batch.get("status") == "already-applied":
            batch = mine
        elif mine is not None and mine.get("status") != "applied":  # refused with some tables committed
            committed = {t["table"]: t for t in mine.get("tables", []) if t.get("status") == "committed"}
            batch = {**batch, "tables": [committed.get(t.get("table"), t) if t.get("status") == "already-applied"
                                         else t for t in batch.get("tables", [])]}
        batches.append(batch)
    return {**result, "batches": batches}


class JobWithoutSpark:
    """One run of the merge job with ``--engine iceberg``, its output in the task's log."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.process: Optional[subprocess.Popen] = None
        self.killed = False

    def run(self, application: str, job_args: list[str], conf: Mapping[str, str], catalog: str,
            env: Mapping[str, str], output: str, jars: list[str]) -> tuple[Optional[dict], list]:
        """``(the job's result, [])``, or ``(None, the batches applied)`` when Spark must merge;
        ``jars``: the ones given to ``spark-submit`` besides ``conf``."""
        environ = {**os.environ, **env}
        settings = jvm_settings({**spark_defaults(environ), **conf}, catalog)
        if jars:
            settings["spark.jars"] = ",".join([*filter(None, settings.get("spark.jars", "").split(",")), *jars])
        archive = driver_class_archive(settings, environ.get("JAVA_HOME"), prefix="iceberg-jvm-")
        java_options = shlex.split(with_archive(settings, archive).get(DRIVER_OPTIONS, ""))
        settings.pop(DRIVER_OPTIONS, None)
        environ[JVM_CONF_ENV] = json.dumps(settings)  # not on the command line: it may hold secrets
        command = [sys.executable, application, "--engine", "iceberg",
                   *[f"--java-option={o}" for o in java_options], *job_args, "--output-json", output]
        if self.killed:  # killed while the job was being prepared: it is not started
            return None, []
        self.log.info("merging without Spark first (Iceberg's Java API): %s", application)
        self.process = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, errors="replace")
        if self.killed:  # killed as it started: on_kill found no process yet
            self.process.terminate()
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.info("%s", line.rstrip())
        code = self.process.wait()
        if archive is not None:
            archive.finish(succeeded=code in (0, EXIT_SPARK_NEEDED))
        written = read_result(output)
        if self.killed:
            raise AirflowException(f"the merge task was killed (the merge job without Spark ended with exit "
                                   f"status {code})")
        if code == EXIT_SPARK_NEEDED and written is not None:
            self.log.info("the merge needs Spark: %s", written.get("spark_needed"))
            return None, list(written.get("applied") or [])
        if code != 0 or written is None:
            detail = (written or {}).get("error") or f"exit status {code}"
            raise AirflowException(f"the merge job without Spark failed: {detail} ([binlog] merge_engine = spark "
                                   f"runs every merge with spark-submit)")
        return written, []

    def kill(self) -> None:
        self.killed = True
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()


class KillableSparkSubmitHook(SparkSubmitHook):
    """A ``SparkSubmitHook`` whose ``on_kill`` also holds when it comes before ``spark-submit``
    started (a task killed as the merge goes from the engine without Spark to Spark): the
    process is ended as soon as it exists, instead of being left to run."""

    killed = False

    def on_kill(self) -> None:
        self.killed = True
        super().on_kill()

    def _process_spark_submit_log(self, itr: Any) -> None:  # called as soon as spark-submit started
        process = getattr(self, "_submit_sp", None)
        if self.killed and process is not None and process.poll() is None:
            process.terminate()
        super()._process_spark_submit_log(itr)


def read_result(path: str, options: Any = None) -> Optional[dict]:
    """The merge job's result at ``path`` (a local path or a URI); None when it wrote none, or
    only a part of one (killed while writing it)."""
    written = read_bytes(path, options)
    if written is None:
        return None
    try:
        result = json.loads(written)
    except ValueError:
        return None
    return result if isinstance(result, dict) else None


def summarize(result: dict, manifests: Sequence[str], options: Any = None) -> dict:
    """A small XCom value: per table the rows inserted/updated/deleted that this run applied
    (staged row changes; nothing for a batch or table that was already applied), its Iceberg
    table, snapshot id and status; the totals, the batches with their status, the end
    checkpoint and the ``mode`` (``snapshot`` when a snapshot was among the batches)."""
    from airflow_provider_binlog.staging import load_manifest
    counts: dict[str, dict[str, dict]] = {}
    mode = "incremental"
    for path in manifests:
        manifest = load_manifest(path, options=options)
        if manifest.is_snapshot:
            mode = "snapshot"
        per_table = counts.setdefault(manifest.dump_id, {})
        for entry in manifest.tables:
            agg = per_table.setdefault(f"{entry['schema']}.{entry['table']}",
                                       {"inserted": 0, "updated": 0, "deleted": 0})
            agg["inserted"] += entry["rows"].get("insert", 0)
            agg["updated"] += entry["rows"].get("update", 0)
            agg["deleted"] += entry["rows"].get("delete", 0)
    tables: dict[str, dict] = {}
    for batch in result.get("batches", []):
        if batch.get("status") == "already-applied":
            continue
        staged = counts.get(batch["batch_id"], {})
        for t in batch.get("tables", []):
            source = t.get("source")
            if isinstance(source, str) and source.startswith("["):
                source = json.loads(source)
            key = ".".join(source) if isinstance(source, list) else str(source or t.get("table"))
            info = tables.setdefault(key, {"iceberg_table": t.get("table"), "inserted": 0, "updated": 0,
                                           "deleted": 0})
            if t.get("status") != "already-applied":
                for k, v in staged.get(key, {}).items():
                    info[k] += v
            if t.get("snapshot_id") is not None:
                info["snapshot_id"] = t["snapshot_id"]
            info["status"] = t.get("status")
    maintenance = result.get("maintenance") or []
    return {"tables": tables, "batches": [(b["batch_id"], b.get("status")) for b in result.get("batches", [])],
            "maintained": [m["table"] for m in maintenance if "skipped" not in m],
            "maintenance_skipped": [m["table"] for m in maintenance if "skipped" in m],
            "end_checkpoint": result.get("checkpoint"), "mode": mode, "engine": result.get("engine"),
            "inserted": sum(t.get("inserted", 0) for t in tables.values()),
            "updated": sum(t.get("updated", 0) for t in tables.values()),
            "deleted": sum(t.get("deleted", 0) for t in tables.values())}
