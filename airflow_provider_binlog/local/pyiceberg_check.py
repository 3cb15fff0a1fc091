"""The quickstart's second reader: the Iceberg tables of its Hadoop-catalog warehouse read by
PyIceberg, without a JVM (what Polars' and Daft's Iceberg scans go through), and compared with
the source rows. PyIceberg applies position deletes and refuses equality deletes, so a table
it reads is readable by every engine."""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Optional


def available() -> bool:
    try:
        import pyiceberg.table  # noqa: F401
    except ImportError:
        return False
    return True


def _plain(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def static_table(warehouse: Path | str, namespace: str, table: str) -> Any:
    """Hadoop-catalog table ``namespace.table`` under ``warehouse`` as PyIceberg reads it: from
    the metadata file its ``version-hint.text`` names (the newest)."""
    from pyiceberg.table import StaticTable

    metadata = Path(warehouse, *namespace.split("."), table, "metadata")
    version = int((metadata / "version-hint.text").read_text().strip())
    return StaticTable.from_metadata(str(metadata / f"v{version}.metadata.json"))


def read_rows(warehouse: Path, namespace: str, table: str, columns: list[str]) -> list[tuple]:
    """The rows of Hadoop-catalog table ``namespace.table`` under ``warehouse`` as of its
    newest metadata file, ``columns`` in order."""
    scanned = static_table(warehouse, namespace, table).scan(selected_fields=tuple(columns)).to_arrow()
    return [tuple(_plain(v) for v in row) for row in zip(*(scanned.column(c).to_pylist() for c in columns))]


def row_differences(where: str, expected: dict, got_rows: list[tuple], reader: str) -> list[str]:
    """What differs between ``expected`` (key -> row, the key first) and the rows a ``reader``
    read of table ``where``: duplicate keys, then each key whose row is not the source's."""
    got: dict[Any, Optional[tuple]] = {row[0]: row for row in got_rows}
    problems = [] if len(got) == len(got_rows) else [f"{where}: duplicate keys"]
    for key in sorted(set(expected) | set(got), key=repr):
        if expected.get(key) != got.get(key):
            problems.append(f"{where} id={key}: MariaDB {expected.get(key)} != {reader} {got.get(key)}")
    return problems


def compare(expected: dict, warehouse: Path, namespace: str, table: str,
            columns: list[str]) -> tuple[int, list[str]]:
    """``(rows read, differences)`` between ``expected`` (key -> row, the key first) and what
    PyIceberg reads; a table it cannot read is one difference saying why."""
    try:
        got_rows = read_rows(warehouse, namespace, table, columns)
    except Exception as exc:  # noqa: BLE001 - the reason is the finding
        return 0, [f"{namespace}.{table}: PyIceberg cannot read it: {type(exc).__name__}: {exc}"]
    return len(got_rows), row_differences(f"{namespace}.{table}", expected, got_rows, "PyIceberg")
