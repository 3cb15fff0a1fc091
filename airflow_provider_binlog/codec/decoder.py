"""The event decoder: complete event bytes in, one typed event out.

:class:`EventDecoder` holds the state a binlog needs to be read (the current
FORMAT_DESCRIPTION, the checksum algorithm, the table maps seen so far and their compiled row
decoders) and performs no I/O. Framing — cutting a file or a stream into events — lives in
:mod:`.stream`; a replication client hands each network packet's event to :meth:`decode`.
"""
from __future__ import annotations

import re
import zlib
from typing import Any, Callable, Optional

from . import constants as C
from ._bytes import F64, HEADER, U16, U32, U64, Buffer, read_packed
from .binary_decimal import decode_binary_decimal as decode_decimal
from .gtid import Flavor
from .errors import (
    BinlogError,
    ChecksumMismatchError,
    CompressionError,
    CorruptEventError,
    EncryptedBinlogError,
    MissingTableMapError,
    UnknownEventError,
    UnsupportedBinlogVersionError,
)
from .events import (
    ABSENT,
    AnnotateRowsEvent,
    BinlogCheckpointEvent,
    Event,
    EventHeader,
    ExecuteLoadQueryEvent,
    FormatDescriptionEvent,
    HeartbeatEvent,
    IncidentEvent,
    IntvarEvent,
    JsonDiffs,
    QueryStatus,
    LoadDataBlockEvent,
    QueryEvent,
    RandEvent,
    RawEvent,
    RotateEvent,
    RowsEvent,
    RowsQueryEvent,
    StartEncryptionEvent,
    StopEvent,
    TableMap,
    TableMapEvent,
    TransactionPayloadEvent,
    UserVarEvent,
    XaPrepareEvent,
    XidEvent,
)
from .gtid_events import (decode_gtid_event, decode_gtid_tagged_event, decode_mariadb_gtid_event,
                          decode_mariadb_gtid_list_event, decode_previous_gtids_event)
from .query_status import decode_query_status
from .rows import (
    DECODE_ERRORS,
    DeferredRows,
    compile_columns_decoder,
    compile_image_decoder,
    compile_rows_decoder,
    row_data_error,
    rows_end_mismatch,
)
from .schema import SchemaSource
from .table_map import parse_table_map

# Post-header lengths used before any FORMAT_DESCRIPTION is seen (MySQL 5.6+/MariaDB defaults).
_DEFAULT_POST_HEADER = {
    C.QUERY_EVENT: 13, C.ROTATE_EVENT: 8, C.TABLE_MAP_EVENT: 8, C.EXECUTE_LOAD_QUERY_EVENT: 26,
    C.WRITE_ROWS_EVENT_V1: 8, C.UPDATE_ROWS_EVENT_V1: 8, C.DELETE_ROWS_EVENT_V1: 8,
    C.WRITE_ROWS_EVENT: 10, C.UPDATE_ROWS_EVENT: 10, C.DELETE_ROWS_EVENT: 10,
    C.PARTIAL_UPDATE_ROWS_EVENT: 10, C.BEGIN_LOAD_QUERY_EVENT: 4, C.APPEND_BLOCK_EVENT: 4,
    C.DELETE_FILE_EVENT: 4,
}
_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
# MySQL 5.1.x/5.2.x "a_drop5p"/"a_drop6p" development servers numbered events 16-22 differently.
_DROP_VERSION_RE = re.compile(r"^5\.[12]\.\d-a_drop[56]p")
_DROP_PERMUTATION = {16: C.TABLE_MAP_EVENT, 17: C.PRE_GA_WRITE_ROWS_EVENT, 18: C.PRE_GA_UPDATE_ROWS_EVENT,
                     19: C.PRE_GA_DELETE_ROWS_EVENT, 20: C.XID_EVENT, 21: C.BEGIN_LOAD_QUERY_EVENT,
                     22: C.EXECUTE_LOAD_QUERY_EVENT}
_PRE_GA_ROWS = (C.PRE_GA_WRITE_ROWS_EVENT, C.PRE_GA_UPDATE_ROWS_EVENT, C.PRE_GA_DELETE_ROWS_EVENT)
_STRUCT_ERRORS = DECODE_ERRORS


def _server_supports_checksum(version: str) -> bool:
    m = _VERSION_RE.match(version)
    if not m:
        return False
    v = tuple(int(x) for x in m.groups())
    if Flavor.of_server_version(version) is Flavor.MARIADB:
        return v >= (5, 3, 0)
    return v >= (5, 6, 1)


def _uncompress_mariadb(buf: Buffer, p: int, end: int) -> bytes:
    """MariaDB log_bin_compress payload: header byte 0x8L (L = length-of-length), big-endian
    uncompressed length, then a zlib stream."""
    head = buf[p]
    if head & 0xE0 != 0x80:
        raise CompressionError(f"unknown compression header 0x{head:02x}")
    lenlen = head & 0x07
    if not 1 <= lenlen <= 4:
        raise CompressionError(f"invalid compressed length size {lenlen}")
    size = int.from_bytes(buf[p + 1:p + 1 + lenlen], "big")
    try:
        data = zlib.decompress(bytes(buf[p + 1 + lenlen:end]))
    except zlib.error as exc:
        raise CompressionError(f"zlib: {exc}") from None
    if len(data) != size:
        raise CompressionError(f"decompressed {len(data)} bytes, header says {size}")
    return data


class EventDecoder:
    """Decode complete events, one at a time, in binlog order.

    :param source: a label for errors (usually the binlog file name).
    :param verify_checksum: check CRC32 trailers when the binlog has them.
    :param checksum_alg: the checksum algorithm when known before a FORMAT_DESCRIPTION arrives
        (a replication stream starts with an artificial ROTATE); None learns it from the FDE.
    :param table_filter: ``(schema, table) -> bool``; rows of tables for which it returns
        False are not decoded (``RowsEvent.skipped``).
    :param schemas: table schemas for binlogs without column names (see :mod:`.schema`).
    :param from_stream: True for events read from a server's replication stream (which
        decrypts encrypted binlogs before sending them).
    :param defer_rows: leave the rows of rows events undecoded (``RowsEvent.deferred``) for
        the consumer to decode straight into columns; PARTIAL_UPDATE_ROWS events are decoded
        as usual.
    """

    def __init__(self, source: Optional[str] = None, *, verify_checksum: bool = True,
                 checksum_alg: Optional[int] = None,
                 table_filter: Optional[Callable[[str, str], bool]] = None,
                 schemas: SchemaSource = None, from_stream: bool = False,
                 defer_rows: bool = False) -> None:
        self.source = source
        self.defer_rows = defer_rows
        self.verify_checksum = verify_checksum
        self.checksum_alg = checksum_alg
        self.table_filter = table_filter
        self.schemas = schemas
        self.from_stream = from_stream
        self.fde: Optional[FormatDescriptionEvent] = None
        self.flavor: Optional[Flavor] = None
        self.table_maps: dict[int, TableMap] = {}
        self._excluded: set[int] = set()
        self._row_decoders: dict[Any, Callable[..., Any]] = {}
        self._post_header = dict(_DEFAULT_POST_HEADER)
        self._type_map: dict[int, int] = {}
        self._handlers: dict[int, Callable[[EventHeader, int, Buffer, int, int], Event]] = {
            C.FORMAT_DESCRIPTION_EVENT: self._format_description,
            C.START_EVENT_V3: self._start_v3,
            C.QUERY_EVENT: self._query,
            C.MARIA_QUERY_COMPRESSED_EVENT: self._query,
            C.STOP_EVENT: self._stop,
            C.ROTATE_EVENT: self._rotate,
            C.INTVAR_EVENT: self._intvar,
            C.RAND_EVENT: self._rand,
            C.USER_VAR_EVENT: self._user_var,
            C.XID_EVENT: self._xid,
            C.INCIDENT_EVENT: self._incident,
            C.HEARTBEAT_LOG_EVENT: self._heartbeat,
            C.HEARTBEAT_LOG_EVENT_V2: self._heartbeat_v2,
            C.ROWS_QUERY_LOG_EVENT: self._rows_query,
            C.GTID_LOG_EVENT: decode_gtid_event,
            C.ANONYMOUS_GTID_LOG_EVENT: decode_gtid_event,
            C.GTID_TAGGED_LOG_EVENT: decode_gtid_tagged_event,
            C.PREVIOUS_GTIDS_LOG_EVENT: decode_previous_gtids_event,
            C.TABLE_MAP_EVENT: self._table_map,
            C.TRANSACTION_PAYLOAD_EVENT: self._transaction_payload,
            C.XA_PREPARE_LOG_EVENT: self._xa_prepare,
            C.MARIA_ANNOTATE_ROWS_EVENT: self._annotate_rows,
            C.MARIA_BINLOG_CHECKPOINT_EVENT: self._binlog_checkpoint,
            C.MARIA_GTID_EVENT: decode_mariadb_gtid_event,
            C.MARIA_GTID_LIST_EVENT: decode_mariadb_gtid_list_event,
            C.MARIA_START_ENCRYPTION_EVENT: self._start_encryption,
            C.APPEND_BLOCK_EVENT: self._load_block,
            C.BEGIN_LOAD_QUERY_EVENT: self._load_block,
            C.DELETE_FILE_EVENT: self._load_block,
            C.EXECUTE_LOAD_QUERY_EVENT: self._execute_load_query,
        }
        for code in C.ROWS_EVENT_TYPES:
            self._handlers[code] = self._rows
        for code in _PRE_GA_ROWS:
            # Pre-GA (5.1 development) rows carry the storage engine's record format, which
            # cannot be decoded without the table definition: kept undecoded.
            self._handlers[code] = self._raw
        for code in (C.LOAD_EVENT, C.SLAVE_EVENT, C.CREATE_FILE_EVENT, C.EXEC_LOAD_EVENT,
                     C.NEW_LOAD_EVENT, C.IGNORABLE_LOG_EVENT, C.TRANSACTION_CONTEXT_EVENT,
                     C.VIEW_CHANGE_EVENT):
            self._handlers[code] = self._raw

    # ------------------------------------------------------------------ entry point
    def decode(self, data: bytes, pos: int, *, has_checksum: Optional[bool] = None) -> Event:
        """Decode one complete event (header included). ``pos`` is its start offset."""
        if len(data) < C.HEADER_LEN:
            raise CorruptEventError(f"event of {len(data)} bytes is shorter than the 19-byte header",
                                    source=self.source, offset=pos)
        ts, type_code, server_id, size, log_pos, flags = HEADER.unpack_from(data, 0)
        if size != len(data):
            raise CorruptEventError(f"event header says {size} bytes but {len(data)} were given",
                                    source=self.source, offset=pos)
        header = EventHeader(ts, type_code, server_id, size, log_pos, flags)
        if type_code == C.FORMAT_DESCRIPTION_EVENT:
            crc = None  # decided by the FDE itself
        elif has_checksum is not None:
            crc = has_checksum
        else:
            crc = self.checksum_alg == C.CHECKSUM_CRC32
        end = len(data)
        if crc:
            end -= 4
            if self.verify_checksum:
                self._check_crc(data, pos, type_code)
        handler = self._handlers.get(self._type_map.get(type_code, type_code) if self._type_map else type_code)
        try:
            if handler is None:
                if flags & C.LOG_EVENT_IGNORABLE_F:
                    return RawEvent(header, pos, bytes(data[C.HEADER_LEN:end]))
                raise UnknownEventError(
                    f"unknown event type {type_code} (not flagged LOG_EVENT_IGNORABLE_F)")
            return handler(header, pos, data, C.HEADER_LEN, end)
        except BinlogError as exc:
            raise exc.at(self.source, pos)
        except _STRUCT_ERRORS as exc:
            raise CorruptEventError(
                f"malformed {header.type_name} event ({size} bytes): {exc}",
                source=self.source, offset=pos) from None

    def _check_crc(self, data: Buffer, pos: int, type_code: int) -> None:
        stored = U32(data, len(data) - 4)[0]
        if type_code == C.FORMAT_DESCRIPTION_EVENT and data[17] & C.LOG_EVENT_BINLOG_IN_USE_F:
            # The server sets "binlog in use" after computing the FDE's checksum.
            data = bytearray(data)
            data[17] &= ~C.LOG_EVENT_BINLOG_IN_USE_F
        actual = zlib.crc32(memoryview(data)[:-4])
        if stored != actual:
            raise ChecksumMismatchError(
                f"CRC32 mismatch in {C.event_type_name(type_code)} event: stored 0x{stored:08x}, "
                f"computed 0x{actual:08x}", source=self.source, offset=pos)

    def _post(self, type_code: int) -> int:
        return self._post_header.get(type_code, 0)

    # ------------------------------------------------------------------ control events
    def _format_description(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        version = U16(data, p)[0]
        if version != 4:
            raise UnsupportedBinlogVersionError(f"binlog format version {version}")
        server_version = bytes(data[p + 2:p + 52]).split(b"\x00", 1)[0].decode("ascii", "replace")
        create_ts = U32(data, p + 52)[0]
        header_len = data[p + 56]
        q = p + 57
        alg = None
        tail = len(data)
        if _server_supports_checksum(server_version):
            alg = data[len(data) - 5]
            tail = len(data) - 5
            if alg == C.CHECKSUM_CRC32 and self.verify_checksum:
                self._check_crc(data, pos, h.type_code)
        post = bytes(data[q:tail])
        if header_len != C.HEADER_LEN:
            raise UnsupportedBinlogVersionError(f"event header length {header_len} (expected 19)")
        self.checksum_alg = alg if alg is not None else C.CHECKSUM_OFF
        self._post_header = {i + 1: n for i, n in enumerate(post)}
        self._type_map = {}
        if _DROP_VERSION_RE.match(server_version):
            self._type_map = dict(_DROP_PERMUTATION)
            self._post_header.update({new: self._post_header.get(old, 0)
                                      for old, new in _DROP_PERMUTATION.items()})
        self.flavor = Flavor.of_server_version(server_version)
        self.table_maps.clear()
        self._excluded.clear()
        self._row_decoders.clear()
        fde = FormatDescriptionEvent(h, pos, version, server_version, create_ts, header_len, post, alg)
        self.fde = fde
        return fde

    def _start_v3(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        version = U16(data, p)[0]
        raise UnsupportedBinlogVersionError(
            f"binlog format version {version} (START_EVENT_V3: MySQL 3.23/4.x); only v4 is supported")

    def _stop(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return StopEvent(h, pos)

    def _rotate(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        if self._post(C.ROTATE_EVENT) >= 8 or self.fde is None:
            position = U64(data, p)[0]
            p += 8
        else:
            position = 4
        return RotateEvent(h, pos, position, bytes(data[p:end]).decode("utf-8", "replace"))

    def _xid(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return XidEvent(h, pos, U64(data, p)[0])

    def _intvar(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return IntvarEvent(h, pos, data[p], U64(data, p + 1)[0])

    def _rand(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return RandEvent(h, pos, U64(data, p)[0], U64(data, p + 8)[0])

    def _user_var(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        n = U32(data, p)[0]
        name = bytes(data[p + 4:p + 4 + n]).decode("utf-8", "replace")
        p += 4 + n
        is_null = bool(data[p])
        p += 1
        if is_null:
            return UserVarEvent(h, pos, name, True, None, None, None, None)
        vtype = data[p]
        charset = U32(data, p + 1)[0]
        vlen = U32(data, p + 5)[0]
        p += 9
        raw = bytes(data[p:p + vlen])
        if len(raw) != vlen:
            raise ValueError("USER_VAR value overruns the event")
        p += vlen
        flags = data[p] if p < end else None
        if vtype == 1:
            value = F64(raw, 0)[0]
        elif vtype == 2:
            value = int.from_bytes(raw, "little", signed=not (flags or 0) & 1)
        elif vtype == 4:
            value = decode_decimal(raw, 2, raw[0], raw[1])[0]
        else:
            from .charsets import codec_for_collation
            try:
                codec = codec_for_collation(charset, self.flavor)
            except KeyError:
                codec = "utf-8"
            value = raw.decode(codec) if codec else raw
        return UserVarEvent(h, pos, name, False, vtype, charset, value, flags)

    def _incident(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        kind = U16(data, p)[0]
        n = data[p + 2] if p + 2 < end else 0
        return IncidentEvent(h, pos, kind, bytes(data[p + 3:p + 3 + n]).decode("utf-8", "replace"))

    def _heartbeat(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return HeartbeatEvent(h, pos, bytes(data[p:end]).decode("utf-8", "replace"), h.log_pos, 1)

    def _heartbeat_v2(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        fields = self._tlv_fields(data, p, end)
        name = fields.get(1, b"").decode("utf-8", "replace")
        position = read_packed(fields[2], 0)[0] if 2 in fields else h.log_pos
        return HeartbeatEvent(h, pos, name, position, 2)

    @staticmethod
    def _tlv_fields(data: Buffer, p: int, end: int) -> dict[int, Any]:
        """Type-length-value fields (packed ints) ending with type 0, as in TRANSACTION_PAYLOAD."""
        fields: dict[int, Any] = {}
        while p < end:
            ftype, p = read_packed(data, p)
            if ftype == 0:
                fields[0] = p
                break
            length, p = read_packed(data, p)
            if p + length > end:
                raise ValueError("field overruns the event")
            fields[ftype] = bytes(data[p:p + length])
            p += length
        return fields

    # ------------------------------------------------------------------ statements
    def _query_common(self, h: EventHeader, data: Buffer, p: int, end: int,
                      post_len: int) -> tuple[int, int, str, int, QueryStatus, int]:
        thread_id = U32(data, p)[0]
        exec_time = U32(data, p + 4)[0]
        db_len = data[p + 8]
        error_code = U16(data, p + 9)[0]
        status_len = U16(data, p + 11)[0] if post_len >= 13 else 0
        q = p + post_len
        status = decode_query_status(bytes(data[q:q + status_len]))
        q += status_len
        schema = bytes(data[q:q + db_len]).decode("utf-8", "replace")
        q += db_len + 1
        if q > end:
            raise ValueError("QUERY event is shorter than its header fields")
        return thread_id, exec_time, schema, error_code, status, q

    def _query(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        post_len = self._post(C.QUERY_EVENT) or 13
        thread_id, exec_time, schema, error_code, status, q = self._query_common(h, data, p, end, post_len)
        compressed = h.type_code == C.MARIA_QUERY_COMPRESSED_EVENT
        raw = _uncompress_mariadb(data, q, end) if compressed else bytes(data[q:end])
        return QueryEvent(h, pos, thread_id, exec_time, schema, error_code, status,
                          raw.decode("utf-8", "surrogateescape"), compressed)

    def _execute_load_query(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        thread_id, exec_time, schema, error_code, status, q = self._query_common(
            h, data, p, end, self._post(C.EXECUTE_LOAD_QUERY_EVENT) or 26)
        file_id, start_pos, end_pos = U32(data, p + 13)[0], U32(data, p + 17)[0], U32(data, p + 21)[0]
        return ExecuteLoadQueryEvent(h, pos, thread_id, exec_time, schema, error_code, status,
                                     bytes(data[q:end]).decode("utf-8", "surrogateescape"),
                                     file_id, start_pos, end_pos, data[p + 25])

    def _load_block(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return LoadDataBlockEvent(h, pos, U32(data, p)[0], bytes(data[p + 4:end]))

    def _rows_query(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return RowsQueryEvent(h, pos, bytes(data[p + 1:end]).decode("utf-8", "surrogateescape"))

    def _annotate_rows(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return AnnotateRowsEvent(h, pos, bytes(data[p:end]).decode("utf-8", "surrogateescape"))

    def _raw(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        return RawEvent(h, pos, bytes(data[p:end]))

    def _xa_prepare(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        one_phase = bool(data[p])
        fmt, gl, bl = U32(data, p + 1)[0], U32(data, p + 5)[0], U32(data, p + 9)[0]
        q = p + 13
        return XaPrepareEvent(h, pos, one_phase, fmt, bytes(data[q:q + gl]), bytes(data[q + gl:q + gl + bl]))

    # ------------------------------------------------------------------ MariaDB control events
    def _binlog_checkpoint(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        n = U32(data, p)[0]
        return BinlogCheckpointEvent(h, pos, bytes(data[p + 4:p + 4 + n]).decode("utf-8", "replace"))

    def _start_encryption(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        if not self.from_stream:
            raise EncryptedBinlogError("START_ENCRYPTION event: the rest of this binlog is encrypted")
        return StartEncryptionEvent(h, pos, data[p], U32(data, p + 1)[0], bytes(data[p + 5:p + 17]))

    # ------------------------------------------------------------------ tables and rows
    def _table_map(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        id_len = 4 if self._post(C.TABLE_MAP_EVENT) == 6 else 6
        tm = parse_table_map(data, p, end, id_len, schemas=self.schemas, flavor=self.flavor)
        old = self.table_maps.get(tm.table_id)
        if old != tm:
            self.table_maps[tm.table_id] = tm
            self._row_decoders = {k: v for k, v in self._row_decoders.items() if k[0] != tm.table_id}
        if self.table_filter is not None and not self.table_filter(tm.schema, tm.table):
            self._excluded.add(tm.table_id)
        else:
            self._excluded.discard(tm.table_id)
        return TableMapEvent(h, pos, tm)

    def _image_decoder(self, tm: TableMap, present: int, partial: bool = False) -> Callable[..., Any]:
        key = (tm.table_id, present, partial)
        fn = self._row_decoders.get(key)
        if fn is None:
            fn = compile_image_decoder(tm.columns, present, partial_json=partial)
            self._row_decoders[key] = fn
        return fn

    def _rows_decoder(self, tm: TableMap, present: int, present_after: Optional[int]) -> Callable[..., Any]:
        key = (tm.table_id, "rows", present, present_after)
        fn = self._row_decoders.get(key)
        if fn is None:
            fn = compile_rows_decoder(tm.columns, present, present_after)
            self._row_decoders[key] = fn
        return fn

    def _rows(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        kind, version, compressed = C.ROWS_EVENT_TYPES[h.type_code]
        post_len = self._post(h.type_code)
        id_len = 4 if post_len == 6 else 6
        table_id = int.from_bytes(data[p:p + id_len], "little")
        flags = U16(data, p + id_len)[0]
        p += id_len + 2
        extra = b""
        if version == 2 and post_len != 8:
            extra_len = U16(data, p)[0]
            if extra_len < 2:
                raise ValueError(f"invalid extra row info length {extra_len}")
            extra = bytes(data[p + 2:p + extra_len])
            p += extra_len
        tm = self.table_maps.get(table_id)
        if tm is None:
            if table_id == 0xFFFFFF and flags & 1:  # dummy event closing a statement
                return RowsEvent(h, pos, kind, table_id, None, flags, (), extra, True, version, compressed)
            raise MissingTableMapError(f"rows event for table id {table_id} without a TABLE_MAP")
        if table_id in self._excluded:
            return RowsEvent(h, pos, kind, table_id, tm, flags, (), extra, True, version, compressed,
                             h.type_code == C.PARTIAL_UPDATE_ROWS_EVENT)
        ncols, p = read_packed(data, p)
        if ncols != len(tm.columns):
            raise CorruptEventError(
                f"rows event for {tm.qualified_name} has {ncols} columns, its TABLE_MAP has {len(tm.columns)}")
        nb = (ncols + 7) // 8
        present = int.from_bytes(data[p:p + nb], "little")
        p += nb
        present_after = present
        if kind == "update":
            present_after = int.from_bytes(data[p:p + nb], "little")
            p += nb
        if compressed:
            data = _uncompress_mariadb(data, p, end)
            p, end = 0, len(data)
        elif not isinstance(data, bytes):
            data = bytes(data)
        partial = h.type_code == C.PARTIAL_UPDATE_ROWS_EVENT
        if present == 0 and (kind != "update" or present_after == 0) and p < end:
            # images of zero columns take zero bytes: row data here cannot belong to them
            raise CorruptEventError(
                f"rows event for {tm.qualified_name} logs no columns but carries {end - p} bytes of rows")
        if self.defer_rows and not partial:
            after = present_after if kind == "update" else None
            key = (tm.table_id, "columns", present, after)
            fn = self._row_decoders.get(key)
            if fn is None:
                fn = self._row_decoders[key] = compile_columns_decoder(tm.columns, present, after)
            deferred = DeferredRows(tm, data, p, end, present, after, self.flavor, self.source, pos, fn)
            return RowsEvent(h, pos, kind, table_id, tm, flags, (), extra, False, version, compressed,
                             partial, deferred)
        rows = self._decode_rows(tm, kind, data, p, end, present, present_after, partial)
        return RowsEvent(h, pos, kind, table_id, tm, flags, rows, extra, False, version, compressed, partial)

    def _decode_rows(self, tm: TableMap, kind: str, data: bytes, p: int, end: int, present: int,
                     present_after: int, partial: bool) -> tuple[Any, ...]:
        try:
            return self._decode_rows_unchecked(tm, kind, data, p, end, present, present_after, partial)
        except (CorruptEventError, *_STRUCT_ERRORS) as exc:
            raise row_data_error(tm, self.flavor, exc) from None

    def _decode_rows_unchecked(self, tm: TableMap, kind: str, data: bytes, p: int, end: int, present: int,
                               present_after: int, partial: bool) -> tuple[Any, ...]:
        if kind != "update":
            rows, p = self._rows_decoder(tm, present, None)(data, p, end)
        elif not partial:
            rows, p = self._rows_decoder(tm, present, present_after)(data, p, end)
        else:
            rows = []
            append = rows.append
            before = self._image_decoder(tm, present)
            after = self._image_decoder(tm, present_after, partial=True)
            json_count = sum(1 for c in tm.columns if c.type == C.MYSQL_TYPE_JSON)
            while p < end:
                b, p = before(data, p)
                options, p = read_packed(data, p)
                pj = 0
                if options & 1:
                    nbj = (json_count + 7) // 8
                    pj = int.from_bytes(data[p:p + nbj], "little")
                    p += nbj
                a, p = after(data, p, pj)
                if pj:
                    a = self._apply_partial_json(b, a)
                append((b, a))
        if p != end:
            raise CorruptEventError(rows_end_mismatch(tm, p, end))
        return tuple(rows)

    @staticmethod
    def _apply_partial_json(before: tuple[Any, ...], after: tuple[Any, ...]) -> tuple[Any, ...]:
        from .json_diff import apply_json_diffs
        out = list(after)
        for i, value in enumerate(after):
            if isinstance(value, JsonDiffs):
                base = before[i]
                if base is not ABSENT:
                    out[i] = apply_json_diffs(base, list(value.diffs))
        return tuple(out)

    # ------------------------------------------------------------------ compressed transactions
    def _transaction_payload(self, h: EventHeader, pos: int, data: Buffer, p: int, end: int) -> Event:
        fields = self._tlv_fields(data, p, end)
        if 0 not in fields:
            raise ValueError("TRANSACTION_PAYLOAD header has no end mark")
        start = fields[0]
        size = read_packed(fields[1], 0)[0] if 1 in fields else end - start
        ctype = read_packed(fields[2], 0)[0] if 2 in fields else 0
        usize = read_packed(fields[3], 0)[0] if 3 in fields else 0
        payload = bytes(data[start:start + size])
        if len(payload) != size:
            raise ValueError("TRANSACTION_PAYLOAD payload overruns the event")
        if ctype == 0:
            import zstandard
            try:
                with zstandard.ZstdDecompressor().stream_reader(payload) as reader:
                    inner = reader.read()
            except zstandard.ZstdError as exc:
                raise CompressionError(f"zstd: {exc}") from None
        elif ctype == 255:
            inner = payload
        else:
            raise CompressionError(f"unknown TRANSACTION_PAYLOAD compression type {ctype}")
        if usize and len(inner) != usize:
            raise CompressionError(f"payload decompressed to {len(inner)} bytes, header says {usize}")
        events = []
        q = 0
        while q < len(inner):
            if q + C.HEADER_LEN > len(inner):
                raise CorruptEventError("truncated event inside TRANSACTION_PAYLOAD")
            size_i = U32(inner, q + 9)[0]
            if size_i < C.HEADER_LEN or q + size_i > len(inner):
                raise CorruptEventError("event inside TRANSACTION_PAYLOAD overruns the payload")
            events.append(self.decode(inner[q:q + size_i], pos, has_checksum=False))
            q += size_i
        return TransactionPayloadEvent(h, pos, ctype, size, usize, tuple(events))
