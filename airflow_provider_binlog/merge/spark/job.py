"""The merge job's command line (``merge/submit/merge_cdc.py`` is its spark-submit entry point)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any, Mapping, Optional, Sequence

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from ...checkpoints import open_checkpoint_store
from ...process_memory import peak_rss_mib
from ...spark.catalogs import CatalogConfigError, secret_conf_from_env
from ...spark.runtime import local_spark_session
from ...staging.manifest import ManifestError
from ...staging.storage import write_bytes
from ..errors import MergeJobError
from ..direct_changes import DEFAULT_DIRECT_MAX_BYTES, DELETES_POSITION, DIRECT_DELETES
from ..iceberg_contract import DEFAULT_MAX_KEY_CHANGE_ROWS, DEFAULT_PARALLEL_TABLES
from ..contract import ContractError, DataContract
from ..layout import LayoutError, TableLayouts
from .batch import apply_manifests


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="merge_cdc.py",
        description="Apply staged binlog changes (dump manifests) to Iceberg tables with Spark "
                    "MERGE, exactly once.")
    p.add_argument("--manifest", action="append", required=True, metavar="PATH",
                   help="a manifest.json or its dump directory; repeatable (applied in "
                        "checkpoint order, without gaps)")
    p.add_argument("--catalog", default="lake", help="Iceberg catalog name (default: lake)")
    p.add_argument("--namespace", required=True,
                   help="target namespace; tables are named <schema>__<table>")
    p.add_argument("--checkpoint-store", metavar="URI",
                   help="checkpoint store to advance after each batch: a directory or file:// URI, or a "
                        "SQLAlchemy URL (postgresql://..., sqlite:///...; see docs/checkpoint-stores.md)")
    p.add_argument("--checkpoint-key", metavar="KEY", help="key in the checkpoint store")
    p.add_argument("--stream", metavar="NAME",
                   help="name of the binlog stream in the namespace's ledger (default: the "
                        "checkpoint key, else 'default'); one per source and table selection")
    p.add_argument("--warehouse", metavar="PATH",
                   help="embedded local mode: start a local Spark with a Hadoop catalog here")
    p.add_argument("--output-json", metavar="PATH", help="write the result here")
    p.add_argument("--table-property", action="append", default=[], metavar="KEY=VALUE",
                   help="Iceberg table property for tables created by this run; repeatable")
    p.add_argument("--max-key-change-rows", type=int, default=DEFAULT_MAX_KEY_CHANGE_ROWS,
                   help="limit of changes on keys changed with partial (MINIMAL) images, "
                        "resolved on the driver")
    p.add_argument("--parallel-tables", type=int, default=DEFAULT_PARALLEL_TABLES, metavar="N",
                   help=f"tables of a batch planned and committed at once, from N driver threads "
                        f"(default {DEFAULT_PARALLEL_TABLES}; 1: one after the other)")
    p.add_argument("--direct-max-bytes", type=int, default=DEFAULT_DIRECT_MAX_BYTES, metavar="BYTES",
                   help=f"tables whose staged files hold at most this many bytes and whose changes are "
                        f"simple are committed without a Spark job (default {DEFAULT_DIRECT_MAX_BYTES}; "
                        f"0: every table through the Spark MERGE)")
    p.add_argument("--direct-deletes", choices=DIRECT_DELETES, default=DELETES_POSITION,
                   help="how those commits drop the rows they replace: 'position' deletes (read by every "
                        "Iceberg reader; the default) or 'equality' deletes on the primary key (read by "
                        "JVM engines only: Spark, Trino, Flink)")
    p.add_argument("--maintenance", action="store_true",
                   help="afterwards, compact data files (folding in the delete files of the "
                        "merges) and expire old snapshots")
    p.add_argument("--expire-older-than-days", type=float, default=7.0,
                   help="with --maintenance: expire snapshots older than this (default 7)")
    p.add_argument("--retain-last", type=int, default=10,
                   help="with --maintenance: always keep this many snapshots (default 10)")
    p.add_argument("--maintenance-every-hours", type=float, metavar="H",
                   help="with --maintenance: only tables maintained more than H hours ago")
    p.add_argument("--table-layout", metavar="JSON",
                   help="partition spec, sort order and properties of the tables this run creates, "
                        "for all and per schema.table (see airflow_provider_binlog/merge/layout.py)")
    p.add_argument("--data-contract", metavar="JSON",
                   help="change columns, soft deletes and change logs of merged tables, for all and "
                        "per schema.table (see airflow_provider_binlog/merge/contract.py)")
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
    if (args.checkpoint_store is None) != (args.checkpoint_key is None):
        _parser().error("--checkpoint-store and --checkpoint-key go together")
    properties = {}
    for item in args.table_property:
        k, sep, v = item.partition("=")
        if not sep or not k:
            _parser().error(f"--table-property wants KEY=VALUE, not {item!r}")
        properties[k] = v
    try:
        layouts = TableLayouts.parse(args.table_layout)
        contract = DataContract.parse(args.data_contract)
    except (LayoutError, ContractError) as exc:
        _parser().error(str(exc))
    stop = False
    try:  # catalog secrets come in the environment, not on the command line
        secrets = secret_conf_from_env()
    except CatalogConfigError as exc:
        _parser().error(str(exc))
    if args.warehouse:
        stop = SparkSession.getActiveSession() is None
        spark = local_spark_session(args.warehouse, args.catalog, secrets, app_name="merge_cdc")
    else:
        builder = SparkSession.builder
        SparkContext._ensure_initialized()  # the JVM's settings: spark-submit's --name stays
        if not SparkConf().contains("spark.app.name"):
            builder = builder.appName("merge_cdc")
        for key, value in secrets.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    try:
        store = open_checkpoint_store(args.checkpoint_store) if args.checkpoint_store else None
        result = apply_manifests(spark, args.manifest, args.catalog, args.namespace, store,
                                 args.checkpoint_key, stream=args.stream,
                                 table_properties=properties, layouts=layouts, contract=contract,
                                 maintenance_every_hours=args.maintenance_every_hours,
                                 max_key_change_rows=args.max_key_change_rows,
                                 parallel_tables=args.parallel_tables,
                                 direct_max_bytes=args.direct_max_bytes,
                                 direct_deletes=args.direct_deletes,
                                 maintenance=args.maintenance,
                                 expire_older_than_days=args.expire_older_than_days,
                                 retain_last=args.retain_last)
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
    result["driver_peak_rss_mib"] = round(peak_rss_mib(), 1)
    logging.getLogger(__name__).info("peak RSS of the merge driver's Python process: %.1f MiB",
                                     result["driver_peak_rss_mib"])
    _write_json(args.output_json, result)
    print(json.dumps({"checkpoint": result["checkpoint"],
                      "batches": [(b["batch_id"], b["status"]) for b in result["batches"]]}))
    return 0
