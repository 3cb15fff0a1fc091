"""Pure-Python, sans-IO binlog codec: bytes in, typed events out.

No sockets, databases, Airflow or Spark here: the same code decodes a binlog file on disk and
events from a replication stream.
"""
from .decoder import EventDecoder
from .errors import (
                     BinlogError,
                     ChecksumMismatchError,
                     CompressionError,
                     CorruptEventError,
                     EncryptedBinlogError,
                     MissingTableMapError,
                     NotABinlogError,
                     SchemaMismatchError,
                     TruncatedEventError,
                     UnknownEventError,
                     UnsupportedBinlogVersionError,
                     UnsupportedColumnTypeError,
)
from .events import ABSENT, Column, Event, RowsEvent, TableMap
from .schema import ColumnSchema, TableSchema
from .stream import BinlogStreamDecoder, read_binlog_file

__all__ = [
    "ABSENT", "BinlogError", "BinlogStreamDecoder", "ChecksumMismatchError", "Column",
    "ColumnSchema", "CompressionError", "CorruptEventError", "EncryptedBinlogError", "Event",
    "EventDecoder", "MissingTableMapError", "NotABinlogError", "RowsEvent", "SchemaMismatchError",
    "TableMap", "TableSchema", "TruncatedEventError", "UnknownEventError",
    "UnsupportedBinlogVersionError", "UnsupportedColumnTypeError", "read_binlog_file",
]
