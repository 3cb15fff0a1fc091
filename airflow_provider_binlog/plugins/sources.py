"""Which sources the Binlog CDC view shows, and under which checkpoint keys.

A *source* is found three ways, the first that names a connection winning:

1. the optional configuration, in ``[binlog] ui_sources`` of Airflow's configuration
   (``AIRFLOW__BINLOG__UI_SOURCES``) or else the Airflow Variable ``binlog_ui_sources``: JSON, a list of ::

    {"conn_id": "shop_db",              # required; may name a connection of a secrets backend
     "checkpoint_key": "shop_db",       # default: the connection id
     "checkpoint_store_uri": "...",     # default: the connection's extra checkpoint_store_uri
     "staging_dir": "/data/staging/shop_db",   # or "staging_dirs": [...], to read manifests
     "stall_after_seconds": 3600}       # default: [binlog] ui_stall_seconds, else 3600

2. the incremental DAGs made by :func:`~airflow_provider_binlog.dags.make_cdc_dags`
   (``binlog_cdc__<source_id>``), read from their serialized form in the metadata database:
   the connection, checkpoint key, store and staging directory their tasks use;
3. the Airflow connections of type ``mysql_binlog`` (``AIRFLOW_CONN_<ID>`` environment
   variables and the metadata database) that neither of the above names, under their own id
   as the checkpoint key.

or an object ``{conn_id: {...}, ...}``. What each source's status holds is gathered by
:mod:`.status`.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..errors import ProviderError
from ..settings import env_name, float_setting, setting

log = logging.getLogger(__name__)

CONN_TYPE = "mysql_binlog"
SOURCES_ENV = env_name("ui_sources")
SOURCES_VARIABLE = "binlog_ui_sources"
STALL_ENV = env_name("ui_stall_seconds")
DEFAULT_STALL_SECONDS = 3600.0

_SOURCE_KEYS = frozenset({"conn_id", "checkpoint_key", "checkpoint_store_uri", "staging_dir", "staging_dirs",
                          "stall_after_seconds"})
#: The DAG id prefix of the factory's incremental DAGs (``dags.incremental_dag_id``).
FACTORY_DAG_PREFIX = "binlog_cdc__"
_TASK_TYPES = frozenset({"BinlogPositionSensor", "BinlogDumpOperator", "BinlogMergeOperator"})


class SourceConfigError(ProviderError, ValueError):
    """``[binlog] ui_sources`` / the Variable ``binlog_ui_sources`` is not valid."""


@dataclass(frozen=True)
class SourceConfig:
    conn_id: str
    checkpoint_key: Optional[str] = None
    staging_dirs: tuple[str, ...] = ()
    stall_after_seconds: Optional[float] = None
    checkpoint_store_uri: Optional[str] = None
    #: where it was found: "configured", "dag:<dag_id>" or "connection"
    origin: str = "configured"

    @property
    def key(self) -> str:
        return self.checkpoint_key or self.conn_id


def parse_sources(value: Any) -> list[SourceConfig]:
    """Source configurations from JSON text or its parsed value (see the module docstring)."""
    if isinstance(value, (bytes, str)):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise SourceConfigError(f"not JSON: {exc}") from None
    if isinstance(value, Mapping):
        if "conn_id" in value:
            value = [value]
        else:
            value = [{"conn_id": k, **(v or {})} if isinstance(v, Mapping) or v is None else v
                     for k, v in value.items()]
    if not isinstance(value, list):
        raise SourceConfigError("expected a list of sources ({\"conn_id\": ..., ...}) or an object "
                                "keyed by connection id")
    out: list[SourceConfig] = []
    for item in value:
        if isinstance(item, str):
            item = {"conn_id": item}
        if not isinstance(item, Mapping):
            raise SourceConfigError(f"a source must be an object or a connection id, not {item!r}")
        unknown = sorted(set(item) - _SOURCE_KEYS)
        if unknown:
            raise SourceConfigError(f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_SOURCE_KEYS))}")
        conn_id = item.get("conn_id")
        if not isinstance(conn_id, str) or not conn_id.strip():
            raise SourceConfigError("every source needs a 'conn_id' string")
        dirs = item.get("staging_dirs") or []
        if isinstance(dirs, str):
            dirs = [dirs]
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise SourceConfigError(f"{conn_id}: 'staging_dirs' must be a list of paths")
        if item.get("staging_dir"):
            dirs = [str(item["staging_dir"]), *dirs]
        stall = item.get("stall_after_seconds")
        if stall is not None:
            try:
                stall = float(stall)
                if stall <= 0 or isinstance(item["stall_after_seconds"], bool):
                    raise ValueError
            except (TypeError, ValueError):
                raise SourceConfigError(f"{conn_id}: 'stall_after_seconds' must be a number > 0") from None
        key = item.get("checkpoint_key")
        if key is not None and (not isinstance(key, str) or not key):
            raise SourceConfigError(f"{conn_id}: 'checkpoint_key' must be a non-empty string")
        store = item.get("checkpoint_store_uri")
        if store is not None and (not isinstance(store, str) or not store):
            raise SourceConfigError(f"{conn_id}: 'checkpoint_store_uri' must be a non-empty string")
        out.append(SourceConfig(conn_id.strip(), key, tuple(dirs), stall, store))
    return out


def configured_sources(environ: Optional[Mapping[str, str]] = None, *, use_variable: bool = True
                       ) -> tuple[list[SourceConfig], list[str]]:
    """The optional source configuration: ``[binlog] ui_sources`` (``AIRFLOW__BINLOG__UI_SOURCES``),
    else the Variable ``binlog_ui_sources``; a bad one is reported, not raised."""
    text, origin = setting("ui_sources", environ), f"[binlog] ui_sources ({SOURCES_ENV})"
    if not text and use_variable:
        origin = f"Airflow Variable {SOURCES_VARIABLE}"
        try:
            from airflow.models.variable import Variable

            text = Variable.get(SOURCES_VARIABLE, default_var=None)
        except Exception as exc:  # no metadata database: no Variable
            log.debug("cannot read the Variable %s: %s", SOURCES_VARIABLE, exc)
            text = None
    if not text:
        return [], []
    try:
        return parse_sources(text), []
    except SourceConfigError as exc:
        return [], [f"{origin} is ignored: {exc}"]


def default_stall_seconds(environ: Optional[Mapping[str, str]] = None) -> float:
    """The stall threshold of a source that sets none: ``[binlog] ui_stall_seconds``, else 3600."""
    return float_setting("ui_stall_seconds", environ)


def short_error(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, cut at ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ------------------------------------------------------------------------------------ connections

def env_connections(environ: Optional[Mapping[str, str]] = None) -> tuple[dict[str, Any], list[str]]:
    """Connections of type ``mysql_binlog`` defined by ``AIRFLOW_CONN_<ID>`` variables (JSON or
    URI), keyed by their id (the variable's suffix, lower case, as Airflow looks them up)."""
    from airflow.models.connection import Connection

    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    warnings: list[str] = []
    for name, value in sorted(environ.items()):
        if not name.startswith("AIRFLOW_CONN_") or not value:
            continue
        conn_id = name[len("AIRFLOW_CONN_"):].lower()
        try:
            if value.lstrip().startswith("{"):
                doc = json.loads(value)
                if not isinstance(doc, dict) or doc.get("conn_type") != CONN_TYPE:
                    continue
                conn = Connection.from_json(value, conn_id=conn_id)
            else:
                conn = Connection(conn_id=conn_id, uri=value)
        except Exception:  # the value may hold a password: name the variable only
            warnings.append(f"environment variable {name} does not hold a readable connection")
            continue
        if conn.conn_type == CONN_TYPE:
            out[conn_id] = conn
    return out, warnings


def db_connections() -> dict[str, Any]:
    """Connections of type ``mysql_binlog`` in the metadata database (detached)."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        conns = list(session.scalars(select(Connection).where(Connection.conn_type == CONN_TYPE)))
        for conn in conns:
            _ = conn.password, conn.extra  # decrypt while attached
            session.expunge(conn)
    return {c.conn_id: c for c in conns}


def resolve_connection(conn_id: str) -> Any:
    """A connection by id from Airflow's secrets backends, environment and database."""
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


# ------------------------------------------------------------------------------------ DAGs

def _plain(value: Any) -> Optional[str]:
    """A task argument's value when it is a plain string (not a Jinja template)."""
    return value if isinstance(value, str) and value and "{{" not in value and "{%" not in value else None


def sources_of_dag(data: Mapping[str, Any], dag_id: str = "") -> list[SourceConfig]:
    """The sources the binlog tasks of one serialized DAG (``SerializedDagModel.data``) load:
    per connection and checkpoint key, the store and the staging directories they name."""
    dag = data.get("dag", data) if isinstance(data, Mapping) else {}
    found: dict[tuple[str, str], dict] = {}
    for task in dag.get("tasks") or ():
        var = task.get("__var", task) if isinstance(task, Mapping) else {}
        if not isinstance(var, Mapping) or var.get("task_type") not in _TASK_TYPES:
            continue
        conn_id = _plain(var.get("binlog_conn_id"))
        if conn_id is None:
            continue
        key = _plain(var.get("checkpoint_key")) or conn_id
        entry = found.setdefault((conn_id, key), {"dirs": [], "store": None})
        staging = _plain(var.get("staging_dir"))
        if staging and staging not in entry["dirs"]:
            entry["dirs"].append(staging)
        entry["store"] = entry["store"] or _plain(var.get("checkpoint_store_uri"))
    return [SourceConfig(conn_id, key if key != conn_id else None, tuple(e["dirs"]),
                         checkpoint_store_uri=e["store"], origin=f"dag:{dag_id}")
            for (conn_id, key), e in sorted(found.items())]


def dag_sources() -> list[SourceConfig]:
    """The sources of the factory's incremental DAGs in the metadata database (not stale)."""
    from airflow.models.dag import DagModel
    from airflow.models.serialized_dag import SerializedDagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    out: list[SourceConfig] = []
    with create_session() as session:
        dag_ids = session.scalars(select(DagModel.dag_id).where(
            DagModel.dag_id.startswith(FACTORY_DAG_PREFIX, autoescape=True),
            DagModel.is_stale.is_(False)).order_by(DagModel.dag_id)).all()
        for dag_id in dag_ids:
            try:  # one unreadable DAG hides only its own sources
                serialized = SerializedDagModel.get(dag_id, session=session)
                if serialized is not None:
                    out.extend(sources_of_dag(serialized.data or {}, dag_id))
            except Exception as exc:
                log.warning("cannot read the serialized DAG %s: %s", dag_id, exc)
    return out


def discover_sources(environ: Optional[Mapping[str, str]] = None, *, use_db: bool = True
                     ) -> tuple[list[tuple[SourceConfig, Any]], list[str]]:
    """``[(config, connection or the exception that prevented getting it)]`` sorted by
    connection id and checkpoint key, and warnings for the page (see the module docstring)."""
    configs, warnings = configured_sources(environ, use_variable=use_db)
    conns: dict[str, Any] = {}
    discovered: list[SourceConfig] = []
    if use_db:
        try:
            conns.update(db_connections())
        except Exception as exc:
            log.warning("cannot list the mysql_binlog connections of the metadata database: %s", exc)
            warnings.append("cannot list connections from the metadata database: " + short_error(exc, 160))
        try:
            discovered = dag_sources()
        except Exception as exc:
            log.warning("cannot read the binlog DAGs of the metadata database: %s", exc)
            warnings.append("cannot read the binlog DAGs from the metadata database: " + short_error(exc, 160))
    found, env_warnings = env_connections(environ)
    conns.update(found)  # the environment wins over the database, as in Airflow's lookup
    warnings += env_warnings
    configured_ids = {c.conn_id for c in configs}
    chosen: dict[tuple[str, str], SourceConfig] = {(c.conn_id, c.key): c for c in configs}
    for config in discovered:
        if config.conn_id not in configured_ids:
            chosen.setdefault((config.conn_id, config.key), config)
    named = {conn_id for conn_id, _key in chosen}
    for conn_id in conns:
        if conn_id not in named:
            chosen[(conn_id, conn_id)] = SourceConfig(conn_id, origin="connection")
    sources = []
    for ident in sorted(chosen):
        config = chosen[ident]
        conn: Any = conns.get(config.conn_id)
        if conn is None:
            try:
                conn = resolve_connection(config.conn_id)
            except Exception as exc:
                conn = exc
        sources.append((config, conn))
    return sources, warnings


__all__ = ["CONN_TYPE", "DEFAULT_STALL_SECONDS", "FACTORY_DAG_PREFIX", "SOURCES_ENV", "SOURCES_VARIABLE",
           "STALL_ENV", "SourceConfig", "SourceConfigError", "configured_sources", "dag_sources",
           "db_connections", "default_stall_seconds", "discover_sources", "env_connections", "parse_sources",
           "resolve_connection", "short_error", "sources_of_dag"]
