"""Text forms of MariaDB's fixed-size binary column types, as the server prints them.

MariaDB logs ``UUID`` (16 bytes), ``INET6`` (16 bytes) and ``INET4`` (4 bytes) columns like
``BINARY(n)``: the binlog does not say which type a column is, only a table schema
(information_schema ``DATA_TYPE``) does. The row decoders return the bytes (zero-padded to
their full length); these functions turn them into the text ``SELECT`` returns. Checked
against MariaDB 10.11: the binlog holds a UUID's bytes in the order of its text (the
swapped order MariaDB uses internally to sort time-based UUIDs is not what is logged), and
INET6 is the address in network byte order.
"""
from __future__ import annotations

from typing import Callable

from ._bytes import Buffer


def _fixed(value: Buffer, size: int, kind: str) -> bytes:
    data = bytes(value)
    if len(data) < size:  # the binlog strips trailing zero bytes of BINARY(n)
        data += bytes(size - len(data))
    if len(data) != size:
        raise ValueError(f"{kind} value of {len(data)} bytes (expected {size})")
    return data


def uuid_text(value: Buffer) -> str:
    """``123e4567-e89b-12d3-a456-426655440000``"""
    h = _fixed(value, 16, "UUID").hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def inet4_text(value: Buffer) -> str:
    """``1.2.3.4``"""
    return ".".join(str(b) for b in _fixed(value, 4, "INET4"))


def inet6_text(value: Buffer) -> str:
    """The address as MariaDB's ``Inet6::to_string`` prints it: lower-case hex words without
    leading zeros; the longest run of zero words (the first of equal runs, even a single
    word) as ``::``; IPv4-compatible (``::1.2.3.4``, the zero run being exactly the first six
    words) and IPv4-mapped (``::ffff:1.2.3.4``) addresses end with the dotted IPv4 address."""
    data = _fixed(value, 16, "INET6")
    words = [data[i] << 8 | data[i + 1] for i in range(0, 16, 2)]
    gap_pos, gap_len = -1, 0
    run_pos = -1
    for i, w in enumerate(words + [1]):  # a non-zero sentinel closes a trailing run
        if w == 0 and run_pos < 0:
            run_pos = i
        elif w != 0 and run_pos >= 0:
            if i - run_pos > gap_len:
                gap_pos, gap_len = run_pos, i - run_pos
            run_pos = -1
    if gap_pos == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
        return ("::" if gap_len == 6 else "::ffff:") + inet4_text(data[12:])
    out = []
    i = 0
    while i < 8:
        if i == gap_pos:
            out.append("::" if i == 0 else ":")
            i += gap_len
            continue
        out.append(f"{words[i]:x}" + (":" if i < 7 else ""))
        i += 1
    return "".join(out)


#: information_schema DATA_TYPE -> the function giving the text of a column's bytes
TEXT_FORMS: dict[str, Callable[[bytes], str]] = {
    "uuid": uuid_text, "inet6": inet6_text, "inet4": inet4_text}
