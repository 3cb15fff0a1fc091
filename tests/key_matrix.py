"""The key types of the key-type matrix: every type that can be in a primary key, with values
near its limits, a key each row can be moved to, and (for collations that compare them as
equal) a key that differs only in case, accent or trailing spaces; and the normalisation that
makes a row read from MariaDB (pymysql) compare with the same row read from Iceberg (Spark or
PyIceberg)."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Optional

LABELS = "'zulu', 'alpha', 'mike', 'bravo', 'echo'"  # out of alphabetical order


@dataclass(frozen=True)
class KeyType:
    name: str
    ddl: str
    values: tuple            # four distinct keys
    moved_to: Any            # a key the first row is moved to
    equal_variant: Optional[tuple] = None   # (the second key, the same key by the collation)
    kind: str = "plain"      # how values read back: "set", "bit", "time"


def _ints(name: str, ddl: str, low: int, high: int) -> KeyType:
    return KeyType(name, ddl, (low, -1 if low < 0 else 1, 0 if low < 0 else 2, high), (high - 1))


KEY_TYPES: tuple[KeyType, ...] = (
    _ints("ti", "TINYINT", -128, 127), _ints("tiu", "TINYINT UNSIGNED", 0, 255),
    _ints("si", "SMALLINT", -32768, 32767), _ints("siu", "SMALLINT UNSIGNED", 0, 65535),
    _ints("mi", "MEDIUMINT", -8388608, 8388607), _ints("miu", "MEDIUMINT UNSIGNED", 0, 16777215),
    _ints("i", "INT", -2 ** 31, 2 ** 31 - 1), _ints("iu", "INT UNSIGNED", 0, 2 ** 32 - 1),
    _ints("bi", "BIGINT", -2 ** 63, 2 ** 63 - 1), _ints("biu", "BIGINT UNSIGNED", 0, 2 ** 64 - 1),
    KeyType("dec", "DECIMAL(12,3)", (Decimal("-999999999.999"), Decimal("-0.001"), Decimal("0.000"),
                                     Decimal("999999999.999")), Decimal("1.500")),
    KeyType("flt", "FLOAT", (-1.5, 0.0, 0.5, 1024.0), 3.25),
    KeyType("dbl", "DOUBLE", (-1e300, 0.0, 0.1, 2.5e-300), 7.75),
    KeyType("chbin", "CHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ("a", "A", "é", "zz"), "b"),
    KeyType("vcbin", "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", ("a", "A", "b ", "é"), "c"),
    KeyType("vcci", "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", ("d", "B", "ç", "a"), "x",
            equal_variant=("B", "b")),
    KeyType("vcai", "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", ("u", "e", "o", "F"), "x",
            equal_variant=("e", "É")),
    KeyType("vcpad", "VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci", ("s", "p ", "r  ", "q"), "x",
            equal_variant=("p ", "p")),
    KeyType("chci", "CHAR(4) CHARACTER SET latin1 COLLATE latin1_swedish_ci", ("d", "a", "c", "b"), "x",
            equal_variant=("a", "A")),
    KeyType("bin", "BINARY(4)", (b"\x00\x00\x00\x00", b"\x00\x01\x00\x00", b"a\x00\x00\x00", b"\xff\xff\xff\xff"),
            b"m\x00\x00\x00"),
    KeyType("vbin", "VARBINARY(8)", (b"", b"\x00", b"\x00\x00", b"\xff"), b"mv"),
    KeyType("da", "DATE", (dt.date(1000, 1, 1), dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(9999, 12, 31)),
            dt.date(2000, 1, 1)),
    KeyType("dtm", "DATETIME(6)", (dt.datetime(1000, 1, 1), dt.datetime(1582, 10, 10, 1, 2, 3, 4),
                                   dt.datetime(2024, 1, 1, 0, 0, 0, 999999),
                                   dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
            dt.datetime(2000, 1, 1)),
    KeyType("ts", "TIMESTAMP(6)", (dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2000, 2, 29, 12, 0, 0, 5),
                                   dt.datetime(2024, 1, 1, 0, 0, 0, 999999),
                                   dt.datetime(2038, 1, 19, 3, 14, 7, 999999)),
            dt.datetime(2010, 1, 1)),
    KeyType("tm", "TIME(6)", ("-838:59:59", "00:00:00", "00:00:00.000001", "838:59:59"), "12:00:00", kind="time"),
    KeyType("yr", "YEAR", (1901, 1970, 2024, 2155), 2000),
    KeyType("en", f"ENUM({LABELS})", ("zulu", "alpha", "mike", "bravo"), "echo"),
    KeyType("st", "SET('x', 'c', 'a')", ("", "x", "c,a", "x,c,a"), "a", kind="set"),
    KeyType("bt", "BIT(64)", (0, 1, 2 ** 63, 2 ** 64 - 1), 2 ** 40, kind="bit"),
    KeyType("bt5", "BIT(5)", (0, 1, 16, 31), 8, kind="bit"),
    KeyType("uu", "UUID", ("00000000-0000-0000-0000-000000000000", "123e4567-e89b-12d3-a456-426655440000",
                           "ffffffff-ffff-ffff-ffff-ffffffffffff", "01234567-89ab-4def-8123-456789abcdef"),
            "11111111-2222-4333-8444-555555555555"),
    KeyType("ip", "INET6", ("::", "::1", "::ffff:1.2.3.4", "2001:db8::ff00:42:8329"), "fe80::1"),
)

#: composite keys: (name, (first key type, second key type))
COMPOSITES: tuple[tuple[str, tuple[str, str]], ...] = (
    ("c_i_vcci", ("i", "vcci")), ("c_en_da", ("en", "da")), ("c_biu_bin", ("biu", "bin")),
    ("c_dec_chbin", ("dec", "chbin")), ("c_flt_ts", ("flt", "ts")), ("c_uu_st", ("uu", "st")),
)

BY_NAME = {k.name: k for k in KEY_TYPES}


def normalize(kind: str, value: Any) -> Any:
    """A value read from MariaDB or from Iceberg, in one comparable form."""
    if value is None:
        return None
    if kind == "set":
        if isinstance(value, (set, frozenset)):
            return frozenset(value)
        return frozenset(v for v in str(value).split(",") if v)
    if kind == "bit":
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "big")
        return int(value)
    if kind == "time" and isinstance(value, dt.timedelta):
        return round(value.total_seconds() * 1_000_000)
    return plain(value)


def plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, Decimal) and value == value.to_integral_value() and value.as_tuple().exponent == 0:
        return int(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value
