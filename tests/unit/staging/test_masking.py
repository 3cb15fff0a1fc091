"""Column exclusion and masking as rows are staged: the staged files hold the masked values
only, in the staging process and in staging workers; schema-change records and the manifest
say the same; bad rules are refused with what to change."""
from __future__ import annotations

import hashlib
import hmac

from airflow_provider_binlog.staging.storage import read_parquet
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import ABSENT, Column, EventHeader, RowsEvent, TableMap
from airflow_provider_binlog.staging import StagingWriter
from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.masking import Masking, MaskingError, mask_ddl_record

KEY = "k3y"
RULES = {"exclude": ["shop.customers.password"], "hash": ["shop.*.email"],
         "truncate": {"shop.customers.phone": 3}}
TM = TableMap(1, "shop", "customers", (
    Column(0, "id", C.MYSQL_TYPE_LONG, 0, primary_key=True),
    Column(1, "email", C.MYSQL_TYPE_VARCHAR, 80, text=True),
    Column(2, "password", C.MYSQL_TYPE_VARCHAR, 80, text=True),
    Column(3, "phone", C.MYSQL_TYPE_VARCHAR, 20, text=True),
    Column(4, "age", C.MYSQL_TYPE_LONG, 0)))


def digest(text: str) -> str:
    return hmac.new(KEY.encode(), text.encode(), hashlib.sha256).hexdigest()


def event(kind, rows, pos=4):
    return RowsEvent(EventHeader(1_700_000_000, 30, 1, 100, pos + 100, 0), pos, kind, 1, TM, 0, tuple(rows))


def stage(tmp_path, workers: int):
    writer = StagingWriter(tmp_path / "staging", workers=workers, masking=Masking.parse(RULES, KEY))
    writer.add_rows(event("insert", [(1, "a@x.io", "hunter2", "5551234", 30),
                                     (2, None, "pw", "12", None)]), binlog_file="b.000001", gtid=None, txn="t1")
    writer.add_rows(event("update", [((1, ABSENT, ABSENT, ABSENT, ABSENT), (ABSENT, "b@x.io", "s3cret", ABSENT, 31))],
                          pos=204), binlog_file="b.000001", gtid=None, txn="t2")
    manifest = writer.publish(dump_id="d", start={}, end={}, server={})
    entry = manifest.tables[0]
    files = list(load_manifest(manifest.directory).files(entry))
    return entry, [read_parquet(f).to_pylist() for f in files]


@pytest.mark.parametrize("workers", [0, 2])
def test_staged_files_hold_the_hash_the_truncation_and_not_the_excluded_column(tmp_path, workers):
    entry, files = stage(tmp_path, workers)
    rows = [r for f in files for r in f]
    assert [r["_after"] for r in rows] == [
        {"id": 1, "email": digest("a@x.io"), "phone": "555", "age": 30},
        {"id": 2, "email": None, "phone": "12", "age": None},
        {"id": None, "email": digest("b@x.io"), "phone": None, "age": 31}]
    # the absent columns name no excluded column
    assert [r["_after_absent"] for r in rows] == [None, None, ["id", "phone"]]
    assert rows[2]["_before_absent"] == ["email", "phone", "age"]
    text = repr(files)
    for raw in ("a@x.io", "b@x.io", "hunter2", "s3cret", "5551234", "password"):
        assert raw not in text
    assert entry["masked"] == {"email": "hash", "password": "exclude", "phone": "truncate"}
    assert [c["name"] for c in entry["columns"]] == ["id", "email", "phone", "age"]
    assert entry["columns"][1]["arrow_type"] == "string"


def test_masked_ddl_records_leave_out_excluded_columns_and_mask_defaults():
    record = {"file": "b.000001", "pos": 4, "ops": [
        {"op": "alter", "table": ["shop", "customers"], "dropped": [], "renamed": [],
         "added": [{"name": "email", "value": "none@x.io",
                    "column": {"name": "email", "data_type": "varchar", "length": 80, "charset": "utf8mb4",
                               "default_kind": "literal", "default": "none@x.io"}},
                   {"name": "password", "value": "x", "column": {"name": "password", "data_type": "varchar"}}],
         "columns": [{"name": "id", "data_type": "int"},
                     {"name": "email", "data_type": "int", "unsigned": True,
                      "default_kind": "literal", "default": "7"},
                     {"name": "password", "data_type": "varchar"},
                     {"name": "phone", "data_type": "varchar", "default_kind": "literal", "default": "5551234"}]},
        {"op": "reset", "table": ["shop", "customers"]}]}
    masked = mask_ddl_record(Masking.parse(RULES, KEY), record)
    alter = masked["ops"][0]
    assert [c["name"] for c in alter["columns"]] == ["id", "email", "phone"]
    assert alter["columns"][1] == {"name": "email", "data_type": "varchar", "length": 64, "charset": "ascii",
                                   "collation": "ascii_bin", "default_kind": "literal", "default": digest("7")}
    assert alter["columns"][2]["default"] == "555"
    assert [a["name"] for a in alter["added"]] == ["email"]
    assert alter["added"][0]["value"] == digest("none@x.io")
    assert masked["ops"][1] == record["ops"][1]
    assert "none@x.io" not in repr(masked)


@pytest.mark.parametrize("rules, secret, message", [
    ({"hash": ["shop.t.c"]}, None, "hash rules need a secret key; give masking_secret_conn_id"),
    ({"exclude": ["shop.t"]}, None, "pattern 'shop.t' is not schema.table.column"),
    ({"truncate": {"shop.t.c": -1}}, None, "must be a whole number >= 0"),
    ({"mask": []}, None, "an object with 'exclude', 'hash' and/or 'truncate'"),
])
def test_bad_rules_are_refused(rules, secret, message):
    with pytest.raises(MaskingError, match=message):
        Masking.parse(rules, secret)


def test_excluding_a_key_or_truncating_a_number_fails_the_dump_before_anything_is_published(tmp_path):
    for rules, message in (({"exclude": ["shop.customers.id"]}, "primary key column\\(s\\) id cannot be excluded"),
                           ({"truncate": {"shop.customers.id": 3}},
                            "primary key column\\(s\\) id cannot be excluded or truncated"),
                           ({"truncate": {"shop.customers.age": 1}}, "shop.customers.age is int32, not text")):
        writer = StagingWriter(tmp_path / "staging", masking=Masking.parse(rules))
        with pytest.raises(MaskingError, match=message):
            writer.add_rows(event("insert", [(1, "a", "b", "c", 1)]), binlog_file="b.000001", gtid=None, txn="t")
        writer.abort()
    assert [p.name for p in (tmp_path / "staging").iterdir() if not p.name.startswith(".")] == []


def test_rules_match_column_names_without_case_and_the_first_kind_wins():
    masking = Masking.parse({"exclude": ["*.*.SSN"], "hash": ["shop.*.*"]}, "topsecretkey")
    assert masking.rule("shop", "t", "ssn").action == "exclude"
    assert masking.rule("shop", "t", "name").action == "hash"
    assert masking.rule("other", "t", "name") is None
    assert "topsecretkey" not in repr(masking) and "topsecretkey" not in repr(masking.to_json())
    assert Masking.parse(masking.to_json(), "topsecretkey") == masking
