"""The progress a resumable watermark snapshot seals (after the chunk that brings it to about a
million rows staged since the last seal, or 30 seconds after it), as JSON: how far each table was
read, its chunk keys tagged with their types."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Optional

from ..snapshot import SnapshotError
from .chunks import Table


def tables_progress(tables: dict[tuple[str, str], Table]) -> dict:
    """How far each table was read, as JSON, by ``schema NUL table``."""
    return {f"{k[0]}\x00{k[1]}": {"done_upto": encode_key(t.done_upto), "finished": t.finished,
                                    "rows": t.rows, "chunks": t.chunks, "read_from": t.read_from}
            for k, t in tables.items()}


def restore_tables_progress(tables: dict[tuple[str, str], Table], saved: dict) -> None:
    """Set each table's progress to that sealed (:func:`tables_progress`); a table sealed that is
    no longer selected stops the resume."""
    for name, info in saved.items():
        t = tables.get(tuple(name.split("\x00", 1)))  # type: ignore[arg-type]
        if t is None:
            raise SnapshotError(f"{name.replace(chr(0), '.')} is no longer selected or gone; the "
                                f"snapshot to resume cannot go on: start it over")
        t.done_upto = decode_key(info["done_upto"])
        t.finished, t.rows, t.chunks = info["finished"], info["rows"], info["chunks"]
        read_from = info.get("read_from")
        t.read_from = (read_from[0], int(read_from[1])) if read_from else None


def encode_key(key: Optional[tuple]) -> Optional[list]:
    """A chunk key as JSON: each value tagged with its type."""
    if key is None:
        return None
    out: list = []
    for v in key:
        if isinstance(v, bool) or v is None:
            raise SnapshotError(f"cannot record the chunk key value {v!r}")
        if isinstance(v, int):
            out.append(["i", v])
        elif isinstance(v, Decimal):
            out.append(["d", str(v)])
        elif isinstance(v, dt.datetime):
            out.append(["ts", v.isoformat()])
        elif isinstance(v, dt.date):
            out.append(["date", v.isoformat()])
        elif isinstance(v, dt.timedelta):
            out.append(["td", v.days, v.seconds, v.microseconds])
        elif isinstance(v, (bytes, bytearray)):
            out.append(["b", bytes(v).hex()])
        else:
            out.append(["s", str(v)])
    return out


def decode_key(data: Optional[list]) -> Optional[tuple]:
    """A chunk key from its JSON form (:func:`encode_key`)."""
    if data is None:
        return None
    out: list = []
    for item in data:
        tag = item[0]
        out.append(item[1] if tag in ("i", "s") else Decimal(item[1]) if tag == "d"
                   else dt.datetime.fromisoformat(item[1]) if tag == "ts"
                   else dt.date.fromisoformat(item[1]) if tag == "date"
                   else dt.timedelta(days=item[1], seconds=item[2], microseconds=item[3]) if tag == "td"
                   else bytes.fromhex(item[1]))
    return tuple(out)
