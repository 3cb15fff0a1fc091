"""Collation ids -> character sets -> Python codecs, and value decoding, compared with what a
live MariaDB server reports for the same ids and bytes (the ``mariadb`` fixture).  The tables
and the decoding without a server: ``tests/unit/codec/test_charsets.py``."""
from __future__ import annotations

import pytest

from airflow_provider_binlog.codec.charsets import MARIADB_COLLATIONS, decode_text, python_codec


# --------------------------------------------------------------------------
# Against a live MariaDB server


def _server_version(srv) -> tuple[int, ...]:
    version = srv.query("SELECT VERSION()")[0][0]
    return tuple(int(p) for p in version.split("-")[0].split(".")[:3])


def test_tables_match_live_mariadb(mariadb) -> None:
    try:
        rows = mariadb.query(
            "SELECT id, full_collation_name, character_set_name"
            " FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY")
    except Exception:  # before 10.10: no FULL_COLLATION_NAME / ID columns
        rows = mariadb.query(
            "SELECT id, collation_name, character_set_name FROM information_schema.COLLATIONS")
    server = {}
    for cid, name, charset in rows:
        if cid is None:
            continue
        if charset == "utf8":  # before 10.6.1
            charset, name = "utf8mb3", "utf8mb3" + name[4:]
        server[int(cid)] = (name, charset)
    assert len(server) > 200
    for cid, entry in server.items():
        assert MARIADB_COLLATIONS.get(cid) == entry, cid
    missing = set(MARIADB_COLLATIONS) - set(server)
    if _server_version(mariadb) < (11, 4, 5):
        # 0900 aliases and, before 10.10, the uca1400 ones are newer
        assert all(255 <= c <= 309 or c >= 2048 for c in missing), sorted(missing)
    else:
        assert not missing


_SINGLE_BYTE = ["ascii", "latin1", "latin2", "latin5", "latin7", "greek", "hebrew", "cp1250",
                "cp1251", "cp1256", "cp1257", "cp850", "cp852", "cp866", "koi8r", "koi8u",
                "macroman", "macce", "tis620", "hp8"]


def _server_decodes(srv, charset: str, sql_codes: str, width: int) -> list[tuple[int, str]]:
    """``(code, text)``: what the server makes of each ``width``-byte code."""
    rows = srv.query(
        "WITH RECURSIVE b(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM b WHERE n < 255) "
        "SELECT code, HEX(CONVERT(CONVERT(UNHEX(LPAD(HEX(code), %s, '0'))"
        f" USING {charset}) USING utf8mb4)) "
        f"FROM ({sql_codes}) AS codes", (2 * width,))
    return [(int(code), bytes.fromhex(h).decode("utf-8")) for code, h in rows]


@pytest.mark.parametrize("charset", _SINGLE_BYTE)
def test_single_byte_decoding_matches_live_mariadb(mariadb, charset) -> None:
    rows = _server_decodes(mariadb, charset, "SELECT n AS code FROM b", 1)
    assert len(rows) == 256
    codec = python_codec(charset)
    for code, expected in rows:
        if expected in ("?", "\ufffd") and code != 0x3F:
            continue
        assert decode_text(bytes([code]), codec) == expected, (charset, hex(code))


@pytest.mark.parametrize(
    "charset, complete",
    [("big5", False), ("cp932", True), ("eucjpms", True), ("euckr", True), ("gb2312", True),
     ("gbk", True), ("sjis", True), ("ujis", False)],
)
def test_multi_byte_decoding_matches_live_mariadb(mariadb, charset, complete) -> None:
    """Every two-byte code (and for the EUC-JP sets every three-byte 0x8F
    code) the server maps to a character decodes to that character; where
    ``complete``, none of them is left as bytes."""
    codec = python_codec(charset)
    rows = _server_decodes(mariadb, charset,
                           "SELECT x.n * 256 + y.n AS code FROM b x, b y WHERE x.n >= 128", 2)
    widths = [(rows, 2)]
    if charset in ("ujis", "eucjpms"):
        three = _server_decodes(
            mariadb, charset,
            "SELECT 0x8F0000 + x.n * 256 + y.n AS code FROM b x, b y WHERE x.n > 160 AND y.n > 160", 3)
        widths.append((three, 3))
    kept = 0
    checked = 0
    for batch, width in widths:
        for code, expected in batch:
            data = code.to_bytes(width, "big")
            if "?" in expected or "\ufffd" in expected or len(expected) != 1:
                continue
            got = decode_text(data, codec)
            assert got in (expected, data), (charset, data.hex(), expected, got)
            kept += got == data
            checked += 1
    assert checked > 6000
    if complete:
        assert kept == 0
    else:  # big5: 7 ETEN additions; ujis: user-defined rows (Private Use Area)
        assert kept < checked // 5
