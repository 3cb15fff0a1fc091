"""Staging on an object store (staging.storage, staging.writer): batches published to an S3-API
server on loopback (moto) by one conditional write of the manifest; two dumps of one range
cannot both publish, a killed dump's uploads are never read and are removed later, and bad
locations, buckets, credentials and stores without conditional writes are refused clearly."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.operators.merge import BinlogMergeOperator
from airflow_provider_binlog.staging import remote as remote_module
from airflow_provider_binlog.staging.manifest import ManifestError, load_manifest
from airflow_provider_binlog.staging.storage import (
    read_bytes,
    ObjectStaging,
    StagingStorageError,
    StorageOptions,
    check_conditional_writes,
    local_path,
)
from airflow_provider_binlog.staging.tidy import remove_stale_attempts
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.integration.test_merge_job import Binlog, col, table_map
from tests.s3_server import s3_env, s3_server, start_moto, stop_moto  # noqa: F401
from tests.unit.airflow.test_merge_operator_cluster import _value, submitted  # noqa: F401
from airflow_provider_binlog.operators.settings import LakeSettings, SparkSettings
from airflow_provider_binlog.staging.ref import StagingRef

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
    work = log.writer.work_dir
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
    assert work.parent == __import__("pathlib").Path(remote_module.local_work_root()) and not work.exists()


def test_two_dumps_of_one_range_publish_once_and_the_loser_keeps_the_winners_batch(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/race"
    first, second = stage(Binlog(tmp_path / "a", staging=staging), 1), stage(Binlog(tmp_path / "b", staging=staging), 1)
    won = first.publish()
    kept = second.publish()
    assert kept.data == won.data                      # the second dump returns the published batch
    attempts = {k.split("/")[2] for k in keys(s3_server, s3_env) if k.count("/") >= 3}
    assert attempts == {won.tables[0]["files"][0]["path"].split("/")[0]}   # the loser's uploads are gone


def test_a_different_batch_under_the_same_id_is_refused_and_the_published_one_kept(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/clash"
    published = stage(Binlog(tmp_path / "a", staging=staging), 1).publish()
    other = stage(Binlog(tmp_path / "b", staging=staging), 1)
    with pytest.raises(StagingStorageError, match="another batch is published") as caught:
        other.writer.publish(dump_id=published.dump_id, start=published.data["start"],
                             end={**published.data["end"], "pos": published.data["end"]["pos"] + 1}, server={})
    assert "delete that manifest" in caught.value.hint
    assert load_manifest(published.ref).data == published.data


def test_a_different_batch_under_the_same_id_is_refused_in_a_local_directory_too(tmp_path):
    staging = tmp_path / "local"
    published = stage(Binlog(tmp_path / "a", staging=staging), 1).publish()
    before = {p: p.read_bytes() for p in sorted(published.path.parent.rglob("*")) if p.is_file()}
    other = stage(Binlog(tmp_path / "b", staging=staging), 1)
    with pytest.raises(StagingStorageError, match="another batch is published") as caught:
        other.writer.publish(dump_id=published.dump_id, start=published.data["start"],
                             end={**published.data["end"], "pos": published.data["end"]["pos"] + 1}, server={})
    assert "a merge may be reading it" in caught.value.hint
    assert {p: p.read_bytes() for p in sorted(published.path.parent.rglob("*")) if p.is_file()} == before


def test_a_dump_killed_before_its_manifest_publishes_nothing_and_its_uploads_go_later(
        s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    staging = f"s3://{s3_env}/killed"
    log = stage(Binlog(tmp_path, staging=staging), 1)
    with monkeypatch.context() as m:
        real = ObjectStaging.create_if_absent

        def killed(self, data, *parts):
            if parts[-1] != "manifest.json":  # the store's probe
                return real(self, data, *parts)
            raise SystemExit("killed")

        m.setattr(ObjectStaging, "create_if_absent", killed)
        with pytest.raises(SystemExit):
            log.publish()
    # stopped in the create, which may still land: its uploads stay, named by no manifest
    assert keys(s3_server, s3_env) and not any(k.endswith("manifest.json") for k in keys(s3_server, s3_env))
    assert len(remove_stale_attempts(ObjectStaging(staging), older_than=0)) == 1
    assert keys(s3_server, s3_env) == ["killed/.binlog-staging"]    # the location keeps its marker
    # a harder kill leaves them: uploaded, never named by a manifest, so never read
    log2 = stage(Binlog(tmp_path / "2", staging=staging), 1)
    remote, work = log2.writer.remote, log2.writer.work_dir
    log2.writer._close_files()
    for path in work.rglob("*.parquet"):
        remote.upload(str(path), "mysql-bin.000001.4-mysql-bin.000001.104", "deadbeef" * 4, str(path.relative_to(work)))
    with pytest.raises(ManifestError, match="no manifest"):
        load_manifest(f"{staging}/mysql-bin.000001.4-mysql-bin.000001.104")
    assert remove_stale_attempts(remote) == []                     # young: it may still be uploading
    assert remove_stale_attempts(remote, older_than=0) == ["mysql-bin.000001.4-mysql-bin.000001.104/" + "deadbeef" * 4]
    assert keys(s3_server, s3_env) == ["killed/.binlog-staging"]


def test_a_published_batch_keeps_its_attempt_when_stale_attempts_are_removed(s3_server, s3_env, tmp_path):  # noqa: F811
    staging = f"s3://{s3_env}/kept"
    manifest = stage(Binlog(tmp_path, staging=staging), 1).publish()
    assert remove_stale_attempts(ObjectStaging(staging), older_than=0) == []
    assert load_manifest(manifest.ref, verify=True).dump_id == manifest.dump_id


@pytest.mark.parametrize("location, message", [
    ("ftp://host/x", "unknown staging scheme 'ftp'"),
    ("s3:///prefix", "names no bucket"),
    ("s3://bucket/p?endpoint=http://x", "takes no query"),
    ("s3://AKIAX:topsecret@bucket/p", "takes no credentials"),
])
def test_bad_staging_locations_are_refused_saying_why(location, message):
    with pytest.raises(StagingStorageError, match=message) as caught:
        StagingWriter(location) if not location.startswith("ftp") else local_path(location)
    assert "topsecret" not in str(caught.value)


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
    real = staging.store.client.put_object

    def ignoring(**kwargs):
        kwargs.pop("IfNoneMatch", None)
        return real(**kwargs)

    monkeypatch.setattr(staging.store.client, "put_object", ignoring)
    with pytest.raises(StagingStorageError, match="ignores conditional writes"):
        check_conditional_writes(staging)
    assert keys(s3_server, s3_env) == []


def test_cluster_deploy_mode_with_staging_on_s3_reads_the_result_from_the_store_and_removes_it(
        submitted, monkeypatch, s3_env):  # noqa: F811
    writer = StagingWriter(f"s3://{s3_env}/stage", workers=0)
    published = writer.publish(dump_id="mariadb-bin.000001.4-mariadb-bin.000001.400",
                               start={"file": "mariadb-bin.000001", "pos": 4},
                               end={"file": "mariadb-bin.000001", "pos": 400}, server={})
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({
        "conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=published.ref,
        lake=LakeSettings(namespace="shop_cdc", catalog_settings={"type": "rest", "uri": "http://iceberg-rest:8181"}),
        spark=SparkSettings(conn_id="spark_yarn", jars=[]),
        advance_checkpoint=False,
    )
    summary = op.execute(context={})
    assert summary["batches"] == [("mariadb-bin.000001.4-mariadb-bin.000001.400", "applied")]
    result = _value(submitted[0]["command"], "--output-json")
    assert result.startswith(f"s3://{s3_env}/stage/.merge-result-") and result.endswith(".json")
    assert read_bytes(result) is None  # read, then removed
    # no credential on the command line
    assert not any("testing" in part for part in submitted[0]["command"])


def aws_connection(monkeypatch, conn_id: str, server, **extra) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({
        "conn_type": "aws", "login": "testing", "password": "conn-secret-value",
        "extra": {"region_name": "us-east-1", "endpoint_url": server.endpoint, **extra}}))


def test_credentials_from_an_aws_connection_publish_without_any_in_the_environment(
        s3_server, tmp_path, monkeypatch):  # noqa: F811
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)
    bucket = s3_server.create_bucket()
    aws_connection(monkeypatch, "stage_s3", s3_server)
    options = staging_storage_options("stage_s3")
    assert (options.endpoint_url, options.region, options.access_key) == (s3_server.endpoint, "us-east-1", "testing")
    assert "conn-secret-value" not in repr(options)
    writer = StagingWriter(f"s3://{bucket}/conn", storage_options=options)
    published = writer.publish(dump_id="d1", start={}, end={}, server={})
    assert published.ref == f"s3://{bucket}/conn/d1/manifest.json"
    with pytest.raises(StagingStorageError, match="of type 'mysql'"):
        monkeypatch.setenv("AIRFLOW_CONN_NOT_AWS", json.dumps({"conn_type": "mysql", "host": "h"}))
        staging_storage_options("not_aws")


def test_the_merge_gets_the_connections_credentials_in_its_environment_never_on_its_command_line(
        submitted, s3_server, s3_env, monkeypatch):  # noqa: F811
    writer = StagingWriter(f"s3://{s3_env}/stage", workers=0)
    published = writer.publish(dump_id="mariadb-bin.000001.4-mariadb-bin.000001.400",
                               start={"file": "mariadb-bin.000001", "pos": 4},
                               end={"file": "mariadb-bin.000001", "pos": 400}, server={})
    aws_connection(monkeypatch, "stage_s3", s3_server, kms_key_id="alias/cdc")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=published.ref,
        staging=StagingRef(f"s3://{s3_env}/stage", conn_id="stage_s3"),
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", conf={"spark.sql.catalog.lake": "x"}),
        advance_checkpoint=False,
    )
    op.execute(context={})
    (call,) = submitted
    assert call["env"]["BINLOG_STAGING_SECRET_ACCESS_KEY"] == "conn-secret-value"
    assert "AWS_SECRET_ACCESS_KEY" not in call["env"] or call["env"]["AWS_SECRET_ACCESS_KEY"] != "conn-secret-value"
    assert call["env"]["BINLOG_STAGING_KMS_KEY_ID"] == "alias/cdc"
    assert not any("conn-secret-value" in part for part in call["command"])
    # a YARN or Kubernetes driver would get them as --conf options: refused, saying why
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn"}))
    yarn = BinlogMergeOperator(
        task_id="m2",
        manifests=published.ref,
        staging=StagingRef(f"s3://{s3_env}/stage", conn_id="stage_s3"),
        lake=LakeSettings(namespace="n"),
        spark=SparkSettings(conn_id="spark_yarn", conf={"spark.sql.catalog.lake": "x"}),
        advance_checkpoint=False,
    )
    with pytest.raises(Exception, match="cannot reach a yarn driver"):
        yarn.execute(context={})


def test_the_ui_view_lists_the_batches_of_a_staging_location_on_s3(s3_server, s3_env, tmp_path):  # noqa: F811
    from airflow_provider_binlog.plugins.batches import read_manifests

    log = Binlog(tmp_path, staging=f"s3://{s3_env}/ui")
    first = stage(log, 1).publish()
    second = stage(log, 10).publish()
    dumps, warnings = read_manifests([f"s3://{s3_env}/ui"])
    assert warnings == []
    assert [d["dump_id"] for d in dumps] == [second.dump_id, first.dump_id]
    assert dumps[0]["rows"]["insert"] == 3
    dumps, warnings = read_manifests(["s3://no-such-bucket/ui"])
    assert dumps == [] and "no-such-bucket" in warnings[0]


def test_a_manifest_created_whose_answer_was_lost_keeps_its_files(s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    """The create reached the store but its answer did not come back: retried, it is refused
    (412), or the dump is stopped. The files the manifest names must stay."""
    from airflow_provider_binlog.staging.remote import check_conditional_writes_once

    real = ObjectStaging.create_if_absent
    for where in ("lost", "stopped"):  # probed before the create is tampered with
        check_conditional_writes_once(ObjectStaging(f"s3://{s3_env}/{where}"))
    # 1. the retried create is refused: the batch is ours, the dump returns it
    with monkeypatch.context() as m:
        m.setattr(ObjectStaging, "create_if_absent", lambda self, data, *parts: real(self, data, *parts) and False)
        published = stage(Binlog(tmp_path / "a", staging=f"s3://{s3_env}/lost"), 1).publish()
    assert load_manifest(published.ref, verify=True).data == published.data
    # 2. the dump is stopped right after the create went through
    log = stage(Binlog(tmp_path / "b", staging=f"s3://{s3_env}/stopped"), 1)

    def create_then_stop(self, data, *parts):
        real(self, data, *parts)
        raise KeyboardInterrupt("stopped")

    with monkeypatch.context() as m:
        m.setattr(ObjectStaging, "create_if_absent", create_then_stop)
        with pytest.raises(KeyboardInterrupt):
            log.publish()
    (name,) = [k for k in keys(s3_server, s3_env) if k.startswith("stopped/") and k.endswith("manifest.json")]
    assert load_manifest(f"s3://{s3_env}/{name}", verify=True).tables[0]["rows"]["insert"] == 3


def test_a_create_that_failed_may_land_later_so_the_uploads_it_names_stay(  # noqa: F811
        s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    real = ObjectStaging.create_if_absent
    sent = {}

    def no_answer(self, data, *parts):
        if parts[-1] != "manifest.json":  # the store's probe
            return real(self, data, *parts)
        sent["create"] = (self, data, parts)
        raise ConnectionError("the store did not answer")

    log = stage(Binlog(tmp_path, staging=f"s3://{s3_env}/late"), 1)
    with monkeypatch.context() as m:
        m.setattr(ObjectStaging, "create_if_absent", no_answer)
        with pytest.raises(ConnectionError):
            log.publish()
    remote, data, parts = sent["create"]
    assert real(remote, data, *parts)                  # the request lands after all
    (name,) = [k for k in keys(s3_server, s3_env) if k.endswith("manifest.json")]
    assert load_manifest(f"s3://{s3_env}/{name}", verify=True).tables[0]["rows"]["insert"] == 3


def test_stale_attempts_of_a_nested_staging_location_are_not_taken_for_the_outer_ones(
        s3_server, s3_env, tmp_path):  # noqa: F811
    inner = stage(Binlog(tmp_path, staging=f"s3://{s3_env}/outer/team2"), 1).publish()
    assert remove_stale_attempts(ObjectStaging(f"s3://{s3_env}/outer"), older_than=0) == []
    assert load_manifest(inner.ref, verify=True).dump_id == inner.dump_id


def test_a_location_is_tidied_at_most_hourly_of_stale_uploads_and_unresumed_sealed_work(s3_server, s3_env, tmp_path):  # noqa: F811
    import time

    from airflow_provider_binlog.staging.tidy import tidy_location

    location = f"s3://{s3_env}/tidy"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    remote = ObjectStaging(location)
    remote.put(b"x", published.dump_id, "ab" * 16, "tables", "s.items", "part-00000.parquet")  # a killed attempt
    remote.put(b"{}", ".resumable", "dag__run__snapshot", "progress.json")                       # sealed, never resumed
    later = time.time() + 8 * 24 * 3600
    assert sorted(tidy_location(remote, now=later)) == [".resumable/dag__run__snapshot",
                                                        f"{published.dump_id}/{'ab' * 16}"]
    assert tidy_location(remote, now=later + 60) == []          # tidied a minute ago: not listed again
    assert load_manifest(published.ref, verify=True).dump_id == published.dump_id


def test_a_local_sealed_leftover_is_not_resumed_unless_the_store_keeps_that_same_seal(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/seal"
    log = stage(Binlog(tmp_path, staging=location), 1)
    log.writer.seal({"resume_key": "dag/run/snapshot", "chunk": 1})
    log.writer.release()                                   # the process "dies" with the work sealed
    resumed = StagingWriter.resume(location, "dag/run/snapshot", {("s", "items"): ITEMS})
    assert resumed is not None and resumed[1]["chunk"] == 1  # the same seal locally and on the store
    writer = resumed[0]
    writer.release()
    # the store no longer keeps it (published since): the local directory is a leftover
    remote = ObjectStaging(location)
    progress = [f".resumable/{o['Key']}" for o in remote.objects(".resumable") if o["Key"].endswith("progress.json")]
    assert len(progress) == 1
    remote.delete(progress)
    assert StagingWriter.resume(location, "dag/run/snapshot", {("s", "items"): ITEMS}) is None
