"""Where a direct commit writes a data file itself (merge.spark.direct_commit.local_path): only
paths on the local file system; a path without a scheme is on the table's default Hadoop file
system, which may be HDFS."""
import pytest

pytest.importorskip("pyspark")

from airflow_provider_binlog.merge.lake.direct_commit import local_path  # noqa: E402


class _Table:
    """A table whose FileIO has a Hadoop configuration with ``fs.defaultFS`` (None: unset)."""

    def __init__(self, default_fs):
        self.default_fs = default_fs

    def io(self):
        table = self

        class Io:
            def conf(self):
                return {"fs.defaultFS": table.default_fs}
        return Io()


class _NoHadoop:
    def io(self):
        return object()


def test_a_path_without_a_scheme_is_local_only_when_the_default_file_system_is():
    assert local_path("/w/t/data/a.parquet", _Table(None)) == "/w/t/data/a.parquet"
    assert local_path("/w/t/data/a.parquet", _Table("file:///")) == "/w/t/data/a.parquet"
    assert local_path("/w/t/data/a.parquet", _Table("hdfs://namenode:8020")) is None
    assert local_path("/w/t/data/a.parquet", _NoHadoop()) is None


def test_file_uris_are_local_and_object_stores_are_not():
    assert local_path("file:/w/a.parquet", _Table("hdfs://nn")) == "/w/a.parquet"
    assert local_path("file:///w/a.parquet", _Table(None)) == "/w/a.parquet"
    assert local_path("s3://bucket/w/a.parquet", _Table(None)) is None
