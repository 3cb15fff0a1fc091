"""Retention (staging.retention): a published batch is removed once every consumer's checkpoint
is past it (and it is old enough), batch by batch, manifest first; what is not merged by every
consumer, a snapshot a consumer sits at, sealed work, batches not published and other objects
stay. In a directory and on the S3-API server on loopback."""
from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest

from airflow_provider_binlog.checkpoints import Checkpoint
from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.retention import is_merged, remove_merged_batches
from airflow_provider_binlog.staging.storage import ObjectStaging, StagingStorageError
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.integration.test_merge_job import Binlog
from tests.integration.test_staging_object_store import ITEMS, keys, stage
from tests.s3_server import s3_env, s3_server  # noqa: F401

HOUR = 3600


def three_batches(tmp_path, staging) -> list:
    """Batches 4-104, 104-204 and 204-304 of mysql-bin.000001."""
    log = Binlog(tmp_path, staging=staging)
    return [stage(log, 10 * n).publish() for n in range(3)]


def at(pos: int, file: str = "mysql-bin.000001") -> Checkpoint:
    return Checkpoint(file=file, position=pos)


def snapshot(staging, pos: int):
    writer = StagingWriter(staging)
    writer.add_snapshot_rows(ITEMS, [(1, 1)], binlog_file="mysql-bin.000001", position=pos, gtid=None,
                             taken_at=dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), first_index=0)
    point = {"file": "mysql-bin.000001", "pos": pos}
    return writer.publish(dump_id=f"snapshot-mysql-bin.000001.{pos}-20240101T000000000000Z", start=point, end=point,
                          server={}, extra={"mode": "snapshot"})


def test_a_batch_goes_once_every_consumer_is_past_it_in_a_directory(tmp_path):
    staging = tmp_path / "staging"
    first, second, third = three_batches(tmp_path, staging)
    (staging / "mlruns" / "1").mkdir(parents=True)                       # another application's
    (staging / "mysql-bin.000001.304-mysql-bin.000001.404").mkdir()      # a dump that did not publish
    # two consumers: one at the end of the second batch, one at the end of the first
    assert remove_merged_batches(staging, [at(204), at(104)]) == [first.dump_id]
    assert remove_merged_batches(staging, [at(204), at(204)]) == [second.dump_id]
    assert sorted(p.name for p in staging.iterdir() if not p.name.startswith(".")) == sorted(
        [third.dump_id, "mlruns", "mysql-bin.000001.304-mysql-bin.000001.404"])
    assert load_manifest(staging / third.dump_id, verify=True).dump_id == third.dump_id


def test_a_minimum_age_keeps_young_batches(tmp_path):
    staging = tmp_path / "staging"
    first, _, _ = three_batches(tmp_path, staging)
    assert remove_merged_batches(staging, [at(104)], min_age=HOUR) == []
    assert remove_merged_batches(staging, [at(104)], min_age=HOUR, now=time.time() + 2 * HOUR) == [first.dump_id]


def test_a_snapshot_goes_once_every_consumer_is_after_it(tmp_path):
    staging = tmp_path / "staging"
    taken = snapshot(staging, 104)
    assert remove_merged_batches(staging, [at(104)]) == []          # placed there, maybe not merged yet
    assert remove_merged_batches(staging, [at(204)]) == [taken.dump_id]


def test_a_batch_that_cannot_be_ordered_with_a_checkpoint_stays(tmp_path):
    staging = tmp_path / "staging"
    three_batches(tmp_path, staging)
    assert remove_merged_batches(staging, [at(304), at(4, file="other-bin.000009")]) == []
    assert not is_merged({"format": "x"}, [at(304)])
    with pytest.raises(StagingStorageError, match="no checkpoint to keep batches from"):
        remove_merged_batches(staging, [])


def test_retention_on_s3_lists_per_batch_and_keeps_sealed_work_and_foreign_objects(
        s3_server, s3_env, tmp_path, monkeypatch):  # noqa: F811
    location = f"s3://{s3_env}"
    first, second, third = three_batches(tmp_path, location)
    remote = ObjectStaging(location)
    remote.put(b"{}", ".resumable", "dag__run__snapshot", "progress.json")
    foreign = [f"1/{uuid.uuid4().hex}/artifacts/model.pkl", f"uploads/{uuid.uuid4().hex}/report.csv"]
    for key in foreign:
        remote.put(b"x", key)
    listed, deleted = [], []
    real_objects, real_delete = ObjectStaging.objects, ObjectStaging.delete
    monkeypatch.setattr(ObjectStaging, "objects",
                        lambda self, *parts: listed.append(parts) or real_objects(self, *parts))
    monkeypatch.setattr(ObjectStaging, "delete", lambda self, names: deleted.append(names) or real_delete(self, names))
    assert sorted(remove_merged_batches(location, [at(204)])) == sorted([first.dump_id, second.dump_id])
    assert sorted(listed) == sorted([(first.dump_id,), (second.dump_id,)])   # each removed batch's prefix alone
    # each batch's manifest goes first: the batch is unpublished before its files go
    assert [names for names in deleted if len(names) == 1 and names[0].endswith("/manifest.json")] == deleted[::2]
    left = keys(s3_server, s3_env)
    assert not any(k.startswith((first.dump_id, second.dump_id)) for k in left)
    assert set(foreign) | {".resumable/dag__run__snapshot/progress.json", ".binlog-staging"} <= set(left)
    assert load_manifest(third.ref, verify=True).dump_id == third.dump_id


def test_retention_removes_nothing_from_a_location_without_the_marker(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/stage"
    first, _, _ = three_batches(tmp_path, location)
    ObjectStaging(location).delete([".binlog-staging"])
    assert remove_merged_batches(location, [at(304)]) == []
    assert load_manifest(first.ref, verify=True).dump_id == first.dump_id


def test_the_documented_lifecycle_rule_is_accepted_and_expires_no_object(s3_server, s3_env):  # noqa: F811
    """docs/configuration.md's lifecycle rules: a configuration S3 takes, with no expiration."""
    import json
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    rules = json.loads(re.search(r"<!-- lifecycle-rules -->\s*```json\n(.*?)```", text, re.S).group(1))
    client = s3_server.client()
    client.put_bucket_lifecycle_configuration(Bucket=s3_env, LifecycleConfiguration=rules)
    (rule,) = client.get_bucket_lifecycle_configuration(Bucket=s3_env)["Rules"]
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert not {"Expiration", "NoncurrentVersionExpiration", "Transitions"} & set(rule)
