"""The merge job (``merge.spark.job.main``, embedded local Spark) in a child process that kills its
whole process group (itself and its Spark JVM) with SIGKILL at a chosen point.

argv[1] is a JSON spec: argv (for the job's ``main``), kill ({"point": ..., "after": n,
"seconds": s}), out (where the result JSON goes), hold_lock (a path: hold this merge's lock
until the file appears, to make a concurrent run overlap).

Kill points: after_ddl (after the n-th CREATE/ALTER TABLE), before_commit /
after_commit (around the n-th table commit; after_commit with n=1 is between two tables'
commits), before_ledger (every table committed, ledger row not yet), before_store (ledger
committed, checkpoint store not advanced), mid_store_write (the store's temp file written,
not renamed), after_store (all done, no result yet), random (a timer).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time


def die() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.killpg(os.getpgid(0), signal.SIGKILL)


def install(kill: dict) -> None:
    from pyspark.sql import SparkSession

    from airflow_provider_binlog.checkpoints import file_store as checkpoint
    from airflow_provider_binlog.merge.iceberg_contract import LEDGER_TABLE
    from airflow_provider_binlog.merge.lake import commits
    from airflow_provider_binlog.spark import runtime

    point = kill.get("point")
    after = int(kill.get("after", 1))
    count = [0]
    lock = threading.Lock()

    if point == "after_ddl":
        original_sql = SparkSession.sql

        def sql(self, text, *args, **kwargs):
            result = original_sql(self, text, *args, **kwargs)
            if text.lstrip().upper().startswith(("CREATE TABLE ", "ALTER TABLE ")) and "_binlog_batches" not in text:
                count[0] += 1
                if count[0] >= after:
                    die()
            return result
        SparkSession.sql = sql
    elif point in ("before_commit", "after_commit", "before_ledger"):
        original = runtime.run_with_commit_properties
        original_update = commits.commit_update

        def around(props, fn):
            ledger = props.get("binlog.source") == LEDGER_TABLE
            if point == "before_ledger":
                if ledger:
                    die()
                return fn()
            if ledger:
                return fn()
            if point == "before_commit":
                with lock:
                    count[0] += 1
                    if count[0] >= after:
                        die()
                return fn()
            result = fn()
            # counted once the commit is done: with parallel tables, "after n" means n
            # commits finished, whichever thread finishes them
            with lock:
                count[0] += 1
                if count[0] >= after:
                    die()
            return result

        def commit(spark, props, fn):
            return around(props, lambda: original(spark, props, fn))

        def commit_update(update, props):  # a direct commit: the same points around it
            return around(props, lambda: original_update(update, props))
        runtime.run_with_commit_properties = commit
        commits.commit_update = commit_update
    elif point in ("before_store", "after_store"):
        original_save = checkpoint.FileCheckpointStore.save

        def save(self, key, cp, *, expected=None, **kw):
            count[0] += 1
            if point == "before_store" and count[0] >= after:
                die()
            original_save(self, key, cp, expected=expected, **kw)
            if point == "after_store" and count[0] >= after:
                die()
        checkpoint.FileCheckpointStore.save = save
    elif point == "mid_store_write":
        import tempfile

        def write(self, path, text):
            directory = os.path.dirname(path)
            stem = os.path.basename(path)[:-len(".json")]
            fd, _ = tempfile.mkstemp(dir=directory, prefix=f".{stem}.json~", suffix=".tmp")
            os.write(fd, text[: len(text) // 2].encode())
            os.fsync(fd)
            die()
        checkpoint.FileCheckpointStore._write_atomically = write
    elif point == "random":
        timer = threading.Timer(float(kill["seconds"]), die)
        timer.daemon = True
        timer.start()
    elif point:
        raise SystemExit(f"unknown kill point {point!r}")


def main() -> int:
    spec = json.loads(sys.argv[1])
    install(spec.get("kill") or {})
    from airflow_provider_binlog.merge.lake import batch as merge_batch
    from airflow_provider_binlog.merge.spark import job as merge_job

    hold = spec.get("hold_lock")
    if hold:  # keep the merge running (inside its lock) until told to go on
        original = merge_batch.apply_batch

        def apply_batch(*args, **kwargs):
            with open(spec["out"] + ".inside", "w"):
                pass
            deadline = time.monotonic() + 120
            while not os.path.exists(hold) and time.monotonic() < deadline:
                time.sleep(0.05)
            return original(*args, **kwargs)
        merge_batch.apply_batch = apply_batch
    argv = list(spec["argv"]) + ["--output-json", spec["out"]]
    try:
        return merge_job.main(argv)
    except Exception as exc:  # main wrote the error to the output
        print(f"merge failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
