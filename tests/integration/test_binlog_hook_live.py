"""BinlogHook: bounded dumps and snapshots of a live MariaDB through an Airflow connection.
The settings read from the connection, without a server: ``tests/unit/airflow/test_binlog_hook.py``."""
from __future__ import annotations

import json
import logging

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
from airflow_provider_binlog.hooks.binlog import BinlogConnectionError, BinlogHook  # noqa: E402
from airflow_provider_binlog.replica import BinlogAccessDeniedError  # noqa: E402
from airflow_provider_binlog.staging import load_manifest  # noqa: E402
from tests.airflow_conn import SECRET, USER, create_user, set_connection  # noqa: E402
from tests.unit.airflow.test_binlog_hook import assert_no_secret  # noqa: E402


@pytest.fixture()
def table(mariadb, request):
    create_user(mariadb)
    name = "t_" + request.node.name.split("[")[0][5:40]
    mariadb.execute("CREATE DATABASE IF NOT EXISTS hookdb")
    mariadb.execute(f"DROP TABLE IF EXISTS hookdb.{name}")
    mariadb.execute(f"CREATE TABLE hookdb.{name} (id INT PRIMARY KEY, name VARCHAR(20))")
    return name


# ---------------------------------------------------------------------- live

def test_dump_end_to_end_from_the_stored_checkpoint(mariadb, table, monkeypatch, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    hook = BinlogHook(conn_id)
    assert hook.test_connection()[0] is True
    assert hook.preflight().full_row_metadata
    start = hook.current_position()
    assert (start.file, start.position) == mariadb.master_status()
    assert str(start.gtid) == mariadb.query("SELECT @@gtid_binlog_pos")[0][0]
    hook.checkpoint_store().save(conn_id, start)

    mariadb.execute(f"INSERT INTO hookdb.{table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    mariadb.execute(f"UPDATE hookdb.{table} SET name = 'bb' WHERE id = 2")
    mariadb.execute(f"DELETE FROM hookdb.{table} WHERE id = 3")
    mariadb.execute("CREATE TABLE IF NOT EXISTS hookdb.other (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO hookdb.other VALUES (1) ON DUPLICATE KEY UPDATE id = id")

    result = hook.dump(staging=tmp_path / "staging", tables=["hookdb.t_*"])
    assert result["start"] == start.to_json()
    file, pos = mariadb.master_status()
    assert (result["end"]["file"], result["end"]["pos"]) == (file, pos)
    assert result["transactions"] >= 3
    counts = result["rows"][f"hookdb.{table}"]
    assert (counts["insert"], counts["update"], counts["delete"]) == (3, 1, 1)
    assert "hookdb.other" not in result["rows"]
    manifest = load_manifest(result["manifest"])
    assert manifest.dump_id == result["dump_id"]
    assert manifest.end.to_json() == result["end"]

    # the dump does not move the stored checkpoint; a second dump from its end finds nothing
    assert hook.stored_checkpoint() == start
    again = hook.dump(staging=tmp_path / "staging", start=result["end"], tables=["hookdb.t_*"])
    assert again["rows"] == {} and again["end"] == again["start"]

    out, err = capfd.readouterr()  # Airflow's structured log goes to the console
    logged = caplog.text + out + err
    assert f"binlog dump of {conn_id}" in logged
    assert_no_secret(json.dumps(result), json.dumps(again), logged, repr(hook))


def test_dump_stops_at_a_given_position_and_excludes_tables(mariadb, table, monkeypatch, tmp_path):
    conn_id = set_connection(monkeypatch, mariadb)
    hook = BinlogHook(conn_id)
    start = hook.current_position()
    mariadb.execute(f"INSERT INTO hookdb.{table} VALUES (1, 'a')")
    stop = hook.current_position()
    mariadb.execute(f"INSERT INTO hookdb.{table} VALUES (2, 'b')")
    sensed = {"target": stop.to_json(), "lag": {}}  # a sensor's XCom value
    result = hook.dump(staging=tmp_path, start=start.to_json(), stop=sensed)
    assert result["rows"][f"hookdb.{table}"]["insert"] == 1
    assert (result["end"]["file"], result["end"]["pos"]) == (stop.file, stop.position)
    rest = hook.dump(staging=tmp_path, start=f"{stop.file}:{stop.position}",
                     exclude=[f"hookdb.{table}"])
    assert f"hookdb.{table}" not in rest["rows"]


def test_a_dump_from_the_store_reads_it_once_for_the_checkpoint_and_its_schema_history(
        mariadb, table, monkeypatch, tmp_path):
    from airflow_provider_binlog.checkpoints.file_store import FileCheckpointStore

    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    hook = BinlogHook(conn_id)
    first = hook.dump(staging=tmp_path / "s1", start=hook.current_position(), tables=[f"hookdb.{table}"])
    history = load_manifest(first["manifest"]).schema_history_json
    hook.checkpoint_store().save(conn_id, Checkpoint.from_json(first["end"]), schema_history=history)
    mariadb.execute(f"INSERT INTO hookdb.{table} VALUES (1, 'a')")

    reads = []
    for name in ("load", "load_schema_history"):
        real = getattr(FileCheckpointStore, name)
        monkeypatch.setattr(FileCheckpointStore, name,
                            lambda self, key, _real=real, _name=name: reads.append(_name) or _real(self, key))
    result = hook.dump(staging=tmp_path / "s2", tables=[f"hookdb.{table}"])
    assert reads == ["load_schema_history"]
    assert result["start"] == first["end"] and result["rows"][f"hookdb.{table}"]["insert"] == 1


def test_dump_without_a_stored_checkpoint_says_what_to_do(mariadb, monkeypatch, tmp_path):
    create_user(mariadb)
    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path)})
    with pytest.raises(BinlogConnectionError, match="no checkpoint for 'custom_key'.*snapshot"):
        BinlogHook(conn_id).dump(staging=tmp_path / "s", checkpoint_key="custom_key")


def test_dump_with_minimal_row_metadata_reads_information_schema(mariadb_factory, monkeypatch, tmp_path):
    server = mariadb_factory(binlog_row_metadata="MINIMAL")
    create_user(server)
    server.execute("CREATE DATABASE IF NOT EXISTS hookdb")
    server.execute("CREATE TABLE IF NOT EXISTS hookdb.minimal (id INT PRIMARY KEY, color ENUM('red','green'))")
    conn_id = set_connection(monkeypatch, server)
    hook = BinlogHook(conn_id)
    start = hook.current_position()
    server.execute("INSERT INTO hookdb.minimal VALUES (1, 'green') ON DUPLICATE KEY UPDATE color = 'green'")
    result = hook.dump(staging=tmp_path, start=start, tables=["hookdb.minimal"])
    manifest = load_manifest(result["manifest"])
    (entry,) = manifest.tables
    (row,) = read_parquet(manifest.files(entry)[0]).to_pylist()
    assert row["_after"]["id"] == 1 and row["_after"]["color"] == "green"


def test_snapshot_is_staged_like_a_dump_at_the_servers_position(mariadb, table, monkeypatch, tmp_path,
                                                                  caplog, capfd):
    caplog.set_level(logging.DEBUG)
    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path / "cp")})
    mariadb.execute(f"INSERT INTO hookdb.{table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    hook = BinlogHook(conn_id)
    result = hook.snapshot(tmp_path / "staging", tables=[f"hookdb.{table}", "hookdb.none_*"])
    file, pos = mariadb.master_status()
    assert result["mode"] == "snapshot" and result["start"] == result["end"]
    assert (result["end"]["file"], result["end"]["pos"]) == (file, pos)
    assert result["rows"] == {f"hookdb.{table}": {"insert": 3, "update": 0, "delete": 0}}
    manifest = load_manifest(result["manifest"])
    assert manifest.dump_id == result["dump_id"] and manifest.is_snapshot
    (entry,) = manifest.tables
    rows = read_parquet(manifest.files(entry)[0]).to_pylist()
    assert sorted(r["_after"]["name"] for r in rows) == ["a", "b", "c"]
    # the snapshot does not move the stored checkpoint; a dump from its end finds nothing
    with pytest.raises(BinlogConnectionError, match="no checkpoint"):
        hook.stored_checkpoint()
    again = hook.dump(staging=tmp_path / "staging", start=result["end"], tables=[f"hookdb.{table}"])
    assert again["rows"] == {}
    out, err = capfd.readouterr()
    assert_no_secret(json.dumps(result), caplog.text + out + err)


def test_wrong_password_fails_without_showing_it(mariadb, monkeypatch, caplog, capfd):
    create_user(mariadb)
    wrong = SECRET + "-wrong"
    conn_id = set_connection(monkeypatch, mariadb, password=wrong)
    hook = BinlogHook(conn_id)
    with pytest.raises(BinlogAccessDeniedError) as info:
        hook.current_position()
    assert USER in str(info.value)
    ok, message = hook.test_connection()
    assert not ok and "access denied" in message
    for text in (str(info.value), message, caplog.text, *capfd.readouterr()):
        assert wrong not in text and SECRET not in text
