"""Staged objects of any size: a part file ends once it reaches its size (1 GiB by default)
and the table's next rows go to another, and a staged file above S3's part size is uploaded in
parts (S3 refuses one PUT above 5 GiB), with its SSE-KMS settings, the upload aborted when a
part fails. Here with both sizes lowered, against the S3-API server on loopback."""
from __future__ import annotations

import dataclasses
import hashlib
import datetime as dt
import os

import pytest

from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.parts import PART_FILE_BYTES
from airflow_provider_binlog.staging.storage import StagingStorageError, StorageOptions, read_parquet
from airflow_provider_binlog.staging.stores import s3 as s3_store
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.integration.test_merge_job import col, table_map
from tests.s3_server import s3_env, s3_server  # noqa: F401

MIB = 1 << 20
BLOBS = table_map("s", "blobs", [col(0, "id", C.MYSQL_TYPE_LONG, primary_key=True, nullable=False),
                                 col(1, "payload", C.MYSQL_TYPE_BLOB, 2, text=False)])
TAKEN = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
DUMP = "mysql-bin.000001.4-mysql-bin.000001.4"


def stage_payloads(writer: StagingWriter, payloads: list[bytes]) -> None:
    """One MiB (incompressible) per row, two rows per row group."""
    for first in range(0, len(payloads), 2):
        rows = [(i, payloads[i]) for i in range(first, min(first + 2, len(payloads)))]
        writer.add_snapshot_rows(BLOBS, rows, binlog_file="mysql-bin.000001", position=4, gtid=None,
                                 taken_at=TAKEN, first_index=first)


def publish(writer: StagingWriter):
    return writer.publish(dump_id=DUMP, start={"file": "mysql-bin.000001", "pos": 4},
                          end={"file": "mysql-bin.000001", "pos": 4}, server={}, extra={"mode": "snapshot"})


def test_the_documented_sizes():
    assert PART_FILE_BYTES == 1 << 30 and s3_store.PART_BYTES == 64 * MIB


def test_part_files_roll_at_their_size_and_each_goes_up_in_parts_with_its_encryption(
        s3_server, s3_env, monkeypatch):  # noqa: F811
    monkeypatch.setattr(s3_store, "PART_BYTES", 5 * MIB)      # S3's smallest part
    options = dataclasses.replace(StorageOptions.from_env(), kms_key_id="alias/cdc-staging")
    writer = StagingWriter(f"s3://{s3_env}/big", storage_options=options, row_group_rows=2,
                           part_file_bytes=6 * MIB)
    payloads = [os.urandom(MIB) for _ in range(24)]
    stage_payloads(writer, payloads)
    manifest = publish(writer)
    files = manifest.tables[0]["files"]
    # each file ends once it holds 6 MiB (counting row groups on their way at their Arrow size)
    assert [f["rows"] for f in files] == [6, 6, 6, 6] and all(6 * MIB <= f["bytes"] < 7 * MIB for f in files)
    assert [f["path"].rsplit("/", 1)[1] for f in files] == ["part-00000.parquet"] + [
        f"part-00000-r0000{n}.parquet" for n in (1, 2, 3)]
    client = s3_server.client()
    for f in files:
        head = client.head_object(Bucket=s3_env, Key=f"big/{DUMP}/{f['path']}")
        assert head["ETag"].strip('"').endswith("-2")   # a multipart upload's: 5 MiB and the rest
        assert (head["ServerSideEncryption"], head["SSEKMSKeyId"]) == ("aws:kms", "alias/cdc-staging")
    assert client.list_multipart_uploads(Bucket=s3_env).get("Uploads", []) == []
    loaded = load_manifest(manifest.ref, verify=True)
    rows = [r for path in loaded.files(loaded.tables[0]) for r in read_parquet(str(path)).to_pylist()]
    digest = [(r["_after"]["id"], hashlib.sha256(r["_after"]["payload"]).hexdigest()) for r in rows]
    assert sorted(digest) == [(i, hashlib.sha256(p).hexdigest()) for i, p in enumerate(payloads)]


def test_a_part_that_fails_aborts_its_upload_and_nothing_is_published(s3_server, s3_env, monkeypatch):  # noqa: F811
    from botocore.exceptions import EndpointConnectionError

    monkeypatch.setattr(s3_store, "PART_BYTES", 5 * MIB)
    writer = StagingWriter(f"s3://{s3_env}/failed", row_group_rows=2)
    stage_payloads(writer, [os.urandom(MIB) for _ in range(12)])

    def second_part_fails(params, **_):
        if params.get("PartNumber") == 2:
            raise EndpointConnectionError(endpoint_url=s3_server.endpoint)

    writer.remote.store.client.meta.events.register("before-parameter-build.s3.UploadPart", second_part_fails)
    with pytest.raises(StagingStorageError, match=f"writing s3://{s3_env}/failed/{DUMP}/.*part-00000.parquet"):
        publish(writer)
    client = s3_server.client()
    assert client.list_multipart_uploads(Bucket=s3_env).get("Uploads", []) == []   # aborted: no parts kept
    listed = [o["Key"] for o in client.list_objects_v2(Bucket=s3_env, Prefix="failed/").get("Contents", [])]
    assert not any(k.endswith("manifest.json") or k.endswith(".parquet") for k in listed)
