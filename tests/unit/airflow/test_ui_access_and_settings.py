"""The Binlog CDC view with Airflow's own auth manager (SimpleAuthManager, the built-in one of
Airflow 3) and the view's settings that are not the sources themselves: the Airflow Variable
``binlog_ui_sources`` and ``[binlog] ui_task_runs``."""
from __future__ import annotations

import datetime as dt
import json

import pytest

pytest.importorskip("airflow")

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


@pytest.fixture()
def client(monkeypatch):
    from fastapi.testclient import TestClient

    from airflow_provider_binlog.plugins import cdc_view

    status = {"generated_at": dt.datetime.now(UTC).isoformat(), "warnings": [], "sources": [
        {"conn_id": "shop_db", "state": "ok", "problems": [], "warnings": []},
        {"conn_id": "crm_db", "state": "ok", "problems": [], "warnings": []}]}
    monkeypatch.setattr(cdc_view.cache, "get", lambda: status)
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
    sources, _ = discover_sources({}, use_db=True)
    (config, conn), = [(c, conn) for c, conn in sources if c.conn_id == "var_db"]
    assert config == SourceConfig("var_db", "k9", ("/st9",), 120.0) and isinstance(conn, Exception)


def test_a_bad_variable_is_a_page_warning(monkeypatch):
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    monkeypatch.setenv(VARIABLE_ENV, '[{"conn_id": "a", "password": "hunter2"}]')
    configs, warnings = configured_sources({})
    assert configs == [] and len(warnings) == 1
    assert warnings[0].startswith(f"Airflow Variable {SOURCES_VARIABLE} is ignored")


# ---------------------------------------------------------------------- [binlog] ui_task_runs

@pytest.fixture()
def task_runs(monkeypatch):
    """The metadata database's task runs replaced by a recorder; an empty cache."""
    calls = []

    def runs():
        calls.append(1)
        return []

    monkeypatch.setattr(status_mod, "airflow_task_runs", runs)
    monkeypatch.setattr(status_mod, "_task_runs_cache", status_mod._TTLCache(60.0))
    monkeypatch.delenv(SOURCES_ENV, raising=False)
    monkeypatch.delenv(VARIABLE_ENV, raising=False)
    return calls


def test_task_runs_are_read_by_default(monkeypatch, task_runs):
    monkeypatch.delenv(TASK_RUNS_ENV, raising=False)
    gather({}, use_db=True)
    assert task_runs == [1]
    gather({}, use_db=True)
    assert task_runs == [1]                  # cached for a minute
    monkeypatch.setenv(TASK_RUNS_ENV, "true")
    monkeypatch.setattr(status_mod, "_task_runs_cache", status_mod._TTLCache(60.0))
    gather({}, use_db=True)
    assert task_runs == [1, 1]


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "False"])
def test_binlog_ui_task_runs_false_turns_the_task_run_query_off(monkeypatch, task_runs, value):
    monkeypatch.setenv(TASK_RUNS_ENV, value)
    data = gather({}, use_db=True)
    assert task_runs == []
    assert not [w for w in data["warnings"] if "task runs" in w]


TEAMS = {"shop_db": "team_a", "crm_db": "team_b"}


@pytest.fixture()
def teams(simple_auth, monkeypatch):
    """Multi-team mode: each source's connection belongs to a team (the metadata database's
    ``connection.team_name``, looked up as Airflow's API does); ops of each team."""
    from airflow.models.connection import Connection

    monkeypatch.setenv("AIRFLOW__CORE__MULTI_TEAM", "True")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "alice:op:team_a,bob:op:team_b")
    monkeypatch.setattr(Connection, "get_team_name", staticmethod(lambda conn_id, **kw: TEAMS.get(conn_id)))
    monkeypatch.setattr(Connection, "get_conn_id_to_team_name_mapping",
                        staticmethod(lambda ids, **kw: {i: TEAMS.get(i) for i in ids}))
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
