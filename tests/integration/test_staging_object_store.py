"""Staging on an object store (staging.storage, staging.writer): batches published to an S3-API
server on loopback (moto) by one conditional write of the manifest; two dumps of one range
cannot both publish, a killed dump's uploads are never read and are removed later, and bad
locations, buckets, credentials and stores without conditional writes are refused clearly."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.staging import writer as writer_module
from airflow_provider_binlog.staging.manifest import ManifestError, load_manifest
from airflow_provider_binlog.staging.storage import (
    ObjectLocation,
    ObjectStaging,
    StagingStorageError,
    StorageOptions,
    check_conditional_writes,
    local_path,
)
from airflow_provider_binlog.staging.writer import StagingWriter, remove_stale_attempts
from tests.integration.test_merge_job import Binlog, col, table_map
from tests.s3_server import s3_env, s3_server, start_moto, stop_moto  # noqa: F401

ITEMS = table_map("s", "items", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
                                 col(1, "v", C.MYSQL_TYPE_LONG)])


def stage(log: Binlog, first: int, n: int = 3) -> Binlog:
    log.begin().rows(ITEMS, "insert", [(i, 10 * i) for i in range(first, first + n)])
    return log


def keys(server, bucket: str) -> list[str]:
    found = server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
    return sorted(o["Key"] for o in found)


def test_a_batch_is_published_to_s3_with_its_manifest_last_and_reads_back_through_pyarrow(
        s3_server, s3_env, tmp_path):  # noqa: F811
    log = stage(Binlog(tmp_path, staging=f"s3://{s3_env}/cdc/shop"), 1)
    manifest = log.publish()
    batch = manifest.dump_id.replace(":", "_")
    assert manifest.ref == f"s3://{s3_env}/cdc/shop/{manifest.dump_id}/manifest.json"
    objects = keys(s3_server, s3_env)
    assert f"cdc/shop/{manifest.dump_id}/manifest.json" in objects
    (entry,) = manifest.tables
    (path,) = manifest.files(entry)
    attempt = entry["files"][0]["path"].split("/")[0]
    assert path.startswith(f"s3://{s3_env}/cdc/shop/{manifest.dump_id}/{attempt}/tables/")
    assert sorted(r["id"] for r in pq.read_table(path).column("_after").to_pylist()) == [1, 2, 3]
    # read again by URI, as the merge does, with every file's size checked (and its hash)
    again = load_manifest(manifest.ref, verify=True)
    assert again.data == manifest.data and batch
    # nothing is left in the local work area
    assert not list(__import__("pathlib").Path(writer_module.local_work_root()).glob(".incomplete-*"))


def test_two_dumps_of_one_range_publish_once_and_the_loser_keeps_the_winners_batch(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/race"
    first, second = stage(Binlog(tmp_path / "a", staging=staging), 1), stage(Binlog(tmp_path / "b", staging=staging), 1)
    won = first.publish()
    kept = second.publish()
    assert kept.data == won.data                      # the second dump returns the published batch
    attempts = {k.split("/")[2] for k in keys(s3_server, s3_env) if not k.endswith("manifest.json")}
    assert attempts == {won.tables[0]["files"][0]["path"].split("/")[0]}   # the loser's uploads are gone


def test_a_different_batch_under_the_same_id_is_refused_and_the_published_one_kept(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/clash"
    published = stage(Binlog(tmp_path / "a", staging=staging), 1).publish()
    other = stage(Binlog(tmp_path / "b", staging=staging), 1)
    with pytest.raises(StagingStorageError, match="another batch is published") as caught:
        other.writer.publish(dump_id=published.dump_id, start=published.start,
                             end={**published.end, "pos": published.end["pos"] + 1}, server={})
    assert "delete that manifest" in caught.value.hint
    assert load_manifest(published.ref).data == published.data


def test_a_dump_killed_before_its_manifest_publishes_nothing_and_its_uploads_go_later(
        s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    staging = f"s3://{s3_env}/killed"
    log = stage(Binlog(tmp_path, staging=staging), 1)
    with monkeypatch.context() as m:
        m.setattr(ObjectStaging, "create_if_absent", lambda self, data, *parts: (_ for _ in ()).throw(
            SystemExit("killed")))
        with pytest.raises(SystemExit):
            log.publish()
    assert keys(s3_server, s3_env) == []   # a dump stopped on its way out deletes its uploads
    # a harder kill leaves them: uploaded, never named by a manifest, so never read
    log2 = stage(Binlog(tmp_path / "2", staging=staging), 1)
    remote, work = log2.writer.remote, log2.writer.work_dir
    log2.writer._close_files()
    for path in work.rglob("*.parquet"):
        remote.upload(str(path), "mysql-bin.000001.4-mysql-bin.000001.104", "deadbeef", str(path.relative_to(work)))
    with pytest.raises(ManifestError, match="no manifest"):
        load_manifest(f"{staging}/mysql-bin.000001.4-mysql-bin.000001.104")
    assert remove_stale_attempts(remote) == []                     # young: it may still be uploading
    assert remove_stale_attempts(remote, older_than=0) == ["mysql-bin.000001.4-mysql-bin.000001.104/deadbeef"]
    assert keys(s3_server, s3_env) == []


def test_a_published_batch_keeps_its_attempt_when_stale_attempts_are_removed(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/kept"
    manifest = stage(Binlog(tmp_path, staging=staging), 1).publish()
    assert remove_stale_attempts(ObjectStaging(staging), older_than=0) == []
    assert load_manifest(manifest.ref, verify=True).dump_id == manifest.dump_id


@pytest.mark.parametrize("location, message", [
    ("ftp://host/x", "unknown staging scheme 'ftp'"),
    ("s3:///prefix", "names no bucket"),
    ("s3://bucket/p?endpoint=http://x", "takes no query"),
])
def test_bad_staging_locations_are_refused_saying_why(location, message):
    with pytest.raises(StagingStorageError, match=message):
        StagingWriter(location) if not location.startswith("ftp") else local_path(location)


def test_gcs_and_azure_are_refused_for_publishing_until_their_conditional_writes_are_there():
    for location in ("gs://bucket/x", "abfs://container@account.dfs.core.windows.net/x"):
        with pytest.raises(StagingStorageError, match="conditional write"):
            ObjectStaging(location)
    assert ObjectLocation.parse("gs://bucket/a/b").uri("c") == "gs://bucket/a/b/c"


def test_a_missing_bucket_is_named(s3_server, s3_env, tmp_path):  # noqa: F811
    log = stage(Binlog(tmp_path, staging="s3://no-such-bucket/x"), 1)
    with pytest.raises(StagingStorageError, match="bucket 'no-such-bucket' does not exist"):
        log.publish()


def test_denied_credentials_are_reported_as_such_without_the_secret(tmp_path):
    server = start_moto({"INITIAL_NO_AUTH_ACTION_COUNT": "0"})   # this one checks credentials
    try:
        options = StorageOptions(endpoint_url=server.endpoint, region="us-east-1", access_key="AKIAWRONG",
                                 secret_key="wrong-secret-value")
        writer = StagingWriter("s3://bucket/x", storage_options=options)
        with pytest.raises(StagingStorageError, match="denied access") as caught:
            writer.publish(dump_id="d", start={}, end={}, server={})
        assert "wrong-secret-value" not in str(caught.value) and "wrong-secret-value" not in repr(options)
    finally:
        stop_moto(server)


def test_a_store_that_ignores_conditional_writes_is_refused(s3_server, s3_env, monkeypatch):  # noqa: F811
    staging = ObjectStaging(f"s3://{s3_env}/probe")
    check_conditional_writes(staging)                              # moto honours If-None-Match
    real = staging.client.put_object

    def ignoring(**kwargs):
        kwargs.pop("IfNoneMatch", None)
        return real(**kwargs)

    monkeypatch.setattr(staging.client, "put_object", ignoring)
    with pytest.raises(StagingStorageError, match="ignores conditional writes"):
        check_conditional_writes(staging)
    assert keys(s3_server, s3_env) == []
