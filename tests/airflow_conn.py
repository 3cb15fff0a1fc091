"""Airflow connections of type ``mysql_binlog`` for the tests, given as environment variables
(``AIRFLOW_CONN_<ID>`` holding JSON), so that no Airflow metadata database is needed."""
from __future__ import annotations

import itertools
import json
from typing import Any, Optional

#: The password of the test user: the tests check it never shows up in logs, errors or results.
SECRET = "Hk-s3cret-9f2b7c41"
USER = "binlog_hook"

_ids = itertools.count(1)


def create_user(server) -> None:
    """A replication user with ``SECRET`` as password (created without binlogging it)."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_log_bin = 0")
            cur.execute(f"CREATE USER IF NOT EXISTS '{USER}'@'%%' IDENTIFIED BY %s", (SECRET,))
            cur.execute(f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{USER}'@'%'")
    finally:
        conn.close()


def set_connection(monkeypatch, server=None, *, conn_id: Optional[str] = None, extra: Optional[dict] = None,
                   **fields: Any) -> str:
    """Define a connection through ``AIRFLOW_CONN_<ID>``; return its id."""
    conn_id = conn_id or f"binlog_test_{next(_ids)}"
    doc: dict = {"conn_type": "mysql_binlog"}
    if server is not None:
        doc.update(host=server.host, port=server.port, login=USER, password=SECRET)
    doc.update(fields)
    doc["extra"] = {"server_id": 7301, **(extra or {})}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(doc))
    return conn_id
