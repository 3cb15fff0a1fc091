"""Which tables a load captures: include/exclude patterns on ``schema.table``."""
from __future__ import annotations

import fnmatch
import hashlib
import re
from typing import Iterable, Optional

SYSTEM_SCHEMAS = ("mysql", "sys", "performance_schema", "information_schema")
_SIMPLE_NAME = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")


class TableFilter:
    """Shell-style patterns (``shop.*``, ``*.orders``, ``shop.order_?``) on ``schema.table``.

    A table is captured when it matches an include pattern (all tables when there is none)
    and no exclude pattern. The server's system schemas are never captured.
    """

    def __init__(self, include: Optional[Iterable[str]] = None,
                 exclude: Optional[Iterable[str]] = None) -> None:
        self.include = tuple(include or ())
        self.exclude = tuple(exclude or ())
        for pattern in self.include + self.exclude:
            if "." not in pattern:
                raise ValueError(f"table pattern {pattern!r} must have the form schema.table "
                                 "(wildcards allowed: shop.*, *.orders)")
        self._inc = [re.compile(fnmatch.translate(p)) for p in self.include]
        self._exc = [re.compile(fnmatch.translate(p)) for p in self.exclude]
        self._cache: dict = {}

    def __call__(self, schema: str, table: str) -> bool:
        key = (schema, table)
        hit = self._cache.get(key)
        if hit is None:
            name = f"{schema}.{table}"
            hit = (schema.lower() not in SYSTEM_SCHEMAS
                   and (not self._inc or any(p.match(name) for p in self._inc))
                   and not any(p.match(name) for p in self._exc))
            self._cache[key] = hit
        return hit

    def schemas_possibly_included(self, schema: str) -> bool:
        """Whether some table of ``schema`` may be captured (a schema name may hold dots: every
        split of a pattern at a dot is tried)."""
        return schema.lower() not in SYSTEM_SCHEMAS and (
            not self._inc or any(fnmatch.fnmatchcase(schema, p[:i]) for p in self.include
                                 for i, c in enumerate(p) if c == "."))

    def to_json(self) -> dict:
        return {"include": list(self.include), "exclude": list(self.exclude)}


def iceberg_table_name(schema: str, table: str) -> str:
    """The Iceberg table name of source table ``schema.table`` (within the target namespace).

    Lower-case names made of letters, digits and single inner underscores map to
    ``<schema>__<table>`` (``shop.order_items`` -> ``shop__order_items``). Any other name maps
    to ``<readable schema>__<readable table>__<16 hex digits of a SHA-256 of the exact names>``
    (``Shop.Order Items`` -> ``shop__order_items__1f0c...``). The first form holds exactly one
    ``__``, the second exactly two, so no two source tables share a name; the result is made
    of ``[a-z0-9_]`` only, which every catalog accepts. The table property ``binlog.source``
    records the source name and is checked on every run.
    """
    if _SIMPLE_NAME.fullmatch(schema) and _SIMPLE_NAME.fullmatch(table):
        return f"{schema}__{table}"

    def readable(name: str) -> str:
        return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "x"

    digest = hashlib.sha256(f"{schema}\0{table}".encode("utf-8")).hexdigest()[:16]
    return f"{readable(schema)}__{readable(table)}__{digest}"
