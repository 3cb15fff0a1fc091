"""The embedded local Spark + Iceberg runtime, and the configuration the
merge job shares with ``spark-submit``.

Ways to put Iceberg on Spark's classpath, chosen by :func:`catalog_spark_conf`:

* ``packages="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"``:
  Spark resolves the Maven coordinates (``spark.jars.packages``);
* ``jars=[...]``: jars the caller has (``spark.jars``); ``jars=[]`` adds
  none, for a cluster whose Spark already has Iceberg;
* neither: the ``runtime`` choice (:data:`ICEBERG_RUNTIMES`): ``maven``, the
  stock coordinates :data:`ICEBERG_PACKAGE`; ``provided``, nothing (the
  cluster has Iceberg); ``embedded``, the runtime of
  :func:`iceberg_runtime_jars` for the offline local mode, i.e. the Iceberg
  runtime jar of the ``snowpark-connect-deps-iceberg`` wheel plus a relocated
  Jackson built from pyspark's own jars (that runtime jar refers to
  ``org.apache.iceberg.shaded.com.fasterxml.jackson`` without holding it).
  Unchosen: ``embedded`` for a local Spark when that wheel is installed, else
  ``maven``.

Spark 3.5 runs on Java 8, 11 or 17, not later; :func:`local_spark_session`
always starts the JVM with the Java 17 of :func:`find_java17_home`, whatever
``java`` is on the ``PATH``.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from airflow_provider_binlog.spark.catalogs import REDACTION_REGEX, IcebergCatalog
from airflow_provider_binlog.spark.relocate import relocate_jars

from ..errors import ProviderError

T = TypeVar("T")

ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
#: Maven coordinates of the Iceberg runtime matching the embedded one, for
#: ``packages=`` on a cluster that can reach a Maven repository.
ICEBERG_PACKAGE = "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2"

#: How the Iceberg runtime reaches Spark when neither ``packages`` nor ``jars`` is given.
ICEBERG_RUNTIMES = ("maven", "embedded", "provided")

#: The package the Iceberg runtime jar refers to Jackson by.
SHADED_JACKSON_PACKAGE = "org.apache.iceberg.shaded.com.fasterxml.jackson"
#: pyspark's Jackson jars that are relocated, by artifact name.  jsr310 is
#: used by Iceberg's shaded Arrow (``ObjectMapperFactory``).
JACKSON_ARTIFACTS = ("jackson-annotations", "jackson-core", "jackson-databind", "jackson-datatype-jsr310")
#: Bumped whenever the relocation changes, so cached jars are rebuilt.
RELOCATION_REVISION = "1"

INSTALL_HINT = ("pip install 'airflow-provider-binlog[spark]' (pyspark and, on Python < 3.13, "
                "snowpark-connect-deps-iceberg), or iceberg_runtime='maven' to have Spark fetch "
                f"{ICEBERG_PACKAGE} from Maven")
JAVA_HINT = (
    "install a Java 17 runtime (Debian/Ubuntu: apt-get install openjdk-17-jre-headless) "
    "or set JAVA_HOME to one; Spark 3.5 does not run on Java 18 or later"
)

_CACHE_ENV = "AIRFLOW_PROVIDER_BINLOG_CACHE_DIR"
_build_lock = threading.Lock()


class SparkRuntimeError(ProviderError, RuntimeError):
    """Something the embedded Spark runtime needs is missing."""


# --- Java ------------------------------------------------------------------


def java_major_version(home: str) -> int | None:
    """The major version of the JDK/JRE at ``home`` (8 for ``1.8``), or
    None when ``home`` holds no runnable ``bin/java``."""
    java = os.path.join(home, "bin", "java")
    if not (os.path.isfile(java) and os.access(java, os.X_OK)):
        return None
    version = None
    try:
        with open(os.path.join(home, "release"), encoding="utf-8", errors="replace") as f:
            m = re.search(r'^JAVA_VERSION="([^"]+)"', f.read(), re.M)
            version = m.group(1) if m else None
    except OSError:
        pass
    if version is None:
        try:
            out = subprocess.run(
                [java, "-version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
        version = m.group(1) if m else None
    if not version:
        return None
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major


def _java_home_candidates() -> Iterator[str]:
    env = os.environ.get("JAVA_HOME")
    if env:
        yield env
    yield from sorted(glob.glob("/usr/lib/jvm/*17*"))
    yield from sorted(glob.glob("/usr/lib/jvm/*"))
    java = shutil.which("java")
    if java:
        yield os.path.dirname(os.path.dirname(os.path.realpath(java)))


def find_java17_home() -> str:
    """The home of a Java 17: ``$JAVA_HOME`` when it is one, else the first
    Java 17 under ``/usr/lib/jvm``, else the one ``java`` on the PATH
    belongs to.  Raises :class:`SparkRuntimeError` when there is none."""
    seen: set[str] = set()
    for home in _java_home_candidates():
        real = os.path.realpath(home)
        if real in seen:
            continue
        seen.add(real)
        if java_major_version(real) == 17:
            return home if home == os.environ.get("JAVA_HOME") else real
    raise SparkRuntimeError(f"no Java 17 found (JAVA_HOME={os.environ.get('JAVA_HOME')!r}); {JAVA_HINT}")


# --- jars ------------------------------------------------------------------


def _package_dir(module: str) -> str | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def spark_jars_dirs() -> list[str]:
    """The directories of Spark's jars here, the one ``spark-submit`` runs on first:
    ``$SPARK_HOME/jars`` when ``SPARK_HOME`` is set (its launcher then takes that Spark),
    then pyspark's."""
    dirs = []
    if os.environ.get("SPARK_HOME"):
        dirs.append(os.path.join(os.environ["SPARK_HOME"], "jars"))
    pyspark = _package_dir("pyspark")
    if pyspark:
        dirs.append(os.path.join(pyspark, "jars"))
    found: list[str] = []
    for d in dirs:
        if os.path.isdir(d) and os.path.realpath(d) not in map(os.path.realpath, found):
            found.append(d)
    return found


def _scala_binary_version(jars_dirs: Sequence[str]) -> str:
    for d in jars_dirs:
        for path in glob.glob(os.path.join(d, "spark-core_*.jar")):
            m = re.match(r"spark-core_(\d+\.\d+)-", os.path.basename(path))
            if m:
                return m.group(1)
    return "2.12"


def iceberg_runtime_jar() -> str:
    """The Iceberg Spark 3.5 runtime jar of the ``snowpark-connect-deps-iceberg``
    wheel, for the Scala version of the installed pyspark."""
    pkg = _package_dir("snowpark_connect_deps_iceberg")
    if pkg is None:
        raise SparkRuntimeError(f"the Iceberg runtime jar is missing: {INSTALL_HINT}")
    try:
        spark_version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        raise SparkRuntimeError(f"pyspark is not installed: {INSTALL_HINT}") from None
    if not spark_version.startswith("3.5."):
        raise SparkRuntimeError(
            f"the embedded Iceberg runtime is built for Spark 3.5, not pyspark {spark_version}; "
            f"install pyspark 3.5 or pass packages=/jars= for your Spark"
        )
    scala = _scala_binary_version(spark_jars_dirs())
    found = sorted(glob.glob(os.path.join(pkg, "jars", f"iceberg-spark-runtime-3.5_{scala}-*.jar")))
    if not found:
        raise SparkRuntimeError(
            f"no iceberg-spark-runtime-3.5_{scala} jar in {os.path.join(pkg, 'jars')}: "
            f"reinstall snowpark-connect-deps-iceberg ({INSTALL_HINT})"
        )
    return found[-1]


def _jackson_sources() -> list[str]:
    dirs = spark_jars_dirs()
    if not dirs:
        raise SparkRuntimeError(f"pyspark (and its jars) is not installed: {INSTALL_HINT}")
    sources = []
    for artifact in JACKSON_ARTIFACTS:
        found: list[str] = []
        for d in dirs:
            found = sorted(glob.glob(os.path.join(d, f"{artifact}-2.*.jar")))
            if found:
                break
        if not found:
            raise SparkRuntimeError(
                f"no {artifact} jar in {', '.join(dirs)}; the relocated Jackson for Iceberg "
                f"is built from Spark's own Jackson jars ({INSTALL_HINT})"
            )
        sources.append(found[-1])
    return sources


def cache_dir() -> str:
    """Where built jars are kept: ``$AIRFLOW_PROVIDER_BINLOG_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/airflow-provider-binlog`` (``~/.cache/...``), else,
    when that cannot be created, a per-user directory under the temp dir."""
    env = os.environ.get(_CACHE_ENV)
    if env:
        os.makedirs(env, exist_ok=True)
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "airflow-provider-binlog")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    path = os.path.join(tempfile.gettempdir(), f"airflow-provider-binlog-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    return path


def _jar_has(path: str, entry: str) -> bool:
    try:
        with zipfile.ZipFile(path) as z:
            z.getinfo(entry)
        return True
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


SHADED_JACKSON_PROBE = SHADED_JACKSON_PACKAGE.replace(".", "/") + "/core/JsonFactoryBuilder.class"


def shaded_jackson_jar(directory: str | None = None) -> str:
    """The jar of Spark's Jackson relocated to
    ``org.apache.iceberg.shaded.com.fasterxml.jackson``, built on first use
    into :func:`cache_dir` (or ``directory``) and rebuilt when missing or
    damaged.  Its name carries a digest of the source jars and of the
    relocation revision, so another Spark or a changed relocation gets its
    own jar."""
    sources = _jackson_sources()
    digest = hashlib.sha256(RELOCATION_REVISION.encode())
    for src in sources:
        digest.update(f"{os.path.basename(src)}:{os.path.getsize(src)}\n".encode())
    m = re.search(r"-(2\.[0-9.]+)\.jar$", os.path.basename(sources[1]))
    version = m.group(1) if m else "2"
    target = os.path.join(
        directory or cache_dir(), f"iceberg-shaded-jackson-{version}-{digest.hexdigest()[:12]}.jar"
    )
    with _build_lock:
        if not _jar_has(target, SHADED_JACKSON_PROBE):
            relocate_jars(
                sources,
                target,
                {"com.fasterxml.jackson": SHADED_JACKSON_PACKAGE},
                manifest_lines=[
                    "Created-By: airflow-provider-binlog",
                    "Implementation-Title: Jackson relocated for Apache Iceberg",
                    f"Implementation-Version: {version}",
                ],
            )
            if not _jar_has(target, SHADED_JACKSON_PROBE):
                raise SparkRuntimeError(f"building {target} failed: it lacks {SHADED_JACKSON_PROBE}")
    return target


def embedded_runtime_installed() -> bool:
    """Whether the wheel holding the embedded Iceberg runtime jar is installed."""
    return _package_dir("snowpark_connect_deps_iceberg") is not None


def choose_iceberg_runtime(runtime: str | None = None, *, local: bool = False) -> str:
    """``runtime`` checked, or when None: ``embedded`` for a local Spark with the embedded
    runtime installed (the offline local mode), else ``maven``."""
    if runtime is None:
        return "embedded" if local and embedded_runtime_installed() else "maven"
    if runtime not in ICEBERG_RUNTIMES:
        raise SparkRuntimeError(f"iceberg_runtime={runtime!r} is not one of {', '.join(ICEBERG_RUNTIMES)}",
                                hint="maven: Spark fetches the stock runtime; embedded: the jar of the spark "
                                     "extra, offline; provided: the cluster's Spark has Iceberg")
    return runtime


def iceberg_runtime_jars() -> list[str]:
    """The jars that put Iceberg on an embedded Spark 3.5: the Iceberg
    runtime jar and the relocated Jackson it needs (built on first use)."""
    return [iceberg_runtime_jar(), shaded_jackson_jar()]


# --- configuration ---------------------------------------------------------


def spark_conf_for(
    warehouse: str,
    catalog: str = "lake",
    *,
    packages: str | None = None,
    jars: Sequence[str] | None = None,
    runtime: str | None = None,
    local: bool = True,
) -> dict[str, str]:
    """Spark configuration for an Iceberg Hadoop catalog ``catalog`` whose
    tables live under ``warehouse`` (a local path, made absolute, or a URI):
    :func:`catalog_spark_conf` of that catalog."""
    return catalog_spark_conf(IcebergCatalog(catalog, "hadoop", warehouse=warehouse),
                              packages=packages, jars=jars, runtime=runtime, local=local)


def catalog_spark_conf(
    catalog: IcebergCatalog,
    *,
    packages: str | None = None,
    jars: Sequence[str] | None = None,
    runtime: str | None = None,
    local: bool = False,
) -> dict[str, str]:
    """Spark configuration for the Iceberg catalog ``catalog`` (its secrets
    left out: see :meth:`IcebergCatalog.secret_conf`), with Iceberg's SQL
    extensions (MERGE INTO, ...), and UTC as the session time zone.  Usable
    for a local session and, through :func:`spark_submit_args`, for
    ``spark-submit``.

    ``packages`` (Maven coordinates) and ``jars`` name the Iceberg runtime
    the caller provides; ``jars=[]`` adds nothing (Spark already has it).
    With neither, ``runtime`` (:func:`choose_iceberg_runtime`; ``local``: the
    Spark runs here).  The catalog's own jars (a JDBC driver) are added in
    every case."""
    conf = {"spark.sql.extensions": ICEBERG_EXTENSIONS, **catalog.spark_conf(),
            "spark.sql.session.timeZone": "UTC", "spark.redaction.regex": REDACTION_REGEX}
    if packages:
        conf["spark.jars.packages"] = packages
    all_jars = list(jars or ())
    if packages is None and jars is None:
        chosen = choose_iceberg_runtime(runtime, local=local)
        if chosen == "embedded":
            all_jars = iceberg_runtime_jars()
        elif chosen == "maven":
            conf["spark.jars.packages"] = ICEBERG_PACKAGE
    all_jars += [j for j in catalog.jars if j not in all_jars]
    if all_jars:
        conf["spark.jars"] = ",".join(all_jars)
    return conf


def spark_submit_args(conf: Mapping[str, Any]) -> list[str]:
    """``["--conf", "key=value", ...]`` for ``spark-submit``."""
    args: list[str] = []
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


#: Settings of the local session beyond :func:`spark_conf_for`.
LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "1g",
    # No dependence on the host name resolving.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}

_JAR_KEYS = ("spark.jars", "spark.jars.packages")


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def local_spark_conf(
    warehouse: str,
    catalog: str = "lake",
    extra_conf: Mapping[str, Any] | None = None,
    *,
    packages: str | None = None,
    jars: Sequence[str] | None = None,
) -> dict[str, str]:
    """The configuration :func:`local_spark_session` starts Spark with:
    :func:`spark_conf_for`, then :data:`LOCAL_DEFAULTS` and this
    interpreter for the Python workers, then ``extra_conf``.  When
    ``extra_conf`` sets ``spark.jars`` or ``spark.jars.packages`` (and
    neither ``packages`` nor ``jars`` is given) the embedded jars are left
    out."""
    extra = {k: str(v) for k, v in (extra_conf or {}).items()}
    if any(k in extra for k in _JAR_KEYS) and packages is None and jars is None:
        jars = []
    conf = spark_conf_for(warehouse, catalog, packages=packages, jars=jars)
    conf.update(LOCAL_DEFAULTS)
    conf["spark.pyspark.python"] = sys.executable
    conf["spark.pyspark.driver.python"] = sys.executable
    conf.update(extra)
    return conf


def local_spark_session(
    warehouse: str,
    catalog: str = "lake",
    extra_conf: Mapping[str, Any] | None = None,
    app_name: str = "airflow-provider-binlog",
    *,
    master: str = "local[2]",
    packages: str | None = None,
    jars: Sequence[str] | None = None,
    java_home: str | None = None,
) -> Any:
    """A local ``SparkSession`` with the Iceberg catalog ``catalog`` over
    ``warehouse`` (see :func:`spark_conf_for`), 4 shuffle partitions, no UI,
    1 GiB of driver memory and UTC, started on Java 17 (``java_home`` or
    :func:`find_java17_home`).  ``extra_conf`` is applied last; when it sets
    ``spark.jars`` or ``spark.jars.packages`` the embedded jars are left out.

    Static settings (jars, extensions, memory) only take effect when this
    starts the JVM: if a session is already running it is returned, with
    the catalog settings applied to it."""
    conf = local_spark_conf(warehouse, catalog, extra_conf, packages=packages, jars=jars)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkRuntimeError(f"pyspark is not installed: {INSTALL_HINT}") from None

    home = java_home or find_java17_home()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    # pyspark starts the JVM through spark-submit, which takes java from
    # JAVA_HOME; PYSPARK_PYTHON keeps the workers on this interpreter;
    # SPARK_LOCAL_IP keeps Spark from resolving the host name.
    env = {"JAVA_HOME": home, "PYSPARK_PYTHON": sys.executable}
    if not os.environ.get("SPARK_LOCAL_IP"):
        env["SPARK_LOCAL_IP"] = conf.get("spark.driver.bindAddress", "127.0.0.1")
    with _environ(**env):
        return builder.getOrCreate()


# --- commit properties -----------------------------------------------------


class _Callable:
    """A ``java.util.concurrent.Callable`` running a Python function."""

    def __init__(self, fn: Callable[[], Any]):
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def call(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:
            self.error = exc
            raise
        return None

    class Java:
        implements = ["java.util.concurrent.Callable"]


_CALLBACK_SERVER_LOCK = threading.Lock()


def _start_callback_server_once(gateway: Any) -> None:
    """pyspark's ``ensure_callback_server_started``, made safe for several
    driver threads (the merge applies tables concurrently): it publishes the
    new callback server before it replaces the JVM's callback client, so a
    second thread could call back through the client being shut down (py4j:
    "Cannot obtain a new communication channel").  The lock makes the others
    wait until the replacement is complete."""
    if gateway.__dict__.get("_binlog_callback_ready"):
        return
    from pyspark.java_gateway import ensure_callback_server_started

    with _CALLBACK_SERVER_LOCK:
        if not gateway.__dict__.get("_binlog_callback_ready"):
            ensure_callback_server_started(gateway)
            gateway.__dict__["_binlog_callback_ready"] = True


def run_with_commit_properties(spark: Any, props: Mapping[str, Any], fn: Callable[[], T]) -> T:
    """Run ``fn()`` so that every Iceberg commit it makes from this thread
    (e.g. a ``MERGE INTO`` through ``spark.sql``) records ``props`` in its
    snapshot summary, and return what ``fn`` returns.

    Spark 3.5 SQL has no way to pass snapshot properties to MERGE; Iceberg's
    ``CommitMetadata.withCommitProperties`` sets them for the calling JVM
    thread.  It is called through py4j with ``fn`` as a callback; pyspark's
    pinned-thread mode (the default) runs the Spark calls ``fn`` makes on
    that same JVM thread.  An exception raised by ``fn`` is re-raised as
    is."""
    from py4j.protocol import Py4JJavaError

    sc = spark.sparkContext
    jvm = sc._jvm
    gateway = sc._gateway
    if os.environ.get("PYSPARK_PIN_THREAD", "true").lower() != "true":
        raise SparkRuntimeError(
            "run_with_commit_properties needs pyspark's pinned-thread mode "
            "(PYSPARK_PIN_THREAD unset or true)"
        )
    commit_metadata = jvm.org.apache.iceberg.spark.CommitMetadata
    if not hasattr(commit_metadata, "withCommitProperties") or type(commit_metadata).__name__ != "JavaClass":
        raise SparkRuntimeError(
            "org.apache.iceberg.spark.CommitMetadata is not on Spark's classpath: "
            "the session lacks the Iceberg Spark runtime"
        )
    _start_callback_server_once(gateway)
    java_props = jvm.java.util.HashMap()
    for key, value in props.items():
        java_props.put(str(key), str(value))
    exception_class = jvm.java.lang.Class.forName("java.lang.Exception")
    task = _Callable(fn)
    try:
        commit_metadata.withCommitProperties(java_props, task, exception_class)
    except Py4JJavaError:
        if task.error is not None:
            raise task.error from None
        raise
    if task.error is not None:
        raise task.error
    return task.result  # type: ignore[return-value]


def snapshot_summary(spark: Any, table: str, snapshot_id: int | None = None) -> dict[str, str]:
    """The summary of a snapshot of Iceberg ``table`` (``catalog.db.table``):
    ``snapshot_id``'s, or by default that of the ``main`` branch's head;
    ``{}`` when the table has no such snapshot."""
    if snapshot_id is None:
        rows = spark.sql(
            f"SELECT s.summary FROM {table}.snapshots s JOIN {table}.refs r "
            f"ON s.snapshot_id = r.snapshot_id WHERE r.name = 'main'"
        ).collect()
    else:
        rows = spark.sql(
            f"SELECT summary FROM {table}.snapshots WHERE snapshot_id = {int(snapshot_id)}"
        ).collect()
    return dict(rows[0][0]) if rows else {}
