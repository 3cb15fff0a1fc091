"""The status variables of a QUERY event: a block of ``code value`` pairs whose value layout
each code sets (SQL mode, character sets, time zone, ...)."""
from __future__ import annotations

from typing import Any

from ._bytes import U16, U32, U64
from .events import QueryStatus


def decode_query_status(raw: bytes) -> QueryStatus:
    """The status variables block of a QUERY (or EXECUTE_LOAD_QUERY) event."""
    kw: dict[str, Any] = {}
    p, n = 0, len(raw)
    while p < n:
        code = raw[p]
        p += 1
        if code == 0:
            kw["flags2"] = U32(raw, p)[0]; p += 4
        elif code == 1:
            kw["sql_mode"] = U64(raw, p)[0]; p += 8
        elif code == 2:
            ln = raw[p]; kw["catalog"] = raw[p + 1:p + 1 + ln].decode("utf-8", "replace"); p += 2 + ln
        elif code == 3:
            kw["auto_increment_increment"] = U16(raw, p)[0]
            kw["auto_increment_offset"] = U16(raw, p + 2)[0]; p += 4
        elif code == 4:
            kw["charset_client"] = U16(raw, p)[0]
            kw["collation_connection"] = U16(raw, p + 2)[0]
            kw["collation_server"] = U16(raw, p + 4)[0]; p += 6
        elif code == 5:
            ln = raw[p]; kw["time_zone"] = raw[p + 1:p + 1 + ln].decode("utf-8", "replace"); p += 1 + ln
        elif code == 6:
            ln = raw[p]; kw["catalog"] = raw[p + 1:p + 1 + ln].decode("utf-8", "replace"); p += 1 + ln
        elif code == 7:
            kw["lc_time_names"] = U16(raw, p)[0]; p += 2
        elif code == 8:
            kw["collation_database"] = U16(raw, p)[0]; p += 2
        elif code == 9:
            kw["table_map_for_update"] = U64(raw, p)[0]; p += 8
        elif code == 10:
            p += 4
        elif code == 11:
            ln = raw[p]; kw["invoker_user"] = raw[p + 1:p + 1 + ln].decode("utf-8", "replace"); p += 1 + ln
            ln = raw[p]; kw["invoker_host"] = raw[p + 1:p + 1 + ln].decode("utf-8", "replace"); p += 1 + ln
        elif code == 12:
            count = raw[p]; p += 1
            names = []
            if count != 254:
                for _ in range(count):
                    z = raw.index(b"\x00", p)
                    names.append(raw[p:z].decode("utf-8", "replace"))
                    p = z + 1
            kw["updated_db_names"] = tuple(names)
        elif code == 13:
            kw["microseconds"] = int.from_bytes(raw[p:p + 3], "little"); p += 3
        elif code == 16:
            kw["explicit_defaults_for_timestamp"] = raw[p]; p += 1
        elif code == 17:
            kw["ddl_xid"] = U64(raw, p)[0]; p += 8
        elif code == 18:
            kw["default_collation_for_utf8mb4"] = U16(raw, p)[0]; p += 2
        elif code == 19:
            kw["sql_require_primary_key"] = raw[p]; p += 1
        elif code == 20:
            kw["default_table_encryption"] = raw[p]; p += 1
        elif code == 128:
            kw["hrnow"] = int.from_bytes(raw[p:p + 3], "little"); p += 3
        elif code == 129:
            kw["xid"] = U64(raw, p)[0]; p += 8
        else:
            # Unknown variable: its length is unknown, keep the rest undecoded. The SQL text
            # does not depend on it (the status block has an explicit length).
            kw["unparsed"] = bytes(raw[p - 1:])
            break
        if p > n:
            raise ValueError("QUERY status variables overrun their block")
    return QueryStatus(**kw)


__all__ = ["decode_query_status"]
