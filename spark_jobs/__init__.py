"""Spark jobs of airflow-provider-binlog, run with ``spark-submit`` (or embedded, locally).

They depend on the staging contract (:mod:`airflow_provider_binlog.staging.contract` and
``.manifest``), the checkpoint store and the Spark runtime helpers, and on nothing else of the
provider.
"""
