"""The typed, read-only view of a manifest: checkpoints parsed once, mode, schema history and
the other fields the loaders read."""
import json

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.schema_history import SchemaHistory
from airflow_provider_binlog.staging.manifest import MODE_INCREMENTAL, MODE_SNAPSHOT, ManifestError

from ..merge._manifests import manifest


def test_checkpoints_are_parsed_once_as_checkpoints(tmp_path):
    m = manifest(tmp_path, 4, 900)
    assert m.start == Checkpoint(file="mysql-bin.000001", position=4)
    assert m.end == Checkpoint(file="mysql-bin.000001", position=900)
    assert m.end is m.end  # parsed once
    assert m.data["end"] == {"file": "mysql-bin.000001", "pos": 900}  # the JSON stays as published


def test_an_incremental_manifest_and_its_defaults(tmp_path):
    m = manifest(tmp_path, 4, 900)
    assert (m.mode, m.is_snapshot) == (MODE_INCREMENTAL, False)
    assert (m.binlog_bytes, m.schema_history_json, m.schema_history) == (None, None, None)
    assert m.server == {"flavor": "mysql"} and m.ddl == []


def test_a_snapshot_manifest_with_its_schema_history(tmp_path):
    history = SchemaHistory(flavor="mysql")
    m = manifest(tmp_path, 4, 4, history=history.to_json())
    data = dict(m.data, mode="snapshot", binlog_bytes=1234)
    m.path.write_text(json.dumps(data))
    from airflow_provider_binlog.staging.manifest import load_manifest
    m = load_manifest(m.path)
    assert (m.mode, m.is_snapshot, m.binlog_bytes) == (MODE_SNAPSHOT, True, 1234)
    assert m.schema_history_json == history.to_json()
    assert isinstance(m.schema_history, SchemaHistory) and m.schema_history is m.schema_history


def test_a_bad_checkpoint_is_a_manifest_error_naming_the_manifest(tmp_path):
    m = manifest(tmp_path, 4, 900)
    m.data["end"] = {"file": "mysql-bin.000001", "pos": -3}
    with pytest.raises(ManifestError, match=r"manifest\.json: bad end checkpoint: .*dump that range again"):
        m.end


def test_a_manifest_in_a_directory_naming_a_file_outside_tables_is_refused(tmp_path):
    from airflow_provider_binlog.staging.manifest import load_manifest
    from airflow_provider_binlog.staging.writer import StagingWriter

    published = StagingWriter(tmp_path).publish(dump_id="d", start={}, end={}, server={})
    data = dict(published.data, tables=[{"schema": "s", "table": "t", "rows": {}, "columns": [], "primary_key": [],
                                         "files": [{"path": "notes/x.parquet", "rows": 0, "bytes": 0}]}])
    (published.directory / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(ManifestError, match="staged file path 'notes/x.parquet' is not a staged file under tables/"):
        load_manifest(published.directory)
