"""Typed, immutable binlog events.

Every event carries its ``header`` and ``pos``: the byte offset where the event starts in its
binlog file (for events read from a replication stream: the position on the server).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional

from .constants import COLUMN_TYPE_NAMES, ROWS_STMT_END_F, event_type_name
from .gtid import Flavor

if TYPE_CHECKING:
    from .gtid import MariadbGtid


class _Absent:
    """Marker for a column that is not part of a row image (binlog_row_image=MINIMAL/NOBLOB).

    It is distinct from ``None`` (SQL NULL): an absent column was not logged at all.
    """

    __slots__ = ()
    _instance = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> tuple[type[_Absent], tuple[()]]:
        return (_Absent, ())


ABSENT = _Absent()


@dataclass(frozen=True, slots=True)
class EventHeader:
    timestamp: int
    type_code: int
    server_id: int
    event_size: int
    log_pos: int
    flags: int

    @property
    def type_name(self) -> str:
        return event_type_name(self.type_code)


@dataclass(frozen=True, slots=True)
class Event:
    header: EventHeader
    pos: int

    @property
    def type_name(self) -> str:
        return self.header.type_name

    @property
    def timestamp(self) -> int:
        return self.header.timestamp

    @property
    def next_pos(self) -> int:
        """Offset of the following event (``log_pos`` of the header)."""
        return self.header.log_pos


@dataclass(frozen=True, slots=True)
class FormatDescriptionEvent(Event):
    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: Optional[int]

    @property
    def is_mariadb(self) -> bool:
        return Flavor.of_server_version(self.server_version) is Flavor.MARIADB


@dataclass(frozen=True, slots=True)
class RotateEvent(Event):
    position: int
    next_file: str

    @property
    def artificial(self) -> bool:
        return bool(self.header.flags & 0x20) or self.header.timestamp == 0


@dataclass(frozen=True, slots=True)
class StopEvent(Event):
    pass


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """Parsed status variables of a QUERY event."""
    flags2: Optional[int] = None
    sql_mode: Optional[int] = None
    catalog: Optional[str] = None
    auto_increment_increment: Optional[int] = None
    auto_increment_offset: Optional[int] = None
    charset_client: Optional[int] = None
    collation_connection: Optional[int] = None
    collation_server: Optional[int] = None
    time_zone: Optional[str] = None
    lc_time_names: Optional[int] = None
    collation_database: Optional[int] = None
    table_map_for_update: Optional[int] = None
    invoker_user: Optional[str] = None
    invoker_host: Optional[str] = None
    updated_db_names: Optional[tuple[str, ...]] = None
    microseconds: Optional[int] = None
    explicit_defaults_for_timestamp: Optional[int] = None
    ddl_xid: Optional[int] = None
    default_collation_for_utf8mb4: Optional[int] = None
    sql_require_primary_key: Optional[int] = None
    default_table_encryption: Optional[int] = None
    hrnow: Optional[int] = None
    xid: Optional[int] = None
    unparsed: bytes = b""


@dataclass(frozen=True, slots=True)
class QueryEvent(Event):
    thread_id: int
    exec_time: int
    schema: str
    error_code: int
    status: QueryStatus
    query: str
    compressed: bool = False

    @property
    def is_begin(self) -> bool:
        return self.query == "BEGIN"

    @property
    def is_commit(self) -> bool:
        return self.query in ("COMMIT", "ROLLBACK") or self.query.startswith("XA COMMIT")


@dataclass(frozen=True, slots=True)
class XidEvent(Event):
    xid: int


@dataclass(frozen=True, slots=True)
class IntvarEvent(Event):
    kind: int  # 1 LAST_INSERT_ID, 2 INSERT_ID
    value: int


@dataclass(frozen=True, slots=True)
class RandEvent(Event):
    seed1: int
    seed2: int


@dataclass(frozen=True, slots=True)
class UserVarEvent(Event):
    name: str
    is_null: bool
    value_type: Optional[int]
    charset: Optional[int]
    value: Any
    flags: Optional[int]


@dataclass(frozen=True, slots=True)
class IncidentEvent(Event):
    incident: int
    message: str


@dataclass(frozen=True, slots=True)
class HeartbeatEvent(Event):
    log_file: str
    log_position: int
    version: int


@dataclass(frozen=True, slots=True)
class RowsQueryEvent(Event):
    query: str


@dataclass(frozen=True, slots=True)
class GtidEvent(Event):
    """MySQL GTID, ANONYMOUS_GTID and GTID_TAGGED events."""
    uuid: str
    gno: int
    tag: Optional[str]
    anonymous: bool
    commit_flag: int
    last_committed: Optional[int] = None
    sequence_number: Optional[int] = None
    immediate_commit_timestamp: Optional[int] = None
    original_commit_timestamp: Optional[int] = None
    transaction_length: Optional[int] = None
    immediate_server_version: Optional[int] = None
    original_server_version: Optional[int] = None
    commit_group_ticket: Optional[int] = None

    @property
    def gtid(self) -> Optional[str]:
        if self.anonymous:
            return None
        if self.tag:
            return f"{self.uuid}:{self.tag}:{self.gno}"
        return f"{self.uuid}:{self.gno}"


@dataclass(frozen=True, slots=True)
class PreviousGtidsEvent(Event):
    gtid_set: Any  # codec.gtid.MysqlGtidSet


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table as described by TABLE_MAP (+ optional metadata or a supplied schema)."""
    index: int
    name: str
    type: int            # type code from the TABLE_MAP (STRING resolved to ENUM/SET when so)
    meta: int            # type metadata (length bytes, fsp, precision<<8|scale, ...)
    nullable: bool = True
    unsigned: bool = False
    collation: Optional[int] = None
    codec: Optional[str] = None    # Python codec for text; None = binary (bytes)
    text: Optional[bool] = None    # True text, False binary, None unknown
    enum_values: Optional[tuple[str, ...]] = None
    set_values: Optional[tuple[str, ...]] = None
    geometry_type: Optional[int] = None
    visible: bool = True
    primary_key: bool = False
    vector_dimensions: Optional[int] = None
    data_type: Optional[str] = None  # SQL type name from a supplied schema (e.g. "json")
    hires_fsp: Optional[int] = None  # MariaDB 5.3-10.0 fractional TIME/DATETIME/TIMESTAMP

    @property
    def type_name(self) -> str:
        return COLUMN_TYPE_NAMES.get(self.type, f"TYPE{self.type}")

    @property
    def fsp(self) -> int:
        return self.meta if self.type in (17, 18, 19) else 0

    @property
    def precision(self) -> int:
        return self.meta >> 8

    @property
    def scale(self) -> int:
        return self.meta & 0xFF


@dataclass(frozen=True, slots=True)
class TableMap:
    table_id: int
    schema: str
    table: str
    columns: tuple[Column, ...]
    flags: int = 0
    primary_key: tuple[int, ...] = ()
    names_from: str = "positional"  # "metadata" | "schema" | "positional"
    optional_metadata: tuple[int, ...] = ()    # field type codes present

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True, slots=True)
class TableMapEvent(Event):
    table_map: TableMap

    @property
    def table_id(self) -> int:
        return self.table_map.table_id

    @property
    def schema(self) -> str:
        return self.table_map.schema

    @property
    def table(self) -> str:
        return self.table_map.table


@dataclass(frozen=True, slots=True)
class JsonDiffs:
    """A partial JSON update that could not be applied because the before image lacks the column."""
    diffs: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class RowsEvent(Event):
    """WRITE/UPDATE/DELETE rows (v0/v1/v2, MariaDB compressed, MySQL PARTIAL_UPDATE_ROWS).

    ``rows`` holds tuples of column values in table order; columns not in the image are
    ``ABSENT``. For updates each row is a ``(before, after)`` pair. When the table was
    excluded by the decoder's table filter, ``skipped`` is True and ``rows`` is empty.
    A decoder asked to defer rows leaves ``rows`` empty and sets ``deferred`` instead, which
    decodes them into per-column lists (see :class:`.rows.DeferredRows`).
    """
    kind: str
    table_id: int
    table_map: Optional[TableMap]
    flags: int
    rows: tuple[Any, ...]
    extra_data: bytes = b""
    skipped: bool = False
    version: int = 2
    compressed: bool = False
    partial: bool = False
    deferred: Optional[object] = None

    @property
    def schema(self) -> Optional[str]:
        return self.table_map.schema if self.table_map else None

    @property
    def table(self) -> Optional[str]:
        return self.table_map.table if self.table_map else None

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & ROWS_STMT_END_F)

    def changes(self) -> Iterator[tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]]:
        """Yield ``(before, after)`` dicts keyed by column name (None where not applicable).

        Absent columns are left out of the dict.
        """
        names = self.table_map.column_names if self.table_map else ()

        def as_dict(values: tuple[Any, ...]) -> dict[str, Any]:
            return {n: v for n, v in zip(names, values) if v is not ABSENT}

        if self.kind == "insert":
            for row in self.rows:
                yield None, as_dict(row)
        elif self.kind == "delete":
            for row in self.rows:
                yield as_dict(row), None
        else:
            for before, after in self.rows:
                yield as_dict(before), as_dict(after)


@dataclass(frozen=True, slots=True)
class TransactionPayloadEvent(Event):
    compression_type: int
    payload_size: int
    uncompressed_size: int
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class MariadbGtidEvent(Event):
    domain_id: int
    seq_no: int
    flags: int
    commit_id: Optional[int] = None
    xid: Optional[bytes] = None
    flags_extra: int = 0

    @property
    def gtid(self) -> str:
        return f"{self.domain_id}-{self.header.server_id}-{self.seq_no}"

    @property
    def standalone(self) -> bool:
        return bool(self.flags & 1)


@dataclass(frozen=True, slots=True)
class MariadbGtidListEvent(Event):
    gtids: tuple[MariadbGtid, ...]
    flags: int = 0


@dataclass(frozen=True, slots=True)
class BinlogCheckpointEvent(Event):
    binlog_file: str


@dataclass(frozen=True, slots=True)
class AnnotateRowsEvent(Event):
    query: str


@dataclass(frozen=True, slots=True)
class StartEncryptionEvent(Event):
    scheme: int
    key_version: int
    nonce: bytes


@dataclass(frozen=True, slots=True)
class XaPrepareEvent(Event):
    one_phase: bool
    format_id: int
    gtrid: bytes
    bqual: bytes


@dataclass(frozen=True, slots=True)
class LoadDataBlockEvent(Event):
    """APPEND_BLOCK / BEGIN_LOAD_QUERY / DELETE_FILE of LOAD DATA INFILE (statement format)."""
    file_id: int
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class ExecuteLoadQueryEvent(Event):
    thread_id: int
    exec_time: int
    schema: str
    error_code: int
    status: QueryStatus
    query: str
    file_id: int
    start_pos: int
    end_pos: int
    dup_handling: int


@dataclass(frozen=True, slots=True)
class RawEvent(Event):
    """An event kept undecoded: legacy LOAD events, TRANSACTION_CONTEXT, VIEW_CHANGE,
    IGNORABLE, and unknown events flagged LOG_EVENT_IGNORABLE_F."""
    body: bytes = field(repr=False, default=b"")
