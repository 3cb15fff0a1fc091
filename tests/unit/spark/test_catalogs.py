"""Iceberg catalog settings: what each catalog type needs, the Spark settings they give, and
secrets kept apart from them."""
from __future__ import annotations

import json

import pytest

from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.spark.catalogs import (
    SECRET_CONF_ENV,
    CatalogConfigError,
    IcebergCatalog,
    catalog_from_settings,
    is_secret_property,
    secret_conf_from_env,
)
from airflow_provider_binlog.spark.runtime import catalog_spark_conf, spark_conf_for

PG = "jdbc:postgresql://127.0.0.1:5433/iceberg"


def test_jdbc_catalog_gives_its_settings_and_keeps_the_password_out_of_them():
    catalog = IcebergCatalog("lake", "jdbc", uri=PG, warehouse="/data/wh",
                             properties={"jdbc.user": "iceberg", "jdbc.password": "s3cret"})
    assert catalog.spark_conf() == {
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.lake.type": "jdbc",
        "spark.sql.catalog.lake.uri": PG,
        "spark.sql.catalog.lake.warehouse": "/data/wh",
        "spark.sql.catalog.lake.jdbc.user": "iceberg",
    }
    assert catalog.secret_conf() == {"spark.sql.catalog.lake.jdbc.password": "s3cret"}
    assert "s3cret" not in catalog.describe()


def test_catalog_spark_conf_adds_the_catalogs_driver_jar_to_the_iceberg_runtime():
    catalog = IcebergCatalog("lake", "jdbc", uri=PG, warehouse="/wh", jars=("/usr/share/java/postgresql.jar",))
    conf = catalog_spark_conf(catalog, jars=["/opt/iceberg.jar"])
    assert conf["spark.jars"] == "/opt/iceberg.jar,/usr/share/java/postgresql.jar"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    # Spark's UI and event log redact the catalog's secrets too (a static setting: at start only)
    assert conf["spark.redaction.regex"] == "(?i)secret|password|token|access[.]key|credential|authorization"
    assert conf["spark.sql.extensions"].endswith("IcebergSparkSessionExtensions")
    packaged = catalog_spark_conf(catalog, packages="g:a:1")
    assert packaged["spark.jars.packages"] == "g:a:1"
    assert packaged["spark.jars"] == "/usr/share/java/postgresql.jar"


def test_the_embedded_hadoop_catalog_is_the_same_as_before():
    conf = spark_conf_for("/data/wh", "lake", jars=[])
    assert conf.pop("spark.redaction.regex").startswith("(?i)secret|password")
    assert conf == {"spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                    "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
                    "spark.sql.catalog.lake.type": "hadoop", "spark.sql.catalog.lake.warehouse": "/data/wh",
                    "spark.sql.session.timeZone": "UTC"}
    assert IcebergCatalog("lake", "hadoop", warehouse="/data/wh").embedded
    assert not IcebergCatalog("lake", "hadoop", warehouse="s3a://b/wh").embedded


@pytest.mark.parametrize("kwargs, message", [
    ({"type": "jdbc", "warehouse": "/wh"}, "needs a uri"),
    ({"type": "jdbc", "uri": "postgresql://h/db", "warehouse": "/wh"}, "starts with jdbc:"),
    ({"type": "jdbc", "uri": PG}, "needs a warehouse"),
    ({"type": "rest", "uri": "thrift://h:9083"}, "starts with http:// or https://"),
    ({"type": "hive", "uri": "http://h"}, "starts with thrift://"),
    ({"type": "hadoop", "uri": "http://h", "warehouse": "/wh"}, "has no uri"),
    ({"type": "unity"}, "unknown type 'unity'"),
    ({"type": None}, "catalog-impl"),
    ({"type": "rest", "uri": "http://h", "properties": {"catalog-impl": "x.Y"}}, "exclude each other"),
    ({"type": "rest", "uri": "http://h", "properties": {"uri": "http://other"}}, "as its own setting"),
    ({"type": "jdbc", "uri": PG + "?password=x", "warehouse": "/wh"}, "not in the uri"),
    ({"name": "lake;drop", "type": "hadoop", "warehouse": "/wh"}, "identifier"),
])
def test_incomplete_or_contradicting_settings_are_refused_with_what_to_give(kwargs, message):
    with pytest.raises(CatalogConfigError, match=message) as err:
        IcebergCatalog(**kwargs)
    assert isinstance(err.value, ProviderError) and isinstance(err.value, ValueError)


def test_a_catalog_impl_without_type_is_accepted():
    catalog = IcebergCatalog("c", None, warehouse="s3://b", properties={"catalog-impl": "org.x.MyCatalog"})
    assert catalog.spark_conf()["spark.sql.catalog.c.catalog-impl"] == "org.x.MyCatalog"
    assert "spark.sql.catalog.c.type" not in catalog.spark_conf()


def test_connection_fields_make_a_jdbc_catalog_on_postgresql():
    catalog = catalog_from_settings("lake", {"type": "jdbc", "warehouse": "/wh", "jars": "/a.jar,/b.jar"},
                                    login="iceberg", password="pw", host="pg", port=5433, schema="cat")
    assert catalog.uri == "jdbc:postgresql://pg:5433/cat"
    assert catalog.properties == {"jdbc.user": "iceberg", "jdbc.password": "pw"}
    assert catalog.jars == ("/a.jar", "/b.jar")
    rest = catalog_from_settings("lake", {"type": "rest", "uri": "https://cat", "properties": {"token": "t"}})
    assert rest.secret_conf() == {"spark.sql.catalog.lake.token": "t"}
    with pytest.raises(CatalogConfigError, match="unknown setting.*wharehouse"):
        catalog_from_settings("lake", {"type": "jdbc", "wharehouse": "/wh"})


@pytest.mark.parametrize("name, secret", [("jdbc.password", True), ("token", True), ("credential", True),
                                          ("header.Authorization", True),
                                          ("s3.secret-access-key", True), ("jdbc.user", False),
                                          ("warehouse", False), ("io-impl", False)])
def test_secret_properties_are_told_by_their_name(name, secret):
    assert is_secret_property(name) is secret


def test_secret_settings_come_back_from_the_environment_and_bad_ones_are_refused():
    conf = {"spark.sql.catalog.lake.jdbc.password": "pw"}
    assert secret_conf_from_env({SECRET_CONF_ENV: json.dumps(conf)}) == conf
    assert secret_conf_from_env({}) == {}
    with pytest.raises(CatalogConfigError, match="not JSON"):
        secret_conf_from_env({SECRET_CONF_ENV: "{"})
    with pytest.raises(CatalogConfigError, match="object of text"):
        secret_conf_from_env({SECRET_CONF_ENV: "[1]"})
