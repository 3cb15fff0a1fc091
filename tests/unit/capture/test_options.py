"""DumpOptions and SnapshotOptions: JSON round trip, every bad value refused once, naming the
option, and by the operators when the DAG is parsed."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.capture.options import CaptureOptionError, DumpOptions, SnapshotOptions
from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.operators.settings import BatchLimits, SnapshotSettings

RULES = {"hash": ["shop.users.email"], "exclude": ["shop.users.password"]}


def test_dump_options_json_round_trip():
    options = DumpOptions(tables=["shop.*"], exclude=["shop.tmp_*"], max_rows=10, max_bytes=1 << 20,
                          max_seconds=30, checkpoint_key="shop", workers=0, masking=RULES,
                          masking_secret_conn_id="mask_key", retries=5,
                          backoff_seconds=0.5, progress_seconds=2.0)
    assert options.tables == ("shop.*",) and options.max_seconds == 30.0
    assert DumpOptions.from_json(options.to_json()) == options
    assert DumpOptions.from_json(options.to_json_text()) == options
    assert DumpOptions.from_json({}) == DumpOptions()


def test_snapshot_options_json_round_trip():
    options = SnapshotOptions(method="consistent", reader="pymysql", chunk_rows=500, read_connections=4,
                              tables=["shop.*"], exclude=["shop.tmp_*"], masking=RULES,
                              masking_secret_conn_id="mask_key")
    assert SnapshotOptions.from_json(options.to_json()) == options
    assert SnapshotOptions.from_json(options.to_json_text()) == options
    assert SnapshotOptions.from_json({}) == SnapshotOptions()


@pytest.mark.parametrize("values, message", [
    ({"tables": "shop.*"}, "tables must be a list of schema.table patterns"),
    ({"exclude": ["nodot"]}, "exclude must be a list of schema.table patterns"),
    ({"max_rows": 0}, "max_rows must be a whole number of rows of at least 1"),
    ({"max_bytes": 1.5}, "max_bytes must be a whole number of bytes of at least 1"),
    ({"max_seconds": 0}, "max_seconds must be a number of seconds above 0"),
    ({"checkpoint_key": ""}, "checkpoint_key must be a non-empty string"),
    ({"workers": -1}, "workers must be a whole number of staging processes of at least 0"),
    ({"masking": {"hash": ["shop.users.email"]}}, "masking: hash rules need a secret key"),
    ({"masking_secret_conn_id": 3}, "masking_secret_conn_id must be a non-empty string"),
    ({"retries": -1}, "retries must be a whole number of retries of at least 0"),
    ({"backoff_seconds": -1}, "backoff_seconds must be a number of seconds 0 or more"),
    ({"progress_seconds": 0}, "progress_seconds must be a number of seconds above 0"),
])
def test_dump_options_refuse_bad_values(values, message):
    with pytest.raises(CaptureOptionError, match=message) as info:
        DumpOptions(**values)
    assert isinstance(info.value, ProviderError)
    with pytest.raises(CaptureOptionError, match=message):
        DumpOptions.check(**values)


@pytest.mark.parametrize("values, message", [
    ({"method": "lock"}, "method must be one of 'watermark', 'consistent', not 'lock'"),
    ({"reader": "odbc"}, "reader must be one of 'auto', 'arrow', 'pymysql', not 'odbc'"),
    ({"chunk_rows": 0}, "chunk_rows must be a whole number of rows of at least 1"),
    ({"read_connections": True}, "read_connections must be a whole number of connections of at least 1"),
    ({"tables": ["nodot"]}, "tables must be a list of schema.table patterns"),
    ({"exclude": 5}, "exclude must be a list of schema.table patterns"),
    ({"masking": {"hash": ["shop.users.email"]}}, "masking: hash rules need a secret key"),
    ({"masking_secret_conn_id": ""}, "masking_secret_conn_id must be a non-empty string"),
])
def test_snapshot_options_refuse_bad_values(values, message):
    with pytest.raises(CaptureOptionError, match=message):
        SnapshotOptions(**values)
    with pytest.raises(CaptureOptionError, match=message):
        SnapshotOptions.check(**values)


def test_from_json_refuses_unknown_options():
    with pytest.raises(CaptureOptionError, match="unknown dump option"):
        DumpOptions.from_json({"max_rowz": 1})
    with pytest.raises(CaptureOptionError, match="unknown snapshot option"):
        SnapshotOptions.from_json('{"methd": "consistent"}')


@pytest.mark.parametrize("make, message", [
    (lambda: BatchLimits(max_rows=0), "max_rows must be a whole number of rows of at least 1"),
    (lambda: BatchLimits(max_bytes=-5), "max_bytes must be a whole number of bytes of at least 1"),
    (lambda: BatchLimits(max_seconds="soon"), "max_seconds must be a number of seconds above 0"),
    (lambda: dump(masking={"hash": ["shop.users.email"]}), "masking: hash rules need a secret key"),
])
def test_dump_operator_refuses_bad_values_at_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def dump(**kwargs):
    from airflow_provider_binlog.operators.dump import BinlogDumpOperator

    return BinlogDumpOperator(task_id="dump", staging="/s", **kwargs)


def snapshot(**kwargs):
    from airflow_provider_binlog.operators.snapshot import BinlogSnapshotOperator

    return BinlogSnapshotOperator(task_id="snapshot", staging="/s", **kwargs)


@pytest.mark.parametrize("make, message", [
    (lambda: SnapshotSettings(method="lock"), "method must be one of 'watermark', 'consistent', not 'lock'"),
    (lambda: SnapshotSettings(reader="odbc"), "reader must be one of 'auto', 'arrow', 'pymysql', not 'odbc'"),
    (lambda: SnapshotSettings(chunk_rows=0), "chunk_rows must be a whole number of rows of at least 1"),
    (lambda: SnapshotSettings(read_connections=0),
     "read_connections must be a whole number of connections of at least 1"),
    (lambda: snapshot(masking={"hash": ["shop.users.email"]}), "masking: hash rules need a secret key"),
])
def test_snapshot_operator_refuses_bad_values_at_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_operators_make_the_options_of_their_rendered_fields():
    from airflow_provider_binlog.operators.dump import BinlogDumpOperator
    from airflow_provider_binlog.operators.snapshot import BinlogSnapshotOperator

    dump = BinlogDumpOperator(
        task_id="dump",
        tables=["shop.*"],
        staging="/s",
        limits=BatchLimits(max_rows=7),
        checkpoint_key="shop",
        masking=RULES,
        masking_secret_conn_id="mask_key",
    )
    assert dump.dump_options() == DumpOptions(tables=("shop.*",), max_rows=7, checkpoint_key="shop",
                                              masking=RULES, masking_secret_conn_id="mask_key")
    dump.tables = ["nodot"]  # a templated field, checked once rendered
    with pytest.raises(CaptureOptionError, match="tables must be a list of schema.table patterns"):
        dump.dump_options()
    snapshot = BinlogSnapshotOperator(
        task_id="snapshot",
        staging="/s",
        snapshot=SnapshotSettings(method="consistent", read_connections=2),
    )
    assert snapshot.snapshot_options() == SnapshotOptions(method="consistent", read_connections=2)
