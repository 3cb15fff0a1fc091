"""Lag and retention checks of airflow_provider_binlog.replica.position for MySQL servers, without a
server (the MariaDB forms are tested live in test_binlog_position.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.codec.gtid import MysqlGtidSet
from airflow_provider_binlog.replica.position import PositionCheck, ServerState, check_position
from airflow_provider_binlog.replica import BinlogPurgedError, ReplicaError

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4f22ab58-82db-22f2-af44-d91bb0530673"
MYSQL = SimpleNamespace(info=SimpleNamespace(flavor="mysql", server_id=1, server_uuid=U1))

BINLOGS = (("binlog.000007", 1000), ("binlog.000008", 5000), ("binlog.000009", 2000), ("binlog.000010", 700))


def state(file="binlog.000010", pos=700, gtid=f"{U1}:1-100", purged=f"{U1}:1-20", binlogs=BINLOGS):
    target = Checkpoint(file=file, position=pos, gtid=MysqlGtidSet(gtid), flavor="mysql")
    return ServerState(target, binlogs, purged)


def check(start, **kwargs):
    return check_position(MYSQL, start, state=state(**kwargs))


def test_lag_in_bytes_files_and_gtids_across_files():
    start = Checkpoint(file="binlog.000008", position=1000, gtid=MysqlGtidSet(f"{U1}:1-90"))
    result = check(start)
    assert result.lag == {"bytes": (5000 - 1000) + 2000 + 700, "files": 2, "transactions": 10,
                          "gtids": f"{U1}:91-100", "seconds": None}   # no server to read the time from
    assert result.files_of_headroom == 1 and result.oldest_binlog == "binlog.000007"
    assert result.has_new_data and result.meets(min_bytes=6700, min_transactions=10)
    assert not result.meets(min_transactions=11) and not result.meets(min_bytes=6701)


def test_gtids_the_checkpoint_only_skipped_are_not_lag():
    # a checkpoint that recorded only the GTIDs its dump saw (no 1-80), and a second source
    start = Checkpoint(file="binlog.000010", position=500, gtid=MysqlGtidSet(f"{U1}:81-95"))
    result = check(start, gtid=f"{U1}:1-100,{U2}:1-3")
    assert result.lag["transactions"] == 5 + 3
    assert result.lag["bytes"] == 200 and result.lag["files"] == 0


def test_no_lag_at_the_same_coordinates():
    start = Checkpoint(file="binlog.000010", position=700, gtid=MysqlGtidSet(f"{U1}:1-99"))
    result = check(start)
    assert result.lag["bytes"] == 0 and result.lag["transactions"] == 0 and not result.has_new_data


def test_purged_file_and_purged_gtids():
    with pytest.raises(BinlogPurgedError, match=r"binlog binlog.000006 .* oldest retained binlog is "
                                                r"binlog.000007.*new snapshot"):
        check(Checkpoint(file="binlog.000006", position=4))
    with pytest.raises(BinlogPurgedError, match=rf"purged from the server: {U1}:11-20.*new snapshot"):
        check(Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-10")))
    ok = check(Checkpoint(gtid=MysqlGtidSet(f"{U1}:1-30")))
    assert ok.lag["transactions"] == 70 and ok.lag["bytes"] is None and ok.has_new_data


def test_retention_margin_warning():
    start = Checkpoint(file="binlog.000007", position=900)
    assert check(start).warnings and "may be purged" in check(start).warnings[0]
    later = Checkpoint(file="binlog.000009", position=4)
    assert check_position(MYSQL, later, retention_margin_files=2, state=state()).warnings == []
    assert check_position(MYSQL, later, retention_margin_files=3, state=state()).warnings


def test_unknown_transactions_fall_back_to_bytes():
    start = Checkpoint(file="binlog.000010", position=600)   # no GTIDs
    result = check(start)
    assert result.lag["transactions"] is None and result.lag["bytes"] == 100
    assert result.has_new_data and result.meets(min_transactions=1000)


@pytest.mark.parametrize("start, message", [
    (Checkpoint(file="mysql-bin.000010", position=4), "not of the server's binlog series"),
    (Checkpoint(file="binlog.000010", position=800), "ahead of the server's position"),
    (Checkpoint(file="binlog.000011", position=4), "ahead of the server's position"),
    (Checkpoint(file="binlog.000010", position=4, flavor="mariadb"), "is a mariadb position"),
])
def test_checkpoints_that_do_not_fit_the_server(start, message):
    with pytest.raises(ReplicaError, match=message):
        check(start)


def test_check_as_json():
    start = Checkpoint(file="binlog.000009", position=4)
    data = check(start).to_json()
    assert data["target"]["file"] == "binlog.000010" and data["start"] == start.to_json()
    assert set(data) == {"start", "target", "lag", "has_new_data", "oldest_binlog", "files_of_headroom",
                         "warnings"}
    assert isinstance(check(start), PositionCheck)
