"""Where a transaction of the binlog opens and ends, without I/O (modelled on h11's ``_state``).

A :class:`TransactionTracker` is fed the decoded events of a binlog stream, each with its
position, and answers with frozen results: :class:`TransactionStarted`, :class:`Statement`
(a QUERY event other than BEGIN and COMMIT) and :class:`TransactionCommitted` (a transaction
boundary: where it ends, its GTID). The dump and the watermark snapshot's binlog follower read
their transactions through it; what they stage and where they resume is theirs.

The rules, for MySQL and MariaDB alike:

* A GTID event (MySQL's GTID, ANONYMOUS_GTID and tagged GTID, MariaDB's GTID) opens a
  transaction at its position. Without GTIDs, a ``BEGIN`` (or ``XA START``) or a first rows
  event opens one where it is.
* ``BEGIN``/``XA START`` and rows events mark the transaction begun, and so does MariaDB's GTID
  without the standalone flag (MariaDB writes no ``BEGIN``: that GTID stands for it); a
  statement inside a begun transaction (``SAVEPOINT``, ``XA END``, the ``CREATE TABLE`` of a
  ``CREATE TABLE ... SELECT``, a statement logged as such) does not end it.
* XID, XA PREPARE (a prepared XA transaction is a group of the binlog of its own; its
  ``XA COMMIT`` comes later, as another) and a QUERY ``COMMIT``/``ROLLBACK``/``XA COMMIT`` (the
  end of a transaction on non-transactional tables) end the transaction, at the event's end.
* The first statement of a transaction not begun is a transaction of its own, ended where the
  statement ends: a DDL after its GTID (MariaDB's GTID with the standalone flag, MySQL's GTID
  followed by the statement), a statement without GTID, a statement logged in statement
  format. MariaDB logs ``CREATE TABLE ... SELECT`` as one GTID (without the standalone flag)
  over the statement and the rows: one transaction, its statement inside, ended by the XID.
* A transaction's id is its GTID, else ``file:pos`` of its first event.

The events a TRANSACTION_PAYLOAD event holds are fed with the payload's positions. Other
events (TABLE_MAP, annotations, a file's header events, ROTATE) change nothing: a file's
structure is the reader's to follow. A stream ends only on a boundary:
:meth:`TransactionTracker.end_of_stream` refuses a stream cut inside a transaction.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Union

from ..codec.events import (
    Event,
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    RowsEvent,
    TransactionPayloadEvent,
    XaPrepareEvent,
    XidEvent,
)
from ..replica.errors import ReplicationConnectionLost


class TransactionCutShort(ReplicationConnectionLost):
    """The events ended inside a transaction: the stream was cut short of its end (read it
    again from the last transaction boundary)."""


class TxnState(enum.Enum):
    """Where the tracker is: between transactions, in one opened by its GTID (nothing of it
    read yet but the GTID), or in one begun (BEGIN or rows read)."""
    IDLE = "idle"
    OPEN = "open"
    BEGUN = "begun"


@dataclass(frozen=True, slots=True)
class Transaction:
    """A transaction read from the binlog: its GTID (None: none, or an anonymous one), where
    its first event is, and MariaDB's standalone flag of its GTID."""
    gtid: Optional[str]
    file: str
    pos: int
    standalone: bool = False

    @property
    def id(self) -> str:
        """The GTID, else ``file:pos`` of the transaction's first event."""
        return self.gtid if self.gtid else f"{self.file}:{self.pos}"


@dataclass(frozen=True, slots=True)
class TransactionStarted:
    transaction: Transaction


@dataclass(frozen=True, slots=True)
class Statement:
    """A QUERY event other than BEGIN and COMMIT, at ``file:pos``. ``standalone``: it is a
    transaction of its own (a DDL...), ended by the :class:`TransactionCommitted` following it;
    otherwise a statement inside a begun transaction (``SAVEPOINT``...)."""
    event: QueryEvent
    transaction: Optional[Transaction]
    file: str
    pos: int
    standalone: bool

    @property
    def gtid(self) -> Optional[str]:
        return self.transaction.gtid if self.transaction is not None else None


@dataclass(frozen=True, slots=True)
class TransactionCommitted:
    """A transaction boundary: the transaction that ended (None: an end read with none open,
    as after a statement of its own logged in statement format), ``file:end`` after it."""
    transaction: Optional[Transaction]
    file: str
    end: int

    @property
    def gtid(self) -> Optional[str]:
        return self.transaction.gtid if self.transaction is not None else None


Result = Union[TransactionStarted, Statement, TransactionCommitted]


class _Kind(enum.Enum):
    GTID = "gtid"
    BEGIN = "begin"
    ROWS = "rows"
    END = "end"
    STATEMENT = "statement"


#: state -> kind of event -> next state. A GTID inside a transaction never ended (no server
#: writes one) opens the next one, the earlier one dropped, as the readers always did.
_TRANSITIONS: dict[TxnState, dict[_Kind, TxnState]] = {
    TxnState.IDLE: {_Kind.GTID: TxnState.OPEN, _Kind.BEGIN: TxnState.BEGUN, _Kind.ROWS: TxnState.BEGUN,
                    _Kind.END: TxnState.IDLE, _Kind.STATEMENT: TxnState.IDLE},
    TxnState.OPEN: {_Kind.GTID: TxnState.OPEN, _Kind.BEGIN: TxnState.BEGUN, _Kind.ROWS: TxnState.BEGUN,
                    _Kind.END: TxnState.IDLE, _Kind.STATEMENT: TxnState.IDLE},
    TxnState.BEGUN: {_Kind.GTID: TxnState.OPEN, _Kind.BEGIN: TxnState.BEGUN, _Kind.ROWS: TxnState.BEGUN,
                     _Kind.END: TxnState.IDLE, _Kind.STATEMENT: TxnState.BEGUN},
}


def _kind(event: Event) -> Optional[_Kind]:
    if isinstance(event, (GtidEvent, MariadbGtidEvent)):
        return _Kind.GTID
    if isinstance(event, RowsEvent):
        return _Kind.ROWS
    if isinstance(event, (XidEvent, XaPrepareEvent)):
        return _Kind.END
    if isinstance(event, QueryEvent):
        if event.query == "BEGIN" or event.query.startswith("XA START"):
            return _Kind.BEGIN
        return _Kind.END if event.is_commit else _Kind.STATEMENT
    return None


class TransactionTracker:
    """The transaction state of one binlog stream: feed it every event, in order."""

    def __init__(self) -> None:
        self.state = TxnState.IDLE
        #: the transaction being read (None between transactions)
        self.current: Optional[Transaction] = None

    @property
    def in_transaction(self) -> bool:
        return self.state is not TxnState.IDLE

    def reset(self) -> None:
        """A new stream, from a transaction boundary: what was open is dropped."""
        self.state, self.current = TxnState.IDLE, None

    def end_of_stream(self) -> None:
        """The stream ended: raise :class:`TransactionCutShort` when inside a transaction."""
        if self.in_transaction:
            raise TransactionCutShort("the server ended the stream inside a transaction",
                                      "resume from the last transaction boundary")

    def feed(self, file: str, event: Event, pos: Optional[int] = None,
             next_pos: Optional[int] = None) -> tuple[Result, ...]:
        """Apply one event at ``file:pos`` (default: the event's), which ends at ``next_pos``
        (default: its header's ``log_pos``); the events of a TRANSACTION_PAYLOAD are fed with
        the payload's positions. Returns what the event did, in order."""
        pos = event.pos if pos is None else pos
        next_pos = event.header.log_pos if next_pos is None else next_pos
        if isinstance(event, TransactionPayloadEvent):
            return tuple(r for inner in event.events for r in self.feed(file, inner, pos, next_pos))
        kind = _kind(event)
        if kind is None:
            return ()
        before, after = self.state, _TRANSITIONS[self.state][kind]
        results: list[Result] = []
        if kind is _Kind.GTID:
            assert isinstance(event, (GtidEvent, MariadbGtidEvent))
            standalone = isinstance(event, MariadbGtidEvent) and event.standalone
            if isinstance(event, MariadbGtidEvent) and not standalone:
                after = TxnState.BEGUN  # MariaDB writes no BEGIN: its GTID stands for it
            self.current = Transaction(event.gtid, file, pos, standalone)
            results.append(TransactionStarted(self.current))
        elif before is TxnState.IDLE and kind in (_Kind.BEGIN, _Kind.ROWS):
            self.current = Transaction(None, file, pos)
            results.append(TransactionStarted(self.current))
        elif kind is _Kind.STATEMENT:
            assert isinstance(event, QueryEvent)
            results.append(Statement(event, self.current, file, pos, standalone=after is TxnState.IDLE))
        self.state = after
        if after is TxnState.IDLE:
            results.append(TransactionCommitted(self.current, file, next_pos))
            self.current = None
        return tuple(results)


__all__ = ["Result", "Statement", "Transaction", "TransactionCommitted", "TransactionCutShort",
           "TransactionStarted", "TransactionTracker", "TxnState"]
