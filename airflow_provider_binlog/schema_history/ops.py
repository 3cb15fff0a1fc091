"""What a schema statement means for the captured tables: typed operations.

:class:`~.apply.HistoryFollower` derives them from each DDL statement; the dump stages them
with the statement's record in the manifest (``ddl[].ops``, their JSON below) and the merge job
reads them back with :func:`DdlOp.from_json` and carries them out at the statement's position.

``{"op": "reset", "table": [s, t]}`` (:class:`ResetOp`)
    the table's content is gone at this point (DROP TABLE, TRUNCATE, CREATE OR REPLACE, or a
    rename to a name that is not captured).
``{"op": "alter", "table": [s, t], "added": [...], "dropped": [...], "renamed": [[old, new]]}``
    (:class:`AlterOp`) the table's columns changed; each added column has its definition and
    the value the rows that existed get (``value``: text, or None for NULL). Read with a schema
    history, it also has ``primary_key`` and ``columns`` (the table's columns afterwards), and
    ``swap_from`` for an online schema change cut-over.
``{"op": "move", "from": [s, a], "to": [s, b]}`` (:class:`MoveOp`)
    a captured table renamed to another captured name: its Iceberg table follows.
``{"op": "refuse", "table": [s, t], "reason": "..."}`` (:class:`RefuseOp`)
    the statement gives a captured table rows that are not in the binlog: the merge stops there
    with the reason.

The JSON of an operation is what the dump published: ``from_json(op).to_json() == op``.
Column definitions (``column``, ``columns``) stay in their JSON form
(:meth:`~.model.ColumnDef.to_json`), as masking rewrites them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Optional

from .errors import SchemaHistoryError

Name = tuple[str, str]

RESET = "reset"
ALTER = "alter"
MOVE = "move"
REFUSE = "refuse"


class DdlOpError(SchemaHistoryError, ValueError):
    """A staged schema operation this release cannot read (an unknown kind, or a malformed one)."""

    default_hint = ("the batch was staged by another release of airflow-provider-binlog: merge it with "
                    "that release, or dump the range again with this one")


def _name(value: Any, field: str, where: Optional[str]) -> Name:
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(isinstance(v, str) for v in value):
        raise DdlOpError(f"schema operation with a malformed {field!r}: {value!r} (want [schema, table])",
                         position=where)
    return (value[0], value[1])


@dataclass(frozen=True)
class DdlOp:
    """A schema operation on a captured table (see the subclasses); ``kind`` is its ``op``."""

    kind: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError

    @staticmethod
    def from_json(data: Mapping[str, Any], *, position: Optional[str] = None) -> "DdlOp":
        """The operation of its staged JSON; ``position`` (``file:pos`` of the statement) goes
        into the :class:`DdlOpError` of an operation that cannot be read."""
        if not isinstance(data, Mapping):
            raise DdlOpError(f"a schema operation is not an object: {data!r}", position=position)
        kind = data.get("op")
        cls = _KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise DdlOpError(f"unknown schema operation {kind!r} (known: {', '.join(sorted(_KINDS))})",
                             position=position)
        try:
            return cls._read(data, position)
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, DdlOpError):
                raise
            raise DdlOpError(f"malformed {kind!r} schema operation {dict(data)!r}: {type(exc).__name__}: {exc}",
                             position=position) from None

    @classmethod
    def _read(cls, data: Mapping[str, Any], where: Optional[str]) -> "DdlOp":
        raise NotImplementedError


@dataclass(frozen=True)
class ResetOp(DdlOp):
    """The table's content ends here."""

    table: Name
    kind: ClassVar[str] = RESET

    def to_json(self) -> dict[str, Any]:
        return {"op": RESET, "table": list(self.table)}

    @classmethod
    def _read(cls, data: Mapping[str, Any], where: Optional[str]) -> "ResetOp":
        return cls(_name(data["table"], "table", where))


@dataclass(frozen=True)
class RefuseOp(DdlOp):
    """The statement gives the table rows that are not in the binlog, for ``reason``."""

    table: Name
    reason: str
    kind: ClassVar[str] = REFUSE

    def to_json(self) -> dict[str, Any]:
        return {"op": REFUSE, "table": list(self.table), "reason": self.reason}

    @classmethod
    def _read(cls, data: Mapping[str, Any], where: Optional[str]) -> "RefuseOp":
        return cls(_name(data["table"], "table", where), str(data.get("reason") or ""))


@dataclass(frozen=True)
class MoveOp(DdlOp):
    """A captured table renamed to another captured name."""

    source: Name
    target: Name
    kind: ClassVar[str] = MOVE

    def to_json(self) -> dict[str, Any]:
        return {"op": MOVE, "from": list(self.source), "to": list(self.target)}

    @classmethod
    def _read(cls, data: Mapping[str, Any], where: Optional[str]) -> "MoveOp":
        return cls(_name(data["from"], "from", where), _name(data["to"], "to", where))


@dataclass(frozen=True)
class AddedColumn:
    """A column an ``alter`` adds: its definition (JSON) and the value the existing rows get."""

    name: str
    column: Optional[Mapping[str, Any]]
    value: Optional[str]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "column": None if self.column is None else dict(self.column),
                "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AddedColumn":
        if not isinstance(data.get("name"), str):
            raise ValueError(f"an added column without a name: {data!r}")
        return cls(data["name"], data.get("column"), data.get("value"))


@dataclass(frozen=True)
class AlterOp(DdlOp):
    """The table's columns changed. ``primary_key`` and ``columns`` (the column definitions
    afterwards, JSON) are None when the dump read the statement without a schema history;
    ``swap_from`` names the shadow table of an online schema change cut-over."""

    table: Name
    added: tuple[AddedColumn, ...] = ()
    dropped: tuple[str, ...] = ()
    renamed: tuple[tuple[str, str], ...] = ()
    primary_key: Optional[tuple[str, ...]] = None
    columns: Optional[tuple[Mapping[str, Any], ...]] = None
    swap_from: Optional[Name] = None
    kind: ClassVar[str] = ALTER

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": ALTER, "table": list(self.table),
                               "added": [a.to_json() for a in self.added], "dropped": list(self.dropped),
                               "renamed": [list(r) for r in self.renamed]}
        if self.primary_key is not None:
            out["primary_key"] = list(self.primary_key)
        if self.columns is not None:
            out["columns"] = [dict(c) for c in self.columns]
        if self.swap_from is not None:
            out["swap_from"] = list(self.swap_from)
        return out

    @classmethod
    def _read(cls, data: Mapping[str, Any], where: Optional[str]) -> "AlterOp":
        renamed = []
        for pair in data.get("renamed") or ():
            old, new = pair
            renamed.append((str(old), str(new)))
        return cls(_name(data["table"], "table", where),
                   added=tuple(AddedColumn.from_json(a) for a in data.get("added") or ()),
                   dropped=tuple(str(d) for d in data.get("dropped") or ()),
                   renamed=tuple(renamed),
                   primary_key=None if data.get("primary_key") is None else tuple(data["primary_key"]),
                   columns=None if data.get("columns") is None else tuple(data["columns"]),
                   swap_from=None if data.get("swap_from") is None else _name(data["swap_from"], "swap_from",
                                                                                where))


_KINDS: dict[str, type[DdlOp]] = {RESET: ResetOp, ALTER: AlterOp, MOVE: MoveOp, REFUSE: RefuseOp}


def ops_to_json(ops: list[DdlOp]) -> list[dict[str, Any]]:
    return [op.to_json() for op in ops]


__all__ = ["ALTER", "AddedColumn", "AlterOp", "DdlOp", "DdlOpError", "MOVE", "MoveOp", "REFUSE", "RESET",
           "RefuseOp", "ResetOp", "ops_to_json"]
