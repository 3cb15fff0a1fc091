"""The merge job's command line (``merge/submit/merge_cdc.py`` is its spark-submit entry point)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any, Mapping, Optional, Sequence

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from ...common.process_memory import peak_rss_mib
from ...spark.catalogs import CatalogConfigError, secret_conf_from_env
from ...spark.iceberg_jvm import IcebergJvm, SparkNeeded
from ...spark.runtime import find_java17_home, local_spark_conf, local_spark_session
from ...staging.manifest import ManifestError
from ...staging.storage import write_bytes
from ..errors import MergeJobError
from ..options import MergeOptions
from .batch import apply_manifests


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
    if path:
        write_bytes(path, (json.dumps(data, indent=1, sort_keys=True, default=str) + "\n").encode())


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        options = MergeOptions.from_json(args.options)
    except MergeJobError as exc:  # a bad option, layout or data contract: nothing started
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        _parser().error(f"--options: {exc}")
    stop = False
    try:  # catalog secrets come in the environment, not on the command line
        secrets = secret_conf_from_env()
    except CatalogConfigError as exc:
        _parser().error(str(exc))
    if args.engine == "iceberg":
        return _without_spark(args, options, secrets)
    if options.warehouse:
        stop = SparkSession.getActiveSession() is None
        spark = local_spark_session(options.warehouse, options.catalog, secrets, app_name="merge_cdc")
    else:
        builder = SparkSession.builder
        SparkContext._ensure_initialized()  # the JVM's settings: spark-submit's --name stays
        if not SparkConf().contains("spark.app.name"):
            builder = builder.appName("merge_cdc")
        for key, value in secrets.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    try:
        result = apply_manifests(spark, args.manifest, options)
        result["spark_application_id"] = spark.sparkContext.applicationId  # for the task's link
    except (MergeJobError, ManifestError, ValueError) as exc:
        print(f"merge_cdc: error: {exc}", file=sys.stderr)
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        return 1
    except Exception as exc:  # CheckpointConflictError and Spark errors: report, then fail
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        raise
    finally:
        if stop:
            spark.stop()
    result["engine"] = "spark"
    return _finish(args, result)


def _finish(args: argparse.Namespace, result: dict) -> int:
    result["driver_peak_rss_mib"] = round(peak_rss_mib(), 1)
    logging.getLogger(__name__).info("peak RSS of the merge driver's Python process: %.1f MiB",
                                     result["driver_peak_rss_mib"])
    _write_json(args.output_json, result)
    print(json.dumps({"checkpoint": result["checkpoint"],
                      "batches": [(b["batch_id"], b["status"]) for b in result["batches"]]}))
    return 0


def _without_spark(args: argparse.Namespace, options: MergeOptions, secrets: Mapping[str, str]) -> int:
    """``--engine iceberg``: the merge on Iceberg's Java API; EXIT_SPARK_NEEDED when Spark must
    do it (the batches applied until then are in the result's ``applied``)."""
    try:
        conf = json.loads(args.spark_conf or os.environ.get(JVM_CONF_ENV) or "{}")
        if not isinstance(conf, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        _parser().error(f"--spark-conf: {exc}")
    if options.warehouse:  # the embedded Hadoop catalog, as local_spark_session opens it
        conf = {**local_spark_conf(options.warehouse, options.catalog), **conf}
    conf.update(secrets)
    lake = None
    try:
        lake = IcebergJvm(conf, options.catalog, os.environ.get("JAVA_HOME") or find_java17_home(),
                          args.java_option)
        result = apply_manifests(lake, args.manifest, options)
    except SparkNeeded as exc:
        logging.getLogger(__name__).info("the merge needs Spark: %s", exc)
        _write_json(args.output_json, {"spark_needed": str(exc), "applied": exc.applied})
        return EXIT_SPARK_NEEDED
    except (MergeJobError, ManifestError, ValueError) as exc:
        print(f"merge_cdc: error: {exc}", file=sys.stderr)
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        return 1
    except Exception as exc:
        _write_json(args.output_json, {"error": str(exc), "error_type": type(exc).__name__})
        raise
    finally:
        if lake is not None:
            lake.stop()
    result["engine"] = "iceberg"
    return _finish(args, result)

