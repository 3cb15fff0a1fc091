"""Static checks of the local stack (``docker-compose.yml`` and what it mounts and builds): the
file is only ever parsed here, no container is started."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
INIT_SQL = ROOT / "docker" / "mysql-init" / "01-replication.sql"
SERVICES = ("mysql", "postgres", "airflow", "spark-master", "spark-worker")
POSTGRES_INIT = ROOT / "docker" / "postgres-init" / "01-databases.sql"
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}


@pytest.fixture(scope="module")
def compose() -> dict:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


def services(compose: dict) -> dict:
    return compose["services"]


def as_args(value) -> list[str]:
    """A command/entrypoint as a list of arguments (compose takes a list or a shell string)."""
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    return [str(v) for v in value]


def options(args: list[str]) -> dict[str, str]:
    """``--name=value`` / ``--name value`` options, names normalised to ``name_with_underscores``."""
    out: dict[str, str] = {}
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        name, sep, value = arg[2:].partition("=")
        if not sep:
            nxt = args[i + 1] if i + 1 < len(args) else ""
            value = "" if nxt.startswith("--") else nxt
        out[name.replace("-", "_").lower()] = value
    return out


def environment(service: dict) -> dict[str, object]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return dict(env)


def mounts(service: dict) -> list[dict]:
    """The service's volumes as ``{"type", "source", "target", "read_only"}``."""
    out = []
    for item in service.get("volumes") or []:
        if isinstance(item, dict):
            out.append({"type": item.get("type", "volume"), "source": item.get("source"),
                        "target": item["target"], "read_only": bool(item.get("read_only"))})
            continue
        parts = item.split(":")
        source, target = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
        kind = "bind" if source and (source.startswith((".", "/", "~"))) else "volume"
        out.append({"type": kind, "source": source, "target": target,
                    "read_only": len(parts) > 2 and "ro" in parts[2].split(",")})
    return out


def volume_at(service: dict, target: str):
    """The named volume mounted at ``target``, or None."""
    for m in mounts(service):
        if m["target"].rstrip("/") == target.rstrip("/") and m["type"] == "volume":
            return m["source"]
    return None


def connection(compose: dict, conn_id: str) -> dict:
    env = environment(services(compose)["airflow"])
    name = f"AIRFLOW_CONN_{conn_id.upper()}"
    assert name in env, f"the airflow service does not define {name}"
    conn = json.loads(env[name])
    assert isinstance(conn, dict)
    return conn


def mysql_server_id(compose: dict) -> int:
    return int(options(as_args(services(compose)["mysql"].get("command")))["server_id"])


# --------------------------------------------------------------------------- services


def test_services_are_defined(compose):
    assert set(SERVICES) <= set(services(compose))


def test_mysql_logs_full_row_images_with_gtids(compose):
    mysql = services(compose)["mysql"]
    assert mysql["image"].startswith("mysql:8.4")
    opts = options(as_args(mysql.get("command")))
    assert "log_bin" in opts
    assert opts.get("binlog_format", "").upper() == "ROW"
    assert opts.get("binlog_row_image", "").upper() == "FULL"
    assert opts.get("binlog_row_metadata", "").upper() == "FULL"
    assert opts.get("gtid_mode", "").upper() == "ON"
    assert opts.get("enforce_gtid_consistency", "").upper() == "ON"
    assert int(opts["server_id"]) >= 1


def test_init_sql_creates_the_replication_user(compose):
    mysql = services(compose)["mysql"]
    init = [m for m in mounts(mysql) if m["target"].startswith("/docker-entrypoint-initdb.d/")]
    assert [ROOT / m["source"] for m in init] == [INIT_SQL]
    sql = INIT_SQL.read_text()
    sql = re.sub(r"--[^\n]*", "", sql)
    conn = connection(compose, "mysql_binlog_default")
    user = re.escape(conn["login"])
    created = re.search(rf"CREATE USER (?:IF NOT EXISTS )?'{user}'@'%' IDENTIFIED BY '([^']*)'", sql, re.I)
    assert created, "the init SQL does not create the connection's user"
    assert created.group(1) == conn["password"]
    granted: set[str] = set()
    for privileges, scope in re.findall(rf"GRANT\s+(.+?)\s+ON\s+(\S+)\s+TO\s+'{user}'@'%'", sql, re.I | re.S):
        for privilege in privileges.split(","):
            granted.add(privilege.strip().upper())
            if privilege.strip().upper() in ("REPLICATION SLAVE", "REPLICATION CLIENT", "RELOAD"):
                assert scope == "*.*", f"{privilege} is a global privilege"
    assert {"REPLICATION SLAVE", "REPLICATION CLIENT", "SELECT", "RELOAD"} <= granted
    environment_db = environment(mysql).get("MYSQL_DATABASE")
    assert environment_db and re.search(r"CREATE TABLE\s+\w+", sql, re.I)


def test_airflow_mounts_the_dags(compose):
    airflow = services(compose)["airflow"]
    dags = [m for m in mounts(airflow) if m["target"] == "/opt/airflow/dags"]
    assert len(dags) == 1 and dags[0]["type"] == "bind"
    assert (ROOT / dags[0]["source"]).resolve() == ROOT / "dags"


def test_binlog_connection(compose):
    conn = connection(compose, "mysql_binlog_default")
    assert conn["conn_type"] == "mysql_binlog"
    assert conn["host"] == "mysql" and int(conn.get("port", 3306)) == 3306
    extra = conn["extra"] if isinstance(conn["extra"], dict) else json.loads(conn["extra"])
    server_id = extra["server_id"]
    assert isinstance(server_id, int) and 1 <= server_id < 2**32
    assert server_id != mysql_server_id(compose)
    # checkpoints in the stack's PostgreSQL, the password not in the URL
    store = extra["checkpoint_store_uri"]
    from sqlalchemy.engine import make_url

    url = make_url(store)
    assert url.drivername == "postgresql+psycopg" and url.host == "postgres" and url.password is None
    pg = environment(services(compose)["postgres"])
    assert url.username == pg["POSTGRES_USER"]
    assert environment(services(compose)["airflow"])["PGPASSWORD"] == pg["POSTGRES_PASSWORD"]
    created = re.findall(r"CREATE DATABASE\s+(\w+)", POSTGRES_INIT.read_text(), re.I)
    assert url.database in created + [pg["POSTGRES_DB"]]


def test_binlog_connection_is_accepted_by_the_hook(compose, monkeypatch):
    pytest.importorskip("airflow")
    from airflow_provider_binlog.hooks.binlog import BinlogHook

    env = environment(services(compose)["airflow"])
    monkeypatch.setenv("AIRFLOW_CONN_MYSQL_BINLOG_DEFAULT", env["AIRFLOW_CONN_MYSQL_BINLOG_DEFAULT"])
    kwargs = BinlogHook("mysql_binlog_default").replica_kwargs()
    assert kwargs["host"] == "mysql" and kwargs["server_id"] != mysql_server_id(compose)


def test_spark_connection_points_at_the_master(compose):
    conn = connection(compose, "spark_default")
    assert conn["conn_type"] == "spark"
    master = options(as_args(services(compose)["spark-master"].get("command")))
    assert conn["host"] == f"spark://{master['host']}"
    assert int(conn["port"]) == int(master["port"])
    worker = as_args(services(compose)["spark-worker"].get("command"))
    assert f"spark://{master['host']}:{master['port']}" in worker


def test_binlog_variables(compose):
    env = environment(services(compose)["airflow"])
    for name in ("BINLOG_SOURCE_ID", "BINLOG_CONN_ID", "BINLOG_TABLES", "BINLOG_STAGING_DIR",
                 "BINLOG_CATALOG_CONN_ID", "BINLOG_SPARK_JARS"):
        assert env.get(name), f"{name} is not set"
    assert env.get("BINLOG_WAREHOUSE") == ""  # the catalog of the connection, not the embedded one
    assert f"AIRFLOW_CONN_{str(env['BINLOG_CONN_ID']).upper()}" in env
    assert f"AIRFLOW_CONN_{str(env['BINLOG_CATALOG_CONN_ID']).upper()}" in env


def test_catalog_connection_is_the_jdbc_catalog_on_the_stacks_postgresql(compose, monkeypatch):
    pytest.importorskip("airflow")
    from airflow_provider_binlog.hooks.iceberg_catalog import IcebergCatalogHook

    env = environment(services(compose)["airflow"])
    conn_id = str(env["BINLOG_CATALOG_CONN_ID"])
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", env[f"AIRFLOW_CONN_{conn_id.upper()}"])
    catalog = IcebergCatalogHook(conn_id).get_catalog("lake")
    pg = environment(services(compose)["postgres"])
    assert catalog.type == "jdbc"
    assert catalog.uri == f"jdbc:postgresql://postgres:5432/{pg['POSTGRES_DB']}"
    assert catalog.properties == {"jdbc.user": pg["POSTGRES_USER"], "jdbc.password": pg["POSTGRES_PASSWORD"]}
    # the warehouse is shared by Airflow and Spark; Spark sessions started by hand see the same catalog
    conf = spark_defaults(compose)
    assert conf["spark.sql.catalog.lake.uri"] == catalog.uri
    assert conf["spark.sql.catalog.lake.warehouse"] == catalog.warehouse
    assert "/usr/share/java/postgresql.jar" in conf["spark.jars"].split(",")
    (_, dockerfile), = set(_dockerfiles(compose))
    assert "libpostgresql-jdbc-java" in dockerfile.read_text()
    for jar in str(env["BINLOG_SPARK_JARS"]).split(","):
        assert jar in dockerfile.read_text(), f"{dockerfile} does not create {jar}"


def spark_defaults(compose: dict) -> dict[str, str]:
    """The spark-defaults.conf the airflow service's spark-submit reads (SPARK_CONF_DIR)."""
    airflow = services(compose)["airflow"]
    conf_dir = environment(airflow).get("SPARK_CONF_DIR")
    assert conf_dir, "the airflow service sets no SPARK_CONF_DIR"
    target = f"{str(conf_dir).rstrip('/')}/spark-defaults.conf"
    mounted = [m for m in mounts(airflow) if m["target"] == target and m["type"] == "bind"]
    assert len(mounted) == 1, f"nothing is mounted at {target}"
    out = {}
    for line in (ROOT / mounted[0]["source"]).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition(" ")
            out[key] = value.strip()
    return out


def test_spark_defaults_configure_the_iceberg_catalog(compose):
    conf = spark_defaults(compose)
    assert conf["spark.sql.extensions"] == "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
    assert conf["spark.sql.catalog.lake"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.lake.type"] == "jdbc"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    # the Iceberg runtime jars: put at these paths by the image
    (_, dockerfile), = set(_dockerfiles(compose))
    text = dockerfile.read_text()
    jars = conf["spark.jars"].split(",")
    assert any("iceberg-spark-runtime" in j for j in jars)
    for jar in jars:
        assert jar in text or jar == "/usr/share/java/postgresql.jar", f"{dockerfile} does not create {jar}"


def test_example_dag_variables_are_set(compose):
    """Every ``BINLOG_*`` variable the example DAG reads is defined for Airflow."""
    dag = ROOT / "dags" / "binlog_cdc.py"
    if not dag.exists():
        pytest.skip("no dags/binlog_cdc.py")
    env = environment(services(compose)["airflow"])
    read = set(re.findall(r"\b(BINLOG_[A-Z0-9_]+)\b", dag.read_text()))
    assert read <= set(env), f"not set in docker-compose.yml: {sorted(read - set(env))}"


@pytest.mark.parametrize("storage", ["staging", "warehouse"])
def test_storage_is_shared_by_airflow_and_spark(compose, storage):
    svc = services(compose)
    env = environment(svc["airflow"])
    if storage == "staging":
        paths = {str(env["BINLOG_STAGING_DIR"])}
    else:  # the embedded catalog's, the catalog connection's, and that of spark-defaults.conf
        paths = {str(env["BINLOG_WAREHOUSE"] or "")} - {""}
        catalog = json.loads(env[f"AIRFLOW_CONN_{str(env['BINLOG_CATALOG_CONN_ID']).upper()}"])
        paths.add(catalog["extra"]["warehouse"])
        paths |= {v.removeprefix("file://") for k, v in spark_defaults(compose).items()
                  if re.fullmatch(r"spark\.sql\.catalog\.\w+\.warehouse", k)}
    assert paths
    for path in paths:
        volume = volume_at(svc["airflow"], path)
        assert volume, f"{storage} {path} is not on a named volume"
        assert volume in (compose.get("volumes") or {})
        for name in ("spark-master", "spark-worker"):
            assert volume_at(svc[name], path) == volume, f"{name} lacks {volume} at {path}"


# --------------------------------------------------------------------------- wiring


def test_depends_on_names_defined_services(compose):
    svc = services(compose)
    for name, service in svc.items():
        deps = service.get("depends_on") or {}
        if isinstance(deps, list):
            deps = {d: {"condition": "service_started"} for d in deps}
        for dep, spec in deps.items():
            assert dep in svc and dep != name, f"{name} depends on unknown service {dep}"
            assert spec["condition"] in CONDITIONS
            if spec["condition"] == "service_healthy":
                assert svc[dep].get("healthcheck"), f"{dep} has no healthcheck"
    assert {"mysql", "postgres", "spark-master"} <= set(svc["airflow"]["depends_on"])


def test_every_service_has_a_healthcheck(compose):
    for name, service in services(compose).items():
        check = service.get("healthcheck")
        assert check and not check.get("disable"), f"{name} has no healthcheck"
        assert as_args(check["test"])[0] in ("CMD", "CMD-SHELL")


def test_named_volumes_are_declared(compose):
    declared = set(compose.get("volumes") or {})
    for name, service in services(compose).items():
        for m in mounts(service):
            if m["type"] == "volume" and m["source"]:
                assert m["source"] in declared, f"{name} uses undeclared volume {m['source']}"


def test_environment_values_are_scalars(compose):
    # compose rejects booleans in environment mappings
    for name, service in services(compose).items():
        for key, value in environment(service).items():
            assert value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool)), \
                f"{name}: {key} must be a string"


# --------------------------------------------------------------------------- images and files


def _pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def test_images_are_pinned(compose):
    for name, service in services(compose).items():
        assert service.get("image") or service.get("build"), f"{name} has neither image nor build"
        if service.get("image"):
            assert _pinned(service["image"]), f"{name}: image {service['image']} is not pinned"


def _dockerfiles(compose):
    for service in services(compose).values():
        build = service.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = ROOT / build.get("context", ".")
        yield context, context / build.get("dockerfile", "Dockerfile")


def test_built_images_have_pinned_bases(compose):
    files = set(_dockerfiles(compose))
    assert files, "no service is built"
    for context, dockerfile in files:
        assert context.is_dir() and dockerfile.is_file()
        text = dockerfile.read_text()
        args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.M))
        stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\w+)", text, re.M | re.I))
        for base in re.findall(r"^FROM\s+(\S+)", text, re.M | re.I):
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
            assert base in stages or _pinned(base), f"{dockerfile}: base {base} is not pinned"


def test_airflow_image_installs_the_provider(compose):
    (context, dockerfile), = {d for d in _dockerfiles(compose)}
    text = dockerfile.read_text()
    assert re.search(r"apache/airflow:\S*3\.3\.2", text)
    assert image_extras(compose) == ["spark", "postgres", "arrow-snapshots"] and "-c constraints.txt" in text
    assert re.search(r"(jre|jdk)\S*17|17\S*(jre|jdk)", text, re.I), "no Java 17"
    for source in re.findall(r"^COPY\s+(?!.*--from)(?:--\S+\s+)*(.+)\s+\S+$", text, re.M):
        for path in source.split():
            assert (context / path).exists(), f"{dockerfile} copies missing {path}"


def test_mounted_files_exist(compose):
    for name, service in services(compose).items():
        for m in mounts(service):
            if m["type"] == "bind":
                assert (ROOT / m["source"]).exists(), f"{name} mounts missing {m['source']}"


# --------------------------------------------------------------------------- the stack and the package


def image_extras(compose: dict) -> list[str]:
    """The extras of the project the image's ``pip install`` line installs (``".[a,b]"``)."""
    (_, dockerfile), = set(_dockerfiles(compose))
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    installs = [line for line in text.splitlines() if re.match(r"\s*RUN\s.*\bpip install\b", line)]
    assert len(installs) == 1, installs
    project = re.findall(r"""["']\.\[([^]]*)\]["']""", installs[0])
    assert len(project) == 1, f"the install line installs no '.[extras]': {installs[0]}"
    return [extra.strip() for extra in project[0].split(",")]


def pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_image_installs_only_extras_the_package_declares(compose):
    declared = set(pyproject()["project"]["optional-dependencies"])
    assert set(image_extras(compose)) - declared == set()


def test_the_files_about_the_image_name_the_extras_it_installs(compose):
    """The compose file's comment, the Dockerfile's header and docs/operations.md."""
    extras = image_extras(compose)
    assert f"([{','.join(extras)}])" in COMPOSE.read_text()
    (_, dockerfile), = set(_dockerfiles(compose))
    header = "\n".join(line for line in dockerfile.read_text().splitlines() if line.startswith("#"))
    operations = (ROOT / "docs" / "operations.md").read_text()
    service = operations[operations.index("- `airflow`:"):].split("\n- ", 1)[0]
    for text in (header, service):
        prose = " ".join(text.replace("#", " ").split())
        listed = re.findall(r"((?:`[\w-]+`(?:,\s*|\s+and\s+))+`[\w-]+`)\s+extras", prose)
        assert len(listed) == 1, text
        assert sorted(re.findall(r"`([\w-]+)`", listed[0])) == sorted(extras), text


def test_the_stack_image_is_tagged_with_the_package_version(compose):
    from airflow_provider_binlog import __version__

    images = {service["image"] for service in services(compose).values() if service.get("build")}
    assert images == {f"airflow-provider-binlog-stack:{__version__}"}


def test_the_image_holds_the_stock_iceberg_runtime_the_package_names(compose):
    """Fetched from Maven Central at build time, the coordinates of ICEBERG_PACKAGE; not the
    jar of the spark extra's wheel, which needs a relocated Jackson beside it."""
    from airflow_provider_binlog.spark.runtime import ICEBERG_PACKAGE

    (_, dockerfile), = set(_dockerfiles(compose))
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.M))
    added = re.findall(r"^ADD\s+(?:--\S+\s+)*(https://\S+)\s+(\S+)", text, re.M)
    assert len(added) == 1, added
    url, target = (re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], part) for part in added[0])
    match = re.fullmatch(r"https://repo1\.maven\.org/maven2/(.+)/([^/]+)/([^/]+)/\2-\3\.jar", url)
    assert match, url
    assert f"{match.group(1).replace('/', '.')}:{match.group(2)}:{match.group(3)}" == ICEBERG_PACKAGE
    assert str(environment(services(compose)["airflow"])["BINLOG_SPARK_JARS"]).split(",") == [target]
    assert target in spark_defaults(compose)["spark.jars"].split(",")
    assert "iceberg_runtime_jar" not in text and "shaded_jackson" not in text


def test_the_compose_file_is_valid_against_the_compose_spec_schema():
    """The schema of the Compose Specification, as the check-jsonschema package ships it."""
    import jsonschema
    from importlib import resources

    schema = json.loads(resources.files("check_jsonschema.builtin_schemas.vendor")
                        .joinpath("compose-spec.json").read_text())
    assert schema["$id"] == "compose_spec.json"
    validator_class = jsonschema.validators.validator_for(schema)
    validator = validator_class(schema, format_checker=validator_class.FORMAT_CHECKER)
    stack = yaml.safe_load(COMPOSE.read_text())
    errors = [f"{error.json_path}: {error.message}" for error in validator.iter_errors(stack)]
    assert errors == []
    # the schema is strict: an unknown key of a service is an error
    assert list(validator.iter_errors({"services": {"a": {"image": "x:1", "restart_policy": "always"}}}))
