"""The options of a merge: one typed, frozen :class:`MergeOptions`, checked once when made.

``BinlogMergeOperator`` (and ``make_cdc_dags`` through it) builds one from its keyword
arguments; the merge job receives its JSON as ``--options`` and hands it to
:func:`~airflow_provider_binlog.merge.lake.batch.apply_manifests`. No secret belongs here: the
catalog's secrets and the staging credentials reach the job in its environment.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from .contract import DataContract
from .direct_changes import DEFAULT_DIRECT_MAX_BYTES, DELETES_POSITION, check_direct_deletes
from ..common.options_json import is_number, is_whole, options_object, to_json_text
from .errors import MergeJobError, MergeOptionError
from .iceberg_contract import DEFAULT_MAX_KEY_CHANGE_ROWS, DEFAULT_PARALLEL_TABLES, DEFAULT_STREAM
from .layout import TableLayouts
from .sql import check_identifier

DEFAULT_CATALOG = "lake"
#: The environment variable that carries the checkpoint store's URL to the job when it holds a
#: password (``checkpoint_store`` in the options then has it without the password).
STORE_ENV = "BINLOG_CHECKPOINT_STORE"
DEFAULT_EXPIRE_OLDER_THAN_DAYS = 7.0
DEFAULT_RETAIN_LAST = 10


@dataclass(frozen=True)
class MergeOptions:
    """What the merge job needs besides the manifests.

    ``catalog`` (the Iceberg catalog's name in Spark) and ``namespace`` name the tables
    (``<catalog>.<namespace>.<schema>__<table>``); ``warehouse`` asks for the embedded local
    Spark with a Hadoop catalog there. ``checkpoint_store`` (a URI, see
    ``docs/checkpoint-stores.md``) and ``checkpoint_key`` go together: the store is advanced after
    each batch. ``stream`` names the binlog stream in the namespace's ledger (default: the
    checkpoint key, else ``"default"``; :attr:`ledger_stream`).

    Tables the job creates get ``table_layout`` and, under it, ``table_properties``
    (:attr:`layouts`); ``data_contract`` gives merged tables change columns, soft deletes and
    change logs. ``max_key_change_rows`` limits the changes of keys changed with partial images,
    resolved on the driver; ``parallel_tables`` tables of a batch are planned and committed at
    once; a table whose staged files hold at most ``direct_max_bytes`` (0: none) and whose
    changes are simple is committed without a Spark job, dropping the rows it replaces with
    ``direct_deletes`` (``"position"`` or ``"equality"``). With ``maintenance``, the tables are
    compacted and snapshots older than ``expire_older_than_days`` expired, keeping
    ``retain_last``; with ``maintenance_every_hours``, only tables maintained longer ago.

    A value the merge does not take is refused when the options are made, with a
    :class:`~.errors.MergeOptionError` naming the option (a bad layout or contract: their own
    :class:`~.layout.LayoutError`, :class:`~.contract.ContractError`).
    """

    namespace: str
    catalog: str = DEFAULT_CATALOG
    warehouse: Optional[str] = None
    checkpoint_store: Optional[str] = None
    checkpoint_key: Optional[str] = None
    stream: Optional[str] = None
    table_properties: Mapping[str, str] = field(default_factory=dict)
    table_layout: TableLayouts = field(default_factory=TableLayouts)
    data_contract: DataContract = field(default_factory=DataContract)
    max_key_change_rows: int = DEFAULT_MAX_KEY_CHANGE_ROWS
    parallel_tables: int = DEFAULT_PARALLEL_TABLES
    direct_max_bytes: int = DEFAULT_DIRECT_MAX_BYTES
    direct_deletes: str = DELETES_POSITION
    maintenance: bool = False
    expire_older_than_days: float = DEFAULT_EXPIRE_OLDER_THAN_DAYS
    retain_last: int = DEFAULT_RETAIN_LAST
    maintenance_every_hours: Optional[float] = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _CHECKS[f.name](f.name, getattr(self, f.name))
        if (self.checkpoint_store is None) != (self.checkpoint_key is None):
            given, missing = ("checkpoint_store", "checkpoint_key") if self.checkpoint_key is None else \
                ("checkpoint_key", "checkpoint_store")
            raise MergeOptionError(f"{given} is given without {missing}: a checkpoint store needs a key, "
                                   f"and a key a store", hint=f"give {missing} too, or neither")
        try:
            check_identifier("stream", self.ledger_stream.replace("-", "_").replace(".", "_"))
        except MergeJobError as exc:
            raise MergeOptionError(f"{exc.message} (the stream names the load in the ledger; it defaults "
                                   f"to checkpoint_key)", hint="give a stream of letters, digits, _, - and .") \
                from None
        object.__setattr__(self, "table_properties", dict(self.table_properties))

    @classmethod
    def check(cls, **values: Any) -> None:
        """Check the options ``values`` gives alone, the way :class:`MergeOptions` does (for a
        caller that makes the options later, when the others are known)."""
        unknown = sorted(set(values) - set(_CHECKS))
        if unknown:
            raise MergeOptionError(f"unknown merge option(s) {', '.join(unknown)}")
        for name, value in values.items():
            _CHECKS[name](name, value)

    # -- what follows from them ---------------------------------------------------------------
    @property
    def ledger_stream(self) -> str:
        """The stream's name in the ledger: ``stream``, else the checkpoint key, else ``"default"``."""
        return self.stream or self.checkpoint_key or DEFAULT_STREAM

    @property
    def layouts(self) -> TableLayouts:
        """The layouts of created tables, with ``table_properties`` under the default's."""
        return self.table_layout.with_properties(self.table_properties)

    # -- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["table_properties"] = dict(self.table_properties)
        out["table_layout"] = self.table_layout.to_json()
        out["data_contract"] = self.data_contract.to_json()
        return out

    def to_json_text(self) -> str:
        return to_json_text(self.to_json())

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "MergeOptions":
        """The options of :meth:`to_json`'s form (an object or its JSON text); keys left out
        take their defaults, unknown ones are refused."""
        data = options_object(cls, data, what="merge", error=MergeOptionError)
        if "namespace" not in data:
            raise MergeOptionError("the merge options lack namespace", hint="give the target namespace")
        values = dict(data)
        values["table_layout"] = TableLayouts.parse(values.get("table_layout"))
        values["data_contract"] = DataContract.parse(values.get("data_contract"))
        if values.get("table_properties") is None:
            values.pop("table_properties", None)
        return cls(**values)


def _identifier(dotted: bool) -> Any:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, str):
            raise MergeOptionError(f"{name} must be a string, not {value!r}")
        try:
            check_identifier(name, value, dotted=dotted)
        except MergeJobError as exc:
            raise MergeOptionError(exc.message) from None
    return check


def _optional_text(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise MergeOptionError(f"{name} must be a non-empty string, not {value!r}")


def _whole(minimum: int, what: str = "") -> Any:
    def check(name: str, value: Any) -> None:
        if not is_whole(value) or value < minimum:
            raise MergeOptionError(f"{name} must be a whole number{what} of at least {minimum}, not {value!r}")
    return check


def _direct_max_bytes(name: str, value: Any) -> None:
    if not is_whole(value) or value < 0:
        raise MergeOptionError(f"{name} must be a whole number of bytes (0: off), not {value!r}")


def _days(name: str, value: Any) -> None:
    if not is_number(value) or value < 0:
        raise MergeOptionError(f"{name} must be a number of days, 0 or more, not {value!r}")


def _hours(name: str, value: Any) -> None:
    if value is not None and (not is_number(value) or value <= 0):
        raise MergeOptionError(f"{name} must be a positive number of hours, not {value!r}")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise MergeOptionError(f"{name} must be true or false, not {value!r}")


def _properties(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()):
        raise MergeOptionError(f"{name} must map property names to string values, not {value!r}")


def _of_type(kind: type) -> Any:
    def check(name: str, value: Any) -> None:
        if not isinstance(value, kind):
            raise MergeOptionError(f"{name} must be a {kind.__name__} (see {kind.__module__}), "
                                   f"not {type(value).__name__}")
    return check


def _deletes(name: str, value: Any) -> None:
    check_direct_deletes(value)


_CHECKS: dict[str, Any] = {
    "namespace": _identifier(dotted=True), "catalog": _identifier(dotted=False),
    "warehouse": _optional_text, "checkpoint_store": _optional_text, "checkpoint_key": _optional_text,
    "stream": _optional_text, "table_properties": _properties,
    "table_layout": _of_type(TableLayouts), "data_contract": _of_type(DataContract),
    "max_key_change_rows": _whole(0), "parallel_tables": _whole(1), "direct_max_bytes": _direct_max_bytes,
    "direct_deletes": _deletes, "maintenance": _flag, "expire_older_than_days": _days,
    "retain_last": _whole(1), "maintenance_every_hours": _hours,
}

__all__ = ["DEFAULT_CATALOG", "DEFAULT_EXPIRE_OLDER_THAN_DAYS", "DEFAULT_RETAIN_LAST", "MergeOptions"]


def store_without_password(url: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """``(url without its password, url)`` when the checkpoint store's URL holds a password,
    else ``(url, None)``: the first goes in the options (on the job's command line), the second
    in its environment (:data:`STORE_ENV`)."""
    from urllib.parse import urlsplit, urlunsplit

    if not url or "://" not in url:
        return url, None
    parts = urlsplit(url)
    if not parts.password:
        return url, None
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc)), url
