"""The ``iceberg-java`` engine's lake: Iceberg's Java API in a bare JVM, without Spark
(:class:`JavaLake`).

A merge whose tables all take direct commits (their changes written with pyarrow, committed
through Iceberg's Java API) needs no Spark application: a bare JVM started through py4j, with
the jars of the Spark ``spark-submit`` would run on its class path, opens the same catalog in
under a second where ``spark-submit`` and a session take four. It is a :class:`~.base.Lake`
like Spark's, and nothing more: what only Spark does is decided before anything of a batch is
committed (:class:`~..errors.SparkNeeded`), and Spark then applies that batch.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any, Mapping, Sequence

from ..errors import SparkNeeded
from .base import Lake
from .java_settings import catalog_properties, class_path, py4j_jar

log = logging.getLogger(__name__)


def _stderr() -> Any:
    """Where the JVM's messages go: this process's standard error (the task's log)."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):  # a stream without a file (pytest's capture)
        return subprocess.DEVNULL


class JavaLake(Lake):
    """A py4j JVM with the Iceberg catalog ``catalog`` of Spark settings ``conf``.

    :param conf: the Spark settings of the merge (its catalog, jars and Hadoop settings).
    :param catalog: the catalog's name in those settings.
    :param java_home: the Java 17 to start.
    :param jars_dirs: the directories of Spark's jars, the one ``spark-submit`` runs on first.
    :param java_options: more options of the JVM (a class archive's)."""

    def __init__(self, conf: Mapping[str, str], catalog: str, java_home: str, jars_dirs: Sequence[str],
                 java_options: Sequence[str] = ()) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

        entries = class_path(conf, jars_dirs)
        props, hadoop = catalog_properties(conf, catalog)
        # the client compiler only: the JVM lives for one merge and runs catalog calls, not hot
        # loops, and the optimizing compiler's threads would take a core from the fold (about
        # 0.2 s sooner up, 0.5 s shorter merges of a million changes on 2 cores)
        options = ["-Duser.timezone=UTC", "-XX:TieredStopAtLevel=1", *java_options]
        memory = str(conf.get("spark.driver.memory", "")).strip().lower().rstrip("b")  # 2g, 2gb, 2048m
        if memory:
            options.append(f"-Xmx{memory}m" if memory.isdigit() else f"-Xmx{memory}")  # Spark: MiB
        try:
            # with a token: no other local process may drive the JVM (it holds the catalog's secrets)
            port, token, self._process = launch_gateway(
                jarpath=py4j_jar(jars_dirs), classpath=os.pathsep.join(entries), javaopts=options,
                die_on_exit=True, java_path=os.path.join(java_home, "bin", "java"), return_proc=True,
                redirect_stderr=_stderr(), enable_auth=True)
        except Exception as exc:  # py4j raises a bare Py4JError when the JVM dies
            raise SparkNeeded(f"the Iceberg JVM did not start: {exc}") from None
        gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=token, auto_convert=True))
        self.gateway = gateway
        try:
            jvm = gateway.jvm
            hadoop_conf = jvm.org.apache.hadoop.conf.Configuration()
            for key, value in hadoop.items():
                hadoop_conf.set(key, value)
            java_props = jvm.java.util.HashMap()
            for key, value in props.items():
                java_props.put(key, value)
            java_catalog = jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(catalog, java_props, hadoop_conf)
        except Exception as exc:
            self.stop()
            raise SparkNeeded(f"the catalog {catalog} does not open without Spark: {exc}") from None
        super().__init__(catalog, java_catalog, gateway)
        log.info("the merge runs on Iceberg's Java API without Spark, catalog %s", catalog)

    def stop(self) -> None:
        """End the JVM as it ends when its parent does: its standard input closed, it exits
        (and writes its class archive, when it was started to)."""
        gateway = getattr(self, "gateway", None)
        if gateway is not None:
            try:  # the server ends, and the objects Python still holds are not released one by one
                gateway.shutdown()
            except Exception:
                pass
        process = getattr(self, "_process", None)
        if process is None or process.poll() is not None:
            return
        try:
            process.stdin.close()
            process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()


__all__ = ["JavaLake"]
