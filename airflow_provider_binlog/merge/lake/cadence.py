"""Whether a table's maintenance is due (``binlog.maintained-at`` against a cadence in hours)."""

from __future__ import annotations

import datetime as dt
from typing import Iterable, Optional

from ..iceberg_contract import PROP_MAINTAINED_AT
from .base import Lake


def is_due(stamp: Optional[str], now: dt.datetime, every_hours: Optional[float]) -> bool:
    """Whether a table maintained at ``stamp`` is to be maintained now (always without a cadence)."""
    if every_hours is None:
        return True
    try:
        at = dt.datetime.fromisoformat(stamp) if stamp else None
    except ValueError:
        return True
    return at is None or now - at >= dt.timedelta(hours=every_hours)


def maintenance_due(lake: Lake, tables: Iterable[str], every_hours: Optional[float]) -> list[str]:
    """The ``tables`` that exist and whose maintenance is due now."""
    now = dt.datetime.now(dt.timezone.utc)
    out = []
    for name in tables:
        properties = lake.properties(name)
        if properties and is_due(properties.get(PROP_MAINTAINED_AT), now, every_hours):
            out.append(name)
    return out


def not_due(lake: Lake, tables: Iterable[str]) -> list[dict]:
    """The maintenance report of ``tables`` maintained recently enough: each skipped, with when."""
    return [{"table": name, "skipped": f"maintained at {lake.properties(name).get(PROP_MAINTAINED_AT)}"}
            for name in tables]


__all__ = ["is_due", "maintenance_due", "not_due"]
