"""Staging on Google Cloud Storage and Azure Blob Storage, as on S3: batches published by one
conditional write of the manifest (GCS ``ifGenerationMatch=0``, Azure ``If-None-Match: *``),
read back through pyarrow's filesystems, two dumps of one range publishing once, a killed
dump's uploads removed later, a store ignoring the condition refused, a missing bucket and
denied credentials named. Against a GCS emulator and Azurite on loopback
(``tests/object_stores.py``)."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from airflow_provider_binlog.staging.manifest import ManifestError, load_manifest
from airflow_provider_binlog.staging.remote import prepare_location_once
from airflow_provider_binlog.staging.tidy import remove_stale_attempts
from airflow_provider_binlog.staging.storage import (
    ObjectLocation,
    ObjectStaging,
    StagingStorageError,
    StorageOptions,
    check_conditional_writes,
    filesystem,
    read_bytes,
    write_bytes,
)
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.integration.test_merge_job import Binlog
from tests.integration.test_staging_object_store import stage
from tests.object_stores import (  # noqa: F401
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    azure_env,
    azure_server,
    gcs_env,
    gcs_plain_server,
    gcs_server,
)


@pytest.fixture(params=["gcs", "azure"])
def location(request) -> str:
    """A fresh bucket (container) of either store, with the process's environment pointed at it."""
    if request.param == "gcs":
        return f"gs://{request.getfixturevalue('gcs_env')}"
    return request.getfixturevalue("azure_env")


def names(location: str) -> list[str]:
    return sorted(o["Key"] for o in ObjectStaging(location).objects())


def test_a_batch_is_published_with_its_manifest_last_and_reads_back_through_pyarrow(location, tmp_path):
    manifest = stage(Binlog(tmp_path, staging=f"{location}/cdc/shop"), 1).publish()
    assert manifest.ref == f"{location}/cdc/shop/{manifest.dump_id}/manifest.json"
    (entry,) = manifest.tables
    (path,) = manifest.files(entry)
    attempt = entry["files"][0]["path"].split("/")[0]
    assert path.startswith(f"{location}/cdc/shop/{manifest.dump_id}/{attempt}/tables/")
    fs, inner = filesystem(path)
    assert sorted(r["id"] for r in pq.read_table(inner, filesystem=fs).column("_after").to_pylist()) == [1, 2, 3]
    assert load_manifest(manifest.ref, verify=True).data == manifest.data
    assert f"cdc/shop/{manifest.dump_id}/manifest.json" in names(location)
    # the Binlog CDC view lists it as it lists a directory's batches (it lists "directories"
    # with a delimiter, which the GCS emulator does not implement: checked on Azure)
    from airflow_provider_binlog.plugins.batches import read_manifests

    if location.startswith("gs://"):
        return
    dumps, warnings = read_manifests([f"{location}/cdc/shop"])
    assert warnings == [] and [(d["dump_id"], d["rows"]["insert"]) for d in dumps] == [(manifest.dump_id, 3)]


def test_two_dumps_of_one_range_publish_once_and_the_loser_keeps_the_winners_batch(location, tmp_path):
    staging = f"{location}/race"
    first, second = stage(Binlog(tmp_path / "a", staging=staging), 1), stage(Binlog(tmp_path / "b", staging=staging), 1)
    won = first.publish()
    assert second.publish().data == won.data
    attempts = {k.split("/")[2] for k in names(location) if k.count("/") >= 3}
    assert attempts == {won.tables[0]["files"][0]["path"].split("/")[0]}


def test_a_killed_dumps_uploads_are_never_read_and_removed_once_stale(location, tmp_path):
    staging = f"{location}/killed"
    log = stage(Binlog(tmp_path, staging=staging), 1)
    remote, work = log.writer.remote, log.writer.work_dir
    log.writer._close_files()
    prepare_location_once(remote)                 # what a publish does first: the location gets its marker
    batch = "mysql-bin.000001.4-mysql-bin.000001.104"
    for path in work.rglob("*.parquet"):
        remote.upload(str(path), batch, "deadbeef" * 4, str(path.relative_to(work)))
    with pytest.raises(ManifestError, match="no manifest"):
        load_manifest(f"{staging}/{batch}")
    assert remove_stale_attempts(remote) == []
    assert remove_stale_attempts(remote, older_than=0) == [f"{batch}/" + "deadbeef" * 4]
    assert names(location) == ["killed/.binlog-staging"]


def test_small_files_are_written_replaced_read_and_deleted(location):
    write_bytes(f"{location}/x/state.json", b"1")
    write_bytes(f"{location}/x/state.json", b"2")
    assert read_bytes(f"{location}/x/state.json") == b"2"
    assert read_bytes(f"{location}/x/none.json") is None
    ObjectStaging(f"{location}/x").delete(["state.json", "never-there.json"])
    assert names(location) == []


def test_a_gcs_store_that_ignores_if_generation_match_is_refused_before_anything_is_uploaded(
        gcs_plain_server, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_plain_server.endpoint)
    bucket = gcs_plain_server.create_bucket()
    with pytest.raises(StagingStorageError, match="ignores conditional writes") as caught:
        check_conditional_writes(ObjectStaging(f"gs://{bucket}/probe"))
    assert "local path" in caught.value.hint
    log = stage(Binlog(tmp_path, staging=f"gs://{bucket}/cdc"), 1)
    with pytest.raises(StagingStorageError, match="ignores conditional writes"):
        log.publish()
    assert names(f"gs://{bucket}") == []


def test_a_missing_bucket_or_container_is_named(location, tmp_path):
    other = location.replace("//stage-", "//missing-", 1)
    log = stage(Binlog(tmp_path, staging=f"{other}/x"), 1)
    with pytest.raises(StagingStorageError, match=r"(bucket|container) 'missing-[0-9a-f]+' does not exist"):
        log.publish()


def test_a_wrong_azure_key_is_reported_as_denied_without_the_secret(azure_server, tmp_path, monkeypatch):  # noqa: F811
    container = azure_server.create_container()
    wrong = "d3JvbmcgYWNjb3VudCBrZXkgdmFsdWUgd3JvbmcgYWNjb3VudCBrZXkgdmFsdWUgd3Jvbmc="
    options = StorageOptions(endpoint_url=azure_server.endpoint, account_name=AZURITE_ACCOUNT, account_key=wrong)
    writer = StagingWriter(azure_server.location(container, "x"), storage_options=options)
    with pytest.raises(StagingStorageError, match="denied access") as caught:
        writer.publish(dump_id="d", start={}, end={}, server={})
    assert wrong not in str(caught.value) and wrong not in repr(options)


def test_an_azure_location_without_an_account_says_where_to_give_one(monkeypatch):
    for name in ("AZURE_STORAGE_ACCOUNT", "BINLOG_STAGING_ACCOUNT_NAME"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(StagingStorageError, match="names no storage account") as caught:
        ObjectStaging("abfs://container/prefix").read("x")
    assert "CONTAINER@ACCOUNT" in caught.value.hint


def test_azure_and_gcs_locations_parse_into_container_account_and_keys():
    azure = ObjectLocation.parse("abfss://lake@acct.dfs.core.windows.net/cdc/shop")
    assert (azure.store, azure.container, azure.account, azure.key("b", "manifest.json")) == (
        "azure", "lake", "acct", "cdc/shop/b/manifest.json")
    assert azure.uri("b") == "abfss://lake@acct.dfs.core.windows.net/cdc/shop/b"
    gcs = ObjectLocation.parse("gs://bucket/a/b")
    assert (gcs.store, gcs.container, gcs.account, gcs.uri("c")) == ("gcs", "bucket", None, "gs://bucket/a/b/c")
    with pytest.raises(StagingStorageError, match="names no bucket"):
        ObjectLocation.parse("abfs://@acct.dfs.core.windows.net/x")


def test_the_options_travel_as_the_stagings_own_variables_secrets_included_and_back(monkeypatch):
    options = StorageOptions(project="p1", credentials_json='{"type": "service_account"}', account_name="acct",
                             account_key="k3y", sas_token="sv=1", kms_key_id="scope-1",
                             endpoint_url="http://127.0.0.1:1")
    env = options.to_env()
    assert env["BINLOG_STAGING_ACCOUNT_KEY"] == "k3y" and env["BINLOG_STAGING_CREDENTIALS_JSON"].startswith("{")
    assert StorageOptions.from_env(env) == options
    assert "k3y" not in repr(options) and "service_account" not in repr(options) and "sv=1" not in repr(options)
    # the standard variables where the staging's own are unset; endpoints per store
    standard = {"AZURE_STORAGE_ACCOUNT": "a2", "AZURE_STORAGE_KEY": "k2", "GOOGLE_CLOUD_PROJECT": "p2",
                "STORAGE_EMULATOR_HOST": "http://gcs:1", "AWS_ENDPOINT_URL": "http://s3:1"}
    got = StorageOptions.from_env(standard)
    assert (got.account_name, got.account_key, got.project, got.endpoint_url) == ("a2", "k2", "p2", None)
    assert [got.endpoint_for(s, standard) for s in ("s3", "gcs", "azure")] == ["http://s3:1", "http://gcs:1", None]


def test_a_google_service_account_key_that_cannot_be_read_is_refused_saying_what_to_give():
    options = StorageOptions(credentials_json=json.dumps({"type": "service_account"}))
    with pytest.raises(StagingStorageError, match="service account key cannot be used") as caught:
        filesystem("gs://bucket/x", options)
    assert "keyfile_dict" in caught.value.hint


def clear_store_env(monkeypatch) -> None:
    for name in ("STORAGE_EMULATOR_HOST", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY", "GOOGLE_CLOUD_PROJECT",
                 "BINLOG_STAGING_ENDPOINT_URL", "BINLOG_STAGING_ACCOUNT_NAME", "BINLOG_STAGING_ACCOUNT_KEY"):
        monkeypatch.delenv(name, raising=False)


def connection(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_a_wasb_connection_publishes_to_azure_with_nothing_in_the_environment(azure_server, tmp_path, monkeypatch):  # noqa: F811
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    clear_store_env(monkeypatch)
    container = azure_server.create_container()
    connection(monkeypatch, "stage_az", conn_type="wasb", login=AZURITE_ACCOUNT, password=AZURITE_KEY,
               host=azure_server.endpoint, extra={"encryption_scope": ""})
    options = staging_storage_options("stage_az")
    assert (options.account_name, options.endpoint_url) == (AZURITE_ACCOUNT, azure_server.endpoint)
    assert AZURITE_KEY not in repr(options)
    location = f"abfs://{container}/conn"                       # the account comes from the connection
    published = StagingWriter(location, storage_options=options).publish(dump_id="d1", start={}, end={}, server={})
    assert published.ref == f"{location}/d1/manifest.json"
    assert load_manifest(published.ref, verify=True, options=options).dump_id == "d1"
    # the same through a connection string, as the Azure provider's form allows
    connection(monkeypatch, "stage_az_cs", conn_type="wasb", extra={"connection_string": (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={azure_server.endpoint};")})
    assert staging_storage_options("stage_az_cs") == options


def test_a_google_connection_gives_its_key_project_endpoint_and_kms_key(gcs_server, tmp_path, monkeypatch):  # noqa: F811
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    clear_store_env(monkeypatch)
    key = {"type": "service_account", "project_id": "acme", "client_email": "cdc@acme.iam.gserviceaccount.com"}
    connection(monkeypatch, "stage_gcp", conn_type="google_cloud_platform", extra={
        "keyfile_dict": key, "project": "acme", "kms_key_name": "projects/acme/locations/eu/keyRings/r/cryptoKeys/k"})
    options = staging_storage_options("stage_gcp")
    assert json.loads(options.credentials_json) == key and options.project == "acme"
    assert options.kms_key_id.endswith("cryptoKeys/k") and "cdc@acme" not in repr(options)
    connection(monkeypatch, "stage_gcp_old", conn_type="google_cloud_platform", extra={
        "extra__google_cloud_platform__key_path": "/secrets/key.json"})
    assert staging_storage_options("stage_gcp_old").credentials_file == "/secrets/key.json"
    # an emulator's endpoint and no key: reached anonymously, nothing from the environment
    connection(monkeypatch, "stage_gcs_local", conn_type="google_cloud_platform",
               extra={"endpoint_url": gcs_server.endpoint})
    local = staging_storage_options("stage_gcs_local")
    bucket = gcs_server.create_bucket()
    published = StagingWriter(f"gs://{bucket}/conn", storage_options=local).publish(
        dump_id="d1", start={}, end={}, server={})
    assert load_manifest(published.ref, verify=True, options=local).dump_id == "d1"


def test_a_connection_of_another_type_is_refused_naming_the_three_it_takes(monkeypatch):
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    connection(monkeypatch, "not_a_store", conn_type="mysql", host="h")
    with pytest.raises(StagingStorageError, match="of type 'mysql'") as caught:
        staging_storage_options("not_a_store")
    assert all(t in caught.value.hint for t in ("'aws'", "'google_cloud_platform'", "'wasb'"))


def test_a_location_with_a_pasted_sas_token_is_refused_without_showing_it():
    with pytest.raises(StagingStorageError) as caught:
        ObjectLocation.parse("abfs://c@acct.dfs.core.windows.net/x?sv=2024&sig=SECRETSIGNATURE")
    assert "takes no query" in str(caught.value) and "SECRETSIGNATURE" not in str(caught.value)
    with pytest.raises(StagingStorageError) as caught:
        ObjectLocation.parse("ftp://user:hunter2@host/x")
    assert "hunter2" not in str(caught.value)


def test_a_credential_comes_whole_from_the_stagings_own_variables_never_half_from_the_standard_ones():
    env = {"BINLOG_STAGING_ACCESS_KEY_ID": "AKIAOWN", "BINLOG_STAGING_SECRET_ACCESS_KEY": "own-secret",
           "AWS_SESSION_TOKEN": "someone-elses-token", "AWS_REGION": "eu-west-1"}
    got = StorageOptions.from_env(env)
    assert (got.access_key, got.secret_key, got.session_token, got.region) == ("AKIAOWN", "own-secret", None,
                                                                               "eu-west-1")
    standard = StorageOptions.from_env({"AWS_ACCESS_KEY_ID": "AKIASTD", "AWS_SECRET_ACCESS_KEY": "s",
                                        "AWS_SESSION_TOKEN": "t"})
    assert (standard.access_key, standard.session_token) == ("AKIASTD", "t")


def test_a_google_key_file_travels_to_the_executors_as_its_content(tmp_path):
    key = tmp_path / "key.json"
    key.write_text('{"type": "service_account"}')
    resolved = StorageOptions(credentials_file=str(key)).for_store("gcs")
    assert (resolved.credentials_json, resolved.credentials_file) == ('{"type": "service_account"}', None)
    with pytest.raises(StagingStorageError, match="cannot be read"):
        StorageOptions(credentials_file=str(tmp_path / "none.json")).for_store("gcs")


def test_only_a_plain_http_gcs_endpoint_is_taken_for_an_emulator_and_reached_anonymously():
    from airflow_provider_binlog.staging.stores.gcs import _emulator

    assert _emulator("http://127.0.0.1:4443") and _emulator("localhost:4443")
    assert not _emulator("https://storage-psc.p.googleapis.com") and not _emulator(None)


def test_an_azure_endpoint_of_another_cloud_keeps_the_account_in_the_host_for_pyarrow(monkeypatch):
    import pyarrow.fs as pafs

    from airflow_provider_binlog.staging.stores.azure import azure_filesystem

    seen = {}
    monkeypatch.setattr(pafs, "AzureFileSystem", lambda **kwargs: seen.update(kwargs))
    location = ObjectLocation.parse("abfs://lake@acct.dfs.core.chinacloudapi.cn/x")
    azure_filesystem(location, StorageOptions(endpoint_url="https://acct.blob.core.chinacloudapi.cn",
                                              account_key="k"))
    assert (seen["blob_storage_authority"], seen["dfs_storage_authority"]) == (".blob.core.chinacloudapi.cn",
                                                                               ".dfs.core.chinacloudapi.cn")
    azure_filesystem(location, StorageOptions(endpoint_url="http://127.0.0.1:10000/acct", account_key="k"))
    assert seen["blob_storage_authority"] == "127.0.0.1:10000" and seen["blob_storage_scheme"] == "http"


def test_a_wasb_service_principal_connection_is_refused_saying_what_staging_takes(monkeypatch):
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    connection(monkeypatch, "stage_sp", conn_type="wasb", login="client-id", password="client-secret",
               extra={"tenant_id": "t-1"})
    with pytest.raises(StagingStorageError, match="service principal") as caught:
        staging_storage_options("stage_sp")
    assert "client-secret" not in str(caught.value) and "managed or workload identity" in caught.value.hint


def test_a_document_above_its_bound_is_refused_before_its_body_is_read(location):
    from airflow_provider_binlog.staging.confine import UntrustedObjectError

    remote = ObjectStaging(f"{location}/bounded")
    remote.put(b"x" * 100, "doc.json")
    remote.put(b"", "empty.json")
    with pytest.raises(UntrustedObjectError, match=r"doc.json: the object is larger than 10 bytes \(100\)"):
        remote.read("doc.json", limit=10)
    assert remote.read("doc.json", limit=100) == b"x" * 100
    assert remote.read("empty.json", limit=10) == b""
    assert remote.read("absent.json", limit=10) is None


def test_retention_removes_the_batches_every_consumer_is_past_and_nothing_else(location, tmp_path):
    from airflow_provider_binlog.checkpoints import Checkpoint
    from airflow_provider_binlog.staging.retention import remove_merged_batches

    staging = f"{location}/kept"
    log = Binlog(tmp_path, staging=staging)
    first, second = stage(log, 1).publish(), stage(log, 10).publish()
    ObjectStaging(staging).put(b"x", "uploads", "0123", "report.csv")
    ObjectStaging(staging).put(b"{}", ".resumable", "k", "progress.json")
    assert remove_merged_batches(staging, [Checkpoint(file="mysql-bin.000001", position=104)]) == [first.dump_id]
    left = names(location)
    assert not any(k.startswith(f"kept/{first.dump_id}/") for k in left)
    assert {"kept/uploads/0123/report.csv", "kept/.resumable/k/progress.json"} <= set(left)
    assert load_manifest(second.ref, verify=True).dump_id == second.dump_id
