"""Bounded-dump throughput from a live server against python-mysql-replication.

Run from the repository root::

    .venv/bin/python benchmarks/dump_bench.py [--rows N] [--runs K] [--workers N] [--profile N]

The script starts a private MariaDB server (``airflow_provider_binlog/local/mariadb.py``; needs
``mariadbd`` and ``mariadb-install-db``) with CRC32 checksums, FULL row images
and FULL row metadata, creates a table with mixed column types (INT and
BIGINT, DECIMAL(12,2), DATETIME(6), utf8mb4 VARCHAR with non-ASCII text, ENUM,
JSON (stored as text by MariaDB) and a nullable VARCHAR), records the binlog
position, inserts ``--rows`` rows in multi-row INSERTs (one transaction per
2000 rows), updates every 10th row and deletes every 50th in transactions of a
few thousand rows, and records the end position.  The defaults (200000 rows,
3 runs) give about 42 MB of binlog and take under a minute on two cores.

It then reads that range over the replication protocol, best of ``--runs``:

* ``ours``: :func:`airflow_provider_binlog.capture.dump.run_dump` from the start to
  the end position into a temporary staging directory: every row decoded,
  converted and written to zstd Parquet, and the manifest published.  Each
  run is a separate process, which forks the dump's staging workers
  (``BINLOG_DUMP_WORKERS``; ``--workers N`` sets it for that process, by
  default the dump's own default applies: two on two cores or more).  The
  memory of that process tree is ours alone and not the server's: this
  script samples it from outside every 50 ms (``benchmarks/_proctree.py``:
  the dump process and all its descendants in /proc) and keeps the peak of
  the RSS summed over the tree and the peak of the PSS summed over the tree.
  The workers share the dump process's pages copy-on-write, which the summed
  RSS counts once per process; the summed PSS counts them once and is the
  fair figure.  Shown beside it: ``VmHWM`` of the dump process as it
  reports it (its own peak RSS, workers excluded) and ``ru_maxrss`` from
  ``os.wait4``, which Linux takes as the maximum over the dump process and
  the children it reaped (the largest single process, not a sum);
* ``ours, rows``: our replica client and codec alone, used the way
  python-mysql-replication is: the events streamed into one process, every row
  materialised as Python values (tuples of ``int``, ``Decimal``, ``datetime``,
  ``str``) and every value touched, nothing staged;
* ``theirs``: python-mysql-replication's ``BinLogStreamReader`` (non-blocking,
  rows events only) over the same range, every value of every row image
  touched; the ``mysql-replication`` package is installed with pip into the
  running interpreter's environment when it is missing (without it the script
  still measures ours and the ceiling, then exits with status 2);
* ``raw``: ``mariadb-binlog --read-from-remote-server --raw`` copying the same
  range to a temporary directory, the transfer ceiling of the protocol.

It prints the rows per second of ours, ours (rows) and theirs, the ratios
ours/theirs (the project aims at 10 or more) and ours (rows)/theirs, the staging workers used and our peak memory
(summed RSS and summed PSS of the dump's process tree), our binlog megabytes
per second and the raw transfer megabytes per second.  ``--profile N`` also
runs the dump once under cProfile and prints its N most expensive functions;
cProfile sees the dump process only, not its workers (``--workers 0`` stages
in the dump process, where the profile sees the decoding too).  The row-change
counts of both readers are cross-checked (and ours against the rows in the
Parquet files); the script exits with status 1 when they differ and 2 when
the setup fails.  The server is stopped on every exit path.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from decimal import Decimal

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
HERE = str(pathlib.Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from _proctree import TreeReport, TreeSampler, describe, own_status_mb, wait_exited  # noqa: E402

SERVER_OPTIONS = {
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "binlog_row_image": "FULL",
    # the multi-row INSERT texts would double the binlog without adding rows
    "binlog_annotate_row_events": "OFF",
    "max_allowed_packet": "64M",
    "innodb_buffer_pool_size": "128M",
    "innodb_log_file_size": "64M",
}

SCHEMA, TABLE = "test", "dump_bench"
OURS_SERVER_ID, THEIRS_SERVER_ID, ROWS_SERVER_ID = 4201, 4202, 4203

CREATE_TABLE = f"""
CREATE TABLE {SCHEMA}.{TABLE} (
    id INT NOT NULL PRIMARY KEY,
    account_id BIGINT NOT NULL,
    amount DECIMAL(12,2) NOT NULL,
    created_at DATETIME(6) NOT NULL,
    name VARCHAR(255) CHARACTER SET utf8mb4 NOT NULL,
    status ENUM('new', 'paid', 'shipped', 'returned', 'cancelled') NOT NULL,
    attrs JSON NOT NULL,
    note VARCHAR(64) CHARACTER SET utf8mb4 NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""

INSERT = (f"INSERT INTO {SCHEMA}.{TABLE} (id, account_id, amount, created_at, name, status, "
          "attrs, note) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")

_WORDS = ("alpha", "Müller", "façade", "naïve", "Ωmega", "東京", "straße", "crème brûlée",
          "smörgåsbord", "Zürich", "jalapeño", "Δelta", "łódź", "emoji 🚀", "plain", "order")
_STATUSES = ("new", "paid", "shipped", "returned", "cancelled")


def _rows(n: int, seed: int = 20240601):
    rnd = random.Random(seed)
    base = datetime(2024, 1, 1)
    for i in range(1, n + 1):
        words = " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(2, 6)))
        amount = Decimal(rnd.randint(-5_000_000, 99_999_999)) / 100
        created = base + timedelta(seconds=rnd.randint(0, 300 * 86400),
                                   microseconds=rnd.randint(0, 999_999))
        attrs = ('{"sku": "SKU-%06d", "qty": %d, "tags": ["%s", "%s"], "gift": %s}'
                 % (rnd.randint(0, 999_999), rnd.randint(1, 50), rnd.choice(_WORDS),
                    rnd.choice(_WORDS), "true" if rnd.random() < 0.1 else "false"))
        note = None if rnd.random() < 0.4 else "note %d — %s" % (i, rnd.choice(_WORDS))
        yield (i, rnd.randint(1, 2**40), amount, created, f"{words} #{i}",
               rnd.choice(_STATUSES), attrs, note)


def write_workload(srv, n_rows: int) -> None:
    """Inserts in transactions of 2000 rows, then updates and deletes in chunks of ids."""
    conn = srv.connect(autocommit=False)
    try:
        with conn.cursor() as cur:
            batch = 2000
            gen = _rows(n_rows)
            done = 0
            while done < n_rows:
                chunk = [next(gen) for _ in range(min(batch, n_rows - done))]
                cur.executemany(INSERT, chunk)  # one multi-row INSERT per transaction
                conn.commit()
                done += len(chunk)
            step = 25_000
            for lo in range(0, n_rows, step):
                cur.execute(f"UPDATE {SCHEMA}.{TABLE} SET amount = amount + 1.25, "
                            "status = 'paid', note = CONCAT('updated ', id) "
                            "WHERE id > %s AND id <= %s AND id %% 10 = 0", (lo, lo + step))
                conn.commit()
            for lo in range(0, n_rows, 2 * step):
                cur.execute(f"DELETE FROM {SCHEMA}.{TABLE} WHERE id > %s AND id <= %s "
                            "AND id %% 50 = 1", (lo, lo + 2 * step))
                conn.commit()
    finally:
        conn.close()


def range_bytes(srv, start: tuple, end: tuple) -> int:
    """Binlog bytes from ``start`` to ``end`` (both (file, pos)), across files."""
    total = 0
    for name, size in ((r[0], int(r[1])) for r in srv.query("SHOW BINARY LOGS")):
        if name < start[0] or name > end[0]:
            continue
        lo = start[1] if name == start[0] else 4
        hi = end[1] if name == end[0] else size
        total += max(0, hi - lo)
    return total


# --------------------------------------------------------------------------- workers
# Each reader runs in its own process (``--worker ours|theirs``, its settings as JSON on
# standard input), which prints one JSON line with its timing and counts.

def worker_ours(spec: dict) -> dict:
    import pyarrow.parquet as pq

    from airflow_provider_binlog.checkpoints import Checkpoint
    from airflow_provider_binlog.capture.dump import default_workers, run_dump
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.common.tables import TableFilter

    rss_idle = own_status_mb()  # interpreter, pyarrow and our modules, before the dump

    def dump():
        replica = ReplicaConnection(spec["host"], spec["port"], spec["user"], spec["password"],
                                    server_id=OURS_SERVER_ID)
        try:
            replica.connect()
            return run_dump(replica, staging_dir=spec["staging"],
                            start=Checkpoint(file=spec["start"][0], position=spec["start"][1]),
                            stop=Checkpoint(file=spec["end"][0], position=spec["end"][1]),
                            tables=TableFilter([f"{SCHEMA}.{TABLE}"]))
        finally:
            replica.close()

    t0 = time.perf_counter()
    if spec.get("profile"):
        import cProfile
        import pstats

        prof = cProfile.Profile()
        result = prof.runcall(dump)
        seconds = time.perf_counter() - t0
        stats = pstats.Stats(prof, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(spec["profile"])
        stats.sort_stats("cumulative").print_stats(spec["profile"])
    else:
        result = dump()
        seconds = time.perf_counter() - t0
    rss_peak = own_status_mb()

    counts = {"insert": 0, "update": 0, "delete": 0}
    staged = 0
    for table in result.manifest.tables:
        for kind, n in table["rows"].items():
            counts[kind] += n
        for path in result.manifest.files(table):
            staged += pq.ParquetFile(path).metadata.num_rows
    return {"seconds": seconds, "counts": counts, "staged": staged,
            "end": [result.end.file, result.end.position], "workers": default_workers(),
            "manifest": result.manifest.ref,
            "rss_idle_mb": rss_idle, "vmhwm_mb": rss_peak}


def worker_rows(spec: dict) -> dict:
    """Our replica client and codec alone, as python-mysql-replication is used: the rows of
    the range materialised as Python values (tuples, ``Decimal``, ``datetime``, ``str``),
    every value touched, nothing staged."""
    from airflow_provider_binlog.codec.events import RowsEvent
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.common.tables import TableFilter

    end_file, end_pos = spec["end"]
    counts = {"insert": 0, "update": 0, "delete": 0}
    touched = 0
    t0 = time.perf_counter()
    replica = ReplicaConnection(spec["host"], spec["port"], spec["user"], spec["password"],
                                server_id=ROWS_SERVER_ID)
    try:
        replica.connect()
        for file, event in replica.stream(spec["start"][0], spec["start"][1], non_block=True,
                                          table_filter=TableFilter([f"{SCHEMA}.{TABLE}"])):
            if (file, event.pos) >= (end_file, end_pos) and event.header.log_pos:
                break
            if not isinstance(event, RowsEvent) or event.skipped:
                continue
            if event.kind == "update":
                for before, after in event.rows:
                    for v in before:
                        touched += v is not None
                    for v in after:
                        touched += v is not None
            else:
                for row in event.rows:
                    for v in row:
                        touched += v is not None
            counts[event.kind] += len(event.rows)
    finally:
        replica.close()
    return {"seconds": time.perf_counter() - t0, "counts": counts, "values": touched,
            "vmhwm_mb": own_status_mb()}


def worker_theirs(spec: dict) -> dict:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    end_file, end_pos = spec["end"]
    counts = {"insert": 0, "update": 0, "delete": 0}
    touched = 0
    t0 = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"host": spec["host"], "port": spec["port"], "user": spec["user"],
                             "passwd": spec["password"]},
        server_id=THEIRS_SERVER_ID, log_file=spec["start"][0], log_pos=spec["start"][1],
        resume_stream=True, blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    try:
        for event in stream:
            if (stream.log_file, stream.log_pos) > (end_file, end_pos):
                break
            if isinstance(event, UpdateRowsEvent):
                for row in event.rows:
                    for v in row["before_values"].values():
                        touched += v is not None
                    for v in row["after_values"].values():
                        touched += v is not None
                    counts["update"] += 1
            else:
                kind = "insert" if isinstance(event, WriteRowsEvent) else "delete"
                for row in event.rows:
                    for v in row["values"].values():
                        touched += v is not None
                    counts[kind] += 1
    finally:
        stream.close()
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "counts": counts, "values": touched, "vmhwm_mb": own_status_mb()}


def run_worker(kind: str, spec: dict, env: dict | None = None) -> tuple[dict, float, TreeReport]:
    """Run one reader in a child process, its process tree sampled from here; return its
    report, its own ru_maxrss in MB and the tree's memory."""
    proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()),
                             "--worker", kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env)
    sampler = TreeSampler(proc.pid, series=False)
    sampler.start()
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        out = proc.stdout.read()
        proc.stdout.close()
        wait_exited(proc.pid)
        tree = sampler.stop()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own resource usage
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"the {kind} reader exited with status {proc.returncode}")
    if tree.survivors:
        print(f"the {kind} reader's child processes {tree.survivors} outlived it",
              file=sys.stderr)
    lines = out.decode().strip().splitlines()
    return json.loads(lines[-1]), usage.ru_maxrss / 1024, tree  # KiB on Linux


def run_raw(mariadb_binlog: str, conn: dict, start: tuple, end: tuple, dest: pathlib.Path):
    """Copy the range with ``mariadb-binlog --raw``; return (seconds, bytes written)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    cmd = [mariadb_binlog, "--no-defaults", "--read-from-remote-server", "--raw",
           f"--host={conn['host']}", f"--port={conn['port']}", f"--user={conn['user']}",
           f"--password={conn['password']}", f"--start-position={start[1]}",
           f"--result-file={dest}/"]
    if end[0] != start[0]:
        cmd.append("--to-last-log")
    cmd.append(start[0])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"mariadb-binlog --raw exited with status {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace').strip()}")
    return seconds, sum(p.stat().st_size for p in dest.iterdir())


def ensure_mysql_replication() -> bool:
    try:
        import pymysqlreplication  # noqa: F401
        return True
    except ImportError:
        pass
    print("python-mysql-replication is missing: installing mysql-replication with pip ...",
          flush=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "mysql-replication"]
    constraints = ROOT / "constraints.txt"
    if constraints.is_file():  # keep the project's pinned PyMySQL
        cmd += ["-c", str(constraints)]
    rc = subprocess.run(cmd, stdin=subprocess.DEVNULL).returncode
    importlib.invalidate_caches()
    try:
        import pymysqlreplication  # noqa: F401,F811
        return True
    except ImportError:
        print(f"cannot install mysql-replication (pip exited with status {rc}); install it "
              f"with `{sys.executable} -m pip install mysql-replication` to compare with "
              "python-mysql-replication", file=sys.stderr)
        return False


# --------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000, help="rows to insert (default 200000)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each reader, best kept")
    ap.add_argument("--workers", type=int, default=None, metavar="N",
                    help="staging worker processes of the dump (BINLOG_DUMP_WORKERS for it; "
                         "0: stage in the dump process; default: the dump's default)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also profile one dump and print its N most expensive functions "
                         "(the dump process only, not its workers)")
    ap.add_argument("--worker", choices=("ours", "rows", "theirs"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        spec = json.loads(sys.stdin.read())
        report = {"ours": worker_ours, "rows": worker_rows, "theirs": worker_theirs}[args.worker](spec)
        print(json.dumps(report), flush=True)
        return 0
    if args.rows < 1 or args.runs < 1:
        ap.error("--rows and --runs must be at least 1")
    if args.workers is not None and args.workers < 0:
        ap.error("--workers must be 0 or more")
    ours_env = None
    if args.workers is not None:
        ours_env = {**os.environ, "BINLOG_DUMP_WORKERS": str(args.workers)}

    mariadb_binlog = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if not mariadb_binlog:
        print("mariadb-binlog not found (Debian package mariadb-client)", file=sys.stderr)
        return 2
    have_theirs = ensure_mysql_replication()

    from airflow_provider_binlog.local.mariadb import MariaDBServer

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dump-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        try:
            srv = MariaDBServer(SERVER_OPTIONS)
        except Exception as exc:  # no server binaries, startup failure, ...
            print(f"cannot start MariaDB: {exc}", file=sys.stderr)
            return 2
        try:
            print(f"started MariaDB {srv.version} on port {srv.port} "
                  f"in {srv.startup_seconds:.1f}s", flush=True)
            srv.execute(CREATE_TABLE)
            start = srv.master_status()
            t0 = time.perf_counter()
            write_workload(srv, args.rows)
            end = srv.master_status()
            size_mb = range_bytes(srv, start, end) / 1e6
            print(f"workload: {args.rows} rows inserted, updated and deleted in "
                  f"{time.perf_counter() - t0:.1f}s; binlog {start[0]}:{start[1]} .. "
                  f"{end[0]}:{end[1]} ({size_mb:.1f} MB)", flush=True)

            conn = {"host": srv.host, "port": srv.port, "user": srv.repl_user,
                    "password": srv.repl_password}
            spec = {**conn, "start": list(start), "end": list(end)}

            t_ours, maxrss_ours, hwm_ours, rss_idle, ours = float("inf"), 0.0, 0.0, 0.0, None
            tree_rss = tree_pss = 0.0
            tree_procs, tree_ours = 0, None
            for i in range(args.runs):
                staging = tmp / f"staging-{i}"
                report, maxrss, tree = run_worker("ours", {**spec, "staging": str(staging)},
                                                  ours_env)
                shutil.rmtree(staging, ignore_errors=True)
                t_ours = min(t_ours, report["seconds"])
                maxrss_ours = max(maxrss_ours, maxrss)
                hwm_ours = max(hwm_ours, report["vmhwm_mb"])
                rss_idle = report["rss_idle_mb"]
                tree_rss = max(tree_rss, tree.peak_rss_mb)
                if tree.peak_pss_mb > tree_pss:
                    tree_pss, tree_ours = tree.peak_pss_mb, tree
                tree_procs = max(tree_procs, tree.max_processes)
                if ours is None:
                    ours = report
                    n_rows = sum(ours["counts"].values())
                    if ours["staged"] != n_rows or tuple(ours["end"]) != tuple(end):
                        print(f"our dump staged {ours['staged']} of {n_rows} rows and ended "
                              f"at {ours['end']}, not {list(end)}", file=sys.stderr)
                        return 1
            if args.profile:
                print(f"--- cProfile of one dump (top {args.profile}) ---", flush=True)
                run_worker("ours", {**spec, "staging": str(tmp / "staging-profile"),
                                    "profile": args.profile}, ours_env)

            t_rows, rows = float("inf"), None
            for _ in range(args.runs):
                report, _rss, _tree = run_worker("rows", spec)
                t_rows = min(t_rows, report["seconds"])
                rows = rows or report

            t_theirs, theirs = float("inf"), None
            if have_theirs:
                for _ in range(args.runs):
                    report, _rss, _tree = run_worker("theirs", spec)
                    t_theirs = min(t_theirs, report["seconds"])
                    theirs = theirs or report

            t_raw, raw_bytes = float("inf"), 0
            for _ in range(args.runs):
                seconds, raw_bytes = run_raw(mariadb_binlog, conn, start, end, tmp / "raw")
                t_raw = min(t_raw, seconds)
        finally:
            srv.stop()

    c = ours["counts"]
    print(f"row changes (insert/update/delete): ours {c['insert']}/{c['update']}/{c['delete']}"
          + (f", python-mysql-replication {theirs['counts']['insert']}/"
             f"{theirs['counts']['update']}/{theirs['counts']['delete']}" if theirs else ""))
    print(f"rows: {n_rows}  binlog: {size_mb:.1f} MB  (best of {args.runs})")
    print(f"ours:       {t_ours:7.3f}s  {n_rows / t_ours:10,.0f} rows/s  "
          f"{size_mb / t_ours:7.1f} MB/s  ({ours['workers']} staging workers"
          + (f", BINLOG_DUMP_WORKERS={(ours_env or os.environ)['BINLOG_DUMP_WORKERS']}"
             if (ours_env or os.environ).get("BINLOG_DUMP_WORKERS") else ", the dump's default")
          + ")")
    print(f"peak RSS (dump + {max(0, tree_procs - 1)} workers): {tree_rss:.0f} MB summed RSS, "
          f"{tree_pss:.0f} MB summed PSS")
    print(f"    single processes: dump process VmHWM {hwm_ours:.0f} MB ({rss_idle:.0f} MB before "
          f"the dump); ru_maxrss {maxrss_ours:.0f} MB (largest of the dump and its workers)")
    if tree_ours is not None and len(tree_ours.processes) > 1:
        print("    " + describe(tree_ours).replace("\n", "\n    "))
    if theirs:
        print(f"theirs:     {t_theirs:7.3f}s  {n_rows / t_theirs:10,.0f} rows/s  "
              f"{size_mb / t_theirs:7.1f} MB/s  (python-mysql-replication, peak RSS "
              f"{theirs['vmhwm_mb']:.0f} MB)")
    print(f"ours, rows: {t_rows:7.3f}s  {n_rows / t_rows:10,.0f} rows/s  "
          f"{size_mb / t_rows:7.1f} MB/s  (replica client and codec only: rows materialised "
          f"as Python values, like theirs; one process)")
    print(f"raw copy:   {t_raw:7.3f}s  {raw_bytes / 1e6 / t_raw:7.1f} MB/s  "
          f"(mariadb-binlog --raw, {raw_bytes / 1e6:.1f} MB, the transfer ceiling)")
    if not theirs:
        print("no comparison: python-mysql-replication is not available", file=sys.stderr)
        return 2
    ratio = t_theirs / t_ours
    print(f"ratio ours/theirs: {ratio:.2f}  (target >= 10)"
          + ("" if ratio >= 10 or args.profile else "; --profile 30 shows where the dump spends"))
    print(f"ratio ours, rows/theirs: {t_theirs / t_rows:.2f}  (rows materialised on both sides)")
    print(f"total {time.perf_counter() - t_start:.0f}s")
    if theirs["counts"] != c or rows["counts"] != c or rows["values"] != theirs["values"]:
        print(f"ROW COUNTS DIFFER: ours, rows {rows['counts']} ({rows['values']} values), theirs "
              f"{theirs['counts']} ({theirs['values']} values)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
