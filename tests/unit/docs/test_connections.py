"""The connections the pages give as ``AIRFLOW_CONN_<ID>='{...}'`` are JSON Airflow reads, of a
connection type that exists, with extras the provider knows: a ``mysql_binlog`` connection's
extras are its form's fields, an ``iceberg_catalog`` connection makes a catalog."""
from __future__ import annotations

import json
import re

import pytest

from airflow_provider_binlog.provider_info import get_provider_info
from airflow_provider_binlog.spark.catalogs import catalog_from_settings
from tests.unit.docs.pages import manual, name, parse

_CONNECTION = re.compile(r"AIRFLOW_CONN_([A-Z0-9_]+)='(\{.*?\})'", re.S)
#: Types of other providers the pages use (the Spark provider is a dependency).
OTHER_TYPES = {"spark", "aws", "google_cloud_platform", "wasb"}


def connections() -> list[tuple[str, str, dict]]:
    found = []
    for page in manual():
        text = parse(page).text
        for match in _CONNECTION.finditer(text):
            where = f"{name(page)}:{text.count(chr(10), 0, match.start()) + 1}"
            found.append((where, match.group(1), json.loads(match.group(2))))
    return found


def binlog_fields() -> set[str]:
    info = get_provider_info()
    return set(next(c for c in info["connection-types"] if c["connection-type"] == "mysql_binlog")["conn-fields"])


def test_the_pages_give_connections_of_each_type():
    types = {conn["conn_type"] for _, _, conn in connections()}
    assert {"mysql_binlog", "iceberg_catalog", "spark"} <= types
    assert "README.md" in {where.split(":")[0] for where, _, _ in connections()}


@pytest.mark.parametrize("where, conn_id, conn", connections(), ids=[w for w, _, _ in connections()])
def test_every_connection_given_is_one_the_provider_reads(where, conn_id, conn):
    registered = {c["connection-type"] for c in get_provider_info()["connection-types"]}
    assert conn["conn_type"] in registered | OTHER_TYPES
    extra = conn.get("extra") or {}
    if conn["conn_type"] == "mysql_binlog":
        assert set(extra) <= binlog_fields() and "server_id" in extra
    elif conn["conn_type"] == "iceberg_catalog":
        catalog_from_settings("lake", extra, login=conn.get("login"), password=conn.get("password"),
                              host=conn.get("host"), port=conn.get("port"), schema=conn.get("schema"))
