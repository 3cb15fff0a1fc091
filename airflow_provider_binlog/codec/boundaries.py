"""Where a binlog file's transactions start, from the event headers alone: the offsets at which
the file can be cut into parts that decode on their own (a part needs only the file's
FORMAT_DESCRIPTION event besides its own events: a transaction carries its table maps)."""
from __future__ import annotations

import struct
from typing import Optional

from . import constants as C

_HEADER = 19
_SIZE = struct.Struct("<I")
_STARTS = frozenset({C.GTID_LOG_EVENT, C.ANONYMOUS_GTID_LOG_EVENT, C.GTID_TAGGED_LOG_EVENT, C.MARIA_GTID_EVENT})
_MARIA_START_ENCRYPTION = 164


def transaction_starts(data: bytes, start: int = 4, stop: Optional[int] = None) -> Optional[list[int]]:
    """The offsets of the GTID events (a transaction's first event, MySQL's and MariaDB's)
    at or after ``start`` and before ``stop``, in ``data`` (a whole binlog file). None when
    the headers cannot be followed: an encrypted file, a header whose size runs past the
    data or is too short to be an event (the decoder then reports what is wrong)."""
    if data[:4] != b"\xfebin":
        return None
    end = len(data) if stop is None else min(stop, len(data))
    out: list[int] = []
    offset = 4
    while offset + _HEADER <= end:
        kind = data[offset + 4]
        if kind == _MARIA_START_ENCRYPTION:
            return None
        size = _SIZE.unpack_from(data, offset + 9)[0]
        if size < _HEADER or offset + size > len(data):
            return None
        if kind in _STARTS and offset >= start:
            out.append(offset)
        offset += size
    return out


def parts(starts: list[int], start: int, end: int, size: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut at transaction ``starts`` into parts of about ``size`` bytes (a
    part holds whole transactions; one larger than ``size`` is a part of its own)."""
    cuts = [start]
    for offset in starts:
        if start < offset < end and offset - cuts[-1] >= size:
            cuts.append(offset)
    cuts.append(end)
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
