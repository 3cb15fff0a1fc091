"""A table with every MariaDB column type, rows for it, and values normalised so that a row
read from MariaDB (pymysql) compares with the same row read from Iceberg (Spark)."""
from __future__ import annotations


ALL_TYPES = (
    "id INT PRIMARY KEY, ti TINYINT, su SMALLINT UNSIGNED, mi MEDIUMINT, iu INT UNSIGNED, bi BIGINT, "
    "bu BIGINT UNSIGNED, f FLOAT, d DOUBLE, de DECIMAL(20,6), da DATE, dt DATETIME(6), tm TIME(2), y YEAR, "
    "c CHAR(4), vc VARCHAR(30), bn BINARY(3), vb VARBINARY(10), tx TEXT, bl BLOB, e ENUM('a','b','c'), "
    "st SET('x','y','z'), bt BIT(10), b64 BIT(64), j JSON, u UUID, ip INET6")


def all_types_row(i: int) -> tuple:
    """A row of ``ALL_TYPES`` with values near each type's limits; ``1 <= i <= 99``."""
    import datetime as dt
    from decimal import Decimal
    return (i, -i, 65535 - i, -8388608 + i, 4294967295 - i, -(2 ** 63) + i, 2 ** 64 - 1 - i, 1.25 * i,
            2.5e300 / (i + 1),
            Decimal("-99999999999999.999999") + i, dt.date(1000, 1, 1) + dt.timedelta(days=i),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999) - dt.timedelta(days=i), dt.timedelta(hours=-838 + i),
            1901 + i, f"c{i}", f"vé{i}", bytes([i, 0, 255]), bytes([0, i]), "tëxt" * i, bytes(range(i)),
            "abc"[i % 3], "x,z" if i % 2 else "y", i * 3, 2 ** 63 + i, '{"k": [1, "two"]}',
            f"123e4567-e89b-12d3-a456-4266554400{i:02d}", f"::ffff:1.2.3.{i}")


def normalize(value):
    import datetime as dt
    from decimal import Decimal
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dt.timedelta):
        return round(value.total_seconds() * 1_000_000)
    if isinstance(value, Decimal) and value == value.to_integral_value() and value.as_tuple().exponent == 0:
        return int(value)
    if isinstance(value, set):
        return ",".join(sorted(value))
    return value


#: The columns of ``ALL_TYPES`` in order.
ALL_TYPES_COLUMNS = tuple(part.split()[0] for part in ALL_TYPES.split(", "))
