"""The Binlog CDC view without a server: its configuration, what it reads of Airflow's REST API
answers, redaction and escaping, SVG charts, the plugin and its app. The data gathering from
live MariaDB sources (a healthy one after a few loads, an unreachable one, the red states):
``tests/integration/test_ui_status_live.py``; against a live API server:
``tests/e2e/test_ui_browser.py``."""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
from airflow_provider_binlog.plugins.ttl_cache import TtlCache  # noqa: E402
from airflow_provider_binlog.plugins import charts  # noqa: E402
from airflow_provider_binlog.plugins.page import render_page  # noqa: E402
from airflow_provider_binlog.plugins.sources import (  # noqa: E402
    SOURCES_ENV, SourceConfig, SourceConfigError, discover_sources, parse_sources)
from airflow_provider_binlog.plugins.batches import dump_summary  # noqa: E402
from airflow_provider_binlog.plugins.status import (  # noqa: E402
    checkpoint_point, collect_source, gather, redact, secret_values)
from tests.airflow_conn import SECRET  # noqa: E402

UTC = dt.timezone.utc


class _Parser(HTMLParser):
    """Collects tags and checks the page is well formed enough to parse."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)


def parse(html: str) -> _Parser:
    p = _Parser()
    p.feed(html)
    p.close()
    return p


# ---------------------------------------------------------------------- configuration

def test_source_configuration_forms_and_errors():
    assert parse_sources('[{"conn_id": "a", "staging_dir": "/s", "checkpoint_key": "k"}]') == \
        [SourceConfig("a", "k", ("/s",))]
    assert parse_sources({"a": {"staging_dirs": ["/x", "/y"], "stall_after_seconds": 60}, "b": None}) == \
        [SourceConfig("a", None, ("/x", "/y"), 60.0), SourceConfig("b")]
    assert parse_sources(["a"]) == [SourceConfig("a")]
    assert parse_sources({"conn_id": "a"})[0].key == "a"
    for bad in ("{", "[1]", '[{"conn_id": ""}]', '[{"conn_id": "a", "password": "x"}]',
                '[{"conn_id": "a", "stall_after_seconds": 0}]', '"a"'):
        with pytest.raises(SourceConfigError):
            parse_sources(bad)


def test_a_bad_configuration_is_a_page_warning_not_an_error():
    sources, warnings = discover_sources({SOURCES_ENV: "{not json"}, use_variable=False)
    assert sources == [] and "[binlog] ui_sources (AIRFLOW__BINLOG__UI_SOURCES) is ignored" in warnings[0]


def test_connections_come_from_the_environment_and_only_binlog_ones(monkeypatch):
    env = {
        "AIRFLOW_CONN_SRC_JSON": json.dumps({"conn_type": "mysql_binlog", "host": "h", "password": SECRET,
                                             "extra": {"server_id": 3}}),
        "AIRFLOW_CONN_SRC_URI": f"mysql-binlog://u:{SECRET}@h2:3307/?server_id=4",
        "AIRFLOW_CONN_OTHER": json.dumps({"conn_type": "postgres", "host": "p"}),
        "AIRFLOW_CONN_BROKEN": "{" + SECRET,
        SOURCES_ENV: json.dumps([{"conn_id": "src_json", "staging_dir": "/st"}, {"conn_id": "missing"}]),
    }
    sources, warnings = discover_sources(env, use_variable=False)
    by_id = {c.conn_id: (c, conn) for c, conn in sources}
    assert sorted(by_id) == ["missing", "src_json", "src_uri"]
    assert by_id["src_json"][0].staging_dirs == ("/st",)
    assert by_id["src_uri"][1].host == "h2" and by_id["src_uri"][1].port == 3307
    assert isinstance(by_id["missing"][1], Exception)
    assert all(SECRET not in w for w in warnings)
    status = collect_source(*by_id["missing"])
    assert status["state"] == "error" and "not found" in status["problems"][0]["message"]


# What Airflow's REST API answers, as the view reads it (the shapes of Airflow 3's /api/v2; the
# same against a live API server: tests/e2e/test_ui_browser.py).

def _ti(dag_id, task_id, operator, **fields) -> dict:
    return {"dag_id": dag_id, "dag_run_id": "scheduled__2026-01-01T00:00:00+00:00", "task_id": task_id,
            "map_index": -1, "operator": operator, "state": "success", "try_number": 1, "rendered_fields": fields}


def test_a_factory_dag_source_from_what_its_tasks_rendered():
    from airflow_provider_binlog.plugins.sources import rendered_facts, source_of_dag

    tis = [  # newest first: the sensor of a run that found nothing, then a run that loaded
        _ti("binlog_cdc__shop", "wait_for_changes", "BinlogPositionSensor", binlog_conn_id="shop_db",
            checkpoint_key="shop", checkpoint_store_uri="postgresql://cdc:***@pg/state", start=None),
        _ti("binlog_cdc__shop", "merge", "BinlogMergeOperator", binlog_conn_id="shop_db", checkpoint_key="shop",
            checkpoint_store_uri="s3://bucket/state", manifests="{{ ti.xcom_pull('dump') }}"),
        _ti("binlog_cdc__shop", "dump", "BinlogDumpOperator", binlog_conn_id="shop_db", checkpoint_key="shop",
            staging={"location": "/data/staging/shop", "conn_id": None}, checkpoint_store_uri="None"),
        _ti("binlog_cdc__shop", "dump", "BinlogDumpOperator", binlog_conn_id="old_db", staging_dir="/old"),
    ]
    facts = rendered_facts(tis)
    # the masked store of the sensor is not taken; a value of an older connection is not either
    assert facts == {"binlog_conn_id": "shop_db", "checkpoint_key": "shop", "checkpoint_store_uri": "s3://bucket/state",
                     "staging_dir": "/data/staging/shop"}
    assert source_of_dag("binlog_cdc__shop", {}, facts) == SourceConfig(
        "shop_db", "shop", ("/data/staging/shop",), checkpoint_store_uri="s3://bucket/state",
        origin="dag:binlog_cdc__shop")
    # keyed by the connection: no explicit key
    plain = rendered_facts([_ti("binlog_cdc__shop_db", "dump", "BinlogDumpOperator", binlog_conn_id="shop_db",
                                checkpoint_key="shop_db", staging_dir="/s")])
    found = source_of_dag("binlog_cdc__shop_db", {}, plain)
    assert (found.conn_id, found.checkpoint_key, found.key) == ("shop_db", None, "shop_db")
    # a DAG that never ran names nothing; templates are not values
    assert source_of_dag("binlog_cdc__x", {}, rendered_facts([])) is None
    assert rendered_facts([_ti("d", "dump", "BinlogDumpOperator", binlog_conn_id="{{ params.conn }}")]) == {}


def test_a_factory_dag_source_from_what_the_factory_registers_in_its_assets():
    from airflow_provider_binlog.plugins.sources import registered_sources, source_of_dag

    assets = [
        {"uri": "binlog://shop", "extra": {"source_id": "shop", "tables": ["shop.*"], "binlog_conn_id": "shop_db",
                                           "checkpoint_key": "shop", "staging_dir": "s3://stage/shop"},
         "producing_tasks": [{"dag_id": "binlog_cdc__shop", "task_id": "merge"},
                             {"dag_id": "binlog_backfill__shop", "task_id": "merge"}], "scheduled_dags": []},
        {"uri": "iceberg://lake/crm/crm__a", "extra": {"source_id": "crm", "source_table": "crm.a"},
         "producing_tasks": [{"dag_id": "binlog_cdc__crm", "task_id": "merge"}], "scheduled_dags": []},
    ]
    registered = registered_sources(assets, ["binlog_cdc__shop", "binlog_cdc__crm"])
    assert registered == {"binlog_cdc__shop": {"binlog_conn_id": "shop_db", "checkpoint_key": "shop",
                                               "staging_dir": "s3://stage/shop"}}  # crm's registers nothing yet
    # what the factory registers wins over an older run's arguments; the store comes from the run
    rendered = {"binlog_conn_id": "shop_db", "checkpoint_key": "shop", "staging_dir": "/old/staging",
                "checkpoint_store_uri": "/state"}
    assert source_of_dag("binlog_cdc__shop", registered["binlog_cdc__shop"], rendered) == SourceConfig(
        "shop_db", "shop", ("s3://stage/shop",), checkpoint_store_uri="/state", origin="dag:binlog_cdc__shop")



def test_an_asset_registration_counts_only_for_the_dag_of_its_source():
    """Two sources merging into one Iceberg table both write its asset: each DAG takes only the
    registration whose ``source_id`` is its own (``binlog_cdc__<source_id>``)."""
    from airflow_provider_binlog.plugins.sources import registered_sources

    both = [{"dag_id": "binlog_cdc__crm", "task_id": "merge"}, {"dag_id": "binlog_cdc__shop", "task_id": "merge"}]
    assets = [
        {"uri": "iceberg://lake/sales/orders", "extra": {"source_id": "crm", "binlog_conn_id": "crm_db",
                                                          "checkpoint_key": "crm"},
         "producing_tasks": both, "scheduled_dags": []},
        {"uri": "iceberg://lake/sales/items", "extra": {"binlog_conn_id": "nobody_db"},  # no source_id
         "producing_tasks": both, "scheduled_dags": []},
    ]
    assert registered_sources(assets, ["binlog_cdc__shop", "binlog_cdc__crm"]) == {
        "binlog_cdc__crm": {"binlog_conn_id": "crm_db", "checkpoint_key": "crm"}}

class _Api:
    """A stand-in of the REST client for discover_sources: its calls come from the patched
    readers."""
    identity = "test"


def test_sources_come_from_configuration_then_dags_then_connections(monkeypatch):
    from airflow_provider_binlog.plugins import sources as sources_module

    conn = json.dumps({"conn_type": "mysql_binlog", "host": "h", "extra": {"server_id": 3}})
    env = {"AIRFLOW_CONN_SHOP_DB": conn, "AIRFLOW_CONN_CRM_DB": conn, "AIRFLOW_CONN_LONE_DB": conn,
           SOURCES_ENV: json.dumps([{"conn_id": "crm_db", "checkpoint_key": "crm-by-hand"}])}
    monkeypatch.setattr(sources_module, "api_connection_ids", lambda api: ["listed_db"])
    monkeypatch.setattr(sources_module, "dag_sources", lambda api: ([
        SourceConfig("shop_db", "shop", ("/st/shop",), origin="dag:binlog_cdc__shop"),
        SourceConfig("shop_db", "shop_eu", ("/st/eu",), origin="dag:binlog_cdc__shop_eu"),
        SourceConfig("crm_db", "crm", origin="dag:binlog_cdc__crm")], []))
    found, warnings = discover_sources(env, api=_Api(), use_variable=False)
    assert [(c.conn_id, c.key, c.origin) for c, _conn in found] == [
        ("crm_db", "crm-by-hand", "configured"),         # the configuration wins for its connection
        ("listed_db", "listed_db", "connection"),        # listed by the REST API, named by nothing
        ("lone_db", "lone_db", "connection"),            # in the environment, named by nothing
        ("shop_db", "shop", "dag:binlog_cdc__shop"),     # two sources of one connection
        ("shop_db", "shop_eu", "dag:binlog_cdc__shop_eu")]
    assert warnings == []
    assert all(conn.host == "h" for c, conn in found if c.conn_id != "listed_db")


def test_an_unreadable_rest_api_is_a_warning_and_connections_still_show(monkeypatch):
    from airflow_provider_binlog.plugins import sources as sources_module
    from airflow_provider_binlog.plugins.api import ApiError

    def refused(api):
        raise ApiError("GET /api/v2/dags: HTTP 403: Forbidden", 403)

    monkeypatch.setattr(sources_module, "api_connection_ids", refused)
    monkeypatch.setattr(sources_module, "dag_sources", refused)
    env = {"AIRFLOW_CONN_SHOP_DB": json.dumps({"conn_type": "mysql_binlog", "host": "h"})}
    found, warnings = discover_sources(env, api=_Api(), use_variable=False)
    assert [c.conn_id for c, _ in found] == ["shop_db"]
    assert warnings == [
        "cannot list connections through Airflow's REST API: ApiError: GET /api/v2/dags: HTTP 403: Forbidden",
        "cannot read the binlog DAGs through Airflow's REST API: ApiError: GET /api/v2/dags: HTTP 403: Forbidden"]


# ---------------------------------------------------------------------- connections through the secrets backends

ENV_ONLY = {"conn_type": "mysql_binlog", "host": "env-only.example", "port": 3307, "login": "u",
            "password": SECRET, "extra": {"server_id": 9}}


def test_a_connection_only_in_an_airflow_conn_environment_variable_is_found(monkeypatch):
    """Not in the metadata database (there is none here), not in the ``environ`` the view was
    given: Airflow's lookup through its secrets backends finds it in the process's environment."""
    monkeypatch.setenv("AIRFLOW_CONN_ENV_ONLY_DB", json.dumps(ENV_ONLY))
    found, warnings = discover_sources({SOURCES_ENV: json.dumps([{"conn_id": "env_only_db"}])}, use_variable=False)
    ((config, conn),) = found
    assert config.conn_id == "env_only_db" and not isinstance(conn, Exception), conn
    assert (conn.host, conn.port, conn.conn_type) == ("env-only.example", 3307, "mysql_binlog")
    status = collect_source(config, conn, timeout=1, probe=False)
    assert not any("not found" in p["message"] for p in status["problems"]), status["problems"]


def test_a_connection_only_in_a_secrets_backend_is_found(monkeypatch, tmp_path):
    """A connection of a custom secrets backend (Airflow's file-based one here), named by the
    configuration: found as a task would find it."""
    path = tmp_path / "connections.json"
    path.write_text(json.dumps({"vault_db": {**ENV_ONLY, "host": "from-the-backend.example"}}))
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", "airflow.secrets.local_filesystem.LocalFilesystemBackend")
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND_KWARGS", json.dumps({"connections_file_path": str(path)}))
    found, _ = discover_sources({SOURCES_ENV: json.dumps([{"conn_id": "vault_db"}])}, use_variable=False)
    ((config, conn),) = found
    assert not isinstance(conn, Exception), conn
    assert conn.host == "from-the-backend.example"


# ---------------------------------------------------------------------- redaction and escaping

def test_secrets_are_the_password_and_the_non_plain_extras(tmp_path):
    from airflow.models.connection import Connection

    conn = Connection(conn_id="x", conn_type="mysql_binlog", host="h", password=SECRET,
                      extra=json.dumps({"server_id": 5, "flavor": "mariadb", "ssl_key": "/keys/client-key.pem",
                                        "checkpoint_store_uri": f"file://{tmp_path}/store",
                                        "custom": {"token": "tok-123456"}}))
    secrets = secret_values(conn)
    assert SECRET in secrets and "/keys/client-key.pem" in secrets and "tok-123456" in secrets
    assert f"{tmp_path}/store" in secrets and "mariadb" not in secrets
    assert redact({"a": [f"x {SECRET} y", 3], "b": f"{tmp_path}/store/k.json"}, secrets) == \
        {"a": ["x *** y", 3], "b": "***/k.json"}


def test_every_value_is_html_escaped():
    evil = '<script>alert("x")</script>'
    status = {"generated_at": dt.datetime.now(UTC).isoformat(), "warnings": [evil], "sources": [{
        "conn_id": evil, "checkpoint_key": evil, "state": "error",
        "problems": [{"state": "error", "message": evil}], "warnings": [evil],
        "server": {"host": evil, "port": 1, "flavor": evil, "version": evil},
        "position": {"text": evil}, "checkpoint": {"text": evil}, "lag": {"bytes": 5, "gtids": evil},
        "retention": {"oldest_binlog": evil, "gtid_purged": evil},
        "last_dump": {"created_at": "2026-01-01T00:00:00+00:00", "rows": {"insert": 1}},
        "last_merge": {"at": "2026-01-01T00:00:00+00:00", "checkpoint": evil,
                       "airflow": {"dag_id": evil, "run_id": evil, "state": evil}},
        "dumps": [{"created_at": "2026-01-01T00:00:00+00:00", "rows": {"insert": 3}, "kind": evil,
                   "dump_id": evil}],
        "advances": [], "lag_history": [{"at": "2026-01-01T00:00:00+00:00", "bytes": 10}],
        "tables": [{"table": evil, "insert": 1, "iceberg_table": evil, "snapshot_id": evil}],
    }]}
    html = render_page(status)
    assert "<script" not in html and "&lt;script&gt;" in html
    parsed = parse(html)
    assert "script" not in parsed.tags
    assert not any(name.startswith("on") for name, _ in parsed.attrs)


# ---------------------------------------------------------------------- charts

def test_lag_chart_draws_points_line_and_merge_ticks():
    t0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    points = [(t0 + dt.timedelta(minutes=10 * i), v) for i, v in enumerate([1000, 5000, None, 2500])]
    svg = charts.lag_chart(points, merges=[t0 + dt.timedelta(minutes=12)], label="lag <of> a&b")
    p = parse(svg)
    assert p.tags.count("circle") == 3 and p.tags.count("polyline") == 1 and "path" in p.tags
    assert 'aria-label="lag &lt;of&gt; a&amp;b"' in svg
    ys = [float(y) for y in re.findall(r'<circle class="lag-point" cx="[\d.]+" cy="([\d.]+)"', svg)]
    assert ys[1] < ys[2] < ys[0]  # 5000 highest (smallest y), then 2500, then 1000
    assert "4.9 KiB" in svg  # the tooltip of the 5000-byte point
    empty = charts.lag_chart([])
    assert "chart-empty" in empty and "no lag history" in empty


def test_rows_chart_stacks_operations_and_marks_pending_runs():
    t0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    runs = [{"at": t0, "rows": {"insert": 30, "update": 10, "delete": 0}, "merged": True},
            {"at": t0 + dt.timedelta(minutes=5), "rows": {"insert": 0, "update": 0, "delete": 0}, "merged": True},
            {"at": t0 + dt.timedelta(minutes=9), "rows": {"insert": 5, "update": 0, "delete": 35}, "merged": False}]
    svg = charts.rows_chart(runs)
    p = parse(svg)
    assert svg.count('class="run-bar') == 3 and svg.count("run-pending") == 1
    assert svg.count('class="bar-insert"') == 2 and svg.count('class="bar-delete"') == 1
    assert svg.count('class="bar-empty"') == 1 and "rect" in p.tags
    insert_h = float(re.search(r'class="bar-insert" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)"',
                               svg).group(1))
    update_h = float(re.search(r'class="bar-update" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)"',
                               svg).group(1))
    assert insert_h == pytest.approx(3 * update_h, rel=0.01)
    assert "staged, not merged yet" in svg
    assert "no runs yet" in charts.rows_chart([])


def test_number_formats():
    assert charts.human_bytes(512) == "512 B" and charts.human_bytes(3 * 1024 ** 2) == "3.0 MiB"
    assert charts.human_count(999) == "999" and charts.human_count(12_345) == "12.3k"


def test_checkpoint_points_compare_json_text_and_objects():
    cp = Checkpoint(file="mariadb-bin.000002", position=345, flavor="mariadb")
    assert checkpoint_point(cp) == checkpoint_point(cp.to_json()) == checkpoint_point("mariadb-bin.000002:345")
    assert checkpoint_point({"gtid": "0-1-5", "flavor": "mariadb"}) == ("gtid", "0-1-5")
    assert checkpoint_point({"nonsense": 1}) is None and checkpoint_point(None) is None


def test_dump_summary_of_a_manifest():
    summary = dump_summary({"dump_id": "d", "created_at": "2026-01-01T00:00:00+00:00", "duration_seconds": 2.0,
                            "transactions": 4, "binlog_bytes": 900,
                            "tables": [{"schema": "s", "table": "a", "rows": {"insert": 3, "update": 1}},
                                       {"schema": "s", "table": "b", "rows": {"delete": 4}}]})
    assert summary["rows"] == {"insert": 3, "update": 1, "delete": 4} and summary["total_rows"] == 8
    assert summary["rows_per_second"] == 4.0 and summary["tables"]["s.b"] == {"insert": 0, "update": 0, "delete": 4}


def test_gather_with_no_source_renders_a_hint(monkeypatch):
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    for name in [n for n in __import__("os").environ if n.startswith("AIRFLOW_CONN_")]:
        monkeypatch.delenv(name)
    data = gather(use_variable=False)
    assert data["sources"] == []
    assert "No source" in render_page(data)


# ---------------------------------------------------------------------- the plugin and its app

def test_the_plugin_is_an_entry_point_plugin_with_an_app_and_a_nav_view():
    import importlib.metadata as md

    from airflow_provider_binlog.plugins.cdc_view import BinlogCdcPlugin
    from airflow_provider_binlog.provider_info import get_provider_info

    (ep,) = [e for e in md.entry_points(group="airflow.plugins") if e.value.startswith("airflow_provider_binlog.")]
    assert ep.load() is BinlogCdcPlugin
    assert "plugins" not in get_provider_info()  # loaded once, through the entry point
    (app,) = BinlogCdcPlugin.fastapi_apps
    assert (app["url_prefix"], app["name"]) == ("/binlog-cdc", "Binlog CDC")
    (view,) = BinlogCdcPlugin.external_views
    assert view["href"] == "/binlog-cdc/" and view["url_route"] == "binlog-cdc" and view["destination"] == "nav"


class _Manager:
    def __init__(self, readable):
        self.readable = readable

    def is_authorized_connection(self, *, method, user, details=None):
        assert method == "GET"
        return bool(self.readable) if details is None else details.conn_id in self.readable


def test_users_see_only_the_sources_whose_connection_they_may_read(monkeypatch):
    from fastapi import HTTPException

    from airflow_provider_binlog.plugins import cdc_view

    data = {"sources": [{"conn_id": "a"}, {"conn_id": "b"}], "warnings": []}
    monkeypatch.setattr(cdc_view, "_auth_manager", lambda: _Manager({"a"}))
    out = cdc_view.visible_status(data, user=object())
    assert [s["conn_id"] for s in out["sources"]] == ["a"] and "1 source(s) hidden" in out["warnings"][0]
    monkeypatch.setattr(cdc_view, "_auth_manager", lambda: _Manager(set()))
    with pytest.raises(HTTPException) as err:
        cdc_view.visible_status(data, user=object())
    assert err.value.status_code == 403


def test_the_app_serves_the_page_and_json_to_authenticated_users_only(monkeypatch):
    from fastapi.testclient import TestClient

    from airflow.api_fastapi.core_api.security import get_user
    from airflow_provider_binlog.plugins import cdc_view

    status = {"generated_at": dt.datetime.now(UTC).isoformat(), "warnings": [], "sources": [
        {"conn_id": "a", "state": "ok", "problems": [], "warnings": []}]}
    monkeypatch.setattr(cdc_view, "collect", lambda api: (status, {}))
    monkeypatch.setattr(cdc_view, "cache", TtlCache(size=64))
    monkeypatch.setattr(cdc_view, "_auth_manager", lambda: _Manager({"a"}))
    app = cdc_view.create_app()
    client = TestClient(app)
    assert client.get("/").status_code == 401  # no token, no cookie
    assert client.get("/icon.svg").status_code == 200
    app.dependency_overrides[get_user] = lambda: object()
    page = client.get("/")
    assert page.status_code == 200 and 'data-conn-id="a"' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert client.get("/status.json").json()["sources"][0]["conn_id"] == "a"


# ---------------------------------------------------------------------- the REST client

def _rest(handler):
    import httpx

    from airflow_provider_binlog.plugins.api import AirflowApi

    return AirflowApi("http://airflow.test", token="tok-abc", identity="u",
                      client=httpx.Client(transport=httpx.MockTransport(handler)))


def test_the_rest_client_sends_the_token_and_follows_the_pages():
    import httpx

    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        offset = int(request.url.params["offset"])
        names = [f"c{i}" for i in range(offset, min(offset + 2, 5))]  # the server gives 2 per page
        return httpx.Response(200, json={"connections": [{"connection_id": n} for n in names], "total_entries": 5})

    items = _rest(handler).pages("/connections", "connections", {"order_by": "connection_id"})
    assert [i["connection_id"] for i in items] == ["c0", "c1", "c2", "c3", "c4"]
    assert [r.url.params["offset"] for r in seen] == ["0", "2", "4"]
    assert all(r.headers["authorization"] == "Bearer tok-abc" for r in seen)
    assert str(seen[0].url).startswith("http://airflow.test/api/v2/connections?")


def test_the_rest_client_reports_a_refusal_without_the_token():
    import httpx

    from airflow_provider_binlog.plugins.api import ApiError

    api = _rest(lambda request: httpx.Response(403, json={"detail": "Forbidden: <upstream body>"}))
    with pytest.raises(ApiError) as err:
        api.get("/dags")
    # the endpoint and the status only: no answer's body is echoed into the page's warnings
    assert err.value.status == 403 and str(err.value) == "GET /api/v2/dags: HTTP 403"
    assert "tok-abc" not in repr(api) and "tok-abc" not in str(err.value)


def test_the_rest_client_uses_no_proxy_of_the_environment(monkeypatch):
    """The user's token must not go through an HTTP(S)_PROXY (or ALL_PROXY) of the API server's
    environment: the client is built with ``trust_env=False``."""
    from airflow_provider_binlog.plugins.api import AirflowApi

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with AirflowApi("http://127.0.0.1:8080", token="tok") as api:
        assert api.client.trust_env is False
        assert not [m for m in api.client._mounts.values() if m is not None]  # no proxy transport


def test_task_runs_and_their_xcom_through_the_rest_api():
    import httpx

    from airflow_provider_binlog.plugins.task_runs import airflow_task_runs, running_snapshots

    tis = [{"dag_id": "binlog_cdc__shop", "dag_run_id": "manual__2026-01-01T00:00:00+00:00", "task_id": "merge",
            "map_index": -1, "operator": "BinlogMergeOperator", "state": "success", "try_number": 1,
            "start_date": "2026-01-01T00:00:01.5Z", "end_date": "2026-01-01T00:00:05Z", "duration": 3.5},
           {"dag_id": "binlog_cdc__shop", "dag_run_id": "r0", "task_id": "dump", "map_index": -1,
            "operator": "BinlogDumpOperator", "state": "failed", "try_number": 2, "start_date": None,
            "end_date": "2026-01-01T00:00:00Z", "duration": 1.0}]
    paths = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.raw_path.decode())
        if request.url.path.endswith("/taskInstances"):
            if request.url.params.get_list("state") == ["running"]:
                return httpx.Response(200, json={"task_instances": [], "total_entries": 0})
            assert request.url.params.get_list("operator") == ["BinlogMergeOperator", "BinlogDumpOperator",
                                                               "BinlogSnapshotOperator"]
            assert request.url.params["order_by"] == "-end_date"
            return httpx.Response(200, json={"task_instances": tis, "total_entries": 2})
        # the stored JSON, with Airflow's encoding of a tuple
        return httpx.Response(200, json={"key": "return_value", "value": {
            "end_checkpoint": {"file": "b.000002", "pos": 4},
            "batches": {"__classname__": "builtins.tuple", "__version__": 1, "__data__": ["d1", "applied"]}}})

    runs = airflow_task_runs(_rest(handler), now=dt.datetime(2026, 1, 2, tzinfo=UTC))
    assert [(r["kind"], r["task_id"], r["state"]) for r in runs] == [("merge", "merge", "success"),
                                                                      ("dump", "dump", "failed")]
    merge = runs[0]
    assert merge["value"] == {"end_checkpoint": {"file": "b.000002", "pos": 4}, "batches": ["d1", "applied"]}
    assert merge["start_date"] == dt.datetime(2026, 1, 1, 0, 0, 1, 500000, tzinfo=UTC) and merge["duration"] == 3.5
    assert runs[1]["value"] is None  # a failed try returned nothing: its XCom is not asked for
    xcom_paths = [p for p in paths if "/xcomEntries/" in p]
    assert xcom_paths == ["/api/v2/dags/binlog_cdc__shop/dagRuns/manual__2026-01-01T00%3A00%3A00%2B00%3A00/"
                          "taskInstances/merge/xcomEntries/return_value?map_index=-1"]
    assert running_snapshots(_rest(handler)) == []


# ---------------------------------------------------------------------- running snapshots

def test_a_running_snapshot_shows_rows_read_against_estimated_rows_per_table():
    from airflow_provider_binlog.plugins.task_runs import snapshot_progress

    runs = [{"dag_id": "binlog_backfill__shop", "run_id": "r1", "task_id": "snapshot",
             "start_date": dt.datetime(2026, 1, 1, tzinfo=UTC),
             "progress": {"conn_id": "shop_db", "method": "watermark", "updated_at": "2026-01-01T00:01:00+00:00",
                          "tables": {"shop.orders": {"rows_read": 250_000, "estimated_rows": 1_000_000},
                                     "shop.customers": {"rows_read": 0, "estimated_rows": None}}}},
            {"dag_id": "other", "run_id": "r2", "task_id": "snapshot",
             "progress": {"conn_id": "other_db", "tables": {"x.y": {"rows_read": 1, "estimated_rows": 1}}}}]
    (snap,) = snapshot_progress("shop_db", runs)
    assert snap["tables"] == [
        {"table": "shop.customers", "rows_read": 0, "estimated_rows": None, "percent": None},
        {"table": "shop.orders", "rows_read": 250_000, "estimated_rows": 1_000_000, "percent": 25.0}]
    html = render_page({"generated_at": "2026-01-01T00:02:00+00:00", "warnings": [], "sources": [{
        "conn_id": "shop_db", "checkpoint_key": "shop_db", "state": "ok", "problems": [], "warnings": [],
        "snapshots": [snap]}]})
    row = re.search(r"<tr><td class=\"mono\">shop\.orders</td>(.*?)</tr>", html)
    assert row is not None and re.findall(r">([^<]+)</td>", row.group(1)) == ["250,000", "1,000,000", "25 %"]
    assert "Snapshot running: binlog_backfill__shop / snapshot (watermark)" in html


def test_the_snapshot_operator_publishes_its_progress_at_most_every_interval(monkeypatch):
    from airflow_provider_binlog.operators import snapshot as op

    class TI:
        def __init__(self):
            self.pushed = []

        def xcom_push(self, key, value):
            self.pushed.append((key, json.loads(json.dumps(value))))

    clock = [100.0]
    monkeypatch.setattr(op.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(op, "record_snapshot_progress", lambda *a: None)
    ti = TI()
    report = op.SnapshotProgress("shop_db", "watermark", ti, logging.getLogger("test"))
    report.estimates({"shop.orders": 30})
    report.progress("shop.orders", 10, 10)   # within the interval of the last report: not published
    clock[0] += op.PROGRESS_SECONDS
    report.progress("shop.orders", 10, 20)
    report.publish(finished=True)
    assert [(k, v["tables"]["shop.orders"], v["finished"]) for k, v in ti.pushed] == [
        ("snapshot_progress", {"rows_read": 0, "estimated_rows": 30}, False),
        ("snapshot_progress", {"rows_read": 20, "estimated_rows": 30}, False),
        ("snapshot_progress", {"rows_read": 20, "estimated_rows": 30}, True)]


# ---------------------------------------------------------------------- [binlog] ui_probe_sources

@pytest.fixture()
def closed_source(tmp_path, monkeypatch):
    """A source whose server port has nothing listening, with a stored checkpoint."""
    import socket

    from airflow_provider_binlog.checkpoints import FileCheckpointStore

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    FileCheckpointStore(tmp_path / "store").save("closed_db", Checkpoint(file="b.000003", position=4,
                                                                         flavor="mariadb"))
    doc = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": port, "login": "u", "password": SECRET,
           "extra": {"server_id": 5, "checkpoint_store_uri": str(tmp_path / "store")}}
    monkeypatch.setenv("AIRFLOW_CONN_CLOSED_DB", json.dumps(doc))
    monkeypatch.setenv(SOURCES_ENV, json.dumps([{"conn_id": "closed_db"}]))
    return "closed_db"


def test_the_servers_are_probed_unless_ui_probe_sources_is_false(closed_source, monkeypatch):
    from airflow_provider_binlog.plugins.status import PROBE_ENV

    monkeypatch.delenv(PROBE_ENV, raising=False)
    (probed,) = gather(use_variable=False, timeout=1)["sources"]
    assert probed["probed"] is True and probed["state"] == "error"
    assert any(p["message"].startswith("server: ") for p in probed["problems"]), probed["problems"]
    monkeypatch.setenv(PROBE_ENV, "False")
    (quiet,) = gather(use_variable=False, timeout=1)["sources"]
    assert quiet["probed"] is False and quiet["state"] == "ok", quiet["problems"]
    assert quiet["position"] is None and quiet["lag"] is None and quiet["server"]["host"] == "127.0.0.1"
    assert quiet["checkpoint"]["file"] == "b.000003"           # the store is still read
    html = render_page({"generated_at": quiet["checked_at"], "sources": [quiet], "warnings": []})
    assert "not probed" in html and "ui_probe_sources = False" in html and "unreachable" not in html



def test_two_users_refreshing_within_the_cache_time_probe_a_source_once(closed_source, monkeypatch):
    """The server, the checkpoint store and staging are read once per ``[binlog]
    ui_cache_seconds`` for every user together (N users do not mean N probes of production);
    the REST reads stay per user."""
    from airflow_provider_binlog.plugins import sources as sources_mod
    from airflow_provider_binlog.plugins import status as status_mod

    reads: list[str] = []
    for name in ("_read_server", "_read_checkpoint", "read_manifests"):
        def counted(*args, _name=name, _real=getattr(status_mod, name), **kwargs):
            reads.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(status_mod, name, counted)
    rest: list[str] = []
    monkeypatch.setattr(sources_mod, "api_connection_ids", lambda api: rest.append(api.identity) or [])
    monkeypatch.setattr(sources_mod, "dag_sources", lambda api: ([], []))
    monkeypatch.setattr(status_mod, "probe_cache", TtlCache(size=256))
    monkeypatch.setenv(status_mod.TASK_RUNS_ENV, "false")
    monkeypatch.setenv("AIRFLOW__BINLOG__UI_CACHE_SECONDS", "60")

    class _Api:
        def __init__(self, identity):
            self.identity = identity

    pages = [status_mod.gather(api=_Api(user), use_variable=False, timeout=1) for user in ("ops", "boss")]
    assert sorted(reads) == ["_read_checkpoint", "_read_server", "read_manifests"]   # once, for both
    assert rest == ["ops", "boss"]                                                     # per user
    first, second = (page["sources"][0] for page in pages)
    assert first["state"] == second["state"] == "error" and first["problems"] == second["problems"]
    assert second["checkpoint"]["file"] == "b.000003"
    monkeypatch.setenv("AIRFLOW__BINLOG__UI_CACHE_SECONDS", "0")                       # no cache
    status_mod.gather(api=_Api("ops"), use_variable=False, timeout=1)
    assert len(reads) == 6

# ---------------------------------------------------------------------- public interfaces only

#: Airflow internals the view must not use: the ORM, its sessions, the serialized DAGs.
INTERNALS = ("sqlalchemy", "airflow.utils.session", "airflow.models.taskinstance", "airflow.models.xcom",
             "airflow.models.dag", "airflow.models.dagrun", "airflow.models.serialized_dag",
             "airflow.serialization", "airflow.api_fastapi.common.db")


def test_the_view_imports_no_orm_and_no_serialized_dag_internals():
    """Everything Airflow knows comes through the REST API and the secrets backends
    (``airflow.models.connection.Connection.get_connection_from_secrets``)."""
    import ast
    from pathlib import Path

    import airflow_provider_binlog.plugins as plugins

    found = []
    for path in sorted(Path(plugins.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.name}: {n}" for n in names if n.startswith(INTERNALS)]
            if isinstance(node, ast.Attribute) and node.attr in ("create_session", "SerializedDagModel",
                                                                  "get_conn_id_to_team_name_mapping"):
                found.append(f"{path.name}: .{node.attr}")
    assert found == []
