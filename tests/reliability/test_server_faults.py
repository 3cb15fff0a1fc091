"""Faults of the source server during a dump: a restart (clean, or a crash of mariadbd), the
connection cut in the middle of an event, the binlog rotated (FLUSH BINARY LOGS) while the
dump reads it, a window spanning several binlog files, and binlogs purged past the
checkpoint. The dump recovers (or fails with a typed error saying what to do) and what it
staged replays to the source: nothing lost, nothing twice."""
from __future__ import annotations

import threading
import time

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import BinlogPurgedError, ReplicaConnection
from airflow_provider_binlog.staging import writer as writer_mod
from airflow_provider_binlog.common.tables import TableFilter
from tests.cutting_proxy import CuttingProxy
from tests.reliability import support as S

DB = "rel_server"
TABLES = TableFilter([f"{DB}.*"])


@pytest.fixture(scope="module")
def server(mariadb_factory):
    """A server of this module only (it is restarted and its binlogs purged); small binlog
    files, so that a few hundred transactions span several of them."""
    return mariadb_factory(max_binlog_size=65536, innodb_fast_shutdown=1)


@pytest.fixture()
def tables(server):
    S.create_tables(server, DB)
    return server


def dump(server, start, **kwargs):
    kwargs.setdefault("tables", TABLES)
    rc = S.replica(server)
    try:
        return run_dump(rc, start=start, **kwargs)
    finally:
        rc.close()


def on_nth_row_batch(monkeypatch, n: int, action):
    """Run ``action()`` when the dump stages its ``n``-th rows event."""
    original = writer_mod.StagingWriter.add_rows
    count = [0]

    def add_rows(self, event, **kw):
        out = original(self, event, **kw)
        count[0] += 1
        if count[0] == n:
            action()
        return out
    monkeypatch.setattr(writer_mod.StagingWriter, "add_rows", add_rows)
    return count


def restart_in_background(server, *, down: float, crash: bool) -> threading.Thread:
    """Stop the server (the dump's connection dies) and start it again ``down`` seconds later,
    while the dump goes on reading and retrying. (The server waits for its dump thread to
    send on shutdown: the dump must not be blocked meanwhile.)"""
    def restart():
        S.stop_server_keeping_data(server, crash=crash)
        time.sleep(down)
        S.start_server_again(server)
    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    return thread


def bulk(server, rng, rows: int = 30, size: int = 800_000) -> None:
    """Large rows, one transaction each: more binlog than the socket buffers hold, so the
    server is still sending when it goes down."""
    for i in range(rows):
        server.execute(f"REPLACE INTO {DB}.items (id, note) VALUES (%s, %s)",
                       (9000 + i, chr(97 + rng.randint(0, 25)) * size))


def check_restart(server, tmp_path, monkeypatch, rng, *, crash: bool, at: int, down: float):
    start = S.here(server)
    S.workload(server, DB, rng, 100)
    bulk(server, rng)
    S.workload(server, DB, rng, 50)
    stop = S.here(server)
    threads = []
    on_nth_row_batch(monkeypatch, at, lambda: threads.append(restart_in_background(server, down=down, crash=crash)))
    result = dump(server, start, staging_dir=tmp_path / f"staging-{crash}-{at}", stop=stop,
                  retries=10, backoff_seconds=0.2)
    monkeypatch.undo()
    assert threads, "the dump ended before the restart"
    threads[0].join()
    assert (result.end.file, result.end.position) == (stop.file, stop.position)
    assert stop.file_index - start.file_index >= 2, "the window should span several binlog files"
    assert S.replay([result.manifest], DB) == S.source_state(server, DB)


def test_server_restarted_mid_dump(tables, tmp_path, monkeypatch, record_trials, caplog):
    caplog.set_level("WARNING", logger="airflow_provider_binlog.capture.dump")
    check_restart(tables, tmp_path, monkeypatch, S.rng_for("restart"), crash=False, at=20, down=1.5)
    retries = caplog.text.count("reconnecting in")
    assert retries >= 2, "the dump should have lost the server and retried while it was down"
    record_trials("MariaDB restarted mid-dump (clean shutdown)")


@pytest.mark.reliability_full
def test_server_restarted_or_crashed_at_random_points(tables, tmp_path, monkeypatch, record_trials):
    for trial in range(S.trials()):
        rng = S.rng_for("restart-random", trial)
        S.create_tables(tables, DB)
        crash = rng.random() < 0.5
        check_restart(tables, tmp_path / str(trial), monkeypatch, rng, crash=crash,
                      at=rng.randint(1, 100), down=rng.uniform(0.0, 3.0))
        record_trials("MariaDB crashed (SIGKILL) mid-dump" if crash else "MariaDB restarted mid-dump (clean shutdown)")


def check_cuts(server, tmp_path, rng, cut_after: int, cuts: int):
    start = S.here(server)
    S.workload(server, DB, rng, 200)
    big = "z" * 200_000   # events larger than a TCP read: cut in their middle
    server.execute(f"INSERT INTO {DB}.items (id, note) VALUES (5000, %s), (5001, %s)", (big, big))
    server.execute(f"UPDATE {DB}.items SET note = CONCAT(note, 'y') WHERE id >= 5000")
    stop = S.here(server)
    proxy = CuttingProxy(server.host, server.port, cut_after=cut_after, cuts=cuts)
    rc = ReplicaConnection("127.0.0.1", proxy.port, server.user, server.password, server_id=5252)
    try:
        rc.connect()
        result = run_dump(rc, staging_dir=tmp_path, start=start, stop=stop, tables=TABLES,
                          retries=cuts + 2, backoff_seconds=0.01)
    finally:
        rc.close()
        proxy.close()
    assert proxy.cuts_done == cuts
    assert (result.end.file, result.end.position) == (stop.file, stop.position)
    assert S.replay([result.manifest], DB) == S.source_state(server, DB)


def test_connection_cut_mid_event(tables, tmp_path, record_trials):
    check_cuts(tables, tmp_path, S.rng_for("cuts"), cut_after=45_000, cuts=3)
    record_trials("connection cut mid-event", 3)


@pytest.mark.reliability_full
def test_connection_cut_at_random_offsets(tables, tmp_path, record_trials):
    for trial in range(S.trials()):
        rng = S.rng_for("cuts-random", trial)
        S.create_tables(tables, DB)
        cuts = rng.randint(1, 4)
        check_cuts(tables, tmp_path / str(trial), rng, cut_after=rng.randint(200, 300_000), cuts=cuts)
        record_trials("connection cut mid-event", cuts)


def check_rotation(server, tmp_path, monkeypatch, rng, at: int):
    """FLUSH BINARY LOGS and more transactions while the dump runs: it stops at its stop
    point; the next dump goes on from there across the new files."""
    start = S.here(server)
    S.workload(server, DB, rng, 120)
    stop = S.here(server)

    def rotate():
        for _ in range(rng.randint(1, 3)):
            server.flush_binary_logs()
            S.workload(server, DB, rng, rng.randint(0, 20))
    on_nth_row_batch(monkeypatch, at, rotate)
    first = dump(server, start, staging_dir=tmp_path, stop=stop)
    monkeypatch.undo()
    assert (first.end.file, first.end.position) == (stop.file, stop.position)
    second = dump(server, first.end, staging_dir=tmp_path)
    assert second.end.file_index > stop.file_index
    assert S.replay([first.manifest, second.manifest], DB) == S.source_state(server, DB)


def test_binlog_rotated_during_the_dump(tables, tmp_path, monkeypatch, record_trials):
    check_rotation(tables, tmp_path, monkeypatch, S.rng_for("rotate"), at=10)
    record_trials("FLUSH BINARY LOGS during a dump")
    record_trials("dump window spanning several binlog files")


@pytest.mark.reliability_full
def test_binlog_rotated_at_random_points(tables, tmp_path, monkeypatch, record_trials):
    for trial in range(S.trials()):
        rng = S.rng_for("rotate-random", trial)
        S.create_tables(tables, DB)
        check_rotation(tables, tmp_path / str(trial), monkeypatch, rng, at=rng.randint(1, 120))
        record_trials("FLUSH BINARY LOGS during a dump")
        record_trials("dump window spanning several binlog files")


def test_purged_binlogs_fail_the_dump_and_the_sensor_early(tables, tmp_path, monkeypatch, record_trials):
    """Last in this module: it purges the server's older binlogs."""
    airflow_conn = pytest.importorskip("tests.airflow_conn")
    from airflow.sdk.exceptions import AirflowFailException

    from airflow_provider_binlog.sensors.position import BinlogPositionSensor

    server = tables
    S.workload(server, DB, S.rng_for("purge"), 5)
    old = S.here(server)
    old_gtid = Checkpoint(gtid=MariadbGtidPosition(server.query("SELECT @@gtid_binlog_pos")[0][0]), flavor="mariadb")
    S.workload(server, DB, S.rng_for("purge"), 5)
    server.flush_binary_logs()
    S.workload(server, DB, S.rng_for("purge"), 5)
    current = server.flush_binary_logs()
    S.purge_to(server, current)

    staging = tmp_path / "staging"
    for start in (old, old_gtid):
        with pytest.raises(BinlogPurgedError) as info:
            dump(server, start, staging_dir=staging)
        message = str(info.value)
        assert "new snapshot" in message and current in message, message
    assert not list(staging.iterdir()), "a failed dump left files behind"

    airflow_conn.create_user(server)
    conn_id = airflow_conn.set_connection(monkeypatch, server, extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    from airflow_provider_binlog.checkpoints import FileCheckpointStore
    FileCheckpointStore(tmp_path / "cp").save(conn_id, old)
    sensor = BinlogPositionSensor(task_id="wait", binlog_conn_id=conn_id, poke_interval=0.1, timeout=30)
    started = time.monotonic()
    with pytest.raises(AirflowFailException) as info:
        sensor.poke({})
    assert time.monotonic() - started < 10, "the sensor should fail at its first poke"
    assert isinstance(info.value, BinlogPurgedError)
    assert "new snapshot" in str(info.value) and f"binlog {old.file}" in str(info.value)
    record_trials("binlogs purged past the checkpoint")
