"""Which engine a merge runs first (operators/engine_choice.py), tested bare: ``auto`` takes
Iceberg's Java API only where Spark would run on the worker anyway, any cluster master gets
spark-submit, ``iceberg-java`` refuses up front what it cannot honour and warns once on a
cluster."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.operators.engine_choice import (
    EngineChoiceError,
    choose_engine,
    engines_used,
    is_local_master,
)

ICEBERG_JAR = {"spark.jars": "/opt/iceberg.jar"}


@pytest.mark.parametrize("master, first", [
    ("local", "iceberg-java"), ("local[2]", "iceberg-java"), ("local[*]", "iceberg-java"),
    ("spark://spark-master:7077", "spark"), ("yarn", "spark"), ("k8s://https://api:6443", "spark"),
    ("mesos://m:5050", "spark"),
])
def test_auto_runs_the_java_engine_first_only_with_a_local_master(master, first):
    choice = choose_engine("auto", master=master, cluster=False, conf=ICEBERG_JAR)
    assert choice.first == first and choice.warning is None
    assert ("local master" if first == "iceberg-java" else "cluster master") in choice.reason


@pytest.mark.parametrize("conf, named", [
    ({"spark.jars.packages": "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"}, "spark.jars.packages"),
    ({"spark.kerberos.keytab": "/k", "spark.kerberos.principal": "p@R"}, "spark.kerberos.keytab"),
    ({"spark.extraListeners": "io.openlineage.spark.agent.OpenLineageSparkListener"}, "spark.extraListeners"),
    ({"spark.eventLog.enabled": "true"}, "spark.eventLog.enabled"),
    ({"spark.openlineage.parentJobName": "dag.task"}, "spark.openlineage.parentJobName"),
])
def test_auto_runs_spark_when_the_settings_name_what_only_spark_honours(conf, named):
    choice = choose_engine("auto", master="local[2]", cluster=False, conf=conf)
    assert choice.first == "spark" and named in choice.reason


@pytest.mark.parametrize("kwargs, why", [
    ({"cluster": True}, "cluster deploy mode"), ({"spark_only": "application"}, "application is given"),
    ({"direct_max_bytes": 0}, "direct commits are off"), ({"pyspark_installed": False}, "pyspark"),
    ({"conf": {"spark.kerberos.principal": "p@R"}}, "spark.kerberos.principal"),
])
def test_iceberg_java_refuses_up_front_what_it_cannot_honour_and_auto_runs_spark_instead(kwargs, why):
    given = {"master": "local[2]", "cluster": False, "conf": {}, **kwargs}
    with pytest.raises(EngineChoiceError, match=f"merge_engine is iceberg-java, but .*{why}"):
        choose_engine("iceberg-java", **given)
    choice = choose_engine("auto", **given)
    assert choice.first == "spark" and why in choice.reason


def test_iceberg_java_on_a_cluster_master_is_the_users_choice_warned_once():
    choice = choose_engine("iceberg-java", master="spark://m:7077", cluster=False,
                           conf={**ICEBERG_JAR, "spark.eventLog.enabled": "true"})
    assert choice.first == "iceberg-java"
    assert "on the cluster master spark://m:7077" in choice.warning and "spark.eventLog.enabled" in choice.warning


def test_spark_always_submits_and_an_unknown_engine_is_refused_naming_the_three():
    assert choose_engine("spark", master="local[2]", cluster=False, conf={}).first == "spark"
    assert choose_engine(" Spark ", master="local[2]", cluster=False, conf={}).first == "spark"
    with pytest.raises(EngineChoiceError, match="merge_engine is 'jvm'") as info:
        choose_engine("jvm", master="local[2]", cluster=False, conf={})
    assert "auto, spark, iceberg-java" in info.value.hint


def test_the_engines_a_run_used_are_named_one_way():
    assert engines_used(True, False) == "iceberg-java"
    assert engines_used(False, True) == "spark"
    assert engines_used(True, True) == "iceberg-java+spark"
    assert is_local_master("local[4]") and not is_local_master("localhost:7077")
