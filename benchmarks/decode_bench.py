"""Decoding throughput of the binlog codec against ``mariadb-binlog``.

Run from the repository root::

    .venv/bin/python benchmarks/decode_bench.py [--rows N] [--runs K]
        [--keep FILE | --binlog FILE]

Without ``--binlog`` the script starts a private MariaDB server
(``airflow_provider_binlog/local/mariadb.py``; needs ``mariadbd`` and ``mariadb-install-db``),
creates a table with mixed column types (INT and BIGINT, DECIMAL(12,2),
DATETIME(6), utf8mb4 VARCHAR with non-ASCII text, ENUM, JSON and a nullable
VARCHAR), inserts ``--rows`` rows in multi-row INSERTs, one transaction per
batch, then updates every 10th row and deletes every 50th, rotates the
binlog (written without ANNOTATE_ROWS events) and copies the closed file to a
temporary directory (``--keep FILE`` also writes it to FILE; ``--binlog FILE``
reuses such a file and skips the server altogether).  The defaults give a
binlog of about 50 MB.

It then times, best of ``--runs``:

* ``ours``: :func:`airflow_provider_binlog.codec.read_binlog_file` over the
  whole file with CRC32 verification and every row decoded into Python
  values (every event and every row image is materialised);
* ``C``: ``mariadb-binlog --no-defaults -v FILE > /dev/null``, the server's
  own decoder printing every row as pseudo-SQL;
* ``CLI jsonl``: ``python -m airflow_provider_binlog decode FILE --format jsonl
  > /dev/null``, the whole command (interpreter start included, its default
  worker processes: the CPUs, at most 4) writing one JSON line per row change;

the three in turn in each run, so that a change in the machine's load hits all
of them.  It prints the rows per second of each, the binlog megabytes per
second of ours, the ratio ours/C (the project aims at 0.33 or more), the ratio
of the CLI's time to C's (the project aims at 3 or less) and the same ratio in
CPU time (user + system), which depends less on what else the machine runs.
The number of rows is cross-checked once against the ``### INSERT``/
``### UPDATE``/``### DELETE`` blocks printed by ``mariadb-binlog`` and the
lines printed by the CLI; the script exits with status 1 when the counts
differ and 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import resource
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

from airflow_provider_binlog.codec import RowsEvent, read_binlog_file  # noqa: E402

SERVER_OPTIONS = {
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "binlog_row_image": "FULL",
    # the multi-row INSERT texts would double the file without adding rows
    "binlog_annotate_row_events": "OFF",
    "max_allowed_packet": "64M",
    "innodb_buffer_pool_size": "128M",
    "innodb_log_file_size": "64M",
}

CREATE_TABLE = """
CREATE TABLE test.bench (
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

INSERT = ("INSERT INTO test.bench (id, account_id, amount, created_at, name, status, attrs, note) "
          "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")

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


def generate_binlog(n_rows: int, dest_dir: pathlib.Path) -> pathlib.Path:
    """Fill a private server's binlog with the benchmark workload; return a copy of it."""
    from airflow_provider_binlog.local.mariadb import MariaDBServer

    t0 = time.perf_counter()
    with MariaDBServer(SERVER_OPTIONS) as srv:
        print(f"started MariaDB {srv.version} on port {srv.port} "
              f"in {srv.startup_seconds:.1f}s", flush=True)
        srv.execute(CREATE_TABLE)
        conn = srv.connect(autocommit=False)
        try:
            batch = 2000
            gen = _rows(n_rows)
            with conn.cursor() as cur:
                done = 0
                while done < n_rows:
                    chunk = [next(gen) for _ in range(min(batch, n_rows - done))]
                    cur.executemany(INSERT, chunk)  # one multi-row INSERT per batch
                    conn.commit()
                    done += len(chunk)
                cur.execute("UPDATE test.bench SET amount = amount + 1.25, status = 'paid', "
                            "note = CONCAT('updated ', id) WHERE id % 10 = 0")
                conn.commit()
                cur.execute("DELETE FROM test.bench WHERE id % 50 = 1")
                conn.commit()
        finally:
            conn.close()
        name = srv.master_status()[0]
        srv.flush_binary_logs()
        dest = dest_dir / name
        shutil.copyfile(srv.binlog_path(name), dest)
    size = dest.stat().st_size
    print(f"generated {dest.name}: {size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s",
          flush=True)
    return dest


def decode_ours(path) -> dict:
    counts = {"insert": 0, "update": 0, "delete": 0}
    for ev in read_binlog_file(path):
        if isinstance(ev, RowsEvent):
            counts[ev.kind] += len(ev.rows)
    return counts


def count_c(mariadb_binlog: str, path) -> dict:
    counts = {"insert": 0, "update": 0, "delete": 0}
    prefixes = ((b"### INSERT INTO ", "insert"), (b"### UPDATE ", "update"),
                (b"### DELETE FROM ", "delete"))
    with subprocess.Popen([mariadb_binlog, "--no-defaults", "-v", str(path)],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        for line in proc.stdout:
            if line.startswith(b"### "):
                for prefix, kind in prefixes:
                    if line.startswith(prefix):
                        counts[kind] += 1
                        break
    if proc.returncode:
        raise RuntimeError(f"mariadb-binlog exited with status {proc.returncode}")
    return counts


def run_c(mariadb_binlog: str, path) -> None:
    subprocess.run([mariadb_binlog, "--no-defaults", "-v", str(path)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


CLI = [sys.executable, "-m", "airflow_provider_binlog", "decode", "--format", "jsonl"]


def count_cli(path) -> int:
    with subprocess.Popen([*CLI, str(path)], cwd=ROOT, stdout=subprocess.PIPE) as proc:
        lines = sum(1 for _ in proc.stdout)
    if proc.returncode:
        raise RuntimeError(f"the decode CLI exited with status {proc.returncode}")
    return lines


def run_cli(path) -> None:
    subprocess.run([*CLI, str(path)], cwd=ROOT, stdout=subprocess.DEVNULL, check=True)


def _cpu() -> float:
    """CPU seconds (user + system) of this process and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best_of(runs: int, *measures) -> tuple[list, list]:
    """Best elapsed and best CPU time of each ``(fn, *args)`` over ``runs`` rounds that run
    each once, in turn."""
    best = [float("inf")] * len(measures)
    best_cpu = [float("inf")] * len(measures)
    for _ in range(runs):
        for i, (fn, *args) in enumerate(measures):
            c0, t0 = _cpu(), time.perf_counter()
            fn(*args)
            best[i] = min(best[i], time.perf_counter() - t0)
            best_cpu[i] = min(best_cpu[i], _cpu() - c0)
    return best, best_cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=250_000, help="rows to insert (default 250000)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs of each decoder, best kept")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--keep", metavar="FILE", help="also write the generated binlog to FILE")
    src.add_argument("--binlog", metavar="FILE", help="use this binlog instead of generating one")
    args = ap.parse_args(argv)

    mariadb_binlog = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")
    if not mariadb_binlog:
        print("mariadb-binlog not found (Debian package mariadb-client)", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="decode-bench-") as tmp:
        if args.binlog:
            path = pathlib.Path(args.binlog)
        else:
            try:
                path = generate_binlog(args.rows, pathlib.Path(tmp))
            except Exception as exc:  # no server binaries, startup failure, ...
                print(f"cannot generate the binlog: {exc}", file=sys.stderr)
                return 2
            if args.keep:
                shutil.copyfile(path, args.keep)
                print(f"kept a copy in {args.keep}")
        size_mb = os.path.getsize(path) / 1e6

        ours = decode_ours(path)  # warm-up, and our row counts
        theirs = count_c(mariadb_binlog, path)
        n_rows = sum(ours.values())
        print(f"binlog {path}: {size_mb:.1f} MB, rows (insert/update/delete) "
              f"ours {ours['insert']}/{ours['update']}/{ours['delete']}, "
              f"mariadb-binlog {theirs['insert']}/{theirs['update']}/{theirs['delete']}")
        if ours != theirs:
            print("ROW COUNTS DIFFER", file=sys.stderr)
            return 1
        cli_lines = count_cli(path)
        if cli_lines != n_rows:
            print(f"THE CLI PRINTED {cli_lines} LINES FOR {n_rows} ROWS", file=sys.stderr)
            return 1

        (t_ours, t_c, t_cli), (_, cpu_c, cpu_cli) = best_of(
            args.runs, (decode_ours, path), (run_c, mariadb_binlog, path), (run_cli, path))

    ratio = t_c / t_ours
    print(f"rows: {n_rows}  (best of {args.runs})")
    print(f"ours:           {t_ours:7.3f}s  {n_rows / t_ours:12,.0f} rows/s  "
          f"{size_mb / t_ours:7.1f} MB/s")
    print(f"mariadb-binlog: {t_c:7.3f}s  {n_rows / t_c:12,.0f} rows/s  "
          f"{size_mb / t_c:7.1f} MB/s")
    print(f"CLI jsonl:      {t_cli:7.3f}s  {n_rows / t_cli:12,.0f} rows/s  "
          f"{size_mb / t_cli:7.1f} MB/s")
    print(f"ratio ours/C:   {ratio:.2f}  (target >= 0.33)")
    print(f"ratio CLI/C:    {t_cli / t_c:.2f}  (target <= 3); CPU time {cpu_cli:.3f}s / {cpu_c:.3f}s = "
          f"{cpu_cli / cpu_c:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
