"""Credentials as the Amazon provider resolves them: with apache-airflow-providers-amazon
installed (the ``aws`` extra), an ``aws`` staging connection goes through its ``AwsBaseHook``,
so an assumed role (``role_arn``), web identity or a profile work as in the provider's own
operators. The dump publishes with the hook's session, whose temporary credentials refresh
themselves; the merge's environment gets them as of now, never the connection's long-term
keys; what travels to executors holds no session. Against the S3-API server on loopback, which
also answers STS."""
from __future__ import annotations

import json
import pickle

import pytest

from airflow_provider_binlog.staging.manifest import load_manifest
from airflow_provider_binlog.staging.writer import StagingWriter
from tests.s3_server import s3_server  # noqa: F401

pytest.importorskip("airflow.providers.amazon.aws.hooks.base_aws", reason="the aws extra is not installed")

ROLE = "arn:aws:iam::123456789012:role/cdc-staging"


def connection(monkeypatch, server, conn_id: str, **fields) -> None:
    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    extra = {"region_name": "us-east-1", "endpoint_url": server.endpoint,
             "service_config": {"sts": {"endpoint_url": server.endpoint}}, **fields.pop("extra", {})}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "aws", **fields, "extra": extra}))


def test_an_assumed_role_publishes_with_the_providers_session_and_the_merge_gets_its_temporary_keys(
        s3_server, monkeypatch):  # noqa: F811
    from botocore.credentials import RefreshableCredentials

    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    connection(monkeypatch, s3_server, "stage_role", login="AKIALONGTERMKEY00001", password="long-term-secret",
               extra={"role_arn": ROLE})
    options = staging_storage_options("stage_role")
    assert options.access_key != "AKIALONGTERMKEY00001" and options.session_token    # the role's, temporary
    assert isinstance(options.session.get_credentials(), RefreshableCredentials)   # refreshed as it expires
    assert (options.endpoint_url, options.region) == (s3_server.endpoint, "us-east-1")
    bucket = s3_server.create_bucket()
    published = StagingWriter(f"s3://{bucket}/role", storage_options=options).publish(
        dump_id="d1", start={}, end={}, server={})
    assert load_manifest(published.ref, options=options).dump_id == "d1"
    env = options.to_env()
    assert env["BINLOG_STAGING_ACCESS_KEY_ID"] == options.access_key
    assert "long-term-secret" not in env.values() and "AKIALONGTERMKEY00001" not in env.values()
    travelling = pickle.loads(pickle.dumps(options.for_store("s3")))              # to Spark executors
    assert travelling.session is None and travelling.access_key == options.access_key


def test_a_connection_naming_no_credentials_leaves_the_merge_its_own_chain(s3_server, monkeypatch):  # noqa: F811
    from airflow_provider_binlog.hooks.staging_storage import staging_storage_options

    connection(monkeypatch, s3_server, "stage_chain", extra={"kms_key_id": "alias/cdc"})
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")           # the worker's own chain
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    options = staging_storage_options("stage_chain")
    assert "BINLOG_STAGING_ACCESS_KEY_ID" not in options.to_env()
    assert options.session is not None and options.kms_key_id == "alias/cdc"
