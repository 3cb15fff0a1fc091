"""BinlogHook: settings from an Airflow connection, and bounded dumps of a live MariaDB."""
from __future__ import annotations

import json
import logging

import pyarrow.parquet as pq
import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoint import Checkpoint  # noqa: E402
from airflow_provider_binlog.hooks.binlog import BinlogConnectionError, BinlogHook, as_checkpoint  # noqa: E402
from airflow_provider_binlog.replica import BinlogAccessDeniedError  # noqa: E402
from airflow_provider_binlog.staging import load_manifest  # noqa: E402
from tests.airflow_conn import SECRET, USER, create_user, set_connection  # noqa: E402


@pytest.fixture()
def table(mariadb, request):
    create_user(mariadb)
    name = "t_" + request.node.name.split("[")[0][5:40]
    mariadb.execute("CREATE DATABASE IF NOT EXISTS hookdb")
    mariadb.execute(f"DROP TABLE IF EXISTS hookdb.{name}")
    mariadb.execute(f"CREATE TABLE hookdb.{name} (id INT PRIMARY KEY, name VARCHAR(20))")
    return name


def assert_no_secret(*texts):
    for text in texts:
        assert SECRET not in text


# ---------------------------------------------------------------------- settings

def test_connection_fields_and_extras_become_replica_settings(monkeypatch):
    conn_id = set_connection(monkeypatch, host="db.example", login="repl", password=SECRET,
                             extra={"server_id": "4321", "flavor": "MariaDB", "heartbeat_seconds": "5",
                                    "connect_timeout": 3, "ssl_ca": "/etc/ca.pem",
                                    "ssl_cert": "/etc/c.pem", "ssl_key": "/etc/k.pem"})
    hook = BinlogHook(conn_id)
    kwargs = hook.replica_kwargs()
    assert kwargs == {"host": "db.example", "port": 3306, "user": "repl", "password": SECRET,
                      "server_id": 4321, "flavor": "mariadb", "heartbeat_seconds": 5.0, "connect_timeout": 3,
                      "ssl": {"ca": "/etc/ca.pem", "cert": "/etc/c.pem", "key": "/etc/k.pem",
                              "verify_mode": True, "check_hostname": True}}
    replica = hook.get_replica()
    assert (replica.host, replica.port, replica.server_id, replica.requested_flavor) == \
        ("db.example", 3306, 4321, "mariadb")
    assert replica.connect_kwargs["ssl"]["ca"] == "/etc/ca.pem"
    assert_no_secret(repr(replica), repr(hook))


def test_tls_without_verification_and_plain_connections(monkeypatch):
    unverified = set_connection(monkeypatch, host="h", port=3307, extra={"ssl": True, "ssl_verify": "false"})
    assert BinlogHook(unverified).replica_kwargs()["ssl"] == {"verify_mode": False, "check_hostname": False}
    system_cas = set_connection(monkeypatch, host="h", extra={"ssl": "true"})
    assert BinlogHook(system_cas).replica_kwargs()["ssl"] == {"verify_mode": True, "check_hostname": True}
    plain = set_connection(monkeypatch, host="h")
    kwargs = BinlogHook(plain).replica_kwargs()
    assert "ssl" not in kwargs and kwargs["flavor"] == "auto" and kwargs["heartbeat_seconds"] == 30.0
    # what the connection form saves for untouched fields: defaults and nulls
    form = set_connection(monkeypatch, host="h", extra={
        "server_id": 9, "ssl": False, "ssl_ca": None, "ssl_cert": "", "ssl_key": None, "ssl_verify": True,
        "flavor": None, "checkpoint_store_uri": None, "heartbeat_seconds": None, "connect_timeout": None})
    kwargs = BinlogHook(form).replica_kwargs()
    assert kwargs == {"host": "h", "port": 3306, "user": "", "password": "", "server_id": 9, "flavor": "auto",
                      "heartbeat_seconds": 30.0}


@pytest.mark.parametrize("given", [
    {"file": "mariadb-bin.000003", "pos": 120},
    '{"file": "mariadb-bin.000003", "pos": 120}',
    "{'target': {'file': 'mariadb-bin.000003', 'pos': 120, 'gtid': None}, 'lag': {'bytes': 5}}",
    {"target": {"file": "mariadb-bin.000003", "pos": 120}, "lag": {}},
    "mariadb-bin.000003:120",
])
def test_checkpoints_are_read_from_dicts_xcom_values_and_text(given):
    assert as_checkpoint(given) == Checkpoint(file="mariadb-bin.000003", position=120)


@pytest.mark.parametrize("extra, message", [
    ({"server_id": None}, "needs the extra 'server_id'"),
    ({"server_id": "x"}, "'server_id' must be an integer"),
    ({"server_id": 0}, "'server_id' must be an integer >= 1"),
    ({"flavor": "oracle"}, "'flavor' must be one of auto, mysql, mariadb"),
    ({"ssl": 1, "ssl_verify": "maybe"}, "'ssl_verify' must be true or false"),
    ({"ssl": "sometimes"}, "'ssl' must be true or false"),
    ({"heartbeat_seconds": "-1"}, "'heartbeat_seconds' must be a number >= 0"),
    ({"ssl_key": "/k.pem"}, "'ssl_key' needs 'ssl_cert'"),
])
def test_invalid_connection_extras_are_refused_without_showing_secrets(monkeypatch, extra, message):
    conn_id = set_connection(monkeypatch, host="h", password=SECRET, extra=extra)
    with pytest.raises(BinlogConnectionError, match=message) as info:
        BinlogHook(conn_id).replica_kwargs()
    assert_no_secret(str(info.value))


def test_checkpoint_store_comes_from_the_connection(monkeypatch, tmp_path):
    conn_id = set_connection(monkeypatch, host="h", extra={"checkpoint_store_uri": f"file://{tmp_path}/cp"})
    hook = BinlogHook(conn_id)
    hook.checkpoint_store().save(conn_id, Checkpoint(file="mariadb-bin.000002", position=400))
    assert hook.stored_checkpoint() == Checkpoint(file="mariadb-bin.000002", position=400)
    with pytest.raises(BinlogConnectionError, match="no checkpoint for 'other'"):
        hook.stored_checkpoint("other")
    bare = set_connection(monkeypatch, host="h")
    with pytest.raises(BinlogConnectionError, match="no extra 'checkpoint_store_uri'"):
        BinlogHook(bare).checkpoint_store()


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

    result = hook.dump(staging_dir=tmp_path / "staging", tables=["hookdb.t_*"])
    assert result["start"] == start.to_json()
    file, pos = mariadb.master_status()
    assert (result["end"]["file"], result["end"]["pos"]) == (file, pos)
    assert result["transactions"] >= 3
    counts = result["rows"][f"hookdb.{table}"]
    assert (counts["insert"], counts["update"], counts["delete"]) == (3, 1, 1)
    assert "hookdb.other" not in result["rows"]
    manifest = load_manifest(result["manifest"])
    assert manifest.dump_id == result["dump_id"]
    assert manifest.end == result["end"]

    # the dump does not move the stored checkpoint; a second dump from its end finds nothing
    assert hook.stored_checkpoint() == start
    again = hook.dump(staging_dir=tmp_path / "staging", start=result["end"], tables=["hookdb.t_*"])
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
    result = hook.dump(staging_dir=tmp_path, start=start.to_json(), stop=sensed)
    assert result["rows"][f"hookdb.{table}"]["insert"] == 1
    assert (result["end"]["file"], result["end"]["pos"]) == (stop.file, stop.position)
    rest = hook.dump(staging_dir=tmp_path, start=f"{stop.file}:{stop.position}",
                     exclude=[f"hookdb.{table}"])
    assert f"hookdb.{table}" not in rest["rows"]


def test_dump_without_a_stored_checkpoint_says_what_to_do(mariadb, monkeypatch, tmp_path):
    create_user(mariadb)
    conn_id = set_connection(monkeypatch, mariadb, extra={"checkpoint_store_uri": str(tmp_path)})
    with pytest.raises(BinlogConnectionError, match="no checkpoint for 'custom_key'.*snapshot"):
        BinlogHook(conn_id).dump(staging_dir=tmp_path / "s", checkpoint_key="custom_key")


def test_dump_with_minimal_row_metadata_reads_information_schema(mariadb_factory, monkeypatch, tmp_path):
    server = mariadb_factory(binlog_row_metadata="MINIMAL")
    create_user(server)
    server.execute("CREATE DATABASE IF NOT EXISTS hookdb")
    server.execute("CREATE TABLE IF NOT EXISTS hookdb.minimal (id INT PRIMARY KEY, color ENUM('red','green'))")
    conn_id = set_connection(monkeypatch, server)
    hook = BinlogHook(conn_id)
    start = hook.current_position()
    server.execute("INSERT INTO hookdb.minimal VALUES (1, 'green') ON DUPLICATE KEY UPDATE color = 'green'")
    result = hook.dump(staging_dir=tmp_path, start=start, tables=["hookdb.minimal"])
    manifest = load_manifest(result["manifest"])
    (entry,) = manifest.tables
    (row,) = pq.read_table(manifest.files(entry)[0]).to_pylist()
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
    assert manifest.dump_id == result["dump_id"] and manifest.data["mode"] == "snapshot"
    (entry,) = manifest.tables
    rows = pq.read_table(manifest.files(entry)[0]).to_pylist()
    assert sorted(r["_after"]["name"] for r in rows) == ["a", "b", "c"]
    # the snapshot does not move the stored checkpoint; a dump from its end finds nothing
    with pytest.raises(BinlogConnectionError, match="no checkpoint"):
        hook.stored_checkpoint()
    again = hook.dump(staging_dir=tmp_path / "staging", start=result["end"], tables=[f"hookdb.{table}"])
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
