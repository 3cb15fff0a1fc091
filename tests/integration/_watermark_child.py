"""A watermark snapshot in a child process that SIGKILLs itself just before its Nth seal (the
chunk's rows read and staged, not yet sealed). argv[1] is a JSON spec: host, port, user,
password, staging, tables, chunk_rows, resume_key, kill_at_seal (0: never), log (a file where
each chunk's SELECT and each seal are appended)."""
from __future__ import annotations

import json
import os
import signal
import sys


def main() -> None:
    import faulthandler

    faulthandler.dump_traceback_later(250, exit=True)  # a hang shows where it is
    spec = json.loads(sys.argv[1])
    import pymysql

    from airflow_provider_binlog.capture.watermark import reads
    from airflow_provider_binlog.capture.watermark.snapshot import take_watermark_snapshot
    from airflow_provider_binlog.replica import ReplicaConnection
    from airflow_provider_binlog.staging.writer import StagingWriter
    from airflow_provider_binlog.common.tables import TableFilter

    from airflow_provider_binlog.capture.watermark import snapshot

    snapshot.SEAL_ROWS = 0  # every chunk sealed, as the kill counts them
    log = open(spec["log"], "a", buffering=1)
    real_convert, real_seal = reads._convert_rows, StagingWriter.seal
    seals = [0]

    def convert(rows, converters):
        out = real_convert(rows, converters)
        log.write(f"select {len(out)}\n")
        return out

    def seal(self, progress):
        seals[0] += 1
        if seals[0] == spec["kill_at_seal"]:
            log.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        real_seal(self, progress)
        log.write("seal\n")

    reads._convert_rows = convert  # the name read_chunk calls, in its module
    StagingWriter.seal = seal
    conn = dict(host=spec["host"], port=spec["port"], user=spec["user"], password=spec["password"])
    manifest = take_watermark_snapshot(
        lambda: pymysql.connect(autocommit=True, charset="utf8mb4", **conn),
        lambda: ReplicaConnection(spec["host"], spec["port"], spec["user"], spec["password"], server_id=4646),
        staging_dir=spec["staging"], tables=TableFilter(spec["tables"]), flavor="mariadb",
        server={"server_id": 1}, chunk_rows=spec["chunk_rows"], resume_key=spec["resume_key"])
    log.write(f"published {manifest.ref}\n")


if __name__ == "__main__":
    main()
