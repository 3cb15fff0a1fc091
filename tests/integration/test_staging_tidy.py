"""The tidy of a staging location touches only its own: the location must carry the marker a
writer leaves when it first uses it; only names of the batch-id grammar are considered; a
batch's manifest is read (a listing that misses it decides nothing) before anything of the
batch is deleted, and a manifest naming no attempt keeps them all; an object the store would
not delete is reported. Against the S3-API server on loopback."""
from __future__ import annotations

import json
import time
import uuid

import pytest

from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.storage import ObjectStaging, StagingStorageError
from airflow_provider_binlog.staging.tidy import MARKER_NAME, remove_stale_attempts, tidy_location
from tests.integration.test_merge_job import Binlog
from tests.integration.test_staging_object_store import keys, stage
from tests.s3_server import s3_env, s3_server  # noqa: F401

THREE_DAYS = 3 * 24 * 3600
KILLED = "mysql-bin.000001.104-mysql-bin.000001.204"   # a dump killed before it published


def put(server, bucket: str, key: str, body: bytes = b"x") -> None:
    server.client().put_object(Bucket=bucket, Key=key, Body=body)


def test_a_tidy_at_a_bucket_root_keeps_another_applications_objects(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    foreign = [f"1/{uuid.uuid4().hex}/artifacts/model.pkl",           # an MLflow run at the bucket root
               f"uploads/{uuid.uuid4().hex}/report.csv",
               f"{uuid.uuid4().hex}/{uuid.uuid4().hex}/data.bin"]
    for key in foreign:
        put(s3_server, s3_env, key)
    killed = f"{KILLED}/{'ab' * 16}/tables/s.items/part-00000.parquet"
    put(s3_server, s3_env, killed)
    removed = tidy_location(ObjectStaging(location), now=time.time() + THREE_DAYS)
    assert removed == [f"{KILLED}/{'ab' * 16}"]
    assert set(foreign) <= set(keys(s3_server, s3_env)) and killed not in keys(s3_server, s3_env)
    assert load_manifest(published.ref, verify=True).dump_id == published.dump_id


def test_a_location_without_the_marker_is_never_tidied(s3_server, s3_env, tmp_path):  # noqa: F811
    unmarked = f"s3://{s3_env}/elsewhere"
    put(s3_server, s3_env, f"elsewhere/{KILLED}/{'ab' * 16}/tables/s.items/part-00000.parquet")
    assert remove_stale_attempts(ObjectStaging(unmarked), older_than=0) == []
    assert tidy_location(ObjectStaging(unmarked), now=time.time() + THREE_DAYS) == []
    assert f"elsewhere/{KILLED}/{'ab' * 16}/tables/s.items/part-00000.parquet" in keys(s3_server, s3_env)
    stage(Binlog(tmp_path, staging=f"s3://{s3_env}/stage"), 1).publish()
    assert f"stage/{MARKER_NAME}" in keys(s3_server, s3_env)          # left by the first publish there


def test_the_manifest_is_read_before_an_attempt_is_deleted_whatever_the_listing_says(
        s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    location = f"s3://{s3_env}/listing"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    real = ObjectStaging.objects
    with monkeypatch.context() as m:  # a listing that misses the manifest (a page lost, a replica behind)
        m.setattr(ObjectStaging, "objects", lambda self, *parts: [
            o for o in real(self, *parts) if not o["Key"].endswith("manifest.json")])
        assert remove_stale_attempts(ObjectStaging(location), older_than=0) == []
    assert load_manifest(published.ref, verify=True).dump_id == published.dump_id


def test_a_manifest_that_names_no_attempt_keeps_every_attempt_of_its_batch(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/noattempt"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    remote = ObjectStaging(location)
    data = json.loads(remote.read(published.dump_id, "manifest.json"))
    del data["attempt"]
    remote.put(json.dumps(data).encode(), published.dump_id, "manifest.json")
    put(s3_server, s3_env, f"noattempt/{published.dump_id}/{'cd' * 16}/tables/s.items/part-00000.parquet")
    before = keys(s3_server, s3_env)
    assert remove_stale_attempts(remote, older_than=0) == []
    assert keys(s3_server, s3_env) == before


def test_objects_an_s3_batch_delete_refused_are_reported(s3_server, s3_env, monkeypatch):  # noqa: F811
    remote = ObjectStaging(f"s3://{s3_env}/refused")
    remote.put(b"x", "a")
    remote.put(b"y", "b")
    real = remote.store.client.delete_objects

    def one_refused(**kwargs):
        answer = real(**kwargs)
        return {**answer, "Errors": [{"Key": "refused/b", "Code": "AccessDenied", "Message": "Access Denied"}]}

    monkeypatch.setattr(remote.store.client, "delete_objects", one_refused)
    with pytest.raises(StagingStorageError, match=r"1 of 2 objects were not deleted: refused/b \(AccessDenied\)"):
        remote.delete(["a", "b"])
