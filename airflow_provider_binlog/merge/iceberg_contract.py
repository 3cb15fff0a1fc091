"""What the merge job writes into Iceberg besides rows, and its defaults: the snapshot summary
keys every commit carries, the table properties of the tables it creates, the ledger's name.
Pure: no pyspark."""

from __future__ import annotations

SUMMARY_CHECKPOINT = "binlog.checkpoint"
SUMMARY_BATCH = "binlog.batch_id"
SUMMARY_START = "binlog.start"
SUMMARY_STREAM = "binlog.stream"
SUMMARY_MOVE = "binlog.move"
PROP_SOURCE = "binlog.source"
PROP_MODE = "binlog.mode"
PROP_PRIMARY_KEY = "binlog.primary-key"
#: The columns the data-contract options added to the table (JSON list): never taken for
#: source columns, so turning an option off keeps them (no longer maintained), never drops them.
PROP_CONTRACT_COLUMNS = "binlog.contract-columns"
#: When maintenance last ran on the table (ISO 8601, UTC): the cadence of maintenance_every_hours.
PROP_MAINTAINED_AT = "binlog.maintained-at"
MODE_MERGE = "merge"
MODE_CHANGELOG = "changelog"
LEDGER_TABLE = "_binlog_batches"
DEFAULT_STREAM = "default"
DEFAULT_MAX_KEY_CHANGE_ROWS = 2_000_000

#: Tables of a batch planned and committed at once (driver threads of the one Spark application).
DEFAULT_PARALLEL_TABLES = 8

#: Most distinct key values listed in a MERGE's target filter (see :func:`.spark.apply.key_filter`).
DEFAULT_MAX_FILTER_KEYS = 100_000

#: Iceberg table properties of the tables the job creates; ``table_properties`` override them.
#: Row-level changes are merge-on-read: a MERGE (and an UPDATE or DELETE) writes the changed
#: rows and position delete files naming the rows they replace, without rewriting the data
#: files those rows sit in, so the cost of a batch follows the batch, not the table. The
#: distribution modes keep Iceberg's defaults: for merge-on-read, the changes (a few rows)
#: are clustered by the data file they touch and written by one task per partition, sorted;
#: appends and copy-on-write rewrites are range-distributed by the write order. Each write
#: task writes one delete file for all the data files of a partition
#: (``write.delete.granularity=partition``), so the files a commit adds do not grow with the
#: number of data files its changes are spread over. Maintenance (see
#: :func:`.spark.maintenance.run_maintenance`) folds the delete files back into the data files.
DEFAULT_TABLE_PROPERTIES = {
    "format-version": "2",
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
    "write.delete.granularity": "partition",
}
