"""Typed errors raised by the codec.

Every error carries the position it refers to (``source``: a file name or a
stream label, ``offset``: the byte offset of the event start in that source)
and a ``hint`` telling the user what to do next.
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import ProviderError


def _rebuild(cls: type[BinlogError], message: str, source: str | None, offset: int | None,
             hint: str | None) -> BinlogError:
    return cls(message, source=source, offset=offset, hint=hint)


class BinlogError(ProviderError):
    """Base class for every error the codec raises (its position: ``source`` and ``offset``)."""

    default_hint = ""

    def __init__(self, message: str, *, source: str | None = None, offset: int | None = None,
                 hint: str | None = None) -> None:
        self.message = message
        self.source = source
        self.offset = offset
        self.hint = self.default_hint if hint is None else hint
        self.position = self._where()
        Exception.__init__(self, self._render())

    def _where(self) -> str | None:
        if self.source is None and self.offset is None:
            return None
        return f"{self.source or '<stream>'}" + (f" at offset {self.offset}" if self.offset is not None else "")

    def _render(self) -> str:
        where = ""
        if self.source is not None or self.offset is not None:
            where = f"{self.source or '<stream>'}"
            if self.offset is not None:
                where += f" at offset {self.offset}"
            where += ": "
        text = where + self.message
        if self.hint:
            text += f" ({self.hint})"
        return text

    def __reduce__(self) -> tuple[Callable[..., BinlogError], tuple[Any, ...]]:
        # keep the fields when the error crosses processes (the dump's decoding workers)
        return _rebuild, (type(self), self.message, self.source, self.offset, self.hint)

    def at(self, source: str | None, offset: int | None) -> "BinlogError":
        """Fill in the position if the raiser did not know it; returns self."""
        if self.source is None:
            self.source = source
        if self.offset is None:
            self.offset = offset
        self.position = self._where()
        self.args = (self._render(),)
        return self


class NotABinlogError(BinlogError):
    default_hint = "the file does not start with the binlog magic FE 62 69 6E"


class UnsupportedBinlogVersionError(BinlogError):
    default_hint = "only binlog format v4 (MySQL >= 5.0, MariaDB) is supported"


class TruncatedEventError(BinlogError):
    default_hint = "the file or stream ends inside an event; re-copy the file or resume the stream"


class CorruptEventError(BinlogError):
    default_hint = "the event is malformed; check the source file, or decode with --start-position past it"


class ChecksumMismatchError(BinlogError):
    default_hint = "the event's CRC32 does not match: the data is damaged (use --no-verify-checksum to inspect anyway)"


class UnknownEventError(BinlogError):
    default_hint = "this event type is not known and not flagged ignorable; upgrade airflow-provider-binlog"


class EncryptedBinlogError(BinlogError):
    default_hint = ("the binlog is encrypted (encrypt_binlog=ON); read it through the server "
                    "(replication stream), which decrypts it")


class UnsupportedColumnTypeError(BinlogError):
    default_hint = "this column type cannot be decoded; report it with the server version"


class MissingTableMapError(BinlogError):
    default_hint = ("a rows event refers to a table id with no preceding TABLE_MAP; start decoding at a "
                    "transaction boundary (GTID / BEGIN), not in the middle of a transaction")


class SchemaMismatchError(BinlogError):
    default_hint = ("the supplied table schema does not match the TABLE_MAP (the table changed); "
                    "refresh the schema from information_schema.COLUMNS")


class CompressionError(BinlogError):
    default_hint = "a compressed payload could not be decompressed; the event is damaged"
