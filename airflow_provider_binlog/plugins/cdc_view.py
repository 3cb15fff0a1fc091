"""The "Binlog CDC" view of the Airflow UI: an Airflow 3 plugin.

What it adds
    A FastAPI app mounted in the API server at ``/binlog-cdc`` (``fastapi_apps``) that serves a
    server-rendered HTML page (``/binlog-cdc/``) and the same data as JSON
    (``/binlog-cdc/status.json``), and an ``external_views`` entry that puts "Binlog CDC" in the
    Browse menu of the UI's navigation and shows the page in the UI's frame
    (``/plugin/binlog-cdc``).

Why these mechanisms
    An external view over a FastAPI app is the lightest of Airflow 3's UI extension points
    that fits a status page: the page is plain HTML with inline SVG charts rendered on the
    server, so it needs no JavaScript bundle to build, ship and keep compatible with the UI's
    React version (which ``react_apps`` would), and it works in the UI's frame and on its own.
    Flask-AppBuilder views and blueprints are Airflow 2 mechanisms, only kept through the FAB
    provider.

Why the ``airflow.plugins`` entry point (pyproject.toml), and not the provider info
    Airflow 3.3's plugins manager always loads the plugins of the ``airflow.plugins`` entry
    point, while the ``plugins`` key of a provider's info is read only when providers are
    discovered eagerly (``[core] lazy_discover_providers = False``; the default is True, so
    the view would be missing from a default installation). Declaring it in both places would
    load it twice in the eager case, and Airflow reports the second one as a plugin import
    error. So the provider info does not list it.

Access
    Both endpoints need an authenticated Airflow user (the UI's session cookie or an API
    token) and show only the sources whose connections the user may read
    (``is_authorized_connection(GET)``). No password or connection extra is ever shown; the
    servers are read with short-lived read-only sessions with 3 s timeouts, concurrently, and
    the result is cached for ``[binlog] ui_cache_seconds`` (default 10) seconds.

Cost elsewhere
    Airflow imports plugin modules in every component (scheduler, DAG processor, task
    processes); this one imports only ``airflow.plugins_manager`` and builds its FastAPI app
    on the first request (:class:`LazyApp`), so only the API server pays for it.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Optional
from urllib.parse import urlsplit

from airflow.plugins_manager import AirflowPlugin

from ..settings import env_name, float_setting

log = logging.getLogger(__name__)

NAME = "Binlog CDC"
URL_PREFIX = "/binlog-cdc"
URL_ROUTE = "binlog-cdc"
CACHE_ENV = env_name("ui_cache_seconds")
REFRESH_ENV = env_name("ui_refresh_seconds")

_SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    # the page needs no script, no remote resource; the UI frames it from the same origin
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
}

_ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" '
         'stroke-width="2" stroke-linecap="round" stroke-linejoin="round"><ellipse cx="12" cy="5" rx="8" '
         'ry="3"/><path d="M4 5v6c0 1.7 3.6 3 8 3"/><path d="M4 11v6c0 1.7 3.6 3 8 3"/>'
         '<path d="M20 5v5"/><polyline points="14 17 17 20 22 13"/></svg>')




class _Cache:
    """The last gathered status, shared by all users for a few seconds (one gatherer at a time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = 0.0
        self._value: Optional[dict] = None

    def get(self) -> dict:
        ttl = float_setting("ui_cache_seconds", zero=True)
        with self._lock:
            if self._value is None or time.monotonic() - self._at >= ttl:
                from .status import gather

                self._value = gather()
                self._at = time.monotonic()
            return self._value

    def clear(self) -> None:
        with self._lock:
            self._value = None


cache = _Cache()


def _auth_manager():
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def _connection_teams(conn_ids: list) -> dict:
    """The team of each connection, in Airflow's multi-team mode (as its own API looks them
    up); empty otherwise, or when the metadata database cannot say."""
    from airflow.configuration import conf

    if not conn_ids or not conf.getboolean("core", "multi_team", fallback=False):
        return {}
    from airflow.models.connection import Connection

    try:
        return Connection.get_conn_id_to_team_name_mapping(list(conn_ids))
    except Exception:  # no metadata database: connections from the environment have no team
        return {}


def visible_status(data: dict, user: Any) -> dict:
    """``data`` with only the sources whose connection ``user`` may read; 403 when the user
    may read no connection at all."""
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from fastapi import HTTPException

    manager = _auth_manager()
    if not manager.is_authorized_connection(method="GET", user=user):
        raise HTTPException(403, "Forbidden: the Binlog CDC view needs read access to connections")
    teams = _connection_teams([s.get("conn_id") for s in data.get("sources", []) if s.get("conn_id")])
    sources = [s for s in data.get("sources", [])
               if manager.is_authorized_connection(method="GET", user=user, details=ConnectionDetails(
                   conn_id=s.get("conn_id"), team_name=teams.get(s.get("conn_id"))))]
    hidden = len(data.get("sources", [])) - len(sources)
    out = {**data, "sources": sources}
    if hidden:
        out["warnings"] = [*data.get("warnings", []), f"{hidden} source(s) hidden: no read access to their connection"]
    return out


def create_app():
    """The FastAPI app: ``/`` (the page), ``/status.json`` and ``/icon.svg``."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, FastAPI
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from .page import render_page

    app = FastAPI(title=NAME, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse)
    def page(user=Depends(get_user)):
        data = visible_status(cache.get(), user)
        refresh = int(float_setting("ui_refresh_seconds"))
        return HTMLResponse(render_page(data, refresh_seconds=refresh), headers=_SECURITY_HEADERS)

    @app.get("/status.json", response_class=JSONResponse)
    def status_json(user=Depends(get_user)):
        return JSONResponse(visible_status(cache.get(), user), headers=_SECURITY_HEADERS)

    @app.get("/icon.svg", include_in_schema=False)
    def icon():
        return Response(_ICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    return app


class LazyApp:
    """An ASGI app that builds :func:`create_app` on its first request.

    Airflow imports plugin modules in many processes (the scheduler, DAG processor, every
    task's process for macros and listeners), and only the API server serves the app: the
    FastAPI app and Airflow's API security code are imported there only."""

    def __init__(self) -> None:
        self._app = None
        self._lock = threading.Lock()

    @property
    def app(self):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = create_app()
        return self._app

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)

    def __repr__(self) -> str:
        return f"{__name__}.LazyApp()"


def _base_path() -> str:
    """The path of ``[api] base_url`` (Airflow served under a sub-path), without the end slash."""
    try:
        from airflow.configuration import conf

        return urlsplit(conf.get("api", "base_url", fallback="") or "").path.rstrip("/")
    except Exception:  # pragma: no cover
        return ""


class BinlogCdcPlugin(AirflowPlugin):
    """Registered through the ``airflow.plugins`` entry point of the package."""

    name = "binlog_cdc"
    fastapi_apps = [{"app": LazyApp(), "url_prefix": URL_PREFIX, "name": NAME}]
    external_views = [{
        "name": NAME,
        "href": f"{_base_path()}{URL_PREFIX}/",
        "icon": f"{_base_path()}{URL_PREFIX}/icon.svg",
        "url_route": URL_ROUTE,
        "destination": "nav",
        "category": "browse",
    }]


__all__ = ["BinlogCdcPlugin", "LazyApp", "cache", "create_app", "visible_status"]
