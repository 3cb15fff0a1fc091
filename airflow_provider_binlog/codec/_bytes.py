"""Precompiled struct readers and MySQL length-encoded integers."""
from __future__ import annotations

import struct
from typing import Any, Callable, Union

#: The byte buffers the readers take.
Buffer = Union[bytes, bytearray, memoryview]

_IntReader = Callable[[Buffer, int], tuple[int]]
_FloatReader = Callable[[Buffer, int], tuple[float]]

U16: _IntReader = struct.Struct("<H").unpack_from
I16: _IntReader = struct.Struct("<h").unpack_from
U32: _IntReader = struct.Struct("<I").unpack_from
I32: _IntReader = struct.Struct("<i").unpack_from
U64: _IntReader = struct.Struct("<Q").unpack_from
I64: _IntReader = struct.Struct("<q").unpack_from
F32: _FloatReader = struct.Struct("<f").unpack_from
F64: _FloatReader = struct.Struct("<d").unpack_from
HEADER = struct.Struct("<IBIIIH")


def read_packed(buf: Buffer, p: int) -> tuple[Any, int]:
    """MySQL length-encoded integer (net_field_length); 251 means NULL and returns None."""
    b = buf[p]
    if b < 251:
        return b, p + 1
    if b == 252:
        return U16(buf, p + 1)[0], p + 3
    if b == 253:
        return buf[p + 1] | (buf[p + 2] << 8) | (buf[p + 3] << 16), p + 4
    if b == 254:
        return U64(buf, p + 1)[0], p + 9
    if b == 251:
        return None, p + 1
    raise ValueError(f"invalid length-encoded integer prefix 0x{b:02x}")
