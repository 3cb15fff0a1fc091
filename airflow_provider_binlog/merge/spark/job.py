"""The merge job's command line (``merge/submit/merge_cdc.py`` is its spark-submit entry point).

With ``--engine iceberg`` the JVM starts on a thread first, while the merge's own modules
(pyarrow, pyspark's Python side, the schema history) load: the two take about as long."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
from typing import Any, Mapping, Optional, Sequence

from ...common.process_memory import peak_rss_mib
from ...spark.catalogs import CatalogConfigError, secret_conf_from_env
from ...spark.runtime import find_java17_home, local_spark_conf, spark_jars_dirs
from ..errors import MergeJobError, SparkNeeded
from ..lake.java import JavaLake


#: The exit status of ``--engine iceberg`` when the merge needs Spark.
EXIT_SPARK_NEEDED = 3
#: The environment variable that may carry ``--spark-conf`` (kept off the command line).
JVM_CONF_ENV = "BINLOG_JVM_SPARK_CONF"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="merge_cdc.py",
        description="Apply staged binlog changes (dump manifests) to Iceberg tables with Spark "
                    "MERGE, exactly once.")
    p.add_argument("--manifest", action="append", required=True, metavar="PATH",
                   help="a manifest.json or its dump directory; repeatable (applied in "
                        "checkpoint order, without gaps)")
    p.add_argument("--options", required=True, metavar="JSON",
                   help='the merge options, a JSON object: {"namespace": "shop_cdc", "catalog": "lake", '
                        '"checkpoint_store": ..., "checkpoint_key": ..., "warehouse": ...} and the others of '
                        "airflow_provider_binlog.merge.options.MergeOptions (see docs/merge.md)")
    p.add_argument("--output-json", metavar="PATH", help="write the result here")
    p.add_argument("--engine", choices=("spark", "iceberg"), default="spark",
                   help="iceberg: commit through Iceberg's Java API in a JVM without Spark, and exit "
                        f"with {EXIT_SPARK_NEEDED} (the result saying why) when a batch needs Spark; "
                        "the batches applied until then stay applied")
    p.add_argument("--spark-conf", metavar="JSON",
                   help="with --engine iceberg: the Spark settings naming the catalog and its jars (default: "
                        f"the environment variable {JVM_CONF_ENV}, else none)")
    p.add_argument("--java-option", action="append", default=[], metavar="OPTION",
                   help="with --engine iceberg: an option of its JVM (repeatable)")
    return p


def _write_json(path: Optional[str], data: Mapping[str, Any]) -> None:
    """The job's result, to a local path or (cluster deploy mode, staging on an object store)
    a URI next to the staged batches."""
    from ...staging.storage import write_bytes

    if path:
        write_bytes(path, (json.dumps(data, indent=1, sort_keys=True, default=str) + "\n").encode())


class _JvmStarting:
    """The :class:`JavaLake` of ``--engine iceberg``, being started on a thread of its own."""

    def __init__(self, conf: Mapping[str, str], catalog: str, java_options: Sequence[str]) -> None:
        self._lake: Optional[JavaLake] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._start, args=(conf, catalog, java_options),
                                        name="binlog-iceberg-jvm", daemon=True)
        self._thread.start()

    def _start(self, conf: Mapping[str, str], catalog: str, java_options: Sequence[str]) -> None:
        try:
            self._lake = JavaLake(conf, catalog, os.environ.get("JAVA_HOME") or find_java17_home(),
                                  spark_jars_dirs(), java_options)
        except BaseException as exc:  # noqa: BLE001 - raised where the JVM is waited for
            self._error = exc

    def result(self) -> JavaLake:
        """The JVM once it is up; what stopped it from starting is raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._lake is not None
        return self._lake

    def stop(self) -> None:
        self._thread.join()
        if self._lake is not None:
            self._lake.stop()


def _jvm_conf(args: argparse.Namespace, raw_options: Mapping[str, Any], secrets: Mapping[str, str]) -> dict:
    """The Spark settings the JVM opens the catalog from: ``--spark-conf`` (or the environment),
    under the embedded Hadoop catalog's when the options name a warehouse, with the secrets."""
    try:
        conf = json.loads(args.spark_conf or os.environ.get(JVM_CONF_ENV) or "{}")
        if not isinstance(conf, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        _parser().error(f"--spark-conf: {exc}")
    if raw_options.get("warehouse"):  # the embedded Hadoop catalog, as local_spark_session opens it
        conf = {**local_spark_conf(str(raw_options["warehouse"]), str(raw_options["catalog"])), **conf}
    return {**conf, **secrets}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("py4j").setLevel(logging.WARNING)
    try:  # catalog secrets come in the environment, not on the command line
        secrets = secret_conf_from_env()
    except CatalogConfigError as exc:
        _parser().error(str(exc))
    starting = None
    if args.engine == "iceberg":
        try:
            raw = json.loads(args.options)
        except ValueError:
            raw = None  # the options' own check says what is wrong
        if isinstance(raw, dict) and isinstance(raw.get("catalog"), str):
            starting = _JvmStarting(_jvm_conf(args, raw, secrets), raw["catalog"], args.java_option)
    try:
        from ..options import STORE_ENV, MergeOptions

        try:
            options = MergeOptions.from_json(args.options)
        except MergeJobError as exc:  # a bad option, layout or data contract: nothing started
            _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
            _parser().error(f"--options: {exc}")
        if options.checkpoint_store is not None and os.environ.get(STORE_ENV):  # with its password
            options = dataclasses.replace(options, checkpoint_store=os.environ[STORE_ENV])
        if args.engine == "iceberg":
            if starting is None:
                starting = _JvmStarting(_jvm_conf(args, {"warehouse": options.warehouse, "catalog": options.catalog},
                                                  secrets), options.catalog, args.java_option)
            return _merge(args, options, starting.result, "iceberg")
        return _merge(args, options, lambda: _spark_session(options, secrets), "spark")
    finally:
        if starting is not None:
            starting.stop()


def _spark_session(options: Any, secrets: Mapping[str, str]) -> Any:
    """The job's SparkSession: the embedded local one for a warehouse, else spark-submit's."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from ...spark.runtime import local_spark_session

    if options.warehouse:
        return local_spark_session(options.warehouse, options.catalog, secrets, app_name="merge_cdc")
    builder = SparkSession.builder
    SparkContext._ensure_initialized()  # the JVM's settings: spark-submit's --name stays
    if not SparkConf().contains("spark.app.name"):
        builder = builder.appName("merge_cdc")
    for key, value in secrets.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _merge(args: argparse.Namespace, options: Any, session: Any, engine: str) -> int:
    """Apply the manifests with ``session()`` (a SparkSession, or the :class:`JavaLake` of
    ``--engine iceberg``) and report: the result, or the error; EXIT_SPARK_NEEDED when the
    Java engine cannot go on (the batches applied until then are in the result's ``applied``)."""
    from ...staging.manifest import ManifestError
    from ..lake.batch import apply_manifests

    stop = False
    spark = None
    try:
        if engine == "spark":
            from pyspark.sql import SparkSession

            from .engine import SparkEngine
            from .lake import spark_lake

            stop = bool(options.warehouse) and SparkSession.getActiveSession() is None
            spark = session()
            result = apply_manifests(spark_lake(spark, options.catalog), args.manifest, options,
                                     spark=SparkEngine(spark))
            result["spark_application_id"] = spark.sparkContext.applicationId  # for the task's link
        else:
            result = apply_manifests(session(), args.manifest, options)
    except SparkNeeded as exc:
        logging.getLogger(__name__).info("the merge needs Spark: %s", exc)
        _write_json(args.output_json, {"spark_needed": str(exc), "applied": exc.applied})
        return EXIT_SPARK_NEEDED
    except (MergeJobError, ManifestError, ValueError) as exc:
        print(f"merge_cdc: error: {exc}", file=sys.stderr)
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        return 1
    except Exception as exc:  # CheckpointConflictError and Spark errors: report, then fail
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        raise
    finally:
        if stop and spark is not None:
            spark.stop()
    result["engine"] = "iceberg-java" if engine == "iceberg" else engine
    return _finish(args, result)


def _finish(args: argparse.Namespace, result: dict) -> int:
    result["driver_peak_rss_mib"] = round(peak_rss_mib(), 1)
    logging.getLogger(__name__).info("peak RSS of the merge driver's Python process: %.1f MiB",
                                     result["driver_peak_rss_mib"])
    _write_json(args.output_json, result)
    print(json.dumps({"checkpoint": result["checkpoint"],
                      "batches": [(b["batch_id"], b["status"]) for b in result["batches"]]}))
    return 0
