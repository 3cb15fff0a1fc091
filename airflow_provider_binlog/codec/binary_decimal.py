"""MySQL's binary DECIMAL encoding (``decimal2bin``): NEWDECIMAL columns and JSON decimals."""
from __future__ import annotations

import struct
from decimal import Decimal
from typing import Callable

from ._bytes import Buffer
from .errors import CorruptEventError

# size, lead_bytes, lead_limit, int_words, frac_words, words, trail_bytes, trail_digits,
# all_ones, sign_bit
_Layout = tuple[int, int, int, int, int, Callable[[Buffer, int], tuple[int, ...]], int, int, int, int]


def _corrupt(message: str) -> CorruptEventError:
    return CorruptEventError(message)

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_POW10 = tuple(10 ** i for i in range(10))
_DECIMAL_LAYOUTS: dict[tuple[int, int], _Layout] = {}


def check_decimal_shape(precision: int, scale: int) -> None:
    if not 1 <= precision <= 65 or scale > 30 or scale > precision or scale < 0:
        raise _corrupt(f"impossible decimal precision/scale ({precision},{scale})")


def _decimal_layout(precision: int, scale: int) -> _Layout:
    layout = _DECIMAL_LAYOUTS.get((precision, scale))
    if layout is None:
        check_decimal_shape(precision, scale)
        int_words, lead_digits = divmod(precision - scale, 9)
        frac_words, trail_digits = divmod(scale, 9)
        lead_bytes = _DIG2BYTES[lead_digits]
        trail_bytes = _DIG2BYTES[trail_digits]
        size = lead_bytes + 4 * (int_words + frac_words) + trail_bytes
        words = struct.Struct(f">{int_words + frac_words}I").unpack_from
        layout = (size, lead_bytes, _POW10[lead_digits], int_words, frac_words, words,
                  trail_bytes, trail_digits, (1 << (8 * size)) - 1, 0x80 << (8 * (size - 1)))
        _DECIMAL_LAYOUTS[(precision, scale)] = layout
    return layout


def decimal_binary_size(precision: int, scale: int) -> int:
    """Number of bytes MySQL's binary DECIMAL(precision, scale) occupies."""
    return _decimal_layout(precision, scale)[0]


def decode_binary_decimal(buf: Buffer, offset: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """Decode MySQL's binary DECIMAL(precision, scale) at ``buf[offset:]``.

    Returns ``(value, next_offset)``.  The format (decimal2bin): the integer
    digits, then the fraction digits, each split into groups of nine decimal
    digits stored as big-endian 4-byte words; a leading (integer) or trailing
    (fraction) group of fewer digits uses 1-4 bytes.  The top bit of the
    first byte is inverted, and a negative number has every byte inverted.
    The result is exact (no context rounding) and keeps the scale, e.g.
    ``Decimal("9.00")`` for DECIMAL(11,2).  Used for NEWDECIMAL columns
    (table-map metadata: precision byte, scale byte) as well as JSON.
    """
    (size, lead_bytes, lead_limit, int_words, frac_words, words,
     trail_bytes, trail_digits, all_ones, sign_bit) = (_DECIMAL_LAYOUTS.get((precision, scale))
                                                        or _decimal_layout(precision, scale))
    end = offset + size
    if offset < 0 or end > len(buf):
        raise CorruptEventError(f"decimal({precision},{scale}) needs {size} bytes at offset {offset}, "
                                f"only {max(len(buf) - offset, 0)} available")
    raw = int.from_bytes(buf[offset:end], "big") ^ sign_bit
    negative = raw & sign_bit  # stored sign bit was 0: negative, all bytes inverted
    if negative:
        raw ^= all_ones
    data = raw.to_bytes(size, "big")

    int_part = int.from_bytes(data[:lead_bytes], "big") if lead_bytes else 0
    if int_part >= lead_limit:
        raise CorruptEventError(f"decimal({precision},{scale}) at offset {offset} has an invalid leading digit group")
    groups = words(data, lead_bytes)
    for i in range(int_words):
        group = groups[i]
        if group > 999999999:
            raise CorruptEventError(f"decimal({precision},{scale}) at offset {offset} has an invalid digit group")
        int_part = int_part * 1000000000 + group
    if scale:
        frac_part = 0
        for i in range(int_words, int_words + frac_words):
            group = groups[i]
            if group > 999999999:
                raise CorruptEventError(f"decimal({precision},{scale}) at offset {offset} has an invalid digit group")
            frac_part = frac_part * 1000000000 + group
        if trail_bytes:
            trail = int.from_bytes(data[size - trail_bytes:], "big")
            if trail >= _POW10[trail_digits]:
                raise CorruptEventError(
                    f"decimal({precision},{scale}) at offset {offset} has an invalid trailing digit group")
            frac_part = frac_part * _POW10[trail_digits] + trail
        if negative and (int_part or frac_part):
            return Decimal(f"-{int_part}.{frac_part:0{scale}d}"), end
        return Decimal(f"{int_part}.{frac_part:0{scale}d}"), end
    if negative and int_part:
        return Decimal(-int_part), end
    return Decimal(int_part), end
