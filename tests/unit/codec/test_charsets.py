"""Collation ids -> character sets -> Python codecs, and value decoding, without a server.

``tests/integration/test_charsets_live.py`` compares the tables and the decoding with what a
live MariaDB server reports for the same ids and bytes.
"""
from __future__ import annotations

import codecs

import pytest

from airflow_provider_binlog.codec.charsets import (
    COLLATIONS,
    FLAVORS,
    MARIADB_COLLATIONS,
    MYSQL_COLLATIONS,
    UnknownCollationError,
    charset_for_collation,
    codec_for_collation,
    collation_name,
    decode_text,
    python_codec,
)
from airflow_provider_binlog.codec.errors import BinlogError

# --------------------------------------------------------------------------
# Tables


@pytest.mark.parametrize(
    "cid, name, charset, codec",
    [
        (8, "latin1_swedish_ci", "latin1", "cp1252"),
        (33, "utf8mb3_general_ci", "utf8mb3", "utf-8"),
        (35, "ucs2_general_ci", "ucs2", "utf-16-be"),
        (45, "utf8mb4_general_ci", "utf8mb4", "utf-8"),
        (46, "utf8mb4_bin", "utf8mb4", "utf-8"),
        (54, "utf16_general_ci", "utf16", "utf-16-be"),
        (56, "utf16le_general_ci", "utf16le", "utf-16-le"),
        (60, "utf32_general_ci", "utf32", "utf-32-be"),
        (63, "binary", "binary", None),
        (83, "utf8mb3_bin", "utf8mb3", "utf-8"),
        (95, "cp932_japanese_ci", "cp932", "cp932"),
        (101, "utf16_unicode_ci", "utf16", "utf-16-be"),
        (128, "ucs2_unicode_ci", "ucs2", "utf-16-be"),
        (192, "utf8mb3_unicode_ci", "utf8mb3", "utf-8"),
        (224, "utf8mb4_unicode_ci", "utf8mb4", "utf-8"),
        (245, "utf8mb4_croatian_mysql561_ci", "utf8mb4", "utf-8"),
        (246, "utf8mb4_unicode_520_ci", "utf8mb4", "utf-8"),
        (247, "utf8mb4_vietnamese_ci", "utf8mb4", "utf-8"),
        (248, "gb18030_chinese_ci", "gb18030", "gb18030"),
        (250, "gb18030_unicode_520_ci", "gb18030", "gb18030"),
        (255, "utf8mb4_0900_ai_ci", "utf8mb4", "utf-8"),
        (256, "utf8mb4_de_pb_0900_ai_ci", "utf8mb4", "utf-8"),
        (270, "utf8mb4_es_trad_0900_ai_ci", "utf8mb4", "utf-8"),
        (277, "utf8mb4_vi_0900_ai_ci", "utf8mb4", "utf-8"),
        (278, "utf8mb4_0900_as_cs", "utf8mb4", "utf-8"),
        (300, "utf8mb4_vi_0900_as_cs", "utf8mb4", "utf-8"),
        (304, "utf8mb4_ja_0900_as_cs_ks", "utf8mb4", "utf-8"),
        (305, "utf8mb4_0900_as_ci", "utf8mb4", "utf-8"),
        (309, "utf8mb4_0900_bin", "utf8mb4", "utf-8"),
        (323, "utf8mb4_mn_cyrl_0900_as_cs", "utf8mb4", "utf-8"),
        (576, "utf8mb3_croatian_ci", "utf8mb3", "utf-8"),
        (610, "utf8mb4_thai_520_w2", "utf8mb4", "utf-8"),
        (1032, "latin1_swedish_nopad_ci", "latin1", "cp1252"),
        (1069, "utf8mb4_general_nopad_ci", "utf8mb4", "utf-8"),
        (1070, "utf8mb4_nopad_bin", "utf8mb4", "utf-8"),
        (1248, "utf8mb4_unicode_nopad_ci", "utf8mb4", "utf-8"),
        (1270, "utf8mb4_unicode_520_nopad_ci", "utf8mb4", "utf-8"),
        # MariaDB 10.10+ UCA 14.0.0 collations
        (2048, "utf8mb3_uca1400_ai_ci", "utf8mb3", "utf-8"),
        (2304, "utf8mb4_uca1400_ai_ci", "utf8mb4", "utf-8"),
        (2305, "utf8mb4_uca1400_ai_cs", "utf8mb4", "utf-8"),
        (2306, "utf8mb4_uca1400_as_ci", "utf8mb4", "utf-8"),
        (2307, "utf8mb4_uca1400_as_cs", "utf8mb4", "utf-8"),
        (2308, "utf8mb4_uca1400_nopad_ai_ci", "utf8mb4", "utf-8"),
        (2311, "utf8mb4_uca1400_nopad_as_cs", "utf8mb4", "utf-8"),
        (2368, "utf8mb4_uca1400_swedish_ai_ci", "utf8mb4", "utf-8"),
        (2471, "utf8mb4_uca1400_german2_nopad_as_cs", "utf8mb4", "utf-8"),
        (2488, "utf8mb4_uca1400_vietnamese_ai_ci", "utf8mb4", "utf-8"),
        (2560, "ucs2_uca1400_ai_ci", "ucs2", "utf-16-be"),
        (2816, "utf16_uca1400_ai_ci", "utf16", "utf-16-be"),
        (3072, "utf32_uca1400_ai_ci", "utf32", "utf-32-be"),
        (3271, "utf32_uca1400_croatian_nopad_as_cs", "utf32", "utf-32-be"),
    ],
)
def test_known_ids(cid, name, charset, codec) -> None:
    assert COLLATIONS[cid] == (name, charset)
    assert collation_name(cid) == name
    assert charset_for_collation(cid) == charset
    assert codec_for_collation(cid) == codec


def test_flavor_tables() -> None:
    # MySQL only
    for cid in (76, 248, 249, 250, 303, 304, 306, 307, 308, 310, 323):
        assert cid in MYSQL_COLLATIONS and cid not in MARIADB_COLLATIONS
    assert MYSQL_COLLATIONS[76] == ("utf8mb3_tolower_ci", "utf8mb3")
    # MariaDB only
    for cid in (576, 738, 1025, 1270, 2048, 3271):
        assert cid in MARIADB_COLLATIONS and cid not in MYSQL_COLLATIONS
    # MariaDB 11.4.5+ aliases some MySQL 0900 ids under the same names
    for cid in (255, 278, 300, 305, 309):
        assert MARIADB_COLLATIONS[cid] == MYSQL_COLLATIONS[cid]
    # the MySQL 0900 set: 255..323 less the ids MySQL leaves unused
    assert {c for c in MYSQL_COLLATIONS if c >= 255} == (
        set(range(255, 324)) - {272, 276, 295, 299, 301, 302}
    )
    assert max(MYSQL_COLLATIONS) == 323
    # 23 tailorings (incl. the root) x 8 variants x 5 Unicode character sets
    assert len([c for c in MARIADB_COLLATIONS if c >= 2048]) == 23 * 8 * 5
    assert 17 not in COLLATIONS and 0 not in COLLATIONS


def test_flavors_never_disagree() -> None:
    shared = MYSQL_COLLATIONS.keys() & MARIADB_COLLATIONS.keys()
    assert len(shared) > 200
    for cid in shared:
        assert MYSQL_COLLATIONS[cid] == MARIADB_COLLATIONS[cid], cid
    assert COLLATIONS.keys() == MYSQL_COLLATIONS.keys() | MARIADB_COLLATIONS.keys()
    for cid, entry in COLLATIONS.items():
        assert entry in (MYSQL_COLLATIONS.get(cid), MARIADB_COLLATIONS.get(cid))


def test_names_are_well_formed() -> None:
    names = [name for name, _ in COLLATIONS.values()]
    assert len(names) == len(set(names))
    for cid, (name, charset) in COLLATIONS.items():
        assert name == "binary" or name.startswith(charset + "_"), cid


def test_flavor_argument() -> None:
    assert charset_for_collation(45, "mysql") == charset_for_collation(45, "mariadb") == "utf8mb4"
    assert charset_for_collation(45, "MariaDB") == "utf8mb4"
    # an id of the other flavor still resolves: its charset cannot differ
    assert charset_for_collation(2304, "mysql") == "utf8mb4"
    assert charset_for_collation(248, "mariadb") == "gb18030"
    assert FLAVORS == ("mysql", "mariadb")
    with pytest.raises(ValueError, match="flavor"):
        charset_for_collation(45, "oracle")


@pytest.mark.parametrize("cid", [0, 17, 251, 272, 324, 1000, 2000, 2472, 3272, 99999, -1])
def test_unknown_id(cid) -> None:
    with pytest.raises(UnknownCollationError) as info:
        charset_for_collation(cid)
    err = info.value
    assert isinstance(err, KeyError) and isinstance(err, BinlogError)
    assert err.collation_id == cid
    assert f"unknown collation id {cid}" in str(err)
    assert "report the collation id" in str(err)
    with pytest.raises(KeyError):
        codec_for_collation(cid, "mariadb")
    with pytest.raises(UnknownCollationError):
        collation_name(cid, "mysql")


def test_unknown_collation_error_takes_a_position() -> None:
    err = UnknownCollationError(4000).at("mysql-bin.000001", 1234)
    assert str(err).startswith("mysql-bin.000001 at offset 1234: unknown collation id 4000")


def test_every_charset_has_a_codec_entry() -> None:
    charsets = {cs for _, cs in COLLATIONS.values()}
    assert len(charsets) == 41
    for cs in charsets:
        codec = python_codec(cs)  # KeyError if missing
        if codec is not None:
            codecs.lookup(codec)
    assert {cs for cs in charsets if python_codec(cs) is None} == {
        "binary", "armscii8", "dec8", "geostd8", "keybcs2", "swe7"}


@pytest.mark.parametrize(
    "charset, codec",
    [
        ("utf8mb4", "utf-8"), ("utf8mb3", "utf-8"), ("utf8", "utf-8"), ("UTF8MB4", "utf-8"),
        ("latin1", "cp1252"), ("ascii", "ascii"), ("ucs2", "utf-16-be"),
        ("utf16", "utf-16-be"), ("utf16le", "utf-16-le"), ("utf32", "utf-32-be"),
        ("binary", None), ("gbk", "gbk"), ("gb2312", "gb2312"), ("gb18030", "gb18030"),
        ("big5", "big5"), ("sjis", "shift_jis"), ("cp932", "cp932"), ("ujis", "euc_jp"),
        ("eucjpms", "mysql_eucjpms"), ("euckr", "cp949"), ("koi8r", "koi8_r"),
        ("koi8u", "koi8_u"), ("cp1250", "cp1250"), ("cp1251", "cp1251"), ("cp1256", "cp1256"),
        ("cp1257", "cp1257"), ("cp850", "cp850"), ("cp852", "cp852"), ("cp866", "cp866"),
        ("greek", "iso8859_7"), ("hebrew", "iso8859_8"), ("latin2", "iso8859_2"),
        ("latin5", "iso8859_9"), ("latin7", "iso8859_13"), ("tis620", "tis_620"),
        ("macroman", "mac_roman"), ("macce", "mac_latin2"), ("hp8", "hp_roman8"),
        ("armscii8", None), ("geostd8", None), ("swe7", None), ("keybcs2", None), ("dec8", None),
    ],
)
def test_python_codec(charset, codec) -> None:
    assert python_codec(charset) == codec


def test_python_codec_unknown_charset() -> None:
    with pytest.raises(KeyError, match="nosuchset"):
        python_codec("nosuchset")


# --------------------------------------------------------------------------
# Decoding


def test_latin1_undefined_bytes_decode() -> None:
    codec = codec_for_collation(8)
    for b in (0x81, 0x8D, 0x8F, 0x90, 0x9D):
        assert decode_text(bytes([b]), codec) == chr(b)
    everything = bytes(range(256))
    text = decode_text(everything, codec)
    assert isinstance(text, str) and len(text) == 256
    assert text[0x80] == "\u20ac" and text[0x9F] == "\u0178" and text[0xE9] == "\u00e9"
    assert decode_text(b"caf\xe9 \x80 \x81\x8d\x8f\x90\x9d", "cp1252") == (
        "caf\u00e9 \u20ac \x81\x8d\x8f\x90\x9d")


def test_unicode_charsets() -> None:
    text = "h\u00e9llo \u4e16\u754c \U0001f600"
    assert decode_text(text.encode("utf-8"), codec_for_collation(255)) == text
    assert decode_text(text.encode("utf-16-be"), codec_for_collation(54)) == text
    assert decode_text(text.encode("utf-16-le"), codec_for_collation(56)) == text
    assert decode_text(text.encode("utf-32-be"), codec_for_collation(60)) == text
    bmp = "h\u00e9llo \u4e16\u754c"
    assert decode_text(bmp.encode("utf-16-be"), codec_for_collation(35)) == bmp  # ucs2
    assert decode_text(b"\x00A\x00\xe9", codec_for_collation(2560)) == "A\u00e9"
    assert decode_text(b"\x00\x00\x00A", codec_for_collation(3072)) == "A"
    assert decode_text(b"", "utf-16-be") == ""


def test_invalid_data_is_kept_as_bytes() -> None:
    for data, codec in [
        (b"\xff\xfe", "utf-8"),
        (b"ab\xc3", "utf-8"),              # truncated sequence
        (b"\x00A\x00", "utf-16-be"),       # odd length
        (b"\x00\x11\x00\x00", "utf-32-be"),  # beyond U+10FFFF
        (b"\x80", "ascii"),
        (b"\x81", "cp1250"),               # undefined in cp1250
        (b"\x82", "shift_jis"),            # lone lead byte
        (b"\xae", "iso8859_7"),           # undefined in ISO 8859-7
    ]:
        got = decode_text(data, codec)
        assert got == data and type(got) is bytes, (data, codec)
    assert decode_text(bytearray(b"\xff"), "utf-8") == b"\xff"
    assert type(decode_text(memoryview(b"\xff"), "utf-8")) is bytes


def test_no_codec_keeps_bytes() -> None:
    assert decode_text(b"\x00\x01binary", None) == b"\x00\x01binary"
    assert decode_text(memoryview(b"abc"), codec_for_collation(63)) == b"abc"
    assert decode_text(b"abc", codec_for_collation(32)) == b"abc"  # armscii8


def test_bytes_like_input() -> None:
    assert decode_text(memoryview(b"abc\xc3\xa9"), "utf-8") == "abc\u00e9"
    assert decode_text(bytearray(b"abc\xe9"), "cp1252") == "abc\u00e9"
    assert decode_text(memoryview(b"\xa1\xc1"), "mysql_eucjpms") == "\uff5e"


def test_unknown_codec_is_a_programming_error() -> None:
    with pytest.raises(LookupError):
        decode_text(b"abc", "no-such-codec")


@pytest.mark.parametrize(
    "charset, data, text",
    [
        ("cp866", b"\xfc\xfd\x80", "\u207f\u00b2\u0410"),
        ("koi8u", b"\x95\xc1", "\u2022\u0430"),
        ("greek", b"\xa1\xa2\xc1", "\u02bd\u02bc\u0391"),
        ("hebrew", b"\xaf\xe0", "\u203e\u05d0"),
        ("sjis", b"\x81\x5f\x82\xa0", "\\\u3042"),
        ("ujis", b"\xa1\xc0\xa4\xa2", "\\\u3042"),
        ("euckr", b"\xb0\xa1\x81\x41", "\uac00\uac02"),  # 0x8141 is a UHC extension
        ("tis620", b"\x80\xa1", "\x80\u0e01"),
        ("hp8", b"\xa1\xc0", "\u00c0\u00e2"),
        ("macroman", b"\x80", "\u00c4"),
        ("big5", b"\xa4\xa4", "\u4e2d"),
        ("gbk", b"\xd6\xd0", "\u4e2d"),
        ("gb18030", b"\x81\x30\x81\x30", "\u0080"),
        ("cp932", b"\x87\x40", "\u2460"),
    ],
)
def test_server_mappings(charset, data, text) -> None:
    assert decode_text(data, python_codec(charset)) == text


def test_byte_overrides_do_not_collide() -> None:
    # each replaced character must come from one byte sequence only
    for codec, ch in [("shift_jis", "\uff3c"), ("euc_jp", "\uff3c")]:
        sources = []
        for lead in range(0x81, 0x100):
            for trail in range(0x40, 0x100):
                try:
                    if bytes((lead, trail)).decode(codec) == ch:
                        sources.append((lead, trail))
                except UnicodeDecodeError:
                    pass
        assert len(sources) == 1, (codec, sources)
    for codec in ("cp1252", "cp866", "koi8_u", "iso8859_7", "iso8859_8"):
        chars = [decode_text(bytes([b]), codec) for b in range(256)]
        chars = [c for c in chars if isinstance(c, str)]
        assert len(chars) == len(set(chars)) > 200, codec


def test_eucjpms() -> None:
    codec = python_codec("eucjpms")
    cases = {
        b"abc": "abc",
        b"\xa4\xa2": "\u3042",              # JIS X 0208 hiragana
        b"\xa1\xc1\xa1\xc2\xa2\xcc": "\uff5e\u2225\uffe2",  # Microsoft mappings
        b"\xad\xa1\xad\xe2": "\u2460\u2116",  # NEC row 13
        b"\x8e\xb1": "\uff71",              # half-width katakana
        b"\x8f\xb0\xa1": "\u4e02",          # JIS X 0212
        b"\x8f\xa2\xb7\x8f\xa2\xc3": "\uff5e\uffe4",
        b"\x8f\xf3\xf3\x8f\xf4\xfe": "\u2170\u9ed1",  # IBM extensions, first and last
        b"\xf5\xa1\xfe\xfe": "\ue000\ue3ab",  # user-defined, two bytes
        b"\x8f\xf5\xa1\x8f\xfe\xfe": "\ue3ac\ue757",  # user-defined, three bytes
        b"x\xa4\xa2y": "x\u3042y",
    }
    for data, text in cases.items():
        assert decode_text(data, codec) == text, data
        assert data.decode("mysql_eucjpms") == text
    for bad in (b"\xa4", b"\x8f\xa2", b"\x80", b"\xa9\xa1", b"\x8e\xe0", b"\x8f\xa1\xa1"):
        assert decode_text(b"ok" + bad, codec) == b"ok" + bad
    assert b"a\x80b".decode("mysql_eucjpms", "replace") == "a\ufffdb"
    with pytest.raises(UnicodeError):
        "x".encode("mysql_eucjpms")
