"""The Binlog CDC view with Airflow's own auth manager (SimpleAuthManager, the built-in one of
Airflow 3): who sees what, and the caller's credentials forwarded to Airflow's REST API; and
the view's settings that are not the sources themselves: the Airflow Variable
``binlog_ui_sources`` and ``[binlog] ui_task_runs``."""
from __future__ import annotations

import datetime as dt
import json

import pytest

pytest.importorskip("airflow")

from airflow_provider_binlog.plugins.ttl_cache import TtlCache  # noqa: E402
from airflow_provider_binlog.plugins import status as status_mod  # noqa: E402
from airflow_provider_binlog.plugins.sources import (  # noqa: E402
    SOURCES_ENV, SOURCES_VARIABLE, SourceConfig, configured_sources, discover_sources)
from airflow_provider_binlog.plugins.status import TASK_RUNS_ENV, gather  # noqa: E402

UTC = dt.timezone.utc
VARIABLE_ENV = f"AIRFLOW_VAR_{SOURCES_VARIABLE.upper()}"


# ---------------------------------------------------------------------- SimpleAuthManager

@pytest.fixture()
def simple_auth(monkeypatch, tmp_path):
    """Airflow's SimpleAuthManager with one user per role (not every user an admin):
    ``token(username)`` gives the JWT the API server would issue to that user."""
    from airflow.api_fastapi import app as api_app
    from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    monkeypatch.setenv("AIRFLOW__CORE__AUTH_MANAGER",
                       "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "boss:admin,ops:op,dev:user,guest:viewer")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS", "False")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(tmp_path / "passwords.json"))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "binlog-cdc-test-secret-" + "x" * 48)
    monkeypatch.setattr(api_app._AuthManagerState, "instance", None)
    # no metadata database here: its list of revoked tokens is empty
    from airflow.models.revoked_token import RevokedToken
    monkeypatch.setattr(RevokedToken, "is_revoked", classmethod(lambda cls, jti, **kwargs: False))
    manager = api_app.create_auth_manager()
    manager.init()
    assert type(manager) is SimpleAuthManager
    roles = {u.username: u.role for u in SimpleAuthManager.get_users()}

    def token(username: str) -> str:
        return manager.generate_jwt(SimpleAuthManagerUser(username=username, role=roles[username]))

    yield token
    api_app._AuthManagerState.instance = None


class Gathered(list):
    """The REST clients the view gathered with (``status.gather`` replaced)."""


@pytest.fixture()
def gathered(monkeypatch):
    from airflow_provider_binlog.plugins import cdc_view

    calls = Gathered()

    def gather(*, api):
        calls.append(api)
        return {"generated_at": dt.datetime.now(UTC).isoformat(), "warnings": [], "sources": [
            {"conn_id": "shop_db", "state": "ok", "problems": [], "warnings": []},
            {"conn_id": "crm_db", "state": "ok", "problems": [], "warnings": []}]}

    monkeypatch.setattr(status_mod, "gather", gather)
    monkeypatch.setattr(cdc_view, "cache", TtlCache(size=64))
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    return calls


@pytest.fixture()
def client(gathered):
    from fastapi.testclient import TestClient

    from airflow_provider_binlog.plugins import cdc_view

    return TestClient(cdc_view.create_app())


def test_simple_auth_manager_users_with_connection_access_see_every_source(simple_auth, client):
    for user in ("ops", "boss"):
        headers = {"Authorization": f"Bearer {simple_auth(user)}"}
        data = client.get("/status.json", headers=headers)
        assert data.status_code == 200, (user, data.text)
        assert [s["conn_id"] for s in data.json()["sources"]] == ["shop_db", "crm_db"]
        assert data.json()["warnings"] == []
        page = client.get("/", headers=headers)
        assert page.status_code == 200
        assert 'data-conn-id="shop_db"' in page.text and 'data-conn-id="crm_db"' in page.text


def test_simple_auth_manager_users_without_connection_access_are_refused(simple_auth, client):
    # SimpleAuthManager: reading connections takes the OP role; VIEWER and USER do not have it
    for user in ("guest", "dev"):
        headers = {"Authorization": f"Bearer {simple_auth(user)}"}
        for path in ("/", "/status.json"):
            response = client.get(path, headers=headers)
            assert response.status_code == 403, (user, path, response.text)
            assert "shop_db" not in response.text and "crm_db" not in response.text
    assert client.get("/status.json").status_code == 401                       # no token
    assert client.get("/status.json", headers={"Authorization": "Bearer not-a-token"}).status_code in (401, 403)


def test_a_refused_user_makes_the_view_read_nothing(simple_auth, client, gathered):
    assert client.get("/status.json", headers={"Authorization": f"Bearer {simple_auth('guest')}"}).status_code == 403
    assert gathered == []


def test_the_callers_token_goes_to_the_rest_api_of_the_same_server(simple_auth, client, gathered, monkeypatch):
    """The view reads Airflow through its REST API as the caller: with the token of the
    Authorization header, else the one of the UI's ``_token`` cookie; at the server's own
    listener (the ASGI ``server`` of the request), never a public ``[api] base_url``."""
    header_token, cookie_token = simple_auth("ops"), simple_auth("boss")
    assert client.get("/status.json", headers={"Authorization": f"Bearer {header_token}"}).status_code == 200
    client.cookies.set("_token", cookie_token)
    assert client.get("/").status_code == 200
    assert [api.headers["Authorization"] for api in gathered] == [f"Bearer {header_token}", f"Bearer {cookie_token}"]
    assert [api.base_url for api in gathered] == ["http://testserver:80", "http://testserver:80"]
    assert [api.identity for api in gathered] == ["SimpleAuthManagerUser:ops:ops", "SimpleAuthManagerUser:boss:boss"]
    from airflow_provider_binlog.plugins import cdc_view

    cdc_view.cache.clear()
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/tools/airflow/")
    assert client.get("/status.json").status_code == 200
    assert gathered[-1].base_url == "http://testserver:80"  # the public URL is not called


def test_a_foreign_host_header_does_not_choose_where_the_token_goes(simple_auth, client, gathered):
    """``Host: 10.0.0.5:9200`` from a logged-in user must not make the API server send the
    user's token there: the REST calls go to the server's own listener."""
    headers = {"Authorization": f"Bearer {simple_auth('ops')}", "Host": "10.0.0.5:9200"}
    assert client.get("/status.json", headers=headers).status_code == 200
    assert "10.0.0.5" not in gathered[-1].base_url and gathered[-1].base_url == "http://testserver:80"


def test_the_listener_address_without_a_server_in_the_scope(monkeypatch):
    """Without ``scope["server"]`` (a UNIX socket): ``[api] base_url`` only when it is a
    loopback address, else ``[api] host``/``[api] port`` (a wildcard bind read as loopback)."""
    from types import SimpleNamespace

    from airflow_provider_binlog.plugins.api import api_base_url

    request = SimpleNamespace(scope={"root_path": "/tools/airflow/binlog-cdc", "server": None},
                              headers={"host": "10.0.0.5:9200"})
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/tools/airflow")
    monkeypatch.setenv("AIRFLOW__API__HOST", "0.0.0.0")
    monkeypatch.setenv("AIRFLOW__API__PORT", "8081")
    assert api_base_url(request, "/binlog-cdc") == "http://127.0.0.1:8081/tools/airflow"
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://127.0.0.1:9090/tools/airflow/")
    assert api_base_url(request, "/binlog-cdc") == "http://127.0.0.1:9090/tools/airflow"
    request.scope["server"] = ("::", 8080)
    assert api_base_url(request, "/binlog-cdc") == "http://[::1]:8080/tools/airflow"


def test_what_the_view_gathered_is_kept_per_user(simple_auth, client, gathered):
    ops, boss = ({"Authorization": f"Bearer {simple_auth(u)}"} for u in ("ops", "boss"))
    for headers in (ops, ops, boss, ops, boss):
        assert client.get("/status.json", headers=headers).status_code == 200
    assert [api.identity.rsplit(":", 1)[1] for api in gathered] == ["ops", "boss"]  # [binlog] ui_cache_seconds


def test_simple_auth_manager_decides_through_visible_status(simple_auth):
    """The view asks the auth manager per source: a user it refuses sees no source data."""
    from fastapi import HTTPException

    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow_provider_binlog.plugins import cdc_view

    data = {"sources": [{"conn_id": "a"}, {"conn_id": "b"}], "warnings": []}
    out = cdc_view.visible_status(data, SimpleAuthManagerUser(username="ops", role="OP"))
    assert [s["conn_id"] for s in out["sources"]] == ["a", "b"]
    for role in ("VIEWER", "USER", None):
        with pytest.raises(HTTPException) as err:
            cdc_view.visible_status(data, SimpleAuthManagerUser(username="x", role=role))
        assert err.value.status_code == 403


# ---------------------------------------------------------------------- the Variable binlog_ui_sources

def test_sources_come_from_the_airflow_variable_when_the_environment_has_none(monkeypatch):
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    monkeypatch.setenv(VARIABLE_ENV, json.dumps([{"conn_id": "var_db", "checkpoint_key": "k9",
                                                  "staging_dir": "/st9", "stall_after_seconds": 120}]))
    assert configured_sources({}) == ([SourceConfig("var_db", "k9", ("/st9",), 120.0)], [])
    # the environment variable wins over the Variable
    env = {SOURCES_ENV: json.dumps([{"conn_id": "env_db"}])}
    assert configured_sources(env) == ([SourceConfig("env_db")], [])
    # without the metadata database (use_db=False) the Variable is not read
    assert configured_sources({}, use_variable=False) == ([], [])
    # a source named only by the Variable is listed (its connection is looked up)
    sources, _ = discover_sources({})
    (config, conn), = [(c, conn) for c, conn in sources if c.conn_id == "var_db"]
    assert config == SourceConfig("var_db", "k9", ("/st9",), 120.0) and isinstance(conn, Exception)


def test_a_bad_variable_is_a_page_warning(monkeypatch):
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    monkeypatch.setenv(VARIABLE_ENV, '[{"conn_id": "a", "password": "hunter2"}]')
    configs, warnings = configured_sources({})
    assert configs == [] and len(warnings) == 1
    assert warnings[0].startswith(f"Airflow Variable {SOURCES_VARIABLE} is ignored")


# ---------------------------------------------------------------------- [binlog] ui_task_runs

class _Api:
    """A stand-in of the REST client (its calls come from the patched readers)."""

    def __init__(self, identity="someone"):
        self.identity = identity


@pytest.fixture()
def task_runs(monkeypatch):
    """The REST API's task runs replaced by a recorder; an empty cache."""
    from airflow_provider_binlog.plugins import sources as sources_mod

    calls = []

    def runs(api):
        calls.append(1)
        return []

    monkeypatch.setattr(status_mod, "airflow_task_runs", runs)
    monkeypatch.setattr(status_mod, "running_snapshots", lambda api: [])
    monkeypatch.setattr(sources_mod, "api_connection_ids", lambda api: [])
    monkeypatch.setattr(sources_mod, "dag_sources", lambda api: ([], []))
    monkeypatch.setattr(status_mod, "_task_runs_cache", status_mod._TTLCache(60.0))
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    monkeypatch.delenv(VARIABLE_ENV, raising=False)
    return calls


def test_task_runs_are_read_by_default(monkeypatch, task_runs):
    monkeypatch.delenv(TASK_RUNS_ENV, raising=False)
    gather({}, api=_Api())
    assert task_runs == [1]
    gather({}, api=_Api())
    assert task_runs == [1]                  # cached for a minute
    gather({}, api=_Api("someone else"))
    assert task_runs == [1, 1]               # per user
    monkeypatch.setenv(TASK_RUNS_ENV, "true")
    monkeypatch.setattr(status_mod, "_task_runs_cache", status_mod._TTLCache(60.0))
    gather({}, api=_Api())
    assert task_runs == [1, 1, 1]


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "False"])
def test_binlog_ui_task_runs_false_turns_the_task_run_query_off(monkeypatch, task_runs, value):
    monkeypatch.setenv(TASK_RUNS_ENV, value)
    data = gather({}, api=_Api())
    assert task_runs == []
    assert not [w for w in data["warnings"] if "task runs" in w]


TEAMS = {"shop_db": "team_a", "crm_db": "team_b"}


@pytest.fixture()
def teams(simple_auth, monkeypatch):
    """Multi-team mode: each source's connection belongs to a team (``team_name`` of the REST
    API's connection, as the view reads it; replaced here); ops of each team."""
    from airflow_provider_binlog.plugins import cdc_view

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "alice:op:team_a,bob:op:team_b")
    monkeypatch.setattr(cdc_view, "connection_teams", lambda api, ids: {i: TEAMS.get(i) for i in ids})
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return lambda name, team: get_auth_manager().generate_jwt(
        SimpleAuthManagerUser(username=name, role="OP", teams=[team]))


def test_in_multi_team_mode_each_team_sees_only_the_sources_of_its_connections(teams, client):
    for user, team, own, other in (("alice", "team_a", "shop_db", "crm_db"), ("bob", "team_b", "crm_db", "shop_db")):
        data = client.get("/status.json", headers={"Authorization": f"Bearer {teams(user, team)}"})
        assert data.status_code == 200, data.text
        assert [s["conn_id"] for s in data.json()["sources"]] == [own], (user, data.json()["sources"])
        assert other not in data.text and "1 source(s) hidden" in data.json()["warnings"][0]


def test_a_connection_the_rest_api_refuses_hides_its_source(monkeypatch):
    """In multi-team mode a connection's team comes from the REST API as the user sees it: one
    the API refuses to show (403) hides the source, whatever the auth manager would say of it;
    one it does not have (404: from the environment or a secrets backend) has no team."""
    from airflow_provider_binlog.plugins import cdc_view

    class Permissive:
        def is_authorized_connection(self, *, method, user, details=None):
            return True

    monkeypatch.setattr(cdc_view, "_auth_manager", Permissive)
    data = {"sources": [{"conn_id": "a"}, {"conn_id": "b"}], "warnings": []}
    out = cdc_view.visible_status(data, object(), {"a": cdc_view.HIDDEN, "b": None})
    assert [s["conn_id"] for s in out["sources"]] == ["b"] and "1 source(s) hidden" in out["warnings"][0]


def test_connection_teams_come_from_the_rest_api_as_the_user_sees_it(monkeypatch):
    import httpx

    from airflow_provider_binlog.plugins import cdc_view
    from airflow_provider_binlog.plugins.api import AirflowApi

    answers = {"a": (200, {"connection_id": "a", "team_name": "team_a"}), "b": (403, {"detail": "Forbidden"}),
               "env_db": (404, {"detail": "not found"})}

    def handler(request):
        code, body = answers[request.url.path.rsplit("/", 1)[1]]
        return httpx.Response(code, json=body)

    api = AirflowApi("http://airflow.test", token="t", client=httpx.Client(transport=httpx.MockTransport(handler)))
    monkeypatch.delenv("AIRFLOW__CORE__MULTI_TEAM", raising=False)
    assert cdc_view.connection_teams(api, ["a", "b"]) == {}          # not in multi-team mode: no call
    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    assert cdc_view.connection_teams(api, ["a", "b", "env_db"]) == {"a": "team_a", "b": cdc_view.HIDDEN,
                                                                     "env_db": None}
