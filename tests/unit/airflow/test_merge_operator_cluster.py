"""BinlogMergeOperator configured for a Spark cluster (no ``warehouse``): the spark-submit
command line and environment it gives the Spark provider's hook, next to the embedded mode's.
The hook's own command builder makes the command; only the process start is replaced."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("airflow")

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook  # noqa: E402

from airflow_provider_binlog.merge.direct_changes import DEFAULT_DIRECT_MAX_BYTES  # noqa: E402
from airflow_provider_binlog.merge.iceberg_contract import DEFAULT_PARALLEL_TABLES  # noqa: E402
from airflow_provider_binlog.merge.options import MergeOptions  # noqa: E402
from airflow_provider_binlog.operators.merge import BinlogMergeOperator, merge_application  # noqa: E402
from airflow_provider_binlog.spark.runtime import ICEBERG_PACKAGE  # noqa: E402
from airflow_provider_binlog.staging import StagingWriter  # noqa: E402
from airflow_provider_binlog.staging.manifest import load_manifest  # noqa: E402
from airflow_provider_binlog.staging.storage import write_bytes  # noqa: E402
from airflow_provider_binlog.operators.settings import LakeSettings, MergeSettings, SparkSettings

CLUSTER_CONF = {
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
    "spark.sql.catalog.lake.type": "rest",
    "spark.sql.catalog.lake.uri": "http://iceberg-rest:8181",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture()
def submitted(monkeypatch):
    """What the operator hands to spark-submit: ``[{"command", "env"}]``; the job "succeeds"
    with a result naming the batch applied."""
    calls = []

    def submit(self, application="", **kwargs):
        command = self._build_spark_submit_command(application)
        calls.append({"command": command, "env": dict(self._env or {})})
        args = command[command.index(application) + 1:]
        manifest = load_manifest(args[args.index("--manifest") + 1]).data
        result = {"batches": [{"batch_id": manifest["dump_id"], "status": "applied", "tables": []}],
                  "checkpoint": manifest["end"]}
        write_bytes(args[args.index("--output-json") + 1], json.dumps(result).encode())

    monkeypatch.setattr(SparkSubmitHook, "submit", submit)
    monkeypatch.setenv("AIRFLOW__BINLOG__MERGE_ENGINE", "spark")  # what spark-submit is given
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CLUSTER", json.dumps({"conn_type": "spark", "host": "spark://spark-master",
                                                                 "port": 7077}))
    return calls


@pytest.fixture()
def manifest(tmp_path):
    """A published (empty) batch."""
    writer = StagingWriter(tmp_path / "staging", workers=0)
    published = writer.publish(dump_id="mariadb-bin.000001.4-mariadb-bin.000001.400",
                               start={"file": "mariadb-bin.000001", "pos": 4},
                               end={"file": "mariadb-bin.000001", "pos": 400}, server={})
    return str(published.directory)


def _conf_args(command) -> dict:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def _value(command, flag):
    return command[command.index(flag) + 1] if flag in command else None


def _options(command) -> dict:
    """The merge options the job gets (``--options``, the JSON of MergeOptions)."""
    return json.loads(_value(command, "--options"))


def test_cluster_configuration_submits_packages_conf_and_env_vars_and_no_warehouse(submitted, manifest, tmp_path):
    op = BinlogMergeOperator(
        task_id="merge",
        manifests={"manifest": manifest},
        lake=LakeSettings(catalog="lake", namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", packages=ICEBERG_PACKAGE, conf=CLUSTER_CONF,
                            env_vars={"PYSPARK_PYTHON": "/opt/python3.11/bin/python", "JAVA_HOME": "/opt/java17",
                                      "AWS_REGION": "eu-west-1"}),
        checkpoint_store_uri="/data/checkpoints",
        checkpoint_key="shop_db",
    )
    summary = op.execute(context={})
    assert summary["batches"] == [("mariadb-bin.000001.4-mariadb-bin.000001.400", "applied")]
    (call,) = submitted
    command, env = call["command"], call["env"]
    assert _value(command, "--master") == "spark://spark-master:7077"
    assert _value(command, "--packages") == ICEBERG_PACKAGE
    assert "--jars" not in command
    # the catalog is the one configured, and only that: nothing of the embedded mode
    assert _conf_args(command) == CLUSTER_CONF
    app = command.index(merge_application())
    assert command[app + 1:] == ["--manifest", manifest, "--options", _value(command, "--options"),
                                 "--output-json", _value(command, "--output-json")]
    options = _options(command)
    assert {k: options[k] for k in ("catalog", "namespace", "checkpoint_store", "checkpoint_key", "warehouse")} == {
        "catalog": "lake", "namespace": "shop_cdc", "checkpoint_store": "/data/checkpoints",
        "checkpoint_key": "shop_db", "warehouse": None}
    assert MergeOptions.from_json(options) == op.merge_options("/data/checkpoints", "shop_db")
    # env_vars win over the operator's defaults; the rest of the defaults stay
    assert env["PYSPARK_PYTHON"] == "/opt/python3.11/bin/python" and env["JAVA_HOME"] == "/opt/java17"
    assert env["AWS_REGION"] == "eu-west-1"
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_cluster_configuration_with_jars_instead_of_packages(submitted, manifest):
    jars = ["/opt/iceberg/iceberg-spark-runtime.jar", "/opt/iceberg/iceberg-aws-bundle.jar"]
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", jars=jars, conf=CLUSTER_CONF),
        advance_checkpoint=False,
    )
    op.execute(context={})
    (call,) = submitted
    command = call["command"]
    assert _value(command, "--jars") == ",".join(jars) and "--packages" not in command
    conf = _conf_args(command)
    # the driver runs here (client mode): it writes its class archive (none was kept: the submit is fake)
    assert conf.pop("spark.driver.extraJavaOptions").startswith("-XX:ArchiveClassesAtExit=")
    assert conf == CLUSTER_CONF
    assert (_options(command)["checkpoint_store"], _options(command)["warehouse"]) == (None, None)
    assert call["env"]["PYSPARK_PYTHON"] == sys.executable      # the default: this interpreter
    assert "SPARK_LOCAL_IP" not in call["env"]                  # a cluster decides where it listens


def test_the_class_archive_is_off_when_the_config_says_so(submitted, manifest, monkeypatch):
    monkeypatch.setenv("AIRFLOW__BINLOG__SPARK_CLASS_ARCHIVE", "False")
    BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", jars=["/opt/iceberg.jar"], conf=CLUSTER_CONF),
        advance_checkpoint=False,
    ).execute(context={})
    assert _conf_args(submitted[0]["command"]) == CLUSTER_CONF


def test_a_driver_in_cluster_deploy_mode_gets_no_class_archive_even_with_a_local_java(submitted, manifest,
                                                                                    monkeypatch):
    from airflow_provider_binlog.spark.runtime import find_java17_home

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({
        "conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", catalog_settings={"type": "rest", "uri": "http://iceberg-rest:8181"}),
        spark=SparkSettings(conn_id="spark_yarn", jars=[], env_vars={"JAVA_HOME": find_java17_home()}),
        advance_checkpoint=False,
    ).execute(context={})
    assert "spark.driver.extraJavaOptions" not in _conf_args(submitted[0]["command"])


def test_parallel_tables_reaches_the_job_and_a_bad_value_is_refused(submitted, manifest):
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        merge=MergeSettings(parallel_tables=3),
        advance_checkpoint=False,
    )
    op.execute(context={})
    assert _options(submitted[0]["command"])["parallel_tables"] == 3
    for bad in (0, -1, 2.5, "4"):
        with pytest.raises(ValueError, match="parallel_tables must be a whole number of at least 1"):
            BinlogMergeOperator(
                task_id=f"bad{bad}",
                manifests=manifest,
                lake=LakeSettings(namespace="shop_cdc"),
                merge=MergeSettings(parallel_tables=bad),
            )


def test_embedded_configuration_puts_the_catalog_and_jars_in_the_conf(submitted, manifest, tmp_path):
    from airflow_provider_binlog.spark.runtime import iceberg_runtime_jars

    warehouse = str(tmp_path / "warehouse")
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", warehouse=warehouse),
        spark=SparkSettings(conn_id="spark_cluster", packages=ICEBERG_PACKAGE, conf={"spark.executor.memory": "2g"}),
        checkpoint_store_uri="/c",
        checkpoint_key="k",
    )
    op.execute(context={})
    (call,) = submitted
    command = call["command"]
    conf = _conf_args(command)
    # the embedded catalog, on the warehouse; packages go into the conf, not to the hook
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.catalog.lake.warehouse"].endswith(warehouse)
    assert conf["spark.jars.packages"] == ICEBERG_PACKAGE and conf["spark.executor.memory"] == "2g"
    assert "--packages" not in command and "--jars" not in command
    assert _options(command)["warehouse"] == warehouse
    assert call["env"]["SPARK_LOCAL_IP"] == "127.0.0.1"  # the embedded Spark listens on loopback
    assert _options(command)["parallel_tables"] == DEFAULT_PARALLEL_TABLES  # the job's default
    op = BinlogMergeOperator(
        task_id="merge2",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", warehouse=warehouse),
        spark=SparkSettings(conn_id="spark_cluster"),
        advance_checkpoint=False,
    )
    op.execute(context={})
    assert _conf_args(submitted[1]["command"])["spark.jars"] == ",".join(iceberg_runtime_jars())


def test_a_jdbc_catalog_connection_gives_the_catalog_and_its_driver_and_keeps_the_password_off_the_command(
        submitted, manifest, monkeypatch):
    from airflow_provider_binlog.spark.catalogs import SECRET_CONF_ENV

    monkeypatch.setenv("AIRFLOW_CONN_LAKEHOUSE", json.dumps({
        "conn_type": "iceberg_catalog", "host": "pg.internal", "port": 5433, "schema": "iceberg",
        "login": "cat", "password": "pg-secret",
        "extra": {"type": "jdbc", "warehouse": "/data/wh", "jars": "/opt/postgresql.jar"}}))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", catalog_conn_id="lakehouse"),
        spark=SparkSettings(conn_id="spark_cluster", jars=["/opt/iceberg.jar"]),
        advance_checkpoint=False,
    )
    op.execute(context={})
    (call,) = submitted
    command, env = call["command"], call["env"]
    conf = _conf_args(command)
    assert conf["spark.sql.catalog.lake.type"] == "jdbc"
    assert conf["spark.sql.catalog.lake.uri"] == "jdbc:postgresql://pg.internal:5433/iceberg"
    assert conf["spark.sql.catalog.lake.jdbc.user"] == "cat"
    assert conf["spark.jars"] == "/opt/iceberg.jar,/opt/postgresql.jar"
    assert "--jars" not in command and _options(command)["warehouse"] is None
    assert not any("pg-secret" in part for part in command)
    assert json.loads(env[SECRET_CONF_ENV]) == {"spark.sql.catalog.lake.jdbc.password": "pg-secret"}


def test_catalog_settings_are_checked_when_the_dag_is_made_and_one_catalog_only_is_accepted(manifest):
    from airflow_provider_binlog.spark.catalogs import CatalogConfigError

    with pytest.raises(CatalogConfigError, match="needs a warehouse"):
        BinlogMergeOperator(
            task_id="m1",
            manifests=manifest,
            lake=LakeSettings(namespace="n", catalog_settings={"type": "jdbc", "uri": "jdbc:postgresql://h/db"}),
        )
    with pytest.raises(ValueError, match="takes one Iceberg catalog, not warehouse and catalog_conn_id"):
        BinlogMergeOperator(
            task_id="m2",
            manifests=manifest,
            lake=LakeSettings(namespace="n", warehouse="/w", catalog_conn_id="lakehouse"),
        )
    with pytest.raises(ValueError, match="deploy_mode is 'client' or 'cluster'"):
        BinlogMergeOperator(
            task_id="m3",
            manifests=manifest,
            lake=LakeSettings(namespace="n"),
            spark=SparkSettings(deploy_mode="local"),
        )


def test_cluster_deploy_mode_forces_no_local_interpreter_and_reads_the_result_from_the_staging_path(
        submitted, manifest, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({
        "conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}}))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", catalog_settings={"type": "rest", "uri": "http://iceberg-rest:8181"}),
        spark=SparkSettings(conn_id="spark_yarn", jars=[]),
        advance_checkpoint=False,
    )
    summary = op.execute(context={})
    assert summary["batches"] == [("mariadb-bin.000001.4-mariadb-bin.000001.400", "applied")]
    (call,) = submitted
    command, env = call["command"], call["env"]
    assert _value(command, "--deploy-mode") == "cluster"
    assert "PYSPARK_PYTHON" not in env and "PATH" not in env
    result = Path(_value(command, "--output-json"))
    assert result.parent == Path(manifest).parent and result.name.startswith(".merge-result-")
    assert not result.exists()  # read, then removed
    assert _conf_args(command)["spark.sql.catalog.lake.uri"] == "http://iceberg-rest:8181"
    assert "spark.driver.extraJavaOptions" not in _conf_args(command)  # no class archive for a remote driver


def test_table_layout_properties_and_maintenance_reach_the_job_and_bad_ones_are_refused(submitted, manifest):
    import datetime as dt

    from airflow_provider_binlog.merge.layout import LayoutError

    layout = {"tables": {"shop.orders": {"partition_by": ["days(at)"]}}}
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc", table_layout=layout, table_properties={"write.format.default": "orc"}),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        merge=MergeSettings(maintenance=True, maintenance_every=dt.timedelta(hours=12), expire_older_than_days=3,
                            retain_last=5),
        advance_checkpoint=False,
    )
    op.execute(context={})
    command = submitted[0]["command"]
    options = _options(command)
    assert options["table_layout"]["tables"]["shop.orders"] == {"partition_by": ["days(at)"]}
    assert options["table_properties"] == {"write.format.default": "orc"}
    assert (options["maintenance"], options["maintenance_every_hours"], options["expire_older_than_days"],
            options["retain_last"]) == (True, 12, 3, 5)
    with pytest.raises(LayoutError, match="partition field"):
        BinlogMergeOperator(
            task_id="bad1",
            manifests=manifest,
            lake=LakeSettings(namespace="n", table_layout={"default": {"partition_by": ["weeks(at)"]}}),
        )
    with pytest.raises(ValueError, match="retain_last must be"):
        BinlogMergeOperator(
            task_id="bad2",
            manifests=manifest,
            lake=LakeSettings(namespace="n"),
            merge=MergeSettings(retain_last=0),
        )


def test_secrets_are_refused_for_a_driver_whose_environment_goes_on_the_command_line(submitted, manifest,
                                                                                  monkeypatch):
    from airflow.sdk.exceptions import AirflowException

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_YARN", json.dumps({"conn_type": "spark", "host": "yarn"}))
    settings = {"type": "rest", "uri": "https://cat", "properties": {"token": "t0ken-value"}}
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="n", catalog_settings=settings),
        spark=SparkSettings(conn_id="spark_yarn", jars=[]),
        advance_checkpoint=False,
    )
    with pytest.raises(AirflowException, match="secretKeyRef.BINLOG_SPARK_SECRET_CONF") as err:
        op.execute(context={})
    assert "t0ken-value" not in str(err.value) and submitted == []
    # the standalone master runs no Python application in cluster mode
    standalone = BinlogMergeOperator(
        task_id="m2",
        manifests=manifest,
        lake=LakeSettings(namespace="n"),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF, deploy_mode="cluster"),
        advance_checkpoint=False,
    )
    with pytest.raises(AirflowException, match="standalone master .* client mode"):
        standalone.execute(context={})


def test_the_submitted_entry_point_sits_alone_in_the_package_so_nothing_shadows_a_module():
    from pathlib import Path

    entry = Path(merge_application())
    assert entry.name == "merge_cdc.py" and entry.parent.name == "submit"
    # spark-submit puts the script's directory first on sys.path
    assert sorted(p.name for p in entry.parent.glob("*.py")) == ["__init__.py", "merge_cdc.py"]
    assert "from airflow_provider_binlog.merge.spark.job import main" in entry.read_text()


def test_direct_max_bytes_reaches_the_job_and_a_bad_value_is_refused(submitted, manifest):
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        merge=MergeSettings(direct_max_bytes=0),
        advance_checkpoint=False,
    )
    op.execute(context={})
    assert _options(submitted[0]["command"])["direct_max_bytes"] == 0
    default = BinlogMergeOperator(
        task_id="merge2",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc"),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        advance_checkpoint=False,
    )
    default.execute(context={})
    assert _options(submitted[1]["command"])["direct_max_bytes"] == DEFAULT_DIRECT_MAX_BYTES  # the job's default
    for bad in (-1, 2.5, "4", True):
        with pytest.raises(ValueError, match="direct_max_bytes must be a whole number of bytes"):
            BinlogMergeOperator(
                task_id=f"bad{bad}",
                manifests=manifest,
                lake=LakeSettings(namespace="shop_cdc"),
                merge=MergeSettings(direct_max_bytes=bad),
            )


def test_the_merge_metrics_are_named_by_the_checkpoint_key_even_with_table_properties(submitted, manifest, monkeypatch):
    """Pins an old bug: execute() once looped over table_properties with the name ``key``, which
    held the checkpoint key, so record_merge got the last property's name."""
    import airflow_provider_binlog.utils.metrics as metrics

    recorded = []
    monkeypatch.setattr(metrics, "record_merge", lambda name, summary, seconds: recorded.append(name))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests=manifest,
        lake=LakeSettings(namespace="shop_cdc",
                          table_properties={"write.target-file-size-bytes": "1000", "owner": "data-team"}),
        spark=SparkSettings(conn_id="spark_cluster", conf=CLUSTER_CONF),
        merge=MergeSettings(direct_deletes="equality"),
        checkpoint_store_uri="/data/checkpoints",
        checkpoint_key="shop_db",
    )
    op.execute(context={})
    assert recorded == ["shop_db"]
    command = submitted[0]["command"]
    assert _options(command)["direct_deletes"] == "equality"
    assert _options(command)["table_properties"] == {"write.target-file-size-bytes": "1000", "owner": "data-team"}


def test_a_way_of_deleting_the_merge_does_not_know_is_refused_when_the_dag_is_parsed():
    with pytest.raises(ValueError, match="direct_deletes must be one of position, equality"):
        BinlogMergeOperator(
            task_id="merge",
            manifests="/m",
            lake=LakeSettings(namespace="ns"),
            merge=MergeSettings(direct_deletes="copy-on-write"),
        )


@pytest.mark.parametrize("conn", [
    {"conn_type": "spark", "host": "spark://master", "port": 7077},
    {"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "cluster"}},
    {"conn_type": "spark", "host": "local[2]"},
    {"conn_type": "spark", "host": "master.internal", "port": 7077},
    None,
])
def test_the_master_and_deploy_mode_are_read_from_the_connection_as_the_spark_provider_reads_them(
        monkeypatch, conn):
    """Read through the connection's public fields, not the Spark hook's private attributes;
    the Spark provider's own resolution is the oracle."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    if conn is None:
        monkeypatch.delenv("AIRFLOW_CONN_SPARK_TARGET", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_TARGET", json.dumps(conn))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests="/m",
        lake=LakeSettings(namespace="n"),
        spark=SparkSettings(conn_id="spark_target", conf={}),
    )
    expected = SparkSubmitHook(conn_id="spark_target")._resolve_connection()
    assert op._submit_target() == (expected["master"], expected["deploy_mode"] or "client")


def test_a_kubernetes_master_keeps_its_url_and_port(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_K8S", json.dumps(
        {"conn_type": "spark", "host": "k8s://https://kube.internal", "port": 443}))
    op = BinlogMergeOperator(
        task_id="merge",
        manifests="/m",
        lake=LakeSettings(namespace="n"),
        spark=SparkSettings(conn_id="spark_k8s", conf={}),
    )
    assert op._submit_target() == ("k8s://https://kube.internal:443", "client")


def test_the_spark_submit_settings_are_templated_as_the_spark_operators_are():
    assert {"lake", "spark", "staging"} <= set(BinlogMergeOperator.template_fields)
    assert {"env_vars", "packages", "jars", "application", "conf"} <= set(SparkSettings.template_fields)


def test_batches_applied_without_spark_are_reported_where_the_spark_run_found_them_applied():
    from airflow_provider_binlog.operators.merge_job import merged_results

    spark = {"batches": [{"batch_id": "a", "status": "already-applied"}, {"batch_id": "b", "status": "applied"}],
             "engine": "spark"}
    applied = [{"batch_id": "a", "status": "applied", "tables": [{"table": "t", "status": "committed"}]}]
    assert merged_results(spark, applied) == {"engine": "spark", "batches": [applied[0], spark["batches"][1]]}
    assert merged_results(spark, []) == spark
    # a batch refused after some of its tables were committed: those tables are this task's
    partial = {"batch_id": "b", "tables": [{"table": "t", "status": "committed", "snapshot_id": 7},
                                           {"table": "u", "status": "spark-needed"}]}
    spark["batches"][1]["tables"] = [{"table": "t", "status": "already-applied"}, {"table": "u", "status": "committed"}]
    merged = merged_results(spark, [partial])["batches"][1]
    assert merged["status"] == "applied"
    assert merged["tables"] == [partial["tables"][0], spark["batches"][1]["tables"][1]]

