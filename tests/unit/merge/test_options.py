"""MergeOptions: what the merge job needs, checked once when made, carried as JSON."""
import dataclasses
import json

import pytest

from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.merge.contract import DataContract
from airflow_provider_binlog.merge.errors import MergeOptionError
from airflow_provider_binlog.merge.layout import LayoutError, TableLayouts
from airflow_provider_binlog.merge.options import _CHECKS, MergeOptions


def _full() -> MergeOptions:
    return MergeOptions(
        namespace="shop.cdc", catalog="pglake", warehouse="/data/wh", checkpoint_store="postgresql://db/state",
        checkpoint_key="shop-db.1", stream="shop_stream", table_properties={"write.format.default": "orc"},
        table_layout=TableLayouts.parse({"default": {"sort_by": ["id"]},
                                         "tables": {"shop.orders": {"partition_by": ["days(at)"]}}}),
        data_contract=DataContract.parse({"default": {"soft_delete": True},
                                          "tables": {"shop.log*": {"change_log": True}}}),
        max_key_change_rows=5, parallel_tables=3, direct_max_bytes=0, direct_deletes="equality", maintenance=True,
        expire_older_than_days=0, retain_last=2, maintenance_every_hours=12.5)


def test_options_round_trip_through_json():
    options = _full()
    assert MergeOptions.from_json(options.to_json()) == options
    text = options.to_json_text()
    assert MergeOptions.from_json(text) == options and MergeOptions.from_json(text).to_json_text() == text
    assert json.loads(text)["table_layout"]["tables"]["shop.orders"] == {"partition_by": ["days(at)"]}
    defaults = MergeOptions(namespace="n")
    assert MergeOptions.from_json({"namespace": "n"}) == defaults == MergeOptions.from_json(defaults.to_json())


def test_what_follows_from_the_options():
    assert MergeOptions(namespace="n").ledger_stream == "default"
    assert MergeOptions(namespace="n", checkpoint_store="/s", checkpoint_key="k").ledger_stream == "k"
    assert _full().ledger_stream == "shop_stream"
    layouts = _full().layouts
    assert layouts.for_table("shop", "orders").properties == {"write.format.default": "orc"}
    assert layouts.for_table("shop", "orders").partition_by == ("days(at)",)


def test_every_option_has_its_check():
    assert set(_CHECKS) == {f.name for f in dataclasses.fields(MergeOptions)}


@pytest.mark.parametrize("change, message", [
    ({"parallel_tables": 0}, "parallel_tables must be a whole number of at least 1, not 0"),
    ({"parallel_tables": True}, "parallel_tables must be a whole number"),
    ({"direct_max_bytes": -1}, "direct_max_bytes must be a whole number of bytes"),
    ({"direct_deletes": "copy-on-write"}, "direct_deletes must be one of position, equality"),
    ({"retain_last": 0}, "retain_last must be a whole number of at least 1"),
    ({"expire_older_than_days": -1}, "expire_older_than_days must be a number of days"),
    ({"maintenance_every_hours": 0}, "maintenance_every_hours must be a positive number of hours"),
    ({"max_key_change_rows": -5}, "max_key_change_rows must be a whole number of at least 0"),
    ({"maintenance": "yes"}, "maintenance must be true or false"),
    ({"namespace": "shop cdc"}, "namespace 'shop cdc' must be dot-separated identifiers"),
    ({"catalog": "a.b"}, "catalog 'a.b' must be identifier"),
    ({"checkpoint_store": "/s"}, "checkpoint_store is given without checkpoint_key"),
    ({"checkpoint_store": "/s", "checkpoint_key": "a/b"}, "stream 'a/b' must be identifier"),
    ({"table_properties": {"": "x"}}, "table_properties must map property names to string values"),
    ({"table_layout": {"default": {}}}, "table_layout must be a TableLayouts"),
])
def test_a_bad_option_is_refused_naming_it(change, message):
    with pytest.raises(MergeOptionError, match=message) as caught:
        MergeOptions(**{"namespace": "n", **change})
    assert isinstance(caught.value, ProviderError) and isinstance(caught.value, ValueError)


def test_bad_json_is_refused_with_what_is_wrong():
    with pytest.raises(MergeOptionError, match="unknown merge option.*direct_bytes") as caught:
        MergeOptions.from_json({"namespace": "n", "direct_bytes": 0})
    assert "direct_max_bytes" in caught.value.hint
    with pytest.raises(MergeOptionError, match="lack namespace"):
        MergeOptions.from_json("{}")
    with pytest.raises(MergeOptionError, match="not JSON"):
        MergeOptions.from_json("{namespace: n}")
    with pytest.raises(LayoutError):
        MergeOptions.from_json({"namespace": "n", "table_layout": {"default": {"partition_by": ["weeks(at)"]}}})


def test_one_check_refuses_a_bad_option_wherever_it_is_given():
    """The operator (when the DAG is parsed), MergeOptions and the job's JSON refuse it alike."""
    messages = set()
    for refuse in (lambda: MergeOptions.check(parallel_tables=0),
                   lambda: MergeOptions(namespace="n", parallel_tables=0),
                   lambda: MergeOptions.from_json('{"namespace": "n", "parallel_tables": 0}')):
        with pytest.raises(MergeOptionError) as caught:
            refuse()
        messages.add(str(caught.value))
    assert messages == {"parallel_tables must be a whole number of at least 1, not 0"}
    with pytest.raises(MergeOptionError, match="unknown merge option"):
        MergeOptions.check(parallel=2)


def test_the_job_refuses_bad_options_before_spark_starts(tmp_path, capsys):
    pytest.importorskip("pyspark")
    from airflow_provider_binlog.merge.spark import job

    out = tmp_path / "out.json"
    with pytest.raises(SystemExit) as caught:
        job.main(["--manifest", str(tmp_path), "--options", '{"namespace": "n", "retain_last": 0}',
                  "--output-json", str(out)])
    assert caught.value.code == 2
    assert "--options: retain_last must be a whole number of at least 1, not 0" in capsys.readouterr().err
    assert json.loads(out.read_text()) == {"error": "retain_last must be a whole number of at least 1, not 0",
                                           "error_type": "MergeOptionError"}


def test_the_jvm_started_while_the_options_load_is_stopped_when_they_are_refused(tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    from airflow_provider_binlog.merge.spark import job

    started, stopped = [], []

    class FakeJvm:  # the JVM's start is not what this test is about: its stop is
        def __init__(self, conf, catalog, java_home, jars_dirs, options):
            started.append((catalog, conf["spark.sql.catalog.lake.warehouse"]))

        def stop(self):
            stopped.append(True)

    monkeypatch.setattr(job, "JavaLake", FakeJvm)
    monkeypatch.setenv("JAVA_HOME", "/nowhere")
    with pytest.raises(SystemExit):
        job.main(["--engine", "iceberg", "--manifest", str(tmp_path), "--output-json", str(tmp_path / "o.json"),
                  "--options", '{"namespace": "n", "catalog": "lake", "warehouse": "/w", "retain_last": 0}'])
    assert started == [("lake", "/w")] and stopped == [True]


def test_a_checkpoint_store_url_with_a_password_is_split_between_the_options_and_the_environment():
    from airflow_provider_binlog.merge.options import store_without_password

    assert store_without_password("postgresql+psycopg://loader:pw@db.internal:6432/etl?sslmode=require") == (
        "postgresql+psycopg://loader@db.internal:6432/etl?sslmode=require",
        "postgresql+psycopg://loader:pw@db.internal:6432/etl?sslmode=require")
    assert store_without_password("postgresql://loader@db/etl") == ("postgresql://loader@db/etl", None)
    assert store_without_password("/var/lib/binlog/checkpoints") == ("/var/lib/binlog/checkpoints", None)
    assert store_without_password(None) == (None, None)
