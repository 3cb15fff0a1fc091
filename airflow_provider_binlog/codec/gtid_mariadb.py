"""MariaDB's global transaction identifiers: a GTID is ``domain-server-seq``; a replication
*position* holds at most one GTID per domain (``MariadbGtidPosition``). The binary form is the
body of the GTID_LIST event (see :mod:`.gtid` for what both flavors share)."""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import Iterable, Iterator

from airflow_provider_binlog.codec.errors import CorruptEventError

_U32_MAX = (1 << 32) - 1
_U64_MAX = (1 << 64) - 1

# --------------------------------------------------------------------------
# MariaDB
# --------------------------------------------------------------------------

_MARIADB_GTID_RE = re.compile(r"(\d+)-(\d+)-(\d+)")


@dataclass(frozen=True, order=True)
class MariadbGtid:
    """One MariaDB transaction id, printed ``domain-server-seq``."""

    domain_id: int
    server_id: int
    seq_no: int

    def __post_init__(self) -> None:
        for name, limit in (("domain_id", _U32_MAX), ("server_id", _U32_MAX), ("seq_no", _U64_MAX)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
                raise ValueError(f"MariaDB GTID {name} must be an integer in 0..{limit}, got {value!r}")

    @classmethod
    def parse(cls, text: str) -> "MariadbGtid":
        m = _MARIADB_GTID_RE.fullmatch(text.strip())
        if not m:
            raise ValueError(f"invalid MariaDB GTID {text!r}: expected domain-server-seq, e.g. 0-1-100")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3)))

    def __str__(self) -> str:
        return f"{self.domain_id}-{self.server_id}-{self.seq_no}"


class MariadbGtidPosition:
    """At most one GTID per replication domain, as held by ``@@gtid_binlog_pos``,
    ``@@gtid_current_pos`` and ``@slave_connect_state`` (``0-1-100,1-2-5``)."""

    __slots__ = ("_gtids",)

    def __init__(self, gtids: "Iterable[MariadbGtid] | str | None" = None) -> None:
        if isinstance(gtids, str):
            items = [MariadbGtid.parse(p) for p in gtids.split(",") if p.strip()]
        else:
            items = list(gtids or ())
        by_domain: dict[int, MariadbGtid] = {}
        for gtid in items:
            if not isinstance(gtid, MariadbGtid):
                raise TypeError(f"expected MariadbGtid, got {type(gtid).__name__}")
            if gtid.domain_id in by_domain:
                raise ValueError(f"MariaDB GTID position has two GTIDs for domain {gtid.domain_id} "
                                 f"({by_domain[gtid.domain_id]} and {gtid}); a position holds one per domain")
            by_domain[gtid.domain_id] = gtid
        self._gtids: tuple[MariadbGtid, ...] = tuple(by_domain[d] for d in sorted(by_domain))

    @classmethod
    def parse(cls, text: str) -> "MariadbGtidPosition":
        return cls(text)

    @classmethod
    def _of(cls, by_domain: dict[int, MariadbGtid]) -> "MariadbGtidPosition":
        return cls(by_domain.values())

    def _by_domain(self) -> dict[int, MariadbGtid]:
        return {g.domain_id: g for g in self._gtids}

    @property
    def gtids(self) -> tuple[MariadbGtid, ...]:
        return self._gtids

    @property
    def domains(self) -> tuple[int, ...]:
        return tuple(g.domain_id for g in self._gtids)

    def get(self, domain_id: int) -> MariadbGtid | None:
        return self._by_domain().get(domain_id)

    def is_empty(self) -> bool:
        return not self._gtids

    # the GtidState protocol: add, union, contains

    def add(self, gtid: MariadbGtid | str) -> "MariadbGtidPosition":
        """Return the position after applying ``gtid`` (replaces its domain's entry)."""
        if isinstance(gtid, str):
            gtid = MariadbGtid.parse(gtid)
        by_domain = self._by_domain()
        by_domain[gtid.domain_id] = gtid
        return self._of(by_domain)

    def union(self, other: "MariadbGtidPosition") -> "MariadbGtidPosition":
        """Per domain, keep the GTID with the higher sequence number (self on ties)."""
        by_domain = self._by_domain()
        for gtid in other._gtids:
            mine = by_domain.get(gtid.domain_id)
            if mine is None or gtid.seq_no > mine.seq_no:
                by_domain[gtid.domain_id] = gtid
        return self._of(by_domain)

    __or__ = union

    def contains(self, item: "MariadbGtidPosition | MariadbGtid | str") -> bool:
        """True if a GTID is at or before this position in its domain, or, for a position (a
        string is read as one), if in every domain of it this position has reached at least
        the same sequence number."""
        mine = self._by_domain()
        if isinstance(item, MariadbGtid):
            at = mine.get(item.domain_id)
            return at is not None and at.seq_no >= item.seq_no
        if isinstance(item, str):
            item = MariadbGtidPosition(item)
        return all(d in mine and mine[d].seq_no >= g.seq_no for d, g in item._by_domain().items())

    def encode(self) -> bytes:
        """The text a replica sends as ``@slave_connect_state``."""
        return str(self).encode("ascii")

    def __iter__(self) -> Iterator[MariadbGtid]:
        return iter(self._gtids)

    def __len__(self) -> int:
        return len(self._gtids)

    def __bool__(self) -> bool:
        return bool(self._gtids)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MariadbGtidPosition):
            return NotImplemented
        return self._gtids == other._gtids

    def __hash__(self) -> int:
        return hash(self._gtids)

    def __str__(self) -> str:
        return ",".join(str(g) for g in self._gtids)

    def __repr__(self) -> str:
        return f"MariadbGtidPosition({str(self)!r})"


@dataclass(frozen=True)
class MariadbGtidList:
    """Decoded GTID_LIST event: the binlog state when the file was started."""

    gtids: tuple[MariadbGtid, ...]
    flags: int

    def to_position(self) -> MariadbGtidPosition:
        """One GTID per domain: the last listed, which the server writes as the
        domain's most recent one."""
        by_domain: dict[int, MariadbGtid] = {}
        for gtid in self.gtids:
            by_domain[gtid.domain_id] = gtid
        return MariadbGtidPosition(by_domain.values())


def decode_gtid_list(body: bytes) -> MariadbGtidList:
    """Decode a MariaDB GTID_LIST event body (checksum removed).

    Layout: u32 whose low 28 bits are the count and top 4 bits flags, then per
    entry domain u32, server u32, seq u64.  Servers pad an empty list, so bytes
    after the entries are ignored.
    """
    body = bytes(body)
    if len(body) < 4:
        raise CorruptEventError(f"GTID_LIST body of {len(body)} bytes is shorter than its 4-byte count")
    (word,) = struct.unpack_from("<I", body, 0)
    count, flags = word & 0x0FFFFFFF, word >> 28
    if 4 + 16 * count > len(body):
        raise CorruptEventError(f"GTID_LIST declares {count} GTIDs but the body has only {len(body)} bytes")
    gtids = tuple(MariadbGtid(*struct.unpack_from("<IIQ", body, 4 + 16 * i)) for i in range(count))
    return MariadbGtidList(gtids, flags)
