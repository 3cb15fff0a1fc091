"""The Spark side of the merge job (these modules import pyspark; the planning modules of
:mod:`airflow_provider_binlog.merge` do not)."""
