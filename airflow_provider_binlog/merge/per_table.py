"""Options given for every table and per source table (``schema.table`` or a ``*`` pattern),
as the table layout and the data contract take them. Pure: no Spark here."""
from __future__ import annotations

import fnmatch
import json
from typing import Any, Callable, Iterable, Mapping, Optional, TypeVar

T = TypeVar("T")


def split_per_table(value: Any, what: str, items: str,
                    error: type[Exception]) -> Optional[tuple[Any, Mapping[str, Any]]]:
    """``(default, tables)`` of ``{"default": ..., "tables": {"schema.table": ...}}`` (an object
    or its JSON text); None for nothing given. ``what`` names the options in the errors (``table
    layout``), ``items`` what a table maps to (``layouts``); ``error`` is raised."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise error(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, Mapping) or set(value) - {"default", "tables"}:
        raise error(f"a {what} is an object with 'default' and/or 'tables'")
    tables = value.get("tables") or {}
    if not isinstance(tables, Mapping):
        raise error(f"'tables' maps schema.table (or patterns) to {items}")
    for name in tables:
        if not isinstance(name, str) or "." not in name:
            raise error(f"{what} key {name!r} is not schema.table")
    return value.get("default"), tables


def parse_per_table(cls: Callable[..., T], value: Any, what: str, items: str, error: type[Exception],
                    parse_one: Callable[[Any, str], Any]) -> T:
    """``cls(default, tables, given)`` of the options ``value`` (see :func:`split_per_table`),
    each table's options read by ``parse_one(options, where)``; ``given`` holds the keys each
    table sets, so that an unset key falls back to the default. ``cls()`` for nothing given."""
    split = split_per_table(value, what, items, error)
    if split is None:
        return cls()
    default, tables = split
    return cls(parse_one(default, "default"), {n: parse_one(v, n) for n, v in tables.items()},
               {n: frozenset(v or ()) for n, v in tables.items()})


def matching_key(keys: Iterable[str], schema: str, table: str) -> Optional[str]:
    """The key naming ``schema.table``: the exact name, else the first pattern matching it."""
    name = f"{schema}.{table}"
    keys = list(keys)
    return name if name in keys else next((p for p in keys if fnmatch.fnmatchcase(name, p)), None)


__all__ = ["matching_key", "parse_per_table", "split_per_table"]
