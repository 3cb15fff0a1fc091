"""What the merge without Spark takes from Spark's own configuration (operators.merge_job):
``spark-defaults.conf`` where spark-submit finds it, in the Java properties forms it reads."""
from airflow_provider_binlog.operators.merge_job import spark_defaults


def test_spark_defaults_are_read_from_the_conf_dir_else_spark_home_in_every_properties_form(tmp_path):
    conf_dir, home = tmp_path / "conf", tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# a comment\n! another\nspark.driver.memory   2g\nspark.jars=/a.jar,/b.jar\n"
        "spark.sql.catalog.lake.uri: thrift://metastore:9083\n\n")
    (home / "conf" / "spark-defaults.conf").write_text("spark.driver.memory 4g\n")
    assert spark_defaults({"SPARK_CONF_DIR": str(conf_dir), "SPARK_HOME": str(home)}) == {
        "spark.driver.memory": "2g", "spark.jars": "/a.jar,/b.jar",
        "spark.sql.catalog.lake.uri": "thrift://metastore:9083"}
    assert spark_defaults({"SPARK_HOME": str(home)}) == {"spark.driver.memory": "4g"}
    assert spark_defaults({}) == {}
    assert spark_defaults({"SPARK_CONF_DIR": str(tmp_path / "none")}) == {}
