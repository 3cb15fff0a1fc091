"""Small conversions the view's readers share: times to aware UTC and ISO text, counts."""
from __future__ import annotations

import datetime as dt
from typing import Any, Optional


def utc(value: Any) -> Optional[dt.datetime]:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        t = value
    else:
        try:
            t = dt.datetime.fromisoformat(str(value))
        except ValueError:
            return None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def iso(value: Optional[dt.datetime]) -> Optional[str]:
    return None if value is None else utc(value).isoformat()


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
