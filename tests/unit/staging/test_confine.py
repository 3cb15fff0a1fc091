"""Names read from a staging location are checked against the names the provider writes
(staging.confine): staged files under ``tables/<schema>.<table>/``, optionally under an attempt
id, and batches named as dumps and snapshots name them."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.staging.confine import (
    UntrustedObjectError,
    is_batch_name,
    parse_document,
    staged_file_problem,
)

ATTEMPT = "0123456789abcdef" * 2


@pytest.mark.parametrize("path", ["tables/s.items/part-00000.parquet",
                                  "tables/s.items/rows-00001-s00002-r00003.parquet",
                                  "tables/s%20x.it%C3%A9ms/part-00000-1.parquet",
                                  "tables/.hidden.t/part-00000.parquet"])
def test_the_names_a_writer_stages_are_accepted(path):
    assert staged_file_problem(path) == ""
    assert staged_file_problem(f"{ATTEMPT}/{path}", attempt=ATTEMPT) == ""
    assert staged_file_problem(f"{ATTEMPT}/{path}", attempt_allowed=True) == ""


@pytest.mark.parametrize("path, problem", [
    ("/etc/airflow/airflow.cfg", "absolute"),
    ("tables/../../dags/x.py", "leaves its directory"),
    ("tables/s.items/../../../x.parquet", "leaves its directory"),
    ("tables//part-00000.parquet", "leaves its directory"),
    ("tables/s.items/./part-00000.parquet", "leaves its directory"),
    ("tables\\s.items\\part-00000.parquet", "not a plain name"),
    ("secrets/model.parquet", "not a staged file under tables/"),
    ("tables/s.items/model.pkl", "not a staged file under tables/"),
    ("tables/s.items/sub/part-00000.parquet", "not a staged file under tables/"),
    ("tables/part-00000.parquet", "not a staged file under tables/"),
    ("", "not a file name"),
    (None, "not a file name"),
])
def test_names_that_leave_their_place_are_refused_saying_why(path, problem):
    assert problem in staged_file_problem(path)


def test_a_document_naming_its_attempt_accepts_only_that_attempts_files():
    other = "f" * 32
    assert "not under the attempt" in staged_file_problem(f"{other}/tables/s.t/part-00000.parquet", attempt=ATTEMPT)
    assert "not a staged file" in staged_file_problem(f"{other}/tables/s.t/part-00000.parquet")


@pytest.mark.parametrize("name", ["mysql-bin.000001.4-mysql-bin.000001.104", "binlog.000123.4-binlog.000124.8812",
                                  "gtid.0-mysql-bin.000003.120", "mariadb-bin.000001.4-mariadb-bin.000002.400",
                                  "snapshot-mysql-bin.000003.1234-20240101T120000123456Z",
                                  "snapshot-mysql-bin.000003.4-mysql-bin.000003.99-20240101T120000123456Z"])
def test_batch_names_are_those_of_dumps_and_snapshots(name):
    assert is_batch_name(name)


@pytest.mark.parametrize("name", ["1", "uploads", "0123456789abcdef0123456789abcdef", ".resumable", "d1",
                                  "mysql-bin.000001.4", "snapshot-x", "mlruns", "a.1.2-b", "../x.1.2-y.3.4"])
def test_other_names_are_not_batches(name):
    assert not is_batch_name(name)


def test_a_document_is_bounded_and_must_be_json():
    assert parse_document("s3://b/d.json", b'{"a": 1}', limit=8) == {"a": 1}
    with pytest.raises(UntrustedObjectError, match=r"s3://b/d.json: the object is larger than 7 bytes \(8\)"):
        parse_document("s3://b/d.json", b'{"a": 1}', limit=7)
    with pytest.raises(UntrustedObjectError, match="not a JSON document"):
        parse_document("s3://b/d.json", b"{", limit=7)
