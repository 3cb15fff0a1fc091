"""The Binlog CDC view without a server: its configuration, redaction and escaping, SVG charts,
the plugin and its app. The data gathering from live MariaDB sources (a healthy one after a
few loads, an unreachable one, the red states): ``tests/integration/test_ui_status_live.py``."""
from __future__ import annotations

import datetime as dt
import json
import logging
import re
from html.parser import HTMLParser

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoints import Checkpoint  # noqa: E402
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
    sources, warnings = discover_sources({SOURCES_ENV: "{not json"}, use_db=False)
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
    sources, warnings = discover_sources(env, use_db=False)
    by_id = {c.conn_id: (c, conn) for c, conn in sources}
    assert sorted(by_id) == ["missing", "src_json", "src_uri"]
    assert by_id["src_json"][0].staging_dirs == ("/st",)
    assert by_id["src_uri"][1].host == "h2" and by_id["src_uri"][1].port == 3307
    assert isinstance(by_id["missing"][1], Exception)
    assert all(SECRET not in w for w in warnings)
    status = collect_source(*by_id["missing"])
    assert status["state"] == "error" and "not found" in status["problems"][0]["message"]


def _serialized(dag) -> dict:
    from airflow.serialization.serialized_objects import DagSerialization

    return json.loads(json.dumps(DagSerialization.to_dict(dag), default=str))


def test_the_factorys_dags_name_their_connection_key_store_and_staging_directory():
    from airflow_provider_binlog.dags import make_cdc_dags
    from airflow_provider_binlog.plugins.sources import sources_of_dag

    incremental, backfill = make_cdc_dags("shop", binlog_conn_id="shop_db", tables=["shop.*"],
                                          staging_dir="/data/staging/shop", namespace="shop_cdc",
                                          warehouse="/w", checkpoint_store_uri="postgresql://cat@pg/state")
    (found,) = sources_of_dag(_serialized(incremental), "binlog_cdc__shop")
    assert found == SourceConfig("shop_db", "shop", ("/data/staging/shop",),
                                 checkpoint_store_uri="postgresql://cat@pg/state", origin="dag:binlog_cdc__shop")
    # keyed by the connection: no explicit key
    plain, _ = make_cdc_dags("shop_db", binlog_conn_id="shop_db", tables=["shop.*"], staging_dir="/s",
                             namespace="n", warehouse="/w")
    (found,) = sources_of_dag(_serialized(plain))
    assert (found.conn_id, found.checkpoint_key, found.key) == ("shop_db", None, "shop_db")
    # templated arguments name nothing yet
    assert sources_of_dag({"dag": {"tasks": [{"__var": {"task_type": "BinlogDumpOperator",
                                                        "binlog_conn_id": "{{ params.conn }}"}}]}}) == []
    assert sources_of_dag({"dag": {"tasks": [{"__var": {"task_type": "PythonOperator",
                                                        "binlog_conn_id": "x"}}]}}) == []


def test_sources_come_from_configuration_then_dags_then_connections(monkeypatch):
    from airflow_provider_binlog.plugins import sources as sources_module

    conn = json.dumps({"conn_type": "mysql_binlog", "host": "h", "extra": {"server_id": 3}})
    env = {"AIRFLOW_CONN_SHOP_DB": conn, "AIRFLOW_CONN_CRM_DB": conn, "AIRFLOW_CONN_LONE_DB": conn,
           SOURCES_ENV: json.dumps([{"conn_id": "crm_db", "checkpoint_key": "crm-by-hand"}])}
    monkeypatch.setattr(sources_module, "db_connections", dict)
    monkeypatch.setattr(sources_module, "dag_sources", lambda: [
        SourceConfig("shop_db", "shop", ("/st/shop",), origin="dag:binlog_cdc__shop"),
        SourceConfig("shop_db", "shop_eu", ("/st/eu",), origin="dag:binlog_cdc__shop_eu"),
        SourceConfig("crm_db", "crm", origin="dag:binlog_cdc__crm")])
    found, warnings = discover_sources(env)
    assert [(c.conn_id, c.key, c.origin) for c, _conn in found] == [
        ("crm_db", "crm-by-hand", "configured"),         # the configuration wins for its connection
        ("lone_db", "lone_db", "connection"),            # named by nothing: under its own id
        ("shop_db", "shop", "dag:binlog_cdc__shop"),     # two sources of one connection
        ("shop_db", "shop_eu", "dag:binlog_cdc__shop_eu")]
    assert warnings == []
    assert all(conn.host == "h" for _c, conn in found)


def test_an_unreadable_dag_table_is_a_warning_and_connections_still_show(monkeypatch):
    from airflow_provider_binlog.plugins import sources as sources_module

    def broken():
        raise RuntimeError("no such table: dag")

    monkeypatch.setattr(sources_module, "db_connections", dict)
    monkeypatch.setattr(sources_module, "dag_sources", broken)
    env = {"AIRFLOW_CONN_SHOP_DB": json.dumps({"conn_type": "mysql_binlog", "host": "h"})}
    found, warnings = discover_sources(env)
    assert [c.conn_id for c, _ in found] == ["shop_db"]
    assert warnings == ["cannot read the binlog DAGs from the metadata database: RuntimeError: no such table: dag"]


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
    data = gather(use_db=False)
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
    monkeypatch.setattr(cdc_view.cache, "get", lambda: status)
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
