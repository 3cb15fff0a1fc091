"""Bodies of the events that carry GTIDs: MySQL's GTID, ANONYMOUS_GTID, GTID_TAGGED and
PREVIOUS_GTIDS, MariaDB's GTID and GTID_LIST. Each decoder has the signature of an
:class:`~.decoder.EventDecoder` handler and needs none of its state."""
from __future__ import annotations

import uuid as _uuid
from typing import Any

from . import constants as C
from ._bytes import I64, U32, U64, Buffer, read_packed
from .events import Event, EventHeader, GtidEvent, MariadbGtidEvent, MariadbGtidListEvent, PreviousGtidsEvent
from .gtid import MysqlGtidSet, decode_gtid_list, decode_gtid_tagged_event_body


def decode_gtid_event(h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
    commit_flag = data[p]
    sid = bytes(data[p + 1:p + 17])
    gno = I64(data, p + 17)[0]
    p += 25
    kw: dict[str, Any] = {}
    if p < end and data[p] == 2:
        kw["last_committed"] = I64(data, p + 1)[0]
        kw["sequence_number"] = I64(data, p + 9)[0]
        p += 17
    if p + 7 <= end:
        ict = int.from_bytes(data[p:p + 7], "little")
        p += 7
        if ict & (1 << 55):
            ict &= ~(1 << 55)
            oct_ = int.from_bytes(data[p:p + 7], "little")
            p += 7
        else:
            oct_ = ict
        kw["immediate_commit_timestamp"] = ict
        kw["original_commit_timestamp"] = oct_
    if p < end:
        kw["transaction_length"], p = read_packed(data, p)
    if p + 4 <= end:
        isv = U32(data, p)[0]
        p += 4
        if isv & (1 << 31):
            isv &= ~(1 << 31)
            osv = U32(data, p)[0]
            p += 4
        else:
            osv = isv
        kw["immediate_server_version"] = isv
        kw["original_server_version"] = osv
    if p + 8 <= end:
        kw["commit_group_ticket"] = U64(data, p)[0]
    anonymous = h.type_code == C.ANONYMOUS_GTID_LOG_EVENT
    return GtidEvent(h, pos, str(_uuid.UUID(bytes=sid)), gno, None, anonymous, commit_flag, **kw)


def decode_gtid_tagged_event(h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
    f = decode_gtid_tagged_event_body(bytes(data[p:end]))
    return GtidEvent(
        h, pos, f["uuid"], f["gno"], f.get("tag") or None, False, f.get("commit_flag", 0),
        last_committed=f.get("last_committed"), sequence_number=f.get("sequence_number"),
        immediate_commit_timestamp=f.get("immediate_commit_timestamp"),
        original_commit_timestamp=f.get("original_commit_timestamp"),
        transaction_length=f.get("transaction_length"),
        immediate_server_version=f.get("immediate_server_version"),
        original_server_version=f.get("original_server_version"),
        commit_group_ticket=f.get("commit_group_ticket"))


def decode_previous_gtids_event(h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
    return PreviousGtidsEvent(h, pos, MysqlGtidSet.decode(bytes(data[p:end])))


def decode_mariadb_gtid_event(h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
    seq_no = U64(data, p)[0]
    domain_id = U32(data, p + 8)[0]
    flags = data[p + 12]
    q = p + 13
    commit_id = xid = None
    if flags & C.MARIA_FL_GROUP_COMMIT_ID:
        commit_id = U64(data, q)[0]
        q += 8
    elif flags & (C.MARIA_FL_PREPARED_XA | C.MARIA_FL_COMPLETED_XA):
        gl, bl = data[q + 4], data[q + 5]
        xid = bytes(data[q:q + 6 + gl + bl])
    return MariadbGtidEvent(h, pos, domain_id, seq_no, flags, commit_id, xid)


def decode_mariadb_gtid_list_event(h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
    decoded = decode_gtid_list(bytes(data[p:end]))
    return MariadbGtidListEvent(h, pos, decoded.gtids, decoded.flags)


__all__ = ["decode_gtid_event", "decode_gtid_tagged_event", "decode_mariadb_gtid_event",
           "decode_mariadb_gtid_list_event", "decode_previous_gtids_event"]
