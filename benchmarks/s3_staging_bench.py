"""Bounded dumps staged on S3 against the same dumps staged in a local directory, same run.

Run from the repository root::

    .venv/bin/python benchmarks/s3_staging_bench.py [--rows N] [--runs K]

The script starts a private MariaDB server and writes the workload of ``dump_bench.py``
(``--rows`` rows inserted, every 10th updated, every 50th deleted; 200,000 rows give about
42 MB of binlog), and an S3-API server on loopback (``moto_server`` from PyPI ``moto[server]``,
objects in memory). It then dumps that range ``--runs`` times each way, alternating, every
run a separate process (:func:`airflow_provider_binlog.capture.dump.run_dump`, the dump's default
staging workers):

* ``local``: into a temporary staging directory;
* ``s3``: into ``s3://bench/dumps`` on the loopback server: the same Parquet files, written in
  the dump's local work area, then uploaded under the batch's attempt prefix, and the
  manifest created with ``If-None-Match``.

It prints each run, the medians, the throughput of each (rows and binlog MB per second) and
s3/local: the project aims at 0.8 or more of the local throughput over loopback. The
uploads to an in-memory Python server on the same two cores are the cost measured; a real
store adds the network.

Then (``--merge``, on by default) the last local batch and the last S3 batch are merged into
Iceberg with the merge job's ``apply_manifests`` on a local Spark (``local[2]``, a Hadoop
catalog in a temporary directory), each into a namespace of its own, through the Spark MERGE
(``direct_max_bytes=0``: the executors read the staged files, from the directory with Spark's
Parquet reader, from S3 with pyarrow through ``mapInArrow``), after an untimed warm-up; it
prints both times and s3/local. Exit status 2 when a server cannot start, 1 when the two
merged tables differ.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import dump_bench  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_moto() -> tuple[subprocess.Popen, str]:
    binary = shutil.which("moto_server") or os.path.join(os.path.dirname(sys.executable), "moto_server")
    port = _free_port()
    proc = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto_server did not start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows of the workload (default 200000)")
    ap.add_argument("--runs", type=int, default=3, help="dumps each way (default 3)")
    ap.add_argument("--no-merge", dest="merge", action="store_false", help="time the dumps only")
    args = ap.parse_args(argv)

    from airflow_provider_binlog.local.mariadb import MariaDBServer

    try:
        moto, endpoint = start_moto()
    except Exception as exc:  # noqa: BLE001
        print(f"cannot start moto_server (pip install 'moto[server]'): {exc}", file=sys.stderr)
        return 2
    env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1"}
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
                     aws_secret_access_key="bench").create_bucket(Bucket="bench")
        with tempfile.TemporaryDirectory(prefix="s3-staging-bench-") as tmp:
            try:
                srv = MariaDBServer(dump_bench.SERVER_OPTIONS)
            except Exception as exc:  # noqa: BLE001
                print(f"cannot start MariaDB: {exc}", file=sys.stderr)
                return 2
            try:
                srv.execute(dump_bench.CREATE_TABLE)
                start = srv.master_status()
                dump_bench.write_workload(srv, args.rows)
                end = srv.master_status()
                size_mb = dump_bench.range_bytes(srv, start, end) / 1e6
                spec = {"host": srv.host, "port": srv.port, "user": srv.repl_user,
                        "password": srv.repl_password, "start": list(start), "end": list(end)}
                print(f"workload: {args.rows:,} rows; binlog {size_mb:.1f} MB; S3 on {endpoint}", flush=True)
                times: dict[str, list[float]] = {"local": [], "s3": []}
                manifests: dict[str, str] = {}
                rows = 0
                for i in range(args.runs):
                    for kind in ("local", "s3"):
                        staging = str(pathlib.Path(tmp) / f"staging-{i}") if kind == "local" \
                            else f"s3://bench/dumps-{i}"
                        report, _, _ = dump_bench.run_worker("ours", {**spec, "staging": staging}, env)
                        times[kind].append(report["seconds"])
                        rows = report["staged"]
                        manifests[kind] = report["manifest"]
                        print(f"{kind:>5} #{i + 1}: {report['seconds']:.2f}s", flush=True)
                merged = merge_both(manifests, pathlib.Path(tmp), env) if args.merge else None
            finally:
                srv.stop()
    finally:
        moto.terminate()
        moto.wait(10)
    local, s3 = statistics.median(times["local"]), statistics.median(times["s3"])
    for label, t in (("local", local), ("s3", s3)):
        print(f"{label:>5}: {t:6.2f}s  {rows / t:10,.0f} rows/s  {size_mb / t:6.1f} MB/s  (median of "
              f"{', '.join(f'{x:.2f}' for x in times[label])})")
    ratio = local / s3
    print(f"s3/local throughput: {ratio:.2f}  (target >= 0.8)" + ("" if ratio >= 0.8 else "  BELOW TARGET"))
    if merged is not None:
        (t_local, t_s3), same = merged
        print(f"merge of the batch ({rows:,} changes) through the Spark MERGE: read from the directory "
              f"{t_local:.2f}s, from S3 by the executors {t_s3:.2f}s, s3/local {t_s3 / t_local:.2f}")
        if not same:
            print("THE TWO MERGED TABLES DIFFER", file=sys.stderr)
            return 1
    return 0


def merge_both(manifests: dict, tmp: pathlib.Path, env: dict) -> tuple[tuple[float, float], bool]:
    """The local and the S3 batch merged through the Spark MERGE; their times and whether the
    two tables are equal."""
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    from airflow_provider_binlog.merge.spark.engine import merge_with_spark as apply_manifests
    from airflow_provider_binlog.merge.options import MergeOptions
    from airflow_provider_binlog.spark import local_spark_session

    spark = local_spark_session(str(tmp / "warehouse"), "lake", app_name="s3-staging-bench")
    try:
        apply_manifests(spark, [manifests["local"]], MergeOptions(namespace="bench_warmup", direct_max_bytes=0))
        out = []
        for kind in ("local", "s3"):
            t0 = time.perf_counter()
            apply_manifests(spark, [manifests[kind]], MergeOptions(namespace=f"bench_{kind}", direct_max_bytes=0))
            out.append(time.perf_counter() - t0)
        from airflow_provider_binlog.common.tables import iceberg_table_name

        table = iceberg_table_name(dump_bench.SCHEMA, dump_bench.TABLE)
        same = spark.sql(f"SELECT * FROM lake.bench_local.{table} EXCEPT ALL "
                         f"SELECT * FROM lake.bench_s3.{table}").count() == 0 and \
            spark.table(f"lake.bench_local.{table}").count() == spark.table(f"lake.bench_s3.{table}").count()
        return (out[0], out[1]), same
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
