"""The Binlog CDC view in a real browser: a live Airflow API server (SQLite metadata database,
SimpleAuthManager with every user an admin) with the provider's plugin, a live MariaDB source
after a few loads plus an unreachable one, and headless Chromium driven by Selenium through
Debian's chromedriver. The view reads the DAGs, assets, connections, task instances and XCom
through the server's own REST API, and the connections (``AIRFLOW_CONN_<ID>`` variables only,
none in the metadata database) through Airflow's secrets backends.

Needs the Debian packages chromium and chromium-driver (``.ci/run`` installs them) and the
Python package selenium (the ``test`` extra). Without them the test is skipped, except when
the environment variable CI is true: there it fails.

The screenshots go to the test's temporary directory; the one of the view inside the Airflow
UI is also copied to ``docs/ui-screenshot.png`` (the README's) when that file is missing or
``UPDATE_UI_SCREENSHOT=1``.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("airflow")

from tests.airflow_conn import SECRET  # noqa: E402
from tests.ui_history import build_history  # noqa: E402

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
README_SCREENSHOT = ROOT / "docs" / "ui-screenshot.png"
CHROME_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1400,1800")


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def _find(*candidates: str):
    for name in candidates:
        path = shutil.which(name) or (name if os.path.isabs(name) and os.access(name, os.X_OK) else None)
        if path:
            return path
    return None


def _require_browser() -> tuple[str, str]:
    chromium = _find("/usr/bin/chromium", "chromium", "chromium-browser")
    driver = _find("/usr/bin/chromedriver", "chromedriver")
    missing = [n for n, p in (("chromium", chromium), ("chromium-driver", driver)) if not p]
    reason = None
    if missing:
        reason = f"not installed: {', '.join(missing)} (Debian packages chromium chromium-driver)"
    else:
        try:
            import selenium  # noqa: F401
        except ImportError:
            reason = "the Python package selenium is not installed (the test extra)"
    if reason:
        if _in_ci():
            pytest.fail(f"{reason}; CI must install it (.ci/run does)", pytrace=False)
        pytest.skip(reason)
    return chromium, driver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0, headers: dict | None = None, data: bytes | None = None
         ) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


MERGE_DAG = """
import datetime as dt

from airflow.sdk import DAG, BaseOperator


class BinlogMergeOperator(BaseOperator):
    template_fields = ("binlog_conn_id", "checkpoint_key")

    def __init__(self, summary, binlog_conn_id, checkpoint_key, **kwargs):
        super().__init__(**kwargs)
        self.summary = summary
        self.binlog_conn_id, self.checkpoint_key = binlog_conn_id, checkpoint_key

    def execute(self, context):
        return self.summary


with DAG("binlog_ui_merge", schedule=None, start_date=dt.datetime(2026, 1, 1)):
    BinlogMergeOperator(task_id="merge", summary={summary}, binlog_conn_id="shop_db",
                        checkpoint_key="{{{{ 'sh' ~ 'op' }}}}")
"""

FACTORY_DAG = """
from airflow.sdk import Asset

from airflow_provider_binlog.dags import LakeSettings, make_cdc_dags

binlog_cdc, binlog_backfill = make_cdc_dags({key!r}, binlog_conn_id="shop_db", tables=["{db}.*"], staging={staging!r},
                                            lake=LakeSettings(namespace="shop", warehouse="/nonexistent"))

# What the factory registers of the source in the extra of its assets, for the Binlog CDC view
# (plugins/sources.py REGISTERED_KEYS): added here where the factory does not (yet).
for task in binlog_cdc.tasks:
    for outlet in task.outlets:
        if isinstance(outlet, Asset):
            for name, value in (("binlog_conn_id", "shop_db"), ("checkpoint_key", {key!r}),
                                ("staging_dir", {staging!r})):
                outlet.extra.setdefault(name, value)
"""

SNAPSHOT_IDS = {"orders": 6204335771953124917, "customers": 3950120583385140062}


def merge_summary(history) -> dict:
    """The XCom of BinlogMergeOperator for the last merged dump of ``history``."""
    dump = history.dumps[history.merged - 1]
    tables = {}
    for name, rows in dump["rows"].items():
        short = name.split(".", 1)[1]
        tables[name] = {"iceberg_table": f"lake.shop.{short}", "snapshot_id": SNAPSHOT_IDS[short],
                        "status": "committed", "inserted": rows.get("insert", 0),
                        "updated": rows.get("update", 0), "deleted": rows.get("delete", 0)}
    return {"tables": tables, "batches": [[dump["dump_id"], "applied"]], "end_checkpoint": dump["end"],
            "mode": "incremental"}


class ApiServer:
    def __init__(self, base: str, proc: subprocess.Popen, log: Path, env: dict) -> None:
        self.base, self.proc, self.log, self.env = base, proc, log, env

    def log_tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


@pytest.fixture(scope="module")
def browser_paths():
    return _require_browser()


@pytest.fixture(scope="module")
def load_history(mariadb, tmp_path_factory):
    # stored under the source id "shop", not the connection id: the view finds it from the DAGs
    return build_history(mariadb, tmp_path_factory.mktemp("ui-browser-history"), conn_id="shop_db", runs=5,
                         key="shop")


@pytest.fixture(scope="module")
def api_server(mariadb, load_history, tmp_path_factory):
    """``airflow api-server`` on a free loopback port, with its own AIRFLOW_HOME and SQLite
    database, the healthy source ``shop_db`` and the unreachable ``down_db``."""
    home = tmp_path_factory.mktemp("airflow-api-home")
    port = _free_port()
    down = {"conn_type": "mysql_binlog", "host": "127.0.0.1", "port": _free_port(), "login": "binlog_hook",
            "password": SECRET, "extra": {"server_id": 7314, "checkpoint_store_uri": str(home / "down-store")}}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_", "AIRFLOW__"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__API_AUTH__JWT_SECRET": os.urandom(16).hex(),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW_CONN_SHOP_DB": json.dumps(load_history.connection(mariadb)),
        "AIRFLOW_CONN_DOWN_DB": json.dumps(down),
        "AIRFLOW__BINLOG__UI_CACHE_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    })
    airflow = str(Path(sys.executable).with_name("airflow"))
    log = home / "api-server.log"
    migrate = subprocess.run([airflow, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stdout[-3000:] + migrate.stderr[-3000:]
    # a merge task run, as the view finds them through the REST API: its duration, Airflow
    # run and the Iceberg snapshot ids of its tables (returned by a stand-in of the operator
    # with the real one's XCom summary; the real one needs Spark)
    (home / "dags").mkdir()
    summary = json.loads(json.dumps(merge_summary(load_history), default=str))  # plain values (enums too)
    (home / "dags" / "binlog_ui_merge.py").write_text(MERGE_DAG.format(summary=repr(summary)))
    run = subprocess.run([airflow, "dags", "test", "binlog_ui_merge"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # the source's DAGs, made by the factory: no source configuration, the view finds the
    # connection, checkpoint key and staging directory in what they register (their assets'
    # extra, through the REST API once parsed)
    (home / "dags" / "binlog_shop.py").write_text(FACTORY_DAG.format(
        key=load_history.key, staging=str(load_history.staging_dir), db=load_history.database))
    parse = subprocess.run([airflow, "dags", "reserialize"], env=env, capture_output=True, text=True, timeout=300)
    assert parse.returncode == 0, parse.stdout[-3000:] + parse.stderr[-3000:]
    yield from _serve(env, port, log)


def _serve(env: dict, port: int, log: Path):
    """``airflow api-server`` with ``env`` on ``port`` until the generator is closed."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    with open(log, "wb") as out:
        proc = subprocess.Popen([airflow, "api-server", "--host", "127.0.0.1", "--port", str(port),
                                 "--workers", "1", "--apps", "core"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    server = ApiServer(f"http://127.0.0.1:{port}", proc, log, env)
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"airflow api-server exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                if _get(f"{server.base}/binlog-cdc/icon.svg", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"airflow api-server did not answer in 180 s:\n{server.log_tail()}")
            time.sleep(0.5)
        yield server
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and its worker, started here
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


PASSWORDS = {"ops": "ops-password-1", "guest": "guest-password-1"}


@pytest.fixture(scope="module")
def restricted_server(api_server, tmp_path_factory):
    """A second API server on the same metadata database, where users log in: ``ops`` (role
    OP: reads connections, DAGs, task instances) and ``guest`` (VIEWER: no connections)."""
    home = Path(api_server.env["AIRFLOW_HOME"])
    port = _free_port()
    (home / "passwords.json").write_text(json.dumps(PASSWORDS))
    env = {**api_server.env,
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "ops:op,guest:viewer",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
           "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}"}
    yield from _serve(env, port, tmp_path_factory.mktemp("restricted") / "api-server.log")


def _login(server: ApiServer, username: str) -> str:
    status, body = _get(f"{server.base}/auth/token", headers={"Content-Type": "application/json"},
                        data=json.dumps({"username": username, "password": PASSWORDS[username]}).encode())
    assert status in (200, 201), body[:300]
    return json.loads(body)["access_token"]


@pytest.fixture()
def browser(browser_paths, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = browser_paths
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in CHROME_ARGS:
        options.add_argument(arg)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    service = Service(executable_path=chromedriver, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, condition, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def test_the_plugin_is_registered_with_the_api_server(api_server):
    status, body = _get(f"{api_server.base}/api/v2/plugins")
    assert status == 200, body[:500]
    plugins = {p["name"]: p for p in json.loads(body)["plugins"]}
    plugin = plugins["binlog_cdc"]
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/binlog-cdc"
    (view,) = plugin["external_views"]
    assert (view["name"], view["url_route"], view["href"]) == ("Binlog CDC", "binlog-cdc", "/binlog-cdc/")
    assert "airflow.plugins" in plugin["source"] or "binlog" in plugin["source"]
    status, body = _get(f"{api_server.base}/api/v2/plugins/importErrors")
    assert status == 200 and json.loads(body)["total_entries"] == 0, body[:500]


def test_the_json_endpoint_shows_both_sources_and_no_secret(api_server, load_history):
    status, body = _get(f"{api_server.base}/binlog-cdc/status.json", timeout=30)
    assert status == 200, body[:500]
    text = body.decode()
    data = json.loads(text)
    states = {s["conn_id"]: s["state"] for s in data["sources"]}
    assert states == {"shop_db": "ok", "down_db": "error"}, data
    # found with no source configuration: the key and staging directory the factory's DAG
    # registers in its assets (REST API: /dags, /assets)
    found = {s["conn_id"]: (s["checkpoint_key"], s["found_by"], s["staging_configured"]) for s in data["sources"]}
    assert found == {"shop_db": ("shop", "dag:binlog_cdc__shop", True), "down_db": ("down_db", "connection", False)}
    assert data["warnings"] == []  # the REST API was read (DAGs, assets, connections, task runs)
    assert all(s["probed"] for s in data["sources"])
    assert SECRET not in text and str(load_history.store_dir) not in text


def test_connections_only_in_airflow_conn_variables_are_found(api_server):
    """Both connections are ``AIRFLOW_CONN_<ID>`` variables of the API server, none is in the
    metadata database: the view resolves them through Airflow's secrets backends."""
    status, body = _get(f"{api_server.base}/api/v2/connections")
    assert status == 200 and json.loads(body)["total_entries"] == 0, body[:500]
    status, body = _get(f"{api_server.base}/binlog-cdc/status.json", timeout=30)
    shop = next(s for s in json.loads(body)["sources"] if s["conn_id"] == "shop_db")
    assert shop["state"] == "ok" and shop["server"]["flavor"] == "mariadb", shop["problems"]
    assert not any("not found" in p["message"] for p in shop["problems"])


def test_the_rest_api_gives_what_the_view_reads_of_task_instances(api_server):
    """The shapes the view reads, from the live API: a binlog task's rendered arguments (which
    name a factory DAG's source once it ran: templates rendered) and its XCom."""
    from airflow_provider_binlog.plugins.api import AirflowApi
    from airflow_provider_binlog.plugins.sources import rendered_facts
    from airflow_provider_binlog.plugins.task_runs import airflow_task_runs

    with AirflowApi(api_server.base) as api:  # every user an admin: the server adds the token
        body = api.get("/dags/binlog_ui_merge/dagRuns/~/taskInstances", {"order_by": "-start_date"})
        assert rendered_facts(body["task_instances"]) == {"binlog_conn_id": "shop_db", "checkpoint_key": "shop"}
        (run,) = [r for r in airflow_task_runs(api) if r["dag_id"] == "binlog_ui_merge"]
    assert run["kind"] == "merge" and run["state"] == "success" and run["duration"] > 0
    assert run["value"]["tables"][next(iter(run["value"]["tables"]))]["snapshot_id"] in SNAPSHOT_IDS.values()


def test_the_view_reads_airflow_with_the_callers_credentials(restricted_server):
    """Where users log in, the view reads the REST API with the caller's own token (the
    Authorization header, or the UI's ``_token`` cookie): the factory's DAG, its source and
    the merge run are found as the caller may see them; a user who may not read connections
    gets nothing."""
    url = f"{restricted_server.base}/binlog-cdc/status.json"
    ops = _login(restricted_server, "ops")
    for headers in ({"Authorization": f"Bearer {ops}"}, {"Cookie": f"_token={ops}"}):
        status, body = _get(url, timeout=30, headers=headers)
        assert status == 200, body[:500]
        data = json.loads(body)
        assert data["warnings"] == [], (headers.keys(), data["warnings"])   # every REST call answered
        shop = next(s for s in data["sources"] if s["conn_id"] == "shop_db")
        assert shop["found_by"] == "dag:binlog_cdc__shop" and shop["state"] == "ok", shop["problems"]
        assert shop["last_merge"]["airflow"]["dag_id"] == "binlog_ui_merge"   # task instances and XCom
    status, body = _get(url, timeout=30, headers={"Authorization": f"Bearer {_login(restricted_server, 'guest')}"})
    assert status == 403 and b"shop_db" not in body
    assert _get(url, timeout=30)[0] == 401


def test_the_view_in_headless_chromium(api_server, browser, load_history, tmp_path):
    from selenium.webdriver.common.by import By

    began = time.monotonic()
    # the page itself
    browser.get(f"{api_server.base}/binlog-cdc/")
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "section.source"))
    shop = browser.find_element(By.CSS_SELECTOR, 'section.source[data-conn-id="shop_db"]')
    down = browser.find_element(By.CSS_SELECTOR, 'section.source[data-conn-id="down_db"]')
    assert shop.get_attribute("data-state") == "ok"
    assert down.get_attribute("data-state") == "error"
    assert "FAILED" in down.find_element(By.CSS_SELECTOR, ".badge").text
    assert "cannot connect" in down.text
    lag = shop.find_element(By.CSS_SELECTOR, ".lag-value")
    assert int(lag.get_attribute("data-bytes")) > 0 and lag.text.strip()
    behind = shop.find_element(By.CSS_SELECTOR, ".lag-seconds")   # in source time
    assert float(behind.get_attribute("data-seconds")) >= 0 and "of source time" in behind.text
    assert "mariadb" in shop.find_element(By.CSS_SELECTOR, ".card.server").text
    first_file = load_history.dumps[0]["end"]["file"]
    assert shop.find_element(By.CSS_SELECTOR, ".position").text.startswith(first_file.rsplit(".", 1)[0])
    # the charts: inline SVG with a lag line and one bar group per dump
    assert len(shop.find_elements(By.CSS_SELECTOR, "svg.lag-chart polyline.lag-line")) == 1
    assert len(shop.find_elements(By.CSS_SELECTOR, "svg.lag-chart circle.lag-point")) == len(load_history.dumps) + 1
    assert len(shop.find_elements(By.CSS_SELECTOR, "svg.rows-chart g.run-bar")) == len(load_history.dumps)
    assert len(shop.find_elements(By.CSS_SELECTOR, "svg.rows-chart g.run-pending")) == 1
    assert len(down.find_elements(By.CSS_SELECTOR, "svg")) == 2
    tables = [td.text for td in shop.find_elements(By.CSS_SELECTOR, "table.tables tbody td:first-child")]
    assert tables == [f"{load_history.database}.customers", f"{load_history.database}.orders"]
    # the merge task run found in the metadata database
    merge = shop.find_element(By.CSS_SELECTOR, ".card.last-merge").text
    assert "binlog_ui_merge" in merge and "unknown" not in merge.split("duration", 1)[1].split("\n", 1)[0]
    table_text = shop.find_element(By.CSS_SELECTOR, "table.tables").text
    assert str(SNAPSHOT_IDS["orders"]) in table_text and "lake.shop.orders" in table_text
    assert SECRET not in browser.page_source
    page_shot = tmp_path / "binlog-cdc-page.png"
    _full_page_screenshot(browser, page_shot)

    # the same page inside the Airflow UI, reached through its navigation entry
    browser.get(f"{api_server.base}/plugin/binlog-cdc")
    try:
        frame = _wait(browser, lambda d: next(iter(d.find_elements(By.CSS_SELECTOR, 'iframe[src*="/binlog-cdc/"]')),
                                              None), timeout=90)
        browser.switch_to.frame(frame)
        _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, 'section.source[data-conn-id="shop_db"]'))
        assert browser.find_elements(By.CSS_SELECTOR, "svg.lag-chart")
        browser.switch_to.default_content()
    except Exception:
        browser.switch_to.default_content()
        browser.save_screenshot(str(tmp_path / "failed-ui.png"))
        (tmp_path / "failed-ui.html").write_text(browser.page_source)
        print(f"the Airflow UI page as it was: {tmp_path / 'failed-ui.png'}, server log:\n{api_server.log_tail()}")
        raise
    time.sleep(1.0)  # let the UI finish drawing its navigation
    ui_shot = tmp_path / "binlog-cdc-in-airflow-ui.png"
    assert browser.save_screenshot(str(ui_shot))
    for shot in (page_shot, ui_shot):
        assert shot.stat().st_size > 20_000  # a real picture, not a blank page
    if not README_SCREENSHOT.exists() or os.environ.get("UPDATE_UI_SCREENSHOT", "") not in ("", "0"):
        README_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(ui_shot, README_SCREENSHOT)
    print(f"screenshots: {page_shot} {ui_shot} ({time.monotonic() - began:.1f} s in the browser)")


def _full_page_screenshot(driver, path: Path) -> None:
    """The whole page, below the window's bottom too (Chromium's DevTools protocol)."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))
