"""Decoded events and row values of the real binlogs in the shared corpus equal the expected
outputs shipped with the corpus.

1. ``_reference_decodes/<file>.mariadb-binlog-vv.txt`` (MariaDB 10.11 ``mariadb-binlog -vv
   --base64-output=decode-rows``), for every corpus file: every ``###`` row line is regenerated
   from the decoded rows by :func:`render_rows_event` (the way ``log_event_print_value`` prints
   each value) and compared byte for byte, the column comment (type, metadata, nullability, NULL
   flag) included; every event header printed (position, server id, end_log_pos, time) and the
   details of its description (thread id, table id and name, xid, GTID, ...) are compared too.
   The same comparison runs on the ``mysqlbinlog`` outputs the source projects ship.
2. The source projects' own expectations: ``EXPECTED_*`` copies of their tests, ``SHOW BINLOG
   EVENTS`` listings, tool JSON outputs and the SQL that wrote the data (replayed).
3. MariaDB 10.0 fractional TIMESTAMP rows, which only decode with the table schema.

What the reference decoder cannot print is not compared against it: it has no row output for
MySQL 8 JSON (type 245), VECTOR and tagged-GTID binlogs, nor for rows inside TRANSACTION_PAYLOAD
events (it exits non-zero, manifest ``reference_decode_rc``), and it stops at the first MariaDB
10.0 fractional TIMESTAMP rows event of ``pingcap__tiflow/mysql-bin.000001``. Its output is then
compared up to where it stops; those files' values are covered by the tests of part 2 and 3
(JSON values by test_mysql_json.py). Files the codec refuses (the negative samples, whose errors
test_codec_corpus.py checks) are compared up to the event refused.
"""
from __future__ import annotations

import datetime as dt
import gzip
import json
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

import pytest

from airflow_provider_binlog.codec import (ABSENT, BinlogError, ColumnSchema, CorruptEventError,
                                           RowsEvent, TableSchema, TruncatedEventError,
                                           read_binlog_file)
from airflow_provider_binlog.codec import constants as C
from airflow_provider_binlog.codec.events import (
    AnnotateRowsEvent, BinlogCheckpointEvent, ExecuteLoadQueryEvent, FormatDescriptionEvent,
    GtidEvent, IncidentEvent, IntvarEvent, LoadDataBlockEvent, MariadbGtidEvent,
    MariadbGtidListEvent, PreviousGtidsEvent, QueryEvent, RandEvent, RawEvent, RotateEvent,
    RowsQueryEvent, StopEvent, TableMapEvent, TransactionPayloadEvent, UserVarEvent, XidEvent)
from tests.corpus import CORPUS, manifest

if not (CORPUS / "manifest.json").exists():
    pytest.skip(f"binlog corpus not found at {CORPUS}", allow_module_level=True)

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)

# ----------------------------------------------------------------------------------------------
# Corpus helpers

TIFLOW = "pingcap__tiflow/mysql-bin.000001"


def _tiflow_table(name: str, precision: int) -> TableSchema:
    return TableSchema("steven", name, (ColumnSchema("id", "int", primary_key=True),
                                        ColumnSchema("d", "timestamp", datetime_precision=precision)))


# create table t(id int primary key, d timestamp(3)), t2 ... timestamp(4), t5 ... timestamp(1),
# t6 ... timestamp(4) (the CREATE TABLE statements in the file); t1 and t3 have plain TIMESTAMPs.
TIFLOW_SCHEMAS = {("steven", name): _tiflow_table(name, precision)
                  for name, precision in (("t", 3), ("t2", 4), ("t5", 1), ("t6", 4))}


@lru_cache(maxsize=None)
def _manifest_by_file() -> dict:
    return {e["file"]: e for e in manifest()}


def entry(relative: str) -> dict:
    return _manifest_by_file()[relative]


def decode_all(relative: str, **kwargs) -> list:
    """Every event of a corpus file. The two MyFlash files rebuilt from hexdumps end in one stray
    byte (manifest ``trailing_bytes``): decoding stops there with TruncatedEventError."""
    path = CORPUS / relative
    trailing = entry(relative)["trailing_bytes"]
    out = []
    try:
        for event in read_binlog_file(path, **kwargs):
            out.append(event)
    except TruncatedEventError as exc:
        if not trailing or exc.offset != path.stat().st_size - trailing:
            raise
    return out


def read_text(relative: str) -> bytes:
    path = CORPUS / relative
    data = path.read_bytes()
    return gzip.decompress(data) if relative.endswith(".gz") else data


def rows_events(events) -> list[RowsEvent]:
    return [e for e in events if isinstance(e, RowsEvent)]


# ----------------------------------------------------------------------------------------------
# Rendering decoded values the way mariadb-binlog -vv prints them (log_event_print_value)

_CONTROL = re.compile(rb"[\x00-\x1f]")
_INT_BITS = {C.MYSQL_TYPE_TINY: 8, C.MYSQL_TYPE_SHORT: 16, C.MYSQL_TYPE_INT24: 24,
             C.MYSQL_TYPE_LONG: 32, C.MYSQL_TYPE_LONGLONG: 64}
_INT_NAMES = {C.MYSQL_TYPE_TINY: "TINYINT", C.MYSQL_TYPE_SHORT: "SHORTINT",
              C.MYSQL_TYPE_INT24: "MEDIUMINT", C.MYSQL_TYPE_LONG: "INT",
              C.MYSQL_TYPE_LONGLONG: "LONGINT"}
_BLOB_NAMES = {1: "TINYBLOB/TINYTEXT", 2: "BLOB/TEXT", 3: "MEDIUMBLOB/MEDIUMTEXT",
               4: "LONGBLOB/LONGTEXT"}


def quoted(raw: bytes) -> bytes:
    """my_b_write_quoted: bytes below 0x20 as \\xNN, everything else (quotes too) verbatim."""
    if _CONTROL.search(raw):
        raw = _CONTROL.sub(lambda m: b"\\x%02x" % m[0][0], raw)
    return b"'" + raw + b"'"


def _string_bytes(col, value) -> bytes:
    if isinstance(value, bytes):
        return value
    assert isinstance(value, str), f"{col.name}: {value!r}"
    return value.encode(col.codec or "utf-8")


def _int_renderer(bits: int):
    mask = (1 << bits) - 1
    half = 1 << (bits - 1)

    def render(value) -> bytes:
        assert isinstance(value, int) and not isinstance(value, bool), value
        unsigned = value & mask
        signed = unsigned - (1 << bits) if unsigned >= half else unsigned
        if signed < 0:  # printed signed, then the unsigned reading in parentheses
            return b"%d (%d)" % (signed, unsigned)
        return b"%d" % signed
    return render


def _fraction(micro: int, fsp: int) -> str:
    return "" if fsp <= 0 else "." + ("%06d" % micro)[:fsp]


def _render_datetime(value, fsp: int) -> bytes:
    if isinstance(value, str):  # zero / invalid date, kept as MySQL prints it
        return quoted(value.encode())
    assert isinstance(value, dt.datetime) and value.tzinfo is None, value
    return quoted(("%04d-%02d-%02d %02d:%02d:%02d" % (
        value.year, value.month, value.day, value.hour, value.minute, value.second)
        + _fraction(value.microsecond, fsp)).encode())


def _render_timestamp(value, fsp: int) -> bytes:
    """TIMESTAMP is printed as seconds since the epoch (my_timeval_to_str)."""
    if isinstance(value, str):
        assert value.startswith("0000-00-00 00:00:00"), value
        return b"0" + _fraction(0, fsp).encode()
    assert isinstance(value, dt.datetime) and value.tzinfo is not None, value
    delta = value - EPOCH
    seconds = delta.days * 86400 + delta.seconds
    return b"%d" % seconds + _fraction(delta.microseconds, fsp).encode()


def _render_time(value, fsp: int) -> bytes:
    assert isinstance(value, dt.timedelta), value
    total = value.days * 86400_000000 + value.seconds * 1000000 + value.microseconds
    sign = "-" if total < 0 else ""
    secs, micro = divmod(abs(total), 1000000)
    hh, rest = divmod(secs, 3600)
    mi, ss = divmod(rest, 60)
    return quoted(("%s%02d:%02d:%02d" % (sign, hh, mi, ss) + _fraction(micro, fsp)).encode())


def _render_date(value) -> bytes:
    """mariadb-binlog prints DATE as 'YYYY:MM:DD' (colons)."""
    if isinstance(value, str):
        y, m, d = value.split("-")
        return quoted(f"{y}:{m}:{d}".encode())
    assert isinstance(value, dt.date) and not isinstance(value, dt.datetime), value
    return quoted(b"%04d:%02d:%02d" % (value.year, value.month, value.day))


def _bits(raw: bytes, nbits: int) -> bytes:
    """my_b_write_bit: the last ``nbits`` bits of ``raw`` read most significant bit first."""
    text = "".join(format(b, "08b") for b in raw)
    return b"b'" + text[len(text) - nbits:].encode() + b"'"


def column_renderer(col):
    """``(render(value) -> bytes, type comment)`` for one column, as log_event_print_value."""
    t, meta = col.type, col.meta
    if t in _INT_BITS:
        return _int_renderer(_INT_BITS[t]), _INT_NAMES[t], meta
    if t == C.MYSQL_TYPE_NEWDECIMAL:
        def render(value):
            assert isinstance(value, Decimal), value
            return format(value, "f").encode()
        return render, f"DECIMAL({meta >> 8},{meta & 0xFF})", meta
    if t == C.MYSQL_TYPE_FLOAT:
        return (lambda v: b"%-20g" % v), "FLOAT", meta
    if t == C.MYSQL_TYPE_DOUBLE:
        return (lambda v: b"%.20g" % v), "DOUBLE", meta
    if t == C.MYSQL_TYPE_BIT:
        nbits = (meta >> 8) * 8 + (meta & 0xFF)
        nbytes = (nbits + 7) // 8
        return (lambda v: _bits(v.to_bytes(nbytes, "big"), nbits)), f"BIT({nbits})", meta
    if t == C.MYSQL_TYPE_TIMESTAMP:
        return (lambda v: _render_timestamp(v, 0)), "TIMESTAMP", meta
    if t == C.MYSQL_TYPE_TIMESTAMP2:
        return (lambda v: _render_timestamp(v, meta)), f"TIMESTAMP({meta})", meta
    if t == C.MYSQL_TYPE_DATETIME:
        return (lambda v: _render_datetime(v, 0)), "DATETIME", meta
    if t == C.MYSQL_TYPE_DATETIME2:
        return (lambda v: _render_datetime(v, meta)), f"DATETIME({meta})", meta
    if t == C.MYSQL_TYPE_TIME:
        return (lambda v: _render_time(v, 0)), "TIME", meta
    if t == C.MYSQL_TYPE_TIME2:
        return (lambda v: _render_time(v, meta)), f"TIME({meta})", meta
    if t in (C.MYSQL_TYPE_DATE, C.MYSQL_TYPE_NEWDATE):
        return _render_date, "DATE", meta
    if t == C.MYSQL_TYPE_YEAR:
        # the stored byte + 1900: the zero year prints as 1900
        return (lambda v: b"%04d" % (v or 1900)), "YEAR", meta
    if t == C.MYSQL_TYPE_ENUM:
        labels = ("",) + tuple(col.enum_values or ())

        def render(value):
            return b"%d" % (labels.index(value) if isinstance(value, str) else value)
        # the TABLE_MAP logs ENUM as STRING with real type and storage size in the metadata
        typestr = "ENUM(1 byte)" if meta == 1 else f"ENUM({meta} bytes)"
        return render, typestr, (C.MYSQL_TYPE_ENUM << 8) | meta
    if t == C.MYSQL_TYPE_SET:
        labels = tuple(col.set_values or ())

        def render(value):
            if isinstance(value, str):
                mask = 0
                for label in filter(None, value.split(",")):
                    mask |= 1 << labels.index(label)
                value = mask
            return _bits(value.to_bytes(meta, "little"), meta * 8)
        return render, f"SET({meta} bytes)", (C.MYSQL_TYPE_SET << 8) | meta
    if t in C.BLOB_TYPES:
        return (lambda v: quoted(_string_bytes(col, v))), _BLOB_NAMES[meta], meta
    if t in (C.MYSQL_TYPE_VARCHAR, C.MYSQL_TYPE_VAR_STRING):
        return (lambda v: quoted(_string_bytes(col, v))), f"VARSTRING({meta})", meta
    if t == C.MYSQL_TYPE_STRING:
        # CHAR(n): the metadata keeps the real type with bits 8-9 of the length xor-ed into it
        raw_meta = ((C.MYSQL_TYPE_STRING ^ ((meta & 0x300) >> 4)) << 8) | (meta & 0xFF)
        return (lambda v: quoted(_string_bytes(col, v))), f"STRING({meta})", raw_meta
    raise AssertionError(f"mariadb-binlog prints no value for column type {col.type_name}")


_RENDERERS: dict[int, tuple] = {}


def _table_renderers(tm) -> list:
    cached = _RENDERERS.get(id(tm))
    if cached is None or cached[0] is not tm:
        out = []
        for col in tm.columns:
            render, typestr, raw_meta = column_renderer(col)
            comment = f" /* {typestr} meta={raw_meta} nullable={int(col.nullable)} is_null="
            out.append((col.index + 1, render, comment.encode()))
        cached = _RENDERERS[id(tm)] = (tm, out)
    return cached[1]


def _image_lines(renderers, values) -> list[bytes]:
    lines = []
    for (number, render, comment), value in zip(renderers, values):
        if value is ABSENT:
            continue
        if value is None:
            lines.append(b"###   @%d=NULL%s1 */" % (number, comment))
        else:
            lines.append(b"###   @%d=%s%s0 */" % (number, render(value), comment))
    return lines


def render_rows_event(event: RowsEvent) -> list[bytes]:
    """The ``###`` lines mariadb-binlog -vv prints for a rows event."""
    tm = event.table_map
    renderers = _table_renderers(tm)
    name = b"`%s`.`%s`" % (tm.schema.encode(), tm.table.encode())
    lines: list[bytes] = []
    for row in event.rows:
        if event.kind == "insert":
            lines += [b"### INSERT INTO " + name, b"### SET", *_image_lines(renderers, row)]
        elif event.kind == "delete":
            lines += [b"### DELETE FROM " + name, b"### WHERE", *_image_lines(renderers, row)]
        else:
            before, after = row
            lines += [b"### UPDATE " + name, b"### WHERE", *_image_lines(renderers, before),
                      b"### SET", *_image_lines(renderers, after)]
    return lines


# ----------------------------------------------------------------------------------------------
# Parsing mysqlbinlog / mariadb-binlog text output

_HEADER = re.compile(rb"^#(\d{6}) +(\d?\d:\d\d:\d\d) server id (\d+)\s+end_log_pos (\d+)"
                     rb"(?: CRC32 0x[0-9a-f]{8})?\s*(.*)$")
_HEX = rb"((?:[0-9a-f]{2} ?){%d})\s*"
_HEXDUMP_HEADER = re.compile(rb"^#\s+[0-9a-f]+ " + _HEX % 4 + _HEX % 1 + _HEX % 4 + _HEX % 4
                             + _HEX % 4 + _HEX % 2 + rb"$")

# after a hexdump: "# \tQuery\tthread_id=..." or "#Begin_load_query: file_id: ..."
_HEXDUMP_DESC = re.compile(rb"^#(?: \t)?([A-Z].*)$")


@dataclass
class Printed:
    """One event header printed by mysqlbinlog: ``# at POS`` then ``#YYMMDD HH:MM:SS server id
    S  end_log_pos E ... description`` (with --hexdump the description follows the dump, and
    the raw 19-byte header is dumped: timestamp, type, server id, size, log_pos, flags)."""
    pos: int
    when: dt.datetime
    server_id: int
    end_log_pos: int
    desc: bytes
    raw_header: tuple | None = None
    set_line: bytes = b""  # the first "SET ..." statement printed for the event


@dataclass
class MysqlbinlogOutput:
    events: list          # of Printed, in file order
    rows: dict            # position -> '###' lines printed after the '# at' of that position


def parse_mysqlbinlog(text: bytes) -> MysqlbinlogOutput:
    """Event headers and row lines of ``mysqlbinlog -v[v]`` text output.

    When mysqlbinlog buffers the events of a statement it prints their ``# at`` lines first and
    their headers afterwards: headers take the pending positions in order."""
    if text[:2] == b"\xff\xfe":  # saved from a Windows console: UTF-16LE with CRLF
        text = text.decode("utf-16").encode("utf-8")
    events: list[Printed] = []
    rows: dict[int, list[bytes]] = {}
    pending: list[int] = []
    last_at = None
    want_desc = want_hex = False
    for line in text.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"###"):
            rows.setdefault(last_at, []).append(line)
        elif line.startswith(b"# at "):
            last_at = int(line[5:])
            pending.append(last_at)
            want_desc = want_hex = False
        elif line.startswith(b"#") and pending and (m := _HEADER.match(line)):
            yy, hms = int(m[1][:2]), [int(x) for x in m[2].split(b":")]
            when = dt.datetime(yy + (1900 if yy >= 69 else 2000), int(m[1][2:4]), int(m[1][4:]), *hms)
            events.append(Printed(pending.pop(0), when, int(m[3]), int(m[4]), m[5]))
            want_desc = not m[5]
        elif want_desc and line.startswith(b"# Position"):
            want_hex = True
        elif want_hex and (m := _HEXDUMP_HEADER.match(line)):
            ts, type_code, server_id, size, log_pos, flags = (
                int.from_bytes(bytes.fromhex(g.decode()), "little") for g in m.groups())
            events[-1].raw_header = (ts, type_code, server_id, size, log_pos, flags)
            want_hex = False
        elif want_desc and (m := _HEXDUMP_DESC.match(line)):
            events[-1].desc = m[1]
            want_desc = False
        elif line.startswith(b"SET ") and events and not events[-1].set_line:
            events[-1].set_line = line
    assert None not in rows, "row lines before any '# at' line"
    return MysqlbinlogOutput(events, rows)


def statements(events) -> dict[int, list[RowsEvent]]:
    """Rows events grouped by statement, keyed by the position of the statement's last event.

    mysqlbinlog prints the rows of all events of a statement (up to the one flagged
    STMT_END_F) after the ``# at`` line of that last event."""
    groups: dict[int, list[RowsEvent]] = {}
    pending: list[RowsEvent] = []
    for event in rows_events(events):
        pending.append(event)
        if event.stmt_end:
            if any(e.rows for e in pending):
                groups[event.pos] = pending
            pending = []
    assert not pending, "rows events without a statement end"
    return groups


def _first_difference(ours: list[bytes], ref: list[bytes]) -> str:
    for i, (a, b) in enumerate(zip(ours, ref)):
        if a != b:
            return f"line {i}: decoded {a!r}\n          printed {b!r}"
    return f"decoded {len(ours)} lines, printed {len(ref)}"


def assert_rows_equal_printed(label: str, events, printed: MysqlbinlogOutput,
                              complete: bool = True) -> int:
    """Every '###' line printed equals the rendering of the decoded rows; returns the number of
    lines compared. ``complete``: the printer read the whole file."""
    decoded = statements(events)
    if complete:
        assert sorted(decoded) == sorted(printed.rows), label
    else:
        assert set(printed.rows) <= set(decoded), label
    compared = 0
    for pos, lines in printed.rows.items():
        ours = [line for event in decoded[pos] for line in render_rows_event(event)]
        assert ours == lines, f"{label}: rows event at {pos}: {_first_difference(ours, lines)}"
        compared += len(lines)
    return compared


# What mysqlbinlog prints first in an event's description, per decoded event class.
_DESC_WORD = {
    FormatDescriptionEvent: b"Start", QueryEvent: b"Query", TableMapEvent: b"Table_map",
    XidEvent: b"Xid", IntvarEvent: b"Intvar", RandEvent: b"Rand", UserVarEvent: b"User_var",
    RotateEvent: b"Rotate", StopEvent: b"Stop", MariadbGtidEvent: b"GTID",
    MariadbGtidListEvent: b"Gtid", BinlogCheckpointEvent: b"Binlog",
    AnnotateRowsEvent: b"Annotate_rows", ExecuteLoadQueryEvent: b"Execute_load_query",
    IncidentEvent: b"Incident",
}
_ROWS_WORD = {"insert": b"Write_rows", "update": b"Update_rows", "delete": b"Delete_rows"}
_DESC_SPLIT = re.compile(rb"[ :=\t]")


def _desc_word(event, printer: str) -> bytes:
    if isinstance(event, RowsEvent):
        return _ROWS_WORD[event.kind]
    if isinstance(event, LoadDataBlockEvent):
        return {C.BEGIN_LOAD_QUERY_EVENT: b"Begin_load_query", C.APPEND_BLOCK_EVENT: b"Append_block",
                C.DELETE_FILE_EVENT: b"Delete_file"}[event.header.type_code]
    if isinstance(event, (GtidEvent, PreviousGtidsEvent, RowsQueryEvent, RawEvent)):
        if printer == "mariadb":  # MySQL-only events: MariaDB 10.11 knows them as ignorable
            return b"Ignorable"
        if isinstance(event, GtidEvent):
            return b"Anonymous_GTID" if event.anonymous else b"GTID"
        return {PreviousGtidsEvent: b"Previous-GTIDs", RowsQueryEvent: b"Rows_query",
                RawEvent: b"Ignorable"}[type(event)]
    return _DESC_WORD[type(event)]


def _check_set_line(event, line: bytes, printer: str) -> None:
    """The SET statement mysqlbinlog prints for INTVAR, RAND, USER_VAR and QUERY events (the
    fraction of SET TIMESTAMP comes from the printer's own flavour of status variable: MySQL's
    Q_MICROSECONDS, MariaDB's Q_HRNOW)."""
    text = line.decode("utf-8", "replace")
    if isinstance(event, IntvarEvent):
        name = "LAST_INSERT_ID" if event.kind == 1 else "INSERT_ID"
        assert text == f"SET {name}={event.value}/*!*/;"
    elif isinstance(event, RandEvent):
        assert text == f"SET @@RAND_SEED1={event.seed1}, @@RAND_SEED2={event.seed2}/*!*/;"
    elif isinstance(event, UserVarEvent):
        if event.is_null:
            value = "NULL"
        elif isinstance(event.value, str):  # charset introducer, hex bytes, collation
            hexed = event.value.encode().hex().upper()
            value = rf"_\w+ (?:0x{hexed}|X'{hexed}') COLLATE `\w+`"
        else:
            value = re.escape(format(event.value, "f") if isinstance(event.value, Decimal)
                              else str(event.value))
        assert re.fullmatch(rf"SET @`{re.escape(event.name)}`:={value}/\*!\*/;", text), text
    elif isinstance(event, QueryEvent) and text.startswith("SET TIMESTAMP="):
        fraction = event.status.hrnow if printer == "mariadb" else event.status.microseconds
        micro = "" if fraction is None else f".{fraction:06d}"
        assert text == f"SET TIMESTAMP={event.timestamp}{micro}/*!*/;", text


def _check_description(event, desc: bytes, printer: str) -> None:
    """The details mysqlbinlog prints in the description equal the decoded event's fields."""
    word = _DESC_SPLIT.split(desc, 1)[0]
    assert word == _desc_word(event, printer), (event.pos, desc)
    text = desc.decode("utf-8", "replace")
    if isinstance(event, FormatDescriptionEvent):
        assert f"server v {event.server_version} created" in text
    elif isinstance(event, QueryEvent):
        assert text.startswith(f"Query\tthread_id={event.thread_id}\texec_time={event.exec_time}"
                               f"\terror_code={event.error_code}"), text
    elif isinstance(event, TableMapEvent):
        assert text == f"Table_map: `{event.schema}`.`{event.table}` mapped to number {event.table_id}"
    elif isinstance(event, RowsEvent):
        flags = " flags: STMT_END_F" if event.stmt_end else ""
        assert text == f"{_ROWS_WORD[event.kind].decode()}: table id {event.table_id}{flags}", text
    elif isinstance(event, XidEvent):
        assert text == f"Xid = {event.xid}"
    elif isinstance(event, RotateEvent):
        assert re.fullmatch(rf"Rotate to {re.escape(event.next_file)}\s+pos: {event.position}", text)
    elif isinstance(event, MariadbGtidEvent):
        assert re.match(rf"GTID {event.gtid}( |$)", text), text
    elif isinstance(event, LoadDataBlockEvent):
        assert re.fullmatch(rf"{word.decode()}: file_id: {event.file_id}\s+"
                            rf"block_len: {len(event.data)}", text), text
    elif isinstance(event, GtidEvent) and printer == "mysql":
        assert text.startswith(f"{word.decode()}\tlast_committed={event.last_committed}"
                               f"\tsequence_number={event.sequence_number}"), text


def assert_events_equal_printed(label: str, events, printed: MysqlbinlogOutput, *,
                                printer: str, utc: bool, complete: bool = True,
                                check_kinds: bool = True) -> int:
    """Position, server id, end_log_pos, time and description of every event printed equal the
    decoded event's. ``utc``: mysqlbinlog ran in UTC; otherwise its local time zone must be one
    constant offset. Returns the number of events compared."""
    ours = list(events)
    theirs = printed.events
    if complete:
        assert len(ours) == len(theirs), (label, len(ours), len(theirs))
    n = min(len(ours), len(theirs))
    assert n or not (complete or theirs), label
    offset = None
    for event, p in zip(ours[:n], theirs[:n]):
        h = event.header
        assert (event.pos, h.server_id, h.log_pos) == (p.pos, p.server_id, p.end_log_pos), (label, p)
        when = dt.datetime.fromtimestamp(h.timestamp, UTC).replace(tzinfo=None)
        if utc:
            assert when == p.when, (label, p)
        else:
            offset = offset if offset is not None else p.when - when
            assert p.when - when == offset and offset.total_seconds() % 900 == 0, (label, p)
        if p.raw_header is not None:
            assert p.raw_header == (h.timestamp, h.type_code, h.server_id, h.event_size,
                                    h.log_pos, h.flags), (label, p)
        if check_kinds:
            _check_description(event, p.desc, printer)
            _check_set_line(event, p.set_line, printer)
    return n


# ----------------------------------------------------------------------------------------------
# 1. The reference decodes (MariaDB 10.11 mariadb-binlog -vv)

# Decoding options a file needs: MariaDB 10.0 fractional TIMESTAMPs need the table schema.
DECODE_OPTIONS = {TIFLOW: {"schemas": TIFLOW_SCHEMAS}}
# MySQL 5.2.2-a_drop6p13 numbered events 16-22 differently (MySQL's log_event.cc permutes them
# back for the a_drop5p/a_drop6p versions); mariadb-binlog does not, and prints its TABLE_MAP
# (type 16 there) as "Xid". Positions, server ids and end_log_pos are still compared.
PERMUTED_EVENT_TYPES = {
    "blackbeam__rust_mysql_common/test-data/binlogs/ver_5_1-wl2325_r.001",
    "blackbeam__rust_mysql_common/test-data/binlogs/ver_5_1-wl2325_s.001",
}


def decode_prefix(relative: str, **kwargs) -> tuple[list, Exception | None]:
    events = []
    try:
        for event in read_binlog_file(CORPUS / relative, **kwargs):
            events.append(event)
    except BinlogError as exc:
        return events, exc
    return events, None


ALL_FILES = [e["file"] for e in manifest()]


@pytest.mark.parametrize("relative", ALL_FILES)
def test_events_and_row_values_equal_mariadb_binlog_reference_decode(relative):
    meta = entry(relative)
    printed = parse_mysqlbinlog(read_text(meta["reference_decode"]))
    events, error = decode_prefix(relative, **DECODE_OPTIONS.get(relative, {}))
    if isinstance(error, TruncatedEventError) and meta["trailing_bytes"]:
        # stray bytes after the last event (files rebuilt from hexdumps, truncated samples)
        assert error.offset == (CORPUS / relative).stat().st_size - meta["trailing_bytes"]
        error = None
    if error is not None:  # a damaged sample: the reference decoder fails on it too
        assert meta["reference_decode_rc"] != 0, error
    complete = meta["reference_decode_rc"] == 0 and error is None
    assert_events_equal_printed(relative, events, printed, printer="mariadb", utc=True,
                                complete=complete,
                                check_kinds=relative not in PERMUTED_EVENT_TYPES)
    compared = assert_rows_equal_printed(relative, events, printed,
                                         complete=meta["reference_decode_rc"] == 0)
    # the manifest counts the reference's '###' lines: none of them was left out
    assert compared == meta["reference_decode_row_lines"]


# ----------------------------------------------------------------------------------------------
# 2. The source projects' own mysqlbinlog outputs (MySQL's mysqlbinlog, local time zones)

KINGBUS = "flike__kingbus/tools/test_data"
ZALORA = "zalora__binlog-parser/data"
RUST_US = "rust-us__mysql-cdc-rs/tests/events"
PRINTED_BY_MYSQLBINLOG = [
    # kingbus: mysqlbinlog 5.7 -vv (rows printed after their BINLOG base64 block)
    *[(f"{KINGBUS}/{d}/{b}", f"{KINGBUS}/{d}/{t}") for d, b, t in (
        ("binlog", "mysql_bin.000011", "11.txt"), ("binlog", "mysql_bin.000012", "12.txt"),
        ("binlog", "mysql_bin.000013", "13.txt"),
        ("relaylog", "flikedev1-c8pyy-relay-bin.000284", "284.txt"),
        ("relaylog", "flikedev1-c8pyy-relay-bin.000286", "286.txt"),
        ("relaylog", "flikedev1-c8pyy-relay-bin.000288", "288.txt"))],
    # zalora binlog-parser: mysqlbinlog -vv of its fixtures
    *[(f"{ZALORA}/fixtures/mysql-bin.{n}", f"{ZALORA}/fixtures/plaintext-mysql-bin.{n}")
      for n in ("01", "02", "03", "05", "06", "07", "empty")],
    # mysql-cdc-rs: mysqlbinlog --hexdump (5.7.30) and -vv --hexdump (8.x, saved as UTF-16LE)
    *[(f"{RUST_US}/5.7/{d}/log.bin", f"{RUST_US}/5.7/{d}/dump.txt") for d in (
        "02_query", "03_stop", "04_rotate", "05_intvar", "13_rand", "14_user_var",
        "15_format_desc", "16_xid", "17_18_load", "19_table_map", "29_row_query",
        "30_write_rows_v2", "31_update_rows_v2", "32_delete_rows_v2", "33_35_gtid_prev_gtid",
        "34_anonymous_gtid")],
    *[(f"{RUST_US}/8.0/{d}", f"{RUST_US}/8.0/{d.split('/')[0]}/dump.txt") for d in (
        "02_query/binlog.000001", "19_30_Table_map_event_Write_rows_log_event/binlog.000018",
        "31_update_rows_v2/binlog.000001", "32_delete_rows_v2/binlog.000001")],
]

# printed without -v: no row lines to compare (their rows are in the reference decodes)
PRINTED_WITHOUT_ROWS = {f"{RUST_US}/5.7/16_xid/dump.txt", f"{RUST_US}/5.7/31_update_rows_v2/dump.txt"}


@pytest.mark.parametrize("binlog, listing", PRINTED_BY_MYSQLBINLOG)
def test_events_and_row_values_equal_the_source_projects_mysqlbinlog_output(binlog, listing):
    printed = parse_mysqlbinlog(read_text(listing))
    events = decode_all(binlog)
    assert_events_equal_printed(binlog, events, printed, printer="mysql", utc=False)
    if listing in PRINTED_WITHOUT_ROWS:
        assert not printed.rows and rows_events(events)
    else:
        assert_rows_equal_printed(binlog, events, printed)


# ----------------------------------------------------------------------------------------------
# SHOW BINLOG EVENTS listings: position, type, server id, end_log_pos and Info of every event

def parse_show_binlog_events(text: str) -> list[dict]:
    """Rows of a ``SHOW BINLOG EVENTS`` table (console capture, or quoted in // comments).
    A multi-line Info (a query with newlines) continues on the lines after its row."""
    columns = None
    rows: list[dict] = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        line = raw.strip()
        if line.startswith("//"):
            line = line[2:].strip()
        if line.startswith("+"):
            continue
        if not line.startswith("|"):
            if rows and line:
                rows[-1]["Info"] += "\n" + line
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            columns = cells
        elif cells[0] != columns[0] and len(cells) >= len(columns) - 1:
            row = dict(zip(columns, cells))
            row.setdefault("Info", "")
            rows.append(row)
    return rows


_SHOW_TYPE = {FormatDescriptionEvent: "Format_desc", PreviousGtidsEvent: "Previous_gtids",
              QueryEvent: "Query", TableMapEvent: "Table_map", XidEvent: "Xid",
              StopEvent: "Stop", RotateEvent: "Rotate"}
AURORA_PADDING = 100  # Amazon Aurora's padding event: flagged ignorable, kept raw


def show_info(event) -> tuple[str, str]:
    """(Event_type, first line of Info) as SHOW BINLOG EVENTS prints them."""
    if isinstance(event, RowsEvent):
        flags = " flags: STMT_END_F" if event.stmt_end else ""
        return f"{_ROWS_WORD[event.kind].decode()}", f"table_id: {event.table_id}{flags}"
    if isinstance(event, GtidEvent):
        return (("Anonymous_Gtid", "SET @@SESSION.GTID_NEXT= 'ANONYMOUS'") if event.anonymous
                else ("Gtid", f"SET @@SESSION.GTID_NEXT= '{event.gtid}'"))
    if isinstance(event, RawEvent) and event.header.type_code == AURORA_PADDING:
        return "Aurora_padding", "Ignorable"
    kind = _SHOW_TYPE[type(event)]
    if isinstance(event, FormatDescriptionEvent):
        info = f"Server ver: {event.server_version}, Binlog ver: {event.binlog_version}"
    elif isinstance(event, PreviousGtidsEvent):
        info = str(event.gtid_set)
    elif isinstance(event, QueryEvent):
        use = "" if event.header.flags & 0x08 else f"use `{event.schema}`; "  # SUPPRESS_USE_F
        xid = "" if event.status.ddl_xid is None else f" /* xid={event.status.ddl_xid} */"
        info = (use + event.query + xid).split("\n")[0]
    elif isinstance(event, TableMapEvent):
        info = f"table_id: {event.table_id} ({event.schema}.{event.table})"
    elif isinstance(event, XidEvent):
        info = f"COMMIT /* xid={event.xid} */"
    elif isinstance(event, RotateEvent):
        info = f"{event.next_file};pos={event.position}"
    else:
        info = ""
    return kind, info


SHOW_BINLOG_EVENTS = [
    (f"{RUST_US}/8.0/{d}", f"{RUST_US}/8.0/{d.split('/')[0]}/show.txt") for d in (
        "02_query/binlog.000001", "02_query_bigger/binlog.000733",
        "19_30_Table_map_event_Write_rows_log_event/binlog.000018",
        "31_update_rows_v2/binlog.000001", "32_delete_rows_v2/binlog.000001")
] + [("osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.aurora-padding",
      "osheroff__mysql-binlog-connector-java/EXPECTED_BinaryLogFileReaderIntegrationTest.java.txt")]


@pytest.mark.parametrize("binlog, listing", SHOW_BINLOG_EVENTS)
def test_events_equal_show_binlog_events_listing(binlog, listing):
    raw = read_text(listing)
    text = raw.decode("utf-16") if raw[:2] == b"\xff\xfe" else raw.decode()
    listed = parse_show_binlog_events(text)
    # SHOW BINLOG EVENTS ran after the file was copied: events listed past its end came later
    size = (CORPUS / binlog).stat().st_size
    listed = [row for row in listed if int(row["Pos"]) < size]
    events = decode_all(binlog)
    assert len(events) == len(listed)
    for event, row in zip(events, listed):
        kind, info = show_info(event)
        assert (event.pos, event.header.log_pos, kind) == (
            int(row["Pos"]), int(row["End_log_pos"]), row["Event_type"]), row
        if "Server_id" in row:
            assert event.header.server_id == int(row["Server_id"])
        assert info == row["Info"].split("\n")[0].strip(), row


# ----------------------------------------------------------------------------------------------
# 2. Values the source projects' own tests assert

BLACKBEAM = "blackbeam__rust_mysql_common/test-data/binlogs"


def only_rows(relative: str, **kwargs) -> list[RowsEvent]:
    return rows_events(decode_all(relative, **kwargs))


def test_time_issue_negative_time_beyond_a_day_is_minus_21_days_03_48_27():
    # rust_mysql_common: Value::Time(true, 21, 3, 48, 27, 0), i.e. -(21 days 03:48:27)
    (event,) = only_rows(f"{BLACKBEAM}/time_issue.000001")
    (row,) = event.rows
    assert row == (-dt.timedelta(days=21, hours=3, minutes=48, seconds=27),)
    assert _render_time(row[0], 0) == b"'-507:48:27'"


def test_mysql_type_bit_values_are_the_bits_rust_mysql_common_asserts():
    # after image: BIT(3) 0b100, BLOB "foo", BIT(8) 0b100000
    (event,) = only_rows(f"{BLACKBEAM}/mysql_type_bit.000001")
    assert event.rows == ((0b100, "foo", 0b100000),)
    a, _, c = event.table_map.columns
    assert ((a.meta >> 8) * 8 + (a.meta & 0xFF), (c.meta >> 8) * 8 + (c.meta & 0xFF)) == (3, 8)


RUST_ASSERTIONS = "blackbeam__rust_mysql_common/EXPECTED_test_assertions_src_binlog_mod.rs.txt"
_RUST_VALUE = re.compile(r'(\d) => assert_eq!\(v, BinlogValue::Value\((?:"([^"]*)"|(\d+)_i8|'
                         r'\[0b([01]+)_u8\])\.into\(\)\)\)')


def _rust_images(block: str) -> list[tuple]:
    """The column values a ``for v in <image> { match j { 1 => assert_eq!(...), ... } }`` block
    asserts: strings, ENUM index (``N_i8``) and SET bitmask (``[0b..._u8]``)."""
    images, current = [], []
    for j, text, index, mask in _RUST_VALUE.findall(block):
        if j == "1" and current:
            images.append(tuple(current))
            current = []
        current.append(text if not (index or mask) else int(index or mask, 10 if index else 2))
    images.append(tuple(current))
    return images


def test_enum_string_set_rows_have_every_column_value_rust_mysql_common_asserts():
    source = (CORPUS / RUST_ASSERTIONS).read_text()
    section = source.split('"mysql-enum-string-set.000001"', 1)[1].split('"mariadb-bin.000001"')[0]
    write, rest = section.split("RowsEventData::UpdateRowsEvent(_)")
    update, delete = rest.split("RowsEventData::DeleteRowsEvent(_)")
    write, update, delete = _rust_images(write), _rust_images(update), _rust_images(delete)
    assert [len(write), len(update), len(delete)] == [1, 2, 1]
    insert, upd, dele = only_rows(f"{BLACKBEAM}/mysql-enum-string-set.000001")
    assert (insert.kind, upd.kind, dele.kind) == ("insert", "update", "delete")
    cols = insert.table_map.columns
    assert insert.table_map.column_names == ("f1", "f2", "f3", "f4", "f5")
    enum_labels, set_labels = cols[2].enum_values, cols[3].set_values
    assert enum_labels == ("var1", "variant2", "foo") and set_labels == ("one", "two", "three", "four")

    def stored(row):  # labels back to the stored ENUM index and SET bitmask the source asserts
        mask = sum(1 << set_labels.index(s) for s in row[3].split(",") if s)
        return (row[0], row[1], enum_labels.index(row[2]) + 1, mask, row[4])

    assert [stored(r) for r in insert.rows] == write
    assert [stored(r) for pair in upd.rows for r in pair] == update
    assert [stored(r) for r in dele.rows] == delete
    assert write[0][2:4] == (1, 0b101) and update[1][2:4] == (2, 0b1010)


def test_minimal_row_metadata_unsigned_int_and_utf8mb4_column_of_the_image():
    # The source test's labels "@2" and "@4" are not table positions: the row image
    # (binlog_row_image=MINIMAL) holds table columns 1, 3 and 5; the utf8mb4_0900_ai_ci column
    # (collation 255) is column 3 (column 2 is a binary BLOB) and the INT UNSIGNED 3230202323 is
    # column 5 (mariadb-binlog prints "@5=-1064764973 (3230202323)").
    (event,) = only_rows(f"{BLACKBEAM}/minimal_row_metadata.000001")
    assert event.rows == ((1, ABSENT, "a", ABSENT, 3230202323),)
    cols = event.table_map.columns
    present = [c for c, v in zip(cols, event.rows[0]) if v is not ABSENT]
    assert [c.index + 1 for c in present] == [1, 3, 5]
    assert present[1].collation == 255 and present[1].codec == "utf-8"
    assert cols[1].collation == 63 and cols[1].codec is None
    assert present[2].unsigned and cols[4].type == C.MYSQL_TYPE_LONG


def test_vector_dimensions_and_values_are_the_floats_rust_mysql_common_asserts():
    events = decode_all(f"{BLACKBEAM}/vector.binlog")
    dims = {}
    for e in events:
        if isinstance(e, TableMapEvent):
            dims[e.table] = [c.vector_dimensions for c in e.table_map.columns
                             if c.type == C.MYSQL_TYPE_VECTOR]
    assert dims == {"foo": [3], "bar": [2, 4]}
    first_foo = next(e for e in rows_events(events) if e.table == "foo")
    (id1, v1), (id2, v2) = first_foo.rows
    assert (id1, struct.pack("<3f", *v1)) == (1, bytes([205, 204, 140, 63, 205, 204, 12, 64,
                                                         51, 51, 83, 64]))
    assert (id2, struct.pack("<3f", *v2)) == (2, bytes([0, 0, 128, 63, 0, 0, 128, 191, 0, 0, 0, 0]))


def test_transaction_payload_holds_query_table_map_write_rows_xid():
    events = decode_all(f"{BLACKBEAM}/transaction_compression.000001")
    (payload,) = [e for e in events if isinstance(e, TransactionPayloadEvent)]
    assert [e.type_name for e in payload.events] == ["QUERY", "TABLE_MAP", "WRITE_ROWS_V2", "XID"]
    assert all(e.pos == payload.pos for e in payload.events)


def test_tagged_gtid_and_previous_gtids_intervals_rust_mysql_common_asserts():
    uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    events = decode_all(f"{BLACKBEAM}/binlog_transaction_with_GTID_TAG.000001")
    (prev,) = [e for e in events if isinstance(e, PreviousGtidsEvent)]
    # [1, 14) untagged and [1, 3) tagged "mytag" (half-open intervals)
    assert list(prev.gtid_set.ranges()) == [(uuid, None, 1, 13), (uuid, "mytag", 1, 2)]
    (gtid,) = [e for e in events if isinstance(e, GtidEvent)]
    assert (gtid.header.type_code, gtid.uuid, gtid.tag, gtid.gno) == (C.GTID_TAGGED_LOG_EVENT,
                                                                     uuid, "mytag", 3)
    assert gtid.gtid == f"{uuid}:mytag:3"
    events = decode_all(f"{BLACKBEAM}/binlog_transaction_previous_GTID_no_tag.000001")
    (prev,) = [e for e in events if isinstance(e, PreviousGtidsEvent)]
    assert list(prev.gtid_set.ranges()) == [("b9b88c66-0755-11f1-9899-4a9da94c4d71", None, 1, 2)]


# binlog_old_versions.test (mysql-server) replays these captures and prints the tables.
OLD_VERSIONS = "blackbeam__rust_mysql_common/expected_from_mysql-server/binlog_old_versions.result"


def _result_tables(section: str) -> dict:
    """``SELECT * FROM t ORDER BY a`` outputs and the t3 count of one result-file section."""
    text = (CORPUS / OLD_VERSIONS).read_text()
    body = text.split(f"==== {section} ====\n", 1)[1].split("====", 1)[0]
    tables = {}
    for name, rows in re.findall(r"SELECT \* FROM (t\d) ORDER BY a;\na\tb\n((?:.*\t.*\n)+)", body):
        tables[name] = [(int(a), b) for a, b in (line.split("\t") for line in rows.splitlines())]
    tables["t3 count"] = int(re.search(r"COUNT\(\*\)\n(\d+)", body)[1])
    return tables


def _my_rnd(seed1: int, seed2: int) -> float:
    """MySQL's my_rnd(): RAND() from the seeds a RAND event carries."""
    max_value = 0x3FFFFFFF
    seed1 = (seed1 * 3 + seed2) % max_value
    return seed1 / max_value


_OLD_VERSIONS_INSERT = re.compile(r"INSERT INTO (t\d) VALUES \((.+), '(.*)'\)")


def _replay(events) -> dict:
    """Apply rows events and the INSERT statements of the test to tables {name: set of rows}."""
    tables: dict = {}
    user_vars, rand, last_insert_id = {}, None, None
    loaded_lines = 0
    for e in events:
        if isinstance(e, RowsEvent):
            t = tables.setdefault(e.table, set())
            for row in e.rows:
                if e.kind == "insert":
                    t.add(row)
                elif e.kind == "delete":
                    t.remove(row)
                else:
                    t.remove(row[0])
                    t.add(row[1])
        elif isinstance(e, UserVarEvent):
            user_vars[e.name] = e.value
        elif isinstance(e, RandEvent):
            rand = (e.seed1, e.seed2)
        elif isinstance(e, IntvarEvent) and e.kind == 1:
            last_insert_id = e.value
        elif isinstance(e, LoadDataBlockEvent):
            loaded_lines += e.data.count(b"\n")
        elif isinstance(e, QueryEvent) and (m := _OLD_VERSIONS_INSERT.fullmatch(e.query)):
            expr = m[2]
            if expr.startswith("@"):
                value = user_vars[expr[1:]]
            elif expr == "RAND() * 1000000":
                value = round(_my_rnd(*rand) * 1000000)
            elif expr == "LAST_INSERT_ID()":
                value = last_insert_id
            else:
                value = int(expr)
            tables.setdefault(m[1], set()).add((value, m[3]))
    tables["t3 count"] = loaded_lines
    return tables


def test_mysql_5_1_23_capture_replays_to_the_tables_binlog_old_versions_prints():
    expected = _result_tables("Read modern binlog (version 5.1.23)")
    replayed = _replay(decode_all(f"{BLACKBEAM}/ver_5_1_23.001"))
    assert sorted(replayed["t1"]) == expected["t1"]
    assert sorted(replayed["t2"]) == expected["t2"]
    assert replayed["t3 count"] == expected["t3 count"] == 17920


def test_mysql_5_2_drop6_statement_capture_replays_to_its_statement_rows():
    # The wl2325 capture's own rows events use the pre-GA record format (kept raw): only the
    # statement-based part is checked, RAND() included (781729 in this capture).
    expected = _result_tables("Read binlog from alcatel tree (mysql-5.1-wl2325-5.0-drop6)")
    replayed = _replay(decode_all(f"{BLACKBEAM}/ver_5_1-wl2325_s.001"))
    assert sorted(replayed["t1"]) == [r for r in expected["t1"] if r[1] != "one"]
    assert sorted(replayed["t2"]) == expected["t2"]
    assert replayed["t3 count"] == expected["t3 count"]


def test_decimal_columns_equal_the_select_output_in_go_mysql_test():
    text = (CORPUS / "go-mysql-org__go-mysql/replication/t/EXPECTED_row_event_test.go.txt").read_text()
    table = text.split("mysql> select * from decodedecimal;", 1)[1].split("*/", 1)[0]
    lines = [line.strip() for line in table.splitlines() if line.strip().startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    expected = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    assert len(header) == 14 and len(expected) == 17
    rows = [r for e in only_rows("go-mysql-org__go-mysql/replication/t/tcb-eval002c-bin.003320")
            for r in e.rows]
    rendered = [[format(v, "f") if isinstance(v, Decimal) else str(v) for v in row] for row in rows]
    assert rendered == expected


@pytest.mark.parametrize("relative, count", [
    ("osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.sakila.gz", 1462),
    ("osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.compressed", 5),
    ("osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.checksum-none", 191),
    ("osheroff__mysql-binlog-connector-java/src/test/resources/mysql-bin.checksum-crc32", 303),
    ("apecloud__mysql-binlog-connector-rust/tests/parse_file_tests/mysql-bin.000057", 8),
    ("apecloud__mysql-binlog-connector-rust/tests/parse_file_tests/mysql-bin.000080", 37),
])
def test_event_count_equals_the_source_projects_reader_test(relative, count):
    assert len(list(read_binlog_file(CORPUS / relative))) == count


def test_wal_g_binlog_start_timestamp_is_1566047760():
    path = CORPUS / "wal-g__wal-g/internal/databases/mysql/testdata/binlog_small_test"
    first = next(iter(read_binlog_file(path)))
    assert isinstance(first, FormatDescriptionEvent) and first.timestamp == 1566047760


def _sql_values(text: str) -> list[str]:
    """The literals of ``values( ... )``: split on commas outside quotes."""
    body = text.split("values(", 1)[1].split("\n)", 1)[0]
    return [v.strip() for v in re.findall(r"(?:[xb]?'(?:[^']|'')*'|[^,'])+", body)]


def test_mysqlcdc_sample_row_equals_every_inserted_literal_of_scripts_sql():
    from airflow_provider_binlog.codec.json_text import to_mysql_json_text
    sql = (CORPUS / "rusuly__MySqlCdc/Scripts.sql").read_text()
    columns = re.findall(r"^\s+`(\w+)` (\w+)(?:\(([^)]*)\))?", sql.split("insert into")[0], re.M)
    inserted = [name.strip("` \n") for name in
                sql.split("insert into `MySqlCdc` (", 1)[1].split(")", 1)[0].split(",")]
    literals = dict(zip(inserted, _sql_values(sql.split("insert into", 1)[1])))
    assert len(literals) == 21 and len(columns) == 22
    events = only_rows("rusuly__MySqlCdc/samples/MySqlCdc.Sample/mysql-bin.000001")
    rows = [row for e in events for row in e.rows]
    assert [r[0] for r in rows] == [11, 12, 13]  # AUTO_INCREMENT=11
    row = rows[2]  # the script's insert; the first two rows differ in a few leading digits
    cols = events[2].table_map.columns
    session_zone = dt.timezone(dt.timedelta(hours=3))  # the literal is in the session time zone
    for (name, sql_type, args), col, value in zip(columns, cols, row):
        if name == "Id":
            continue
        lit = literals[name]
        text = lit[1:-1] if lit.startswith("'") else lit
        if sql_type in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
            assert value == int(lit), name
        elif sql_type == "float":
            assert value == struct.unpack("<f", struct.pack("<f", float(lit)))[0], name
        elif sql_type == "double":
            assert value == float(lit), name
        elif sql_type == "decimal":
            precision, scale = map(int, args.split(","))
            assert (col.precision, col.scale) == (precision, scale)
            assert format(value, "f") == format(Decimal(lit), f".{scale}f"), name
        elif sql_type in ("char", "varchar"):
            assert value == text, name
        elif sql_type in ("varbinary", "blob"):
            assert _string_bytes(col, value) == bytes.fromhex(lit[2:-1]), name
        elif sql_type == "json":
            assert to_mysql_json_text(value) == text, name
        elif sql_type == "bit":
            assert value == int(lit[2:-1], 2) and col.meta == (int(args) // 8 << 8) | int(args) % 8
        elif sql_type == "enum":  # no labels in a 5.7 binlog: the 1-based index
            assert value == [v.strip(" '") for v in args.split(",")].index(text) + 1, name
        elif sql_type == "set":
            labels = [v.strip(" '") for v in args.split(",")]
            assert value == sum(1 << labels.index(s) for s in text.split(",")), name
        elif sql_type == "date":
            assert value == dt.date.fromisoformat(text), name
        elif sql_type == "datetime":
            assert value == dt.datetime.fromisoformat(text) and col.fsp == int(args), name
        elif sql_type == "time":
            h, m, sec = text.split(":")
            assert value == dt.timedelta(hours=int(h), minutes=int(m), seconds=float(sec))
            assert col.fsp == int(args)
        elif sql_type == "timestamp":
            local = dt.datetime.fromisoformat(text).replace(tzinfo=session_zone)
            assert value == local and value.tzinfo == UTC and col.fsp == int(args), name
        else:
            raise AssertionError(f"no check for {name} {sql_type}")


# zalora/binlog-parser prints one JSON object per query and per row change.
ZALORA_COLUMNS = {  # column order of data/fixtures/test_db.sql (and the binlogs' own DDL)
    "buildings": ("building_no", "building_name", "address"),
    "rooms": ("room_no", "room_name", "building_no"),
    "language": ("language_id", "name", "last_update", "some_field"),
    "departments": ("dept_no", "dept_name"),
    "employees": ("emp_no", "birth_date", "first_name", "last_name"),
}


def _json_objects(text: str) -> list[dict]:
    decoder, objects, i = json.JSONDecoder(), [], 0
    while (i := len(text) - len(text[i:].lstrip())) < len(text):
        obj, i = decoder.raw_decode(text, i)
        objects.append(obj)
    return objects


def _zalora_value(value):
    if isinstance(value, dt.datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _zalora_row(table: str, data: dict) -> dict:
    """A printed row keyed by column position ("(unknown_N)" when the tool lacked names)."""
    names = ZALORA_COLUMNS[table]
    return {int(k[9:-1]) if k.startswith("(unknown_") else names.index(k): v
            for k, v in data["Row"].items()}


def _zalora_records(events, with_queries: bool, with_gtid: bool) -> list[dict]:
    """What the tool prints: queries with an empty GTID, rows with their transaction's GTID."""
    records, open_rows, gtid = [], [], None
    for e in events:
        header = {"Schema": e.schema if isinstance(e, (QueryEvent, RowsEvent)) else None,
                  "Table": "(unknown)",
                  "BinlogMessageTime": dt.datetime.fromtimestamp(e.timestamp, UTC)
                  .strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "BinlogPosition": e.header.log_pos, "XId": 0}
        if with_gtid:
            header["GTID"] = gtid if isinstance(e, RowsEvent) else ""
        if isinstance(e, GtidEvent):
            gtid = e.gtid
        elif isinstance(e, QueryEvent) and e.query not in ("BEGIN", "COMMIT") and with_queries:
            records.append({"Header": header, "Type": "Query", "Query": e.query})
        elif isinstance(e, RowsEvent) and not e.skipped:
            header["Table"] = e.table

            def image(values):
                return {i: _zalora_value(v) for i, v in enumerate(values)}

            for row in e.rows:
                record = {"Header": dict(header), "Type": e.kind.capitalize()}
                if e.kind == "update":
                    record["OldData"], record["NewData"] = image(row[0]), image(row[1])
                else:
                    record["Data"] = image(row)
                records.append(record)
                open_rows.append(record)
        elif isinstance(e, XidEvent):
            for record in open_rows:
                record["Header"]["XId"] = e.xid
            open_rows = []
    return records


ZALORA_JSON = [
    ("fixtures/mysql-bin.01", "fixtures/01.json", None),
    ("fixtures/mysql-bin.01", "fixtures/01-include-table.json", {"buildings"}),
    ("fixtures/mysql-bin.01", "fixtures/01-no-events.json", set()),
    ("fixtures/mysql-bin.02", "fixtures/02.json", None),
    ("fixtures/mysql-bin.03", "fixtures/03.json", None),
    ("fixtures/mysql-bin.05", "fixtures/05.json", None),
    ("fixtures/mysql-bin.06", "fixtures/06.json", None),
    ("fixtures/mysql-bin.07", "fixtures/07.json", None),
    ("gtid-fixtures/mysql-bin.01", "gtid-fixtures/01.json", None),
    ("gtid-fixtures/mysql-bin.01", "gtid-fixtures/01-include-tables.json", {"buildings", "rooms"}),
]


@pytest.mark.parametrize("binlog, printed, tables", ZALORA_JSON)
def test_rows_and_queries_equal_zalora_binlog_parser_json(binlog, printed, tables):
    """Every record the tool printed (queries, and each row with its table, position,
    transaction xid and column values); the include-table runs print rows of those tables only,
    which the decoder's table filter reproduces."""
    table_filter = None if tables is None else (lambda schema, table: table in tables)
    events = decode_all(f"{ZALORA}/{binlog}", table_filter=table_filter)
    ours = _zalora_records(events, with_queries=tables is None,
                           with_gtid=binlog.startswith("gtid-"))
    expected = _json_objects((CORPUS / ZALORA / printed).read_text())
    for record in expected:
        for key in ("Data", "OldData", "NewData"):
            if key in record:
                record[key] = _zalora_row(record["Header"]["Table"], record[key])
    assert ours == expected
    assert tables == set() or expected


def _kingbus_statements() -> list[list[tuple]]:
    """generate_binlog.sql split at each 'flush logs': per binlog, the expected row changes."""
    sql = (CORPUS / KINGBUS / "generate_binlog.sql").read_text()
    files = []
    for chunk in sql.split("flush logs;")[1:]:
        changes = []
        for kind, args in re.findall(r"^(insert into|update|delete from) stu(.*);$", chunk, re.M):
            if kind == "insert into":
                sid, name, age = re.fullmatch(
                    r'\(id,name,age\) values\((\d+),"(\w+)",(\d+)\)', args).groups()
                changes.append(("insert", (int(sid), name, int(age))))
            elif kind == "update":
                age, sid = re.fullmatch(r" set age=(\d+) where id =(\d+)", args).groups()
                changes.append(("update", int(sid), int(age)))
            else:
                changes.append(("delete", int(re.fullmatch(r" where id=(\d+)", args)[1])))
        if changes:
            files.append(changes)
    return files


@pytest.mark.parametrize("binlog, index", [
    ("binlog/mysql_bin.000011", 0), ("binlog/mysql_bin.000012", 1), ("binlog/mysql_bin.000013", 2),
    ("relaylog/flikedev1-c8pyy-relay-bin.000284", 0),
    ("relaylog/flikedev1-c8pyy-relay-bin.000286", 1),
    ("relaylog/flikedev1-c8pyy-relay-bin.000288", 2),
])
def test_kingbus_rows_replay_generate_binlog_sql(binlog, index):
    expected = _kingbus_statements()[index]
    events = only_rows(f"{KINGBUS}/{binlog}")
    assert len(events) == len(expected) == 40
    table: dict = {}
    for event, change in zip(events, expected):
        assert event.kind == change[0] and event.table_map.qualified_name == "ks.stu"
        (row,) = event.rows
        if change[0] == "insert":
            assert row == change[1]
            table[row[0]] = row
        elif change[0] == "update":
            before, after = row
            assert before == table[change[1]] and after == (*before[:2], change[2])
            table[change[1]] = after
        else:
            assert row == table.pop(change[1])


def test_maxwell_replay_binlog_rows_follow_mysql_test_replay_sql():
    """mysql-test-replay.sql: 5 rows per table with uuid() names, then ``update ... set
    name=uuid() where id > 1`` (the binlog holds a second 5-row insert into bac_schema)."""
    sql = (CORPUS / "zendesk__maxwell/src/test/resources/sql/replay/mysql-test-replay.sql").read_text()
    events = decode_all("zendesk__maxwell/src/test/resources/sql/replay/binlog.000004")
    created = {q for e in events if isinstance(e, QueryEvent)
               for q in re.findall(r"CREATE TABLE `(\w+)`", e.query)}
    assert created == set(re.findall(r"CREATE TABLE `(\w+)`", sql))
    uuid1 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-1[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")
    tables: dict = {}
    for event in rows_events(events):
        t = tables.setdefault(event.table, {})
        assert event.schema == "bac_schema"
        if event.kind == "insert":
            for row in event.rows:
                assert uuid1.fullmatch(row[1]) and uuid1.fullmatch(row[2]) and row[3] == 1
                t[row[0]] = row
        else:
            assert event.kind == "update"
            assert sorted(b[0] for b, _ in event.rows) == [i for i in sorted(t) if i > 1]
            for before, after in event.rows:
                assert before == t[before[0]]
                assert after[0] == before[0] and after[2:] == before[2:]
                assert uuid1.fullmatch(after[1]) and after[1] != before[1]
                t[after[0]] = after
    assert {name: sorted(t) for name, t in tables.items()} == {
        "bac_history": [1, 2, 3, 4, 5], "bac_schema": list(range(1, 11))}


def test_myflash_update_chain_continues_across_consecutive_binlogs():
    """MyFlash's test binlogs haha.000007-000009 update the same test4 row in turn: each file's
    before image is the previous file's after image (1 -> 3 -> 13 -> 23). (Its TestCase.md
    scenarios refer to binlogs that are not shipped, haha.000048-000058.)"""
    chain = []
    for n in ("000007", "000008", "000009"):
        (event,) = only_rows(f"Meituan-Dianping__MyFlash/testbinlog/haha.{n}")
        assert event.kind == "update" and event.table_map.qualified_name == "test.test4"
        ((before, after),) = event.rows
        chain.append((before, after))
    assert chain == [((1,), (3,)), ((3,), (13,)), ((13,), (23,))]


MARIADB_POC = "mariadb-operator__mariadb-poc/mariadb-binlog"


def _poc_metadata() -> dict:
    """README.md of mariadb-poc: per binlog, the metadata its Go tool printed."""
    text = (CORPUS / MARIADB_POC / "README.md").read_text()
    out = {}
    for name, block in re.findall(r"Getting binlog metadata from (\S+)\nGot binlog metadata:\n"
                                  r"((?:\w+: .*\n)+)", text):
        out[name] = dict(line.split(": ", 1) for line in block.splitlines())
    return out


POC_FILES = [f"binlogs/domain_id_0/mariadb-repl-bin.0000{n:02d}" for n in (1, 2, 4, 5, 6, 7, 9, 10)]


@pytest.mark.parametrize("name", POC_FILES)
def test_mariadb_binlog_metadata_equals_mariadb_poc_readme(name):
    expected = _poc_metadata()[name]
    events = decode_all(f"{MARIADB_POC}/{name}")
    fde, last = events[0], events[-1]
    gtids = [e.gtid for e in events if isinstance(e, MariadbGtidEvent)]
    (gtid_list,) = [e for e in events if isinstance(e, MariadbGtidListEvent)]
    ours = {
        "ServerId": str(fde.header.server_id), "ServerVersion": fde.server_version,
        "BinlogVersion": str(fde.binlog_version), "LogPos": str(last.header.log_pos),
        "FirstTimestamp": f"{dt.datetime.fromtimestamp(fde.timestamp, UTC):%Y-%m-%dT%H:%M:%SZ}"
                          f"(raw:{fde.timestamp})",
        "LastTimestamp": f"{dt.datetime.fromtimestamp(last.timestamp, UTC):%Y-%m-%dT%H:%M:%SZ}"
                         f"(raw:{last.timestamp})",
        "PreviousGTIDs": ",".join(str(g) for g in gtid_list.gtids) or "<nil>",
        "FirstGTID": gtids[0] if gtids else "<nil>", "LastGTID": gtids[-1] if gtids else "<nil>",
        "RotateEvent": str(isinstance(last, RotateEvent)).lower(),
        "StopEvent": str(isinstance(last, StopEvent)).lower(),
    }
    assert ours == expected
    assert int(ours["LogPos"]) == (CORPUS / MARIADB_POC / name).stat().st_size


def _console_tables(text: str) -> list[list[tuple]]:
    """Result tables of ``mysql> select ...`` in a mysql client transcript, as int tuples."""
    tables = []
    for block in re.findall(r"mysql> select[^\n]*\n((?:[+|][^\n]*\n)+)", text):
        rows = [line for line in block.splitlines() if line.startswith("|")][1:]
        tables.append([tuple(int(c) for c in line.strip("|").split("|")) for line in rows])
    return tables


@pytest.mark.parametrize("case", ["31_update_rows_v2", "32_delete_rows_v2"])
def test_int_table_rows_equal_the_mysql_client_selects_of_the_transcript(case):
    text = read_text(f"{RUST_US}/8.0/{case}/sql.sql").decode("utf-16").replace("\r\n", "\n")
    after_insert, after_update = _console_tables(text)
    events = only_rows(f"{RUST_US}/8.0/{case}/binlog.000001")
    assert [e.kind for e in events] == ["insert", "update", "delete"][:len(events)]
    assert events[0].rows == tuple(after_insert)
    assert events[1].rows == tuple(zip(after_insert, after_update))
    if case.startswith("32"):
        assert events[2].rows == tuple(after_update)
    else:
        assert len(events) == 2


def _sql_literal(text: str, sql_type: str):
    if text == "NULL":
        return None
    if sql_type in ("bigint", "int"):
        return int(text)
    if sql_type.startswith("decimal"):
        scale = int(sql_type.split(",")[1].strip(" )"))
        return Decimal(text).quantize(Decimal(1).scaleb(-scale))
    if sql_type == "date":
        return dt.date.fromisoformat(text.strip("'")[:10])
    return text[1:-1].replace("''", "'")


def test_lineitem_and_demo_rows_replay_the_statements_of_sql_sql():
    """The statements of 02_query_bigger/sql.sql, replayed on the tables they create, give the
    rows of every decoded insert, update and delete (DATE columns keep the date part of
    'YYYY-MM-DD hh:mm:ss' literals; DECIMAL the column's scale)."""
    text = read_text(f"{RUST_US}/8.0/02_query_bigger/sql.sql").decode("utf-16")
    text = "\n".join(line for line in text.replace("\r\n", "\n").split("\n")
                     if not line.startswith("--"))
    statements_ = [s.strip() for s in re.findall(r"(?:'(?:[^']|'')*'|[^;'])+", text) if s.strip()]
    schemas: dict = {}
    tables: dict = {}
    expected = []  # (kind, table, rows) in statement order
    for stmt in statements_:
        if m := re.match(r"CREATE TABLE if not exists `(\w+)`", stmt):
            schemas[m[1]] = re.findall(r"`(\w+)`\s+(\w+(?:\(\d+,\s*\d+\))?)", stmt)
            tables[m[1]] = []
        elif m := re.match(r"INSERT INTO (\w+) \(([^)]*)\)\s*VALUES\s*(.*)", stmt, re.S):
            columns = [c.strip() for c in m[2].split(",")]
            rows = []
            for values in re.findall(r"\(((?:'(?:[^']|'')*'|[^)'])*)\)", m[3]):
                literals = dict(zip(columns, re.findall(r"'(?:[^']|'')*'|[^,\s]+", values)))
                rows.append(tuple(_sql_literal(literals.get(name, "NULL"), sql_type)
                                  for name, sql_type in schemas[m[1]]))
            tables[m[1]] += rows
            expected.append(("insert", m[1], rows))
        elif m := re.match(r"update (\w+) set (.*) where L_ORDERKEY = (\d+)", stmt, re.S):
            names = [n for n, _ in schemas[m[1]]]
            changes = dict(re.findall(r"(\w+) = ('(?:[^']|'')*'|[^,]+)", m[2]))
            pairs = []
            for i, row in enumerate(tables[m[1]]):
                if row[0] == int(m[3]):
                    new = list(row)
                    for name, lit in changes.items():
                        i_col = names.index(name)
                        new[i_col] = _sql_literal(lit.strip(), schemas[m[1]][i_col][1])
                    tables[m[1]][i] = tuple(new)
                    pairs.append((row, tuple(new)))
            expected.append(("update", m[1], pairs))
        elif m := re.match(r"delete from (\w+) where L_ORDERKEY (>=?) (\d+)", stmt):
            bound = int(m[3]) + (m[2] == ">")
            gone = [r for r in tables[m[1]] if r[0] >= bound]
            tables[m[1]] = [r for r in tables[m[1]] if r[0] < bound]
            expected.append(("delete", m[1], gone))
    events = only_rows(f"{RUST_US}/8.0/02_query_bigger/binlog.000733")
    assert [(e.kind, e.table, list(e.rows)) for e in events] == expected


def _replay_boxercrab(sql: str) -> list[tuple]:
    """(kind, rows) of each row change the statements of a mysql-cdc-rs 5.7 sql.sql make on
    `boxercrab` (id AUTO_INCREMENT from 1); changes before ``reset master`` are not in the
    binlog."""
    create = re.search(r"CREATE TABLE `boxercrab` \((.*)\)ENGINE", sql, re.S)[1]
    columns = re.findall(r"^\s+`(\w+)` (\w+(?:\(\d+, \d+\))?)", create, re.M)
    names = [n for n, _ in columns]

    def value(name, literal):
        sql_type = dict(columns)[name]
        if sql_type == "FLOAT":
            return struct.unpack("<f", struct.pack("<f", float(literal)))[0]
        if sql_type == "DOUBLE":
            return float(literal)
        if sql_type.startswith("DECIMAL"):
            return Decimal(literal).quantize(Decimal(1).scaleb(-int(sql_type.split(",")[1][:-1])))
        return literal.strip("'")

    table, changes = [], []
    for stmt in (s.strip() for s in sql.split(";")):
        if m := re.match(r"INSERT INTO `boxercrab` \(([^)]*)\) VALUES \((.*)\)$", stmt):
            given = dict(zip((c.strip("` ") for c in m[1].split(",")),
                             (v.strip() for v in m[2].split(","))))
            row = tuple(len(table) + 1 if n == "id" else value(n, given[n]) for n in names)
            table.append(row)
            changes.append(("insert", (row,)))
        elif m := re.match(r"UPDATE boxercrab set (.*)$", stmt):
            new = dict((k.strip(), v.strip()) for k, v in (a.split("=") for a in m[1].split(",")))
            updated = [tuple(value(n, new[n]) if n in new else v for n, v in zip(names, row))
                       for row in table]
            changes.append(("update", tuple(zip(table, updated))))
            table = updated
        elif stmt == "DELETE FROM `boxercrab`":
            changes.append(("delete", tuple(table)))
            table = []
        elif stmt == "reset master":
            changes = []
    return changes


@pytest.mark.parametrize("case", ["16_xid", "19_table_map", "29_row_query", "30_write_rows_v2",
                                  "31_update_rows_v2", "32_delete_rows_v2",
                                  "33_35_gtid_prev_gtid", "34_anonymous_gtid"])
def test_boxercrab_rows_replay_the_statements_of_sql_sql(case):
    expected = _replay_boxercrab((CORPUS / RUST_US / "5.7" / case / "sql.sql").read_text())
    events = only_rows(f"{RUST_US}/5.7/{case}/log.bin")
    assert [(e.kind, e.rows) for e in events] == expected and expected


# ----------------------------------------------------------------------------------------------
# 3. MariaDB 10.0 fractional TIMESTAMP(n): the precision is only in the table definition

def test_mariadb_10_0_fractional_timestamp_without_schema_fails_naming_column_and_remedy():
    with pytest.raises(CorruptEventError) as info:
        for _ in read_binlog_file(CORPUS / TIFLOW):
            pass
    message = str(info.value)
    assert (info.value.source, info.value.offset) == ("mysql-bin.000001", 1819)
    assert "steven.t " in message and "columns @2 " in message
    assert "pre-10.1 MariaDB temporal format" in message
    assert "ColumnSchema.datetime_precision" in message


def test_mariadb_10_0_schema_for_one_table_decodes_that_table_and_stops_at_the_next():
    # only `t` is described: its rows decode, then t2 (timestamp(4)) needs its own schema
    decoded = []
    with pytest.raises(CorruptEventError) as info:
        only_t = {("steven", "t"): TIFLOW_SCHEMAS[("steven", "t")]}
        for event in read_binlog_file(CORPUS / TIFLOW, schemas=only_t):
            decoded.append(event)
    assert info.value.offset == 2418 and "steven.t2 " in str(info.value)
    (t_rows,) = [e for e in rows_events(decoded) if e.table == "t"]
    assert t_rows.rows == ((1, dt.datetime(2022, 5, 16, 14, 53, 10, tzinfo=UTC)),)


def test_mariadb_10_0_fractional_timestamps_decode_with_the_table_schemas():
    events = decode_all(TIFLOW, schemas=TIFLOW_SCHEMAS)
    assert len(events) == sum(entry(TIFLOW)["events"].values())
    rows = [e for e in rows_events(events) if e.schema == "steven"]
    # every row was written by `insert ... values (n, now())`: d is the event's own second
    # (the reference decode prints the event at 1819 as "#220516 14:53:10"); fraction .000
    expected_precision = {"t": 3, "t1": None, "t2": 4, "t3": None, "t5": 1, "t6": 4}
    seen = []
    for event in rows:
        (row,) = event.rows
        when = dt.datetime.fromtimestamp(event.timestamp, UTC)
        assert row[1] == when and row[1].microsecond == 0, event.pos
        d = event.table_map.columns[1]
        assert d.hires_fsp == expected_precision[event.table]
        described = ("steven", event.table) in TIFLOW_SCHEMAS  # t1, t3: plain TIMESTAMP
        assert event.table_map.column_names == (("id", "d") if described else ("@1", "@2"))
        assert event.table_map.names_from == ("schema" if described else "positional")
        seen.append((event.pos, event.table, row[0]))
    assert seen == [(1819, "t", 1), (2118, "t1", 1), (2418, "t2", 1), (2693, "t3", 1),
                    (2840, "t3", 2), (3267, "t5", 1), (3569, "t6", 1)]
    assert rows[0].rows[0][1] == dt.datetime(2022, 5, 16, 14, 53, 10, tzinfo=UTC)
