"""airflow-provider-binlog: load MySQL/MariaDB binlog changes into Apache Iceberg."""

__version__ = "0.2.0.dev0"
