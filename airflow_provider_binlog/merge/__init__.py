"""The merge job: staged batches applied to Iceberg exactly once.

The planning modules here never import pyspark and are tested without it: batches in
checkpoint order (:mod:`.batches`), what schema statements ask of each table
(:mod:`.ddl_plan`), keys linked by primary-key changes (:mod:`.key_chains`), Spark SQL text
(:mod:`.sql`), what the job writes into Iceberg besides rows (:mod:`.iceberg_contract`), the
merge's options (:mod:`.options`, ``MergeOptions``) and the job's errors (:mod:`.errors`).
The Spark side is :mod:`.spark`; ``merge/submit/merge_cdc.py``
is the entry point ``spark-submit`` runs (``spark_jobs/merge_cdc.py`` the same, in a checkout)."""
