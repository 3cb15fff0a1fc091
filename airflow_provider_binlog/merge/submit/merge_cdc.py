"""The merge job's spark-submit entry point: ``spark-submit <this file> --manifest ...``
(``BinlogMergeOperator`` submits it; the options are those of
:mod:`airflow_provider_binlog.merge.spark.job`, see docs/merge.md)."""
import sys

from airflow_provider_binlog.merge.spark.job import main

if __name__ == "__main__":
    sys.exit(main())
