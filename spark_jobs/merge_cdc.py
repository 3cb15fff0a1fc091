"""Apply staged binlog changes to Apache Iceberg tables with Spark ``MERGE INTO``, exactly once.

Input: the manifests of bounded dumps (see ``airflow_provider_binlog/staging/contract.py``).
Each manifest is one *batch*; batches are applied in checkpoint order, and consecutive batches
must be contiguous (the end of one is the start of the next).

Run it with ``spark-submit`` (the Iceberg catalog comes from the Spark configuration)::

    spark-submit spark_jobs/merge_cdc.py --manifest /staging/<dump_id> \\
        --options '{"catalog": "lake", "namespace": "shop_cdc",
                    "checkpoint_store": "/var/lib/cdc", "checkpoint_key": "shop"}'

or embedded, with a local Spark and a Hadoop catalog over the option ``warehouse``::

    .venv/bin/python spark_jobs/merge_cdc.py --manifest ... \\
        --options '{"namespace": "shop_cdc", "warehouse": "/data/warehouse"}'

``--options`` is the JSON of :class:`airflow_provider_binlog.merge.options.MergeOptions`.

Semantics, per source table ``<schema>.<table>`` and batch:

- Target: ``<catalog>.<namespace>.<schema>__<table>`` (see ``airflow_provider_binlog.common.tables``).
- Changes are ordered by ``(_binlog_seq, _binlog_pos, _row)``, never by time, and collapsed
  to the final state of each primary key. An update that changes the primary key deletes the
  old key and writes the new one. Deletes delete, inserts and updates upsert; columns missing
  from a MINIMAL/NOBLOB after image keep the value the row had.
- The manifest's ``ddl`` records say what each schema statement does to the captured tables
  (``ops``, written by the dump from its schema history). TRUNCATE TABLE / DROP TABLE / CREATE
  OR REPLACE empty the table at their position: the changes after the last one replace the
  table's content. A captured table renamed to a name that is not captured is emptied the
  same way; a rename that gives a captured table rows that are not in the binlog fails the
  batch before anything is committed (load that table from a new snapshot). An online schema
  change cut-over (a shadow created LIKE the table swapped in by RENAME) is a change of the
  table's columns.
- Schema changes seen in the staged files (added or dropped columns, type widening) are
  applied with ``ALTER TABLE`` before the MERGE. A change Iceberg cannot express fails the
  batch before anything is committed. A column added in the batch with a literal default (or
  the implicit default of a NOT NULL number, string or ENUM) gets it in the rows that existed
  before, as in the source (the value comes with the DDL record's ``alter`` op).
- Tables the job creates are Iceberg format v2, written in primary key order
  (``WRITE ORDERED BY``), and merge-on-read (see ``merge.iceberg_contract.DEFAULT_TABLE_PROPERTIES``): a MERGE
  writes the changed rows and position delete files, not the data files the changed rows sit
  in. Its target scan reads the key columns only (and the other columns only when some image
  lacks columns that the row keeps), and drops the rows whose key is not among the changed
  keys as it reads them, so only those reach the join with the changes. The option ``maintenance``
  compacts the delete files away and expires old snapshots (see ``merge.spark.maintenance``).
- Tables without a primary key get an append-only change log (one row per change with its
  envelope and image) instead of a MERGE.
- Every commit carries the batch's end checkpoint (``binlog.checkpoint``) and id
  (``binlog.batch_id``) in its snapshot summary. A table whose last commit already holds the
  batch end is skipped, so a rerun, or a resumed run after a crash between two tables, changes
  nothing twice. After the tables, a row is appended to ``<namespace>._binlog_batches`` (the
  ledger, which gives the stream position when no checkpoint store is used), then the
  checkpoint store is advanced with compare-and-set from the batch start to its end.
- With a checkpoint store, a run holds the key's run lock (``flock``, see
  ``FileCheckpointStore.exclusive``) while it applies batches: a second run of the same load
  fails at once with ``ConcurrentRunError`` instead of committing the same batch again.
- Each staged file is checked against the SHA-256 its manifest records before anything is
  committed.

The job lives in ``airflow_provider_binlog.merge``: planning modules without pyspark
(``batches``, ``ddl_plan``, ``key_chains``, ``sql``) and the Spark modules under
``merge.spark`` (``column_types``, ``schema``, ``catalog``, ``collapse``, ``table_work``,
``apply``, ``moves``, ``ledger``, ``batch``, ``maintenance``, ``job``). This file is the
entry point ``spark-submit`` runs from a checkout; the installed package ships the same as
``airflow_provider_binlog/merge/submit/merge_cdc.py`` (which ``BinlogMergeOperator`` submits).
"""
import sys

from airflow_provider_binlog.merge.spark.job import main

if __name__ == "__main__":
    sys.exit(main())
