"""Which engine a merge task runs first, and why (:func:`choose_engine`).

Two engines apply a merge's batches. **Spark**: the merge job through ``spark-submit`` on
the Spark connection's master, which any batch can take. **iceberg-java**: the same job on
Iceberg's Java API in a bare JVM on the worker (no Spark application), for batches whose
tables all take direct commits; a batch that needs Spark (a table to create or alter, key
changes, partial images, a change log, maintenance that is due) is refused before anything of
it is committed, and Spark then applies it, so such a run uses both.

``merge_engine``:

- ``auto`` (the default): iceberg-java first only where Spark would run on the worker anyway,
  a ``local`` master (the embedded default included) in client mode; any cluster master gets
  ``spark-submit``, as do Spark settings only a Spark application honours.
- ``spark``: every merge through ``spark-submit``.
- ``iceberg-java``: iceberg-java first wherever the job can see what the Spark driver would;
  on a cluster master it is the user's explicit choice, warned once. What it cannot honour is
  refused up front, with the reason.

Pure: no Airflow import, tested bare.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping, Optional

from airflow_provider_binlog.errors import ProviderError

AUTO, SPARK, ICEBERG_JAVA = "auto", "spark", "iceberg-java"
ENGINES = (AUTO, SPARK, ICEBERG_JAVA)

#: Spark settings the bare JVM cannot honour: it fails without them (jars Spark resolves,
#: Kerberos logins): ``iceberg-java`` refuses them, ``auto`` runs Spark.
_NEEDS_SPARK = ("spark.jars.packages", "spark.jars.repositories", "spark.jars.ivySettings", "spark.kerberos.",
                "spark.yarn.keytab", "spark.yarn.principal", "spark.security.credentials.")
#: Spark settings that only mean something to a Spark application (listeners, event logs,
#: OpenLineage's Spark events): ``auto`` runs Spark for them, ``iceberg-java`` warns that
#: they are not applied.
_SPARK_APPLICATION = ("spark.extraListeners", "spark.sql.queryExecutionListeners", "spark.openlineage.")


class EngineChoiceError(ProviderError, ValueError):
    """A ``merge_engine`` this task cannot run: an unknown name, or ``iceberg-java`` where the
    job cannot see what the Spark driver would."""


@dataclasses.dataclass(frozen=True)
class EngineChoice:
    """The engine a merge runs first (``iceberg-java`` or ``spark``), why, and a warning to log
    once (None: none)."""

    first: str
    reason: str
    warning: Optional[str] = None


def _named(conf: Mapping[str, str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(k for k in conf if k.startswith(prefixes) and str(conf[k]).strip())


def _event_log(conf: Mapping[str, str]) -> list[str]:
    return ["spark.eventLog.enabled"] if str(conf.get("spark.eventLog.enabled", "")).strip().lower() == "true" else []


def is_local_master(master: str) -> bool:
    """``local``, ``local[4]``, ``local[*]``: Spark in the process that starts it."""
    return master == "local" or master.startswith("local[")


# long: one decision table, read top to bottom: what rules iceberg-java out, then each engine's case
def choose_engine(requested: str, *, master: str, cluster: bool, conf: Mapping[str, str],
                  spark_only: Optional[str] = None, direct_max_bytes: int = 1,
                  pyspark_installed: bool = True) -> EngineChoice:
    """The engine to run first for ``merge_engine`` ``requested`` on Spark ``master`` (in
    ``cluster`` deploy mode or not) with Spark settings ``conf``. ``spark_only`` names what
    only ``spark-submit`` takes (another application, ``packages``); ``direct_max_bytes`` 0
    turns direct commits off. Raises :class:`EngineChoiceError` for an unknown name, or for
    ``iceberg-java`` where it cannot run."""
    name = (requested or AUTO).strip().lower()
    if name not in ENGINES:
        raise EngineChoiceError(f"merge_engine is {requested!r}", hint=f"give one of {', '.join(ENGINES)}")
    if name == SPARK:
        return EngineChoice(SPARK, "merge_engine is spark: every merge through spark-submit")
    blockers = []
    if cluster:
        blockers.append("cluster deploy mode runs the driver on the cluster")
    if spark_only:
        blockers.append(f"{spark_only} is given, which only spark-submit takes")
    if direct_max_bytes <= 0:
        blockers.append("direct commits are off (direct_max_bytes=0)")
    if not pyspark_installed:
        blockers.append("pyspark, whose jars the Java engine runs on, is not installed here")
    needs = _named(conf, _NEEDS_SPARK)
    if needs:
        blockers.append(f"the Spark settings name {', '.join(needs)}, which only Spark resolves")
    application = _named(conf, _SPARK_APPLICATION) + _event_log(conf)
    if name == ICEBERG_JAVA:
        if blockers:
            raise EngineChoiceError(f"merge_engine is iceberg-java, but {'; '.join(blockers)}",
                                    hint="give merge_engine='spark' (or auto), or drop what only Spark takes")
        warnings = []
        if not is_local_master(master):
            warnings.append(f"merge_engine is iceberg-java on the cluster master {master}: the merges run on "
                            f"this worker, not on the cluster, and only batches that need Spark go there")
        if application:
            warnings.append(f"the Spark settings {', '.join(application)} are not applied to merges "
                            f"that run without a Spark application")
        return EngineChoice(ICEBERG_JAVA, "merge_engine is iceberg-java", "; ".join(warnings) or None)
    if not is_local_master(master):
        return EngineChoice(SPARK, f"merge_engine is auto and {master} is a cluster master: the merge runs "
                                   f"where its Spark applications run")
    if blockers or application:
        why = blockers + ([f"the Spark settings name {', '.join(application)}, which only a Spark "
                           f"application honours"] if application else [])
        return EngineChoice(SPARK, f"merge_engine is auto and {'; '.join(why)}")
    return EngineChoice(ICEBERG_JAVA, f"merge_engine is auto and {master} is a local master: Spark would run on "
                                      f"this worker, so the merge runs on Iceberg's Java API first, and through "
                                      f"Spark only for a batch that needs it")


def engines_used(java_ran: bool, spark_ran: bool) -> str:
    """The engines a merge task used, as its XCom, logs, metrics and the view name them:
    ``iceberg-java``, ``spark`` or ``iceberg-java+spark``."""
    return "+".join(e for e, ran in ((ICEBERG_JAVA, java_ran), (SPARK, spark_ran)) if ran) or SPARK


__all__ = ["AUTO", "ENGINES", "EngineChoice", "EngineChoiceError", "ICEBERG_JAVA", "SPARK", "choose_engine",
           "engines_used", "is_local_master"]
