"""A checkpoint's server identity: where a load resumes on the server it talks to, and how two
checkpoints of two servers are ordered (by GTID, never by their unrelated offsets)."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint, CheckpointOrderError
from airflow_provider_binlog.codec.gtid import MariadbGtidPosition, MysqlGtidSet
from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.replica import ReplicaError, ServerChangedError
from airflow_provider_binlog.replica.identity import resume_point, same_server

UUID_A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
UUID_B = "5a4f8b2e-9c3d-11ee-8a1f-0242ac120002"


def mariadb(file="mariadb-bin.000001", pos=1200, gtid="0-101-42", server_id=101):
    return Checkpoint(file=file, position=pos, gtid=MariadbGtidPosition(gtid), flavor="mariadb", server_id=server_id)


def test_identity_is_the_uuid_when_both_have_one_else_the_server_id():
    mysql = Checkpoint(file="binlog.000003", position=4, flavor="mysql", server_id=1, server_uuid=UUID_A)
    assert same_server(mysql, 1, UUID_A.upper()) is True
    assert same_server(mysql, 1, UUID_B) is False          # another server cloned with the same server_id
    assert same_server(mariadb(), 101, None) is True
    assert same_server(mariadb(), 102, None) is False
    assert same_server(Checkpoint(file="mariadb-bin.000001", position=4), 102, None) is None  # unrecorded


def test_on_its_own_server_or_unrecorded_the_checkpoint_resumes_where_it_is():
    cp = mariadb()
    assert resume_point(cp, 101, None) is cp
    old = Checkpoint(file="mariadb-bin.000001", position=1200)
    assert resume_point(old, 102, None) is old


def test_on_another_server_it_resumes_by_its_gtids_alone():
    cp = mariadb()
    resumed = resume_point(cp, 102, None)
    assert (resumed.file, resumed.position) == (None, None)
    assert resumed.gtid == MariadbGtidPosition("0-101-42") and resumed.flavor == "mariadb"
    mysql = Checkpoint(file="binlog.000003", position=900, gtid=MysqlGtidSet(f"{UUID_A}:1-77"), server_id=1,
                       server_uuid=UUID_A)
    assert resume_point(mysql, 2, UUID_B).gtid == MysqlGtidSet(f"{UUID_A}:1-77")


def test_a_checkpoint_of_another_server_without_gtids_is_refused_with_both_identities_and_a_remedy():
    cp = Checkpoint(file="mariadb-bin.000001", position=1200, flavor="mariadb", server_id=101)
    with pytest.raises(ServerChangedError) as err:
        resume_point(cp, 102, None)
    assert "taken on server_id 101, but the server is now server_id 102" in str(err.value)
    assert "take a new snapshot" in err.value.hint
    assert isinstance(err.value, ReplicaError) and isinstance(err.value, ProviderError)


def test_checkpoints_of_two_servers_are_ordered_by_gtid_not_by_their_offsets():
    # the promoted replica's offsets are smaller, its GTID state is further on
    primary = mariadb(pos=9000, gtid="0-101-42", server_id=101)
    replica = mariadb(pos=3000, gtid="0-101-50", server_id=102)
    assert primary < replica and replica > primary
    assert primary.compare(mariadb(pos=9000, gtid="0-101-42", server_id=102)) == 0
    # the same server: the coordinates, as always
    assert mariadb(pos=9000, server_id=101) > mariadb(pos=3000, gtid="0-101-50", server_id=101)
    with pytest.raises(CheckpointOrderError):
        Checkpoint(file="mariadb-bin.000001", position=4, server_id=101).compare(
            Checkpoint(file="mariadb-bin.000001", position=4, server_id=102))
