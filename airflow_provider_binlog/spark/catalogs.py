"""Which Iceberg catalog the merge writes to, as Spark configuration.

The embedded default is a Hadoop catalog on a directory (``type="hadoop"``, ``warehouse``).
A deployment names its own catalog: the JDBC catalog on PostgreSQL (``type="jdbc"``, ``uri``
``jdbc:postgresql://host:port/db``, ``warehouse``, the driver jar), a REST catalog, Hive, Glue
or Nessie. :class:`IcebergCatalog` checks what each type needs and gives the
``spark.sql.catalog.<name>.*`` settings.

Secrets (a JDBC password, a REST token, ...) stay off the ``spark-submit`` command line: they are
handed to the job in the environment variable :data:`SECRET_CONF_ENV` (JSON), which the merge
job applies to its session before the catalog is first used (:func:`secret_conf_from_env`).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..errors import ProviderError

#: Iceberg's catalog types (``spark.sql.catalog.<name>.type``); another implementation is
#: named by the property ``catalog-impl`` with ``type=None``.
CATALOG_TYPES = ("hadoop", "jdbc", "rest", "hive", "glue", "nessie")
#: The environment variable that carries secret Spark settings to the merge job (JSON object).
SECRET_CONF_ENV = "BINLOG_SPARK_SECRET_CONF"
#: Debian's PostgreSQL JDBC driver (package libpostgresql-jdbc-java).
POSTGRESQL_JDBC_JAR = "/usr/share/java/postgresql.jar"

ICEBERG_SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_WORDS = ("password", "secret", "token", "credential", "private-key", "authorization")
#: Spark's redaction pattern widened to the catalog secrets it would otherwise show in its UI
#: and event log (it redacts secret, password, token and access.key by default).
REDACTION_REGEX = "(?i)secret|password|token|access[.]key|credential|authorization"
_URI_SCHEMES = {"jdbc": ("jdbc:",), "rest": ("http://", "https://"), "hive": ("thrift://",),
                "nessie": ("http://", "https://")}


class CatalogConfigError(ProviderError, ValueError):
    """The Iceberg catalog settings are incomplete or contradict each other."""


def is_secret_property(name: str) -> bool:
    """Whether a catalog property (``jdbc.password``, ``token``, ``s3.secret-access-key``...)
    holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_WORDS)


def _warehouse_location(warehouse: str) -> str:
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", warehouse):
        return warehouse  # a URI: file:/..., s3a://..., hdfs://...
    return os.path.abspath(os.path.expanduser(warehouse))


@dataclass(frozen=True)
class IcebergCatalog:
    """An Iceberg catalog of Spark: ``name`` is how the merge job's SQL names it."""

    name: str = "lake"
    type: Optional[str] = "hadoop"
    uri: Optional[str] = None
    warehouse: Optional[str] = None
    properties: Mapping[str, str] = field(default_factory=dict)
    #: Jars the catalog needs on Spark's classpath besides Iceberg (a JDBC driver).
    jars: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"Iceberg catalog {self.name!r}"
        if not isinstance(self.name, str) or not _IDENTIFIER.match(self.name):
            raise CatalogConfigError(f"the catalog name must be an identifier, not {self.name!r}")
        impl = self.properties.get("catalog-impl")
        if self.type is None and not impl:
            raise CatalogConfigError(f"{where}: give a type ({', '.join(CATALOG_TYPES)}) or the "
                                     "property catalog-impl")
        if self.type is not None and self.type not in CATALOG_TYPES:
            raise CatalogConfigError(f"{where}: unknown type {self.type!r}; known: "
                                     f"{', '.join(CATALOG_TYPES)} (or type None and catalog-impl)")
        if self.type is not None and impl:
            raise CatalogConfigError(f"{where}: type {self.type!r} and catalog-impl {impl!r} "
                                     "exclude each other")
        for reserved in ("type", "uri", "warehouse"):
            if reserved in self.properties:
                raise CatalogConfigError(f"{where}: give {reserved!r} as its own setting, not as a "
                                         "property")
        if self.type in ("hadoop", "jdbc", "glue") and not self.warehouse:
            raise CatalogConfigError(f"{where}: type {self.type!r} needs a warehouse (where the "
                                     "tables' files go)")
        if self.type in _URI_SCHEMES:
            if not self.uri:
                raise CatalogConfigError(f"{where}: type {self.type!r} needs a uri "
                                         f"({' or '.join(s + '...' for s in _URI_SCHEMES[self.type])})")
            if not self.uri.startswith(_URI_SCHEMES[self.type]):
                raise CatalogConfigError(f"{where}: a {self.type} uri starts with "
                                         f"{' or '.join(_URI_SCHEMES[self.type])}, not "
                                         f"{self.uri.split('?')[0]!r}")
        if self.type == "hadoop" and self.uri:
            raise CatalogConfigError(f"{where}: a Hadoop catalog has no uri, only a warehouse")
        if self.uri and re.search(r"[?&;]password=", self.uri, re.IGNORECASE):
            raise CatalogConfigError(f"{where}: put the password in the connection's password "
                                     "(jdbc.password), not in the uri, so it stays out of logs")
        for key, value in self.properties.items():
            if not isinstance(key, str) or not key or not isinstance(value, str):
                raise CatalogConfigError(f"{where}: properties are text keys and values, not "
                                         f"{key!r}: {type(value).__name__}")

    @property
    def embedded(self) -> bool:
        """A Hadoop catalog on a local directory: what the quickstart runs."""
        return self.type == "hadoop" and not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", self.warehouse or "")

    def _settings(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.type:
            out["type"] = self.type
        if self.uri:
            out["uri"] = self.uri
        if self.warehouse:
            out["warehouse"] = _warehouse_location(self.warehouse)
        out.update(self.properties)
        return out

    def spark_conf(self) -> dict[str, str]:
        """The ``spark.sql.catalog.<name>*`` settings, secrets left out."""
        prefix = f"spark.sql.catalog.{self.name}"
        conf = {prefix: ICEBERG_SPARK_CATALOG}
        conf.update({f"{prefix}.{k}": v for k, v in self._settings().items() if not is_secret_property(k)})
        return conf

    def secret_conf(self) -> dict[str, str]:
        """The secret ``spark.sql.catalog.<name>.*`` settings, for :data:`SECRET_CONF_ENV`."""
        prefix = f"spark.sql.catalog.{self.name}"
        return {f"{prefix}.{k}": v for k, v in self._settings().items() if is_secret_property(k)}

    def describe(self) -> str:
        """For logs: type, uri without its query, warehouse."""
        parts = [f"{self.name} ({self.type or self.properties.get('catalog-impl')})"]
        if self.uri:
            parts.append(self.uri.split("?")[0])
        if self.warehouse:
            parts.append(f"warehouse {self.warehouse}")
        return ", ".join(parts)


def catalog_from_settings(name: str, settings: Mapping[str, Any], *, login: Optional[str] = None,
                          password: Optional[str] = None, host: Optional[str] = None,
                          port: Optional[int] = None, schema: Optional[str] = None) -> IcebergCatalog:
    """An :class:`IcebergCatalog` from an Airflow connection's fields: the extra
    (``settings``) holds ``type``, ``uri``, ``warehouse``, ``properties`` and ``jars``; for a
    JDBC catalog the login and password become ``jdbc.user``/``jdbc.password`` and, without
    a ``uri``, host, port and schema make ``jdbc:postgresql://host:port/schema``."""
    settings = dict(settings or {})
    unknown = sorted(set(settings) - {"type", "uri", "warehouse", "properties", "jars"})
    if unknown:
        raise CatalogConfigError(f"Iceberg catalog {name!r}: unknown setting(s) {', '.join(unknown)}; "
                                 "known: type, uri, warehouse, properties, jars")
    kind = settings.get("type", "hadoop")
    properties = settings.get("properties") or {}
    if not isinstance(properties, Mapping):
        raise CatalogConfigError(f"Iceberg catalog {name!r}: properties must be an object")
    properties = {str(k): str(v) for k, v in properties.items()}
    jars = settings.get("jars") or ()
    if isinstance(jars, str):
        jars = [j for j in jars.split(",") if j]
    uri = settings.get("uri")
    if kind == "jdbc":
        if not uri and host:
            uri = f"jdbc:postgresql://{host}:{port or 5432}/{schema or 'postgres'}"
        if login:
            properties.setdefault("jdbc.user", login)
        if password:
            properties.setdefault("jdbc.password", password)
        if not jars and (uri or "").startswith("jdbc:postgresql:") and os.path.exists(POSTGRESQL_JDBC_JAR):
            jars = [POSTGRESQL_JDBC_JAR]
    return IcebergCatalog(name=name, type=kind, uri=uri, warehouse=settings.get("warehouse"),
                          properties=properties, jars=tuple(jars))


def secret_conf_from_env(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The secret Spark settings handed over in :data:`SECRET_CONF_ENV` (none: ``{}``)."""
    text = (os.environ if environ is None else environ).get(SECRET_CONF_ENV)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise CatalogConfigError(f"{SECRET_CONF_ENV} is not JSON") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise CatalogConfigError(f"{SECRET_CONF_ENV} must be a JSON object of text settings")
    return value


__all__ = ["CATALOG_TYPES", "POSTGRESQL_JDBC_JAR", "SECRET_CONF_ENV", "CatalogConfigError",
           "IcebergCatalog", "catalog_from_settings", "is_secret_property", "secret_conf_from_env"]
