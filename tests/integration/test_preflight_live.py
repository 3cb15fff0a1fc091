"""Server settings and grants a CDC load needs, each failure naming the setting to change;
schemas from information_schema for binlogs without column names."""
from __future__ import annotations

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.capture.dump import run_dump
from airflow_provider_binlog.replica import BinlogAccessDeniedError, ReplicaConnection
from airflow_provider_binlog.replica.preflight import PreflightError, preflight
from airflow_provider_binlog.replica.schemas import InformationSchemaSource
from airflow_provider_binlog.common.tables import TableFilter


def test_statement_binlog_format_is_refused_with_the_setting_to_change(mariadb_factory):
    server = mariadb_factory(binlog_format="STATEMENT")
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5151)
    with pytest.raises(PreflightError) as info:
        preflight(rc)
    assert "binlog_format is STATEMENT" in str(info.value) and "binlog_format=ROW" in info.value.hint
    rc.close()


def test_same_server_id_as_the_source_is_refused(mariadb):
    rc = ReplicaConnection(mariadb.host, mariadb.port, mariadb.user, mariadb.password,
                           server_id=mariadb.server_id)
    with pytest.raises(PreflightError) as info:
        preflight(rc)
    assert "server_id" in str(info.value)
    rc.close()


def test_missing_replication_grant_is_reported_with_the_grant_to_add(mariadb):
    mariadb.execute("CREATE USER IF NOT EXISTS 'reader'@'%' IDENTIFIED BY 'readerpw'")
    mariadb.execute("GRANT SELECT ON *.* TO 'reader'@'%'")
    rc = ReplicaConnection(mariadb.host, mariadb.port, "reader", "readerpw", server_id=5152)
    with pytest.raises(BinlogAccessDeniedError) as info:
        preflight(rc)
    assert "REPLICATION SLAVE" in info.value.hint
    rc.close()


def test_minimal_metadata_is_flagged_and_schemas_come_from_information_schema(mariadb_factory, tmp_path):
    server = mariadb_factory(binlog_row_metadata="MINIMAL", binlog_row_image="MINIMAL")
    server.execute("CREATE DATABASE IF NOT EXISTS pf")
    server.execute("CREATE TABLE pf.t (id INT UNSIGNED PRIMARY KEY, color ENUM('red','green'), "
                   "at DATETIME(3))")
    file, pos = server.master_status()
    server.execute("INSERT INTO pf.t VALUES (4000000000, 'green', '2024-05-06 07:08:09.123')")
    server.execute("UPDATE pf.t SET color = 'red' WHERE id = 4000000000")
    rc = ReplicaConnection(server.host, server.port, server.user, server.password, server_id=5153)
    report = preflight(rc)
    assert not report.full_row_metadata
    assert any("binlog_row_image=MINIMAL" in w for w in report.warnings)
    assert any("information_schema" in w for w in report.warnings)
    source = InformationSchemaSource(lambda: server.connect())
    result = run_dump(rc, staging_dir=tmp_path, start=Checkpoint(file=file, position=pos),
                      tables=TableFilter(["pf.*"]), schemas=source)
    source.close()
    (entry,) = result.manifest.tables
    assert [c["name"] for c in entry["columns"]] == ["id", "color", "at"]
    assert entry["primary_key"] == ["id"]
    rows = read_parquet(result.manifest.files(entry)[0]).to_pylist()
    assert rows[0]["_after"]["id"] == 4000000000 and rows[0]["_after"]["color"] == "green"
    assert rows[1]["_op"] == "update" and rows[1]["_after"]["color"] == "red"
    assert set(rows[1]["_after_absent"]) == {"id", "at"}   # MINIMAL image: only the changed column
