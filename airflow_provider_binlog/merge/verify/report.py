"""What a verification found, per table and in all: key ranges checked, equal, differing
(with their keys), not verifiable, and the rows per second; as JSON for XCom and the Binlog CDC
view."""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any, Optional

#: how a differing key range differs
MISSING, EXTRA, CHANGED, MIXED = "missing in Iceberg", "not in the source", "values differ", "rows differ"


def key_json(key: Optional[tuple]) -> Optional[list]:
    """A key as JSON values (dates and times as ISO text, bytes as hex, decimals as text)."""
    if key is None:
        return None
    out: list = []
    for v in key:
        if isinstance(v, (dt.date, dt.datetime, dt.time)):
            out.append(v.isoformat())
        elif isinstance(v, dt.timedelta):
            out.append(str(v))
        elif isinstance(v, (bytes, bytearray)):
            out.append("0x" + bytes(v).hex())
        elif isinstance(v, Decimal):
            out.append(str(v))
        else:
            out.append(v)
    return out


@dataclass
class KeyRangeReport:
    """Keys from ``first`` to ``last`` (both included; JSON values), how they differ, and the
    rows each side holds there (``reason``: why a range is not verifiable)."""

    first: Optional[list]
    last: Optional[list]
    how: str
    source_rows: Optional[int] = None
    iceberg_rows: Optional[int] = None

    def text(self) -> str:
        one = self.first == self.last
        keys = f"key {_key_text(self.first)}" if one else f"keys {_key_text(self.first)} .. {_key_text(self.last)}"
        counts = "" if self.source_rows is None else f" (source {self.source_rows} rows, Iceberg {self.iceberg_rows})"
        return f"{keys}: {self.how}{counts}"


def _key_text(key: Optional[list]) -> str:
    if key is None:
        return "(open)"
    return str(key[0]) if len(key) == 1 else "(" + ", ".join(map(str, key)) + ")"


@dataclass
class TableReport:
    """One table's verification."""

    table: str                       # schema.table
    iceberg_table: str               # namespace.name
    chunks: int = 0                  # key ranges checked
    equal: int = 0                   # of them equal
    differing: list[KeyRangeReport] = field(default_factory=list)
    not_verifiable: list[KeyRangeReport] = field(default_factory=list)
    differing_chunks: int = 0
    rows: int = 0                    # source rows compared
    seconds: float = 0.0
    tries: int = 0                   # passes (the first, and those after merges)
    position: Optional[str] = None   # the source's binlog position of the last read
    checkpoint: Optional[str] = None  # the Iceberg checkpoint compared with
    left_out: dict[str, str] = field(default_factory=dict)
    error: Optional[str] = None      # the table could not be verified at all

    @property
    def verified_equal(self) -> bool:
        return self.error is None and not self.differing and not self.not_verifiable

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def status(self) -> str:
        if self.error is not None:
            return "not verifiable"
        if self.differing:
            return "differs"
        return "not verifiable" if self.not_verifiable else "equal"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(status=self.status(), rows_per_second=round(self.rows_per_second, 1),
                   seconds=round(self.seconds, 3))
        return out

    def lines(self) -> list[str]:
        """The report for a task log."""
        head = (f"{self.table} -> {self.iceberg_table}: {self.status()}; {self.chunks} key ranges, {self.equal} equal, "
                f"{len(self.differing)} differing, {len(self.not_verifiable)} not verifiable; {self.rows} rows in "
                f"{self.seconds:.1f} s ({self.rows_per_second:,.0f} rows/s); source at {self.position}, Iceberg at "
                f"{self.checkpoint}")
        out = [head]
        if self.error:
            out.append(f"  {self.error}")
        out += [f"  differs: {r.text()}" for r in self.differing]
        out += [f"  not verifiable: {r.text()}" for r in self.not_verifiable]
        out += [f"  column {name} left out: {why}" for name, why in sorted(self.left_out.items())]
        return out


@dataclass
class VerifyReport:
    """A verification of several tables."""

    tables: list[TableReport] = field(default_factory=list)
    finished_at: Optional[str] = None

    @property
    def differing(self) -> list[TableReport]:
        return [t for t in self.tables if t.differing]

    @property
    def equal(self) -> bool:
        return all(t.verified_equal for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {"finished_at": self.finished_at, "equal": self.equal,
                "tables": {t.table: t.to_json() for t in self.tables}}


__all__ = ["CHANGED", "EXTRA", "KeyRangeReport", "MISSING", "MIXED", "TableReport", "VerifyReport", "key_json"]
