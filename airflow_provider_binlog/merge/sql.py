"""Spark SQL text: quoted identifiers and string literals, checked names."""
from __future__ import annotations

import re

from .errors import MergeJobError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def check_identifier(kind: str, value: str, dotted: bool = False) -> None:
    parts = value.split(".") if dotted else [value]
    if not value or not all(_IDENT.fullmatch(p) for p in parts):
        raise MergeJobError(f"{kind} {value!r} must be {'dot-separated ' if dotted else ''}"
                            f"identifier{'s' if dotted else ''} ([A-Za-z_][A-Za-z0-9_]*)")


__all__ = ["check_identifier", "literal", "quote"]
