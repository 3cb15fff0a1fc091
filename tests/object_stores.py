"""Private GCS and Azure Blob servers for the tests, as ``tests/s3_server.py`` is for S3.

- ``gcs_server``: ``tests/gcs_emulator.py`` with GCS's ``ifGenerationMatch=0`` honoured;
  ``gcs_plain_server``: the same emulator as published, which ignores it (a store staging
  must refuse). ``gcs_env`` points ``STORAGE_EMULATOR_HOST`` at the first, with a fresh bucket.
- ``azure_server``: Azurite (Microsoft's Blob Storage emulator, installed by ``.ci/run`` under
  ``.ci/node``), which honours ``If-None-Match``; ``azure_env`` gives the staging its endpoint,
  account and key, and a fresh container.

Each runs on a free port of 127.0.0.1 and keeps its objects in memory (Azurite on a private
directory). Without them the tests are skipped, except when CI is set to a true value.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.s3_server import _free_port, _in_ci

ROOT = Path(__file__).resolve().parents[1]
#: Azurite's well-known development account (public, documented by Microsoft).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _missing(message: str) -> None:
    if _in_ci():
        pytest.fail(message)
    pytest.skip(message)


def _wait_for(port: int, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"{what} did not start on port {port}")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


@dataclass
class GcsServer:
    endpoint: str
    process: subprocess.Popen

    def create_bucket(self, name: str | None = None) -> str:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        name = name or f"stage-{uuid.uuid4().hex[:12]}"
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.endpoint})
        client.create_bucket(name)
        return name


def start_gcs(preconditions: bool = True) -> GcsServer:
    try:
        import gcp_storage_emulator  # noqa: F401
        import google.cloud.storage  # noqa: F401
    except ImportError:
        _missing("gcp-storage-emulator or google-cloud-storage is not installed")
    port = _free_port()
    args = [sys.executable, str(ROOT / "tests" / "gcs_emulator.py"), str(port)]
    process = subprocess.Popen(args + (["--preconditions"] if preconditions else []), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    _wait_for(port, process, "the GCS emulator")
    return GcsServer(f"http://127.0.0.1:{port}", process)


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsServer]:
    server = start_gcs()
    try:
        yield server
    finally:
        _stop(server.process)


@pytest.fixture(scope="session")
def gcs_plain_server() -> Iterator[GcsServer]:
    server = start_gcs(preconditions=False)
    try:
        yield server
    finally:
        _stop(server.process)


@pytest.fixture()
def gcs_env(gcs_server: GcsServer, monkeypatch) -> str:
    """``STORAGE_EMULATOR_HOST`` pointed at ``gcs_server``; a fresh bucket's name."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint)
    return gcs_server.create_bucket()


@dataclass
class AzureServer:
    endpoint: str
    process: subprocess.Popen
    workdir: str

    def env(self) -> dict[str, str]:
        return {"BINLOG_STAGING_ENDPOINT_URL": self.endpoint, "AZURE_STORAGE_ACCOUNT": AZURITE_ACCOUNT,
                "AZURE_STORAGE_KEY": AZURITE_KEY}

    def create_container(self, name: str | None = None) -> str:
        from azure.storage.blob import BlobServiceClient

        name = name or f"stage-{uuid.uuid4().hex[:12]}"
        BlobServiceClient(self.endpoint, credential={"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}) \
            .create_container(name)
        return name

    def location(self, container: str, prefix: str = "") -> str:
        return f"abfs://{container}@{AZURITE_ACCOUNT}.dfs.core.windows.net/{prefix}".rstrip("/")


def start_azurite() -> AzureServer:
    binary = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "azurite-blob"
    if not os.access(binary, os.X_OK):
        found = shutil.which("azurite-blob")
        if not found:
            _missing("Azurite is not installed (.ci/run installs it under .ci/node)")
        binary = Path(str(found))
    try:
        import azure.storage.blob  # noqa: F401
    except ImportError:
        _missing("azure-storage-blob is not installed")
    port = _free_port()
    workdir = tempfile.mkdtemp(prefix="azurite-")
    process = subprocess.Popen([str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
                                workdir, "--silent", "--skipApiVersionCheck", "--loose"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(port, process, "Azurite")
    return AzureServer(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}", process, workdir)


@pytest.fixture(scope="session")
def azure_server() -> Iterator[AzureServer]:
    server = start_azurite()
    try:
        yield server
    finally:
        _stop(server.process)
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture()
def azure_env(azure_server: AzureServer, monkeypatch) -> str:
    """The staging's endpoint, account and key pointed at ``azure_server``; the location of a
    fresh container (``abfs://container@account.dfs.core.windows.net``)."""
    for key, value in azure_server.env().items():
        monkeypatch.setenv(key, value)
    return azure_server.location(azure_server.create_container())
