"""How the merge task starts the merge job: its entry point, the Spark driver's class archive,
and the first try without Spark (``[binlog] merge_engine``, :class:`JobWithoutSpark`).

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
import shlex
import shutil
import subprocess
import sys
from typing import Any, Mapping, Optional

from airflow_provider_binlog.spark.class_archive import DRIVER_OPTIONS, prepare_archive, with_archive
from airflow_provider_binlog.utils.settings import setting

try:  # Airflow 3.x
    from airflow.sdk.exceptions import AirflowException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException

#: The job's exit status when the merge needs Spark (``merge/spark/job.py``).
EXIT_SPARK_NEEDED = 3
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
    directory = environ.get("SPARK_CONF_DIR") or (
        os.path.join(environ["SPARK_HOME"], "conf") if environ.get("SPARK_HOME") else "")
    path = os.path.join(directory, "spark-defaults.conf") if directory else ""
    out: dict[str, str] = {}
    if not path or not os.path.isfile(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, value = line.replace("\t", " ").partition(" ")
                out[key] = value.strip()
    return out


def jvm_settings(conf: Mapping[str, str], catalog: str) -> dict[str, str]:
    """The Spark settings the merge without Spark needs: the catalog ``catalog``'s, the jars,
    Hadoop's and the driver's memory and Java options."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {k: str(v) for k, v in conf.items()
            if k in _JVM_SETTINGS or k == prefix or k.startswith(prefix + ".") or k.startswith("spark.hadoop.")}


def without_spark_possible(master: str, cluster: bool, conf: Mapping[str, str]) -> bool:
    """Whether the merge may first try without Spark: ``[binlog] merge_engine`` is ``auto``,
    the driver would run on this worker with a local or standalone master, the jars are not
    left to ``spark-submit`` to resolve, and pyspark (whose jars the JVM runs on) is installed
    here."""
    engine = setting("merge_engine").strip().lower()
    if engine not in ("auto", "spark"):
        raise AirflowException(f"[binlog] merge_engine is {engine!r}: give auto or spark")
    import importlib.util

    return (engine == "auto" and not cluster and master.startswith(("local", "spark://"))
            and not conf.get("spark.jars.packages") and importlib.util.find_spec("pyspark") is not None)


def merged_results(result: dict, applied: list) -> dict:
    """The Spark run's result with the batches the run without Spark applied before it (which
    Spark found applied) reported as applied by this task."""
    mine = {b["batch_id"]: b for b in applied if b.get("status") == "applied"}
    batches = [mine.get(b["batch_id"], b) if b.get("status") == "already-applied" else b
               for b in result.get("batches", [])]
    return {**result, "batches": batches}


class JobWithoutSpark:
    """One run of the merge job with ``--engine iceberg``, its output in the task's log."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.process: Optional[subprocess.Popen] = None

    def run(self, application: str, job_args: list[str], conf: Mapping[str, str], catalog: str,
            env: Mapping[str, str], output: str) -> tuple[Optional[dict], list]:
        """``(the job's result, [])``, or ``(None, the batches applied)`` when Spark must merge."""
        environ = {**os.environ, **env}
        settings = jvm_settings({**spark_defaults(environ), **conf}, catalog)
        archive = driver_class_archive(settings, environ.get("JAVA_HOME"), prefix="iceberg-jvm-")
        java_options = shlex.split(with_archive(settings, archive).get(DRIVER_OPTIONS, ""))
        settings.pop(DRIVER_OPTIONS, None)
        command = [sys.executable, application, "--engine", "iceberg", "--spark-conf", json.dumps(settings),
                   *[f"--java-option={o}" for o in java_options], *job_args, "--output-json", output]
        self.log.info("merging without Spark first (Iceberg's Java API): %s", application)
        self.process = subprocess.Popen(command, env=environ, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, errors="replace")
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.info("%s", line.rstrip())
        code = self.process.wait()
        if archive is not None:
            archive.finish(succeeded=code in (0, EXIT_SPARK_NEEDED))
        written = None
        if os.path.isfile(output):
            with open(output, encoding="utf-8") as f:
                written = json.load(f)
        if code == EXIT_SPARK_NEEDED and written is not None:
            self.log.info("the merge needs Spark: %s", written.get("spark_needed"))
            return None, list(written.get("applied") or [])
        if code != 0 or written is None:
            detail = (written or {}).get("error") or f"exit status {code}"
            raise AirflowException(f"the merge job without Spark failed: {detail} ([binlog] merge_engine = spark "
                                   f"runs every merge with spark-submit)")
        return written, []

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
