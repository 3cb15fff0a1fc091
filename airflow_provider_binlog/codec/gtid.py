"""Global transaction identifiers of MySQL and MariaDB: the one vocabulary the rest of the
package uses.

- :class:`Flavor` names the server kind (``mysql``, ``mariadb``); it compares equal to its text.
- A server's GTID state is a :class:`~.gtid_mysql.MysqlGtidSet` (MySQL: a set of GTIDs) or a
  :class:`~.gtid_mariadb.MariadbGtidPosition` (MariaDB: one GTID per replication domain), both
  with the verbs of :class:`GtidState`; :func:`parse_gtid_state` reads either from its text and
  :func:`empty_gtid_state` gives an empty one, so that callers never branch on the flavor.

Each flavor's types, text and binary forms live in its own module (:mod:`.gtid_mysql`,
:mod:`.gtid_mariadb`), as go-mysql keeps ``mysql_gtid.go`` and ``mariadb_gtid.go``; they are
re-exported here.
"""
from __future__ import annotations

import enum
from typing import TypeVar, Protocol, Union

from .gtid_mariadb import MariadbGtid, MariadbGtidList, MariadbGtidPosition, decode_gtid_list
from .gtid_mysql import (
    MAX_GNO,
    Interval,
    MysqlGtid,
    MysqlGtidSet,
    decode_gtid_tagged_event_body,
    normalize_tag,
    normalize_uuid,
)


_State = TypeVar("_State", bound="GtidState")


class GtidState(Protocol):
    """What both kinds of GTID state offer (a MySQL GTID set, a MariaDB GTID position), so
    that callers never branch on the kind:

    - ``contains(other)``: every transaction of ``other`` (a state, one GTID, or its text) is in
      this state (MariaDB: at or before it, per domain);
    - ``union(other)``: the state holding both;
    - ``add(gtid)``: the state after one more transaction (one GTID or its text);
    - ``is_empty()``; ``encode()``: the bytes a replica sends the server to start there.
    """

    def contains(self, item: object) -> bool: ...

    def union(self: _State, other: _State) -> _State: ...

    def add(self: _State, gtid: object) -> _State: ...

    def is_empty(self) -> bool: ...

    def encode(self) -> bytes: ...


class Flavor(str, enum.Enum):
    """The kind of server: its binlog, GTIDs and SQL differ."""

    MYSQL = "mysql"
    MARIADB = "mariadb"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, value: "str | Flavor") -> "Flavor":
        """``value`` as a flavor; a ValueError naming the flavors otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"flavor must be one of {', '.join(f.value for f in cls)}, not {value!r}") from None

    @classmethod
    def of_server_version(cls, version: str) -> "Flavor":
        """The flavor of a server from its version text (``SELECT VERSION()``, the binlog's
        format description): MariaDB names itself there, MySQL does not."""
        return cls.MARIADB if cls.MARIADB.value in version.lower() else cls.MYSQL


AnyGtidState = Union[MysqlGtidSet, MariadbGtidPosition]


def parse_gtid_state(flavor: "str | Flavor", text: str) -> AnyGtidState:
    """A server's GTID state from its text (``@@gtid_executed``, ``@@gtid_binlog_pos``...):
    a MySQL GTID set or a MariaDB GTID position, as ``flavor`` says."""
    if Flavor.of(flavor) is Flavor.MARIADB:
        return MariadbGtidPosition.parse(text)
    return MysqlGtidSet.parse(text)


def empty_gtid_state(flavor: "str | Flavor") -> AnyGtidState:
    """The GTID state of a server of ``flavor`` that ran no transaction."""
    return MariadbGtidPosition() if Flavor.of(flavor) is Flavor.MARIADB else MysqlGtidSet()


__all__ = [
    "AnyGtidState", "Flavor", "GtidState", "Interval", "MAX_GNO", "MariadbGtid", "MariadbGtidList",
    "MariadbGtidPosition", "MysqlGtid", "MysqlGtidSet", "decode_gtid_list", "decode_gtid_tagged_event_body",
    "empty_gtid_state", "normalize_tag", "normalize_uuid", "parse_gtid_state",
]
