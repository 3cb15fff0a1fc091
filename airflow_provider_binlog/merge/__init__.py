"""The merge job's planning, apart from Spark: batches in checkpoint order (:mod:`.batches`),
what schema statements ask of each table (:mod:`.ddl_plan`), keys linked by primary-key
changes (:mod:`.key_chains`), Spark SQL text (:mod:`.sql`) and the job's errors
(:mod:`.errors`). None of these modules imports pyspark; the Spark side is
``spark_jobs/merge_cdc.py``."""
