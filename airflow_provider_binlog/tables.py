"""Which tables a load captures: include/exclude patterns on ``schema.table``."""
from __future__ import annotations

import fnmatch
import re
from typing import Iterable, Optional

SYSTEM_SCHEMAS = ("mysql", "sys", "performance_schema", "information_schema")


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
        return schema.lower() not in SYSTEM_SCHEMAS and (
            not self._inc or any(fnmatch.fnmatch(schema, p.split(".", 1)[0]) for p in self.include))

    def to_json(self) -> dict:
        return {"include": list(self.include), "exclude": list(self.exclude)}
