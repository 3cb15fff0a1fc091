"""Freshness of the two incremental paths in a real Airflow deployment: a one-minute cron with
the deferrable sensor against event-driven runs (``OnNewBinlogData``).

Run from the repository root::

    .venv/bin/python benchmarks/freshness_bench.py [--seconds 300] [--rows-per-second 50]

The script starts a private MariaDB server and the deployment of ``tests/airflow_deployment.py``
(``airflow api-server``, ``scheduler`` with the LocalExecutor, ``dag-processor``, ``triggerer``
on an SQLite metadata database in a temporary AIRFLOW_HOME; the sources ``cron`` every minute
and ``event`` with ``OnNewBinlogData(poke_interval=2, min_interval=5)``, embedded catalog,
local Spark), takes the initial snapshots through the backfill DAGs, unpauses the incremental
DAGs and runs a writer at ``--rows-per-second`` over both databases for ``--seconds``. When both
sources have loaded the final position it prints, per path, the seconds from each commit to the
Iceberg snapshot that made it visible (p50, p95, max; commits of the first ``--warmup`` seconds
left out), the ratio cron/event, and the targets: event-driven p95 <= 30 s, one-minute cron
p95 <= 75 s. Exits with status 1 when a target is missed, 2 when the setup fails.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGETS = {"event": 30.0, "cron": 75.0}
SERVER_OPTIONS = {"binlog_checksum": "CRC32", "binlog_row_metadata": "FULL", "binlog_row_image": "FULL"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300, help="how long the writer runs (300)")
    parser.add_argument("--rows-per-second", type=float, default=50, help="rows the writer changes per second (50)")
    parser.add_argument("--warmup", type=float, default=30, help="seconds of commits left out at the start (30)")
    parser.add_argument("--workdir", help="keep everything here (default: a temporary directory, removed)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)

    from airflow_provider_binlog.local.mariadb import MariaDBServer
    from tests.airflow_conn import SECRET, USER, create_user
    from tests.airflow_deployment import (CRON, EVENT, SOURCES, Writer, create_schema, freshness, initial_load,
                                          make_deployment, server_seq, summary, table_differences, wait_loaded)

    work = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix="freshness-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    server = dep = None
    try:
        try:
            server = MariaDBServer(SERVER_OPTIONS)
            if not server.running:
                server.start()
            create_user(server)
            dep, warehouse, store = make_deployment(work, server, USER, SECRET)
            began = time.monotonic()
            dep.start()
            dep.wait_dags([d for s in SOURCES for d in (s.incremental, s.backfill)])
            create_schema(server, [s.database for s in SOURCES])
            writer = Writer(server, [s.database for s in SOURCES], rows_per_second=args.rows_per_second)
            writer.seed()
            initial_load(dep, SOURCES)
            print(f"deployment up and snapshots loaded in {time.monotonic() - began:.0f} s", flush=True)
        except Exception as exc:
            print(f"setup failed: {exc}", file=sys.stderr)
            return 2
        for s in SOURCES:
            dep.set_paused(s.incremental, False)
        writer.start()
        start = time.time()
        try:
            time.sleep(args.seconds)
        finally:
            writer.stop()
        rows = sum(c.rows for c in writer.commits)
        print(f"writer: {len(writer.commits)} commits, {rows} rows in {time.time() - start:.0f} s "
              f"({rows / (time.time() - start):.1f} rows/s)", flush=True)
        wait_loaded(dep, SOURCES, store, server_seq(server), timeout=900)
        dep.settle([s.incremental for s in SOURCES], timeout=600)
        problems = [p for s in SOURCES for p in table_differences(server, warehouse, s)]
        failed = [(d, r["dag_run_id"], r["state"]) for s in SOURCES for d in (s.incremental,)
                  for r in dep.dag_runs(d) if r["state"] != "success"]
        figures = {}
        for s in SOURCES:
            values, missing = freshness(writer.commits, s, warehouse, since=start + args.warmup)
            figures[s.source_id] = {**summary(values), "never_visible": len(missing),
                                    "runs": len(dep.dag_runs(s.incremental))}
    finally:
        if dep is not None:
            dep.close()
        if server is not None:
            server.stop()
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)

    print(f"\nfreshness: seconds from commit to the Iceberg snapshot holding it "
          f"({args.rows_per_second:g} rows/s for {args.seconds:g} s, first {args.warmup:g} s left out)")
    print(f"{'path':<28}{'commits':>8}{'p50':>8}{'p95':>8}{'max':>8}{'runs':>6}  target p95")
    names = {CRON.source_id: "cron */1 (deferrable)", EVENT.source_id: "event (OnNewBinlogData)"}
    missed = []
    for key in (EVENT.source_id, CRON.source_id):
        f = figures[key]
        ok = f["p95"] <= TARGETS[key]
        missed += [] if ok else [key]
        print(f"{names[key]:<28}{f['commits']:>8}{f['p50']:>8.1f}{f['p95']:>8.1f}{f['max']:>8.1f}{f['runs']:>6}"
              f"  <= {TARGETS[key]:g} s: {'met' if ok else 'MISSED'}")
    ratio = {k: figures["cron"][k] / figures["event"][k] for k in ("p50", "p95", "max")}
    print("ratio cron/event: " + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items()))
    figures["ratio_cron_over_event"] = ratio
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(figures, indent=2))
    if problems or failed or any(figures[s.source_id]["never_visible"] for s in SOURCES):
        print(f"LOAD PROBLEMS: {problems} failed runs {failed}", file=sys.stderr)
        return 2
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
