"""What a staging location holds is input: anyone who can write the staging prefix (an
executor's role, another application) can forge the sealed work a snapshot resumes
(``.resumable/<key>/progress.json``) or a manifest. Forged paths are refused before anything
is written on the worker, downloaded or uploaded; documents and objects larger than the
provider writes are refused before they are read whole; each refusal is a typed error naming
the object and what to do."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from airflow_provider_binlog.errors import ProviderError
from airflow_provider_binlog.staging.confine import UntrustedObjectError
from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.remote import local_work_root
from airflow_provider_binlog.staging.storage import ObjectStaging, read_bytes, read_parquet
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.integration.test_merge_job import Binlog
from tests.integration.test_staging_object_store import ITEMS, keys, stage
from tests.s3_server import s3_env, s3_server  # noqa: F401

RESUME_KEY = "dag/run/snapshot"
PROGRESS_KEY = "dag%2Frun%2Fsnapshot"
SECRET = b"[database]\nsql_alchemy_conn = postgresql://airflow:hunter2@db/airflow\n"


@pytest.fixture(autouse=True)
def private_work_area(tmp_path, monkeypatch):
    """This test's own local work area: another test's sealed work of the same key is not adopted."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def sealed_on_the_store(location: str, tmp_path: Path) -> tuple[ObjectStaging, dict]:
    """Work sealed on the store by a machine that is gone (nothing of it in the local work
    area): the store and the progress it keeps."""
    log = stage(Binlog(tmp_path, staging=location), 1)
    log.writer.seal({"resume_key": RESUME_KEY, "chunk": 1})
    log.writer.release()
    shutil.rmtree(log.writer.work_dir)
    remote = ObjectStaging(location)
    return remote, json.loads(remote.read(".resumable", PROGRESS_KEY, "progress.json"))


def forge(remote: ObjectStaging, state: dict) -> None:
    remote.put(json.dumps(state).encode(), ".resumable", PROGRESS_KEY, "progress.json")


def work_dirs() -> set[str]:
    return {p.name for p in Path(local_work_root()).glob(".incomplete-*")}


def resume_and_publish(location: str) -> Exception:
    """Resume the forged work and publish it, as a retried snapshot would: the error raised."""
    try:
        resumed = StagingWriter.resume(location, RESUME_KEY, {("s", "items"): ITEMS})
        assert resumed is not None
        resumed[0].publish(dump_id="mysql-bin.000001.4-mysql-bin.000001.104", start={}, end={}, server={})
    except Exception as exc:  # noqa: BLE001 - what the caller checks
        return exc
    raise AssertionError("the forged work was resumed and published")


@pytest.mark.parametrize("form", ["absolute", "dot-dot"])
def test_a_forged_progress_that_names_a_file_outside_the_work_area_writes_nothing_there(
        s3_server, s3_env, tmp_path, form):  # noqa: F811
    location = f"s3://{s3_env}/resume"
    remote, state = sealed_on_the_store(location, tmp_path)
    target = tmp_path / "dags" / "planted_dag.py"
    target.parent.mkdir()
    (relative, where), = state["objects"].items()
    escape = str(target) if form == "absolute" else "../" + os.path.relpath(target, local_work_root())
    forge(remote, {**state, "objects": {escape: where}})
    before = work_dirs()
    error = resume_and_publish(location)
    assert not target.exists()
    assert work_dirs() == before                      # nothing written in the work area either
    assert isinstance(error, UntrustedObjectError)
    assert f"{location}/.resumable/{PROGRESS_KEY}/progress.json" in error.message
    assert escape in error.message and "delete" in error.hint


@pytest.mark.parametrize("form", ["absolute", "dot-dot"])
def test_a_forged_progress_cannot_make_publish_upload_a_local_file(s3_server, s3_env, tmp_path, form):  # noqa: F811
    location = f"s3://{s3_env}/upload"
    remote, state = sealed_on_the_store(location, tmp_path)
    secret = tmp_path / "airflow" / "airflow.cfg"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    path = str(secret) if form == "absolute" else "tables/../../" + os.path.relpath(secret, local_work_root())
    (name, files), = state["files"].items()
    desc = {**files[0][1], "path": path, "bytes": len(SECRET), "sha256": hashlib.sha256(SECRET).hexdigest()}
    forge(remote, {**state, "files": {name: [[0, desc]]}, "objects": {}})
    error = resume_and_publish(location)
    client = s3_server.client()
    bodies = [client.get_object(Bucket=s3_env, Key=k)["Body"].read() for k in keys(s3_server, s3_env)]
    assert not any(b"hunter2" in body for body in bodies)
    assert not any("manifest.json" in k for k in keys(s3_server, s3_env))
    assert isinstance(error, UntrustedObjectError)
    assert "progress.json" in error.message and path in error.message


def test_a_forged_progress_cannot_copy_another_object_of_the_bucket_into_a_batch(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/copy"
    remote, state = sealed_on_the_store(location, tmp_path)
    remote.put(SECRET, "other-application", "credentials")
    (relative, _where), = state["objects"].items()
    forge(remote, {**state, "objects": {relative: "../../other-application/credentials"}})
    before = work_dirs()
    error = resume_and_publish(location)
    assert work_dirs() == before
    assert not any("manifest.json" in k for k in keys(s3_server, s3_env))
    assert isinstance(error, UntrustedObjectError)
    assert "progress.json" in error.message and "../../other-application/credentials" in error.message


def test_an_oversized_progress_document_is_refused_before_it_is_read(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/large"
    remote, state = sealed_on_the_store(location, tmp_path)
    body = json.dumps(state).encode()
    remote.put(body + b" " * (64 * 1024 * 1024 + 1 - len(body)), ".resumable", PROGRESS_KEY, "progress.json")
    before = work_dirs()
    with pytest.raises(ProviderError, match="larger than 67108864 bytes") as caught:
        StagingWriter.resume(location, RESUME_KEY, {("s", "items"): ITEMS})
    assert f"{location}/.resumable/{PROGRESS_KEY}/progress.json" in caught.value.message
    assert work_dirs() == before


def test_a_sealed_object_larger_than_its_progress_records_is_not_downloaded(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/grown"
    remote, state = sealed_on_the_store(location, tmp_path)
    (relative, where), = state["objects"].items()
    remote.put(os.urandom(1 << 20), ".resumable", PROGRESS_KEY, where)   # replaced by a larger object
    before = work_dirs()
    with pytest.raises(ProviderError, match="bytes") as caught:
        StagingWriter.resume(location, RESUME_KEY, {("s", "items"): ITEMS})
    assert where in caught.value.message
    assert work_dirs() == before


def test_an_oversized_manifest_and_an_oversized_small_file_are_refused(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/manifests"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    body = json.dumps(published.data).encode()
    big = body + b" " * (64 * 1024 * 1024 + 1 - len(body))
    ObjectStaging(location).put(big, published.dump_id, "manifest.json")
    with pytest.raises(ProviderError, match="larger than 67108864 bytes"):
        load_manifest(published.ref)
    with pytest.raises(ProviderError, match="larger than 67108864 bytes"):
        read_bytes(published.ref)


@pytest.mark.parametrize("form", ["outside tables/", "another attempt's"])
def test_a_manifest_that_lists_files_outside_its_attempt_is_refused(s3_server, s3_env, tmp_path, form):  # noqa: F811
    location = f"s3://{s3_env}/foreign"
    published = stage(Binlog(tmp_path, staging=location), 1).publish()
    remote = ObjectStaging(location)
    data = json.loads(remote.read(published.dump_id, "manifest.json"))
    entry = data["tables"][0]["files"][0]
    body = remote.read(published.dump_id, entry["path"])
    foreign = "other-application/model.parquet" if form == "outside tables/" else \
        f"{'ab' * 16}/tables/s.items/part-00000.parquet"
    remote.put(body, published.dump_id, foreign)         # the same bytes: sizes and hashes match
    entry["path"] = foreign
    remote.put(json.dumps(data).encode(), published.dump_id, "manifest.json")
    with pytest.raises(ProviderError, match="manifest.json") as caught:
        load_manifest(published.ref, verify=True)
    assert foreign in caught.value.message


def test_a_document_above_its_bound_is_refused_on_s3_before_its_body_is_read(s3_server, s3_env):  # noqa: F811
    remote = ObjectStaging(f"s3://{s3_env}/bounded")
    remote.put(b"x" * 100, "doc.json")
    remote.put(b"", "empty.json")
    with pytest.raises(UntrustedObjectError, match=r"doc.json: the object is larger than 10 bytes \(100\)"):
        remote.read("doc.json", limit=10)
    assert remote.read("doc.json", limit=100) == b"x" * 100
    assert remote.read("empty.json", limit=10) == b""
    assert remote.read("absent.json", limit=10) is None


def test_a_sealed_object_of_the_recorded_size_but_other_bytes_is_refused(s3_server, s3_env, tmp_path):  # noqa: F811
    location = f"s3://{s3_env}/swapped"
    remote, state = sealed_on_the_store(location, tmp_path)
    (relative, where), = state["objects"].items()
    size = len(remote.read(".resumable", PROGRESS_KEY, where))
    remote.put(os.urandom(size), ".resumable", PROGRESS_KEY, where)
    before = work_dirs()
    with pytest.raises(UntrustedObjectError, match="not the sealed file its progress records"):
        StagingWriter.resume(location, RESUME_KEY, {("s", "items"): ITEMS})
    assert work_dirs() == before


def test_genuine_sealed_work_with_part_and_row_files_resumes_from_the_store(s3_server, s3_env, tmp_path):  # noqa: F811
    import datetime as dt

    import pyarrow as pa

    location = f"s3://{s3_env}/genuine"
    writer = StagingWriter(location)
    taken = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    at = {"binlog_file": "mysql-bin.000001", "position": 4, "gtid": None, "taken_at": taken}
    writer.add_snapshot_arrays(ITEMS, [pa.array([1, 2], pa.int32()), pa.array([10, 20], pa.int32())], **at,
                               first_index=0)
    writer.seal({"resume_key": RESUME_KEY, "chunk": 1})
    writer.add_snapshot_rows(ITEMS, [(3, 30)], **at, first_index=2)
    writer.seal({"resume_key": RESUME_KEY, "chunk": 2})
    writer.release()
    shutil.rmtree(writer.work_dir)                      # the machine that sealed it is gone
    resumed, progress = StagingWriter.resume(location, RESUME_KEY, {("s", "items"): ITEMS})
    assert progress["chunk"] == 2
    point = {"file": "mysql-bin.000001", "pos": 4}
    manifest = resumed.publish(dump_id="snapshot-mysql-bin.000001.4-20240101T000000000000Z", start=point, end=point,
                               server={}, extra={"mode": "snapshot"})
    names = [f["path"].split("/", 1)[1] for f in manifest.tables[0]["files"]]
    assert names == ["tables/s.items/rows-00000.parquet", "tables/s.items/part-00000-s00001.parquet"]
    loaded = load_manifest(manifest.ref, verify=True)
    rows = [r for path in loaded.files(loaded.tables[0]) for r in read_parquet(str(path)).to_pylist()]
    assert sorted((r["_after"]["id"], r["_after"]["v"]) for r in rows) == [(1, 10), (2, 20), (3, 30)]
