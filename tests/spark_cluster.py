"""A private Spark standalone cluster for the tests: ``spark_cluster``, one for the session.

A master and two workers (one core, 1 GiB each) started with pyspark's own ``bin/spark-class``
on free ports of 127.0.0.1 (``SPARK_LOCAL_IP``), with Java 17; executors run in the workers'
own JVMs. Stopped at the end of the session. A test module uses it by importing it:
``from tests.spark_cluster import spark_cluster``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from typing import Iterator

import pytest

WORKERS = 2


@dataclass
class SparkCluster:
    master_url: str   # spark://127.0.0.1:<port>
    web_url: str      # http://127.0.0.1:<port>
    spark_home: str
    basedir: str

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return json.loads(response.read())

    def alive_workers(self) -> int:
        return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")

    def completed_apps(self) -> list[dict]:
        return self.state().get("completedapps", [])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(processes: list[subprocess.Popen]) -> None:
    for proc in processes:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in processes:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    from tests.conftest import _require_spark

    _require_spark()
    import pyspark

    from airflow_provider_binlog.spark.runtime import find_java17_home

    spark_home = os.path.dirname(pyspark.__file__)
    basedir = tempfile.mkdtemp(prefix="binlog-spark-cluster-")
    env = {**os.environ, "JAVA_HOME": find_java17_home(), "SPARK_HOME": spark_home,
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": basedir, "SPARK_WORKER_DIR": basedir,
           "SPARK_NO_DAEMONIZE": "1"}
    spark_class = os.path.join(spark_home, "bin", "spark-class")
    port, web = _free_port(), _free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", spark_home, basedir)
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(os.path.join(basedir, f"{name}.log"), "wb")
        processes.append(subprocess.Popen([spark_class, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))

    def logs() -> str:
        return "\n".join(open(os.path.join(basedir, f)).read()[-2000:] for f in sorted(os.listdir(basedir))
                         if f.endswith(".log"))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(web))
        for i in range(WORKERS):
            work = os.path.join(basedir, f"work{i}")
            os.makedirs(work)
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", cluster.master_url, "--host", "127.0.0.1",
                  "--webui-port", str(_free_port()), "--cores", "1", "--memory", "1g", "--work-dir", work)
        deadline = time.monotonic() + 120
        while True:
            try:
                if cluster.alive_workers() == WORKERS:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                pytest.fail(f"the Spark cluster did not start with {WORKERS} workers:\n{logs()}", pytrace=False)
            time.sleep(0.5)
        yield cluster
    finally:
        _stop(processes)
