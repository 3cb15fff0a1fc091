"""BinlogHook: settings from an Airflow connection, without a server (the dumps and snapshots of a
live MariaDB: ``tests/integration/test_binlog_hook_live.py``)."""
from __future__ import annotations

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
from airflow_provider_binlog.hooks.binlog import BinlogConnectionError, BinlogHook, as_checkpoint  # noqa: E402
from tests.airflow_conn import SECRET, set_connection  # noqa: E402


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
