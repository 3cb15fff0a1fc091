"""Failover by GTID, live: a MariaDB primary and a GTID replica (``log_slave_updates``; no
binlog checksums, so every event is 4 bytes shorter and its offsets differ from the primary's,
as real replicas' do). Loads run from the primary; the primary is killed, the replica promoted
and the loads pointed at it. The next dump resumes by the checkpoint's GTIDs, records the new
server's coordinates and identity, and the staged changes replay to the promoted server's
table: nothing lost, nothing twice. A checkpoint without GTIDs is refused with both servers
named; a replica promoted behind the checkpoint is refused as such."""
from __future__ import annotations

import random

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.local.mariadb import MariaDBServer
from airflow_provider_binlog.replica.position import check_position
from airflow_provider_binlog.replica import ReplicaConnection, ReplicaError, ServerChangedError
from airflow_provider_binlog.common.tables import TableFilter
from tests.integration.test_dump_live import replay, source_rows, workload

pytestmark = pytest.mark.mariadb

TABLE = "failover"
FILTER = TableFilter([f"dumpdb.{TABLE}"])
OPTIONS = {"binlog_row_metadata": "FULL", "binlog_row_image": "FULL"}


def replica_of(server) -> ReplicaConnection:
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=4343)
    rc.connect()
    return rc


def here(server) -> Checkpoint:
    file, pos = server.master_status()
    gtid = server.query("SELECT @@gtid_binlog_pos")[0][0]
    return Checkpoint(file=file, position=pos, gtid=MariadbGtidPosition(gtid), flavor="mariadb",
                      server_id=server.server_id)


def caught_up(replica, primary) -> None:
    gtid = primary.query("SELECT @@gtid_binlog_pos")[0][0]
    assert replica.query("SELECT MASTER_GTID_WAIT(%s, 60)", (gtid,))[0][0] == 0, "the replica did not catch up"


@pytest.fixture()
def pair():
    """A primary and its GTID replica, both private to the test."""
    from tests.conftest import _require_mariadb

    _require_mariadb()
    primary = MariaDBServer({**OPTIONS, "binlog_checksum": "CRC32"})
    replica = MariaDBServer({**OPTIONS, "binlog_checksum": "NONE", "log_slave_updates": "ON"})
    try:
        replica.execute(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
                        f"MASTER_USER='{primary.repl_user}', MASTER_PASSWORD='{primary.repl_password}', "
                        "MASTER_USE_GTID=slave_pos")
        replica.execute("START SLAVE")
        primary.execute("CREATE DATABASE dumpdb")
        primary.execute(f"CREATE TABLE dumpdb.{TABLE} (id INT PRIMARY KEY, name VARCHAR(40), "
                        "price DECIMAL(9,2), qty INT UNSIGNED, seen DATETIME(6), flag ENUM('a','b','c'), "
                        "doc JSON, big BIGINT UNSIGNED) DEFAULT CHARSET=utf8mb4")
        caught_up(replica, primary)
        yield primary, replica
    finally:
        replica.stop()
        primary.stop()


def promote(replica) -> None:
    replica.execute("STOP SLAVE")
    replica.execute("RESET SLAVE ALL")


def test_after_a_failover_the_dump_resumes_by_gtid_and_loses_and_repeats_nothing(pair, tmp_path):
    primary, replica = pair
    rng = random.Random(19)
    start = here(primary)
    workload(primary, TABLE, rng, 120)
    rc = replica_of(primary)
    first = run_dump(rc, staging_dir=tmp_path, start=start, tables=FILTER)
    rc.close()
    assert first.end.server_id == primary.server_id
    workload(primary, TABLE, rng, 120)                  # loaded by nobody yet
    caught_up(replica, primary)
    assert replica.master_status() != primary.master_status()   # other offsets
    primary.halt(crash=True)                            # the primary dies
    promote(replica)
    workload(replica, TABLE, rng, 60)                   # writes on the promoted server

    rc = replica_of(replica)
    check = check_position(rc, first.end)               # what the sensor sees: every transaction after it
    seq = int(replica.query("SELECT @@gtid_binlog_pos")[0][0].rsplit("-", 1)[1])
    assert check.has_new_data and check.lag["transactions"] == seq - first.end.gtid.get(0).seq_no > 0
    second = run_dump(rc, staging_dir=tmp_path, start=first.end, tables=FILTER)
    assert second.start == first.end                    # the batch follows the stored checkpoint
    assert (second.end.file, second.end.position) == replica.master_status()
    assert second.end.server_id == replica.server_id
    assert second.end.gtid == MariadbGtidPosition(replica.query("SELECT @@gtid_binlog_pos")[0][0])
    assert replay([first.manifest, second.manifest], TABLE) == source_rows(replica, TABLE)

    # on the same server again: by coordinates, as usual
    workload(replica, TABLE, rng, 40)
    third = run_dump(rc, staging_dir=tmp_path, start=second.end, tables=FILTER)
    rc.close()
    assert third.start == second.end and third.end.server_id == replica.server_id
    assert replay([first.manifest, second.manifest, third.manifest], TABLE) == source_rows(replica, TABLE)


def test_a_checkpoint_without_gtids_from_another_server_is_refused(pair, tmp_path):
    primary, replica = pair
    workload(primary, TABLE, random.Random(3), 20)
    caught_up(replica, primary)
    file, pos = primary.master_status()
    coordinates_only = Checkpoint(file=file, position=pos, flavor="mariadb", server_id=primary.server_id)
    rc = replica_of(replica)
    try:
        with pytest.raises(ServerChangedError) as err:
            run_dump(rc, staging_dir=tmp_path, start=coordinates_only, tables=FILTER)
        assert f"taken on server_id {primary.server_id}, but the server is now server_id {replica.server_id}" \
            in str(err.value)
        with pytest.raises(ServerChangedError):
            check_position(rc, coordinates_only)
    finally:
        rc.close()
    assert not list(tmp_path.iterdir())                 # nothing staged


def test_a_replica_promoted_behind_the_checkpoint_is_refused_as_such(pair, tmp_path):
    primary, replica = pair
    rng = random.Random(5)
    start = here(primary)
    replica.execute("STOP SLAVE")                       # the replica falls behind
    workload(primary, TABLE, rng, 30)
    rc = replica_of(primary)
    loaded = run_dump(rc, staging_dir=tmp_path, start=start, tables=FILTER)
    rc.close()
    primary.halt(crash=True)
    promote(replica)
    rc = replica_of(replica)
    try:
        with pytest.raises(ReplicaError, match="behind the checkpoint") as err:
            check_position(rc, loaded.end)
        assert "snapshot" in err.value.hint
        with pytest.raises(ReplicaError, match="behind the checkpoint"):
            run_dump(rc, staging_dir=tmp_path / "after", start=loaded.end, tables=FILTER)
    finally:
        rc.close()


def test_gtids_after_the_checkpoint_purged_on_the_promoted_server_raise_the_purged_error(pair, tmp_path):
    from airflow_provider_binlog.replica import BinlogPurgedError
    from tests.integration.test_binlog_position import purge_to

    primary, replica = pair
    rng = random.Random(7)
    start = here(primary)
    workload(primary, TABLE, rng, 20)
    rc = replica_of(primary)
    loaded = run_dump(rc, staging_dir=tmp_path, start=start, tables=FILTER)
    rc.close()
    workload(primary, TABLE, rng, 20)                   # not loaded yet
    caught_up(replica, primary)
    primary.halt(crash=True)
    promote(replica)
    newest = replica.flush_binary_logs()
    workload(replica, TABLE, rng, 5)
    purge_to(replica, newest)                           # the transactions after the checkpoint are gone
    rc = replica_of(replica)
    try:
        with pytest.raises(BinlogPurgedError) as err:
            check_position(rc, loaded.end)
        assert "take a new snapshot" in err.value.hint
        with pytest.raises(BinlogPurgedError):
            run_dump(rc, staging_dir=tmp_path / "after", start=loaded.end, tables=FILTER)
    finally:
        rc.close()
