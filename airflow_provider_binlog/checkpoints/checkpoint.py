"""Where a load stopped in the binlog: a ``Checkpoint`` holds binlog coordinates (file +
position) and/or the GTID state reached (a MySQL GTID set or a MariaDB GTID position), parsed
from the forms users give and compared."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from airflow_provider_binlog.codec.gtid import Flavor, MariadbGtidPosition, MysqlGtidSet, parse_gtid_state
from airflow_provider_binlog.codec.positions import position_key, split_binlog_file_name

from .errors import CheckpointOrderError

#: the flavors, as :class:`~airflow_provider_binlog.codec.gtid.Flavor` names them (kept for callers of
#: these names)
FLAVOR_MYSQL = Flavor.MYSQL
FLAVOR_MARIADB = Flavor.MARIADB
FLAVORS = tuple(Flavor)

MIN_POSITION = 4  # the first event follows the 4-byte magic

ACCEPTED_FORMS = (
    "accepted forms: file:position (mysql-bin.000003:4); "
    "a MySQL GTID set (3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5); "
    "a MariaDB GTID position (0-1-100,1-2-5); "
    'JSON ({"file": "mysql-bin.000003", "pos": 4} or {"gtid": "...", "flavor": "mysql"})'
)

_MARIADB_POS_RE = re.compile(r"\d+-\d+-\d+(\s*,\s*\d+-\d+-\d+)*,?")
_UUID_IN_TEXT_RE = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_JSON_KEYS = ("file", "pos", "position", "gtid", "flavor", "server_id", "server_uuid")


@dataclass(frozen=True)
class Checkpoint:
    """Binlog coordinates and/or GTID state reached by a load.

    Ordering compares coordinates: file index (numeric suffix, so
    ``mysql-bin.1000000`` > ``mysql-bin.999999``) then position.  Only
    checkpoints with coordinates and the same file basename can be ordered.
    """

    file: str | None = None
    position: int | None = None
    gtid: MysqlGtidSet | MariadbGtidPosition | None = None
    flavor: str | None = None
    server_id: int | None = None
    server_uuid: str | None = None

    def __post_init__(self) -> None:
        if (self.file is None) != (self.position is None):
            raise ValueError("a checkpoint needs both file and position, or neither")
        if self.file is not None:
            split_binlog_file_name(self.file)
            if isinstance(self.position, bool) or not isinstance(self.position, int) \
                    or self.position < MIN_POSITION:
                raise ValueError(f"binlog position must be an integer >= {MIN_POSITION}, "
                                 f"got {self.position!r}")
        if self.gtid is not None and not isinstance(self.gtid, (MysqlGtidSet, MariadbGtidPosition)):
            raise TypeError(f"gtid must be a MysqlGtidSet or MariadbGtidPosition, "
                            f"got {type(self.gtid).__name__}")
        if self.file is None and self.gtid is None:
            raise ValueError("a checkpoint needs a file:position or a GTID state")
        implied = _flavor_of(self.gtid)
        if self.flavor is not None and self.flavor not in FLAVORS:
            raise ValueError(f"flavor must be one of {', '.join(FLAVORS)}, got {self.flavor!r}")
        if implied is not None:
            if self.flavor not in (None, implied):
                raise ValueError(f"flavor {str(self.flavor)!r} does not match a {implied} GTID state")
            object.__setattr__(self, "flavor", implied)
        if self.server_id is not None and (isinstance(self.server_id, bool)
                                           or not isinstance(self.server_id, int)
                                           or not 0 <= self.server_id < 1 << 32):
            raise ValueError(f"server_id must be an unsigned 32-bit integer, got {self.server_id!r}")

    # -- coordinates -------------------------------------------------------

    @property
    def has_coordinates(self) -> bool:
        return self.file is not None

    @property
    def file_basename(self) -> str | None:
        return None if self.file is None else split_binlog_file_name(self.file)[0]

    @property
    def file_index(self) -> int | None:
        return None if self.file is None else split_binlog_file_name(self.file)[1]

    @property
    def point(self) -> tuple[str, ...]:
        """The place in the binlog this checkpoint names, hashable: its coordinates when it has
        them, else its GTID state (the server identity and flavor left out)."""
        if self.file is not None:
            return ("pos", self.file, str(self.position))
        return ("gtid", str(self.gtid))

    def same_server(self, server_id: int | None, server_uuid: str | None) -> bool | None:
        """Whether this checkpoint was taken on the server of this identity: by ``server_uuid``
        when both have one (MySQL), else by ``server_id``; ``None`` when either is unrecorded."""
        if self.server_uuid and server_uuid:
            return self.server_uuid.lower() == server_uuid.lower()
        if self.server_id is not None and server_id is not None:
            return self.server_id == server_id
        return None

    def compare(self, other: "Checkpoint") -> int:
        """-1, 0 or 1 as this checkpoint is before, at or after ``other``: by binlog
        coordinates when both have them (one series, and not two servers: a promoted replica
        writes other offsets), else by GTID state (one kind, one containing the other). Raises
        :class:`CheckpointOrderError` when they cannot be ordered."""
        if not isinstance(other, Checkpoint):
            raise TypeError(f"cannot compare Checkpoint with {type(other).__name__}")
        if self.file is not None and other.file is not None and \
                self.same_server(other.server_id, other.server_uuid) is not False:
            if self.file_basename != other.file_basename:
                raise CheckpointOrderError(
                    f"cannot order binlog files of different series: {self.file!r} vs {other.file!r} "
                    f"(basenames {self.file_basename!r} and {other.file_basename!r})")
            a, b = position_key(self.file, self.position), position_key(other.file, other.position)
            return (a > b) - (a < b)
        ga, gb = self.gtid, other.gtid
        if ga is not None and gb is not None and type(ga) is type(gb):
            if ga == gb:
                return 0
            if gb.contains(ga):
                return -1
            if ga.contains(gb):
                return 1
        raise CheckpointOrderError(f"cannot order checkpoints [{self}] and [{other}]: they need binlog "
                                   "coordinates or GTID states of which one contains the other")

    def __lt__(self, other: object) -> bool:
        return self.compare(other) < 0  # type: ignore[arg-type]

    def __le__(self, other: object) -> bool:
        return self.compare(other) <= 0  # type: ignore[arg-type]

    def __gt__(self, other: object) -> bool:
        return self.compare(other) > 0  # type: ignore[arg-type]

    def __ge__(self, other: object) -> bool:
        return self.compare(other) >= 0  # type: ignore[arg-type]

    # -- text and JSON -----------------------------------------------------

    def __str__(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(f"{self.file}:{self.position}")
        if self.gtid is not None:
            parts.append(f"gtid={self.gtid}")
        return " ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Dict with stable keys; absent values are None."""
        return {
            "file": self.file,
            "pos": self.position,
            "gtid": None if self.gtid is None else str(self.gtid),
            "flavor": self.flavor,
            "server_id": self.server_id,
            "server_uuid": self.server_uuid,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str) -> "Checkpoint":
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ValueError(f"invalid checkpoint JSON: {exc}; {ACCEPTED_FORMS}") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"checkpoint JSON must be an object; {ACCEPTED_FORMS}")
        unknown = sorted(set(data) - set(_JSON_KEYS))
        if unknown:
            raise ValueError(f"unknown checkpoint key(s) {', '.join(unknown)}; "
                             f"known keys: {', '.join(_JSON_KEYS)}")
        if "pos" in data and "position" in data:
            raise ValueError("give either 'pos' or 'position', not both")
        position = data.get("pos", data.get("position"))
        if isinstance(position, str) and position.strip().isdigit():
            position = int(position)
        flavor = data.get("flavor")
        gtid_text = data.get("gtid")
        gtid = None
        if gtid_text is not None:
            if not isinstance(gtid_text, str):
                raise ValueError("checkpoint 'gtid' must be a string")
            gtid = _parse_gtid_state(gtid_text, flavor)
        try:
            return cls(file=data.get("file"), position=position, gtid=gtid, flavor=flavor,
                       server_id=data.get("server_id"), server_uuid=data.get("server_uuid"))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"invalid checkpoint {dict(data)!r}: {exc}") from None

    @classmethod
    def parse(cls, text: str) -> "Checkpoint":
        """Read a checkpoint the way users type one (see ``ACCEPTED_FORMS``)."""
        value = text.strip() if isinstance(text, str) else ""
        if not value:
            raise ValueError(f"empty checkpoint; {ACCEPTED_FORMS}")
        if value.startswith("{"):
            return cls.from_json(value)
        try:
            if _MARIADB_POS_RE.fullmatch(value):
                return cls(gtid=MariadbGtidPosition(value))
            if _UUID_IN_TEXT_RE.match(value):
                return cls(gtid=MysqlGtidSet(value))
            file, sep, position = value.rpartition(":")
            if sep and position.strip().isdigit():
                return cls(file=file.strip(), position=int(position))
        except ValueError as exc:
            raise ValueError(f"invalid checkpoint {text!r}: {exc}; {ACCEPTED_FORMS}") from None
        raise ValueError(f"invalid checkpoint {text!r}; {ACCEPTED_FORMS}")


def _flavor_of(gtid: object) -> Flavor | None:
    if isinstance(gtid, MysqlGtidSet):
        return Flavor.MYSQL
    if isinstance(gtid, MariadbGtidPosition):
        return Flavor.MARIADB
    return None


def _parse_gtid_state(text: str, flavor: str | None) -> MysqlGtidSet | MariadbGtidPosition:
    """The GTID state of a checkpoint's text, in its flavor; without one, told by its form."""
    if flavor is not None:
        return parse_gtid_state(flavor, text)
    if not text.strip():
        raise ValueError("an empty 'gtid' needs 'flavor' (mysql or mariadb)")
    return parse_gtid_state(_flavor_of_text(text), text)


def _flavor_of_text(text: str) -> Flavor:
    """The flavor a GTID state's text has the form of: a MariaDB GTID position
    (``0-1-100,1-2-5``), else a MySQL GTID set."""
    return Flavor.MARIADB if _MARIADB_POS_RE.fullmatch(text.strip()) else Flavor.MYSQL
