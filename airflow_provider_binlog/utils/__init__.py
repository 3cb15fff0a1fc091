"""The provider's uses of Airflow itself, shared by hooks, operators, triggers, DAGs and the UI:
the ``[binlog]`` configuration section (:mod:`.settings`), metrics through Airflow's ``Stats``
(:mod:`.metrics`), OpenLineage datasets (:mod:`.lineage`) and the ``iceberg://`` and
``binlog://`` asset URIs (:mod:`.assets`)."""
