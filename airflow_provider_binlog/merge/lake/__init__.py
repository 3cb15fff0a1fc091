"""The merge's engine-neutral layer: an Iceberg catalog through Iceberg's Java API (py4j),
whether the JVM is a bare one (:class:`.java.JavaLake`, the ``iceberg-java`` engine) or
Spark's (the ``spark`` engine's lake, made in ``merge/spark/lake.py``). Everything here works
the same on both: the tables' state and exactly-once gate, the plan of each table, the direct
commits, the ledger and the batch's order of commits. No module here imports pyspark.

- ``base.py``: :class:`Lake`, a catalog's tables (load, create, namespaces, properties).
- ``java.py``, ``java_settings.py``: the bare JVM and how Spark's settings become its class
  path and catalog properties.
- ``state.py``: what a table records of the binlog (:class:`AppliedState`).
- ``table_work.py``: one table's plan of a batch (:class:`TableWork`, :func:`prepare_table`).
- ``direct_commit.py``, ``direct_snapshot.py``, ``row_locator.py``: direct commits.
- ``conflicts.py``: commits that land only on the head their batch was planned on.
- ``ledger.py``: the ledger table.
- ``batch.py``: a batch applied exactly once (:func:`apply_manifests`).
"""
