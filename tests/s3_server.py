"""A private S3-API server for the tests: ``s3_server``, one for the session.

``moto_server`` (PyPI ``moto[server]``) on a free port of 127.0.0.1; it keeps objects in
memory, answers the S3 API with any credentials, and honours ``If-None-Match`` conditional
writes. Nothing leaves the machine. ``s3_env`` points the process's default credential chain
(``AWS_ENDPOINT_URL``, keys, region) at it for one test, with a fresh bucket.

Without moto the tests that use it are skipped, except when CI is set to a true value: there
they fail. A test module uses it by importing both fixtures:
``from tests.s3_server import s3_env, s3_server``.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Iterator

import pytest

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1"}


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    endpoint: str
    process: subprocess.Popen

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, **KEYS}

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=KEYS["AWS_REGION"],
                            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])

    def create_bucket(self, name: str | None = None) -> str:
        name = name or f"stage-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


def start_moto(extra_env: dict[str, str] | None = None) -> S3Server:
    binary = shutil.which("moto_server") or os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.access(binary, os.X_OK):
        message = "moto_server is not installed (pip install 'moto[server]')"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    port = _free_port()
    process = subprocess.Popen([binary, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, **(extra_env or {})})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return S3Server(f"http://127.0.0.1:{port}", process)
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"moto_server did not start on port {port}")


def stop_moto(server: S3Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = start_moto()
    try:
        yield server
    finally:
        stop_moto(server)


@pytest.fixture()
def s3_env(s3_server: S3Server, monkeypatch) -> str:
    """The default credential chain pointed at ``s3_server``; a fresh bucket's name."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    return s3_server.create_bucket()
