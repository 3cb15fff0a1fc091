"""A JVM with Iceberg's Java API and the merge's catalog, without Spark (:class:`IcebergJvm`).

A merge whose tables all take direct commits (their changes written with pyarrow, committed
through Iceberg's Java API) needs no Spark application: a bare JVM started through py4j, with
Spark's jars and Iceberg's runtime on its class path, opens the same catalog in under a second
where ``spark-submit`` and a session take four. :class:`IcebergJvm` stands in for the
``SparkSession`` on those paths; whatever only Spark can do (SQL, DataFrames) raises
:class:`SparkNeeded`, and the merge is then run again with Spark, which finds the tables
already committed as a rerun after a crash does.
"""
from __future__ import annotations

import glob
import logging
import os
import subprocess
import sys
from typing import Any, Mapping, Optional, Sequence

from ..errors import ProviderError

log = logging.getLogger(__name__)

#: The catalog implementation Spark's settings must name for this JVM to open the same catalog.
_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


class SparkNeeded(ProviderError):
    """This merge needs Spark (a statement, a DataFrame, a table to create or rewrite): run it
    with ``spark-submit``. Nothing half-done is left: every table committed so far holds the
    batch's end, which the Spark run finds and skips."""

    def __init__(self, message: str, *, partial: Optional[dict] = None) -> None:
        super().__init__(message)
        #: the result of the batch refused, with the tables committed before (None: none)
        self.partial = partial
        #: the results of the batches applied before Spark was needed (set by the merge)
        self.applied: list = []


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
    if implementation != _SPARK_CATALOG:
        raise SparkNeeded(f"{prefix} is {implementation!r}, not {_SPARK_CATALOG}")
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


def _stderr() -> Any:
    """Where the JVM's messages go: this process's standard error (the task's log)."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):  # a stream without a file (pytest's capture)
        return subprocess.DEVNULL


def _py4j_jar(dirs: Sequence[str]) -> str:
    for d in dirs:
        found = sorted(glob.glob(os.path.join(d, "py4j-*.jar")))
        if found:
            return found[-1]
    raise SparkNeeded("no py4j jar among Spark's jars")


class IcebergJvm:
    """A py4j JVM with the Iceberg catalog ``catalog`` of Spark settings ``conf``.

    :param conf: the Spark settings of the merge (its catalog, jars and Hadoop settings).
    :param catalog: the catalog's name in those settings.
    :param java_home: the Java 17 to start.
    :param java_options: more options of the JVM (a class archive's)."""

    def __init__(self, conf: Mapping[str, str], catalog: str, java_home: str,
                 java_options: Sequence[str] = ()) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway

        from .runtime import spark_jars_dirs

        dirs = spark_jars_dirs()
        entries = class_path(conf, dirs)
        props, hadoop = catalog_properties(conf, catalog)
        self.catalog_name = catalog
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
                jarpath=_py4j_jar(dirs), classpath=os.pathsep.join(entries), javaopts=options,
                die_on_exit=True, java_path=os.path.join(java_home, "bin", "java"), return_proc=True,
                redirect_stderr=_stderr(), enable_auth=True)
        except Exception as exc:  # py4j raises a bare Py4JError when the JVM dies
            raise SparkNeeded(f"the Iceberg JVM did not start: {exc}") from None
        self.gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auth_token=token,
                                                                        auto_convert=True))
        self.jvm = self.gateway.jvm
        try:
            hadoop_conf = self.jvm.org.apache.hadoop.conf.Configuration()
            for key, value in hadoop.items():
                hadoop_conf.set(key, value)
            java_props = self.jvm.java.util.HashMap()
            for key, value in props.items():
                java_props.put(key, value)
            self.catalog = self.jvm.org.apache.iceberg.CatalogUtil.buildIcebergCatalog(
                catalog, java_props, hadoop_conf)
        except Exception as exc:
            self.stop()
            raise SparkNeeded(f"the catalog {catalog} does not open without Spark: {exc}") from None
        log.info("the merge runs without Spark: Iceberg's Java API on catalog %s", catalog)

    # --- what the merge asks of the catalog -------------------------------------------------

    def identifier(self, name: str) -> Any:
        """The ``TableIdentifier`` of ``catalog.namespace.table`` (the catalog part must be ours)."""
        catalog, *namespace, table = name.split(".")
        if catalog != self.catalog_name or not namespace:
            raise SparkNeeded(f"{name} is not a table of catalog {self.catalog_name}")
        return self.jvm.org.apache.iceberg.catalog.TableIdentifier.of(
            self.namespace(namespace), table)

    def namespace(self, parts: Sequence[str]) -> Any:
        return self.jvm.org.apache.iceberg.catalog.Namespace.of(java_array(self, self.jvm.java.lang.String, parts))

    def load_table(self, name: str) -> Optional[Any]:
        """The ``org.apache.iceberg.Table`` ``name``, freshly loaded; None when there is none."""
        from py4j.protocol import Py4JJavaError

        try:  # one call: a table that exists is loaded once, not looked up first
            return self.catalog.loadTable(self.identifier(name))
        except Py4JJavaError as exc:
            if exc.java_exception.getClass().getName() == "org.apache.iceberg.exceptions.NoSuchTableException":
                return None
            raise

    def table_exists(self, name: str) -> bool:
        return bool(self.catalog.tableExists(self.identifier(name)))

    def namespace_exists(self, namespace: str) -> bool:
        try:
            return bool(self.catalog.namespaceExists(self.namespace(namespace.split("."))))
        except Exception as exc:  # a catalog without namespaces
            raise SparkNeeded(f"catalog {self.catalog_name} answers no namespace question: {exc}") from None

    def create_namespace(self, namespace: str) -> None:
        """``CREATE NAMESPACE IF NOT EXISTS``."""
        if not self.namespace_exists(namespace):
            self.catalog.createNamespace(self.namespace(namespace.split(".")))

    def create_table(self, name: str, columns: Any, properties: Mapping[str, str],
                     order: Sequence[str] = ()) -> None:
        """The table ``name`` as Spark's ``CREATE TABLE name (columns) USING iceberg
        TBLPROPERTIES (properties)`` then ``ALTER TABLE name WRITE ORDERED BY order`` make it
        (``columns``: a Spark ``StructType``), in one commit: unpartitioned, the columns
        optional, the properties with the ``owner`` Spark adds, and with a write order the
        range distribution Iceberg's ``WRITE ORDERED BY`` sets."""
        import getpass

        struct = self.jvm.org.apache.spark.sql.types.DataType.fromJson(columns.json())
        schema = self.jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(struct)
        props = {**properties, "owner": getpass.getuser()}
        builder = self.catalog.buildTable(self.identifier(name), schema)
        if order:
            sort = self.jvm.org.apache.iceberg.SortOrder.builderFor(schema)
            for column in order:
                sort = sort.asc(column)
            builder = builder.withSortOrder(sort.build())
            props["write.distribution-mode"] = "range"
        java_props = self.jvm.java.util.HashMap()
        for key, value in props.items():
            java_props.put(key, str(value))
        builder.withProperties(java_props).create()
        log.info("%s created through Iceberg's Java API", name)

    def spark_schema(self, table: Any) -> Any:
        """A table's schema as Spark types (what ``spark.table(name).schema`` gives)."""
        from pyspark.sql.types import _parse_datatype_json_string

        converted = self.jvm.org.apache.iceberg.spark.SparkSchemaUtil.convert(table.schema())
        return _parse_datatype_json_string(converted.json())

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

    # --- what only Spark does ---------------------------------------------------------------

    def sql(self, statement: str) -> Any:
        raise SparkNeeded(f"a statement: {statement.split('(')[0].strip()}")

    def table(self, name: str) -> Any:
        raise SparkNeeded(f"a read of {name} through Spark")

    def createDataFrame(self, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - SparkSession's name
        raise SparkNeeded("a DataFrame")

    @property
    def read(self) -> Any:
        raise SparkNeeded("a read through Spark")

    @property
    def sparkContext(self) -> Any:  # noqa: N802 - SparkSession's name
        raise SparkNeeded("a Spark job")


def jvm_of(session: Any) -> Any:
    """The py4j JVM view of a SparkSession or an :class:`IcebergJvm`."""
    return session.jvm if isinstance(session, IcebergJvm) else session.sparkContext._jvm


def gateway_of(session: Any) -> Any:
    return session.gateway if isinstance(session, IcebergJvm) else session.sparkContext._gateway


def java_array(session: Any, java_type: Any, values: Sequence[Any]) -> Any:
    """``values`` as a Java array of ``java_type`` in the JVM of ``session`` (a SparkSession or
    an :class:`IcebergJvm`): py4j turns no Python list into one."""
    array = gateway_of(session).new_array(java_type, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def spark_conf_dir(environ: Mapping[str, str]) -> Optional[str]:
    """Spark's configuration directory, as its launcher finds it: ``$SPARK_CONF_DIR``, else
    ``$SPARK_HOME/conf``; None when neither is set."""
    if environ.get("SPARK_CONF_DIR"):
        return environ["SPARK_CONF_DIR"]
    return os.path.join(environ["SPARK_HOME"], "conf") if environ.get("SPARK_HOME") else None
