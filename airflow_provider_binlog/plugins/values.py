"""Small conversions the view's readers share: times to aware UTC and ISO text, counts, errors
as one short line."""
from __future__ import annotations

import datetime as dt
from typing import Any, Optional


def utc(value: Any) -> Optional[dt.datetime]:
    """An aware UTC datetime from a datetime or ISO text (``...Z`` too, as the REST API writes
    it); None when it is neither."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        t = value
    else:
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            t = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def iso(value: Any) -> Optional[str]:
    t = utc(value)
    return None if t is None else t.isoformat()


def as_int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def short_error(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, cut at ``limit`` characters."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"
