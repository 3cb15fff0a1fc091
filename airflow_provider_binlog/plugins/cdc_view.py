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
    (``is_authorized_connection(GET)``). What Airflow knows (the factory's DAGs and assets,
    the connections of the metadata database, task instances and their XCom) is read through
    Airflow's public REST API, over HTTP from the API server to itself, with the user's own
    token (:mod:`.api`): the view shows what the user may see, and reads no table of Airflow's.
    Connections are resolved through Airflow's secrets backends. No password or connection
    extra is ever shown; the servers are read (unless ``[binlog] ui_probe_sources = False``)
    with short-lived read-only sessions with 3 s timeouts, concurrently. What is read of the
    sources (server, checkpoint store, staging) is shared by all users for ``[binlog]
    ui_cache_seconds`` (default 10) seconds; what the REST API gave a user is cached per user
    for as long. The REST calls go to the API server's own listener, never to the request's
    ``Host`` (:func:`.api.api_base_url`).

Cost elsewhere
    Airflow imports plugin modules in every component (scheduler, DAG processor, task
    processes); this one imports only ``airflow.plugins_manager`` (and the view's small REST
    client, :mod:`.api`) and builds its FastAPI app on the first request (:class:`LazyApp`), so
    only the API server pays for it.
"""

# (no ``from __future__ import annotations``: FastAPI reads the ``Request`` annotation of the
# routes, imported inside create_app)
import asyncio
import functools
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Optional
from urllib.parse import urlsplit

from airflow.plugins_manager import AirflowPlugin

from ..utils.settings import env_name, float_setting
from .ttl_cache import TtlCache
from .api import AirflowApi, ApiError, api_base_url, request_token, segment, user_identity

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




#: What the view gathered for each user (read with their token); one gatherer per user at a time.
cache = TtlCache(size=64)

#: A team the user may not know: the REST API refused to show the connection.
HIDDEN = object()


def _auth_manager():
    from airflow.api_fastapi.app import get_auth_manager

    return get_auth_manager()


def connection_teams(api: AirflowApi, conn_ids: list) -> dict:
    """The team of each connection in Airflow's multi-team mode, as the REST API shows it to
    the user (``GET /connections/{id}``): None for a connection outside the metadata database
    (environment, secrets backend), :data:`HIDDEN` when the API refuses it; empty otherwise."""
    from airflow.configuration import conf

    if not conn_ids or not conf.getboolean("core", "multi_team", fallback=False):
        return {}
    teams: dict = {}
    for conn_id in dict.fromkeys(conn_ids):
        try:
            teams[conn_id] = api.get(f"/connections/{segment(conn_id)}").get("team_name")
        except ApiError as exc:
            teams[conn_id] = None if exc.status == 404 else HIDDEN
    return teams


def visible_status(data: dict, user: Any, teams: Optional[Mapping] = None) -> dict:
    """``data`` with only the sources whose connection ``user`` may read (``teams``: the team
    of each connection in multi-team mode); 403 when the user may read no connection at all."""
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from fastapi import HTTPException

    manager = _auth_manager()
    if not manager.is_authorized_connection(method="GET", user=user):
        raise HTTPException(403, "Forbidden: the Binlog CDC view needs read access to connections")
    teams = teams or {}
    sources = [s for s in data.get("sources", [])
               if teams.get(s.get("conn_id")) is not HIDDEN
               and manager.is_authorized_connection(method="GET", user=user, details=ConnectionDetails(
                   conn_id=s.get("conn_id"), team_name=teams.get(s.get("conn_id"))))]
    hidden = len(data.get("sources", [])) - len(sources)
    out = {**data, "sources": sources}
    if hidden:
        out["warnings"] = [*data.get("warnings", []), f"{hidden} source(s) hidden: no read access to their connection"]
    return out


def api_for(base_url: str, token: Optional[str], identity: str) -> AirflowApi:
    """The REST API client of one request: the caller's token, to the API server itself."""
    return AirflowApi(base_url, token=token, identity=identity)


def collect(api: AirflowApi) -> tuple[dict, dict]:
    """What the view shows to the user of ``api`` (before the per-connection filter), and the
    connections' teams."""
    from .status import gather

    data = gather(api=api)
    return data, connection_teams(api, [s.get("conn_id") for s in data.get("sources", [])])


def status_for(user: Any, token: Optional[str], base_url: str) -> dict:
    """The status ``user`` may see, gathered with their ``token`` (or taken from the cache)."""
    from fastapi import HTTPException

    if not _auth_manager().is_authorized_connection(method="GET", user=user):
        raise HTTPException(403, "Forbidden: the Binlog CDC view needs read access to connections")
    identity = user_identity(user)

    def compute() -> tuple[dict, dict]:
        api = api_for(base_url, token, identity)
        try:
            return collect(api)
        finally:
            api.close()

    data, teams = cache.get(identity, compute)
    return visible_status(data, user, teams)


_executor: Optional[ThreadPoolExecutor] = None
_executor_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The view's own threads: a page waits there for the REST API of the same server, whose
    endpoints run in the server's thread pool, so a page never holds a thread those need."""
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="binlog-ui-view")
        return _executor


def create_app():
    """The FastAPI app: ``/`` (the page), ``/status.json`` and ``/icon.svg``."""
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, FastAPI, Request
    from fastapi.responses import HTMLResponse, JSONResponse, Response

    from .page import render_page

    app = FastAPI(title=NAME, docs_url=None, redoc_url=None, openapi_url=None)

    async def status(request: Request, user: Any) -> dict:
        call = functools.partial(status_for, user, request_token(request), api_base_url(request, URL_PREFIX))
        return await asyncio.get_running_loop().run_in_executor(_pool(), call)

    @app.get("/", response_class=HTMLResponse)
    async def page(request: Request, user=Depends(get_user)):
        data = await status(request, user)
        refresh = int(float_setting("ui_refresh_seconds"))
        return HTMLResponse(render_page(data, refresh_seconds=refresh), headers=_SECURITY_HEADERS)

    @app.get("/status.json", response_class=JSONResponse)
    async def status_json(request: Request, user=Depends(get_user)):
        return JSONResponse(await status(request, user), headers=_SECURITY_HEADERS)

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


__all__ = ["BinlogCdcPlugin", "HIDDEN", "LazyApp", "api_for", "cache", "collect", "connection_teams", "create_app",
           "status_for", "visible_status"]
