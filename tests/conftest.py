"""Shared fixtures.

``mariadb_factory`` starts private MariaDB servers (see
``airflow_provider_binlog/local/mariadb.py``), one per distinct set of options for the whole
session; ``mariadb`` is the default one.  Tests that use either fixture get
the ``mariadb`` marker, so ``-m "not mariadb"`` deselects them.

``spark`` is one local SparkSession with an Iceberg catalog ``lake`` for the
whole session; tests using it get the ``spark`` marker.

Without the MariaDB server binaries (or pyspark, the Iceberg runtime and a
Java 17 for ``spark``) these tests are skipped, except when the environment
variable CI is set to a true value: there they fail.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any, Callable, Iterator

import pytest

# Airflow, which the provider's tests import, keeps its configuration, logs and
# database under AIRFLOW_HOME: a private directory for each test run, set
# before any test module imports it.
_airflow_home = tempfile.mkdtemp(prefix="airflow-home-")
atexit.register(shutil.rmtree, _airflow_home, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = _airflow_home
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"

from airflow_provider_binlog.local.mariadb import MariaDBServer
from airflow_provider_binlog.local.mariadb_command import mariadb_binaries, normalize_options

#: The configuration of the ``mariadb`` fixture; ``mariadb_factory(**opts)``
#: applies ``opts`` on top of it.
DEFAULT_OPTIONS: dict[str, str] = {
    "binlog_checksum": "CRC32",
    "binlog_row_metadata": "FULL",
    "binlog_row_image": "FULL",
}

_MARIADB_FIXTURES = {"mariadb", "mariadb_factory"}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def pytest_unconfigure(config: pytest.Config) -> None:
    """Airflow's logging setup gives the root logger a handler on the stdout of the moment,
    pytest's capture, which is closed at exit: drop it, for libraries that log while the
    interpreter exits (py4j)."""
    import logging
    import sys

    root = logging.getLogger()
    for handler in list(root.handlers):
        stream = getattr(handler, "stream", None)
        if type(handler) is logging.StreamHandler and stream not in (None, sys.__stdout__, sys.__stderr__):
            root.removeHandler(handler)


DEPLOYMENT_SKIP = ("a real Airflow deployment (10 to 20 minutes): run it with BINLOG_DEPLOYMENT_TESTS=1 "
                   ".venv/bin/python -m pytest tests/e2e/test_deployment.py")


LONG_SKIP = ("a long end-to-end run (the wheel, the cluster topology, failover and layout DAGs; figures in "
             "CONTRIBUTING.md, section Markers and switches): run it with BINLOG_LONG_TESTS=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deployment = os.environ.get("BINLOG_DEPLOYMENT_TESTS", "").strip() == "1"
    long_runs = os.environ.get("BINLOG_LONG_TESTS", "").strip() == "1"
    for item in items:
        if not deployment and item.get_closest_marker("deployment"):
            item.add_marker(pytest.mark.skip(reason=DEPLOYMENT_SKIP))
        if not long_runs and item.get_closest_marker("long"):
            item.add_marker(pytest.mark.skip(reason=LONG_SKIP))
        if _MARIADB_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mariadb)
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


def _require_mariadb() -> None:
    mariadbd, install_db = mariadb_binaries()
    if mariadbd and install_db:
        return
    missing = [n for n, p in (("mariadbd", mariadbd), ("mariadb-install-db", install_db)) if not p]
    reason = f"MariaDB server binaries not found: {', '.join(missing)} (Debian package mariadb-server)"
    if _in_ci():
        pytest.fail(f"{reason}; CI must install them (.ci/run does)", pytrace=False)
    pytest.skip(reason)


MariaDBFactory = Callable[..., MariaDBServer]


@pytest.fixture(scope="session")
def mariadb_factory() -> Iterator[MariaDBFactory]:
    """``get(**options) -> MariaDBServer``: a running server with
    ``DEFAULT_OPTIONS`` updated by ``options``; the same server for the same
    options during the whole session.  Tests sharing a server must not
    depend on its binlog holding only their own events: record
    ``master_status()`` first, or ``flush_binary_logs()``."""
    _require_mariadb()
    servers: dict[frozenset, MariaDBServer] = {}

    def get(**options: Any) -> MariaDBServer:
        merged = normalize_options({**DEFAULT_OPTIONS, **normalize_options(options)})
        key = frozenset(merged.items())
        srv = servers.get(key)
        if srv is None or not srv.running:
            if srv is not None:
                srv.stop()
            srv = servers[key] = MariaDBServer(merged)
        return srv

    try:
        yield get
    finally:
        for srv in servers.values():
            srv.stop()


@pytest.fixture(scope="session")
def mariadb(mariadb_factory: MariaDBFactory) -> MariaDBServer:
    """The default server: ROW binlog, CRC32 checksums, full row image and
    full row metadata."""
    return mariadb_factory()


def _require_spark() -> None:
    """Skip (fail in CI) unless pyspark, the Iceberg runtime jar and a Java 17
    are there."""
    from airflow_provider_binlog.spark import SparkRuntimeError, find_java17_home, iceberg_runtime_jars

    try:
        import pyspark  # noqa: F401

        find_java17_home()
        iceberg_runtime_jars()
    except (ImportError, SparkRuntimeError) as exc:
        reason = f"embedded Spark runtime unavailable: {exc}"
        if _in_ci():
            pytest.fail(f"{reason}; CI must install it (.ci/run does)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The warehouse directory of the ``spark`` fixture's catalog ``lake``."""
    return str(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(scope="session")
def spark(spark_warehouse: str) -> Iterator[Any]:
    """One local SparkSession for the whole test run, with the Iceberg
    Hadoop catalog ``lake`` over ``spark_warehouse``.  Tests sharing it use
    their own namespace or table names."""
    _require_spark()
    from airflow_provider_binlog.spark import local_spark_session

    from airflow_provider_binlog.spark import iceberg_runtime_jars
    from airflow_provider_binlog.spark.catalogs import POSTGRESQL_JDBC_JAR

    # with PostgreSQL's JDBC driver, for the tests that read an Iceberg JDBC catalog
    jars = [*iceberg_runtime_jars(), *([POSTGRESQL_JDBC_JAR] if os.path.exists(POSTGRESQL_JDBC_JAR) else [])]
    session = local_spark_session(spark_warehouse, "lake", app_name="airflow-provider-binlog-tests", jars=jars)
    try:
        yield session
    finally:
        session.stop()
