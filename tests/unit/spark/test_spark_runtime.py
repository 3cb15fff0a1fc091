"""The embedded Spark + Iceberg runtime without a session: Java and jar discovery, the
relocated Jackson and the shared configuration. MERGE INTO on a Hadoop catalog and snapshot
properties set through ``CommitMetadata``, in a running session:
``tests/integration/test_spark_runtime_session.py``."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile

import pytest

from airflow_provider_binlog.spark import runtime
from airflow_provider_binlog.spark.relocate import ClassFormatError, relocate_class
from airflow_provider_binlog.spark.runtime import (
    ICEBERG_EXTENSIONS,
    ICEBERG_PACKAGE,
    SHADED_JACKSON_PROBE,
    SparkRuntimeError,
    catalog_spark_conf,
    find_java17_home,
    iceberg_runtime_jars,
    java_major_version,
    local_spark_conf,
    shaded_jackson_jar,
    spark_conf_for,
    spark_submit_args,
)
from tests.conftest import _require_spark

SHADED = "org/apache/iceberg/shaded/com/fasterxml/jackson/"


@pytest.fixture(scope="module")
def embedded() -> None:
    _require_spark()


# --- without a JVM -----------------------------------------------------------


def test_importing_the_provider_does_not_import_pyspark() -> None:
    code = (
        "import sys, airflow_provider_binlog, airflow_provider_binlog.spark as s\n"
        "conf = s.spark_conf_for('/w', 'lake', packages='g:a:1')\n"
        "print(s.spark_submit_args(conf)[:2])\n"
        "assert 'pyspark' not in sys.modules and 'py4j' not in sys.modules, sorted(sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "--conf" in out.stdout


def test_conf_with_packages_leaves_out_the_embedded_jars() -> None:
    conf = spark_conf_for("/data/wh", "lake", packages=ICEBERG_PACKAGE)
    assert conf["spark.jars.packages"] == ICEBERG_PACKAGE
    assert "spark.jars" not in conf
    assert not any("snowpark" in v or "shaded-jackson" in v for v in conf.values())
    assert conf["spark.sql.extensions"] == ICEBERG_EXTENSIONS
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "hadoop"
    assert conf["spark.sql.catalog.lake.warehouse"] == "/data/wh"
    assert conf["spark.sql.session.timeZone"] == "UTC"


def test_conf_with_own_jars_or_none() -> None:
    conf = spark_conf_for("s3a://bucket/wh", "cat", jars=["/opt/a.jar", "/opt/b.jar"])
    assert conf["spark.jars"] == "/opt/a.jar,/opt/b.jar"
    assert "spark.jars.packages" not in conf
    assert conf["spark.sql.catalog.cat.warehouse"] == "s3a://bucket/wh"
    conf = spark_conf_for("file:/tmp/wh", "cat", jars=[])
    assert "spark.jars" not in conf and "spark.jars.packages" not in conf
    assert conf["spark.sql.catalog.cat.warehouse"] == "file:/tmp/wh"


def test_the_stock_maven_runtime_is_the_default_unless_a_local_spark_has_the_embedded_one(monkeypatch) -> None:
    from airflow_provider_binlog.spark.catalogs import IcebergCatalog

    rest = IcebergCatalog("lake", "rest", uri="http://cat")
    cluster = catalog_spark_conf(rest)                            # a cluster: Spark fetches the stock runtime
    assert cluster["spark.jars.packages"] == ICEBERG_PACKAGE and "spark.jars" not in cluster
    assert "spark.jars" not in catalog_spark_conf(rest, runtime="provided")
    assert "spark.jars.packages" not in catalog_spark_conf(rest, runtime="provided")
    monkeypatch.setattr(runtime, "iceberg_runtime_jars", lambda: ["/embedded/iceberg.jar", "/embedded/jackson.jar"])
    monkeypatch.setattr(runtime, "embedded_runtime_installed", lambda: True)
    local = catalog_spark_conf(rest, local=True)                  # detected: the offline local mode
    assert local["spark.jars"] == "/embedded/iceberg.jar,/embedded/jackson.jar" and "spark.jars.packages" not in local
    assert catalog_spark_conf(rest)["spark.jars.packages"] == ICEBERG_PACKAGE
    assert catalog_spark_conf(rest, runtime="embedded")["spark.jars"].startswith("/embedded/")
    monkeypatch.setattr(runtime, "embedded_runtime_installed", lambda: False)
    assert catalog_spark_conf(rest, local=True)["spark.jars.packages"] == ICEBERG_PACKAGE
    with pytest.raises(SparkRuntimeError, match="not one of maven, embedded, provided"):
        catalog_spark_conf(rest, runtime="shaded")


def test_the_embedded_runtime_missing_names_both_ways_to_get_one(monkeypatch) -> None:
    monkeypatch.setattr(runtime, "_package_dir", lambda module: None)
    with pytest.raises(SparkRuntimeError) as caught:
        runtime.iceberg_runtime_jar()
    assert "[spark]" in str(caught.value) and "iceberg_runtime='maven'" in str(caught.value)


def test_conf_makes_a_local_warehouse_absolute(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    conf = spark_conf_for("wh", packages=ICEBERG_PACKAGE)
    assert conf["spark.sql.catalog.lake.warehouse"] == str(tmp_path / "wh")


def test_conf_rejects_a_catalog_name_that_is_no_identifier() -> None:
    with pytest.raises(ValueError):
        spark_conf_for("/w", "lake; drop", jars=[])


def test_spark_submit_args() -> None:
    assert spark_submit_args({"a.b": "1", "c": "x=y"}) == ["--conf", "a.b=1", "--conf", "c=x=y"]


def test_local_conf_leaves_out_embedded_jars_when_extra_conf_sets_them() -> None:
    conf = local_spark_conf("/w", "lake", {"spark.jars.packages": ICEBERG_PACKAGE})
    assert conf["spark.jars.packages"] == ICEBERG_PACKAGE
    assert "spark.jars" not in conf
    conf = local_spark_conf("/w", "lake", {"spark.jars": "/x.jar", "spark.sql.shuffle.partitions": 8})
    assert conf["spark.jars"] == "/x.jar"
    assert conf["spark.sql.shuffle.partitions"] == "8"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.pyspark.python"] == sys.executable


def test_java_major_version_reads_release_files(tmp_path) -> None:
    def fake(name: str, version: str) -> str:
        home = tmp_path / name
        (home / "bin").mkdir(parents=True)
        java = home / "bin" / "java"
        java.write_text("#!/bin/sh\nexit 1\n")
        java.chmod(0o755)
        (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
        return str(home)

    assert java_major_version(fake("j17", "17.0.15")) == 17
    assert java_major_version(fake("j8", "1.8.0_412")) == 8
    assert java_major_version(fake("j25", "25")) == 25
    assert java_major_version(str(tmp_path / "absent")) is None


def _fake_java(home, version: str) -> str:
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")
    (home / "bin" / "java").chmod(0o755)
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return str(home)


@pytest.fixture()
def fake_jvms(tmp_path, monkeypatch):
    """``/usr/lib/jvm`` seen as ``tmp_path/jvm`` and an empty PATH: the Java homes the search
    sees are the ones the test makes."""
    import glob as glob_module

    jvm = tmp_path / "jvm"
    jvm.mkdir()
    real_glob = glob_module.glob

    def fake_glob(pattern, *args, **kwargs):
        if pattern.startswith("/usr/lib/jvm/"):
            pattern = str(jvm) + pattern[len("/usr/lib/jvm"):]
        return real_glob(pattern, *args, **kwargs)

    monkeypatch.setattr(glob_module, "glob", fake_glob)
    (tmp_path / "empty-path").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return jvm


def test_find_java17_home_skips_a_java_home_of_another_version(tmp_path, monkeypatch, fake_jvms) -> None:
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path / "jdk25", "25"))
    _fake_java(fake_jvms / "java-11-openjdk-amd64", "11.0.24")
    java17 = _fake_java(fake_jvms / "java-17-openjdk-amd64", "17.0.15")
    assert find_java17_home() == java17


def test_find_java17_home_takes_java_home_as_given_when_it_is_a_java_17(tmp_path, monkeypatch, fake_jvms) -> None:
    _fake_java(fake_jvms / "java-17-openjdk-amd64", "17.0.15")
    target = _fake_java(tmp_path / "other-17", "17.0.2")
    (tmp_path / "current").symlink_to(target)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "current"))
    assert find_java17_home() == str(tmp_path / "current")


def test_find_java17_home_falls_back_to_the_java_on_the_path(tmp_path, monkeypatch, fake_jvms) -> None:
    _fake_java(fake_jvms / "java-21-openjdk-amd64", "21.0.4")
    home = _fake_java(tmp_path / "opt" / "jdk", "17.0.9")
    (tmp_path / "empty-path" / "java").symlink_to(os.path.join(home, "bin", "java"))
    assert find_java17_home() == home


def test_find_java17_home_without_one_names_the_package_to_install(tmp_path, monkeypatch, fake_jvms) -> None:
    monkeypatch.setenv("JAVA_HOME", _fake_java(tmp_path / "jdk25", "25"))
    _fake_java(fake_jvms / "java-11-openjdk-amd64", "11.0.24")
    with pytest.raises(SparkRuntimeError, match="openjdk-17-jre-headless") as info:
        find_java17_home()
    assert "no Java 17 found" in str(info.value) and "jdk25" in str(info.value)


def test_relocate_class_rejects_other_bytes() -> None:
    with pytest.raises(ClassFormatError):
        relocate_class(b"PK\x03\x04not a class", {"a": "b"})
    with pytest.raises(ClassFormatError):
        relocate_class(b"\xca\xfe\xba\xbe\x00\x00\x00\x34\x00\x05\x01\x00\x09ab", {"a": "b"})


# --- the embedded jars -------------------------------------------------------


def test_find_java17_home(embedded) -> None:
    home = find_java17_home()
    assert java_major_version(home) == 17
    assert os.access(os.path.join(home, "bin", "java"), os.X_OK)


def test_iceberg_runtime_jars(embedded) -> None:
    runtime_jar, jackson_jar = iceberg_runtime_jars()
    assert re.search(r"iceberg-spark-runtime-3\.5_2\.12-1\.10\.\d+\.jar$", runtime_jar)
    assert os.path.isfile(jackson_jar)
    with zipfile.ZipFile(jackson_jar) as z:
        z.getinfo(SHADED_JACKSON_PROBE)
    conf = spark_conf_for("/w")
    assert conf["spark.jars"] == f"{runtime_jar},{jackson_jar}"


def test_shaded_jackson_jar_is_built_cached_and_rebuilt(embedded, tmp_path) -> None:
    path = shaded_jackson_jar(str(tmp_path))
    assert os.path.dirname(path) == str(tmp_path)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        assert SHADED_JACKSON_PROBE == SHADED + "core/JsonFactoryBuilder.class"
        assert SHADED_JACKSON_PROBE in names
        assert SHADED + "databind/ObjectMapper.class" in names
        assert SHADED + "annotation/JsonProperty.class" in names
        assert SHADED + "datatype/jsr310/JavaTimeModule.class" in names
        classes = [n for n in names if n.endswith(".class")]
        assert len(classes) > 900
        assert all(n.startswith(SHADED) for n in classes), [n for n in classes if not n.startswith(SHADED)][:5]
        assert not any("module-info" in n or n.startswith("META-INF/versions/") for n in names)
        services = {n: z.read(n).decode() for n in names if n.startswith("META-INF/services/")}
        assert "META-INF/services/org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonFactory" in services
        assert all("org.apache.iceberg.shaded.com.fasterxml.jackson." in v for v in services.values())
        # No name is left unrelocated, in either form.
        for n in classes:
            data = z.read(n)
            rest = data.replace(SHADED.encode(), b"").replace(SHADED.replace("/", ".").encode(), b"")
            assert b"com/fasterxml/jackson" not in rest and b"com.fasterxml.jackson" not in rest, n
    # Cached: the second call does not rewrite it.
    mtime = os.stat(path).st_mtime_ns
    assert shaded_jackson_jar(str(tmp_path)) == path
    assert os.stat(path).st_mtime_ns == mtime
    # Missing or damaged: rebuilt.
    os.unlink(path)
    assert shaded_jackson_jar(str(tmp_path)) == path and os.path.isfile(path)
    with open(path, "wb") as f:
        f.write(b"junk")
    shaded_jackson_jar(str(tmp_path))
    with zipfile.ZipFile(path) as z:
        z.getinfo(SHADED_JACKSON_PROBE)
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".relocate-")]


def test_shaded_jackson_covers_what_the_iceberg_runtime_uses(embedded) -> None:
    runtime_jar, jackson_jar = iceberg_runtime_jars()
    with zipfile.ZipFile(jackson_jar) as z:
        have = set(z.namelist())
    wanted = set()
    pattern = re.compile(rb"L?(" + re.escape(SHADED.encode()) + rb"[A-Za-z0-9_/$]+)")
    with zipfile.ZipFile(runtime_jar) as z:
        for name in z.namelist():
            if name.endswith(".class") and name.startswith(
                    ("org/apache/iceberg/", "org/apache/iceberg/shaded/org/apache/arrow/")):
                for m in pattern.finditer(z.read(name)):
                    wanted.add(m.group(1).decode())
    assert len(wanted) > 50
    missing = sorted(c for c in wanted if c + ".class" not in have)
    assert not missing


def test_relocate_class_with_no_mapping_is_the_identity(embedded) -> None:
    sources = runtime._jackson_sources()
    count = 0
    for src in sources:
        with zipfile.ZipFile(src) as z:
            for name in z.namelist():
                if name.endswith(".class") and not name.startswith("META-INF/"):
                    data = z.read(name)
                    assert relocate_class(data, {}) == data, name
                    count += 1
    assert count > 900


def test_callback_server_is_started_once_and_no_thread_goes_on_before_it_is_complete(monkeypatch):
    """pyspark publishes the callback server before it replaces the JVM's callback client;
    a merge thread that went on in between would call back through the client being shut
    down. Every thread must wait for the one start to finish."""
    import threading
    import time

    import pyspark.java_gateway

    started: list[str] = []
    finished = threading.Event()

    def slow_start(gateway):
        started.append(threading.current_thread().name)
        gateway._callback_server = object()  # published early, as pyspark does
        time.sleep(0.2)
        finished.set()

    monkeypatch.setattr(pyspark.java_gateway, "ensure_callback_server_started", slow_start)

    class Gateway:
        pass

    gateway = Gateway()
    went_on_early: list[str] = []

    def merge_thread():
        runtime._start_callback_server_once(gateway)
        if not finished.is_set():
            went_on_early.append(threading.current_thread().name)

    threads = [threading.Thread(target=merge_thread, name=f"t{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1
    assert went_on_early == []
    runtime._start_callback_server_once(gateway)
    assert len(started) == 1
