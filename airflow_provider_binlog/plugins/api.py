"""Airflow's public REST API (``/api/v2``) as the Binlog CDC view reads it.

The view runs inside the API server, and reads the DAGs, assets, connections, task instances
and XCom entries it shows through the same REST API as any client, over HTTP, with the
credentials of the user who asked for the page (the ``Authorization`` header, or the ``_token``
cookie the Airflow UI sends): the API applies that user's permissions, so the view shows what
the user may see, and depends on no table or internal model of Airflow.

The API is reached on the API server's own listening socket: the local address and port the
request's connection came to (the ASGI ``scope["server"]``, a wildcard bind read as loopback),
else ``[api] base_url`` when its host is a loopback address, else ``[api] host``/``[api] port``;
under the path the API server is served at (``[api] base_url``'s sub-path). Never the request's
``Host`` header nor a public ``[api] base_url``: the user's token goes to this server only, and
never through an HTTP(S)_PROXY of the environment (``trust_env=False``). A failed call is
reported with its endpoint and HTTP status only, never the answer's body.
"""
from __future__ import annotations

import ipaddress
import threading
from collections import OrderedDict
from typing import Any, Iterable, Mapping, Optional
from urllib.parse import quote, urlsplit

from ..errors import ProviderError

API_PREFIX = "/api/v2"
#: Seconds one REST call may take (connect, read).
DEFAULT_TIMEOUT = 10.0
#: Items asked per page (Airflow's ``[api] maximum_page_limit`` may give fewer: the paging follows
#: ``total_entries``).
PAGE_SIZE = 100
#: The cookie of the Airflow UI's session token (``airflow.api_fastapi.auth.managers.base_auth_manager``).
TOKEN_COOKIE = "_token"


class ApiError(ProviderError):
    """A call of Airflow's REST API failed (``status``: the HTTP status, None when no answer)."""

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.status = status


def segment(value: Any) -> str:
    """A path segment of the REST API (a DAG id, run id, task id) quoted."""
    return quote(str(value), safe="")


class AirflowApi:
    """GETs of ``/api/v2`` with one user's token.

    :param base_url: the API server's URL (``http://host:8080``, ``https://host/airflow``);
        empty: ``client``'s own base URL.
    :param token: the user's JWT, sent as ``Authorization: Bearer``.
    :param identity: who the token is of (for the caches of what this user saw).
    :param client: an ``httpx.Client`` (e.g. a Starlette ``TestClient`` over the API app);
        default: a new one.
    """

    def __init__(self, base_url: str = "", *, token: Optional[str] = None, identity: str = "",
                 client: Any = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = (base_url or "").rstrip("/")
        self.identity = identity
        self.timeout = timeout
        self.headers = {"Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self._client = client
        self._own_client = client is None
        self._lock = threading.Lock()

    @property
    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import httpx

                    # trust_env=False: no HTTP(S)_PROXY, .netrc or SSL_CERT_* of the environment
                    self._client = httpx.Client(timeout=self.timeout, follow_redirects=False, trust_env=False)
        return self._client

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> "AirflowApi":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:  # never the token
        return f"AirflowApi({self.base_url or '(client base URL)'!r}, identity={self.identity!r})"

    def get(self, path: str, params: Optional[Mapping[str, Any]] = None) -> Any:
        """The JSON of ``GET /api/v2<path>``; :class:`ApiError` for anything but a 200."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = self.client.get(f"{self.base_url}{API_PREFIX}{path}", params=query, headers=self.headers)
        except Exception as exc:  # httpx.HTTPError, OSError: the server did not answer
            raise ApiError(f"GET {API_PREFIX}{path}: no answer ({type(exc).__name__})") from None
        if response.status_code != 200:  # the status only: the answer's body is not shown
            raise ApiError(f"GET {API_PREFIX}{path}: HTTP {response.status_code}", response.status_code)
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"GET {API_PREFIX}{path}: the answer is not JSON", response.status_code) from None

    def pages(self, path: str, key: str, params: Optional[Mapping[str, Any]] = None, *,
              max_items: Optional[int] = None) -> list:
        """The items under ``key`` of every page of a collection (``limit``/``offset``), at most
        ``max_items``."""
        out: list = []
        while max_items is None or len(out) < max_items:
            want = PAGE_SIZE if max_items is None else min(PAGE_SIZE, max_items - len(out))
            body = self.get(path, {**(params or {}), "limit": want, "offset": len(out)})
            items = body.get(key) if isinstance(body, dict) else None
            if not isinstance(items, list):
                raise ApiError(f"GET {API_PREFIX}{path}: no {key!r} in the answer")
            out.extend(items)
            total = body.get("total_entries")
            if not items or (isinstance(total, int) and len(out) >= total) or (total is None and len(items) < want):
                break
        return out if max_items is None else out[:max_items]


# ------------------------------------------------------------------------------------ the request

def request_token(request: Any) -> Optional[str]:
    """The caller's token, as Airflow's API reads it: ``Authorization: Bearer``, else the UI's
    ``_token`` cookie."""
    scheme, _, value = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return request.cookies.get(TOKEN_COOKIE) or None


def _conf(key: str) -> str:
    try:
        from airflow.configuration import conf

        return str(conf.get("api", key, fallback="") or "").strip()
    except Exception:  # pragma: no cover - outside Airflow
        return ""


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _netloc(host: str, port: Any) -> str:
    """``host:port``, a wildcard bind address as loopback, an IPv6 address in brackets."""
    host = str(host or "").strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{int(port)}" if port else host


def api_base_url(request: Any, mount_path: str = "") -> str:
    """The URL of the API server's own listener, which the view calls with the user's token.

    The host and port are the local address of the request's connection (ASGI
    ``scope["server"]``: the socket the API server listens on, never the ``Host`` header); when
    the server gives none (a UNIX socket), ``[api] base_url`` if its host is a loopback address,
    else ``[api] host`` and ``[api] port``. The scheme is ``https`` when the server has ``[api]
    ssl_cert``; the path is the one the request's app is served under (``root_path``), without
    the view's own ``mount_path``."""
    scheme = "https" if _conf("ssl_cert") else "http"
    root = str((getattr(request, "scope", None) or {}).get("root_path") or "").rstrip("/")
    mount = mount_path.rstrip("/")
    if mount and root.endswith(mount):
        root = root[:len(root) - len(mount)]
    server = (getattr(request, "scope", None) or {}).get("server")
    if server and server[0] and server[1]:
        return f"{scheme}://{_netloc(server[0], server[1])}{root}"
    configured = urlsplit(_conf("base_url"))
    if configured.scheme in ("http", "https") and configured.hostname and _is_loopback(configured.hostname):
        return configured.geturl().rstrip("/")
    return f"{scheme}://{_netloc(_conf('host'), _conf('port') or 8080)}{root}"


def user_identity(user: Any) -> str:
    """Who a user is, for the caches of what the view read with their token."""
    parts = [type(user).__name__]
    for getter in ("get_id", "get_name"):
        try:
            parts.append(str(getattr(user, getter)()))
        except Exception:
            parts.append("")
    return ":".join(parts)


# ------------------------------------------------------------------------------------ a memo

class Memo:
    """A bounded map of values that do not change once read (the XCom of a finished task
    try), per user."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._values: OrderedDict = OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            return default

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._values[key] = value
            self._values.move_to_end(key)
            while len(self._values) > self.size:
                self._values.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._values


def chunks(values: Iterable[str], size: int) -> list[list[str]]:
    values = list(values)
    return [values[i:i + size] for i in range(0, len(values), size)]


__all__ = ["API_PREFIX", "AirflowApi", "ApiError", "Memo", "TOKEN_COOKIE", "api_base_url", "chunks",
           "request_token", "segment", "user_identity"]
