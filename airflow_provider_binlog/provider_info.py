"""What Airflow's ProvidersManager reads about this provider (entry point
``apache_airflow_provider``). Imports no Airflow code."""
from __future__ import annotations

from . import __version__
from .utils.settings import provider_config

INTEGRATION = "MySQL/MariaDB binlog"

_CONN_FIELDS = {
    "server_id": {
        "label": "Replica server id",
        "description": "Required. The server id this load registers with as a replica: distinct from "
                       "the server's own and from those of all its other replicas.",
        "schema": {"type": ["integer", "null"], "minimum": 1, "maximum": 4294967295},
    },
    "ssl": {
        "label": "Use TLS",
        "description": "Encrypt the connection (also on when a TLS file is given).",
        "schema": {"type": ["boolean", "null"], "default": False},
    },
    "ssl_ca": {
        "label": "TLS CA file",
        "description": "Path of the PEM CA certificate to verify the server with.",
        "schema": {"type": ["string", "null"]},
    },
    "ssl_cert": {
        "label": "TLS client certificate file",
        "description": "Path of a PEM client certificate (with ssl_key).",
        "schema": {"type": ["string", "null"]},
    },
    "ssl_key": {
        "label": "TLS client key file",
        "description": "Path of the PEM private key of the client certificate.",
        "schema": {"type": ["string", "null"]},
    },
    "ssl_verify": {
        "label": "Verify the server certificate",
        "description": "Check the server's certificate and host name (default true when TLS is on).",
        "schema": {"type": ["boolean", "null"], "default": True},
    },
    "flavor": {
        "label": "Server flavor",
        "description": "auto detects MySQL or MariaDB from the server version.",
        "schema": {"type": ["string", "null"], "enum": ["auto", "mysql", "mariadb", None], "default": "auto"},
    },
    "checkpoint_store_uri": {
        "label": "Checkpoint store",
        "description": "Where loads keep their binlog checkpoint: a directory path or file:///path.",
        "schema": {"type": ["string", "null"]},
    },
    "heartbeat_seconds": {
        "label": "Heartbeat (seconds)",
        "description": "Heartbeat period the server uses on an idle replication stream.",
        "schema": {"type": ["number", "null"], "minimum": 0, "default": 30},
    },
    "connect_timeout": {
        "label": "Connect timeout (seconds)",
        "description": "Seconds to wait for the server to accept the connection.",
        "schema": {"type": ["integer", "null"], "minimum": 1, "default": 10},
    },
}


_CATALOG_FIELDS = {
    "type": {
        "label": "Catalog type",
        "description": "jdbc (host, port, schema, login and password name the database), rest, hive, "
                       "glue, nessie or hadoop.",
        "schema": {"type": ["string", "null"], "enum": ["jdbc", "rest", "hive", "glue", "nessie", "hadoop",
                                                        None], "default": "jdbc"},
    },
    "uri": {
        "label": "Catalog URI",
        "description": "jdbc:postgresql://..., http(s)://... (rest, nessie) or thrift://... (hive); a JDBC "
                       "catalog may leave it empty and give host, port and schema.",
        "schema": {"type": ["string", "null"]},
    },
    "warehouse": {
        "label": "Warehouse",
        "description": "Where the tables' files go: a path every Spark executor reaches, or s3a://, "
                       "hdfs://...",
        "schema": {"type": ["string", "null"]},
    },
    "jars": {
        "label": "Extra jars",
        "description": "Comma-separated jars the catalog needs (a JDBC driver); PostgreSQL's is found "
                       "at /usr/share/java/postgresql.jar when unset.",
        "schema": {"type": ["string", "null"]},
    },
}


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-provider-binlog",
        "name": "MySQL/MariaDB binlog to Apache Iceberg",
        "description": "Loads MySQL and MariaDB binlog row changes into Apache Iceberg tables: "
                       "a pure-Python binlog reader, bounded dumps to Parquet staging and a Spark "
                       "MERGE.",
        "versions": [__version__],
        "config": provider_config(),
        "asset-uris": [
            {"schemes": ["iceberg"], "handler": "airflow_provider_binlog.utils.assets.sanitize_uri",
             "factory": "airflow_provider_binlog.utils.assets.create_asset",
             "to_openlineage_converter": "airflow_provider_binlog.utils.assets.convert_asset_to_openlineage"},
            {"schemes": ["binlog"], "handler": "airflow_provider_binlog.utils.assets.sanitize_source_uri"},
        ],
        "extra-links": ["airflow_provider_binlog.operators.links.BinlogCdcViewLink",
                        "airflow_provider_binlog.operators.links.SparkApplicationLink"],
        "integrations": [
            {"integration-name": INTEGRATION, "tags": ["software"]},
        ],
        "hooks": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_binlog.hooks.binlog",
                                                             "airflow_provider_binlog.hooks.iceberg_catalog"]},
        ],
        "operators": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_binlog.operators.dump",
                                                             "airflow_provider_binlog.operators.merge",
                                                             "airflow_provider_binlog.operators.retention",
                                                             "airflow_provider_binlog.operators.snapshot"]},
        ],
        "sensors": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_binlog.sensors.position"]},
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_provider_binlog.triggers.position",
                                                             "airflow_provider_binlog.triggers.new_data"]},
        ],
        "connection-types": [
            {
                "connection-type": "mysql_binlog",
                "hook-class-name": "airflow_provider_binlog.hooks.binlog.BinlogHook",
                "hook-name": "MySQL/MariaDB binlog",
                "conn-fields": _CONN_FIELDS,
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "extra"],
                    "relabeling": {"login": "User"},
                    "placeholders": {"host": "db.example.com", "port": "3306", "login": "replication user"},
                },
            },
            {
                "connection-type": "iceberg_catalog",
                "hook-class-name": "airflow_provider_binlog.hooks.iceberg_catalog.IcebergCatalogHook",
                "hook-name": "Apache Iceberg catalog",
                "conn-fields": _CATALOG_FIELDS,
                "ui-field-behaviour": {
                    "relabeling": {"schema": "Database", "login": "User"},
                    "placeholders": {"host": "catalog database host (jdbc)", "port": "5432",
                                     "schema": "iceberg"},
                },
            },
        ],
    }
