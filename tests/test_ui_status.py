"""The Binlog CDC view's data gathering, SVG charts and HTML page, without a web server: a
healthy live MariaDB source after a few loads, an unreachable one, and the red states."""
from __future__ import annotations

import datetime as dt
import json
import re
import socket
import time
from html.parser import HTMLParser

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.checkpoint import Checkpoint, FileCheckpointStore  # noqa: E402
from airflow_provider_binlog.plugins import charts  # noqa: E402
from airflow_provider_binlog.plugins.page import render_page  # noqa: E402
from airflow_provider_binlog.plugins.sources import (  # noqa: E402
    SOURCES_ENV, SourceConfig, SourceConfigError, discover_sources, parse_sources)
from airflow_provider_binlog.plugins.status import (  # noqa: E402
    checkpoint_point, collect_all, collect_source, dump_summary, gather, redact, secret_values)
from tests.airflow_conn import SECRET  # noqa: E402
from tests.ui_history import build_history  # noqa: E402

UTC = dt.timezone.utc


def free_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    assert sources == [] and "BINLOG_UI_SOURCES is ignored" in warnings[0]


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


# ---------------------------------------------------------------------- live sources

@pytest.fixture(scope="module")
def history(mariadb, tmp_path_factory):
    return build_history(mariadb, tmp_path_factory.mktemp("ui-history"), conn_id="shop_db", runs=4)


@pytest.fixture()
def sources(mariadb, history, monkeypatch):
    """The healthy source and one whose server port has nothing listening."""
    down = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": free_port(), "login": "binlog_hook",
            "password": SECRET, "extra": {"server_id": 7313, "checkpoint_store_uri": str(history.store_dir)}}
    env = {"AIRFLOW_CONN_SHOP_DB": json.dumps(history.connection(mariadb)),
           "AIRFLOW_CONN_DOWN_DB": json.dumps(down),
           SOURCES_ENV: json.dumps([history.ui_source(),
                                    {"conn_id": "down_db", "checkpoint_key": history.key,
                                     "staging_dir": str(history.staging_dir)}])}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def test_a_healthy_source_after_a_few_loads(mariadb, history, sources):
    found, warnings = discover_sources(sources, use_db=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    s = collect_source(config, conn)
    assert s["state"] == "ok", s["problems"]
    assert s["server"]["flavor"] == "mariadb" and s["server"]["version"] == mariadb.version
    file, pos = mariadb.master_status()
    assert (s["position"]["file"], s["position"]["pos"]) == (file, pos)
    merged_end = history.dumps[history.merged - 1]["end"]
    assert (s["checkpoint"]["file"], s["checkpoint"]["pos"]) == (merged_end["file"], merged_end["pos"])
    lag = s["lag"]
    assert lag["has_new_data"] and lag["bytes"] > 0 and lag["transactions"] > 0 and lag["files"] >= 0
    assert s["retention"]["oldest_binlog"] and s["retention"]["files_of_headroom"] >= 0
    # the dumps, newest first: the last one staged, not merged
    assert [d["dump_id"] for d in s["dumps"]] == [d["dump_id"] for d in reversed(history.dumps)]
    assert s["dumps"][0]["merged_at"] is None and all(d["merged_at"] for d in s["dumps"][1:])
    last = s["last_dump"]
    expected_rows = {op: sum(r.get(op, 0) for r in history.dumps[-1]["rows"].values())
                     for op in ("insert", "update", "delete")}
    assert last["rows"] == expected_rows and last["total_rows"] == sum(expected_rows.values()) > 0
    assert last["duration_seconds"] is not None and last["rows_per_second"] > 0
    assert last["transactions"] == history.dumps[-1]["transactions"]
    # the last merge is the advance to the end of the last merged dump, with its rows
    merge = s["last_merge"]
    merged_rows = {op: sum(r.get(op, 0) for r in history.dumps[history.merged - 1]["rows"].values())
                   for op in ("insert", "update", "delete")}
    assert merge["rows"] == merged_rows and merge["dump_id"] == history.dumps[history.merged - 1]["dump_id"]
    assert len(s["advances"]) == history.merged + 1  # plus the initial checkpoint
    # tables: row counts summed over the dumps
    tables = {t["table"]: t for t in s["tables"]}
    assert sorted(tables) == [f"{history.database}.customers", f"{history.database}.orders"]
    for name, t in tables.items():
        assert t["total"] == sum(sum(d["rows"].get(name, {}).values()) for d in history.dumps)
    # the lag history: one point per dump, then now
    assert len(s["lag_history"]) == len(history.dumps) + 1 and s["lag_history"][-1]["now"]
    assert s["lag_history"][-1]["bytes"] == lag["bytes"]
    json.dumps(s)  # JSON-able as it is
    assert SECRET not in json.dumps(s) and str(history.store_dir) not in json.dumps(s)


def test_an_unreachable_source_fails_alone_and_fast(history, sources):
    found, _ = discover_sources(sources, use_db=False)
    began = time.monotonic()
    statuses = {s["conn_id"]: s for s in collect_all(found)}
    assert time.monotonic() - began < 10
    down, healthy = statuses["down_db"], statuses["shop_db"]
    assert healthy["state"] == "ok"
    assert down["state"] == "error" and down["lag"] is None and down["position"] is None
    assert any("cannot connect" in p["message"] for p in down["problems"])
    # what does not need the server is still shown
    assert down["checkpoint"] is not None and len(down["dumps"]) == len(history.dumps)
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": list(statuses.values()),
                        "warnings": []})
    assert 'data-conn-id="down_db" data-state="error"' in html
    assert 'data-conn-id="shop_db" data-state="ok"' in html
    assert html.count('class="chart lag-chart"') == 2 and html.count('class="chart rows-chart"') == 2


def test_stalled_when_behind_and_the_checkpoint_did_not_move(history, sources):
    found, _ = discover_sources(sources, use_db=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    later = dt.datetime.now(UTC) + dt.timedelta(hours=3)
    s = collect_source(config, conn, now=later)
    assert s["state"] == "stalled"
    assert "has not advanced for 3 h" in s["problems"][-1]["message"]
    quick = collect_source(SourceConfig("shop_db", history.key, stall_after_seconds=10 ** 6), conn, now=later)
    assert quick["state"] == "ok"
    html = render_page({"generated_at": later.isoformat(), "sources": [s], "warnings": []})
    assert "STALLED" in html and "state-stalled" in html


def test_purged_when_the_checkpoint_binlog_is_gone(mariadb, history, sources, tmp_path):
    from airflow.models.connection import Connection

    store = FileCheckpointStore(tmp_path / "store")
    base = mariadb.master_status()[0].rsplit(".", 1)[0]
    store.save("gone", Checkpoint(file=f"{base}.000000", position=4, flavor="mariadb"))
    doc = history.connection(mariadb, checkpoint_store_uri=str(tmp_path / "store"))
    conn = Connection.from_json(json.dumps(doc), conn_id="gone_db")
    s = collect_source(SourceConfig("gone_db", "gone"), conn)
    assert s["state"] == "purged" and "no longer on the server" in s["problems"][0]["message"]
    assert s["position"] is not None  # the server part is still shown


def test_store_errors_never_show_the_store_path_or_the_password(mariadb, history, tmp_path):
    from airflow.models.connection import Connection

    root = tmp_path / "secret-store-location"
    root.mkdir()
    (root / "shop_db.json").write_text("{corrupt")
    doc = history.connection(mariadb, checkpoint_store_uri=f"file://{root}", ssl_key="")
    doc["extra"]["custom_token"] = "tok-0123456789"
    conn = Connection.from_json(json.dumps(doc), conn_id="shop_db")
    s = collect_source(SourceConfig("shop_db"), conn)
    assert s["state"] == "error"
    message = " ".join(p["message"] for p in s["problems"])
    assert "checkpoint store" in message and "***" in message
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": [s], "warnings": []})
    for text in (html, json.dumps(s)):
        assert SECRET not in text and str(root) not in text and "tok-0123456789" not in text


def test_gather_with_no_source_renders_a_hint(monkeypatch):
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    for name in [n for n in __import__("os").environ if n.startswith("AIRFLOW_CONN_")]:
        monkeypatch.delenv(name)
    data = gather(use_db=False)
    assert data["sources"] == []
    assert "No source" in render_page(data)


def test_airflow_runs_add_durations_and_snapshot_ids(mariadb, history, sources):
    """Task instances of the merge operator (as read from the metadata database) give the
    merge's duration and the Iceberg snapshot ids of its tables."""
    found, _ = discover_sources(sources, use_db=False)
    config, conn = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    merged = history.dumps[history.merged - 1]
    table = f"{history.database}.orders"
    runs = [
        {"kind": "merge", "dag_id": "binlog_shop", "run_id": "r2", "task_id": "merge", "state": "success",
         "start_date": None, "end_date": None, "duration": 4.0,
         "value": {"end_checkpoint": merged["end"],
                   "tables": {table: {"iceberg_table": "lake.shop.orders", "snapshot_id": 81234567}}}},
        {"kind": "dump", "dag_id": "binlog_shop", "run_id": "r3", "task_id": "dump", "state": "success",
         "duration": 1.5, "value": {"dump_id": history.dumps[-1]["dump_id"]}},
    ]
    s = collect_source(config, conn, airflow_runs=runs)
    merge = s["last_merge"]
    assert merge["duration_seconds"] == 4.0 and merge["rows_per_second"] == round(merge["total_rows"] / 4.0, 1)
    assert merge["airflow"]["run_id"] == "r2"
    tables = {t["table"]: t for t in s["tables"]}
    assert tables[table]["snapshot_id"] == 81234567 and tables[table]["iceberg_table"] == "lake.shop.orders"
    assert s["last_dump"]["airflow"]["run_id"] == "r3"
    assert "81234567" in render_page({"generated_at": s["checked_at"], "sources": [s], "warnings": []})


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


# ---------------------------------------------------------------------- more red states and settings

@pytest.fixture()
def silent_server():
    """A loopback port whose listener accepts connections and never sends a byte (a hung
    server, a black-holing proxy): the port of an ``accept``-ing socket."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted, stop = [], threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_server_that_accepts_and_never_answers_fails_alone_within_the_timeouts(history, sources, silent_server):
    from airflow.models.connection import Connection

    port, accepted = silent_server
    doc = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": port, "login": "binlog_hook",
           "password": SECRET, "extra": {"server_id": 7314, "checkpoint_store_uri": str(history.store_dir)}}
    hung = (SourceConfig("hung_db", history.key, (str(history.staging_dir),)),
            Connection.from_json(json.dumps(doc), conn_id="hung_db"))
    found, _ = discover_sources(sources, use_db=False)
    healthy = next((c, conn) for c, conn in found if c.conn_id == "shop_db")
    import threading

    result = []
    began = time.monotonic()
    worker = threading.Thread(target=lambda: result.extend(collect_all([hung, healthy], timeout=2)), daemon=True)
    worker.start()
    worker.join(20)         # a status that never returns fails here (closing the sockets ends it)
    elapsed = time.monotonic() - began
    assert not worker.is_alive(), "the status of a silent server never returned"
    statuses = {s["conn_id"]: s for s in result}
    assert accepted, "the status never connected to the silent server"
    assert elapsed < 8, f"a silent server held the status for {elapsed:.1f} s (timeouts of 2 s)"
    assert statuses["shop_db"]["state"] == "ok"
    s = statuses["hung_db"]
    assert s["state"] == "error" and s["position"] is None and s["lag"] is None
    assert any(p["message"].startswith("server: ") and "timed out" in p["message"] for p in s["problems"]), \
        s["problems"]
    # what does not need the server is still shown
    assert s["checkpoint"] is not None and len(s["dumps"]) == len(history.dumps)


def test_binlog_ui_stall_seconds_sets_the_default_threshold(history, sources, monkeypatch):
    from airflow_provider_binlog.plugins.sources import STALL_ENV, default_stall_seconds

    found, _ = discover_sources(sources, use_db=False)
    conn = next(conn for c, conn in found if c.conn_id == "shop_db")
    config = SourceConfig("shop_db", history.key)      # no stall_after_seconds of its own
    later = dt.datetime.now(UTC) + dt.timedelta(minutes=30)
    monkeypatch.delenv(STALL_ENV, raising=False)
    assert default_stall_seconds() == 3600
    assert collect_source(config, conn, now=later)["state"] == "ok"           # 30 min < 1 h
    monkeypatch.setenv(STALL_ENV, "600")
    s = collect_source(config, conn, now=later)
    assert s["state"] == "stalled" and s["stall_after_seconds"] == 600
    assert "threshold 10 min" in s["problems"][-1]["message"], s["problems"]
    # a source's own stall_after_seconds wins over the environment
    own = collect_source(SourceConfig("shop_db", history.key, stall_after_seconds=7200), conn, now=later)
    assert own["state"] == "ok" and own["stall_after_seconds"] == 7200
    for bad in ("0", "-5", "soon"):
        monkeypatch.setenv(STALL_ENV, bad)
        assert default_stall_seconds() == 3600


def test_a_checkpoint_ahead_of_the_server_is_an_error(mariadb, history, tmp_path):
    from airflow.models.connection import Connection

    file, pos = mariadb.master_status()
    store = FileCheckpointStore(tmp_path / "store")
    store.save("ahead", Checkpoint(file=file, position=pos + 10_000, flavor="mariadb"))
    doc = history.connection(mariadb, checkpoint_store_uri=str(tmp_path / "store"))
    conn = Connection.from_json(json.dumps(doc), conn_id="ahead_db")
    s = collect_source(SourceConfig("ahead_db", "ahead"), conn)
    assert s["state"] == "error", s
    (problem,) = [p for p in s["problems"] if p["state"] == "error"]
    assert problem["message"].startswith("checkpoint: ") and "is ahead of the server's position" in problem["message"]
    assert s["position"]["pos"] >= pos and s["lag"] is None          # the server part is still shown
    html = render_page({"generated_at": dt.datetime.now(UTC).isoformat(), "sources": [s], "warnings": []})
    assert 'data-conn-id="ahead_db" data-state="error"' in html and "is ahead of the server" in html
