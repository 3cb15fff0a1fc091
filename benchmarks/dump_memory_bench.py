"""Peak memory and throughput of the bounded dump over one huge transaction.

Run from the repository root::

    .venv/bin/python benchmarks/dump_memory_bench.py [--rows N] [--row-bytes B] [--workers N]
        [--row-group-rows N] [--row-group-bytes B] [--tracemalloc N]

The script starts a private MariaDB server (``airflow_provider_binlog/local/mariadb.py``; needs
``mariadbd`` and ``mariadb-install-db``) with CRC32 checksums, FULL row images, FULL row
metadata and ``max_binlog_size=1G``, creates a table with mixed column types (INT, BIGINT,
DECIMAL(12,2), DOUBLE, DATETIME(6), DATE, utf8mb4 VARCHAR with non-ASCII text, ENUM, JSON,
a nullable VARCHAR and a TEXT payload), records the binlog position and inserts ``--rows``
rows (default 1,000,000) of about ``--row-bytes`` bytes of row image each (default 1024) with
one ``INSERT ... SELECT`` from the SEQUENCE engine (``seq_1_to_<rows>``): a single
transaction, about 1 GB of binlog at the defaults, written in under two minutes on two cores.

It then runs :func:`airflow_provider_binlog.capture.dump.run_dump` over that range into a temporary
staging directory, in a separate process.  The dump stages the rows in worker processes that
it forks (``BINLOG_DUMP_WORKERS``: ``--workers N`` sets it for the dump process; by default
the dump's own default applies, one per core up to 4; 0 stages in the dump process), so its
memory is that of a process tree.  The script samples the tree from outside every 50 ms
(``benchmarks/_proctree.py``: the dump process and all its descendants in /proc) and reports:

* the staging workers used;
* the tree's peak memory: the peak of the RSS summed over the tree, and the peak of the PSS
  (``Pss`` of ``/proc/<pid>/smaps_rollup``) summed over the tree.  The workers share the dump
  process's pages copy-on-write; the summed RSS counts those pages once per process, the
  summed PSS once, which makes it the fair figure and the one held against the target.
  Beside them, single processes: ``VmHWM`` of the dump process as it reports it (with its RSS
  before the dump: interpreter, pyarrow, our modules) and ``ru_maxrss`` from ``os.wait4``,
  which Linux takes as the maximum over the dump process and the children it reaped;
* its seconds, binlog megabytes per second and rows per second;
* a memory profile of the tree: the summed RSS and PSS, the number of processes and the dump
  process's own RSS and PSS at 10 %, 25 %, 50 %, 75 % and 90 % of the run, at its end and at
  the peak; each process's VmHWM and largest RSS and PSS; and the row groups written (count,
  rows, uncompressed and compressed bytes of the largest, from the Parquet files);

beside the targets: peak summed PSS <= 300 MB and >= 50 MB/s of binlog.  The staged Parquet
row count must equal the rows inserted (and the manifest's insert count): the script exits
with status 1 when it does not and 2 when the setup fails.  Worker processes still running
after the dump process exited are reported.  The server is stopped on every exit path (also
on SIGTERM; a watchdog stops it if the script is killed).

``--row-group-rows`` / ``--row-group-bytes`` run the dump with these
:class:`~airflow_provider_binlog.staging.StagingWriter` limits instead of the writer's
defaults (the dump itself does not expose them; they apply to each staging process), to see
what they change.  ``--tracemalloc N`` also runs the dump once more under :mod:`tracemalloc`
(several times slower) and prints the N source lines holding the most Python memory when the
traced memory peaked; it traces the dump process only, not its workers (with ``--workers 0``
the staging runs in the dump process and is traced too).  ``--rows 100000`` gives a run of
about 20 seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
HERE = str(pathlib.Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from _proctree import TreeReport, TreeSampler, describe, own_status_mb, wait_exited  # noqa: E402
from dump_bench import range_bytes  # noqa: E402

SERVER_OPTIONS = {
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "binlog_row_image": "FULL",
    "binlog_annotate_row_events": "OFF",
    "max_binlog_size": "1G",
    # the transaction's rows events are cached (in memory, then in a temporary file) until
    # the commit writes them to the binlog in one piece
    "binlog_cache_size": "64M",
    "max_binlog_cache_size": "8G",
    "max_allowed_packet": "64M",
    "innodb_buffer_pool_size": "512M",
    "innodb_log_file_size": "512M",
    "innodb_log_buffer_size": "64M",
}

SCHEMA, TABLE = "test", "dump_memory_bench"
SERVER_ID = 4211
RSS_TARGET_MB = 300
RATE_TARGET_MBS = 50
# bytes of a row image without the TEXT payload (ints, decimal, double, temporals, name,
# enum, JSON text, note, length prefixes and null bitmap), about
FIXED_ROW_BYTES = 150

CREATE_TABLE = f"""
CREATE TABLE {SCHEMA}.{TABLE} (
    id INT NOT NULL PRIMARY KEY,
    account_id BIGINT NOT NULL,
    amount DECIMAL(12,2) NOT NULL,
    score DOUBLE NOT NULL,
    created_at DATETIME(6) NOT NULL,
    due DATE NULL,
    name VARCHAR(120) CHARACTER SET utf8mb4 NOT NULL,
    status ENUM('new', 'paid', 'shipped', 'returned', 'cancelled') NOT NULL,
    attrs JSON NOT NULL,
    note VARCHAR(64) CHARACTER SET utf8mb4 NULL,
    payload TEXT CHARACTER SET ascii NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""


def insert_sql(rows: int, payload: int) -> str:
    """One INSERT ... SELECT of ``rows`` rows with a ``payload``-character TEXT column (hex of
    two SHA-512 per row, repeated to length)."""
    repeat = payload // 256 + 1
    return f"""
INSERT INTO {SCHEMA}.{TABLE}
SELECT seq,
       (seq * 1000003) % 1099511627776,
       (seq % 10000000) / 100 - 5000,
       seq * 0.37,
       TIMESTAMP '2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq * 7919) % 1000000 MICROSECOND,
       IF(seq % 7 = 0, NULL, DATE '2024-01-01' + INTERVAL seq % 3650 DAY),
       CONCAT(ELT(1 + seq % 8, 'Müller', 'façade', '東京 straße', 'Zürich', 'jalapeño', 'Δelta',
                  'smörgåsbord', 'emoji 🚀'), ' #', seq),
       ELT(1 + seq % 5, 'new', 'paid', 'shipped', 'returned', 'cancelled'),
       JSON_OBJECT('sku', CONCAT('SKU-', LPAD(seq % 1000000, 6, '0')), 'qty', 1 + seq % 50,
                   'gift', seq % 10 = 0, 'tags', JSON_ARRAY('a', seq % 13)),
       IF(seq % 5 < 2, NULL, CONCAT('note ', seq, ' — ok')),
       LEFT(REPEAT(CONCAT(SHA2(seq, 512), SHA2(seq + 1000000007, 512)), {repeat}), {payload})
FROM {SCHEMA}.seq_1_to_{rows}
"""


# --------------------------------------------------------------------------- worker
# The dump runs in its own process (``--worker``, its settings as JSON on standard input),
# which prints one JSON line with its timing, counts and its own memory figures; the memory
# of its process tree is sampled by the parent.

class TraceSampler(threading.Thread):
    """Takes a :mod:`tracemalloc` snapshot of this process whenever the traced memory grew by
    5 % over the largest seen (checked every ``interval``)."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = 0
        self.snapshot = None
        self.stopping = threading.Event()

    def run(self) -> None:
        import tracemalloc

        while not self.stopping.wait(self.interval):
            current, _ = tracemalloc.get_traced_memory()
            if current > self.peak * 1.05:
                self.peak = current
                self.snapshot = tracemalloc.take_snapshot()

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def worker(spec: dict) -> dict:
    import pyarrow.parquet as pq

    from airflow_provider_binlog.capture import dump as dump_module
    from airflow_provider_binlog.checkpoints import Checkpoint
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.staging import StagingWriter
    from airflow_provider_binlog.common.tables import TableFilter

    used: list = []   # the workers argument of each writer made
    limits = {k: spec[k] for k in ("row_group_rows", "row_group_bytes") if spec.get(k)}

    class LimitedWriter(StagingWriter):
        """The staging writer with the given limits; records the workers it is given."""

        def __init__(self, staging_dir, **kwargs) -> None:
            used.append(kwargs.get("workers", 0))
            super().__init__(staging_dir, **{**kwargs, **limits})

    dump_module.StagingWriter = LimitedWriter
    rss_idle = own_status_mb("VmHWM")
    trace = bool(spec.get("tracemalloc"))
    tracer = None
    if trace:
        import tracemalloc
        tracemalloc.start(int(spec.get("trace_frames", 1)))
        tracer = TraceSampler()
        tracer.start()
    replica = ReplicaConnection(spec["host"], spec["port"], spec["user"], spec["password"],
                                server_id=SERVER_ID)
    t0 = time.perf_counter()
    try:
        replica.connect()
        result = dump_module.run_dump(
            replica, staging_dir=spec["staging"],
            start=Checkpoint(file=spec["start"][0], position=spec["start"][1]),
            stop=Checkpoint(file=spec["end"][0], position=spec["end"][1]),
            tables=TableFilter([f"{SCHEMA}.{TABLE}"]))
    finally:
        seconds = time.perf_counter() - t0
        if tracer is not None:
            tracer.stop()
        replica.close()
    report = {"seconds": seconds, "rss_idle_mb": rss_idle, "vmhwm_mb": own_status_mb("VmHWM"),
              "workers": used[0] if used else None,
              "workers_env": os.environ.get("BINLOG_DUMP_WORKERS"), "limits": limits,
              "end": [result.end.file, result.end.position],
              "transactions": result.transactions}
    if tracer is not None and tracer.snapshot is not None:
        import tracemalloc

        report["trace_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        stats = tracer.snapshot.statistics("lineno")
        report["trace_top"] = [(str(s.traceback[0]), s.size / 2**20, s.count)
                               for s in stats[:int(spec["tracemalloc"])]]
        report["trace_at_mb"] = sum(s.size for s in stats) / 2**20
        tracemalloc.stop()

    counts = {"insert": 0, "update": 0, "delete": 0}
    staged, groups = 0, []
    for table in result.manifest.tables:
        for kind, n in table["rows"].items():
            counts[kind] += n
        for path in result.manifest.files(table):
            meta = pq.ParquetFile(path).metadata
            staged += meta.num_rows
            for i in range(meta.num_row_groups):
                rg = meta.row_group(i)
                groups.append((rg.num_rows, rg.total_byte_size,
                               sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))))
    report.update(counts=counts, staged=staged, row_groups=groups,
                  parquet_files=sum(len(t["files"]) for t in result.manifest.tables),
                  parquet_bytes=sum(f["bytes"] for t in result.manifest.tables for f in t["files"]))
    return report


def run_worker(spec: dict, env: dict | None = None) -> tuple[dict, float, TreeReport]:
    """Run one dump in a child process, its process tree sampled from here; return its
    report, its ru_maxrss in MB and the tree's memory."""
    proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()), "--worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        out = proc.stdout.read()
        proc.stdout.close()
        wait_exited(proc.pid)
        tree = sampler.stop()
        _, status, usage = os.wait4(proc.pid, 0)  # the child's, and its reaped children's
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"the dump process exited with status {proc.returncode}")
    lines = out.decode().strip().splitlines()
    return json.loads(lines[-1]), usage.ru_maxrss / 1024, tree  # KiB on Linux


# --------------------------------------------------------------------------- report

def print_profile(report: dict, tree: TreeReport, rows: int) -> None:
    series = tree.series
    if series:
        print(f"memory profile of the process tree ({len(series)} samples, every "
              f"{1000 * series[-1][0] / max(1, len(series) - 1):.0f} ms on average; seconds "
              "since the dump process started):")
        print("    at     seconds  processes  summed RSS MB  summed PSS MB  dump RSS MB  "
              "dump PSS MB")
        peak = max(series, key=lambda s: s[2])
        marks = [(f"{round(f * 100)} %", tree.at(f)) for f in (0.10, 0.25, 0.50, 0.75, 0.90)]
        marks += [("end", series[-1]), ("peak", peak)]
        for label, (t, rss, pss, n, root_rss, root_pss) in marks:
            print(f"    {label:<5} {t:8.1f}  {n:9d}  {rss:13.0f}  {pss:13.0f}  {root_rss:11.0f}  "
                  f"{root_pss:11.0f}")
        if not tree.pss_available:
            print("    (smaps_rollup unreadable for some processes: their RSS was counted as PSS)")
        print("    per process:")
        print("      " + describe(tree).replace("\n", "\n      "))
    groups = report["row_groups"]
    if groups:
        big = max(groups, key=lambda g: g[1])
        print(f"    row groups written: {len(groups)} in {report['parquet_files']} files, rows per "
              f"group {min(g[0] for g in groups):,} .. {max(g[0] for g in groups):,}; largest "
              f"{big[1] / 2**20:.1f} MB uncompressed, {big[2] / 2**20:.1f} MB compressed "
              f"({big[0]:,} rows); Parquet {report['parquet_bytes'] / 1e6:.1f} MB for {rows:,} rows")


def print_trace(report: dict) -> None:
    if "trace_top" not in report:
        print("tracemalloc: no snapshot taken")
        return
    print(f"tracemalloc (dump process only): peak {report['trace_peak_mb']:.1f} MB of Python "
          f"allocations; at the "
          f"largest snapshot ({report['trace_at_mb']:.1f} MB) the top lines were:")
    for where, mb, count in report["trace_top"]:
        print(f"    {mb:8.1f} MB  {count:9,} blocks  {where}")


# --------------------------------------------------------------------------- main

def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000,
                    help="rows of the one transaction (default 1000000)")
    ap.add_argument("--row-bytes", type=int, default=1024,
                    help="approximate bytes of one row image in the binlog (default 1024)")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="staging worker processes of the dump (BINLOG_DUMP_WORKERS for it; "
                         "0: stage in the dump process; default: the dump's default)")
    ap.add_argument("--row-group-rows", type=int, default=0, metavar="N",
                    help="StagingWriter row_group_rows for the dump (default: the writer's)")
    ap.add_argument("--row-group-bytes", type=int, default=0, metavar="B",
                    help="StagingWriter row_group_bytes for the dump (default: the writer's)")
    ap.add_argument("--tracemalloc", type=int, default=0, metavar="N",
                    help="also run the dump under tracemalloc and print its N largest lines "
                         "(traces the dump process only, not its workers)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        spec = json.loads(sys.stdin.read())
        print(json.dumps(worker(spec)), flush=True)
        return 0
    if args.rows < 1 or args.row_bytes < FIXED_ROW_BYTES + 16:
        ap.error(f"--rows must be at least 1 and --row-bytes at least {FIXED_ROW_BYTES + 16}")
    if args.rows > 2**31 - 1:
        ap.error("--rows must fit the INT key")
    if args.workers is not None and args.workers < 0:
        ap.error("--workers must be 0 or more")
    env = None
    if args.workers is not None:
        env = {**os.environ, "BINLOG_DUMP_WORKERS": str(args.workers)}
    signal.signal(signal.SIGTERM, _terminate)

    from airflow_provider_binlog.local.mariadb import MariaDBServer

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dump-memory-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        try:
            srv = MariaDBServer(SERVER_OPTIONS)
        except Exception as exc:  # no server binaries, startup failure, ...
            print(f"cannot start MariaDB: {exc}", file=sys.stderr)
            return 2
        try:
            print(f"started MariaDB {srv.version} on port {srv.port} "
                  f"in {srv.startup_seconds:.1f}s", flush=True)
            try:
                srv.execute(CREATE_TABLE)
                start = srv.master_status()
                t0 = time.perf_counter()
                inserted = srv.execute(insert_sql(args.rows, args.row_bytes - FIXED_ROW_BYTES))
                end = srv.master_status()
                t_load = time.perf_counter() - t0
            except Exception as exc:  # no SEQUENCE engine, disk full, ...
                print(f"cannot write the workload: {exc}", file=sys.stderr)
                return 2
            binlog = range_bytes(srv, start, end)
            size_mb = binlog / 1e6
            print(f"workload: one transaction of {inserted:,} inserted rows in {t_load:.1f}s; "
                  f"binlog {start[0]}:{start[1]} .. {end[0]}:{end[1]} ({size_mb:.1f} MB, "
                  f"{binlog / max(inserted, 1):.0f} bytes per row)", flush=True)
            if inserted != args.rows:
                print(f"the INSERT wrote {inserted} rows, not {args.rows}", file=sys.stderr)
                return 1

            spec = {"host": srv.host, "port": srv.port, "user": srv.repl_user,
                    "password": srv.repl_password, "start": list(start), "end": list(end),
                    "staging": str(tmp / "staging"), "row_group_rows": args.row_group_rows,
                    "row_group_bytes": args.row_group_bytes}
            try:
                report, maxrss, tree = run_worker(spec, env)
            finally:
                shutil.rmtree(tmp / "staging", ignore_errors=True)
            traced = None
            if args.tracemalloc:
                print("running the dump again under tracemalloc ...", flush=True)
                try:
                    traced, _, _ = run_worker({**spec, "staging": str(tmp / "staging-trace"),
                                               "tracemalloc": args.tracemalloc}, env)
                finally:
                    shutil.rmtree(tmp / "staging-trace", ignore_errors=True)
        finally:
            srv.stop()

    c = report["counts"]
    n_rows = sum(c.values())
    seconds = report["seconds"]
    limits = report["limits"]
    workers = report["workers"]
    print(f"rows: {args.rows:,} in one transaction  binlog: {size_mb:.1f} MB  row changes "
          f"(insert/update/delete) {c['insert']}/{c['update']}/{c['delete']}  staged: "
          f"{report['staged']:,}" + (f"  writer limits: {limits}" if limits else ""))
    print(f"dump:       {seconds:7.2f}s  {n_rows / seconds:10,.0f} rows/s  "
          f"{size_mb / seconds:7.1f} MB/s  (target >= {RATE_TARGET_MBS} MB/s)"
          + ("" if size_mb / seconds >= RATE_TARGET_MBS else "  BELOW TARGET"))
    source = (f"BINLOG_DUMP_WORKERS={report['workers_env']}" if report["workers_env"]
              else "the dump's default")
    print(f"workers:    {workers} staging worker processes ({source}); "
          f"{tree.workers} seen at once")
    print(f"peak RSS (dump + {tree.workers} workers): {tree.peak_rss_mb:.0f} MB summed RSS, "
          f"{tree.peak_pss_mb:.0f} MB summed PSS")
    print(f"target:     summed PSS {tree.peak_pss_mb:7.0f} MB <= {RSS_TARGET_MB} MB"
          + ("" if tree.peak_pss_mb <= RSS_TARGET_MB else "  ABOVE TARGET")
          + f"  (summed RSS {tree.peak_rss_mb:.0f} MB counts the pages shared copy-on-write "
          "once per process)")
    print(f"single:     dump process VmHWM {report['vmhwm_mb']:.0f} MB "
          f"({report['rss_idle_mb']:.0f} MB before the dump); ru_maxrss {maxrss:.0f} MB "
          "(largest of the dump and its workers)")
    if tree.survivors:
        print(f"WORKERS STILL RUNNING after the dump process exited: {tree.survivors}",
              file=sys.stderr)
    print_profile(report, tree, n_rows)
    if traced is not None:
        print_trace(traced)
    print(f"total {time.perf_counter() - t_start:.0f}s")
    if report["staged"] != args.rows or c != {"insert": args.rows, "update": 0, "delete": 0} \
            or tuple(report["end"]) != tuple(end):
        print(f"ROW COUNTS WRONG: {args.rows} rows inserted, {report['staged']} staged, manifest "
              f"{c}, dump ended at {report['end']} (binlog end {list(end)})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
