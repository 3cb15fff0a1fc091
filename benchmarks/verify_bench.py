"""Verification of one large table against its Iceberg table, in at most twice the time of the
table's snapshot task, measured in the same run.

Run from the repository root::

    .venv/bin/python benchmarks/verify_bench.py [--rows 5000000]

The script starts a private MariaDB server, creates ``bench.big`` (5 columns: INT primary key,
BIGINT, DECIMAL(12,2), DATETIME(6), VARCHAR(40), as ``large_snapshot_bench.py``), takes its
watermark snapshot into staging (chunks read into Arrow: the snapshot task's work, timed),
commits it into a Hadoop-catalog warehouse with Iceberg's Java API (no Spark), then verifies the
table (:class:`airflow_provider_binlog.merge.verify.run.TableVerifier`, default chunks, timed)
and prints both times, the rows per second and the ratio verify ÷ snapshot (target: at most
2). Exits with status 1 when the table is not reported equal, 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.large_snapshot_bench import SERVER_OPTIONS, fill  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    args = ap.parse_args(argv)
    from airflow_provider_binlog.capture.arrow_reader import ArrowChunkReader
    from airflow_provider_binlog.capture.snapshot import table_map_from_information_schema
    from airflow_provider_binlog.capture.verify.source import source_table
    from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot
    from airflow_provider_binlog.common.tables import TableFilter
    from airflow_provider_binlog.local.mariadb import MariaDBServer
    from airflow_provider_binlog.merge.options import MergeOptions
    from airflow_provider_binlog.merge.lake.batch import apply_manifests
    from airflow_provider_binlog.merge.lake.java import JavaLake
    from airflow_provider_binlog.merge.verify.iceberg import CatalogSpec, load_table, pin
    from airflow_provider_binlog.merge.verify.run import Settings, TableVerifier
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.spark.runtime import find_java17_home, local_spark_conf, spark_jars_dirs

    try:
        srv = MariaDBServer(SERVER_OPTIONS)
    except Exception as exc:  # no server binaries, startup failure, ...
        print(f"cannot start MariaDB: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"started MariaDB {srv.version} on port {srv.port}", flush=True)
        t0 = time.perf_counter()
        fill(srv, args.rows)
        print(f"bench.big: {args.rows:,} rows loaded in {time.perf_counter() - t0:.1f}s", flush=True)

        def replica():
            return ReplicaConnection(srv.host, srv.port, srv.user, srv.password, server_id=4546)

        with tempfile.TemporaryDirectory(prefix="verify-bench-") as tmp:
            tmp_path = pathlib.Path(tmp)
            warehouse = str(tmp_path / "warehouse")
            url = ArrowChunkReader.url_for(srv.host, srv.port, srv.user, srv.password, "information_schema")
            time.sleep(1.0)
            t0 = time.perf_counter()
            manifest = take_watermark_snapshot(srv.connect, replica, staging_dir=tmp_path / "staging",
                                               tables=TableFilter(["bench.big"]), flavor="mariadb",
                                               server={"server_id": srv.server_id}, reader="arrow", arrow_url=url)
            snapshot = time.perf_counter() - t0
            jvm = JavaLake(local_spark_conf(warehouse, "lake"), "lake", find_java17_home(), spark_jars_dirs())
            try:
                t0 = time.perf_counter()
                apply_manifests(jvm, [manifest], MergeOptions(namespace="bench", checkpoint_store=str(
                    tmp_path / "store"), checkpoint_key="k"))
                merge = time.perf_counter() - t0
            finally:
                jvm.stop()
            conn = srv.connect()
            try:
                st = source_table(conn, table_map_from_information_schema(conn, "bench", "big", "mariadb"))
            finally:
                conn.close()
            spec = CatalogSpec(type="hadoop", warehouse=warehouse)
            verifier = TableVerifier(srv.connect, replica, "mariadb", st, "bench.bench__big",
                                     lambda: pin(load_table(spec, "bench", "bench__big")), lambda _p: None,
                                     Settings())
            time.sleep(1.0)
            t0 = time.perf_counter()
            report = verifier.run()
            verify = time.perf_counter() - t0
        for line in report.lines():
            print(line)
        print(f"\n{'step':<22}{'seconds':>9}{'rows/s':>13}")
        for name, seconds in (("snapshot task", snapshot), ("merge (no Spark)", merge), ("verify", verify)):
            print(f"{name:<22}{seconds:>9.2f}{args.rows / seconds:>13,.0f}")
        print(f"verify / snapshot: {verify / snapshot:.2f} (target: at most 2)")
        return 0 if report.verified_equal and report.rows == args.rows else 1
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.exit(main())
