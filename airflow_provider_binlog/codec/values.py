"""Decoding of single column values as MySQL stores them in row images.

Temporal values become ``datetime.date`` / ``datetime.datetime`` / ``datetime.timedelta``.
Zero and invalid dates (``0000-00-00``, ``2020-02-30`` under ALLOW_INVALID_DATES) cannot be
represented by ``datetime``; they are returned as ``str`` exactly as MySQL prints them, so no
value is lost and none crashes the decoder. TIMESTAMP values are timezone-aware UTC datetimes.
"""
from __future__ import annotations

import datetime as _dt
import struct
from typing import Union

from ._bytes import Buffer
from .binary_decimal import decode_binary_decimal as decode_decimal  # noqa: F401 (re-export)

UTC = _dt.timezone.utc
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = _dt.timedelta(microseconds=1)

_U32BE = struct.Struct(">I")
_U16BE = struct.Struct(">H")


def format_fraction(micro: int, fsp: int) -> str:
    if fsp <= 0:
        return ""
    return "." + ("%06d" % micro)[:fsp]


def _date_or_text(y: int, m: int, d: int) -> Union[_dt.date, str]:
    try:
        return _dt.date(y, m, d)
    except ValueError:
        return "%04d-%02d-%02d" % (y, m, d)


def _datetime_or_text(y: int, m: int, d: int, hh: int, mi: int, ss: int, micro: int,
                      fsp: int) -> Union[_dt.datetime, str]:
    try:
        return _dt.datetime(y, m, d, hh, mi, ss, micro)
    except ValueError:
        return "%04d-%02d-%02d %02d:%02d:%02d%s" % (y, m, d, hh, mi, ss, format_fraction(micro, fsp))


def read_fraction(buf: Buffer, p: int, fsp: int) -> tuple[int, int]:
    """Fractional seconds stored big-endian in (fsp+1)//2 bytes; returns (microseconds, new p)."""
    if fsp <= 0:
        return 0, p
    if fsp <= 2:
        return buf[p] * 10000, p + 1
    if fsp <= 4:
        return _U16BE.unpack_from(buf, p)[0] * 100, p + 2
    return int.from_bytes(buf[p:p + 3], "big"), p + 3


def decode_date(buf: Buffer, p: int) -> tuple[Union[_dt.date, str], int]:
    v = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)
    return _date_or_text(v >> 9, (v >> 5) & 15, v & 31), p + 3


def decode_datetime2(buf: Buffer, p: int, fsp: int) -> tuple[Union[_dt.datetime, str], int]:
    v = int.from_bytes(buf[p:p + 5], "big") - 0x8000000000
    p += 5
    micro = 0
    if fsp:
        micro, p = read_fraction(buf, p, fsp)
    if v < 0:  # not produced by MySQL for valid data; keep it printable
        v = -v
        sign = "-"
    else:
        sign = ""
    ymd = v >> 17
    ym = ymd >> 5
    hms = v & 0x1FFFF
    y, m = divmod(ym, 13)
    value = _datetime_or_text(y, m, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, micro, fsp)
    if sign:
        value = sign + (value if isinstance(value, str) else value.isoformat(" "))
    return value, p


def decode_timestamp2(buf: Buffer, p: int, fsp: int) -> tuple[Union[_dt.datetime, str], int]:
    sec = _U32BE.unpack_from(buf, p)[0]
    p += 4
    micro = 0
    if fsp:
        micro, p = read_fraction(buf, p, fsp)
    if sec == 0 and micro == 0:
        return "0000-00-00 00:00:00" + format_fraction(0, fsp), p
    return EPOCH + _dt.timedelta(seconds=sec, microseconds=micro), p


def decode_time2(buf: Buffer, p: int, fsp: int) -> tuple[_dt.timedelta, int]:
    """TIME2 (MySQL 5.6.4+): returns a signed timedelta (±838:59:59.999999)."""
    if fsp == 0:
        packed = (int.from_bytes(buf[p:p + 3], "big") - 0x800000) << 24
        p += 3
    elif fsp <= 2:
        intpart = int.from_bytes(buf[p:p + 3], "big") - 0x800000
        frac = buf[p + 3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        packed = (intpart << 24) + frac * 10000
        p += 4
    elif fsp <= 4:
        intpart = int.from_bytes(buf[p:p + 3], "big") - 0x800000
        frac = _U16BE.unpack_from(buf, p + 3)[0]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        packed = (intpart << 24) + frac * 100
        p += 5
    else:
        packed = int.from_bytes(buf[p:p + 6], "big") - 0x800000000000
        p += 6
    negative = packed < 0
    if negative:
        packed = -packed
    hms = packed >> 24
    micro = packed & 0xFFFFFF
    hours = (hms >> 12) & 0x3FF
    minutes = (hms >> 6) & 63
    seconds = hms & 63
    delta = _dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micro)
    return (-delta if negative else delta), p


def decode_time_v1(buf: Buffer, p: int) -> tuple[_dt.timedelta, int]:
    """Old TIME (before 5.6.4): 3-byte signed integer HHMMSS."""
    v = int.from_bytes(buf[p:p + 3], "little", signed=True)
    negative = v < 0
    v = abs(v)
    hh, rest = divmod(v, 10000)
    mi, ss = divmod(rest, 100)
    delta = _dt.timedelta(hours=hh, minutes=mi, seconds=ss)
    return (-delta if negative else delta), p + 3


def decode_datetime_v1(buf: Buffer, p: int) -> tuple[Union[_dt.datetime, str], int]:
    """Old DATETIME (before 5.6.4): 8-byte integer YYYYMMDDhhmmss."""
    v = int.from_bytes(buf[p:p + 8], "little")
    date_part, time_part = divmod(v, 1000000)
    y, md = divmod(date_part, 10000)
    m, d = divmod(md, 100)
    hh, ms = divmod(time_part, 10000)
    mi, ss = divmod(ms, 100)
    return _datetime_or_text(y, m, d, hh, mi, ss, 0, 0), p + 8


def decode_timestamp_v1(buf: Buffer, p: int) -> tuple[Union[_dt.datetime, str], int]:
    sec = int.from_bytes(buf[p:p + 4], "little")
    if sec == 0:
        return "0000-00-00 00:00:00", p + 4
    return EPOCH + _dt.timedelta(seconds=sec), p + 4


def format_time(value: _dt.timedelta, fsp: int = 6) -> str:
    """Render a TIME value as MySQL prints it: [-]HH:MM:SS[.fraction]."""
    total_us = value.days * 86400_000000 + value.seconds * 1000000 + value.microseconds
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    secs, micro = divmod(total_us, 1000000)
    hh, rest = divmod(secs, 3600)
    mi, ss = divmod(rest, 60)
    return "%s%02d:%02d:%02d%s" % (sign, hh, mi, ss, format_fraction(micro, fsp))


def format_datetime(value: Union[_dt.datetime, str], fsp: int = 0) -> str:
    """Render DATETIME/TIMESTAMP as MySQL prints it (UTC for TIMESTAMP)."""
    if isinstance(value, str):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return "%04d-%02d-%02d %02d:%02d:%02d%s" % (
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        format_fraction(value.microsecond, fsp))


# MariaDB 5.3-10.0 fractional-second temporals are logged with the old type codes (TIMESTAMP,
# DATETIME, TIME) and no metadata: their precision must come from the table schema.
_HIRES_DATETIME_BYTES = (5, 6, 6, 7, 7, 7, 8)
_HIRES_TIME_BYTES = (3, 4, 4, 5, 5, 5, 6)
_HIRES_TIME_ZERO = 3020400 * 1000000  # (TIME_MAX_VALUE_SECONDS + 1) in microseconds


def decode_mariadb_hires_timestamp(buf: Buffer, p: int, dec: int) -> tuple[Union[_dt.datetime, str], int]:
    sec = _U32BE.unpack_from(buf, p)[0]
    n = (dec + 1) // 2
    micro = int.from_bytes(buf[p + 4:p + 4 + n], "big") * 10 ** (6 - dec)
    if sec == 0 and micro == 0:
        return "0000-00-00 00:00:00" + format_fraction(0, dec), p + 4 + n
    return EPOCH + _dt.timedelta(seconds=sec, microseconds=micro), p + 4 + n


def decode_mariadb_hires_datetime(buf: Buffer, p: int, dec: int) -> tuple[Union[_dt.datetime, str], int]:
    n = _HIRES_DATETIME_BYTES[dec]
    v = int.from_bytes(buf[p:p + n], "big") * 10 ** (6 - dec)
    v, micro = divmod(v, 1000000)
    v, ss = divmod(v, 60)
    v, mi = divmod(v, 60)
    v, hh = divmod(v, 24)
    v, d = divmod(v, 32)
    y, m = divmod(v, 13)
    return _datetime_or_text(y, m, d, hh, mi, ss, micro, dec), p + n


def decode_mariadb_hires_time(buf: Buffer, p: int, dec: int) -> tuple[_dt.timedelta, int]:
    n = _HIRES_TIME_BYTES[dec]
    scale = 10 ** (6 - dec)
    v = int.from_bytes(buf[p:p + n], "big") - _HIRES_TIME_ZERO // scale
    return _dt.timedelta(microseconds=v * scale), p + n
