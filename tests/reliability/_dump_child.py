"""A bounded dump in a child process that SIGKILLs itself at a chosen point.

argv[1] is a JSON spec: server (host, port, user, password, ssl...), start (checkpoint JSON),
stop ("current" or checkpoint JSON), staging_dir, tables, max_rows, row_group_rows, kill
({"point": ..., "after": n, "seconds": s}) and out (where the result JSON goes).

Kill points: before_first_row, mid_transaction (after the n-th rows event inside a
transaction), mid_parquet_write (after the n-th row group, the file has no footer yet),
before_manifest (every Parquet file closed), after_manifest (manifest written, directory not
yet renamed into place), after_publish (published, result not returned), random (after the n-th
binlog event of any kind), timer (after a delay).
"""
from __future__ import annotations

import json
import os
import resource
import signal
import sys
import threading
import time


def _vmhwm_kb() -> int:
    """This process's peak RSS. (``ru_maxrss`` is no good here: Linux carries the high-water
    mark of the forked parent over the exec, so it reports at least the test runner's RSS.)"""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def die() -> None:
    sys.stdout.flush()
    import multiprocessing
    if multiprocessing.parent_process() is not None:
        # a staging worker (forked with this hook installed): the dump dies, then the worker
        os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def install(kill: dict) -> None:
    from airflow_provider_binlog.capture import dump as dump_mod
    from airflow_provider_binlog.codec.events import RowsEvent
    from airflow_provider_binlog.staging import parts, writer

    point = kill.get("point")
    after = int(kill.get("after", 1))
    count = [0]

    if point == "before_first_row":
        original = writer.StagingWriter.add_rows

        def add_rows(self, event, **kw):
            if (event.rows or event.deferred) and not event.skipped and event.table_map is not None:
                die()
            return original(self, event, **kw)
        writer.StagingWriter.add_rows = add_rows
    elif point == "mid_transaction":
        original = dump_mod.BoundedDump._handle

        def handle(self, file, event, next_pos, pos):
            original(self, file, event, next_pos, pos)
            if isinstance(event, RowsEvent) and self.txn is not None and not event.skipped:
                count[0] += 1
                if count[0] >= after:
                    die()
        dump_mod.BoundedDump._handle = handle
    elif point == "mid_parquet_write":
        original = parts.PartFile.flush

        def flush(self):
            wrote = bool(self.count)
            original(self)
            if wrote:
                count[0] += 1
                if count[0] >= after:
                    die()
        parts.PartFile.flush = flush
    elif point in ("before_manifest", "after_manifest"):
        original = writer.write_json_atomically

        def write_json(path, data):
            if point == "before_manifest":
                die()
            original(path, data)
            die()
        writer.write_json_atomically = write_json
        # on an object store: around the conditional write of the manifest (the uploads done)
        from airflow_provider_binlog.staging.storage import ObjectStaging
        original_create = ObjectStaging.create_if_absent

        def create_if_absent(self, data, *parts):
            if parts[-1] != "manifest.json":  # the store's probe
                return original_create(self, data, *parts)
            if point == "before_manifest":
                die()
            created = original_create(self, data, *parts)
            die()
            return created
        ObjectStaging.create_if_absent = create_if_absent
    elif point == "after_publish":
        original = writer.load_manifest

        def load(path, verify=False, **kwargs):
            if not verify:  # the reading back of the published batch (not the check before)
                die()
            return original(path, verify=verify, **kwargs)
        writer.load_manifest = load
    elif point == "random":  # after the n-th binlog event, whatever it is
        original = dump_mod.BoundedDump._handle

        def handle(self, file, event, next_pos, pos):
            original(self, file, event, next_pos, pos)
            count[0] += 1
            if count[0] >= after:
                die()
        dump_mod.BoundedDump._handle = handle
    elif point == "timer":
        timer = threading.Timer(float(kill["seconds"]), die)
        timer.daemon = True
        timer.start()
    elif point:
        raise SystemExit(f"unknown kill point {point!r}")


def _publish_barrier(directory: str, parties: int) -> None:
    """On an object store: wait, uploads done, until ``parties`` dumps reached the conditional
    write of their manifest (files in ``directory``), so that they race for it."""
    import uuid

    from airflow_provider_binlog.staging.storage import ObjectStaging
    original = ObjectStaging.create_if_absent

    def create_if_absent(self, data, *parts):
        if parts[-1] != "manifest.json":  # the store's probe
            return original(self, data, *parts)
        with open(os.path.join(directory, uuid.uuid4().hex), "w"):
            pass
        deadline = time.monotonic() + 120
        while len(os.listdir(directory)) < parties and time.monotonic() < deadline:
            time.sleep(0.02)
        return original(self, data, *parts)
    ObjectStaging.create_if_absent = create_if_absent


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec.get("barrier"):
        _publish_barrier(spec["barrier"]["dir"], spec["barrier"]["parties"])
    rows = spec.get("row_group_rows")
    if rows:
        from airflow_provider_binlog.staging import writer
        init = writer.StagingWriter.__init__

        def small_groups(self, staging_dir, **kwargs):
            init(self, staging_dir, **{"row_group_rows": rows, **kwargs})
        writer.StagingWriter.__init__ = small_groups
    install(spec.get("kill") or {})

    from airflow_provider_binlog.checkpoints import Checkpoint
    from airflow_provider_binlog.capture.dump import run_dump
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.common.tables import TableFilter

    server = spec["server"]
    rc = ReplicaConnection(server["host"], server["port"], server["user"], server["password"],
                           server_id=spec.get("server_id", 6161), **server.get("connect", {}))
    rc.connect()
    stop = spec.get("stop", "current")
    if isinstance(stop, dict):
        stop = Checkpoint.from_json(stop)
    result = run_dump(rc, staging_dir=spec["staging_dir"], start=Checkpoint.from_json(spec["start"]),
                      stop=stop, tables=TableFilter(spec.get("tables")), max_rows=spec.get("max_rows"),
                      **spec.get("options", {}))
    rc.close()
    out = result.to_json()
    out["peak_rss_kb"] = _vmhwm_kb()
    with open(spec["out"], "w") as fh:
        json.dump(out, fh, default=str)


if __name__ == "__main__":
    main()
