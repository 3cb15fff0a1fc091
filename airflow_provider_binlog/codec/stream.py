"""Framing: cut a binlog byte stream into events (sans-IO), and read binlog files.

:class:`BinlogStreamDecoder` follows the h11 pattern: the caller feeds bytes as they arrive
(whole, in chunks, or one at a time) and pulls complete events; the decoder never reads a file
or a socket itself. :func:`read_binlog_file` is a thin convenience on top for files on disk.
"""
from __future__ import annotations

import gzip
import os
from typing import Any, BinaryIO, Iterator, Optional, Union

from . import constants as C
from ._bytes import U32, Buffer
from .decoder import EventDecoder
from .errors import NotABinlogError, TruncatedEventError, UnsupportedBinlogVersionError
from .events import Event

_READ_CHUNK = 4 << 20


class BinlogStreamDecoder:
    """Incremental decoder for the bytes of a binlog or relay-log file.

    :param source: label used in errors (file name).
    :param expect_magic: the stream starts with the 4-byte magic ``FE 62 69 6E``.
    :param start_offset: file offset of the first byte fed (4 after the magic, or an event
        boundary when resuming; the decoder then needs the FDE fed through ``decoder``).
    Other keyword arguments configure the :class:`EventDecoder`.
    """

    def __init__(self, source: Optional[str] = None, *, expect_magic: bool = True,
                 start_offset: int = 0, decoder: Optional[EventDecoder] = None, **decoder_kwargs: Any) -> None:
        self.decoder = decoder or EventDecoder(source, **decoder_kwargs)
        self.source = source
        self._buf = bytearray()
        self._off = 0                      # read offset inside _buf
        self._base = start_offset          # stream offset of _buf[0]
        self._need_magic = expect_magic
        self._first_event = True

    @property
    def offset(self) -> int:
        """Stream offset of the next undecoded byte (the start of the next event)."""
        return self._base + self._off

    def feed(self, data: Buffer) -> None:
        if self._off and self._off >= len(self._buf) // 2:
            del self._buf[:self._off]
            self._base += self._off
            self._off = 0
        self._buf += data

    def next_event(self) -> Optional[Event]:
        """The next complete event, or None when more bytes are needed."""
        buf = self._buf
        off = self._off
        avail = len(buf) - off
        if self._need_magic:
            if avail < 4:
                if bytes(buf[off:off + avail]) != C.BINLOG_MAGIC[:avail]:
                    self._bad_magic(bytes(buf[off:off + avail]))
                return None
            if bytes(buf[off:off + 4]) != C.BINLOG_MAGIC:
                self._bad_magic(bytes(buf[off:off + 4]))
            self._off = off = off + 4
            self._need_magic = False
            avail -= 4
        if avail < C.HEADER_LEN:
            return None
        size = U32(buf, off + 9)[0]
        pos = self._base + off
        if self._first_event:
            type_code = buf[off + 4]
            if type_code == C.START_EVENT_V3:
                version = buf[off + C.HEADER_LEN] | (buf[off + C.HEADER_LEN + 1] << 8) \
                    if avail >= C.HEADER_LEN + 2 else "1 or 3"
                raise UnsupportedBinlogVersionError(
                    f"binlog format version {version} (starts with START_EVENT_V3: MySQL 3.23/4.x); "
                    "only v4 binlogs are supported", source=self.source, offset=pos)
        if size < C.HEADER_LEN:
            raise TruncatedEventError(
                f"event length {size} is smaller than the 19-byte header: the data is corrupt",
                source=self.source, offset=pos, hint="the file is damaged at this offset")
        if avail < size:
            return None
        data = bytes(buf[off:off + size])
        self._off = off + size
        event: Event = self.decoder.decode(data, pos)
        self._first_event = False
        return event

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.next_event()
            if event is None:
                return
            yield event

    def close(self) -> None:
        """Declare the end of the stream; raises if it ends inside an event."""
        left = len(self._buf) - self._off
        if self._need_magic and left == 0 and self._base + self._off == 0:
            raise NotABinlogError("empty input", source=self.source, offset=0)
        if left:
            what = "the 19-byte event header" if left < C.HEADER_LEN else \
                f"an event of {U32(self._buf, self._off + 9)[0]} bytes"
            raise TruncatedEventError(
                f"input ends {left} bytes into {what}", source=self.source, offset=self.offset)

    def skip_to(self, offset: int) -> bool:
        """Move forward to ``offset`` (an event boundary). Returns True when the bytes there are
        not buffered yet: the caller must then feed input starting at ``offset``."""
        if offset < self.offset:
            raise ValueError(f"cannot move back from {self.offset} to {offset}")
        if offset <= self._base + len(self._buf):
            self._off = offset - self._base
            return False
        self._buf = bytearray()
        self._off = 0
        self._base = offset
        return True

    def _bad_magic(self, got: bytes) -> None:
        raise NotABinlogError(f"bad magic {got.hex(' ')}", source=self.source, offset=0)


def _open(path: str) -> Union[gzip.GzipFile, BinaryIO]:
    with open(path, "rb") as probe:
        head = probe.read(2)
    if head == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def read_binlog_file(path: str | os.PathLike[str], *, start_position: Optional[int] = None,
                     stop_position: Optional[int] = None, verify_checksum: bool = True,
                     table_filter: Any = None, schemas: Any = None, decoder: Optional[EventDecoder] = None,
                     chunk_size: int = _READ_CHUNK) -> Iterator[Event]:
    """Yield the events of a binlog file (gzip-compressed files are read transparently).

    ``start_position`` must be an event boundary; the FORMAT_DESCRIPTION event at the start of
    the file is always read first (and yielded) so later events can be decoded.
    ``stop_position``: events starting at or after it are not decoded.
    """
    path = os.fspath(path)
    source = os.path.basename(path)
    dec = decoder or EventDecoder(source, verify_checksum=verify_checksum,
                                  table_filter=table_filter, schemas=schemas)
    stream = BinlogStreamDecoder(source, decoder=dec)
    with _open(path) as fh:
        eof = False

        def fill() -> bool:
            chunk = fh.read(chunk_size)
            if chunk:
                stream.feed(chunk)
            return not chunk

        if start_position is not None and start_position > 4:
            while dec.fde is None:
                event = stream.next_event()
                if event is None:
                    if eof:
                        stream.close()
                        return
                    eof = fill()
                    continue
                yield event
            if start_position < stream.offset:
                raise ValueError(f"start position {start_position} is inside the file header "
                                 f"(first event after it starts at {stream.offset})")
            if stream.skip_to(start_position):
                fh.seek(start_position)
                eof = False
        while True:
            if stop_position is not None and stream.offset >= stop_position:
                return
            event = stream.next_event()
            if event is None:
                if eof:
                    stream.close()
                    return
                eof = fill()
                continue
            yield event
