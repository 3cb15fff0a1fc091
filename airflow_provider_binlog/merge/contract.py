"""Data-contract options of the merged tables, for every table or per source table
(``schema.table``, ``*`` patterns), all opt-in:

- ``change_columns``: the last change of each row in columns of its own (operation, commit
  time, binlog file and offset, GTID, batch id), named with a prefix (``_cdc_`` by default)
  or one by one;
- ``soft_delete``: a deleted row stays, flagged deleted with its deletion time; a later insert
  of the same key revives it (columns its image lacks are then null, as for any new row);
- ``change_log``: next to a merged table, an append-only table of every change of it in
  binlog order (the change-log layout of tables without a primary key), named with a suffix.

Written as JSON for the merge option ``data_contract`` (:class:`~.options.MergeOptions`)::

    {"default": {"change_columns": true, "soft_delete": true},
     "tables": {"shop.orders": {"change_log": true},
                "shop.audit_*": {"change_columns": {"prefix": "meta_"}, "soft_delete": false}}}

Pure: no Spark here; column types are Spark SQL type names.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..common.options_json import known_keys_object
from .errors import MergeJobError
from .per_table import matching_key, parse_per_table


class ContractError(MergeJobError, ValueError):
    """Data-contract options that cannot be used: an unknown key, a bad column name."""


DEFAULT_PREFIX = "_cdc_"
DEFAULT_CHANGE_LOG_SUFFIX = "__changes"
#: the change columns: their key, name after the prefix, Spark SQL type
CHANGE_FIELDS = (("op", "op", "string"), ("commit_ts", "commit_ts", "timestamp"),
                 ("binlog_file", "binlog_file", "string"), ("binlog_pos", "binlog_pos", "bigint"),
                 ("gtid", "gtid", "string"), ("batch_id", "batch_id", "string"))
SOFT_DELETE_FIELDS = (("flag", "deleted", "boolean"), ("at", "deleted_at", "timestamp"))
_KEYS = frozenset({"change_columns", "soft_delete", "change_log"})
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_SUFFIX = re.compile(r"^[A-Za-z0-9_]{1,64}$")


def _column(name: Any, where: str) -> str:
    if not isinstance(name, str) or not _COLUMN.match(name):
        raise ContractError(f"{where}: column name {name!r} is not letters, digits and _ "
                            f"(not starting with a digit)")
    return name


def _names(value: Any, fields: tuple, where: str) -> Optional[dict[str, str]]:
    """``{key: column name}`` from ``true``/``false``/``{"prefix": ..., "names": {...}}``."""
    if value is None or value is False:
        return None
    if value is True:
        value = {}
    if not isinstance(value, Mapping) or set(value) - {"prefix", "names"}:
        raise ContractError(f"{where}: expected true, false or an object with 'prefix' and/or 'names'")
    prefix = value.get("prefix", DEFAULT_PREFIX)
    given = value.get("names") or {}
    if not isinstance(given, Mapping):
        raise ContractError(f"{where}: 'names' maps {', '.join(k for k, _, _ in fields)} to column names")
    unknown = sorted(set(given) - {k for k, _, _ in fields})
    if unknown:
        raise ContractError(f"{where}: unknown column key(s) {', '.join(unknown)}; known: "
                            f"{', '.join(k for k, _, _ in fields)}")
    return {k: _column(given.get(k, f"{prefix}{suffix}"), where) for k, suffix, _ in fields}


@dataclass(frozen=True)
class TableContract:
    """The options of one table. ``change_columns`` and ``soft_delete`` map each field key
    (see :data:`CHANGE_FIELDS`, :data:`SOFT_DELETE_FIELDS`) to its column name."""

    change_columns: Optional[Mapping[str, str]] = None
    soft_delete: Optional[Mapping[str, str]] = None
    change_log: Optional[str] = None  # the change-log table's suffix

    @classmethod
    def parse(cls, value: Any, where: str = "contract") -> "TableContract":
        if value is None:
            return cls()
        value = known_keys_object(value, _KEYS, where, ContractError)
        log = value.get("change_log")
        if log is True:
            log = {}
        if log is None or log is False:
            suffix = None
        elif isinstance(log, Mapping) and not set(log) - {"suffix"}:
            suffix = log.get("suffix", DEFAULT_CHANGE_LOG_SUFFIX)
            if not isinstance(suffix, str) or not _SUFFIX.match(suffix):
                raise ContractError(f"{where}: change_log suffix {suffix!r} is not letters, digits and _")
        else:
            raise ContractError(f"{where}: change_log is true, false or {{\"suffix\": \"...\"}}")
        out = cls(_names(value.get("change_columns"), CHANGE_FIELDS, f"{where}: change_columns"),
                  _names(value.get("soft_delete"), SOFT_DELETE_FIELDS, f"{where}: soft_delete"), suffix)
        names = [c for c, _ in out.extra_columns()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ContractError(f"{where}: column name(s) {', '.join(dup)} given twice")
        return out

    def extra_columns(self) -> list[tuple[str, str]]:
        """The columns the options add to a merged table: ``(name, Spark SQL type)``."""
        out = []
        for names, fields in ((self.change_columns, CHANGE_FIELDS), (self.soft_delete, SOFT_DELETE_FIELDS)):
            if names:
                out += [(names[k], typ) for k, _, typ in fields]
        return out

    def check_columns(self, source_columns: list[str], table: str) -> None:
        """Refuse options whose columns clash with the source table's columns."""
        lowered = {c.lower() for c in source_columns}
        clash = [n for n, _ in self.extra_columns() if n.lower() in lowered]
        if clash:
            raise ContractError(
                f"{table}: column(s) {', '.join(clash)} of the data-contract options clash with the "
                f"table's own columns; give them other names (a prefix or names in change_columns / "
                f"soft_delete)")

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        if self.change_columns:
            out["change_columns"] = {"names": dict(self.change_columns)}
        if self.soft_delete:
            out["soft_delete"] = {"names": dict(self.soft_delete)}
        if self.change_log:
            out["change_log"] = {"suffix": self.change_log}
        return out


@dataclass(frozen=True)
class DataContract:
    """The options of every table, and per-table ones (``schema.table`` or a ``*`` pattern;
    exact names before patterns) that override it key by key."""

    default: TableContract = field(default_factory=TableContract)
    tables: Mapping[str, TableContract] = field(default_factory=dict)
    given: Mapping[str, frozenset] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any) -> "DataContract":
        return parse_per_table(cls, value, "data contract", "options", ContractError, TableContract.parse)

    def for_table(self, schema: str, table: str) -> TableContract:
        match = matching_key(self.tables, schema, table)
        if match is None:
            return self.default
        own, given = self.tables[match], self.given.get(match, frozenset())
        return TableContract(
            own.change_columns if "change_columns" in given else self.default.change_columns,
            own.soft_delete if "soft_delete" in given else self.default.soft_delete,
            own.change_log if "change_log" in given else self.default.change_log)

    def change_log_suffixes(self) -> set[str]:
        return {c.change_log for c in (self.default, *self.tables.values()) if c.change_log}

    def to_json(self) -> dict:
        def one(c: TableContract, keys: frozenset = _KEYS) -> dict:
            full = {"change_columns": False, "soft_delete": False, "change_log": False, **c.to_json()}
            return {k: v for k, v in full.items() if k in keys}
        return {"default": one(self.default),
                "tables": {n: one(t, self.given.get(n, _KEYS)) for n, t in self.tables.items()}}


__all__ = ["CHANGE_FIELDS", "ContractError", "DataContract", "SOFT_DELETE_FIELDS", "TableContract"]
