"""How Spark's settings become the bare JVM of the ``iceberg-java`` engine: its class path as
Spark's launcher builds the driver's (:func:`class_path`), and the catalog's properties and
Hadoop settings as Iceberg's ``SparkCatalog`` reads them (:func:`catalog_properties`)."""
from __future__ import annotations

import glob
import os
from typing import Mapping, Optional, Sequence

from ..errors import SparkNeeded

#: The catalog implementation Spark's settings must name for this JVM to open the same catalog.
SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


def _local_jars(value: str) -> list[str]:
    """The local files of a comma-separated ``spark.jars``; SparkNeeded for a remote one."""
    paths = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        if item.startswith("file:"):
            item = item[len("file:"):].lstrip("/")
            item = "/" + item
        elif "://" in item or item.startswith(("local:", "hdfs:", "s3a:")):
            raise SparkNeeded(f"spark.jars names {item}, which only Spark fetches")
        paths.append(item)
    return paths


def class_path(conf: Mapping[str, str], spark_jars_dirs: Sequence[str],
               environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """The JVM's class path for Spark settings ``conf``, as Spark's launcher builds the driver's:
    ``$SPARK_CONF_DIR``, the jars the settings name (``spark.jars``,
    ``spark.driver.extraClassPath``), Spark's own (the whole jar directory of the Spark
    ``spark-submit`` runs: ``$SPARK_HOME/jars`` when set, so a catalog's runtime kept there is
    found), then ``$HADOOP_CONF_DIR``, ``$YARN_CONF_DIR`` and ``$SPARK_DIST_CLASSPATH`` (so
    ``core-site.xml`` and ``hive-site.xml`` say the same here). SparkNeeded when the jars are
    left to Spark to resolve (``spark.jars.packages``, a remote jar)."""
    environ = os.environ if environ is None else environ
    if conf.get("spark.jars.packages"):
        raise SparkNeeded("spark.jars.packages: the catalog's jars are resolved by spark-submit")
    if not spark_jars_dirs:
        raise SparkNeeded("no Spark jars on this host")
    conf_dir = spark_conf_dir(environ)
    entries = [conf_dir] if conf_dir else []
    entries += _local_jars(str(conf.get("spark.jars", "")))
    entries += [p for p in str(conf.get("spark.driver.extraClassPath", "")).split(os.pathsep) if p]
    entries += [os.path.join(d, "*") for d in spark_jars_dirs[:1]]
    entries += [environ[k] for k in ("HADOOP_CONF_DIR", "YARN_CONF_DIR") if environ.get(k)]
    entries += [p for p in environ.get("SPARK_DIST_CLASSPATH", "").split(os.pathsep) if p]
    return entries


def catalog_properties(conf: Mapping[str, str], catalog: str,
                       environ: Optional[Mapping[str, str]] = None) -> tuple[dict[str, str], dict[str, str]]:
    """``(the catalog's properties, its Hadoop settings)`` from Spark settings, as Iceberg's
    ``SparkCatalog`` reads them: ``spark.sql.catalog.<catalog>.*``, with ``hadoop.*`` of those
    going to the Hadoop configuration over what Spark puts there (``spark.hadoop.*``,
    ``spark.hive.*`` as ``hive.*``, ``spark.sql.warehouse.dir`` as Hive's warehouse, the AWS
    keys of the environment as S3A's)."""
    environ = os.environ if environ is None else environ
    prefix = f"spark.sql.catalog.{catalog}"
    implementation = conf.get(prefix)
    if implementation != SPARK_CATALOG:
        raise SparkNeeded(f"{prefix} is {implementation!r}, not {SPARK_CATALOG}")
    props: dict[str, str] = {}
    hadoop: dict[str, str] = {}
    if environ.get("AWS_ACCESS_KEY_ID") and environ.get("AWS_SECRET_ACCESS_KEY"):
        hadoop.update({"fs.s3a.access.key": environ["AWS_ACCESS_KEY_ID"],
                       "fs.s3a.secret.key": environ["AWS_SECRET_ACCESS_KEY"]})
        if environ.get("AWS_SESSION_TOKEN"):
            hadoop["fs.s3a.session.token"] = environ["AWS_SESSION_TOKEN"]
    if conf.get("spark.sql.warehouse.dir"):
        hadoop["hive.metastore.warehouse.dir"] = str(conf["spark.sql.warehouse.dir"])
    for key, value in conf.items():
        if key.startswith("spark.hadoop."):
            hadoop[key[len("spark.hadoop."):]] = str(value)
        elif key.startswith("spark.hive."):
            hadoop[key[len("spark."):]] = str(value)
    for key, value in conf.items():
        if key.startswith(prefix + "."):
            name = key[len(prefix) + 1:]
            if name.startswith("hadoop."):
                hadoop[name[len("hadoop."):]] = str(value)
            else:
                props[name] = str(value)
    return props, hadoop


def py4j_jar(dirs: Sequence[str]) -> str:
    for d in dirs:
        found = sorted(glob.glob(os.path.join(d, "py4j-*.jar")))
        if found:
            return found[-1]
    raise SparkNeeded("no py4j jar among Spark's jars")


def spark_conf_dir(environ: Mapping[str, str]) -> Optional[str]:
    """Spark's configuration directory, as its launcher finds it: ``$SPARK_CONF_DIR``, else
    ``$SPARK_HOME/conf``; None when neither is set."""
    if environ.get("SPARK_CONF_DIR"):
        return environ["SPARK_CONF_DIR"]
    return os.path.join(environ["SPARK_HOME"], "conf") if environ.get("SPARK_HOME") else None


__all__ = ["SPARK_CATALOG", "catalog_properties", "class_path", "py4j_jar", "spark_conf_dir"]
