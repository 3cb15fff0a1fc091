"""The provider is registered with Airflow: ProvidersManager finds it and its connection
type, the provider info validates against Airflow's schemas, and the non-Airflow layers
import no Airflow code."""
from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("airflow")

import airflow  # noqa: E402
import jsonschema  # noqa: E402

from airflow_provider_binlog import __version__  # noqa: E402
from airflow_provider_binlog.provider_info import get_provider_info  # noqa: E402

AIRFLOW_DIR = Path(airflow.__file__).parent


def _entry_point():
    eps = [ep for ep in importlib.metadata.entry_points(group="apache_airflow_provider")
           if ep.value.startswith("airflow_provider_binlog.")]
    assert len(eps) == 1, "the project is not installed with its entry point (pip install -e .)"
    return eps[0]


def test_entry_point_returns_the_provider_info():
    info = _entry_point().load()()
    assert info == get_provider_info()
    assert info["package-name"] == "airflow-provider-binlog"
    assert info["versions"] == [__version__]
    conn, catalog = info["connection-types"]
    assert catalog["connection-type"] == "iceberg_catalog"
    assert catalog["hook-class-name"] == "airflow_provider_binlog.hooks.iceberg_catalog.IcebergCatalogHook"
    assert set(catalog["conn-fields"]) == {"type", "uri", "warehouse", "jars"}
    assert conn["connection-type"] == "mysql_binlog"
    assert conn["hook-class-name"] == "airflow_provider_binlog.hooks.binlog.BinlogHook"
    assert {"server_id", "ssl_ca", "ssl_cert", "ssl_key", "ssl_verify", "flavor", "checkpoint_store_uri",
            "heartbeat_seconds"} <= set(conn["conn-fields"])
    assert "schema" in conn["ui-field-behaviour"]["hidden-fields"]


def test_provider_info_validates_against_airflows_schemas():
    info = get_provider_info()
    runtime = json.loads((AIRFLOW_DIR / "provider_info.schema.json").read_text())
    jsonschema.validate(info, runtime)
    # the stricter schema of provider.yaml, for the declarative connection form
    strict = json.loads((AIRFLOW_DIR / "provider.yaml.schema.json").read_text())
    item = strict["properties"]["connection-types"]["items"]
    for conn in info["connection-types"]:
        jsonschema.validate(conn, item)
    behaviour = json.loads((AIRFLOW_DIR / "customized_form_field_behaviours.schema.json").read_text())
    for conn in info["connection-types"]:
        ui = conn["ui-field-behaviour"]
        jsonschema.validate({"hidden_fields": ui.get("hidden-fields", []), "relabeling": ui["relabeling"],
                             "placeholders": ui["placeholders"]}, behaviour)
    for module in [m for key in ("hooks", "operators", "sensors", "triggers") for entry in info[key]
                   for m in entry["python-modules"]]:
        __import__(module)


def test_providers_manager_sees_the_provider_and_its_connection_type():
    assert os.environ["AIRFLOW_HOME"] != str(Path.home() / "airflow")
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManager()
    provider = manager.providers["airflow-provider-binlog"]
    assert provider.version == __version__
    widgets = manager.connection_form_widgets
    assert {f"extra__mysql_binlog__{name}" for name in ("server_id", "ssl_verify", "flavor",
                                                         "checkpoint_store_uri")} <= set(widgets)
    flavor = widgets["extra__mysql_binlog__flavor"]
    assert flavor.hook_class_name == "airflow_provider_binlog.hooks.binlog.BinlogHook"
    assert flavor.field["schema"]["enum"][:3] == ["auto", "mysql", "mariadb"]
    assert manager.field_behaviours["mysql_binlog"]["hidden_fields"] == ["schema", "extra"]
    assert manager.field_behaviours["iceberg_catalog"]["relabeling"]["schema"] == "Database"
    assert widgets["extra__iceberg_catalog__type"].field["schema"]["enum"][0] == "jdbc"
    catalog_hook = ProvidersManagerTaskRuntime().hooks["iceberg_catalog"]
    assert catalog_hook.hook_class_name == "airflow_provider_binlog.hooks.iceberg_catalog.IcebergCatalogHook"
    hook = ProvidersManagerTaskRuntime().hooks["mysql_binlog"]
    assert hook.hook_class_name == "airflow_provider_binlog.hooks.binlog.BinlogHook"
    assert hook.connection_id_attribute_name == "binlog_conn_id"
    assert hook.package_name == "airflow-provider-binlog"


def test_airflow_providers_list_shows_the_provider(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "airflow", "providers", "list", "--output", "json"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    start = out.stdout.index("[")
    providers = {p["package_name"]: p for p in json.loads(out.stdout[start:])}
    assert providers["airflow-provider-binlog"]["version"] == __version__


def test_codec_replica_staging_and_dump_import_no_airflow():
    code = ("import sys\n"
            "import airflow_provider_binlog, airflow_provider_binlog.provider_info, airflow_provider_binlog.codec, "
            "airflow_provider_binlog.replica, airflow_provider_binlog.replica.preflight, "
            "airflow_provider_binlog.replica.schemas, airflow_provider_binlog.staging, "
            "airflow_provider_binlog.capture.dump, airflow_provider_binlog.checkpoints, "
            "airflow_provider_binlog.common.tables, "
            "airflow_provider_binlog.replica.position, airflow_provider_binlog.cli\n"
            "bad = sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.'))\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_airflow_providers_links_lists_the_operators_links(tmp_path):
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "airflow", "providers", "links", "--output", "json"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    links = {link["extra_link_class_name"] for link in json.loads(out.stdout[out.stdout.index("["):])}
    assert {"airflow_provider_binlog.operators.links.BinlogCdcViewLink",
            "airflow_provider_binlog.operators.links.SparkApplicationLink"} <= links
