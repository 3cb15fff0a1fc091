"""MySQL's global transaction identifiers: a GTID is ``uuid[:tag]:gno``; a server's state is a
*set* of them (``MysqlGtidSet``), printed as ``uuid:1-5:7:tag:1-3,uuid2:1-9``. The binary form
is the body of PREVIOUS_GTIDS_LOG_EVENT and the payload of COM_BINLOG_DUMP_GTID, in the classic
layout or the tagged layout of MySQL 8.3+ (see :mod:`.gtid` for what both flavors share)."""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from airflow_provider_binlog.codec.errors import CorruptEventError
from airflow_provider_binlog.codec.gtid_intervals import (Interval, contains_gno, intersect_intervals,
                                                           merge_intervals, subtract_intervals)

MAX_GNO = (1 << 63) - 1
_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1

_UUID_DASHED_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_UUID_PLAIN_RE = re.compile(r"[0-9a-f]{32}")
# MySQL 8.4 tag rule: 1-32 characters, letters/digits/underscore, not starting
# with a digit; tags are case-insensitive and stored lowercase.
_TAG_RE = re.compile(r"[a-z_][a-z0-9_]{0,31}")
_INTERVAL_RE = re.compile(r"(\d+)(?:\s*-\s*(\d+))?")

# (uuid, tag) with tag "" for untagged GTIDs: identifies one GNO sequence.
_Tsid = tuple[str, str]

# --------------------------------------------------------------------------
# MySQL: single GTID
# --------------------------------------------------------------------------

def normalize_uuid(text: str) -> str:
    """Return the canonical lowercase 8-4-4-4-12 form of a server UUID."""
    value = text.strip().lower()
    if _UUID_DASHED_RE.fullmatch(value):
        return value
    if _UUID_PLAIN_RE.fullmatch(value):
        return f"{value[:8]}-{value[8:12]}-{value[12:16]}-{value[16:20]}-{value[20:]}"
    raise ValueError(f"invalid server UUID {text!r}: expected 8-4-4-4-12 hex digits, "
                     f"e.g. 3e11fa47-71ca-11e1-9e33-c80aa9429562")


def normalize_tag(tag: str | None) -> str | None:
    """Return a GTID tag in stored form (lowercase), or None for untagged."""
    if tag is None or tag == "":
        return None
    value = tag.strip().lower()
    if not _TAG_RE.fullmatch(value):
        raise ValueError(f"invalid GTID tag {tag!r}: 1-32 letters, digits or '_', "
                         f"not starting with a digit")
    return value


def _check_gno(gno: int) -> int:
    if isinstance(gno, bool) or not isinstance(gno, int):
        raise ValueError(f"GTID transaction number must be an integer, got {gno!r}")
    if not 1 <= gno <= MAX_GNO:
        raise ValueError(f"GTID transaction number {gno} out of range 1..{MAX_GNO}")
    return gno


@dataclass(frozen=True)
class MysqlGtid:
    """One MySQL transaction id: ``uuid:gno`` or ``uuid:tag:gno``."""

    uuid: str
    tag: str | None
    gno: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "uuid", normalize_uuid(self.uuid))
        object.__setattr__(self, "tag", normalize_tag(self.tag))
        _check_gno(self.gno)

    @classmethod
    def parse(cls, text: str) -> "MysqlGtid":
        parts = [p.strip() for p in text.strip().split(":")]
        if len(parts) == 2:
            uuid, tag, gno = parts[0], None, parts[1]
        elif len(parts) == 3:
            uuid, tag, gno = parts
        else:
            raise ValueError(f"invalid GTID {text!r}: expected uuid:gno or uuid:tag:gno")
        if not gno.isdigit():
            raise ValueError(f"invalid GTID {text!r}: transaction number {gno!r} is not a number")
        return cls(uuid, tag, int(gno))

    def __str__(self) -> str:
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"


# --------------------------------------------------------------------------
# MySQL serialization library varints (tagged formats, MySQL 8.3+)
# --------------------------------------------------------------------------

def _read_varlen_uint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode one unsigned varint; the count of trailing 1 bits of the first
    byte + 1 is the encoded length, 9 bytes (first byte 0xFF) hold a full u64."""
    if pos >= end:
        raise CorruptEventError("serialized field ends early: missing integer")
    first = buf[pos]
    size = 1
    while size <= 8 and first & (1 << (size - 1)):
        size += 1
    if pos + size > end:
        raise CorruptEventError(f"serialized field ends early: {size}-byte integer at {pos}")
    if size == 9:
        return int.from_bytes(buf[pos + 1:pos + 9], "little"), pos + 9
    return int.from_bytes(buf[pos:pos + size], "little") >> size, pos + size


def _read_varlen_int(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    raw, pos = _read_varlen_uint(buf, pos, end)
    return (-(raw >> 1) - 1 if raw & 1 else raw >> 1), pos


def _read_tag(buf: bytes, pos: int, end: int, what: str) -> tuple[str, int]:
    """Decode a varint-length ASCII GTID tag at ``pos`` in stored form ("" when empty); return it
    and the offset after it. ``what`` names the enclosing structure in error messages."""
    length, pos = _read_varlen_uint(buf, pos, end)
    if pos + length > end:
        raise CorruptEventError(f"{what} ends inside a GTID tag")
    raw_tag = buf[pos:pos + length]
    try:
        tag = normalize_tag(raw_tag.decode("ascii")) or ""
    except (UnicodeDecodeError, ValueError):
        raise CorruptEventError(f"invalid GTID tag {raw_tag!r} in {what}") from None
    return tag, pos + length


def _write_varlen_uint(value: int) -> bytes:
    if not 0 <= value <= _U64_MAX:
        raise ValueError(f"value {value} does not fit an unsigned 64-bit integer")
    for size in range(1, 9):
        if value < 1 << (7 * size):
            return ((value << size) | ((1 << (size - 1)) - 1)).to_bytes(size, "little")
    return b"\xff" + value.to_bytes(8, "little")


# --------------------------------------------------------------------------
# MySQL: GTID set
# --------------------------------------------------------------------------

_FORMAT_UNTAGGED = 0
_FORMAT_TAGGED = 1


class MysqlGtidSet:
    """Immutable set of MySQL GTIDs, e.g. ``uuid:1-5:7:tag:1-3,uuid2:1-9``.

    ``MysqlGtidSet(text)`` parses what users type and what servers print
    (``gtid_executed``, ``SHOW BINARY LOG STATUS``); ``str()`` gives the
    canonical form MySQL prints, with "," between UUIDs.
    """

    __slots__ = ("_sids", "_hash")
    _sids: tuple[tuple[_Tsid, tuple[Interval, ...]], ...]
    _hash: int

    def __init__(self, text: "str | MysqlGtidSet" = "") -> None:
        if isinstance(text, MysqlGtidSet):
            self._sids, self._hash = text._sids, text._hash
            return
        if not isinstance(text, str):
            raise TypeError(f"MysqlGtidSet() takes GTID set text, got {type(text).__name__}")
        self._set_from(_parse_set_text(text) if text else {})

    # -- construction ------------------------------------------------------

    def _set_from(self, mapping: dict[_Tsid, Iterable[Interval]]) -> None:
        sids = []
        for tsid in sorted(mapping):
            merged = merge_intervals(mapping[tsid])
            if merged:
                sids.append((tsid, merged))
        self._sids = tuple(sids)
        self._hash = hash(self._sids)

    @classmethod
    def _from_mapping(cls, mapping: dict[_Tsid, Iterable[Interval]]) -> "MysqlGtidSet":
        obj = cls.__new__(cls)
        obj._set_from(mapping)
        return obj

    @classmethod
    def parse(cls, text: str) -> "MysqlGtidSet":
        return cls(text)

    @classmethod
    def from_gtids(cls, gtids: Iterable[MysqlGtid]) -> "MysqlGtidSet":
        mapping: dict[_Tsid, list[Interval]] = {}
        for g in gtids:
            mapping.setdefault((g.uuid, g.tag or ""), []).append((g.gno, g.gno))
        return cls._from_mapping(mapping)

    @classmethod
    def from_ranges(cls, ranges: Iterable[tuple[str, str | None, int, int]]) -> "MysqlGtidSet":
        """Build from ``(uuid, tag, first, last)`` tuples, ``last`` inclusive."""
        mapping: dict[_Tsid, list[Interval]] = {}
        for uuid, tag, first, last in ranges:
            _check_gno(first)
            _check_gno(last)
            if first > last:
                raise ValueError(f"invalid GTID range {first}-{last}: start is after end")
            mapping.setdefault((normalize_uuid(uuid), normalize_tag(tag) or ""), []).append((first, last))
        return cls._from_mapping(mapping)

    # -- inspection --------------------------------------------------------

    def ranges(self) -> Iterator[tuple[str, str | None, int, int]]:
        """Yield ``(uuid, tag, first, last)`` in canonical order, ``last`` inclusive."""
        for (uuid, tag), intervals in self._sids:
            for first, last in intervals:
                yield uuid, tag or None, first, last

    @property
    def uuids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(uuid for (uuid, _), _ in self._sids))

    def is_empty(self) -> bool:
        return not self._sids

    def count(self) -> int:
        """Number of transactions in the set (may exceed ``sys.maxsize``)."""
        return sum(last - first + 1 for _, ivs in self._sids for first, last in ivs)

    def __len__(self) -> int:
        return self.count()

    def __bool__(self) -> bool:
        return bool(self._sids)

    # -- set algebra -------------------------------------------------------

    def _as_dict(self) -> dict[_Tsid, tuple[Interval, ...]]:
        return dict(self._sids)

    def union(self, other: "MysqlGtidSet") -> "MysqlGtidSet":
        other = _coerce_set(other)
        mapping: dict[_Tsid, list[Interval]] = {k: list(v) for k, v in self._sids}
        for tsid, ivs in other._sids:
            mapping.setdefault(tsid, []).extend(ivs)
        return self._from_mapping(mapping)

    def intersection(self, other: "MysqlGtidSet") -> "MysqlGtidSet":
        theirs = _coerce_set(other)._as_dict()
        return self._from_mapping({tsid: intersect_intervals(ivs, theirs[tsid])
                                   for tsid, ivs in self._sids if tsid in theirs})

    def subtract(self, other: "MysqlGtidSet") -> "MysqlGtidSet":
        theirs = _coerce_set(other)._as_dict()
        return self._from_mapping({tsid: subtract_intervals(ivs, theirs.get(tsid, ()))
                                   for tsid, ivs in self._sids})

    __or__ = union
    __and__ = intersection
    __sub__ = subtract

    def add(self, gtid: MysqlGtid | str) -> "MysqlGtidSet":
        if isinstance(gtid, str):
            gtid = MysqlGtid.parse(gtid)
        return self.union(MysqlGtidSet.from_gtids([gtid]))

    def issubset(self, other: "MysqlGtidSet") -> bool:
        return self.subtract(other).is_empty()

    def contains(self, item: "MysqlGtid | MysqlGtidSet | str") -> bool:
        """True if a GTID is in the set, or a whole set is a subset of it.
        A string is read as a GTID set (a single GTID is a valid set)."""
        if isinstance(item, MysqlGtid):
            ivs = self._as_dict().get((item.uuid, item.tag or ""))
            return ivs is not None and contains_gno(ivs, item.gno)
        return _coerce_set(item).issubset(self)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, (MysqlGtid, MysqlGtidSet, str)):
            return False
        return self.contains(item)

    # -- value semantics ---------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MysqlGtidSet):
            return NotImplemented
        return self._sids == other._sids

    def __hash__(self) -> int:
        return self._hash

    def to_string(self, separator: str = ",") -> str:
        """Canonical text; MySQL itself uses ``",\\n"`` between UUIDs."""
        per_uuid: dict[str, list[str]] = {}
        for (uuid, tag), intervals in self._sids:
            parts = per_uuid.setdefault(uuid, [uuid])
            if tag:
                parts.append(tag)
            parts.extend(str(a) if a == b else f"{a}-{b}" for a, b in intervals)
        return separator.join(":".join(parts) for parts in per_uuid.values())

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"MysqlGtidSet({self.to_string()!r})"

    # -- binary form -------------------------------------------------------

    @property
    def has_tags(self) -> bool:
        return any(tag for (_, tag), _ in self._sids)

    def encode(self, tagged: bool | None = None) -> bytes:
        """Encode as in PREVIOUS_GTIDS_LOG_EVENT / COM_BINLOG_DUMP_GTID.

        ``tagged=None`` picks the classic format unless a tag is present (what
        servers do); the classic format cannot carry tags.
        """
        if tagged is None:
            tagged = self.has_tags
        elif not tagged and self.has_tags:
            raise ValueError("a GTID set with tags can only be encoded in the tagged format")
        n_sids = len(self._sids)
        if tagged:
            header = (_FORMAT_TAGGED << 56) | (n_sids << 8) | _FORMAT_TAGGED
        else:
            header = n_sids
        out = [struct.pack("<Q", header)]
        for (uuid, tag), intervals in self._sids:
            out.append(bytes.fromhex(uuid.replace("-", "")))
            if tagged:
                raw_tag = tag.encode("ascii")
                out.append(_write_varlen_uint(len(raw_tag)))
                out.append(raw_tag)
            out.append(struct.pack("<Q", len(intervals)))
            for first, last in intervals:
                out.append(struct.pack("<QQ", first, last + 1))
        return b"".join(out)

    @classmethod
    def decode(cls, buf: bytes) -> "MysqlGtidSet":
        """Decode a PREVIOUS_GTIDS_LOG_EVENT body (checksum removed), either
        format.  Raises ``CorruptEventError`` on malformed or trailing bytes."""
        gtid_set, end = cls.decode_prefix(buf)
        if end != len(buf):
            raise CorruptEventError(f"GTID set encoding has {len(buf) - end} unexpected trailing bytes")
        return gtid_set

    @classmethod
    def decode_prefix(cls, buf: bytes, offset: int = 0) -> tuple["MysqlGtidSet", int]:
        """Decode an encoded GTID set starting at ``offset``; return it and the
        offset just after it."""
        buf = bytes(buf)
        end = len(buf)
        if offset + 8 > end:
            raise CorruptEventError("GTID set encoding shorter than its 8-byte header")
        (header,) = struct.unpack_from("<Q", buf, offset)
        pos = offset + 8
        fmt = header >> 56
        if fmt == _FORMAT_UNTAGGED:
            tagged, n_sids = False, header
        elif fmt == _FORMAT_TAGGED and header & 0xFF == _FORMAT_TAGGED:
            tagged, n_sids = True, (header >> 8) & ((1 << 48) - 1)
        else:
            raise CorruptEventError(f"unknown GTID set encoding format (header 0x{header:016x})")
        min_sid_size = 16 + 8 + (1 if tagged else 0)
        if n_sids * min_sid_size > end - pos:
            raise CorruptEventError(f"GTID set declares {n_sids} UUIDs but has only {end - pos} bytes")
        mapping: dict[_Tsid, list[Interval]] = {}
        for _ in range(n_sids):
            if pos + 16 > end:
                raise CorruptEventError("GTID set encoding ends inside a UUID")
            raw_uuid = buf[pos:pos + 16].hex()
            pos += 16
            uuid = f"{raw_uuid[:8]}-{raw_uuid[8:12]}-{raw_uuid[12:16]}-{raw_uuid[16:20]}-{raw_uuid[20:]}"
            tag = ""
            if tagged:
                tag, pos = _read_tag(buf, pos, end, "GTID set encoding")
            if pos + 8 > end:
                raise CorruptEventError("GTID set encoding ends before an interval count")
            (n_intervals,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
            if n_intervals * 16 > end - pos:
                raise CorruptEventError(f"GTID set declares {n_intervals} intervals for {uuid} "
                                        f"but has only {end - pos} bytes")
            intervals = mapping.setdefault((uuid, tag), [])
            for _ in range(n_intervals):
                start, stop = struct.unpack_from("<QQ", buf, pos)
                pos += 16
                if not 1 <= start < stop <= MAX_GNO + 1:
                    raise CorruptEventError(f"invalid GTID interval [{start}, {stop}) for {uuid}")
                intervals.append((start, stop - 1))
        return cls._from_mapping(mapping), pos


def _coerce_set(value: "MysqlGtidSet | MysqlGtid | str") -> MysqlGtidSet:
    if isinstance(value, MysqlGtidSet):
        return value
    if isinstance(value, MysqlGtid):
        return MysqlGtidSet.from_gtids([value])
    if isinstance(value, str):
        return MysqlGtidSet(value)
    raise TypeError(f"expected a MysqlGtidSet, MysqlGtid or str, got {type(value).__name__}")


def _parse_set_text(text: str) -> dict[_Tsid, list[Interval]]:
    mapping: dict[_Tsid, list[Interval]] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue  # tolerate ",\n" separators and a trailing comma
        parts = [p.strip() for p in item.split(":")]
        uuid = normalize_uuid(parts[0])
        if len(parts) == 1:
            raise ValueError(f"invalid GTID set item {item!r}: the UUID must be followed by "
                             f"':' and transaction numbers, e.g. {uuid}:1-5")
        tag = ""
        tag_has_intervals = True
        for part in parts[1:]:
            m = _INTERVAL_RE.fullmatch(part)
            if m:
                first = int(m.group(1))
                last = int(m.group(2)) if m.group(2) is not None else first
                if first < 1 or last > MAX_GNO or first > last:
                    raise ValueError(f"invalid GTID range {part!r} in {item!r}: need "
                                     f"1 <= start <= end <= {MAX_GNO}")
                mapping.setdefault((uuid, tag), []).append((first, last))
                tag_has_intervals = True
                continue
            if not tag_has_intervals:
                raise ValueError(f"invalid GTID set item {item!r}: tag {tag!r} has no transaction numbers")
            try:
                tag = normalize_tag(part) or ""
            except ValueError:
                raise ValueError(f"invalid GTID set item {item!r}: {part!r} is neither a "
                                 f"transaction range like 1-5 nor a tag") from None
            if not tag:
                raise ValueError(f"invalid GTID set item {item!r}: empty element between ':'")
            tag_has_intervals = False
        if not tag_has_intervals:
            raise ValueError(f"invalid GTID set item {item!r}: tag {tag!r} has no transaction numbers")
    return mapping


# --------------------------------------------------------------------------
# MySQL: GTID_TAGGED_LOG_EVENT body (type 42)
# --------------------------------------------------------------------------

_UNDEFINED_SERVER_VERSION = 999999

# Field ids of the serialized Gtid_event, in declaration order.
_F_FLAGS, _F_SID, _F_GNO, _F_TAG, _F_LAST_COMMITTED, _F_SEQUENCE_NUMBER = range(6)
_F_IMMEDIATE_TS, _F_ORIGINAL_TS, _F_TX_LENGTH = 6, 7, 8
_F_IMMEDIATE_VERSION, _F_ORIGINAL_VERSION, _F_TICKET = 9, 10, 11

_UNSIGNED_FIELDS = {
    _F_FLAGS: "flags",
    _F_IMMEDIATE_TS: "immediate_commit_timestamp",
    _F_ORIGINAL_TS: "original_commit_timestamp",
    _F_TX_LENGTH: "transaction_length",
    _F_IMMEDIATE_VERSION: "immediate_server_version",
    _F_ORIGINAL_VERSION: "original_server_version",
    _F_TICKET: "commit_group_ticket",
}
_SIGNED_FIELDS = {_F_GNO: "gno", _F_LAST_COMMITTED: "last_committed", _F_SEQUENCE_NUMBER: "sequence_number"}


def decode_gtid_tagged_event_body(buf: bytes) -> dict[str, Any]:
    """Decode the body (checksum removed) of a GTID_TAGGED_LOG_EVENT.

    The body is a MySQL serialization library message: a format version byte,
    the message size (counted from the version byte), the last non-ignorable
    field id, then ``field_id value`` pairs with varint-encoded integers.
    Fields left out by the server take MySQL's defaults (original values equal
    the immediate ones).  Commit timestamps are microseconds since the epoch.
    """
    buf = bytes(buf)
    if not buf:
        raise CorruptEventError("empty GTID_TAGGED_LOG_EVENT body")
    version = buf[0]
    size, pos = _read_varlen_uint(buf, 1, len(buf))
    if size > len(buf) or size < pos:
        raise CorruptEventError(f"GTID_TAGGED_LOG_EVENT declares {size} bytes, body has {len(buf)}")
    end = size
    last_non_ignorable, pos = _read_varlen_uint(buf, pos, end)
    values: dict[str, Any] = {}
    while pos < end:
        field_id, pos = _read_varlen_uint(buf, pos, end)
        if field_id in _UNSIGNED_FIELDS:
            values[_UNSIGNED_FIELDS[field_id]], pos = _read_varlen_uint(buf, pos, end)
        elif field_id in _SIGNED_FIELDS:
            values[_SIGNED_FIELDS[field_id]], pos = _read_varlen_int(buf, pos, end)
        elif field_id == _F_SID:
            raw = bytearray()
            for _ in range(16):
                byte, pos = _read_varlen_uint(buf, pos, end)
                if byte > 0xFF:
                    raise CorruptEventError(f"UUID byte value {byte} out of range in GTID_TAGGED_LOG_EVENT")
                raw.append(byte)
            values["uuid"] = normalize_uuid(raw.hex())
        elif field_id == _F_TAG:
            values["tag"], pos = _read_tag(buf, pos, end, "GTID_TAGGED_LOG_EVENT")
        elif field_id <= last_non_ignorable:
            raise CorruptEventError(f"GTID_TAGGED_LOG_EVENT has unknown mandatory field {field_id}",
                                    hint="the server is newer than this decoder; upgrade airflow-provider-binlog")
        else:
            break  # fields newer than this decoder, marked ignorable; their types are unknown
    for required in ("uuid", "gno"):
        if required not in values:
            raise CorruptEventError(f"GTID_TAGGED_LOG_EVENT lacks the {required} field")
    try:
        gtid = MysqlGtid(values["uuid"], values.get("tag"), values["gno"])
    except ValueError as exc:
        raise CorruptEventError(f"invalid GTID in GTID_TAGGED_LOG_EVENT: {exc}") from None
    immediate_ts = values.get("immediate_commit_timestamp", 0)
    immediate_version = values.get("immediate_server_version", _UNDEFINED_SERVER_VERSION)
    return {
        "serialization_version": version,
        "flags": values.get("flags", 0),
        "uuid": gtid.uuid,
        "tag": gtid.tag,
        "gno": gtid.gno,
        "gtid": gtid,
        "last_committed": values.get("last_committed", 0),
        "sequence_number": values.get("sequence_number", 0),
        "immediate_commit_timestamp": immediate_ts,
        "original_commit_timestamp": values.get("original_commit_timestamp", immediate_ts),
        "transaction_length": values.get("transaction_length", 0),
        "immediate_server_version": immediate_version,
        "original_server_version": values.get("original_server_version", immediate_version),
        "commit_group_ticket": values.get("commit_group_ticket", 0),
    }
