"""Tooling to run the whole load on one machine; not needed in production.

* :mod:`.mariadb`: :class:`~airflow_provider_binlog.local.mariadb.MariaDBServer`, a private,
  throw-away ``mariadbd`` (its own data directory, port and binlog) for the tests, the
  benchmarks and the quickstart, with :mod:`.mariadb_command` (its executables and options);
* :mod:`.watchdog`: the process that stops such a server and removes its directory when the
  Python process that started it dies without stopping it;
* :mod:`.quickstart`: ``python -m airflow_provider_binlog quickstart``, the load end to end
  on a private MariaDB, a local Spark and an Iceberg warehouse on disk, with the DAG file
  :mod:`.quickstart_dag` when the source checkout's ``dags/binlog_cdc.py`` is not there.

A deployment uses the provider's hooks, operators and DAG factory against its own servers
and Spark; nothing here is imported by them.  This package's ``__init__`` imports nothing,
so the watchdog starts fast.
"""
