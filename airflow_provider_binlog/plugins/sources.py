"""Which sources the Binlog CDC view shows, and under which checkpoint keys.

A *source* is found three ways, the first that names a connection winning:

1. the optional configuration, in ``[binlog] ui_sources`` of Airflow's configuration
   (``AIRFLOW__BINLOG__UI_SOURCES``) or else the Airflow Variable ``binlog_ui_sources``: JSON, a list of ::

    {"conn_id": "shop_db",              # required; may name a connection of a secrets backend
     "checkpoint_key": "shop_db",       # default: the connection id
     "checkpoint_store_uri": "...",     # default: the connection's extra checkpoint_store_uri
     "staging_dir": "/data/staging/shop_db",   # or "staging_dirs": [...], to read manifests
     "stall_after_seconds": 3600}       # default: [binlog] ui_stall_seconds, else 3600

   or an object ``{conn_id: {...}, ...}``;
2. the incremental DAGs made by :func:`~airflow_provider_binlog.dags.make_cdc_dags`
   (``binlog_cdc__<source_id>``) the user may read, through Airflow's REST API: the
   connection, checkpoint key and staging directory the factory registers in the ``extra`` of
   the DAG's assets (:data:`REGISTERED_KEYS`), else those the DAG's binlog tasks rendered in
   their last runs (the task instances' ``rendered_fields``: also the checkpoint store);
3. the connections of type ``mysql_binlog`` that neither of the above names, under their own
   id as the checkpoint key: those of ``AIRFLOW_CONN_<ID>`` environment variables and those
   the REST API lists (the metadata database's, as far as the user may read them).

Every connection is then resolved as a task would resolve it, through Airflow's secrets
backends (a custom backend, the environment, the metadata database). What each source's
status holds is gathered by :mod:`.status`.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from ..errors import ProviderError
from ..common.options_json import known_keys_object
from ..utils.settings import env_name, float_setting, setting
from .api import AirflowApi, ApiError, chunks, segment
from .values import short_error

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
#: The operators whose rendered arguments name a source's connection, checkpoint and staging.
TASK_OPERATORS = ("BinlogPositionSensor", "BinlogDumpOperator", "BinlogMergeOperator")
#: What the factory registers of a source in the ``extra`` of the incremental DAG's assets
#: (besides ``source_id``), read by the view: see the module docstring.
REGISTERED_KEYS = ("binlog_conn_id", "checkpoint_key", "staging_dir", "checkpoint_store_uri")
#: How many of a DAG's newest binlog task instances are read for their rendered arguments.
RENDERED_TASKS = 12


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
        item = known_keys_object(item, _SOURCE_KEYS, "a source", SourceConfigError,
                                 expected="an object or a connection id")
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


def api_connection_ids(api: AirflowApi) -> list[str]:
    """The ids of the ``mysql_binlog`` connections the REST API lists to the user (those of the
    metadata database the user may read)."""
    return [str(item["connection_id"]) for item in api.pages("/connections", "connections",
                                                              {"order_by": "connection_id"})
            if isinstance(item, Mapping) and item.get("conn_type") == CONN_TYPE and item.get("connection_id")]


def resolve_connection(conn_id: str) -> Any:
    """A connection by id through Airflow's secrets backends (a custom backend, the
    ``AIRFLOW_CONN_<ID>`` environment variables, the metadata database), as a task gets it."""
    from airflow.models.connection import Connection

    return Connection.get_connection_from_secrets(conn_id)


# ------------------------------------------------------------------------------------ DAGs

def _plain(value: Any) -> Optional[str]:
    """An argument's value when it is a plain string (not a Jinja template, not masked)."""
    if not isinstance(value, str) or not value.strip() or value.strip() == "None":
        return None
    if "{{" in value or "{%" in value or "***" in value:
        return None
    return value.strip()


def registered_sources(assets: list, dag_ids: list[str]) -> dict[str, dict[str, str]]:
    """Per DAG id, what the factory registered of its source in the ``extra`` of the assets the
    DAG produces or is scheduled on (the REST API's ``/assets``): :data:`REGISTERED_KEYS`.

    An asset's registration counts for a DAG only when its ``extra["source_id"]`` is the DAG's
    own source (``binlog_cdc__<source_id>``): two sources merging into one table both write its
    asset, and neither is shown with the other's connection."""
    wanted = set(dag_ids)
    out: dict[str, dict[str, str]] = {}
    for asset in assets:
        extra = asset.get("extra") if isinstance(asset, Mapping) else None
        if not isinstance(extra, Mapping) or not _plain(extra.get("binlog_conn_id")):
            continue
        dags = {t.get("dag_id") for t in asset.get("producing_tasks") or () if isinstance(t, Mapping)}
        dags |= {d.get("dag_id") for d in asset.get("scheduled_dags") or () if isinstance(d, Mapping)}
        facts = {k: v for k in REGISTERED_KEYS if (v := _plain(extra.get(k)))}
        source_id = extra.get("source_id")
        if not isinstance(source_id, str) or not source_id:
            continue
        dag_id = f"{FACTORY_DAG_PREFIX}{source_id}"
        if dag_id in wanted and dag_id in dags:
            out.setdefault(dag_id, facts)
    return out


def rendered_facts(task_instances: list) -> dict[str, str]:
    """What the newest binlog task instances of a DAG rendered (``rendered_fields`` of the REST
    API's task instances, newest first): the connection of the newest that names one, and the
    checkpoint key, staging directory and store of the newest naming each with that connection."""
    facts: dict[str, str] = {}
    for ti in task_instances:
        fields = ti.get("rendered_fields") if isinstance(ti, Mapping) else None
        if not isinstance(fields, Mapping):
            continue
        conn_id = _plain(fields.get("binlog_conn_id"))
        if conn_id is None or facts.setdefault("binlog_conn_id", conn_id) != conn_id:
            continue
        staging = fields.get("staging")  # a StagingRef, rendered as its fields
        if isinstance(staging, Mapping) and "staging_dir" not in fields:
            fields = {**fields, "staging_dir": staging.get("location")}
        for key in REGISTERED_KEYS[1:]:
            value = _plain(fields.get(key))
            if value is not None:
                facts.setdefault(key, value)
    return facts


def source_of_dag(dag_id: str, registered: Mapping[str, str], rendered: Mapping[str, str]
                  ) -> Optional[SourceConfig]:
    """The source of one factory DAG: what the factory registered, completed by what its tasks
    rendered for the same connection; None when neither names the connection."""
    conn_id = registered.get("binlog_conn_id") or rendered.get("binlog_conn_id")
    if not conn_id:
        return None
    same = rendered if rendered.get("binlog_conn_id") == conn_id else {}
    key = registered.get("checkpoint_key") or same.get("checkpoint_key")
    staging = registered.get("staging_dir") or same.get("staging_dir")
    store = registered.get("checkpoint_store_uri") or same.get("checkpoint_store_uri")
    return SourceConfig(conn_id, key if key and key != conn_id else None, (staging,) if staging else (),
                        checkpoint_store_uri=store, origin=f"dag:{dag_id}")


def dag_sources(api: AirflowApi) -> tuple[list[SourceConfig], list[str]]:
    """The sources of the factory's incremental DAGs the user may read (not stale), through the
    REST API, and warnings for the DAGs whose source is not known (yet)."""
    dags = api.pages("/dags", "dags", {"dag_id_pattern": FACTORY_DAG_PREFIX})
    dag_ids = sorted({str(d["dag_id"]) for d in dags if isinstance(d, Mapping)
                      and str(d.get("dag_id") or "").startswith(FACTORY_DAG_PREFIX)})
    warnings: list[str] = []
    registered: dict[str, dict[str, str]] = {}
    try:
        for some in chunks(dag_ids, 40):
            registered.update(registered_sources(api.pages("/assets", "assets", {"dag_ids": ",".join(some)}),
                                                 some))
    except ApiError as exc:
        log.warning("cannot read the assets of the binlog DAGs: %s", exc)
        warnings.append(f"cannot read the assets of the binlog DAGs: {short_error(exc, 160)}")
    out: list[SourceConfig] = []
    for dag_id in dag_ids:
        rendered: dict[str, str] = {}
        try:  # one unreadable DAG hides only its own source
            body = api.get(f"/dags/{segment(dag_id)}/dagRuns/~/taskInstances",
                           {"operator": list(TASK_OPERATORS), "start_date_gte": "1970-01-01T00:00:00Z",
                            "order_by": "-start_date", "limit": RENDERED_TASKS})
            rendered = rendered_facts(body.get("task_instances") or [])
        except ApiError as exc:
            log.warning("cannot read the task instances of %s: %s", dag_id, exc)
            if dag_id not in registered:
                warnings.append(f"cannot read the task instances of {dag_id}: {short_error(exc, 160)}")
                continue
        config = source_of_dag(dag_id, registered.get(dag_id, {}), rendered)
        if config is None:
            warnings.append(f"{dag_id}: its connection is not known until its first run (this version of the "
                            f"DAG factory does not register it); name the source in [binlog] ui_sources to "
                            f"see it now")
        else:
            out.append(config)
    return out, warnings


def discover_sources(environ: Optional[Mapping[str, str]] = None, *, api: Optional[AirflowApi] = None,
                     use_variable: bool = True) -> tuple[list[tuple[SourceConfig, Any]], list[str]]:
    """``[(config, connection or the exception that prevented getting it)]`` sorted by
    connection id and checkpoint key, and warnings for the page (see the module docstring).
    Without ``api``, only the configuration and the environment."""
    configs, warnings = configured_sources(environ, use_variable=use_variable)
    listed: list[str] = []
    discovered: list[SourceConfig] = []
    if api is not None:
        try:
            listed = api_connection_ids(api)
        except ApiError as exc:
            log.warning("cannot list the mysql_binlog connections through the REST API: %s", exc)
            warnings.append("cannot list connections through Airflow's REST API: " + short_error(exc, 160))
        try:
            found_dags, dag_warnings = dag_sources(api)
            discovered = found_dags
            warnings += dag_warnings
        except ApiError as exc:
            log.warning("cannot read the binlog DAGs through the REST API: %s", exc)
            warnings.append("cannot read the binlog DAGs through Airflow's REST API: " + short_error(exc, 160))
    in_env, env_warnings = env_connections(environ)
    warnings += env_warnings
    configured_ids = {c.conn_id for c in configs}
    chosen: dict[tuple[str, str], SourceConfig] = {(c.conn_id, c.key): c for c in configs}
    for config in discovered:
        if config.conn_id not in configured_ids:
            chosen.setdefault((config.conn_id, config.key), config)
    named = {conn_id for conn_id, _key in chosen}
    for conn_id in [*in_env, *listed]:
        if conn_id not in named:
            named.add(conn_id)
            chosen[(conn_id, conn_id)] = SourceConfig(conn_id, origin="connection")
    resolved: dict[str, Any] = {}
    sources = []
    for ident in sorted(chosen):
        config = chosen[ident]
        if config.conn_id not in resolved:
            resolved[config.conn_id] = _connection(config.conn_id, in_env)
        sources.append((config, resolved[config.conn_id]))
    return sources, warnings


def _connection(conn_id: str, in_env: Mapping[str, Any]) -> Any:
    """The connection through the secrets backends; else the one of the ``environ`` given to
    :func:`discover_sources` (not the process's); else the exception."""
    try:
        return resolve_connection(conn_id)
    except Exception as exc:
        return in_env.get(conn_id, exc)


__all__ = ["CONN_TYPE", "DEFAULT_STALL_SECONDS", "FACTORY_DAG_PREFIX", "REGISTERED_KEYS", "SOURCES_ENV",
           "SOURCES_VARIABLE", "STALL_ENV", "SourceConfig", "SourceConfigError", "api_connection_ids",
           "configured_sources", "dag_sources", "default_stall_seconds", "discover_sources", "env_connections",
           "parse_sources", "registered_sources", "rendered_facts", "resolve_connection", "short_error",
           "source_of_dag"]
