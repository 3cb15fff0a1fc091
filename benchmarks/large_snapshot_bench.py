"""Snapshot of one large table into staging, both methods, against ``mariadb-dump
--single-transaction`` of the same table to a file in the same run; and the longest transaction
each held open on the source.

Run from the repository root::

    .venv/bin/python benchmarks/large_snapshot_bench.py [--rows 1000000,5000000] [--chunk-rows 10000]

The script starts a private MariaDB server, creates ``bench.big`` (5 columns: INT primary key,
BIGINT, DECIMAL(12,2), DATETIME(6), VARCHAR(40)) with ``--rows`` rows (MariaDB's sequence
engine), then, for each size, times

* ``watermark``: :func:`airflow_provider_binlog.capture.watermark.snapshot.take_watermark_snapshot`
  (key chunks between binlog watermarks, staged as zstd Parquet with a manifest), each chunk
  read straight into Arrow with connectorx over ``--connections`` connections;
* ``watermark-pymysql``: the same, each chunk read row by row with pymysql;
* ``consistent``: :func:`airflow_provider_binlog.capture.snapshot.take_snapshot` (one transaction);
* ``mariadb-dump --single-transaction bench big`` to a file (the C client; SQL text, no
  Parquet);

and prints the seconds, rows per second and the ratios ours/mariadb-dump (target: at most 3
for the watermark method). A thread polls ``information_schema.INNODB_TRX`` every 20 ms and
reports the longest client transaction seen during each run. For the watermark methods the
snapshot's own timing of its longest chunk transaction (or autocommit read) is shown instead:
INNODB_TRX keeps the ``trx_started`` of a connection's earlier read-only transaction for the
next ones (seen: 11 s for a connection that commits after every 70 ms chunk), and does not
list autocommit reads (the target: at most one chunk's read, well under a second). Exits with
status 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SERVER_OPTIONS = {
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "binlog_row_image": "FULL",
    "max_allowed_packet": "64M",
    "innodb_buffer_pool_size": "1G",
    "innodb_log_file_size": "256M",
}


class LongestTransaction:
    """The longest-running transaction seen on the server while it runs (polled)."""

    def __init__(self, srv) -> None:
        self.srv = srv
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        conn = self.srv.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT NOW()")
                since = cur.fetchone()[0]  # transactions of this run only (INNODB_TRX has seconds)
                while not self._stop.is_set():
                    # client transactions only (thread 0: InnoDB's own, such as purge)
                    cur.execute("SELECT COALESCE(MAX(TIMESTAMPDIFF(MICROSECOND, trx_started, NOW(6))), 0) "
                                "FROM information_schema.INNODB_TRX "
                                "WHERE trx_mysql_thread_id NOT IN (0, CONNECTION_ID()) "
                                "AND trx_started >= %s", (since,))
                    self.longest = max(self.longest, float(cur.fetchone()[0]) / 1e6)
                    time.sleep(0.02)
        finally:
            conn.close()

    def __enter__(self) -> "LongestTransaction":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def fill(srv, rows: int) -> None:
    srv.execute("CREATE DATABASE IF NOT EXISTS bench")
    srv.execute("DROP TABLE IF EXISTS bench.big")
    srv.execute("CREATE TABLE bench.big (id INT PRIMARY KEY, n BIGINT, amount DECIMAL(12,2), "
                "at DATETIME(6), label VARCHAR(40)) DEFAULT CHARSET=utf8mb4")
    srv.execute(f"INSERT INTO bench.big SELECT seq, seq * 7919, (seq % 100000) / 100, "
                f"TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND, CONCAT('label-', seq) "
                f"FROM bench.seq_1_to_{rows}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000000,5000000", help="table sizes, comma-separated")
    ap.add_argument("--chunk-rows", type=int, default=None,
                    help="rows per chunk (default: each method's own, 50,000 into Arrow, 10,000 else)")
    ap.add_argument("--connections", type=int, default=1, help="read connections of the watermark method")
    ap.add_argument("--skip-pymysql", action="store_true", help="leave out the watermark-pymysql run")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.rows.split(",") if x]
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if not dump:
        print("mariadb-dump not found (Debian package mariadb-client)", file=sys.stderr)
        return 2
    from airflow_provider_binlog.capture.arrow_reader import ArrowChunkReader
    from airflow_provider_binlog.local.mariadb import MariaDBServer
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.capture.snapshot import take_snapshot
    from airflow_provider_binlog.common.tables import TableFilter
    from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot

    try:
        srv = MariaDBServer(SERVER_OPTIONS)
    except Exception as exc:  # no server binaries, startup failure, ...
        print(f"cannot start MariaDB: {exc}", file=sys.stderr)
        return 2
    try:
        print(f"started MariaDB {srv.version} on port {srv.port}", flush=True)
        tables = TableFilter(["bench.big"])
        server = {"server_id": srv.server_id}

        def replica():
            return ReplicaConnection(srv.host, srv.port, srv.user, srv.password, server_id=4545)

        for rows in sizes:
            t0 = time.perf_counter()
            fill(srv, rows)
            print(f"\nbench.big: {rows:,} rows loaded in {time.perf_counter() - t0:.1f}s", flush=True)
            results = {}
            with tempfile.TemporaryDirectory(prefix="large-snapshot-") as tmp:
                tmp = pathlib.Path(tmp)
                url = ArrowChunkReader.url_for(srv.host, srv.port, srv.user, srv.password, "information_schema")
                runs = {
                    "watermark": lambda: take_watermark_snapshot(
                        srv.connect, replica, staging_dir=tmp / "w", tables=tables, flavor="mariadb",
                        server=server, chunk_rows=args.chunk_rows, reader="arrow", arrow_url=url,
                        read_connections=args.connections),
                    "watermark-pymysql": lambda: take_watermark_snapshot(
                        srv.connect, replica, staging_dir=tmp / "wp", tables=tables, flavor="mariadb",
                        server=server, chunk_rows=args.chunk_rows, reader="pymysql"),
                    "consistent": lambda: take_snapshot(
                        srv.connect, staging_dir=tmp / "c", tables=tables, flavor="mariadb", server=server,
                        chunk_rows=args.chunk_rows or 10_000),
                    "mariadb-dump": lambda: subprocess.run(
                        [dump, "-h", srv.host, "-P", str(srv.port), "-u", srv.user, f"-p{srv.password}",
                         "--single-transaction", "--skip-lock-tables", "bench", "big",
                         f"--result-file={tmp / 'big.sql'}"], check=True, capture_output=True),
                }
                if args.skip_pymysql:
                    del runs["watermark-pymysql"]
                for name, run in runs.items():
                    time.sleep(1.5)  # the transactions of the run before are gone
                    with LongestTransaction(srv) as trx:
                        t0 = time.perf_counter()
                        out = run()
                        seconds = time.perf_counter() - t0
                    longest = trx.longest
                    if name.startswith("watermark"):  # timed by the snapshot (see the docstring)
                        longest = out.data["snapshot_stats"]["longest_chunk_read_seconds"]
                    results[name] = (seconds, longest)
                    if name != "mariadb-dump":
                        staged = sum(sum(t["rows"].values()) for t in out.tables)
                        assert staged == rows, (name, staged, rows)
            base = results["mariadb-dump"][0]
            print(f"{'method':<19}{'seconds':>9}{'rows/s':>12}{'x dump':>8}{'longest trx s':>15}")
            for name, (seconds, longest) in results.items():
                print(f"{name:<19}{seconds:>9.2f}{rows / seconds:>12,.0f}{seconds / base:>8.1f}{longest:>15.2f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
